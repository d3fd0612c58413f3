/* Edge frame (SPEC §8), distance embedding (§9). */
#include "harness.h"

static size_t emb_size(const ecenet_dims *d) { return (size_t)d->N * d->C * d->S; }

/* x: ei = edge_i, ej = edge_j; inputs A_emb, D */
static void ef_fwd_cb(const op_case *c, double *out)
{
    arena a = arena_of(c->be);
    const ecenet_dims *d = &c->x->dm;
    ecenet_dims dd = dims_dev(&a, c->x);
    void *X = a_put(&a, out, xsize(d));
    c->be->edge_frame_fwd(&dd, a_idx(&a, c->x->ei, (size_t)d->E), a_idx(&a, c->x->ej, (size_t)d->E),
                          a_put(&a, c->in[0], emb_size(d)), a_put(&a, c->in[1], dsize(d)), X);
    a_get(&a, out, X, xsize(d));
    a_free(&a);
}

static void ef_vjp_cb(const op_case *c, const double *ybar, double *const *g)
{
    arena a = arena_of(c->be);
    const ecenet_dims *d = &c->x->dm;
    ecenet_dims dd = dims_dev(&a, c->x);
    void *Eb = a_put(&a, g[0], emb_size(d)), *Db = a_put(&a, g[1], dsize(d));
    c->be->edge_frame_vjp(&dd, a_idx(&a, c->x->ei, (size_t)d->E), a_idx(&a, c->x->ej, (size_t)d->E),
                          a_put(&a, c->in[0], emb_size(d)), a_put(&a, c->in[1], dsize(d)),
                          a_put(&a, ybar, xsize(d)), Eb, Db);
    a_get(&a, g[0], Eb, emb_size(d));
    a_get(&a, g[1], Db, dsize(d));
    a_free(&a);
}

/* SPEC §8.2: slots without an SH component are 0 */
static void ef_invalid_zero(const op_case *c)
{
    const ecenet_dims *d = &c->x->dm;
    double *X = hnew(xsize(d));
    eval_fwd(c, X);
    for (int64_t e = 0; e < d->E; e++)
        for (int m = 0; m < d->Q; m++)
            for (int p = 0; p < 2; p++)
                for (int f = 0; f < d->F; f++)
                    if (!slot_valid(d, m, p, f))
                        ck_assert_msg(X[((e * d->Q + m) * 2 + p) * d->F + f] == 0.0,
                                      "edge_frame_fwd (%s): invalid slot e=%lld m=%d p=%d f=%d "
                                      "not 0", c->desc, (long long)e, m, p, f);
}

static void case_edge_frame(const env *ev, const shape *s, int it)
{
    opx x;
    op_case c;
    memset(&x, 0, sizeof x);
    x.dm = dims_of(s);
    x.ei = hindex((size_t)s->E, s->N);
    x.ej = hindex((size_t)s->E, s->N);
    c = new_case(ev, "edge_frame", &x, ef_fwd_cb, ef_vjp_cb, xsize(&x.dm));
    snprintf(c.desc, sizeof c.desc, "it=%d N=%lld E=%lld L=%d M=%d C=%d", it, (long long)s->N,
             (long long)s->E, s->L, s->M, s->C);
    add_in(&c, "A_emb", hnormal(emb_size(&x.dm), 1.0), emb_size(&x.dm));
    add_in(&c, "D", hnormal(dsize(&x.dm), 1.0), dsize(&x.dm)); /* D is a free input here */
    run_case(&c);
    ef_invalid_zero(&c);
}

/* x: K, w0 = V (K,F); inputs X, fr */
static void de_fwd_cb(const op_case *c, double *out)
{
    arena a = arena_of(c->be);
    const ecenet_dims *d = &c->x->dm;
    const size_t K = (size_t)c->x->K;
    void *Y = a_put(&a, out, xsize(d));
    c->be->dist_embed_fwd(d, c->x->K, a_put(&a, c->in[1], (size_t)d->E * K),
                          a_put(&a, c->x->w0, K * d->F), a_put(&a, c->in[0], xsize(d)), Y);
    a_get(&a, out, Y, xsize(d));
    a_free(&a);
}

static void de_vjp_cb(const op_case *c, const double *ybar, double *const *g)
{
    arena a = arena_of(c->be);
    const ecenet_dims *d = &c->x->dm;
    const size_t K = (size_t)c->x->K;
    void *Xb = a_put(&a, g[0], xsize(d)), *fb = a_put(&a, g[1], (size_t)d->E * K);
    c->be->dist_embed_vjp(d, c->x->K, a_put(&a, c->in[1], (size_t)d->E * K),
                          a_put(&a, c->x->w0, K * d->F), a_put(&a, c->in[0], xsize(d)),
                          a_put(&a, ybar, xsize(d)), Xb, fb);
    a_get(&a, g[0], Xb, xsize(d));
    a_get(&a, g[1], fb, (size_t)d->E * K);
    a_free(&a);
}

static void case_dist_embed(const env *ev, const shape *s, int it)
{
    opx x;
    op_case c;
    const size_t E = (size_t)s->E;
    memset(&x, 0, sizeof x);
    x.dm = dims_of(s);
    x.K = s->K;
    x.w0 = hnormal((size_t)s->K * x.dm.F, 0.5);
    c = new_case(ev, "dist_embed", &x, de_fwd_cb, de_vjp_cb, xsize(&x.dm));
    snprintf(c.desc, sizeof c.desc, "it=%d E=%zu F=%d Q=%d K=%d", it, E, x.dm.F, x.dm.Q, s->K);
    add_in(&c, "X", hnormal(xsize(&x.dm), 1.0), xsize(&x.dm));
    add_in(&c, "fr", hnormal(E * s->K, 1.0), E * s->K);
    run_case(&c);
}

void fam_edge_frame(const env *ev)
{
    for (int it = 0; it < n_iter(ev); it++) {
        shape s;
        tu_rng_seed(seed_base() + 4000 + (uint64_t)it);
        s = shape_for(it);
        case_edge_frame(ev, &s, it);
        case_dist_embed(ev, &s, it);
        pool_free();
    }
}
