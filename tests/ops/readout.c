/* Readout (SPEC §14): mlp, energy. */
#include "harness.h"

/* x: mlp, i0 = tsrc, i1 = ttgt; input X; H saved into *Hd (device) */
static void mlp_run(const op_case *c, arena *a, const ecenet_mlp_params *p, void *y, void **Hd)
{
    const opx *x = c->x;
    const size_t E = (size_t)x->dm.E;
    *Hd = a_raw(a, E * mlp_hidden(p));
    c->be->mlp_fwd(&x->dm, p, a_idx(a, x->i0, E), a_idx(a, x->i1, E),
                   a_put(a, c->in[0], xsize(&x->dm)), *Hd, y);
}

static void mlp_fwd_cb(const op_case *c, double *out)
{
    arena a = arena_of(c->be);
    ecenet_mlp_params p = mlp_dev(&a, &c->x->mlp);
    const size_t ny = (size_t)c->x->dm.E * p.dims[p.n_layers];
    void *y = a_put(&a, out, ny), *H;
    mlp_run(c, &a, &p, y, &H);
    a_get(&a, out, y, ny);
    a_free(&a);
}

static void mlp_vjp_cb(const op_case *c, const double *ybar, double *const *g)
{
    arena a = arena_of(c->be);
    const opx *x = c->x;
    const size_t E = (size_t)x->dm.E;
    ecenet_mlp_params p = mlp_dev(&a, &x->mlp);
    void *H, *Xb = a_put(&a, g[0], xsize(&x->dm));
    mlp_run(c, &a, &p, a_raw(&a, E * p.dims[p.n_layers]), &H);
    c->be->mlp_vjp(&x->dm, &p, a_idx(&a, x->i0, E), a_idx(&a, x->i1, E), H,
                   a_put(&a, ybar, E * p.dims[p.n_layers]), Xb);
    a_get(&a, g[0], Xb, xsize(&x->dm));
    a_free(&a);
}

/* smallest |saved pre-activation| */
static double mlp_min_h(const op_case *c)
{
    arena a = arena_of(c->be);
    ecenet_mlp_params p = mlp_dev(&a, &c->x->mlp);
    const size_t E = (size_t)c->x->dm.E, nh = E * mlp_hidden(&p);
    double *H = a_host(&a, nh), mn;
    void *Hd;
    mlp_run(c, &a, &p, a_raw(&a, E * p.dims[p.n_layers]), &Hd);
    a_get(&a, H, Hd, nh);
    mn = nh ? fabs(H[0]) : INFINITY;
    for (size_t i = 0; i < nh; i++)
        mn = fmin(mn, fabs(H[i]));
    a_free(&a);
    return mn;
}

/* variant bits: 1 w_src, 2 w_tgt */
static void case_mlp(const env *ev, const shape *s, int n_layers, int act, int variant, int it)
{
    opx x;
    op_case c;
    ecenet_mlp_params *p = &x.mlp;
    int tries = 0;
    memset(&x, 0, sizeof x);
    x.dm = dims_of(s);
    x.dm.F = irand(1, 9); /* the op reads dims[0] = F channels of slot (m=0, cos) */
    p->n_layers = n_layers;
    p->T = s->T;
    p->act = act;
    p->dims[0] = x.dm.F;
    for (int k = 1; k < n_layers; k++)
        p->dims[k] = irand(1, 7);
    p->dims[n_layers] = irand(1, 4);
    for (int k = 0; k < n_layers; k++) {
        const size_t w = (size_t)p->dims[k + 1] * p->dims[k];
        p->w[k] = hnormal(w, 1.0 / sqrt(p->dims[k]));
        p->b[k] = hnormal((size_t)p->dims[k + 1], 0.3);
        p->w_src[k] = variant & 1 ? hnormal((size_t)s->T * w, 0.3) : NULL;
        p->w_tgt[k] = variant & 2 ? hnormal((size_t)s->T * w, 0.3) : NULL;
    }
    x.i0 = hindex((size_t)s->E, s->T);
    x.i1 = hindex((size_t)s->E, s->T);
    c = new_case(ev, "mlp", &x, mlp_fwd_cb, mlp_vjp_cb, (size_t)s->E * p->dims[n_layers]);
    snprintf(c.desc, sizeof c.desc, "it=%d E=%lld F=%d Q=%d layers=%d %s src=%d tgt=%d", it,
             (long long)s->E, x.dm.F, x.dm.Q, n_layers, ACT_NAME[act], variant & 1,
             !!(variant & 2));
    add_in(&c, "X", hnormal(xsize(&x.dm), 1.0), xsize(&x.dm));
    if (act == ECENET_ACT_RELU) { /* keep hidden pre-activations off the kink */
        c.h = 1e-7;
        while (mlp_min_h(&c) < 1e-3) {
            ck_assert_int_lt(tries++, 200);
            for (size_t i = 0; i < c.in_n[0]; i++)
                c.in[0][i] = tu_normal();
        }
    }
    run_case(&c);
}

/* x: n = E, K; inputs y, fr -> eps; energy_vjp is d Σ eps (cotangent 1) */
static void en_fwd_cb(const op_case *c, double *out)
{
    arena a = arena_of(c->be);
    const size_t E = (size_t)c->x->n, K = (size_t)c->x->K;
    void *eps = a_put(&a, out, E);
    c->be->energy_fwd(c->x->n, c->x->K, a_put(&a, c->in[0], E * K), a_put(&a, c->in[1], E * K),
                      eps);
    a_get(&a, out, eps, E);
    a_free(&a);
}

static void en_vjp_cb(const op_case *c, const double *ybar, double *const *g)
{
    arena a = arena_of(c->be);
    const size_t E = (size_t)c->x->n, K = (size_t)c->x->K;
    void *yb = a_put(&a, g[0], E * K), *fb = a_put(&a, g[1], E * K);
    for (size_t e = 0; e < E; e++)
        ck_assert(ybar[e] == 1.0);
    c->be->energy_vjp(c->x->n, c->x->K, a_put(&a, c->in[0], E * K), a_put(&a, c->in[1], E * K),
                      yb, fb);
    a_get(&a, g[0], yb, E * K);
    a_get(&a, g[1], fb, E * K);
    a_free(&a);
}

static void case_energy(const env *ev, const shape *s, int it)
{
    opx x;
    op_case c;
    const size_t E = (size_t)s->E, K = (size_t)s->K;
    memset(&x, 0, sizeof x);
    x.n = s->E;
    x.K = s->K;
    c = new_case(ev, "energy", &x, en_fwd_cb, en_vjp_cb, E);
    c.ybar_ones = 1;
    snprintf(c.desc, sizeof c.desc, "it=%d E=%zu K=%zu", it, E, K);
    add_in(&c, "y", hnormal(E * K, 1.0), E * K);
    add_in(&c, "fr", hnormal(E * K, 1.0), E * K);
    run_case(&c);
}

void fam_readout(const env *ev)
{
    for (int it = 0; it < n_iter(ev); it++) {
        shape s;
        tu_rng_seed(seed_base() + 7000 + (uint64_t)it);
        s = shape_for(it);
        case_mlp(ev, &s, 1 + it % 3, it % 5, it % 4, it);
        case_mlp(ev, &s, 1 + (it + 1) % 3, (it + 2) % 5, (it + 1) % 4, it);
        case_energy(ev, &s, it);
        pool_free();
    }
}
