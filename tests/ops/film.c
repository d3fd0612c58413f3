/* Research FiLM gate and channel scale (SPEC §17.4). */
#include "harness.h"

/* x: mlp (no type corrections), w0 = ea, w1 = eb (T,pdim), K = n_rbf, i0/i1 = tsrc/ttgt;
 * input fr (E, n_rbf) (absent when n_rbf = 0) -> gamma (E, dims[n]) */
static void film_run(const op_case *c, arena *a, const ecenet_mlp_params *p, void *gamma, void **H)
{
    const opx *x = c->x;
    const size_t E = (size_t)x->dm.E, Tp = (size_t)x->dm.T * x->pdim;
    *H = a_raw(a, E * mlp_hidden(p));
    c->be->film_fwd(&x->dm, p, a_put(a, x->w0, Tp), a_put(a, x->w1, Tp), x->pdim, x->K,
                    a_idx(a, x->i0, E), a_idx(a, x->i1, E),
                    x->K ? a_put(a, c->in[0], E * x->K) : NULL, *H, gamma);
}

static void film_fwd_cb(const op_case *c, double *out)
{
    arena a = arena_of(c->be);
    ecenet_mlp_params p = mlp_dev(&a, &c->x->mlp);
    const size_t n = (size_t)c->x->dm.E * p.dims[p.n_layers];
    void *gm = a_put(&a, out, n), *H;
    film_run(c, &a, &p, gm, &H);
    a_get(&a, out, gm, n);
    a_free(&a);
}

static void film_vjp_cb(const op_case *c, const double *ybar, double *const *g)
{
    arena a = arena_of(c->be);
    const opx *x = c->x;
    const size_t E = (size_t)x->dm.E;
    ecenet_mlp_params p = mlp_dev(&a, &x->mlp);
    void *H, *fb = x->K ? a_put(&a, g[0], E * x->K) : a_raw(&a, 0);
    film_run(c, &a, &p, a_raw(&a, E * p.dims[p.n_layers]), &H);
    c->be->film_vjp(&x->dm, &p, x->pdim, x->K, a_idx(&a, x->i0, E), a_idx(&a, x->i1, E), H,
                    a_put(&a, ybar, E * p.dims[p.n_layers]), fb);
    if (x->K)
        a_get(&a, g[0], fb, E * x->K);
    a_free(&a);
}

static void case_film(const env *ev, const shape *s, int n_layers, int act, int n_rbf, int it)
{
    opx x;
    op_case c;
    ecenet_mlp_params *p = &x.mlp;
    const size_t E = (size_t)s->E;
    memset(&x, 0, sizeof x);
    x.dm = dims_of(s);
    x.pdim = irand(1, 4);
    x.K = n_rbf;
    x.w0 = hnormal((size_t)s->T * x.pdim, 1.0);
    x.w1 = hnormal((size_t)s->T * x.pdim, 1.0);
    x.i0 = hindex(E, s->T);
    x.i1 = hindex(E, s->T);
    p->n_layers = n_layers;
    p->T = s->T;
    p->act = act;
    p->dims[0] = 2 * x.pdim + n_rbf;
    for (int k = 1; k < n_layers; k++)
        p->dims[k] = irand(1, 7);
    p->dims[n_layers] = irand(1, 9);
    for (int k = 0; k < n_layers; k++) {
        p->w[k] = hnormal((size_t)p->dims[k + 1] * p->dims[k], 1.0 / sqrt(p->dims[k]));
        p->b[k] = hnormal((size_t)p->dims[k + 1], 0.3);
    }
    c = new_case(ev, "film", &x, film_fwd_cb, film_vjp_cb, E * p->dims[n_layers]);
    snprintf(c.desc, sizeof c.desc, "it=%d E=%zu T=%d P=%d n_rbf=%d layers=%d %s out=%d", it, E,
             s->T, x.pdim, n_rbf, n_layers, ACT_NAME[act], p->dims[n_layers]);
    if (n_rbf)
        add_in(&c, "fr", hnormal(E * n_rbf, 1.0), E * n_rbf);
    run_case(&c);
}

/* x: dm (E, Q, F = Fw), L = 1 if sbar is computed; inputs X, s */
static void cs_fwd_cb(const op_case *c, double *out)
{
    arena a = arena_of(c->be);
    const ecenet_dims *d = &c->x->dm;
    void *Y = a_put(&a, out, xsize(d));
    c->be->chan_scale_fwd(d->E, d->Q, d->F, a_put(&a, c->x->L ? c->in[1] : c->x->w0,
                                                  (size_t)d->E * d->F),
                          a_put(&a, c->in[0], xsize(d)), Y);
    a_get(&a, out, Y, xsize(d));
    a_free(&a);
}

static void cs_vjp_cb(const op_case *c, const double *ybar, double *const *g)
{
    arena a = arena_of(c->be);
    const ecenet_dims *d = &c->x->dm;
    const size_t ns = (size_t)d->E * d->F;
    void *Xb = a_put(&a, g[0], xsize(d)), *sb = c->x->L ? a_put(&a, g[1], ns) : NULL;
    c->be->chan_scale_vjp(d->E, d->Q, d->F, a_put(&a, c->x->L ? c->in[1] : c->x->w0, ns),
                          a_put(&a, c->in[0], xsize(d)), a_put(&a, ybar, xsize(d)), Xb, sb);
    a_get(&a, g[0], Xb, xsize(d));
    if (sb)
        a_get(&a, g[1], sb, ns);
    a_free(&a);
}

static void case_chan_scale(const env *ev, const shape *s, int with_sbar, int it)
{
    opx x;
    op_case c;
    size_t ns;
    memset(&x, 0, sizeof x);
    x.dm = dims_of(s);
    x.dm.F = irand(1, 11); /* Fw */
    x.L = with_sbar;
    ns = (size_t)s->E * x.dm.F;
    x.w0 = hnormal(ns, 1.0); /* s when it is not differentiated */
    c = new_case(ev, "chan_scale", &x, cs_fwd_cb, cs_vjp_cb, xsize(&x.dm));
    snprintf(c.desc, sizeof c.desc, "it=%d E=%lld Q=%d Fw=%d sbar=%s", it, (long long)s->E,
             x.dm.Q, x.dm.F, with_sbar ? "yes" : "NULL");
    add_in(&c, "X", hnormal(xsize(&x.dm), 1.0), xsize(&x.dm));
    if (with_sbar)
        add_in(&c, "s", hnormal(ns, 1.0), ns);
    run_case(&c);
}

void fam_film(const env *ev)
{
    static const int ACTS[] = {ECENET_ACT_SILU, ECENET_ACT_TANH, ECENET_ACT_GELU,
                               ECENET_ACT_IDENTITY};
    for (int it = 0; it < n_iter(ev); it++) {
        shape s;
        tu_rng_seed(seed_base() + 8000 + (uint64_t)it);
        s = shape_for(it);
        case_film(ev, &s, 1 + it % 3, ACTS[it % 4], it % 3 == 1 ? 0 : irand(1, 5), it);
        case_chan_scale(ev, &s, 1, it);
        case_chan_scale(ev, &s, 0, it);
        pool_free();
    }
}
