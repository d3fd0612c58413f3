/* Atom environment (SPEC §5, §6): ACE (d -> A through radial, sph, ace_fwd),
 * embed. */
#include "harness.h"

typedef struct {
    void *d, *r, *f, *df, *Y, *dY;
} ace_chain;

static ace_chain ace_run_chain(const op_case *c, arena *a)
{
    const opx *x = c->x;
    const size_t P = (size_t)x->dm.P, R = (size_t)x->dm.R, S = (size_t)x->dm.S;
    ace_chain ch;
    ch.d = a_put(a, c->in[0], 3 * P);
    ch.r = a_put(a, host_r(a, c->in[0], P), P);
    ch.f = a_raw(a, P * R);
    ch.df = a_raw(a, P * R);
    ch.Y = a_raw(a, P * S);
    ch.dY = a_raw(a, P * S * 3);
    c->be->radial_fwd(x->dm.P, ch.r, x->cut, x->dm.R, x->ctype, ch.f, ch.df);
    c->be->sph_fwd(x->dm.P, x->dm.L, ch.d, ch.Y, ch.dY);
    return ch;
}

static size_t a_size(const ecenet_dims *d) { return (size_t)d->N * d->T * d->R * d->S; }

/* x: ps = nb_src, pd = nb_dst, i2 = types */
static void ace_fwd_cb(const op_case *c, double *out)
{
    arena a = arena_of(c->be);
    const opx *x = c->x;
    const size_t P = (size_t)x->dm.P;
    ace_chain ch = ace_run_chain(c, &a);
    ecenet_dims dd = dims_dev(&a, x);
    void *A = a_put(&a, out, a_size(&x->dm));
    c->be->ace_fwd(&dd, a_idx(&a, x->ps, P), a_idx(&a, x->pd, P),
                   a_idx(&a, x->i2, (size_t)x->dm.N), ch.f, ch.Y, A);
    a_get(&a, out, A, a_size(&x->dm));
    a_free(&a);
}

static void ace_vjp_cb(const op_case *c, const double *ybar, double *const *g)
{
    arena a = arena_of(c->be);
    const opx *x = c->x;
    const size_t P = (size_t)x->dm.P;
    ace_chain ch = ace_run_chain(c, &a);
    void *dbar = a_put(&a, g[0], 3 * P);
    ecenet_dims dd = dims_dev(&a, x);
    c->be->ace_vjp(&dd, a_idx(&a, x->ps, P), a_idx(&a, x->pd, P),
                   a_idx(&a, x->i2, (size_t)x->dm.N), ch.f, ch.df, ch.Y, ch.dY, ch.d, ch.r,
                   a_put(&a, ybar, a_size(&x->dm)), dbar);
    a_get(&a, g[0], dbar, 3 * P);
    a_free(&a);
}

static void case_ace(const env *ev, const shape *s, int type, int it)
{
    opx x;
    op_case c;
    shape t = *s;
    size_t P;
    if (t.L > 4)
        t.L = 4;
    memset(&x, 0, sizeof x);
    x.dm = dims_of(&t);
    P = (size_t)x.dm.P;
    x.ctype = type;
    x.cut = urand(2.0, 5.0);
    x.ps = hindex(P, t.N);
    x.pd = hindex(P, t.N);
    x.i2 = hindex((size_t)t.N, t.T);
    c = new_case(ev, "ace", &x, ace_fwd_cb, ace_vjp_cb, a_size(&x.dm));
    c.empty = P == 0;
    snprintf(c.desc, sizeof c.desc, "it=%d N=%lld P=%zu T=%d R=%d L=%d %s c=%g", it,
             (long long)t.N, P, t.T, t.R, t.L, type ? "poly" : "cosine", x.cut);
    add_in(&c, "d", edge_vectors(P, 0.3, 1.3 * x.cut, x.cut, 1), 3 * P);
    run_case(&c);
}

/* embed: A (N,T,R,S) -> A_emb (N,C,S); x: i2 = types, w0 = W */
static void embed_fwd_cb(const op_case *c, double *out)
{
    arena a = arena_of(c->be);
    const ecenet_dims *d = &c->x->dm;
    const size_t ne = (size_t)d->N * d->C * d->S;
    void *E = a_put(&a, out, ne);
    c->be->embed_fwd(d, a_idx(&a, c->x->i2, (size_t)d->N),
                     a_put(&a, c->x->w0, (size_t)d->T * d->T * d->R * d->C),
                     a_put(&a, c->in[0], a_size(d)), E);
    a_get(&a, out, E, ne);
    a_free(&a);
}

static void embed_vjp_cb(const op_case *c, const double *ybar, double *const *g)
{
    arena a = arena_of(c->be);
    const ecenet_dims *d = &c->x->dm;
    void *Abar = a_put(&a, g[0], a_size(d));
    c->be->embed_vjp(d, a_idx(&a, c->x->i2, (size_t)d->N),
                     a_put(&a, c->x->w0, (size_t)d->T * d->T * d->R * d->C),
                     a_put(&a, ybar, (size_t)d->N * d->C * d->S), Abar);
    a_get(&a, g[0], Abar, a_size(d));
    a_free(&a);
}

static void case_embed(const env *ev, const shape *s, int it)
{
    opx x;
    op_case c;
    memset(&x, 0, sizeof x);
    x.dm = dims_of(s);
    x.i2 = hindex((size_t)s->N, s->T);
    x.w0 = hnormal((size_t)s->T * s->T * s->R * s->C, 1.0);
    c = new_case(ev, "embed", &x, embed_fwd_cb, embed_vjp_cb,
                 (size_t)s->N * s->C * x.dm.S);
    snprintf(c.desc, sizeof c.desc, "it=%d N=%lld T=%d R=%d L=%d C=%d", it, (long long)s->N,
             s->T, s->R, s->L, s->C);
    add_in(&c, "A", hnormal(a_size(&x.dm), 1.0), a_size(&x.dm));
    run_case(&c);
}

void fam_ace(const env *ev)
{
    for (int it = 0; it < n_iter(ev); it++) {
        shape s;
        tu_rng_seed(seed_base() + 2000 + (uint64_t)it);
        s = shape_for(it);
        case_ace(ev, &s, ECENET_CUTOFF_COSINE, it);
        case_ace(ev, &s, ECENET_CUTOFF_POLY, it);
        case_embed(ev, &s, it);
        pool_free();
    }
}
