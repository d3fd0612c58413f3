/* Message passing (SPEC §13) and the research attention weights (§17.3
 * steps 4-5). */
#include "harness.h"

static size_t gsize(const ecenet_dims *d) { return (size_t)d->E * d->B * d->S; }
static size_t delta_size(const ecenet_dims *d) { return (size_t)d->N * d->B * d->S; }

/* inputs X, D -> g */
static void pk_fwd_cb(const op_case *c, double *out)
{
    arena a = arena_of(c->be);
    const ecenet_dims *d = &c->x->dm;
    void *g = a_put(&a, out, gsize(d));
    c->be->mp_pack_unrotate_fwd(d, a_put(&a, c->in[0], xsize(d)), a_put(&a, c->in[1], dsize(d)), g,
                                NULL);
    a_get(&a, out, g, gsize(d));
    a_free(&a);
}

static void pk_vjp_cb(const op_case *c, const double *ybar, double *const *g)
{
    arena a = arena_of(c->be);
    const ecenet_dims *d = &c->x->dm;
    void *Xb = a_put(&a, g[0], xsize(d)), *Db = a_put(&a, g[1], dsize(d));
    c->be->mp_pack_unrotate_vjp(d, a_put(&a, c->in[0], xsize(d)), a_put(&a, c->in[1], dsize(d)),
                                a_put(&a, ybar, gsize(d)), Xb, Db);
    a_get(&a, g[0], Xb, xsize(d));
    a_get(&a, g[1], Db, dsize(d));
    a_free(&a);
}

/* x: K, i0 = tsrc, i1 = ttgt, w0 = W_msg (T,T,K,B); input fr -> w (E,F), the same for every l */
static void wt_fwd_cb(const op_case *c, double *out)
{
    arena a = arena_of(c->be);
    const ecenet_dims *d = &c->x->dm;
    const size_t E = (size_t)d->E, K = (size_t)c->x->K;
    void *w = a_put(&a, out, E * d->F);
    c->be->mp_weight_fwd(d, c->x->K, a_idx(&a, c->x->i0, E), a_idx(&a, c->x->i1, E),
                         a_put(&a, c->in[0], E * K),
                         a_put(&a, c->x->w0, (size_t)d->T * d->T * K * d->B), w);
    a_get(&a, out, w, E * d->F);
    a_free(&a);
}

static void wt_vjp_cb(const op_case *c, const double *ybar, double *const *g)
{
    arena a = arena_of(c->be);
    const ecenet_dims *d = &c->x->dm;
    const size_t E = (size_t)d->E, K = (size_t)c->x->K;
    void *fb = a_put(&a, g[0], E * K);
    c->be->mp_weight_vjp(d, c->x->K, a_idx(&a, c->x->i0, E), a_idx(&a, c->x->i1, E),
                         a_put(&a, c->x->w0, (size_t)d->T * d->T * K * d->B),
                         a_put(&a, ybar, E * d->F), fb);
    a_get(&a, g[0], fb, E * K);
    a_free(&a);
}

/* x: ej = edge_j; inputs g (E,B,S), w (E,F) -> Delta */
static void sc_fwd_cb(const op_case *c, double *out)
{
    arena a = arena_of(c->be);
    const ecenet_dims *d = &c->x->dm;
    ecenet_dims dd = dims_dev(&a, c->x);
    void *D = a_put(&a, out, delta_size(d));
    c->be->mp_scatter_fwd(&dd, a_idx(&a, c->x->ej, (size_t)d->E), a_put(&a, c->in[0], gsize(d)),
                          a_put(&a, c->in[1], (size_t)d->E * d->F), D);
    a_get(&a, out, D, delta_size(d));
    a_free(&a);
}

static void sc_vjp_cb(const op_case *c, const double *ybar, double *const *g)
{
    arena a = arena_of(c->be);
    const ecenet_dims *d = &c->x->dm;
    void *gb = a_put(&a, g[0], gsize(d)), *wb = a_put(&a, g[1], (size_t)d->E * d->F);
    ecenet_dims dd = dims_dev(&a, c->x);
    c->be->mp_scatter_vjp(&dd, a_idx(&a, c->x->ej, (size_t)d->E), a_put(&a, c->in[0], gsize(d)),
                          a_put(&a, c->in[1], (size_t)d->E * d->F),
                          a_put(&a, ybar, delta_size(d)), gb, wb);
    a_get(&a, g[0], gb, gsize(d));
    a_get(&a, g[1], wb, (size_t)d->E * d->F);
    a_free(&a);
}

/* x: ei = edge_i; inputs Delta, D; X += unpack(Delta[edge_i]·D) */
static void ru_fwd_cb(const op_case *c, double *out)
{
    arena a = arena_of(c->be);
    const ecenet_dims *d = &c->x->dm;
    ecenet_dims dd = dims_dev(&a, c->x);
    void *X = a_put(&a, out, xsize(d));
    c->be->mp_rotate_unpack_fwd(&dd, a_idx(&a, c->x->ei, (size_t)d->E),
                                a_put(&a, c->in[0], delta_size(d)), a_put(&a, c->in[1], dsize(d)),
                                X);
    a_get(&a, out, X, xsize(d));
    a_free(&a);
}

static void ru_vjp_cb(const op_case *c, const double *ybar, double *const *g)
{
    arena a = arena_of(c->be);
    const ecenet_dims *d = &c->x->dm;
    void *Deb = a_put(&a, g[0], delta_size(d)), *Db = a_put(&a, g[1], dsize(d));
    ecenet_dims dd = dims_dev(&a, c->x);
    c->be->mp_rotate_unpack_vjp(&dd, a_idx(&a, c->x->ei, (size_t)d->E),
                                a_put(&a, c->in[0], delta_size(d)), a_put(&a, c->in[1], dsize(d)),
                                a_put(&a, ybar, xsize(d)), Deb, Db);
    a_get(&a, g[0], Deb, delta_size(d));
    a_get(&a, g[1], Db, dsize(d));
    a_free(&a);
}

/* the unpack adds 0 to slots without an SH component: they keep X0 exactly */
static void ru_invalid_kept(const op_case *c)
{
    const ecenet_dims *d = &c->x->dm;
    double *X = hnew(xsize(d));
    eval_fwd(c, X);
    for (int64_t e = 0; e < d->E; e++)
        for (int m = 0; m < d->Q; m++)
            for (int p = 0; p < 2; p++)
                for (int f = 0; f < d->F; f++) {
                    size_t q = (size_t)(((e * d->Q + m) * 2 + p) * d->F + f);
                    if (!slot_valid(d, m, p, f))
                        ck_assert_msg(X[q] == c->out_init[q],
                                      "mp_rotate_unpack_fwd (%s): invalid slot e=%lld m=%d p=%d "
                                      "f=%d changed", c->desc, (long long)e, m, p, f);
                }
}

static void case_mp(const env *ev, const shape *s, int it)
{
    opx x;
    op_case c;
    const size_t E = (size_t)s->E;
    char desc[160];
    memset(&x, 0, sizeof x);
    x.dm = dims_of(s);
    x.K = s->K;
    x.ei = hindex(E, s->N);
    x.ej = hindex(E, s->N);
    snprintf(desc, sizeof desc, "it=%d N=%lld E=%zu T=%d L=%d M=%d C=%d K=%d", it,
             (long long)s->N, E, s->T, s->L, s->M, s->C, s->K);

    c = new_case(ev, "mp_pack_unrotate", &x, pk_fwd_cb, pk_vjp_cb, gsize(&x.dm));
    strcpy(c.desc, desc);
    add_in(&c, "X", hnormal(xsize(&x.dm), 1.0), xsize(&x.dm));
    add_in(&c, "D", hnormal(dsize(&x.dm), 1.0), dsize(&x.dm));
    run_case(&c);

    c = new_case(ev, "mp_scatter", &x, sc_fwd_cb, sc_vjp_cb, delta_size(&x.dm));
    strcpy(c.desc, desc);
    c.empty = E == 0;
    add_in(&c, "g", hnormal(gsize(&x.dm), 1.0), gsize(&x.dm));
    add_in(&c, "w", hnormal(E * x.dm.F, 1.0), E * x.dm.F);
    run_case(&c);

    c = new_case(ev, "mp_rotate_unpack", &x, ru_fwd_cb, ru_vjp_cb, xsize(&x.dm));
    strcpy(c.desc, desc);
    c.out_init = hnormal(xsize(&x.dm), 1.0);
    c.empty = E == 0;
    add_in(&c, "Delta", hnormal(delta_size(&x.dm), 1.0), delta_size(&x.dm));
    add_in(&c, "D", hnormal(dsize(&x.dm), 1.0), dsize(&x.dm));
    run_case(&c);
    ru_invalid_kept(&c);
}

static void case_mp_weight(const env *ev, const shape *s, int it)
{
    opx x;
    op_case c;
    const size_t E = (size_t)s->E;
    memset(&x, 0, sizeof x);
    x.dm = dims_of(s);
    x.K = s->K;
    x.i0 = hindex(E, s->T);
    x.i1 = hindex(E, s->T);
    x.w0 = hnormal((size_t)s->T * s->T * s->K * x.dm.B, 1.0);
    c = new_case(ev, "mp_weight", &x, wt_fwd_cb, wt_vjp_cb, E * x.dm.F);
    snprintf(c.desc, sizeof c.desc, "it=%d E=%zu T=%d B=%d K=%d", it, E, s->T, x.dm.B, s->K);
    add_in(&c, "fr", hnormal(E * s->K, 1.0), E * s->K);
    run_case(&c);
}

/* ---- research attention weights (SPEC §17.3 steps 4-5) ---- */

static int attn_slots(const opx *x) { return x->heads * (x->lattn ? x->dm.L + 1 : 1); }

/* x: heads, lattn, mode, env, ej = edge_j; inputs scores (E,K), fc (E) -> w (E,F);
 * the softmax weights a (E,K) land in *ad and the (N, 4K) scratch in *tmp */
static void at_run(const op_case *c, arena *a, void *w, void **ad, void **tmp)
{
    const opx *x = c->x;
    const size_t E = (size_t)x->dm.E, K = (size_t)attn_slots(x);
    ecenet_dims dd = dims_dev(a, x);
    *ad = a_raw(a, E * K);
    *tmp = a_raw(a, (size_t)x->dm.N * 4 * K); /* ops.h: (N, 4K) scratch */
    c->be->mp_attn_weight_fwd(&dd, x->heads, x->lattn, x->mode, x->env, a_idx(a, x->ej, E),
                              a_put(a, c->in[0], E * K), a_put(a, c->in[1], E), *ad, w, *tmp);
}

static void at_fwd_cb(const op_case *c, double *out)
{
    arena a = arena_of(c->be);
    const size_t nw = (size_t)c->x->dm.E * c->x->dm.F;
    void *w = a_put(&a, out, nw), *ad, *tmp;
    at_run(c, &a, w, &ad, &tmp);
    a_get(&a, out, w, nw);
    a_free(&a);
}

static void at_vjp_cb(const op_case *c, const double *ybar, double *const *g)
{
    arena a = arena_of(c->be);
    const opx *x = c->x;
    const size_t E = (size_t)x->dm.E, K = (size_t)attn_slots(x);
    void *ad, *tmp, *sb = a_put(&a, g[0], E * K), *fb = a_put(&a, g[1], E);
    ecenet_dims dd = dims_dev(&a, x);
    at_run(c, &a, a_raw(&a, E * x->dm.F), &ad, &tmp);
    c->be->mp_attn_weight_vjp(&dd, x->heads, x->lattn, x->mode, x->env, a_idx(&a, x->ej, E),
                              a_put(&a, c->in[0], E * K), a_put(&a, c->in[1], E), ad,
                              a_put(&a, ybar, E * x->dm.F), tmp, sb, fb);
    a_get(&a, g[0], sb, E * K);
    a_get(&a, g[1], fb, E);
    a_free(&a);
}

/* a and w against SPEC §17.3 / ops.h, evaluated on the host */
static void at_values(const op_case *c)
{
    const opx *x = c->x;
    const int K = attn_slots(x), L1 = x->dm.L + 1, hb = x->dm.B / x->heads;
    const size_t E = (size_t)x->dm.E;
    const double *sc = c->in[0], *fc = c->in[1];
    arena a = arena_of(c->be);
    double *w = a_host(&a, E * x->dm.F), *av = a_host(&a, E * K);
    void *wd = a_raw(&a, E * x->dm.F), *ad, *tmp;
    at_run(c, &a, wd, &ad, &tmp);
    a_get(&a, w, wd, E * x->dm.F);
    a_get(&a, av, ad, E * K);
    for (size_t e = 0; e < E; e++)
        for (int k = 0; k < K; k++) {
            double want = sc[e * K + k] * fc[e];
            if (x->mode == ECENET_ATTN_SOFTMAX) {
                double M = -INFINITY, Z = 0.0;
                for (size_t q = 0; q < E; q++)
                    if (x->ej[q] == x->ej[e])
                        M = fmax(M, sc[q * K + k]);
                for (size_t q = 0; q < E; q++)
                    if (x->ej[q] == x->ej[e])
                        Z += exp(sc[q * K + k] - M) * fc[q];
                want = exp(sc[e * K + k] - M) * fc[e] / (Z + 1e-6) * (x->env ? fc[e] : 1.0);
            }
            ck_assert_msg(fabs(av[e * K + k] - want) <= 1e-13 * (1.0 + fabs(want)),
                          "mp_attn_weight_fwd (%s): a[%zu][%d] = %.17g, expected %.17g", c->desc,
                          e, k, av[e * K + k], want);
        }
    for (size_t e = 0; e < E; e++)
        for (int b = 0; b < x->dm.B; b++)
            for (int l = 0; l < L1; l++) {
                int k = (b / hb) * (x->lattn ? L1 : 1) + (x->lattn ? l : 0);
                ck_assert_msg(w[e * x->dm.F + b * L1 + l] == av[e * K + k],
                              "mp_attn_weight_fwd (%s): w[%zu][b=%d,l=%d] is not a[%d]", c->desc,
                              e, b, l, k);
            }
    a_free(&a);
}

static void case_attn(const env *ev, const shape *s, int it)
{
    opx x;
    op_case c;
    const size_t E = (size_t)s->E;
    int divs[8], nd = 0;
    memset(&x, 0, sizeof x);
    x.dm = dims_of(s);
    for (int h = 1; h <= x.dm.B; h++)
        if (x.dm.B % h == 0)
            divs[nd++] = h;
    x.heads = divs[irand(0, nd - 1)];
    x.lattn = it % 2;
    x.mode = (it / 2) % 2 ? ECENET_ATTN_SOFTMAX : ECENET_ATTN_SUM;
    x.env = (it / 4) % 2;
    x.ej = hindex(E, s->N);
    x.ei = hindex(E, s->N);
    c = new_case(ev, "mp_attn_weight", &x, at_fwd_cb, at_vjp_cb, E * x.dm.F);
    snprintf(c.desc, sizeof c.desc, "it=%d N=%lld E=%zu B=%d L=%d heads=%d l_attn=%d %s env=%d",
             it, (long long)s->N, E, x.dm.B, s->L, x.heads, x.lattn,
             x.mode == ECENET_ATTN_SOFTMAX ? "softmax" : "sum", x.env);
    add_in(&c, "scores", hnormal(E * attn_slots(&x), 1.5), E * attn_slots(&x));
    add_in(&c, "fc", huniform(E, 0.05, 1.0), E); /* an envelope: > 0 keeps Z + 1e-6 away from 0 */
    run_case(&c);
    at_values(&c);
}

void fam_mp(const env *ev)
{
    for (int it = 0; it < n_iter(ev); it++) {
        shape s;
        tu_rng_seed(seed_base() + 6000 + (uint64_t)it);
        s = shape_for(it);
        case_mp(ev, &s, it);
        case_mp_weight(ev, &s, it);
        case_attn(ev, &s, it);
        pool_free();
    }
}
