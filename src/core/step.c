/* The orchestration of one ECENet step (ARCHITECTURE.md "Data flow"): the
 * forward through every op, the energy, then the VJPs in reverse order for
 * dE/dpositions and dE/dε. Only vtable entries touch backend memory here.
 *
 * Saved for the backward: pair geometry, radial bases and their derivatives,
 * Y and ∂Y/∂d, A, A_emb, D, each layer's (first) linear output (the RealSpace
 * VJP recomputes its grid from it), each MP layer's message/input, messages g,
 * weights w, aggregates Δ (and the research layer's trunk and receiver
 * bottleneck inputs, scores and attention weights), the readout MLP's
 * pre-activations. Everything lives in one arena per engine. */
#include "backend.h"
#include "engine.h"
#include "error.h"
#include "step_ws.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Group n entries by atom (stable: increasing entry order within an atom). */
static void csr_build(int64_t N, int64_t n, const int32_t *atom, int32_t *ptr, int32_t *idx)
{
    for (int64_t a = 0; a <= N; a++)
        ptr[a] = 0;
    for (int64_t k = 0; k < n; k++)
        ptr[atom[k] + 1]++;
    for (int64_t a = 0; a < N; a++)
        ptr[a + 1] += ptr[a];
    for (int64_t k = 0; k < n; k++)
        idx[ptr[atom[k]]++] = (int32_t)k;
    for (int64_t a = N; a > 0; a--) /* ptr[a] advanced to the end of a: shift back */
        ptr[a] = ptr[a - 1];
    ptr[0] = 0;
}

static void copy_i32(int32_t *dst, const int32_t *src, int64_t n)
{
    if (n > 0)
        memcpy(dst, src, (size_t)n * sizeof *dst);
}

/* ---- the pieces of a step --------------------------------------------------- */

typedef struct {
    const ecn_engine *eng;
    const ecenet_backend *be;
    const ecn_config *c;
    const ecn_shape *sh;
    const ecenet_dims *dm;
    ecn_ws *w;
    ecn_step_out *out;
    size_t XE, XW, rsz;
    int terr;
    ecn_profile *prof; /* or NULL */
    char sect[48];     /* current section, for profiling */
    int bwd;           /* in the backward */
    int lm;            /* low-memory mode */
    int64_t chunk;     /* its edges per chunk */
    int64_t sc;        /* default mode: edges per chunk of a stage (stage_fwd, stage_bwd) */
} ecn_run;

/* With an NVTX-capable backend every op is also a named range ("section: op"),
 * so Nsight Systems timelines carry the profiler's names. */
static void range_push(ecn_run *r, const char *op)
{
    if (!r->be->range_push)
        return;
    char name[96];
    snprintf(name, sizeof name, "%s: %s", r->sect, op);
    r->be->range_push(name);
}

static double op_begin(ecn_run *r)
{
    if (!r->prof)
        return 0.0;
    r->be->sync();
    return r->be->now();
}

static void op_record(ecn_run *r, const char *op, double t);

static void op_end(ecn_run *r, const char *op, double t0)
{
    if (!r->prof)
        return;
    r->be->sync();
    op_record(r, op, r->be->now() - t0);
}

/* An event of t seconds for op in the current section. */
static void op_record(ecn_run *r, const char *op, double t)
{
    ecn_profile *p = r->prof;
    if (!p)
        return;
    if (p->n_ev == p->cap_ev) {
        size_t cap = p->cap_ev ? 2 * p->cap_ev : 512;
        ecn_prof_event *ev = realloc(p->ev, cap * sizeof *ev);
        if (!ev) {
            p->oom = 1;
            return;
        }
        p->ev = ev;
        p->cap_ev = cap;
    }
    ecn_prof_event *e = &p->ev[p->n_ev++];
    snprintf(e->section, sizeof e->section, "%s", r->sect);
    e->op = op;
    e->vjp = r->bwd;
    e->seconds = t;
}

/* Every backend call of the step goes through OP: timed when profiling. */
#define OP(r, name, call)                                                                          \
    do {                                                                                           \
        double t0_ = op_begin(r);                                                                  \
        range_push(r, name);                                                                       \
        call;                                                                                      \
        if ((r)->be->range_pop)                                                                    \
            (r)->be->range_pop();                                                                  \
        op_end(r, name, t0_);                                                                      \
    } while (0)

static void section(ecn_run *r, const char *fmt, int a, int b)
{
    snprintf(r->sect, sizeof r->sect, fmt, a, b);
}

static void emit(ecn_run *r, const char *name, const void *data, size_t count)
{
    if (!r->out->trace)
        return;
    double *h = malloc((count ? count : 1) * sizeof *h);
    if (!h) {
        r->terr = 1;
        return;
    }
    r->be->download(h, data, count);
    r->out->trace(r->out->trace_user, name, h, count);
    free(h);
}

static void zero(ecn_run *r, void *p, size_t count)
{
    OP(r, "zero", r->be->zero(p, count * r->rsz));
}

/* The residual layers act on each edge independently, so every layer op can
 * run on a range of edges: `lrange` holds the range's pointers (the whole
 * step, or one chunk of the low-memory mode). */
typedef struct {
    int64_t n;               /* edges in the range */
    const int32_t *ts, *tt;  /* their source / target types */
    void *X, *Xbar;          /* features and their gradient */
    void *Z;                 /* the layer's (first) linear output */
    void *tF1, *tW1, *tW2;   /* scratch at width F, at the narrow width */
} lrange;

static void *at(const ecn_run *r, void *base, int64_t e0, size_t per_edge)
{
    return base ? (char *)base + (size_t)e0 * per_edge * r->rsz : NULL;
}

/* Edges [e0, e0+n) of the whole step for layer li: the default mode keeps
 * every Z for the backward, at its place; a step without one reuses one Z
 * buffer, from its start for every range (a chunk's Z can then stay in
 * cache), as the scratch buffers. */
static lrange lr_part(const ecn_run *r, int li, int64_t e0, int64_t n)
{
    const ecn_ws *w = r->w;
    const size_t zw = r->c->bottleneck_dim ? r->XW : r->XE;
    void *Z = r->sh->grad ? at(r, w->Z[li], e0, zw) : w->Z[li];
    lrange q = {n, w->tsrc + e0, w->ttgt + e0, at(r, w->X, e0, r->XE), at(r, w->Xbar, e0, r->XE),
                Z, w->tF1, w->tW1, w->tW2};
    return q;
}

static void trace_layer(ecn_run *r, int li, const char *what, const void *data, size_t width)
{
    char name[64];
    const int g = li / r->c->n_layers, k = li % r->c->n_layers;
    snprintf(name, sizeof name, "stage%d.layer%d%s", g, k, what);
    emit(r, name, data, (size_t)r->dm->E * width);
}

/* X += layer(X): public X + RealSpace(Linear(X)); bottleneck X + up(RealSpace(down(X))).
 * z_only: compute Z and stop (the recompute of a stage's last layer needs no more). */
static void layer_fwd(ecn_run *r, int li, const lrange *q, int z_only)
{
    const ecn_engine *eng = r->eng;
    const ecenet_backend *be = r->be;
    const int64_t n = q->n;
    if (!z_only && be->layer_fwd && !eng->no_fused && !r->c->bottleneck_dim &&
        r->c->use_nonlinearity) {
        /* fused: linear -> RealSpace -> residual per tile */
        OP(r, "layer_fwd", be->layer_fwd(n, &eng->lin[li], &eng->rs[li], q->ts, q->tt, q->X, q->Z));
        trace_layer(r, li, "", q->X, r->XE);
        return;
    }
    OP(r, "linear_fwd", be->linear_fwd(n, &eng->lin[li], q->ts, q->tt, q->X, q->Z));
    if (z_only)
        return;
    if (r->c->bottleneck_dim) {
        trace_layer(r, li, ".linear_down", q->Z, r->XW);
        OP(r, "realspace_fwd", be->realspace_fwd(n, &eng->rs[li], q->ts, q->tt, q->Z, q->tW1));
        OP(r, "linear_fwd", be->linear_fwd(n, &eng->lin_up[li], q->ts, q->tt, q->tW1, q->tF1));
        trace_layer(r, li, ".linear_up", q->tF1, r->XE);
        OP(r, "add", be->add((int64_t)(n * r->XE), q->tF1, q->X));
    } else {
        trace_layer(r, li, ".linear", q->Z, r->XE);
        if (r->c->use_nonlinearity) {
            OP(r, "realspace_fwd", be->realspace_fwd(n, &eng->rs[li], q->ts, q->tt, q->Z, q->tF1));
            OP(r, "add", be->add((int64_t)(n * r->XE), q->tF1, q->X));
        } else {
            OP(r, "add", be->add((int64_t)(n * r->XE), q->Z, q->X));
        }
    }
    trace_layer(r, li, "", q->X, r->XE);
}

static void layer_bwd(ecn_run *r, int li, const lrange *q)
{
    const ecn_engine *eng = r->eng;
    const ecenet_backend *be = r->be;
    const int64_t n = q->n;
    if (r->c->bottleneck_dim) {
        zero(r, q->tW1, n * r->XW);
        OP(r, "linear_vjp", be->linear_vjp(n, &eng->lin_up[li], q->ts, q->tt, q->Xbar, q->tW1));
        zero(r, q->tW2, n * r->XW);
        OP(r, "realspace_vjp",
           be->realspace_vjp(n, &eng->rs[li], q->ts, q->tt, q->Z, q->tW1, q->tW2));
        OP(r, "linear_vjp", be->linear_vjp(n, &eng->lin[li], q->ts, q->tt, q->tW2, q->Xbar));
        return;
    }
    if (be->layer_vjp && !eng->no_fused && r->c->use_nonlinearity) {
        OP(r, "layer_vjp",
           be->layer_vjp(n, &eng->lin[li], &eng->rs[li], q->ts, q->tt, q->Z, q->Xbar, q->tF1));
        return;
    }
    zero(r, q->tF1, n * r->XE);
    if (r->c->use_nonlinearity)
        OP(r, "realspace_vjp",
           be->realspace_vjp(n, &eng->rs[li], q->ts, q->tt, q->Z, q->Xbar, q->tF1));
    else
        OP(r, "add", be->add((int64_t)(n * r->XE), q->Xbar, q->tF1));
    OP(r, "linear_vjp", be->linear_vjp(n, &eng->lin[li], q->ts, q->tt, q->tF1, q->Xbar));
}

/* Readout MLP and per-edge radial energy weights for a range of edges. */
static void readout_fwd(ecn_run *r, int64_t e0, int64_t n, void *X)
{
    const ecn_ws *w = r->w;
    const ecn_config *c = r->c;
    const size_t K = (size_t)r->sh->K_out;
    ecenet_dims dn = *r->dm; /* the MLP reads only E and the feature sizes */
    dn.E = n;
    OP(r, "radial_fwd",
       r->be->radial_fwd(n, at(r, w->re, e0, 1), c->r_cut_edge, c->n_max_d, c->cutoff_type,
                         at(r, w->fr_out, e0, K), at(r, w->dfr_out, e0, K)));
    OP(r, "mlp_fwd",
       r->be->mlp_fwd(&dn, &r->eng->mlp, w->tsrc + e0, w->ttgt + e0, X,
                      at(r, w->H, e0, (size_t)r->sh->n_hid), at(r, w->y, e0, (size_t)r->sh->K_out)));
}

/* ---- stages: default mode and low-memory mode ---------------------------------------------

 * Default: each stage runs its layers in place on X over all edges and keeps
 * every layer's Z for the backward (n_layers·n_mp tensors of E·2Q·F).
 *
 * Low memory: Z is never kept. A stage's input Sin[g] is kept (the
 * post-frame X for stage 0, the MP output for the others). A stage copies it
 * into the next stage's input buffer once and runs its layers there in place,
 * one edge chunk at a time (the MP layer then acts in place on the result);
 * the last stage runs each chunk in a chunk buffer Xc and feeds the readout,
 * so the final features never exist for all edges at once. The backward recomputes each chunk's Z
 * from Sin[g] and runs the layer VJPs on it right away. */
/* Low memory: copy the chunk [e0, e0+n) of stage g's input into Xc and
 * return the chunk's layer range (Z and Xbar set by the caller). */
static lrange chunk_load(ecn_run *r, int g, int64_t e0, int64_t n)
{
    ecn_ws *w = r->w;
    section(r, "stage%d", g, 0);
    OP(r, "copy", r->be->copy(w->Xc, at(r, w->Sin[g], e0, r->XE), (size_t)n * r->XE * r->rsz));
    lrange q = {n, w->tsrc + e0, w->ttgt + e0, w->Xc, NULL, NULL, w->tF1, w->tW1, w->tW2};
    return q;
}

/* Default mode with r->sc > 0 (ECENET_STAGE_CHUNK, else the backend's
 * stage_chunk: cuda fp64 by default): a stage runs all its layers (and the
 * readout) on one chunk of edges before the next, so that more of what a
 * kernel reads was just written by the one before and is still in the
 * GPU's L2 cache. The same ops on the same edges: ref gives the same bits;
 * GEMMs over fewer rows may round differently. */
static void stage_fwd(ecn_run *r, int g)
{
    ecn_ws *w = r->w;
    const int nl = r->c->n_layers, last = g + 1 == r->c->n_mp;
    if (!r->lm) {
        const int64_t E = r->dm->E, C = r->sc > 0 && r->sc < E ? r->sc : E;
        for (int64_t e0 = 0;; e0 += C) { /* once with E = 0 */
            const int64_t n = E - e0 < C ? E - e0 : C;
            for (int k = 0; k < nl; k++) {
                section(r, "stage%d.layer%d", g, k);
                lrange q = lr_part(r, g * nl + k, e0, n);
                layer_fwd(r, g * nl + k, &q, 0);
            }
            if (last) {
                section(r, "readout", 0, 0);
                readout_fwd(r, e0, n, at(r, w->X, e0, r->XE));
            }
            if (e0 + C >= E)
                break;
        }
        return;
    }
    const int64_t E = r->dm->E, C = r->chunk;
    if (!last) { /* the output is the next stage's input: copy once, run in place there */
        section(r, "stage%d", g, 0);
        OP(r, "copy", r->be->copy(w->Sin[g + 1], w->Sin[g], (size_t)E * r->XE * r->rsz));
    }
    for (int64_t e0 = 0; e0 < E; e0 += C) {
        const int64_t n = E - e0 < C ? E - e0 : C;
        lrange q;
        if (last) {
            q = chunk_load(r, g, e0, n);
        } else {
            lrange in_place = {n, w->tsrc + e0, w->ttgt + e0, at(r, w->Sin[g + 1], e0, r->XE),
                               NULL, NULL, w->tF1, w->tW1, w->tW2};
            q = in_place;
        }
        q.Z = w->Z[0]; /* the forward keeps no Z: one buffer serves every layer */
        for (int k = 0; k < nl; k++) {
            section(r, "stage%d.layer%d", g, k);
            layer_fwd(r, g * nl + k, &q, 0);
        }
        if (last) {
            section(r, "readout", 0, 0);
            readout_fwd(r, e0, n, w->Xc);
        }
    }
    if (!last)
        w->X = w->Sin[g + 1]; /* the MP layer acts in place on the stage output */
}

static void stage_bwd(ecn_run *r, int g)
{
    ecn_ws *w = r->w;
    const int nl = r->c->n_layers;
    if (!r->lm) {
        const int64_t E = r->dm->E, C = r->sc > 0 && r->sc < E ? r->sc : E;
        for (int64_t e0 = 0;; e0 += C) { /* once with E = 0 */
            const int64_t n = E - e0 < C ? E - e0 : C;
            for (int k = nl - 1; k >= 0; k--) {
                section(r, "stage%d.layer%d", g, k);
                lrange q = lr_part(r, g * nl + k, e0, n);
                layer_bwd(r, g * nl + k, &q);
            }
            if (e0 + C >= E)
                break;
        }
        return;
    }
    const int64_t E = r->dm->E, C = r->chunk;
    for (int64_t e0 = 0; e0 < E; e0 += C) {
        const int64_t n = E - e0 < C ? E - e0 : C;
        lrange q = chunk_load(r, g, e0, n);
        q.Xbar = at(r, w->Xbar, e0, r->XE);
        for (int k = 0; k < nl; k++) { /* recompute */
            section(r, "stage%d.layer%d", g, k);
            q.Z = w->Z[k];
            layer_fwd(r, g * nl + k, &q, k == nl - 1);
        }
        for (int k = nl - 1; k >= 0; k--) {
            section(r, "stage%d.layer%d", g, k);
            q.Z = w->Z[k];
            layer_bwd(r, g * nl + k, &q);
        }
    }
}

/* Public MP layer q (SPEC §13): X += unpack(Δ[edge_i]·D), Δ = scatter(pack(X)·Dᵀ ⊙ w).
 * X changes in place, so the pack keeps the copy of its input that the backward needs
 * (Xmp, NULL without a backward) as it reads X: no separate copy pass. */
static void mp_edge_fwd(ecn_run *r, int q)
{
    section(r, "mp%d", q, 0);
    const ecenet_backend *be = r->be;
    ecn_ws *w = r->w;
    const ecenet_dims *dm = r->dm;
    OP(r, "mp_pack_unrotate_fwd",
       be->mp_pack_unrotate_fwd(dm, w->X, w->D, w->g[q], w->Xmp[q]));
    OP(r, "mp_weight_fwd",
       be->mp_weight_fwd(dm, r->sh->K_mp, w->tsrc, w->ttgt, w->fr_mp, r->eng->W_msg[q], w->w[q]));
    OP(r, "mp_scatter_fwd", be->mp_scatter_fwd(dm, w->edge_j, w->g[q], w->w[q], w->Delta[q]));
    OP(r, "mp_rotate_unpack_fwd", be->mp_rotate_unpack_fwd(dm, w->edge_i, w->Delta[q], w->D, w->X));
}

static void mp_edge_bwd(ecn_run *r, int q)
{
    section(r, "mp%d", q, 0);
    const ecenet_backend *be = r->be;
    ecn_ws *w = r->w;
    const ecenet_dims *dm = r->dm;
    zero(r, w->Deltabar, (size_t)dm->N * dm->B * dm->S);
    /* low memory: the next stage's input is dead once its backward ran and
     * holds the message gradients (ecn_ws_plan checked that they fit) */
    const size_t BS = (size_t)dm->B * dm->S;
    void *gbar = r->sh->mp_alias ? w->Sin[q + 1] : w->gbar;
    void *wbar = r->sh->mp_alias ? at(r, w->Sin[q + 1], dm->E, BS) : w->wbar;
    zero(r, gbar, (size_t)dm->E * BS);
    zero(r, wbar, (size_t)dm->E * dm->F);
    OP(r, "mp_rotate_unpack_vjp",
       be->mp_rotate_unpack_vjp(dm, w->edge_i, w->Delta[q], w->D, w->Xbar, w->Deltabar, w->Dbar));
    OP(r, "mp_scatter_vjp",
       be->mp_scatter_vjp(dm, w->edge_j, w->g[q], w->w[q], w->Deltabar, gbar, wbar));
    OP(r, "mp_weight_vjp",
       be->mp_weight_vjp(dm, r->sh->K_mp, w->tsrc, w->ttgt, r->eng->W_msg[q], wbar,
                         w->frbar_mp));
    OP(r, "mp_pack_unrotate_vjp",
       be->mp_pack_unrotate_vjp(dm, w->Xmp[q], w->D, gbar, w->Xbar, w->Dbar));
}

/* Research attention MP layer q (SPEC §17.3). Xmp holds the message m = u + X. */
static void mp_attn_fwd(ecn_run *r, int q)
{
    section(r, "mp%d", q, 0);
    const ecenet_backend *be = r->be;
    const ecn_attn_mp *p = &r->eng->amp[q];
    const ecn_config *c = r->c;
    ecn_ws *w = r->w;
    const ecenet_dims *dm = r->dm;
    const int64_t E = dm->E;
    ecenet_dims dn = *dm; /* the trunk's score MLP reads the m = 0 cos slot at width mp_dim */
    dn.F = c->mp_dim;
    char name[64];
    OP(r, "linear_fwd", be->linear_fwd(E, &p->down, w->tsrc, w->ttgt, w->X, w->T1[q]));
    OP(r, "realspace_fwd", be->realspace_fwd(E, &p->nonlin, w->tsrc, w->ttgt, w->T1[q], w->tW1));
    OP(r, "linear_fwd", be->linear_fwd(E, &p->up, w->tsrc, w->ttgt, w->tW1, w->Xmp[q]));
    OP(r, "mlp_fwd", be->mlp_fwd(&dn, &p->score, w->tsrc, w->ttgt, w->tW1, NULL, w->sc[q]));
    snprintf(name, sizeof name, "mp%d.trunk", q);
    emit(r, name, w->Xmp[q], E * r->XE);
    snprintf(name, sizeof name, "mp%d.scores", q);
    emit(r, name, w->sc[q], (size_t)E * c->n_scores);
    OP(r, "add", be->add((int64_t)(E * r->XE), w->X, w->Xmp[q]));
    OP(r, "mp_pack_unrotate_fwd", be->mp_pack_unrotate_fwd(dm, w->Xmp[q], w->D, w->g[q], NULL));
    OP(r, "mp_attn_weight_fwd",
       be->mp_attn_weight_fwd(dm, c->mp_n_heads, c->mp_l_attention, c->mp_type, c->mp_msg_envelope,
                              w->edge_j, w->sc[q], w->fc, w->a[q], w->w[q], w->attn_tmp));
    snprintf(name, sizeof name, "mp%d.weights", q);
    emit(r, name, w->a[q], (size_t)E * c->n_scores);
    OP(r, "mp_scatter_fwd", be->mp_scatter_fwd(dm, w->edge_j, w->g[q], w->w[q], w->Delta[q]));
    snprintf(name, sizeof name, "mp%d.Delta", q);
    emit(r, name, w->Delta[q], (size_t)dm->N * dm->B * dm->S);
    zero(r, w->tF1, E * r->XE);
    OP(r, "mp_rotate_unpack_fwd",
       be->mp_rotate_unpack_fwd(dm, w->edge_i, w->Delta[q], w->D, w->tF1));
    snprintf(name, sizeof name, "mp%d.receiver_in", q);
    emit(r, name, w->tF1, E * r->XE);
    /* receiver: r = d + up(nonlin(down(d))); output X + r */
    OP(r, "linear_fwd", be->linear_fwd(E, &p->rdown, w->tsrc, w->ttgt, w->tF1, w->R1[q]));
    OP(r, "realspace_fwd", be->realspace_fwd(E, &p->rnonlin, w->tsrc, w->ttgt, w->R1[q], w->tW1));
    OP(r, "linear_fwd", be->linear_fwd(E, &p->rup, w->tsrc, w->ttgt, w->tW1, w->tF2));
    OP(r, "add", be->add((int64_t)(E * r->XE), w->tF2, w->tF1));
    snprintf(name, sizeof name, "mp%d.receiver", q);
    emit(r, name, w->tF1, E * r->XE);
    OP(r, "add", be->add((int64_t)(E * r->XE), w->tF1, w->X));
}

static void mp_attn_bwd(ecn_run *r, int q)
{
    section(r, "mp%d", q, 0);
    const ecenet_backend *be = r->be;
    const ecn_attn_mp *p = &r->eng->amp[q];
    const ecn_config *c = r->c;
    ecn_ws *w = r->w;
    const ecenet_dims *dm = r->dm;
    const int64_t E = dm->E;
    ecenet_dims dn = *dm;
    dn.F = c->mp_dim;
    /* receiver: d̄ = X̄ + down_vjp(nonlin_vjp(up_vjp(X̄))) */
    zero(r, w->tF1, E * r->XE);
    OP(r, "add", be->add((int64_t)(E * r->XE), w->Xbar, w->tF1));
    zero(r, w->tW1, E * r->XW);
    OP(r, "linear_vjp", be->linear_vjp(E, &p->rup, w->tsrc, w->ttgt, w->Xbar, w->tW1));
    zero(r, w->tW2, E * r->XW);
    OP(r, "realspace_vjp",
       be->realspace_vjp(E, &p->rnonlin, w->tsrc, w->ttgt, w->R1[q], w->tW1, w->tW2));
    OP(r, "linear_vjp", be->linear_vjp(E, &p->rdown, w->tsrc, w->ttgt, w->tW2, w->tF1));
    /* aggregation */
    zero(r, w->Deltabar, (size_t)dm->N * dm->B * dm->S);
    OP(r, "mp_rotate_unpack_vjp",
       be->mp_rotate_unpack_vjp(dm, w->edge_i, w->Delta[q], w->D, w->tF1, w->Deltabar, w->Dbar));
    zero(r, w->gbar, (size_t)E * dm->B * dm->S);
    zero(r, w->wbar, (size_t)E * dm->F);
    OP(r, "mp_scatter_vjp",
       be->mp_scatter_vjp(dm, w->edge_j, w->g[q], w->w[q], w->Deltabar, w->gbar, w->wbar));
    zero(r, w->sbar, (size_t)E * c->n_scores);
    OP(r, "mp_attn_weight_vjp",
       be->mp_attn_weight_vjp(dm, c->mp_n_heads, c->mp_l_attention, c->mp_type, c->mp_msg_envelope,
                              w->edge_j, w->sc[q], w->fc, w->a[q], w->wbar, w->attn_tmp, w->sbar,
                              w->fcbar));
    /* message m = u + X */
    zero(r, w->tF3, E * r->XE);
    OP(r, "mp_pack_unrotate_vjp",
       be->mp_pack_unrotate_vjp(dm, w->Xmp[q], w->D, w->gbar, w->tF3, w->Dbar));
    OP(r, "add", be->add((int64_t)(E * r->XE), w->tF3, w->Xbar));
    /* trunk: u = up(nonlin(down(X))), scores from the same nonlin output */
    zero(r, w->tW1, E * r->XW);
    OP(r, "linear_vjp", be->linear_vjp(E, &p->up, w->tsrc, w->ttgt, w->tF3, w->tW1));
    OP(r, "mlp_vjp", be->mlp_vjp(&dn, &p->score, w->tsrc, w->ttgt, NULL, w->sbar, w->tW1));
    zero(r, w->tW2, E * r->XW);
    OP(r, "realspace_vjp",
       be->realspace_vjp(E, &p->nonlin, w->tsrc, w->ttgt, w->T1[q], w->tW1, w->tW2));
    OP(r, "linear_vjp", be->linear_vjp(E, &p->down, w->tsrc, w->ttgt, w->tW2, w->Xbar));
}

/* ---- the step ---------------------------------------------------------------- */

static void zero_grads(ecn_run *r)
{
    const ecenet_dims *dm = r->dm;
    const ecn_shape *sh = r->sh;
    ecn_ws *w = r->w;
    const size_t E = (size_t)dm->E, N = (size_t)dm->N;
    zero(r, w->Xbar, E * r->XE);
    if (w->X0bar != w->Xbar)
        zero(r, w->X0bar, E * r->XE);
    if (r->c->element_film)
        zero(r, w->gamma_bar, E * dm->F);
    zero(r, w->Aemb_bar, N * dm->C * dm->S);
    zero(r, w->Abar, N * dm->T * dm->R * dm->S);
    zero(r, w->Dbar, E * dm->ND);
    zero(r, w->dbar_e, 3 * E);
    zero(r, w->rbar_e, E);
    zero(r, w->dbar_p, 3 * (size_t)dm->P);
    zero(r, w->fcbar, E);
    zero(r, w->ybar, E * sh->K_out);
    zero(r, w->frbar_out, E * sh->K_out);
    zero(r, w->frbar_mp, E * sh->K_mp);
    zero(r, w->frbar_de, E * sh->K_de);
    zero(r, w->frbar_film, E * sh->K_film);
    zero(r, w->posbar, 3 * N);
    zero(r, w->virial, 9);
}

/* The host lists into the workspace (SPEC inputs), in two uploads: ecn_ws_plan
 * carves every index array first and contiguously (then positions and
 * shifts), so a host image of each region goes over in one copy instead of
 * 23 (gaps of the 64-byte alignment are zeros). The per-edge type ids are
 * gathered here; the per-atom groupings come from the graph builder (built
 * here for hand-made graphs). */
static ecenet_status host_inputs(ecn_run *r, ecn_engine *eng, const ecenet_dims *dm,
                                 const ecn_step_in *in, ecn_ws *w, char *err, size_t err_len)
{
    const ecenet_backend *be = r->be;
    const ecn_graph *gr = in->graph;
    const int64_t E = dm->E, P = dm->P, N = dm->N;
    const ecn_pairlist *el = &gr->edges, *nl = &gr->nb;
    double t_prep = op_begin(r);
    const size_t i32_len =
        (size_t)((char *)w->csr[7] - (char *)w->edge_i) / sizeof(int32_t) + (size_t)P;
    const size_t re_len = (size_t)((char *)w->nshift - (char *)w->pos) / be->real_size + 3 * (size_t)P;
    /* both images in one engine-owned host buffer, kept across steps (fresh
     * pages would fault on every step); grown zeroed, so gap bytes are
     * always defined (zeros, or values of an earlier step's layout: never
     * read on the device) */
    const size_t i32_bytes = ((i32_len + 1) * sizeof(int32_t) + 15) / 16 * 16;
    const size_t in_bytes = i32_bytes + (re_len + 1) * sizeof(double);
    if (in_bytes > eng->host_in_bytes) {
        free(eng->host_in);
        eng->host_in_bytes = 0;
        eng->host_in = calloc(1, in_bytes);
        if (!eng->host_in)
            return ecn_fail(err, err_len, ECENET_ERR_NOMEM, "out of memory (%zu bytes of input images)",
                            in_bytes);
        eng->host_in_bytes = in_bytes;
    }
    int32_t *img = eng->host_in;
    double *rimg = (double *)((char *)eng->host_in + i32_bytes);
#define I32_AT(p) (img + (size_t)((char *)(p) - (char *)w->edge_i) / sizeof(int32_t))
#define REAL_AT(p) (rimg + (size_t)((char *)(p) - (char *)w->pos) / be->real_size)
    copy_i32(I32_AT(w->edge_i), el->src, E);
    copy_i32(I32_AT(w->edge_j), el->dst, E);
    copy_i32(I32_AT(w->nb_src), nl->src, P);
    copy_i32(I32_AT(w->nb_dst), nl->dst, P);
    copy_i32(I32_AT(w->types), in->types, N);
    for (int64_t e = 0; e < E; e++) {
        I32_AT(w->tsrc)[e] = in->types[el->src[e]];
        I32_AT(w->ttgt)[e] = in->types[el->dst[e]];
    }
    const ecn_pairlist *lists[4] = {el, el, nl, nl};
    for (int k = 0; k < 4; k++) {
        const ecn_pairlist *pl = lists[k];
        const int32_t *ptr = (k % 2) ? pl->dst_ptr : pl->src_ptr;
        const int32_t *idx = (k % 2) ? pl->dst_idx : pl->src_idx;
        if (ptr && (pl->n == 0 || idx)) {
            copy_i32(I32_AT(w->csr[2 * k]), ptr, N + 1);
            copy_i32(I32_AT(w->csr[2 * k + 1]), idx, pl->n);
        } else {
            csr_build(N, pl->n, (k % 2) ? pl->dst : pl->src, I32_AT(w->csr[2 * k]),
                      I32_AT(w->csr[2 * k + 1]));
        }
    }
    if (N)
        memcpy(REAL_AT(w->pos), in->pos, 3 * (size_t)N * sizeof(double));
    if (E)
        memcpy(REAL_AT(w->eshift), el->shift, 3 * (size_t)E * sizeof(double));
    if (P)
        memcpy(REAL_AT(w->nshift), nl->shift, 3 * (size_t)P * sizeof(double));
#undef I32_AT
#undef REAL_AT
    op_end(r, "prepare", t_prep);
    OP(r, "upload_idx", be->upload_idx(w->edge_i, img, i32_len));
    OP(r, "upload", be->upload(w->pos, rimg, re_len));
    return ECENET_OK;
}

static ecenet_status step_run(ecn_engine *eng, const ecn_step_in *in, ecn_step_out *out,
                              char *err, size_t err_len)
{
    const ecenet_backend *be = eng->be;
    const ecenet_model *m = eng->model;
    const ecn_config *c = &m->cfg;
    const ecn_graph *gr = in->graph;
    ecn_shape sh;
    memset(&sh, 0, sizeof sh);
    ecenet_dims *dm = &sh.dm;
    dm->N = (int64_t)in->n_atoms;
    /* the lists: from the host graph, or searched on the device (its totals
     * first: they size the workspace) */
    const int dev_nl = in->nlist && in->nlist->n > 0 && ecn_backend_has_nlist(be);
    double t_count = 0.0;
    out->nlist_fallback = 0;
    if (dev_nl) {
        ecenet_nlist_counts cnt = {0, 0, 0};
        const double t0 = out->prof ? (be->sync(), be->now()) : 0.0;
        if (in->nlist->n != dm->N)
            return ecn_fail(err, err_len, ECENET_ERR_ARGUMENT,
                            "neighbour search set up for %lld atoms, step has %lld",
                            (long long)in->nlist->n, (long long)dm->N);
        if (be->nlist_count(in->nlist, &cnt))
            return ecn_fail(err, err_len, ECENET_ERR_NOMEM,
                            "backend '%s': cannot allocate the neighbour search's memory (%lld atoms)",
                            be->name, (long long)dm->N);
        if (out->prof)
            t_count = (be->sync(), be->now()) - t0;
        if (cnt.fallback) {
            out->nlist_fallback = 1;
            return ecn_fail(err, err_len, ECENET_ERR_INPUT,
                            "the device neighbour search needs the host search (coincident atoms "
                            "or more than INT32_MAX pairs)");
        }
        dm->E = cnt.n_edges;
        dm->P = cnt.n_nb;
    } else if (gr) {
        dm->E = gr->edges.n;
        dm->P = gr->nb.n;
    } else {
        return ecn_fail(err, err_len, ECENET_ERR_ARGUMENT, "step without a graph");
    }
    dm->T = c->n_types;
    dm->R = c->n_max;
    dm->L = c->l_max;
    dm->M = c->m_max;
    dm->C = c->embed_dim;
    dm->B = c->B;
    dm->F = c->F;
    dm->S = c->S;
    dm->Q = c->Q;
    dm->G = c->n_grid;
    for (int l = 0; l <= c->l_max; l++)
        dm->ND += (2 * l + 1) * (2 * l + 1);
    sh.K_de = c->n_dist_embed;
    sh.K_mp = (c->n_mp > 1 && c->mp_type == ECN_MP_EDGE) ? c->n_dist_basis : 0;
    sh.K_out = c->n_max_d > 0 ? c->n_max_d : 1;
    sh.K_film = c->element_film ? c->film_n_rbf : 0;
    for (int k = 0; k + 1 < m->mlp.n_layers; k++)
        sh.n_hid += m->mlp.dims[k + 1];
    for (int k = 0; c->element_film && k + 1 < m->film.mlp.n_layers; k++)
        sh.n_hid_film += m->film.mlp.dims[k + 1];
    sh.n_lin = c->n_mp * c->n_layers;
    sh.n_mp_layers = c->n_mp - 1;
    sh.attn = c->mp_type != ECN_MP_EDGE && sh.n_mp_layers > 0;
    sh.grad = out->grad || out->virial;
    sh.Wn = c->bottleneck_dim > c->mp_dim ? c->bottleneck_dim : c->mp_dim;
    if (sh.Wn < 1)
        sh.Wn = 1;
    if (sh.n_lin > ECN_MAX_LAYERS)
        return ecn_fail(err, err_len, ECENET_ERR_UNSUPPORTED, "more than %d layers",
                        ECN_MAX_LAYERS);
    /* low memory (not while tracing: the trace wants every layer over all edges) */
    sh.lm = eng->low_memory && !out->trace && dm->E > 0;
    if (sh.lm) {
        const size_t XE = (size_t)dm->Q * 2 * dm->F, XW = (size_t)dm->Q * 2 * sh.Wn;
        const size_t per_edge = be->real_size * ((size_t)c->n_layers * (c->bottleneck_dim ? XW : XE) +
                                                 XE + (sh.attn ? 0 : XE + 2 * XW));
        sh.chunk = eng->chunk_edges > 0 ? eng->chunk_edges
                                         : (int64_t)(((size_t)256 << 20) / per_edge);
        if (sh.chunk < 1)
            sh.chunk = 1;
        if (sh.chunk > dm->E)
            sh.chunk = dm->E;
        sh.mp_alias = !sh.attn && (size_t)dm->B * dm->S + (size_t)dm->F <= XE;
    }

    /* size the arena, grow it if needed, carve */
    const double t_start = out->prof ? (be->sync(), be->now()) : 0.0;
    ecn_carve cv = {NULL, 0, NULL};
    ecn_ws w;
    ecn_ws_plan(&sh, c, be->real_size, &cv, &w);
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
    cv.prof = out->prof;
    if (out->prof)
        ecn_profile_reset(out->prof);
    ecn_ws_plan(&sh, c, be->real_size, &cv, &w);

    const int64_t E = dm->E, P = dm->P, N = dm->N;
    ecn_run r = {eng,
                 be,
                 c,
                 &sh,
                 dm,
                 &w,
                 out,
                 (size_t)dm->Q * 2 * dm->F,
                 (size_t)dm->Q * 2 * sh.Wn,
                 be->real_size,
                 0,
                 out->prof,
                 "inputs",
                 0,
                 sh.lm,
                 sh.chunk,
                 out->trace ? 0 : eng->stage_chunk}; /* the trace wants each layer over all edges */
    if (out->prof)
        out->prof->workspace_bytes = cv.off;
    const size_t XE = r.XE;
    if (dev_nl) { /* section "inputs", as r starts */
        op_record(&r, "nlist_count", t_count);
        OP(&r, "upload", be->upload(w.pos, in->pos, 3 * (size_t)N));
        OP(&r, "upload_idx", be->upload_idx(w.types, in->types, (size_t)N));
        const ecenet_nlist_out eo = {w.edge_i, w.edge_j, w.tsrc, w.ttgt, w.eshift,
                                     w.csr[0], w.csr[1], w.csr[2], w.csr[3]};
        const ecenet_nlist_out no = {w.nb_src, w.nb_dst, NULL, NULL, w.nshift,
                                     w.csr[4], w.csr[5], w.csr[6], w.csr[7]};
        OP(&r, "nlist_fill", be->nlist_fill(in->nlist, w.types, &eo, &no));
    } else {
        ecenet_status ist = host_inputs(&r, eng, dm, in, &w, err, err_len);
        if (ist != ECENET_OK)
            return ist;
    }
    ecenet_csr *csr[4] = {&dm->e_src, &dm->e_dst, &dm->p_src, &dm->p_dst};
    for (int k = 0; k < 4; k++) {
        csr[k]->ptr = w.csr[2 * k];
        csr[k]->idx = w.csr[2 * k + 1];
    }

    /* ACE environment (§5, §6) */
    section(&r, "radial/SH", 0, 0);
    OP(&r, "pair_geom_fwd", be->pair_geom_fwd(P, w.nb_src, w.nb_dst, w.nshift, w.pos, w.dp, w.rp));
    OP(&r, "radial_fwd",
       be->radial_fwd(P, w.rp, c->r_cut_neighbor, c->n_max, c->cutoff_type, w.fp, w.dfp));
    OP(&r, "sph_fwd", be->sph_fwd(P, c->l_max, w.dp, w.Y, sh.grad ? w.dY : NULL));
    emit(&r, "nb_radial", w.fp, (size_t)(P * dm->R));
    emit(&r, "nb_Y", w.Y, (size_t)(P * dm->S));
    section(&r, "ACE basis", 0, 0);
    OP(&r, "ace_fwd", be->ace_fwd(dm, w.nb_src, w.nb_dst, w.types, w.fp, w.Y, w.A));
    emit(&r, "ace_A", w.A, (size_t)(N * dm->T * dm->R * dm->S));
    section(&r, "embedding", 0, 0);
    OP(&r, "embed_fwd", be->embed_fwd(dm, w.types, eng->W, w.A, w.Aemb));
    emit(&r, "A_emb", w.Aemb, (size_t)(N * dm->C * dm->S));

    /* bond frame (§7, §8), distance embedding (§9) or element FiLM (§17.4) */
    section(&r, "edge geometry", 0, 0);
    OP(&r, "pair_geom_fwd", be->pair_geom_fwd(E, w.edge_i, w.edge_j, w.eshift, w.pos, w.de, w.re));
    OP(&r, "radial_fwd", be->radial_fwd(E, w.re, c->r_cut_edge, 0, c->cutoff_type, w.fc, w.dfc));
    section(&r, "Wigner-D", 0, 0);
    OP(&r, "wigner_fwd", be->wigner_fwd(E, c->l_max, eng->cg, w.de, w.re, w.D));
    emit(&r, "D", w.D, (size_t)(E * dm->ND));
    section(&r, "edge frame", 0, 0);
    OP(&r, "edge_frame_fwd", be->edge_frame_fwd(dm, w.edge_i, w.edge_j, w.Aemb, w.D, w.X0));
    if (sh.K_de) {
        OP(&r, "radial_fwd",
           be->radial_fwd(E, w.re, c->r_cut_edge, sh.K_de, c->cutoff_type, w.fr_de, w.dfr_de));
        OP(&r, "dist_embed_fwd", be->dist_embed_fwd(dm, sh.K_de, w.fr_de, eng->V_dist, w.X0, w.X));
    }
    emit(&r, "edge_frame", sh.K_de ? w.X : w.X0, E * XE); /* before FiLM */
    if (c->element_film) {
        section(&r, "FiLM", 0, 0);
        if (sh.K_film)
            OP(&r, "radial_fwd",
               be->radial_fwd(E, w.re, c->r_cut_edge, sh.K_film, c->cutoff_type, w.fr_film,
                              w.dfr_film));
        OP(&r, "film_fwd",
           be->film_fwd(dm, &eng->film_mlp, eng->film_a, eng->film_b, c->film_embed_dim, sh.K_film,
                        w.tsrc, w.ttgt, w.fr_film, w.H_film, w.gamma));
        emit(&r, "film.gamma", w.gamma, (size_t)E * dm->F);
        OP(&r, "chan_scale_fwd", be->chan_scale_fwd(E, dm->Q, dm->F, w.gamma, w.X0, w.X));
        emit(&r, "film", w.X, E * XE);
    }
    section(&r, "edge geometry", 0, 0);
    if (sh.K_mp)
        OP(&r, "radial_fwd",
           be->radial_fwd(E, w.re, c->r_cut_edge, sh.K_mp, c->cutoff_type, w.fr_mp, w.dfr_mp));

    /* stages of residual layers with message passing between them (§10-§13, §17.3) */
    for (int g = 0; g < c->n_mp; g++) {
        stage_fwd(&r, g); /* the last stage runs the readout MLP too */
        if (g + 1 == c->n_mp)
            break;
        if (sh.attn)
            mp_attn_fwd(&r, g);
        else
            mp_edge_fwd(&r, g);
        char name[32];
        snprintf(name, sizeof name, "mp%d", g);
        emit(&r, name, w.X, E * XE);
    }

    /* readout and energy (§14) */
    section(&r, "readout", 0, 0);
    OP(&r, "energy_fwd", be->energy_fwd(E, sh.K_out, w.y, w.fr_out, w.eps));
    emit(&r, "per_edge_energy", w.eps, (size_t)E);
    double energy = 0.0;
    OP(&r, "sum", energy = be->sum(E, w.eps));
    for (int64_t i = 0; i < N; i++)
        energy += m->atomic_energy[in->types[i]];
    if (r.terr)
        return ecn_fail(err, err_len, ECENET_ERR_NOMEM, "out of memory tracing the step");
    if (out->prof) {
        be->sync();
        out->prof->fwd_seconds = be->now() - t_start;
    }

    if (sh.grad) {
        /* backward: every VJP accumulates, so the gradient buffers are zeroed once */
        r.bwd = 1;
        section(&r, "readout", 0, 0);
        zero_grads(&r);
        OP(&r, "energy_vjp", be->energy_vjp(E, sh.K_out, w.y, w.fr_out, w.ybar, w.frbar_out));
        OP(&r, "mlp_vjp", be->mlp_vjp(dm, &eng->mlp, w.tsrc, w.ttgt, w.H, w.ybar, w.Xbar));
        OP(&r, "radial_vjp", be->radial_vjp(E, c->n_max_d, w.dfr_out, w.frbar_out, w.rbar_e));
        for (int g = c->n_mp - 1; g >= 0; g--) {
            stage_bwd(&r, g);
            if (g == 0)
                break;
            if (sh.attn)
                mp_attn_bwd(&r, g - 1); /* the MP layer between stage g-1 and stage g */
            else
                mp_edge_bwd(&r, g - 1);
        }
        section(&r, "edge geometry", 0, 0);
        if (sh.K_mp)
            OP(&r, "radial_vjp", be->radial_vjp(E, sh.K_mp, w.dfr_mp, w.frbar_mp, w.rbar_e));
        if (sh.attn)
            OP(&r, "radial_vjp", be->radial_vjp(E, 0, w.dfc, w.fcbar, w.rbar_e));
        if (c->element_film) {
            section(&r, "FiLM", 0, 0);
            OP(&r, "chan_scale_vjp",
               be->chan_scale_vjp(E, dm->Q, dm->F, w.gamma, w.X0, w.Xbar, w.X0bar, w.gamma_bar));
            OP(&r, "film_vjp",
               be->film_vjp(dm, &eng->film_mlp, c->film_embed_dim, sh.K_film, w.tsrc, w.ttgt,
                            w.H_film, w.gamma_bar, w.frbar_film));
            if (sh.K_film)
                OP(&r, "radial_vjp",
                   be->radial_vjp(E, sh.K_film, w.dfr_film, w.frbar_film, w.rbar_e));
        }
        section(&r, "edge frame", 0, 0);
        if (sh.K_de) {
            OP(&r, "dist_embed_vjp",
               be->dist_embed_vjp(dm, sh.K_de, w.fr_de, eng->V_dist, w.X0, w.Xbar, w.X0bar,
                                  w.frbar_de));
            OP(&r, "radial_vjp", be->radial_vjp(E, sh.K_de, w.dfr_de, w.frbar_de, w.rbar_e));
        }
        OP(&r, "edge_frame_vjp",
           be->edge_frame_vjp(dm, w.edge_i, w.edge_j, w.Aemb, w.D, w.X0bar, w.Aemb_bar, w.Dbar));
        section(&r, "Wigner-D", 0, 0);
        OP(&r, "wigner_vjp",
           be->wigner_vjp(E, c->l_max, eng->cg, w.de, w.re, w.D, w.Dbar, w.dbar_e));
        section(&r, "edge geometry", 0, 0);
        OP(&r, "dist_vjp", be->dist_vjp(E, w.de, w.re, w.rbar_e, w.dbar_e));
        section(&r, "embedding", 0, 0);
        OP(&r, "embed_vjp", be->embed_vjp(dm, w.types, eng->W, w.Aemb_bar, w.Abar));
        section(&r, "ACE basis", 0, 0);
        OP(&r, "ace_vjp",
           be->ace_vjp(dm, w.nb_src, w.nb_dst, w.types, w.fp, w.dfp, w.Y, w.dY, w.dp, w.rp, w.Abar,
                       w.dbar_p));
        section(&r, "edge geometry", 0, 0);
        OP(&r, "pair_geom_vjp",
           be->pair_geom_vjp(E, w.edge_i, w.edge_j, &dm->e_src, &dm->e_dst, w.de, w.dbar_e,
                             w.posbar, w.virial));
        section(&r, "radial/SH", 0, 0);
        OP(&r, "pair_geom_vjp",
           be->pair_geom_vjp(P, w.nb_src, w.nb_dst, &dm->p_src, &dm->p_dst, w.dp, w.dbar_p,
                             w.posbar, w.virial));
        section(&r, "outputs", 0, 0);
        if (out->grad)
            OP(&r, "download", be->download(out->grad, w.posbar, 3 * (size_t)N));
        if (out->virial)
            OP(&r, "download", be->download(out->virial, w.virial, 9));
    }
    section(&r, "outputs", 0, 0);
    if (out->per_edge)
        OP(&r, "download", be->download(out->per_edge, w.eps, (size_t)E));
    be->sync();
    if (out->prof) {
        out->prof->total_seconds = be->now() - t_start;
        if (out->prof->oom)
            return ecn_fail(err, err_len, ECENET_ERR_NOMEM, "out of memory recording the profile");
    }
    out->energy = energy;
    return ECENET_OK;
}

/* The engine's TF32 setting holds for its steps only (the backend's switch is
 * process-wide). */
ecenet_status ecn_step(ecn_engine *eng, const ecn_step_in *in, ecn_step_out *out, char *err,
                       size_t err_len)
{
    const ecenet_backend *be = eng->be;
    const int prev = be->set_tf32 && eng->tf32 >= 0 ? be->set_tf32(-1) : -1;
    if (prev >= 0)
        be->set_tf32(eng->tf32);
    if (!(be->set_tf32 && be->set_tf32(-1)))
        ecn_engine_split(eng); /* a strict-fp32 step: the split weights, once */
    ecenet_status st = step_run(eng, in, out, err, err_len);
    if (prev >= 0)
        be->set_tf32(prev);
    return st;
}
