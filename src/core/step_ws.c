/* The workspace of a step (step_ws.h): every buffer of it carved from one
 * arena, in an order the uploads rely on, and recorded for the profiler. */
#include <stdlib.h>
#include <string.h>

#include "step_ws.h"

static void prof_buffer(ecn_profile *p, const char *op, size_t bytes, int saved)
{
    if (p->n_buf == p->cap_buf) {
        size_t cap = p->cap_buf ? 2 * p->cap_buf : 256;
        ecn_prof_buffer *b = realloc(p->buf, cap * sizeof *b);
        if (!b) {
            p->oom = 1;
            return;
        }
        p->buf = b;
        p->cap_buf = cap;
    }
    p->buf[p->n_buf].op = op;
    p->buf[p->n_buf].bytes = bytes;
    p->buf[p->n_buf].saved = saved;
    p->n_buf++;
}

/* A 64-byte aligned buffer; `op` produces it, `saved`: kept for the backward. */
static void *take(ecn_carve *c, size_t bytes, const char *op, int saved)
{
    size_t o = (c->off + 63) & ~(size_t)63;
    if (c->base && c->prof)
        prof_buffer(c->prof, op, bytes + (o - c->off), saved);
    c->off = o + bytes;
    return c->base ? c->base + o : NULL;
}

void ecn_profile_reset(ecn_profile *p)
{
    p->n_ev = p->n_buf = 0;
    p->workspace_bytes = 0;
    p->fwd_seconds = p->total_seconds = 0.0;
    p->oom = 0;
}

void ecn_profile_free(ecn_profile *p)
{
    free(p->ev);
    free(p->buf);
    memset(p, 0, sizeof *p);
}

void ecn_ws_plan(const ecn_shape *sh, const ecn_config *c, size_t rs, ecn_carve *cv, ecn_ws *w)
{
    const ecenet_dims *d = &sh->dm;
    const size_t N = (size_t)d->N, E = (size_t)d->E, P = (size_t)d->P, F = (size_t)d->F;
    const size_t XE = (size_t)d->Q * 2 * F, XW = (size_t)d->Q * 2 * sh->Wn;
    const size_t BS = (size_t)d->B * d->S, NA = N * d->T * d->R * d->S;
    const size_t K = (size_t)c->n_scores;
    const int sep0 = sh->K_de || c->element_film; /* edge frame output kept apart from X */
#define I32(n, op) ((int32_t *)take(cv, (n) * sizeof(int32_t), op, 1))
#define RL(n, op, saved) take(cv, (n)*rs, op, saved)
    memset(w, 0, sizeof *w);
    /* the index arrays first and together, then positions and shifts: the
     * step uploads each of the two regions in one copy (keep this order) */
    w->edge_i = I32(E, "inputs");
    w->edge_j = I32(E, "inputs");
    w->tsrc = I32(E, "inputs");
    w->ttgt = I32(E, "inputs");
    w->nb_src = I32(P, "inputs");
    w->nb_dst = I32(P, "inputs");
    w->types = I32(N, "inputs");
    for (int k = 0; k < 4; k++) {
        w->csr[2 * k] = I32(N + 1, "inputs");
        w->csr[2 * k + 1] = I32(k < 2 ? E : P, "inputs");
    }
    w->pos = RL(3 * N, "inputs", 1);
    w->eshift = RL(3 * E, "inputs", 1);
    w->nshift = RL(3 * P, "inputs", 1);
    w->dp = RL(3 * P, "pair_geom_fwd", 1);
    w->rp = RL(P, "pair_geom_fwd", 1);
    w->fp = RL(P * d->R, "radial_fwd", 1);
    w->dfp = RL(P * d->R, "radial_fwd", 1);
    w->Y = RL(P * d->S, "sph_fwd", 1);
    w->dY = RL(3 * P * d->S, "sph_fwd", 1);
    w->A = RL(NA, "ace_fwd", 0);
    w->Aemb = RL(N * d->C * d->S, "embed_fwd", 1);
    w->de = RL(3 * E, "pair_geom_fwd", 1);
    w->re = RL(E, "pair_geom_fwd", 1);
    w->D = RL(E * d->ND, "wigner_fwd", 1);
    w->fc = RL(E, "radial_fwd", 1);
    w->dfc = RL(E, "radial_fwd", 1);
    w->fr_de = RL(E * sh->K_de, "radial_fwd", 1);
    w->dfr_de = RL(E * sh->K_de, "radial_fwd", 1);
    w->fr_mp = RL(E * sh->K_mp, "radial_fwd", 1);
    w->dfr_mp = RL(E * sh->K_mp, "radial_fwd", 1);
    w->fr_out = RL(E * sh->K_out, "radial_fwd", 1);
    w->dfr_out = RL(E * sh->K_out, "radial_fwd", 1);
    w->fr_film = RL(E * sh->K_film, "radial_fwd", 1);
    w->dfr_film = RL(E * sh->K_film, "radial_fwd", 1);
    w->H_film = RL(E * sh->n_hid_film, "film_fwd", 1);
    w->gamma = RL(c->element_film ? E * F : 0, "film_fwd", 1);
    w->X =
        RL(E * XE, sep0 ? (sh->K_de ? "dist_embed_fwd" : "chan_scale_fwd") : "edge_frame_fwd", 0);
    w->X0 = sep0 ? RL(E * XE, "edge_frame_fwd", 1) : w->X;
    const size_t Zw = c->bottleneck_dim ? XW : XE;
    if (!sh->lm) {
        /* the backward reads every layer's Z; a step without one reuses one buffer */
        for (int k = 0; k < sh->n_lin; k++)
            w->Z[k] = sh->grad || k == 0 ? RL(E * Zw, "linear_fwd", 1) : w->Z[0];
    } else {
        const size_t C = (size_t)sh->chunk;
        for (int k = 0; k < c->n_layers; k++)
            w->Z[k] = RL(C * Zw, "linear_fwd", 0);
        w->Xc = RL(C * XE, "copy", 0);
        w->Sin[0] = w->X;
        for (int g = 1; g < c->n_mp; g++)
            w->Sin[g] = RL(E * XE, "copy", 1);
    }
    for (int k = 0; k < sh->n_mp_layers; k++) {
        /* attention: the message; public: the layer's input, for its backward only */
        if (sh->attn || sh->grad)
            w->Xmp[k] = RL(E * XE, sh->attn ? "linear_fwd" : "mp_pack_unrotate_fwd", 1);
        w->g[k] = RL(E * BS, "mp_pack_unrotate_fwd", 1);
        w->w[k] = RL(E * F, sh->attn ? "mp_attn_weight_fwd" : "mp_weight_fwd", 1);
        w->Delta[k] = RL(N * BS, "mp_scatter_fwd", 1);
        if (sh->attn) {
            w->T1[k] = RL(E * XW, "linear_fwd", 1);
            w->R1[k] = RL(E * XW, "linear_fwd", 1);
            w->sc[k] = RL(E * K, "mlp_fwd", 1);
            w->a[k] = RL(E * K, "mp_attn_weight_fwd", 1);
        }
    }
    w->attn_tmp = RL(sh->attn ? 4 * N * K : 0, "mp_attn_weight_fwd", 0);
    w->H = RL(E * sh->n_hid, "mlp_fwd", 1);
    w->y = RL(E * sh->K_out, "mlp_fwd", 1);
    w->eps = RL(E, "energy_fwd", 0);
    /* scratch: only the layers use it, unless attention MP does (over all edges) */
    const size_t ES = sh->lm && !sh->attn ? (size_t)sh->chunk : E;
    w->tF1 = RL(ES * XE, "scratch", 0);
    w->tF2 = RL(sh->attn ? E * XE : 0, "scratch", 0);
    w->tF3 = RL(sh->attn ? E * XE : 0, "scratch", 0);
    w->tW1 = RL(ES * XW, "scratch", 0);
    w->tW2 = RL(ES * XW, "scratch", 0);
    if (!sh->grad)
        return;
    w->Xbar = RL(E * XE, "backward", 0);
    w->X0bar = sep0 ? RL(E * XE, "backward", 0) : w->Xbar;
    w->gamma_bar = RL(c->element_film ? E * F : 0, "backward", 0);
    w->Aemb_bar = RL(N * d->C * d->S, "backward", 0);
    w->Abar = RL(NA, "backward", 0);
    w->Dbar = RL(E * d->ND, "backward", 0);
    w->dbar_e = RL(3 * E, "backward", 0);
    w->rbar_e = RL(E, "backward", 0);
    w->dbar_p = RL(3 * P, "backward", 0);
    w->gbar = RL(sh->mp_alias ? 0 : E * BS, "backward", 0);
    w->wbar = RL(sh->mp_alias ? 0 : E * F, "backward", 0);
    w->Deltabar = RL(N * BS, "backward", 0);
    w->sbar = RL(E * K, "backward", 0);
    w->fcbar = RL(E, "backward", 0);
    w->ybar = RL(E * sh->K_out, "backward", 0);
    w->frbar_out = RL(E * sh->K_out, "backward", 0);
    w->frbar_mp = RL(E * sh->K_mp, "backward", 0);
    w->frbar_de = RL(E * sh->K_de, "backward", 0);
    w->frbar_film = RL(E * sh->K_film, "backward", 0);
    w->posbar = RL(3 * N, "backward", 0);
    w->virial = RL(9, "backward", 0);
#undef I32
#undef RL
}
