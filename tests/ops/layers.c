/* Layers: equivariant linear (SPEC §10), realspace (§11), the optional fused
 * layer and add (§12). */
#include "harness.h"

static size_t feat(const opx *x, int f) { return (size_t)x->dm.E * x->dm.Q * 2 * f; }

static ecenet_linear_params lin_dev(arena *a, const ecenet_linear_params *h)
{
    ecenet_linear_params p = *h;
    const size_t w = (size_t)h->Q * h->fout * h->fin;
    p.w = a_put(a, h->w, w);
    p.bias = a_put(a, h->bias, (size_t)h->fout);
    p.w_src = a_put(a, h->w_src, (size_t)h->T * w);
    p.w_tgt = a_put(a, h->w_tgt, (size_t)h->T * w);
    return p;
}

/* x: lin, i0 = tsrc, i1 = ttgt; input X */
static void lin_fwd_cb(const op_case *c, double *out)
{
    arena a = arena_of(c->be);
    const opx *x = c->x;
    ecenet_linear_params p = lin_dev(&a, &x->lin);
    void *Y = a_put(&a, out, feat(x, p.fout));
    c->be->linear_fwd(x->dm.E, &p, a_idx(&a, x->i0, (size_t)x->dm.E),
                      a_idx(&a, x->i1, (size_t)x->dm.E), a_put(&a, c->in[0], feat(x, p.fin)), Y);
    a_get(&a, out, Y, feat(x, p.fout));
    a_free(&a);
}

static void lin_vjp_cb(const op_case *c, const double *ybar, double *const *g)
{
    arena a = arena_of(c->be);
    const opx *x = c->x;
    ecenet_linear_params p = lin_dev(&a, &x->lin);
    void *Xb = a_put(&a, g[0], feat(x, p.fin));
    c->be->linear_vjp(x->dm.E, &p, a_idx(&a, x->i0, (size_t)x->dm.E),
                      a_idx(&a, x->i1, (size_t)x->dm.E), a_put(&a, ybar, feat(x, p.fout)), Xb);
    a_get(&a, g[0], Xb, feat(x, p.fin));
    a_free(&a);
}

/* variant bits: 1 bias, 2 w_src, 4 w_tgt */
static void case_linear(const env *ev, const shape *s, int variant, int it)
{
    opx x;
    op_case c;
    ecenet_linear_params *p = &x.lin;
    size_t w;
    memset(&x, 0, sizeof x);
    x.dm = dims_of(s);
    p->fin = irand(1, 11);
    p->fout = irand(1, 11);
    p->Q = x.dm.Q;
    p->T = s->T;
    w = (size_t)p->Q * p->fout * p->fin;
    p->w = hnormal(w, 1.0 / sqrt(p->fin));
    p->bias = variant & 1 ? hnormal((size_t)p->fout, 1.0) : NULL;
    p->w_src = variant & 2 ? hnormal((size_t)s->T * w, 0.3) : NULL;
    p->w_tgt = variant & 4 ? hnormal((size_t)s->T * w, 0.3) : NULL;
    x.i0 = hindex((size_t)s->E, s->T);
    x.i1 = hindex((size_t)s->E, s->T);
    c = new_case(ev, "linear", &x, lin_fwd_cb, lin_vjp_cb, feat(&x, p->fout));
    snprintf(c.desc, sizeof c.desc, "it=%d E=%lld Q=%d T=%d fin=%d fout=%d bias=%d src=%d tgt=%d",
             it, (long long)s->E, p->Q, p->T, p->fin, p->fout, variant & 1, !!(variant & 2),
             !!(variant & 4));
    add_in(&c, "X", hnormal(feat(&x, p->fin), 1.0), feat(&x, p->fin));
    run_case(&c);
}

static ecenet_realspace_params rs_dev(arena *a, const ecenet_realspace_params *h)
{
    ecenet_realspace_params p = *h;
    const size_t qg = (size_t)h->Q * h->G, tf = (size_t)h->T * h->F;
    p.cos_synth = a_put(a, h->cos_synth, qg);
    p.sin_synth = a_put(a, h->sin_synth, qg);
    p.cos_analysis = a_put(a, h->cos_analysis, qg);
    p.sin_analysis = a_put(a, h->sin_analysis, qg);
    p.scale = a_put(a, h->scale, (size_t)h->F);
    p.shift = a_put(a, h->shift, (size_t)h->F);
    p.scale_src = a_put(a, h->scale_src, tf);
    p.scale_tgt = a_put(a, h->scale_tgt, tf);
    p.shift_src = a_put(a, h->shift_src, tf);
    p.shift_tgt = a_put(a, h->shift_tgt, tf);
    return p;
}

/* x: rs, i0 = tsrc, i1 = ttgt; input X */
static void rs_fwd_cb(const op_case *c, double *out)
{
    arena a = arena_of(c->be);
    const opx *x = c->x;
    ecenet_realspace_params p = rs_dev(&a, &x->rs);
    void *Y = a_put(&a, out, feat(x, p.F));
    c->be->realspace_fwd(x->dm.E, &p, a_idx(&a, x->i0, (size_t)x->dm.E),
                         a_idx(&a, x->i1, (size_t)x->dm.E), a_put(&a, c->in[0], feat(x, p.F)), Y);
    a_get(&a, out, Y, feat(x, p.F));
    a_free(&a);
}

static void rs_vjp_cb(const op_case *c, const double *ybar, double *const *g)
{
    arena a = arena_of(c->be);
    const opx *x = c->x;
    ecenet_realspace_params p = rs_dev(&a, &x->rs);
    void *Xb = a_put(&a, g[0], feat(x, p.F));
    c->be->realspace_vjp(x->dm.E, &p, a_idx(&a, x->i0, (size_t)x->dm.E),
                         a_idx(&a, x->i1, (size_t)x->dm.E), a_put(&a, c->in[0], feat(x, p.F)),
                         a_put(&a, ybar, feat(x, p.F)), Xb);
    a_get(&a, g[0], Xb, feat(x, p.F));
    a_free(&a);
}

/* SPEC §11 grid matrices */
static void rs_grids(ecenet_realspace_params *p)
{
    const int Q = p->Q, G = p->G;
    double *cs = hnew((size_t)Q * G), *ss = hnew((size_t)Q * G);
    double *ca = hnew((size_t)Q * G), *sa = hnew((size_t)Q * G);
    for (int m = 0; m < Q; m++)
        for (int k = 0; k < G; k++) {
            double th = 2.0 * M_PI * k / G, w = m ? 2.0 / G : 1.0 / G;
            cs[m * G + k] = cos(m * th);
            ss[m * G + k] = sin(m * th);
            ca[k * Q + m] = w * cos(m * th);
            sa[k * Q + m] = w * sin(m * th);
        }
    p->cos_synth = cs;
    p->sin_synth = ss;
    p->cos_analysis = ca;
    p->sin_analysis = sa;
}

static double opt(const void *a, size_t i, double dflt) { return a ? ((const double *)a)[i] : dflt; }

/* smallest |pre-activation| over the grid (host evaluation of SPEC §11) */
static double rs_min_pre(const opx *x, const double *X)
{
    const ecenet_realspace_params *p = &x->rs;
    const double *cs = p->cos_synth, *ss = p->sin_synth;
    double mn = INFINITY;
    for (int64_t e = 0; e < x->dm.E; e++)
        for (int f = 0; f < p->F; f++) {
            size_t ts = (size_t)x->i0[e] * p->F + f, tt = (size_t)x->i1[e] * p->F + f;
            double sc = opt(p->scale, f, 1.0) + opt(p->scale_src, ts, 0.0) + opt(p->scale_tgt, tt, 0.0);
            double sh = opt(p->shift, f, 0.0) + opt(p->shift_src, ts, 0.0) + opt(p->shift_tgt, tt, 0.0);
            for (int k = 0; k < p->G; k++) {
                double v = 0.0;
                for (int m = 0; m < p->Q; m++)
                    v += X[((e * p->Q + m) * 2) * p->F + f] * cs[m * p->G + k] +
                         X[((e * p->Q + m) * 2 + 1) * p->F + f] * ss[m * p->G + k];
                mn = fmin(mn, fabs(sc * v + sh));
            }
        }
    return mn;
}

/* variant bits: 1 scale/shift, 2 *_src, 4 *_tgt */
static void case_realspace(const env *ev, const shape *s, int act, int variant, int it)
{
    opx x;
    op_case c;
    ecenet_realspace_params *p = &x.rs;
    double *X;
    size_t tf;
    int tries = 0;
    memset(&x, 0, sizeof x);
    x.dm = dims_of(s);
    p->F = x.dm.F = irand(1, 9);
    p->Q = x.dm.Q;
    p->G = s->G;
    p->T = s->T;
    p->act = act;
    rs_grids(p);
    tf = (size_t)p->T * p->F;
    if (variant & 1) {
        p->scale = huniform((size_t)p->F, 0.5, 1.5);
        p->shift = hnormal((size_t)p->F, 0.3);
    }
    if (variant & 2) {
        p->scale_src = hnormal(tf, 0.2);
        p->shift_src = hnormal(tf, 0.2);
    }
    if (variant & 4) {
        p->scale_tgt = hnormal(tf, 0.2);
        p->shift_tgt = hnormal(tf, 0.2);
    }
    x.i0 = hindex((size_t)s->E, s->T);
    x.i1 = hindex((size_t)s->E, s->T);
    do { /* relu: keep every grid value away from the kink */
        X = hnormal(feat(&x, p->F), 1.0);
        ck_assert_int_lt(tries++, 200);
    } while (act == ECENET_ACT_RELU && rs_min_pre(&x, X) < 1e-4);
    c = new_case(ev, "realspace", &x, rs_fwd_cb, rs_vjp_cb, feat(&x, p->F));
    if (act == ECENET_ACT_RELU)
        c.h = 1e-7;
    snprintf(c.desc, sizeof c.desc, "it=%d E=%lld F=%d Q=%d G=%d T=%d %s affine=%d src=%d tgt=%d",
             it, (long long)s->E, p->F, p->Q, p->G, p->T, ACT_NAME[act], variant & 1,
             !!(variant & 2), !!(variant & 4));
    add_in(&c, "X", X, feat(&x, p->F));
    run_case(&c);
}

/* Optional fused layer: X -> X + RealSpace(Linear(X)) with Z = Linear(X) saved;
 * layer_vjp turns the cotangent in place into Xbar + Linearᵀ(RealSpace_vjp(Z, Xbar)). */
/* x: lin, rs, i0 = tsrc, i1 = ttgt; input X */
static void ly_run(const op_case *c, arena *a, void *X, void **Z)
{
    const opx *x = c->x;
    ecenet_linear_params lp = lin_dev(a, &x->lin);
    ecenet_realspace_params rp = rs_dev(a, &x->rs);
    *Z = a_raw(a, feat(x, x->rs.F));
    c->be->layer_fwd(x->dm.E, &lp, &rp, a_idx(a, x->i0, (size_t)x->dm.E),
                     a_idx(a, x->i1, (size_t)x->dm.E), X, *Z);
}

static void ly_fwd_cb(const op_case *c, double *out)
{
    arena a = arena_of(c->be);
    const size_t n = feat(c->x, c->x->rs.F);
    void *X = a_put(&a, c->in[0], n), *Z;
    ly_run(c, &a, X, &Z);
    a_get(&a, out, X, n);
    a_free(&a);
}

static void ly_vjp_cb(const op_case *c, const double *ybar, double *const *g)
{
    arena a = arena_of(c->be);
    const opx *x = c->x;
    const size_t n = feat(x, x->rs.F);
    ecenet_linear_params lp = lin_dev(&a, &x->lin);
    ecenet_realspace_params rp = rs_dev(&a, &x->rs);
    double *r = a_host(&a, n);
    void *Z, *Xb = a_put(&a, ybar, n);
    ly_run(c, &a, a_put(&a, c->in[0], n), &Z);
    c->be->layer_vjp(x->dm.E, &lp, &rp, a_idx(&a, x->i0, (size_t)x->dm.E),
                     a_idx(&a, x->i1, (size_t)x->dm.E), Z, Xb, a_raw(&a, n));
    a_get(&a, r, Xb, n);
    for (size_t i = 0; i < n; i++) /* the op works in place on the cotangent */
        g[0][i] += r[i];
    a_free(&a);
}

static void case_layer(const env *ev, const shape *s, int act, int it)
{
    opx x;
    op_case c;
    size_t w;
    if (!ev->be->layer_fwd || !ev->be->layer_vjp) {
        ck_assert_msg(!ev->be->layer_fwd && !ev->be->layer_vjp,
                      "layer_fwd and layer_vjp must be provided together");
        return; /* optional: the orchestration composes linear, realspace and add */
    }
    memset(&x, 0, sizeof x);
    x.dm = dims_of(s);
    x.dm.F = irand(1, 9);
    x.lin.fin = x.lin.fout = x.rs.F = x.dm.F;
    x.lin.Q = x.rs.Q = x.dm.Q;
    x.lin.T = x.rs.T = s->T;
    w = (size_t)x.dm.Q * x.dm.F * x.dm.F;
    x.lin.w = hnormal(w, 1.0 / sqrt(x.dm.F));
    x.lin.bias = hnormal((size_t)x.dm.F, 0.5);
    x.lin.w_src = it % 2 ? hnormal((size_t)s->T * w, 0.3) : NULL;
    x.rs.G = s->G;
    x.rs.act = act;
    rs_grids(&x.rs);
    x.i0 = hindex((size_t)s->E, s->T);
    x.i1 = hindex((size_t)s->E, s->T);
    c = new_case(ev, "layer (fused)", &x, ly_fwd_cb, ly_vjp_cb, feat(&x, x.dm.F));
    snprintf(c.desc, sizeof c.desc, "it=%d E=%lld F=%d Q=%d G=%d %s", it, (long long)s->E,
             x.dm.F, x.dm.Q, x.rs.G, ACT_NAME[act]);
    add_in(&c, "X", hnormal(feat(&x, x.dm.F), 1.0), feat(&x, x.dm.F));
    run_case(&c);
}

static void check_add(const env *ev, size_t n)
{
    arena a = arena_of(ev->be);
    double *X = hnormal(n + 1, 1.0), *Y = hnormal(n + 1, 1.0), *out = hnew(n + 1);
    void *Yd = a_put(&a, Y, n + 1);
    ev->be->add((int64_t)n, a_put(&a, X, n + 1), Yd); /* element n must stay */
    a_get(&a, out, Yd, n + 1);
    a_free(&a);
    for (size_t i = 0; i <= n; i++)
        ck_assert_msg(out[i] == (i < n ? Y[i] + X[i] : Y[i]), "add (n=%zu): Y[%zu] = %.17g", n, i,
                      out[i]);
}

void fam_layers(const env *ev)
{
    if (!ev->be->layer_fwd)
        printf("[%s] layer_fwd/layer_vjp not provided (optional): fused-layer check skipped\n",
               ev->ent->name);
    for (int it = 0; it < n_iter(ev); it++) {
        shape s;
        tu_rng_seed(seed_base() + 5000 + (uint64_t)it);
        s = shape_for(it);
        case_linear(ev, &s, it % 8, it);
        case_linear(ev, &s, (it + 3) % 8, it);
        case_realspace(ev, &s, it % 5, it % 8, it);
        case_realspace(ev, &s, (it + 1) % 5, (it / 2 + 5) % 8, it);
        check_add(ev, (size_t)s.E * 7);
        case_layer(ev, &s, it % 2 ? ECENET_ACT_TANH : ECENET_ACT_SILU, it);
        pool_free();
    }
}
