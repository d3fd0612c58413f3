/* Pair geometry with the strain (SPEC §2, §2.5), radial basis (§3), spherical harmonics (§4):
 * pair_geom, dist_vjp, radial, sph. */
#include "harness.h"

/* pos' = pos + pos·ε, shift' = shift + shift·ε */
static void strain(const double *x, const double *eps, size_t n, double *y)
{
    for (size_t i = 0; i < n; i++)
        for (int a = 0; a < 3; a++) {
            double v = x[3 * i + a];
            for (int b = 0; b < 3; b++)
                v += x[3 * i + b] * eps[3 * b + a];
            y[3 * i + a] = v;
        }
}

/* inputs: pos (N,3), ε (3,3); output (d (n,3), r (n)) */
static void pg_run(const op_case *c, arena *a, void **d, void **r, double *out)
{
    const opx *x = c->x;
    const size_t n = (size_t)x->n, N = (size_t)x->dm.N;
    double *ps = a_host(a, 3 * N), *ss = a_host(a, 3 * n);
    strain(c->in[0], c->in[1], N, ps);
    strain(x->w0, c->in[1], n, ss);
    *d = out ? a_put(a, out, 3 * n) : a_raw(a, 3 * n);
    *r = out ? a_put(a, out + 3 * n, n) : a_raw(a, n);
    c->be->pair_geom_fwd(x->n, a_idx(a, x->i0, n), a_idx(a, x->i1, n), a_put(a, ss, 3 * n),
                         a_put(a, ps, 3 * N), *d, *r);
}

static void pg_fwd(const op_case *c, double *out)
{
    arena a = arena_of(c->be);
    void *d, *r;
    const size_t n = (size_t)c->x->n;
    pg_run(c, &a, &d, &r, out);
    a_get(&a, out, d, 3 * n);
    a_get(&a, out + 3 * n, r, n);
    a_free(&a);
}

/* d̄ = ȳ_d + dist_vjp(ȳ_r); pair_geom_vjp -> pos̄, virial (= ∂/∂ε at ε = 0) */
static void pg_vjp(const op_case *c, const double *ybar, double *const *g)
{
    arena a = arena_of(c->be);
    const opx *x = c->x;
    const size_t n = (size_t)x->n, N = (size_t)x->dm.N;
    void *d, *r, *dbar, *pb, *vir;
    ecenet_csr by_src, by_dst;
    for (int q = 0; q < 9; q++)
        ck_assert(c->in[1][q] == 0.0); /* the VJP is taken at ε = 0 */
    pg_run(c, &a, &d, &r, NULL);
    dbar = a_put(&a, ybar, 3 * n);
    c->be->dist_vjp(x->n, d, r, a_put(&a, ybar + 3 * n, n), dbar);
    pb = a_put(&a, g[0], 3 * N);
    vir = a_put(&a, g[1], 9);
    by_src = csr_dev(&a, x->i0, n, x->dm.N);
    by_dst = csr_dev(&a, x->i1, n, x->dm.N);
    c->be->pair_geom_vjp(x->n, a_idx(&a, x->i0, n), a_idx(&a, x->i1, n), &by_src, &by_dst, d, dbar,
                         pb, vir);
    a_get(&a, g[0], pb, 3 * N);
    a_get(&a, g[1], vir, 9);
    a_free(&a);
}

static void pg_values(const op_case *c)
{
    const opx *x = c->x;
    const size_t n = (size_t)x->n;
    double *out = hnew(4 * n);
    eval_fwd(c, out);
    for (size_t k = 0; k < n; k++) {
        double dd[3], rr;
        for (int a = 0; a < 3; a++) {
            dd[a] = c->in[0][3 * x->i1[k] + a] - c->in[0][3 * x->i0[k] + a] + x->w0[3 * k + a];
            ck_assert_msg(fabs(out[3 * k + a] - dd[a]) <= 1e-14 * (1.0 + fabs(dd[a])),
                          "pair_geom_fwd (%s): d[%zu][%d] = %.17g, expected %.17g", c->desc, k,
                          a, out[3 * k + a], dd[a]);
        }
        rr = sqrt(dd[0] * dd[0] + dd[1] * dd[1] + dd[2] * dd[2] + 1e-30);
        ck_assert_msg(fabs(out[3 * n + k] - rr) <= 1e-14 * rr,
                      "pair_geom_fwd (%s): r[%zu] = %.17g, expected %.17g", c->desc, k,
                      out[3 * n + k], rr);
    }
}

/* virial = NULL (allowed by ops.h) gives the same pos_bar */
static void pg_virial_null(const op_case *c)
{
    arena a = arena_of(c->be);
    const opx *x = c->x;
    const size_t n = (size_t)x->n, N = (size_t)x->dm.N;
    double *dbar = hnormal(3 * n, 1.0), *p1 = hnew(3 * N), *p2 = hnew(3 * N), vir[9] = {0};
    void *d, *r, *b1 = a_put(&a, p1, 3 * N), *b2 = a_put(&a, p2, 3 * N), *dd;
    ecenet_csr by_src = csr_dev(&a, x->i0, n, x->dm.N), by_dst = csr_dev(&a, x->i1, n, x->dm.N);
    ecenet_idx src = a_idx(&a, x->i0, n), dst = a_idx(&a, x->i1, n);
    pg_run(c, &a, &d, &r, NULL);
    dd = a_put(&a, dbar, 3 * n);
    c->be->pair_geom_vjp(x->n, src, dst, &by_src, &by_dst, d, dd, b1, a_put(&a, vir, 9));
    c->be->pair_geom_vjp(x->n, src, dst, &by_src, &by_dst, d, dd, b2, NULL);
    a_get(&a, p1, b1, 3 * N);
    a_get(&a, p2, b2, 3 * N);
    a_free(&a);
    ck_assert_msg(memcmp(p1, p2, 3 * N * sizeof *p1) == 0,
                  "pair_geom_vjp (%s): pos_bar differs with virial = NULL", c->desc);
}

static void case_pair_geom(const env *ev, const shape *s, int it)
{
    opx x;
    op_case c;
    const size_t n = (size_t)s->E;
    double *pos = huniform(3 * (size_t)s->N, -2.0, 2.0), *shift = hnew(3 * n);
    memset(&x, 0, sizeof x);
    x.dm.N = s->N;
    x.n = s->E;
    x.i0 = hindex(n, s->N);
    x.i1 = hindex(n, s->N);
    for (size_t k = 0; k < n; k++) { /* |d| >= 0.3: r is smooth there */
        double dd[3];
        do {
            int zero = tu_uniform() < 0.3;
            for (int a = 0; a < 3; a++) {
                shift[3 * k + a] = zero ? 0.0 : 2.0 * tu_normal();
                dd[a] = pos[3 * x.i1[k] + a] - pos[3 * x.i0[k] + a] + shift[3 * k + a];
            }
        } while (norm2(dd, 3) < 0.3);
    }
    x.w0 = shift;
    c = new_case(ev, "pair_geom+dist", &x, pg_fwd, pg_vjp, 4 * n);
    snprintf(c.desc, sizeof c.desc, "it=%d N=%lld n=%zu", it, (long long)s->N, n);
    add_in(&c, "pos", pos, 3 * (size_t)s->N);
    add_in(&c, "strain", hnew(9), 9);
    run_case(&c);
    pg_values(&c);
    pg_virial_null(&c);
}

/* dist alone: r(d) through pair_geom_fwd with pos = 0 and shift = d */
static void dist_fwd(const op_case *c, double *out)
{
    arena a = arena_of(c->be);
    const size_t n = (size_t)c->x->n;
    double zero[3] = {0, 0, 0};
    int32_t *z = (int32_t *)a_host(&a, n); /* zeros: src = dst = atom 0 */
    void *r = a_put(&a, out, n);
    c->be->pair_geom_fwd(c->x->n, a_idx(&a, z, n), a_idx(&a, z, n), a_put(&a, c->in[0], 3 * n),
                         a_put(&a, zero, 3), a_raw(&a, 3 * n), r);
    a_get(&a, out, r, n);
    a_free(&a);
}

static void dist_vjp_cb(const op_case *c, const double *ybar, double *const *g)
{
    arena a = arena_of(c->be);
    const size_t n = (size_t)c->x->n;
    void *d = a_put(&a, c->in[0], 3 * n), *dbar = a_put(&a, g[0], 3 * n);
    c->be->dist_vjp(c->x->n, d, a_put(&a, host_r(&a, c->in[0], n), n), a_put(&a, ybar, n), dbar);
    a_get(&a, g[0], dbar, 3 * n);
    a_free(&a);
}

static void case_dist(const env *ev, const shape *s, int it)
{
    opx x;
    op_case c;
    const size_t n = (size_t)s->E;
    memset(&x, 0, sizeof x);
    x.n = s->E;
    c = new_case(ev, "dist_vjp", &x, dist_fwd, dist_vjp_cb, n);
    snprintf(c.desc, sizeof c.desc, "it=%d n=%zu", it, n);
    add_in(&c, "d", edge_vectors(n, 0.3, 4.0, 0.0, 1), 3 * n);
    run_case(&c);
}

/* radial: r (n) -> f (n, max(K,1)) */
static void radial_fwd_cb(const op_case *c, double *out)
{
    arena a = arena_of(c->be);
    const opx *x = c->x;
    const size_t n = (size_t)x->n, cols = x->K ? (size_t)x->K : 1;
    void *f = a_put(&a, out, n * cols);
    c->be->radial_fwd(x->n, a_put(&a, c->in[0], n), x->cut, x->K, x->ctype, f,
                      a_raw(&a, n * cols));
    a_get(&a, out, f, n * cols);
    a_free(&a);
}

static void radial_vjp_cb(const op_case *c, const double *ybar, double *const *g)
{
    arena a = arena_of(c->be);
    const opx *x = c->x;
    const size_t n = (size_t)x->n, cols = x->K ? (size_t)x->K : 1;
    void *df = a_raw(&a, n * cols), *rbar = a_put(&a, g[0], n);
    c->be->radial_fwd(x->n, a_put(&a, c->in[0], n), x->cut, x->K, x->ctype, a_raw(&a, n * cols),
                      df);
    c->be->radial_vjp(x->n, x->K, df, a_put(&a, ybar, n * cols), rbar);
    a_get(&a, g[0], rbar, n);
    a_free(&a);
}

/* SPEC §3, written independently */
static double h_radial(double r, double c, int q, int type)
{
    double fc, x, sinc;
    if (!(r < c))
        return 0.0;
    if (type == ECENET_CUTOFF_POLY) {
        double y = r / c;
        fc = 1.0 - 10.0 * pow(y, 3) + 15.0 * pow(y, 4) - 6.0 * pow(y, 5);
    } else {
        fc = 0.5 * (1.0 + cos(M_PI * r / c));
    }
    if (q == 0)
        return fc;
    x = q * M_PI * r / c;
    sinc = fabs(x) < 1e-8 ? 1.0 : sin(x) / x;
    return sqrt(2.0 / c) * sinc * fc;
}

static void radial_values(const op_case *c)
{
    const opx *x = c->x;
    const size_t n = (size_t)x->n, cols = x->K ? (size_t)x->K : 1;
    arena a = arena_of(c->be);
    double *out = hnew(n * cols), *out2 = hnew(n * cols);
    void *f;
    eval_fwd(c, out);
    f = a_raw(&a, n * cols); /* df = NULL gives the same f */
    c->be->radial_fwd(x->n, a_put(&a, c->in[0], n), x->cut, x->K, x->ctype, f, NULL);
    a_get(&a, out2, f, n * cols);
    a_free(&a);
    for (size_t k = 0; k < n; k++)
        for (size_t q = 0; q < cols; q++) {
            double want = h_radial(c->in[0][k], x->cut, x->K ? (int)q + 1 : 0, x->ctype);
            double got = out[k * cols + q];
            ck_assert_msg(fabs(got - want) <= 1e-13 * (1.0 + fabs(want)),
                          "radial_fwd (%s): f[%zu][%zu] at r = %.17g: %.17g, expected %.17g",
                          c->desc, k, q, c->in[0][k], got, want);
            ck_assert_msg(out2[k * cols + q] == got, "radial_fwd (%s): f differs with df = NULL",
                          c->desc);
        }
}

static void case_radial(const env *ev, size_t n, int K, int type, int it)
{
    opx x;
    op_case c;
    double *r = hnew(n);
    memset(&x, 0, sizeof x);
    x.n = (int64_t)n;
    x.K = K;
    x.ctype = type;
    x.cut = urand(2.0, 6.0);
    for (size_t k = 0; k < n; k++) /* inside and beyond the cutoff, not too close to it */
        do
            r[k] = k == 0 ? 1e-3 : urand(0.05, 1.3 * x.cut);
        while (fabs(r[k] - x.cut) < CUT_MARGIN);
    c = new_case(ev, "radial", &x, radial_fwd_cb, radial_vjp_cb, n * (K ? (size_t)K : 1));
    snprintf(c.desc, sizeof c.desc, "it=%d n=%zu K=%d %s c=%g", it, n, K,
             type == ECENET_CUTOFF_POLY ? "poly" : "cosine", x.cut);
    add_in(&c, "r", r, n);
    run_case(&c);
    radial_values(&c);
}

static void sph_fwd_cb(const op_case *c, double *out)
{
    arena a = arena_of(c->be);
    const size_t n = (size_t)c->x->n, S = (size_t)(c->x->L + 1) * (c->x->L + 1);
    void *y = a_put(&a, out, n * S), *dy = a_raw(&a, n * S * 3);
    c->be->sph_fwd(c->x->n, c->x->L, a_put(&a, c->in[0], 3 * n), y, dy);
    a_get(&a, out, y, n * S);
    a_free(&a);
}

/* the "VJP" of Y through its Jacobian: d̄[p,a] += Σ_s ȳ[p,s] dY[p,s,a] */
static void sph_vjp_cb(const op_case *c, const double *ybar, double *const *g)
{
    const size_t n = (size_t)c->x->n, S = (size_t)(c->x->L + 1) * (c->x->L + 1);
    double *Y = hnew(n * S), *dY = hnew(n * S * 3);
    run_sph(c->be, n, c->x->L, c->in[0], Y, dY);
    for (size_t p = 0; p < n; p++)
        for (size_t s = 0; s < S; s++)
            for (int a = 0; a < 3; a++)
                g[0][3 * p + a] += ybar[p * S + s] * dY[(p * S + s) * 3 + a];
}

/* full Jacobian: one central difference per Cartesian component */
static void sph_jacobian(const op_case *c)
{
    const size_t n = (size_t)c->x->n, S = (size_t)(c->x->L + 1) * (c->x->L + 1);
    const double h = 1e-5;
    double *Y = hnew(n * S), *dY = hnew(n * S * 3), *fd = hnew(n * S * 3);
    double *Yp = hnew(n * S), *Ym = hnew(n * S), *dp = hnew(3 * n);
    double err;
    run_sph(c->be, n, c->x->L, c->in[0], Y, dY);
    run_sph(c->be, n, c->x->L, c->in[0], Yp, NULL);
    ck_assert_msg(n == 0 || memcmp(Y, Yp, n * S * sizeof *Y) == 0,
                  "sph_fwd (%s): Y differs with dY = NULL", c->desc);
    for (int a = 0; a < 3; a++) {
        memcpy(dp, c->in[0], 3 * n * sizeof *dp);
        for (size_t p = 0; p < n; p++)
            dp[3 * p + a] += h;
        run_sph(c->be, n, c->x->L, dp, Yp, NULL);
        for (size_t p = 0; p < n; p++)
            dp[3 * p + a] -= 2.0 * h;
        run_sph(c->be, n, c->x->L, dp, Ym, NULL);
        for (size_t q = 0; q < n * S; q++)
            fd[q * 3 + a] = (Yp[q] - Ym[q]) / (2.0 * h);
    }
    err = tu_rel_l2(fd, dY, n * S * 3);
    stats_add("sph_fwd.dY", "jacobian (l2)", err, -1.0, c->desc);
    ck_assert_msg(err <= c->ev->ent->fd_tol, "sph_fwd (%s): dY vs FD Jacobian, rel l2 %.3g",
                  c->desc, err);
}

/* SPEC §4, l <= 2, written out */
static void sph_explicit(const op_case *c)
{
    const int L = c->x->L;
    const size_t n = (size_t)c->x->n, S = (size_t)(L + 1) * (L + 1);
    double *Y = hnew(n * S);
    run_sph(c->be, n, L, c->in[0], Y, NULL);
    for (size_t p = 0; p < n; p++) {
        const double *v = c->in[0] + 3 * p;
        double rr = norm2(v, 3), x = v[0] / rr, y = v[1] / rr, z = v[2] / rr, want[9];
        const double c1 = sqrt(3.0 / (4 * M_PI)), c2 = sqrt(15.0 / (4 * M_PI));
        want[0] = 1.0 / sqrt(4 * M_PI);
        want[1] = c1 * y;
        want[2] = c1 * z;
        want[3] = c1 * x;
        want[4] = c2 * x * y;
        want[5] = c2 * y * z;
        want[6] = sqrt(5.0 / (16 * M_PI)) * (3 * z * z - 1.0);
        want[7] = c2 * x * z;
        want[8] = sqrt(15.0 / (16 * M_PI)) * (x * x - y * y);
        for (size_t s = 0; s < S && s < 9; s++)
            ck_assert_msg(fabs(Y[p * S + s] - want[s]) <= 1e-14,
                          "sph_fwd (%s): Y[%zu][%zu] = %.17g, SPEC §4 gives %.17g", c->desc, p,
                          s, Y[p * S + s], want[s]);
    }
}

static void case_sph(const env *ev, size_t n, int L, int it)
{
    opx x;
    op_case c;
    const size_t S = (size_t)(L + 1) * (L + 1);
    memset(&x, 0, sizeof x);
    x.n = (int64_t)n;
    x.L = L;
    c = new_case(ev, "sph_fwd.dY", &x, sph_fwd_cb, sph_vjp_cb, n * S);
    snprintf(c.desc, sizeof c.desc, "it=%d n=%zu L=%d", it, n, L);
    add_in(&c, "d", edge_vectors(n, 0.3, 3.0, 0.0, 1), 3 * n);
    run_case(&c);
    sph_jacobian(&c);
    sph_explicit(&c);
}

void fam_geometry(const env *ev)
{
    for (int it = 0; it < n_iter(ev); it++) {
        shape s;
        size_t n;
        tu_rng_seed(seed_base() + 1000 + (uint64_t)it);
        s = shape_for(it);
        n = (size_t)s.E * 3;
        case_pair_geom(ev, &s, it);
        case_dist(ev, &s, it);
        for (int type = 0; type < 2; type++) {
            case_radial(ev, n, 0, type, it);
            case_radial(ev, n, s.K + 2 * (it % 3), type, it);
        }
        case_sph(ev, s.E ? (size_t)s.E + N_SPECIAL_DIRS : 0, it % 7, it);
        pool_free();
    }
}
