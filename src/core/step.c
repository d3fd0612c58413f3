/* The orchestration of one ECENet step (ARCHITECTURE.md "Data flow"): the
 * forward through every op, the energy, then the VJPs in reverse order for
 * dE/dpositions and dE/dε. Only vtable entries touch backend memory here.
 *
 * Saved for the backward: pair geometry, radial bases and their derivatives,
 * Y and ∂Y/∂d, A, A_emb, D, each layer's linear output (the RealSpace VJP
 * recomputes its grid from it), each MP layer's input, messages, weights and
 * atom aggregates, and the readout MLP's pre-activations. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cg.h"
#include "error.h"
#include "model.h"
#include "step.h"

#define MAX_OWNED 4096

struct ecn_engine {
    const ecenet_backend *be;
    const ecenet_model *model;
    const void *cg, *W, *V_dist;
    ecenet_linear_params *lin;
    ecenet_realspace_params *rs;
    const void **W_msg;
    ecenet_mlp_params mlp;
    void *owned[MAX_OWNED]; /* parameter buffers in backend memory */
    int n_owned;
    void *ws;               /* workspace arena, grown on demand */
    size_t ws_bytes;
    int failed;             /* an upload allocation failed */
};

const ecenet_backend *ecn_engine_backend(const ecn_engine *eng) { return eng->be; }

static const void *up(ecn_engine *eng, const double *src, size_t n)
{
    if (!src)
        return NULL;
    if (eng->n_owned == MAX_OWNED) {
        eng->failed = 1;
        return NULL;
    }
    void *p = eng->be->alloc(n * eng->be->real_size);
    if (!p) {
        eng->failed = 1;
        return NULL;
    }
    eng->be->upload(p, src, n);
    eng->owned[eng->n_owned++] = p;
    return p;
}

void ecn_engine_free(ecn_engine *eng)
{
    if (!eng)
        return;
    for (int k = 0; k < eng->n_owned; k++)
        eng->be->release(eng->owned[k]);
    if (eng->ws)
        eng->be->release(eng->ws);
    free(eng->lin);
    free(eng->rs);
    free((void *)eng->W_msg);
    free(eng);
}

ecenet_status ecn_engine_create(const ecenet_model *m, const ecenet_backend *be,
                                ecn_engine **out, char *err, size_t err_len)
{
    const ecn_config *c = &m->cfg;
    const int T = c->n_types, Q = c->Q, F = c->F, G = c->n_grid;
    const int nl = c->n_mp * c->n_layers;
    *out = NULL;
    ecn_engine *eng = calloc(1, sizeof *eng);
    if (!eng)
        return ecn_fail(err, err_len, ECENET_ERR_NOMEM, "out of memory creating the engine");
    eng->be = be;
    eng->model = m;
    eng->lin = calloc((size_t)nl, sizeof *eng->lin);
    eng->rs = calloc((size_t)nl, sizeof *eng->rs);
    eng->W_msg = calloc((size_t)(c->n_mp > 1 ? c->n_mp - 1 : 1), sizeof *eng->W_msg);
    if (!eng->lin || !eng->rs || !eng->W_msg) {
        ecn_engine_free(eng);
        return ecn_fail(err, err_len, ECENET_ERR_NOMEM, "out of memory creating the engine");
    }
    size_t ncg = ecn_cg_size(c->l_max);
    if (ncg) {
        double *cg = malloc(ncg * sizeof *cg);
        if (!cg) {
            ecn_engine_free(eng);
            return ecn_fail(err, err_len, ECENET_ERR_NOMEM, "out of memory building CG tables");
        }
        ecn_cg_build(c->l_max, cg);
        eng->cg = up(eng, cg, ncg);
        free(cg);
    }
    eng->W = up(eng, m->W, (size_t)T * T * c->n_max * c->embed_dim);
    eng->V_dist = up(eng, m->V_dist, (size_t)c->n_dist_embed * F);
    const size_t qff = (size_t)Q * F * F;
    for (int k = 0; k < nl; k++) {
        const ecenet_linear_params *l = &m->lin[k];
        ecenet_linear_params *d = &eng->lin[k];
        *d = *l;
        d->w = up(eng, l->w, qff);
        d->bias = up(eng, l->bias, (size_t)l->fout);
        d->w_src = up(eng, l->w_src, T * qff);
        d->w_tgt = up(eng, l->w_tgt, T * qff);
        if (!c->use_nonlinearity)
            continue;
        const ecenet_realspace_params *r = &m->rs[k];
        ecenet_realspace_params *s = &eng->rs[k];
        *s = *r;
        s->cos_synth = up(eng, r->cos_synth, (size_t)Q * G);
        s->sin_synth = up(eng, r->sin_synth, (size_t)Q * G);
        s->cos_analysis = up(eng, r->cos_analysis, (size_t)G * Q);
        s->sin_analysis = up(eng, r->sin_analysis, (size_t)G * Q);
        s->scale = up(eng, r->scale, (size_t)F);
        s->shift = up(eng, r->shift, (size_t)F);
        s->scale_src = up(eng, r->scale_src, (size_t)T * F);
        s->scale_tgt = up(eng, r->scale_tgt, (size_t)T * F);
        s->shift_src = up(eng, r->shift_src, (size_t)T * F);
        s->shift_tgt = up(eng, r->shift_tgt, (size_t)T * F);
    }
    for (int g = 0; g + 1 < c->n_mp; g++)
        eng->W_msg[g] = up(eng, m->W_msg[g], (size_t)T * T * c->n_dist_basis * c->B);
    eng->mlp = m->mlp;
    for (int k = 0; k < m->mlp.n_layers; k++) {
        size_t n = (size_t)m->mlp.dims[k + 1] * m->mlp.dims[k];
        eng->mlp.w[k] = up(eng, m->mlp.w[k], n);
        eng->mlp.b[k] = up(eng, m->mlp.b[k], (size_t)m->mlp.dims[k + 1]);
        eng->mlp.w_src[k] = up(eng, m->mlp.w_src[k], T * n);
        eng->mlp.w_tgt[k] = up(eng, m->mlp.w_tgt[k], T * n);
    }
    if (eng->failed) {
        ecn_engine_free(eng);
        return ecn_fail(err, err_len, ECENET_ERR_NOMEM,
                        "backend '%s': out of memory uploading the model parameters", be->name);
    }
    *out = eng;
    return ECENET_OK;
}

/* ---- workspace: every buffer of a step carved from one arena -------------- */

typedef struct {
    char *base;
    size_t off;
} carve;

static void *take(carve *c, size_t bytes)
{
    size_t o = (c->off + 63) & ~(size_t)63;
    c->off = o + bytes;
    return c->base ? c->base + o : NULL;
}

#define MAX_LAYERS 256

typedef struct {
    int32_t *edge_i, *edge_j, *nb_src, *nb_dst, *types, *tsrc, *ttgt;
    void *pos, *eshift, *nshift;
    void *dp, *rp, *fp, *dfp, *Y, *dY, *A, *Aemb;
    void *de, *re, *D;
    void *fr_de, *dfr_de, *fr_mp, *dfr_mp, *fr_out, *dfr_out;
    void *X0, *X, *Z[MAX_LAYERS], *Xmp[MAX_LAYERS], *g[MAX_LAYERS], *w[MAX_LAYERS],
        *Delta[MAX_LAYERS];
    void *H, *y, *eps;
    /* backward */
    void *Xbar, *Zbar, *X0bar, *Aemb_bar, *Abar, *Dbar, *dbar_e, *rbar_e, *dbar_p;
    void *gbar, *wbar, *Deltabar, *ybar, *frbar_out, *frbar_mp, *frbar_de, *posbar, *virial;
} ecn_ws;

typedef struct {
    ecenet_dims dm;
    int K_de, K_mp, K_out, n_hid, n_lin, n_mp_layers, grad;
} ecn_shape;

static void plan(const ecn_shape *sh, size_t rs, carve *c, ecn_ws *w)
{
    const ecenet_dims *d = &sh->dm;
    const size_t N = (size_t)d->N, E = (size_t)d->E, P = (size_t)d->P;
    const size_t XE = (size_t)d->Q * 2 * d->F, BS = (size_t)d->B * d->S;
    const size_t NA = N * d->T * d->R * d->S;
#define I32(n) ((int32_t *)take(c, (n) * sizeof(int32_t)))
#define RL(n) take(c, (n) * rs)
    memset(w, 0, sizeof *w);
    w->edge_i = I32(E); w->edge_j = I32(E); w->tsrc = I32(E); w->ttgt = I32(E);
    w->nb_src = I32(P); w->nb_dst = I32(P); w->types = I32(N);
    w->pos = RL(3 * N); w->eshift = RL(3 * E); w->nshift = RL(3 * P);
    w->dp = RL(3 * P); w->rp = RL(P); w->fp = RL(P * d->R); w->dfp = RL(P * d->R);
    w->Y = RL(P * d->S); w->dY = RL(3 * P * d->S);
    w->A = RL(NA); w->Aemb = RL(N * d->C * d->S);
    w->de = RL(3 * E); w->re = RL(E); w->D = RL(E * d->ND);
    w->fr_de = RL(E * sh->K_de); w->dfr_de = RL(E * sh->K_de);
    w->fr_mp = RL(E * sh->K_mp); w->dfr_mp = RL(E * sh->K_mp);
    w->fr_out = RL(E * sh->K_out); w->dfr_out = RL(E * sh->K_out);
    w->X = RL(E * XE);
    w->X0 = sh->K_de ? RL(E * XE) : w->X;
    for (int k = 0; k < sh->n_lin; k++)
        w->Z[k] = RL(E * XE);
    for (int k = 0; k < sh->n_mp_layers; k++) {
        w->Xmp[k] = RL(E * XE);
        w->g[k] = RL(E * BS);
        w->w[k] = RL(E * d->B);
        w->Delta[k] = RL(N * BS);
    }
    w->H = RL(E * sh->n_hid); w->y = RL(E * sh->K_out); w->eps = RL(E);
    w->Zbar = RL(E * XE); /* also the forward's RealSpace output */
    if (!sh->grad)
        return;
    w->Xbar = RL(E * XE);
    w->X0bar = sh->K_de ? RL(E * XE) : w->Xbar;
    w->Aemb_bar = RL(N * d->C * d->S); w->Abar = RL(NA); w->Dbar = RL(E * d->ND);
    w->dbar_e = RL(3 * E); w->rbar_e = RL(E); w->dbar_p = RL(3 * P);
    w->gbar = RL(E * BS); w->wbar = RL(E * d->B); w->Deltabar = RL(N * BS);
    w->ybar = RL(E * sh->K_out); w->frbar_out = RL(E * sh->K_out);
    w->frbar_mp = RL(E * sh->K_mp); w->frbar_de = RL(E * sh->K_de);
    w->posbar = RL(3 * N); w->virial = RL(9);
#undef I32
#undef RL
}

static int emit(const ecn_engine *eng, const ecn_step_out *out, const char *name,
                const void *data, size_t count)
{
    if (!out->trace)
        return 0;
    double *h = malloc((count ? count : 1) * sizeof *h);
    if (!h)
        return -1;
    eng->be->download(h, data, count);
    out->trace(out->trace_user, name, h, count);
    free(h);
    return 0;
}

ecenet_status ecn_step(ecn_engine *eng, const ecn_step_in *in, ecn_step_out *out, char *err,
                       size_t err_len)
{
    const ecenet_backend *be = eng->be;
    const ecenet_model *m = eng->model;
    const ecn_config *c = &m->cfg;
    const ecn_graph *gr = in->graph;
    ecn_shape sh;
    memset(&sh, 0, sizeof sh);
    ecenet_dims *dm = &sh.dm;
    dm->N = (int64_t)in->n_atoms;
    dm->E = gr->edges.n;
    dm->P = gr->nb.n;
    dm->T = c->n_types; dm->R = c->n_max; dm->L = c->l_max; dm->M = c->m_max;
    dm->C = c->embed_dim; dm->B = c->B; dm->F = c->F; dm->S = c->S; dm->Q = c->Q;
    dm->G = c->n_grid;
    dm->ND = 0;
    for (int l = 0; l <= c->l_max; l++)
        dm->ND += (2 * l + 1) * (2 * l + 1);
    sh.K_de = c->n_dist_embed;
    sh.K_mp = c->n_mp > 1 ? c->n_dist_basis : 0;
    sh.K_out = c->n_max_d > 0 ? c->n_max_d : 1;
    for (int k = 0; k + 1 < m->mlp.n_layers; k++)
        sh.n_hid += m->mlp.dims[k + 1];
    sh.n_lin = c->n_mp * c->n_layers;
    sh.n_mp_layers = c->n_mp - 1;
    sh.grad = out->grad || out->virial;
    if (sh.n_lin > MAX_LAYERS)
        return ecn_fail(err, err_len, ECENET_ERR_UNSUPPORTED, "more than %d layers", MAX_LAYERS);

    /* size the arena, grow it if needed, carve */
    carve cv = {NULL, 0};
    ecn_ws w;
    plan(&sh, be->real_size, &cv, &w);
    if (cv.off > eng->ws_bytes) {
        if (eng->ws)
            be->release(eng->ws);
        eng->ws_bytes = 0;
        eng->ws = be->alloc(cv.off + 64);
        if (!eng->ws)
            return ecn_fail(err, err_len, ECENET_ERR_NOMEM,
                            "backend '%s': cannot allocate %zu bytes of workspace for %lld edges",
                            be->name, cv.off, (long long)dm->E);
        eng->ws_bytes = cv.off + 64;
    }
    cv.base = eng->ws;
    cv.off = 0;
    plan(&sh, be->real_size, &cv, &w);

    const int64_t E = dm->E, P = dm->P, N = dm->N;
    const size_t XE = (size_t)dm->Q * 2 * dm->F, rsz = be->real_size;
    const ecn_pairlist *el = &gr->edges, *nl = &gr->nb;

    /* inputs; per-edge type ids are derived once per step */
    int32_t *tt = malloc((size_t)(2 * E + 1) * sizeof *tt);
    if (!tt)
        return ecn_fail(err, err_len, ECENET_ERR_NOMEM, "out of memory");
    for (int64_t e = 0; e < E; e++) {
        tt[e] = in->types[el->src[e]];
        tt[E + e] = in->types[el->dst[e]];
    }
    be->upload_idx(w.tsrc, tt, (size_t)E);
    be->upload_idx(w.ttgt, tt + E, (size_t)E);
    free(tt);
    be->upload_idx(w.edge_i, el->src, (size_t)E);
    be->upload_idx(w.edge_j, el->dst, (size_t)E);
    be->upload_idx(w.nb_src, nl->src, (size_t)P);
    be->upload_idx(w.nb_dst, nl->dst, (size_t)P);
    be->upload_idx(w.types, in->types, (size_t)N);
    be->upload(w.pos, in->pos, 3 * (size_t)N);
    be->upload(w.eshift, el->shift, 3 * (size_t)E);
    be->upload(w.nshift, nl->shift, 3 * (size_t)P);

    int terr = 0;
    char name[64];
    /* ACE environment (§5, §6) */
    be->pair_geom_fwd(P, w.nb_src, w.nb_dst, w.nshift, w.pos, w.dp, w.rp);
    be->radial_fwd(P, w.rp, c->r_cut_neighbor, c->n_max, c->cutoff_type, w.fp, w.dfp);
    be->sph_fwd(P, c->l_max, w.dp, w.Y, sh.grad ? w.dY : NULL);
    terr |= emit(eng, out, "nb_radial", w.fp, (size_t)(P * dm->R));
    terr |= emit(eng, out, "nb_Y", w.Y, (size_t)(P * dm->S));
    be->ace_fwd(dm, w.nb_src, w.nb_dst, w.types, w.fp, w.Y, w.A);
    terr |= emit(eng, out, "ace_A", w.A, (size_t)(N * dm->T * dm->R * dm->S));
    be->embed_fwd(dm, w.types, eng->W, w.A, w.Aemb);
    terr |= emit(eng, out, "A_emb", w.Aemb, (size_t)(N * dm->C * dm->S));

    /* bond frame (§7, §8, §9) */
    be->pair_geom_fwd(E, w.edge_i, w.edge_j, w.eshift, w.pos, w.de, w.re);
    be->wigner_fwd(E, c->l_max, eng->cg, w.de, w.re, w.D);
    terr |= emit(eng, out, "D", w.D, (size_t)(E * dm->ND));
    be->edge_frame_fwd(dm, w.edge_i, w.edge_j, w.Aemb, w.D, w.X0);
    if (sh.K_de) {
        be->radial_fwd(E, w.re, c->r_cut_edge, sh.K_de, c->cutoff_type, w.fr_de, w.dfr_de);
        be->dist_embed_fwd(dm, sh.K_de, w.fr_de, eng->V_dist, w.X0, w.X);
    }
    terr |= emit(eng, out, "edge_frame", w.X, E * XE);
    if (sh.K_mp)
        be->radial_fwd(E, w.re, c->r_cut_edge, sh.K_mp, c->cutoff_type, w.fr_mp, w.dfr_mp);

    /* stages of residual layers with message passing between them (§10-§13) */
    for (int g = 0; g < c->n_mp; g++) {
        for (int k = 0; k < c->n_layers; k++) {
            const int li = g * c->n_layers + k;
            be->linear_fwd(E, &eng->lin[li], w.tsrc, w.ttgt, w.X, w.Z[li]);
            snprintf(name, sizeof name, "stage%d.layer%d.linear", g, k);
            terr |= emit(eng, out, name, w.Z[li], E * XE);
            if (c->use_nonlinearity) {
                be->realspace_fwd(E, &eng->rs[li], w.tsrc, w.ttgt, w.Z[li], w.Zbar);
                be->add((int64_t)(E * XE), w.Zbar, w.X);
            } else {
                be->add((int64_t)(E * XE), w.Z[li], w.X);
            }
            snprintf(name, sizeof name, "stage%d.layer%d", g, k);
            terr |= emit(eng, out, name, w.X, E * XE);
        }
        if (g + 1 == c->n_mp)
            break;
        be->zero(w.Xmp[g], E * XE * rsz);
        be->add((int64_t)(E * XE), w.X, w.Xmp[g]);
        be->mp_pack_unrotate_fwd(dm, w.Xmp[g], w.D, w.g[g]);
        be->mp_weight_fwd(dm, sh.K_mp, w.tsrc, w.ttgt, w.fr_mp, eng->W_msg[g], w.w[g]);
        be->mp_scatter_fwd(dm, w.edge_j, w.g[g], w.w[g], w.Delta[g]);
        be->mp_rotate_unpack_fwd(dm, w.edge_i, w.Delta[g], w.D, w.X);
        snprintf(name, sizeof name, "mp%d", g);
        terr |= emit(eng, out, name, w.X, E * XE);
    }

    /* readout and energy (§14) */
    be->radial_fwd(E, w.re, c->r_cut_edge, c->n_max_d, c->cutoff_type, w.fr_out, w.dfr_out);
    be->mlp_fwd(dm, &eng->mlp, w.tsrc, w.ttgt, w.X, w.H, w.y);
    be->energy_fwd(E, sh.K_out, w.y, w.fr_out, w.eps);
    terr |= emit(eng, out, "per_edge_energy", w.eps, (size_t)E);
    double energy = be->sum(E, w.eps);
    for (int64_t i = 0; i < N; i++)
        energy += m->atomic_energy[in->types[i]];
    if (terr)
        return ecn_fail(err, err_len, ECENET_ERR_NOMEM, "out of memory tracing the step");

    if (sh.grad) {
        /* backward: every VJP accumulates, so zero the gradient buffers once */
        be->zero(w.Xbar, E * XE * rsz);
        if (sh.K_de)
            be->zero(w.X0bar, E * XE * rsz);
        be->zero(w.Aemb_bar, (size_t)N * dm->C * dm->S * rsz);
        be->zero(w.Abar, (size_t)N * dm->T * dm->R * dm->S * rsz);
        be->zero(w.Dbar, (size_t)E * dm->ND * rsz);
        be->zero(w.dbar_e, 3 * (size_t)E * rsz);
        be->zero(w.rbar_e, (size_t)E * rsz);
        be->zero(w.dbar_p, 3 * (size_t)P * rsz);
        be->zero(w.ybar, (size_t)E * sh.K_out * rsz);
        be->zero(w.frbar_out, (size_t)E * sh.K_out * rsz);
        be->zero(w.frbar_mp, (size_t)E * sh.K_mp * rsz);
        be->zero(w.frbar_de, (size_t)E * sh.K_de * rsz);
        be->zero(w.posbar, 3 * (size_t)N * rsz);
        be->zero(w.virial, 9 * rsz);

        be->energy_vjp(E, sh.K_out, w.y, w.fr_out, w.ybar, w.frbar_out);
        be->mlp_vjp(dm, &eng->mlp, w.tsrc, w.ttgt, w.H, w.ybar, w.Xbar);
        be->radial_vjp(E, c->n_max_d, w.dfr_out, w.frbar_out, w.rbar_e);
        for (int g = c->n_mp - 1; g >= 0; g--) {
            for (int k = c->n_layers - 1; k >= 0; k--) {
                const int li = g * c->n_layers + k;
                be->zero(w.Zbar, E * XE * rsz);
                if (c->use_nonlinearity)
                    be->realspace_vjp(E, &eng->rs[li], w.tsrc, w.ttgt, w.Z[li], w.Xbar, w.Zbar);
                else
                    be->add((int64_t)(E * XE), w.Xbar, w.Zbar);
                be->linear_vjp(E, &eng->lin[li], w.tsrc, w.ttgt, w.Zbar, w.Xbar);
            }
            if (g == 0)
                break;
            const int q = g - 1; /* the MP layer between stage g-1 and stage g */
            be->zero(w.Deltabar, (size_t)N * dm->B * dm->S * rsz);
            be->zero(w.gbar, (size_t)E * dm->B * dm->S * rsz);
            be->zero(w.wbar, (size_t)E * dm->B * rsz);
            be->mp_rotate_unpack_vjp(dm, w.edge_i, w.Delta[q], w.D, w.Xbar, w.Deltabar, w.Dbar);
            be->mp_scatter_vjp(dm, w.edge_j, w.g[q], w.w[q], w.Deltabar, w.gbar, w.wbar);
            be->mp_weight_vjp(dm, sh.K_mp, w.tsrc, w.ttgt, eng->W_msg[q], w.wbar, w.frbar_mp);
            be->mp_pack_unrotate_vjp(dm, w.Xmp[q], w.D, w.gbar, w.Xbar, w.Dbar);
        }
        if (sh.K_mp)
            be->radial_vjp(E, sh.K_mp, w.dfr_mp, w.frbar_mp, w.rbar_e);
        if (sh.K_de) {
            be->dist_embed_vjp(dm, sh.K_de, w.fr_de, eng->V_dist, w.X0, w.Xbar, w.X0bar,
                               w.frbar_de);
            be->radial_vjp(E, sh.K_de, w.dfr_de, w.frbar_de, w.rbar_e);
        }
        be->edge_frame_vjp(dm, w.edge_i, w.edge_j, w.Aemb, w.D, w.X0bar, w.Aemb_bar, w.Dbar);
        be->wigner_vjp(E, c->l_max, eng->cg, w.de, w.re, w.D, w.Dbar, w.dbar_e);
        be->dist_vjp(E, w.de, w.re, w.rbar_e, w.dbar_e);
        be->embed_vjp(dm, w.types, eng->W, w.Aemb_bar, w.Abar);
        be->ace_vjp(dm, w.nb_src, w.nb_dst, w.types, w.fp, w.dfp, w.Y, w.dY, w.dp, w.rp,
                    w.Abar, w.dbar_p);
        be->pair_geom_vjp(E, w.edge_i, w.edge_j, w.de, w.dbar_e, w.posbar, w.virial);
        be->pair_geom_vjp(P, w.nb_src, w.nb_dst, w.dp, w.dbar_p, w.posbar, w.virial);
        if (out->grad)
            be->download(out->grad, w.posbar, 3 * (size_t)N);
        if (out->virial)
            be->download(out->virial, w.virial, 9);
    }
    if (out->per_edge)
        be->download(out->per_edge, w.eps, (size_t)E);
    be->sync();
    out->energy = energy;
    return ECENET_OK;
}
