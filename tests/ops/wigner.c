/* Wigner-D of the bond frame (SPEC §7): VJP, its properties (§7.3) and the
 * Appendix B matrices. */
#include "harness.h"

static double *cg_table(int L)
{
    double *cg = hnew(ecn_cg_size(L));
    ecn_cg_build(L, cg);
    return cg;
}

/* D (E, ND) from d on the backend */
static void run_wigner(const ecenet_backend *be, size_t E, int L, const double *cg,
                       const double *d, double *D)
{
    arena a = arena_of(be);
    const size_t ND = (size_t)nd_of(L);
    void *Dd = a_put(&a, D, E * ND);
    be->wigner_fwd((int64_t)E, L, a_put(&a, cg, ecn_cg_size(L)), a_put(&a, d, 3 * E),
                   a_put(&a, host_r(&a, d, E), E), Dd);
    a_get(&a, D, Dd, E * ND);
    a_free(&a);
}

/* x: n = E, L, w0 = cg */
static void wigner_fwd_cb(const op_case *c, double *out)
{
    run_wigner(c->be, (size_t)c->x->n, c->x->L, c->x->w0, c->in[0], out);
}

static void wigner_vjp_cb(const op_case *c, const double *ybar, double *const *g)
{
    arena a = arena_of(c->be);
    const size_t E = (size_t)c->x->n, ND = (size_t)nd_of(c->x->L);
    void *cg = a_put(&a, c->x->w0, ecn_cg_size(c->x->L)), *d = a_put(&a, c->in[0], 3 * E);
    void *r = a_put(&a, host_r(&a, c->in[0], E), E), *D = a_raw(&a, E * ND);
    void *dbar = a_put(&a, g[0], 3 * E);
    c->be->wigner_fwd(c->x->n, c->x->L, cg, d, r, D);
    c->be->wigner_vjp(c->x->n, c->x->L, cg, d, r, D, a_put(&a, ybar, E * ND), dbar);
    a_get(&a, g[0], dbar, 3 * E);
    a_free(&a);
}

static void case_wigner(const env *ev, size_t E, int L, int it)
{
    opx x;
    op_case c;
    memset(&x, 0, sizeof x);
    x.n = (int64_t)E;
    x.L = L;
    x.w0 = cg_table(L);
    c = new_case(ev, "wigner", &x, wigner_fwd_cb, wigner_vjp_cb, E * (size_t)nd_of(L));
    snprintf(c.desc, sizeof c.desc, "it=%d E=%zu L=%d", it, E, L);
    add_in(&c, "d", edge_vectors(E, 0.5, 3.0, 0.0, 1), 3 * E);
    run_case(&c);
}

void fam_wigner(const env *ev)
{
    for (int it = 0; it < n_iter(ev); it++) {
        shape s;
        tu_rng_seed(seed_base() + 3000 + (uint64_t)it);
        s = shape_for(it);
        /* every E > 0 case holds the axis and near-0.9 edges */
        case_wigner(ev, s.E ? (size_t)s.E + N_SPECIAL_DIRS : 0, it % 7, it);
        pool_free();
    }
}

/* Properties of D (SPEC §7.3) for L = 6 on random, axis and near-0.9 directions. */
void wigner_properties(const env *ev)
{
    const int L = 6, S = 49, ND = nd_of(L);
    const size_t n = 40 + N_SPECIAL_DIRS;
    double *cg, *u, *D, *Y, *v, *vl, *Yv, *Yvl, worst = 0.0;
    tu_rng_seed(seed_base() + 77);
    cg = cg_table(L);
    u = edge_vectors(n, 1.0, 1.0, 0.0, 1);
    D = hnew(n * ND);
    Y = hnew(n * S);
    v = edge_vectors(n, 0.5, 2.0, 0.0, 0);
    vl = hnew(3 * n);
    Yv = hnew(n * S);
    Yvl = hnew(n * S);
    run_wigner(ev->be, n, L, cg, u, D);
    run_sph(ev->be, n, L, u, Y, NULL);
    for (size_t e = 0; e < n; e++) { /* v_loc in (x,y,z) from v·D¹ in (y,z,x) order */
        const double *D1 = D + e * ND + 1, vy[3] = {v[3 * e + 1], v[3 * e + 2], v[3 * e]};
        double w[3];
        for (int k = 0; k < 3; k++)
            w[k] = vy[0] * D1[k] + vy[1] * D1[3 + k] + vy[2] * D1[6 + k];
        vl[3 * e] = w[2];
        vl[3 * e + 1] = w[0];
        vl[3 * e + 2] = w[1];
    }
    run_sph(ev->be, n, L, v, Yv, NULL);
    run_sph(ev->be, n, L, vl, Yvl, NULL);
    for (size_t e = 0; e < n; e++) {
        const double *De = D + e * ND, *D1 = De + 1;
        double det = D1[0] * (D1[4] * D1[8] - D1[5] * D1[7]) -
                     D1[1] * (D1[3] * D1[8] - D1[5] * D1[6]) +
                     D1[2] * (D1[3] * D1[7] - D1[4] * D1[6]);
        ck_assert_msg(fabs(det - 1.0) < 1e-13, "wigner: det D¹ = %.17g for edge %zu", det, e);
        for (int l = 0; l <= L; l++) {
            const int m = 2 * l + 1;
            const double *Dl = De + dblk(l), cnorm = sqrt(4 * M_PI / m);
            for (int i = 0; i < m; i++) {
                double yd = 0.0;
                for (int j = 0; j < m; j++) { /* (DᵀD)[i][j] = δ */
                    double s = 0.0;
                    for (int k = 0; k < m; k++)
                        s += Dl[k * m + i] * Dl[k * m + j];
                    worst = fmax(worst, fabs(s - (i == j)));
                    yd += Yv[e * S + l * l + j] * Dl[j * m + i];
                }
                worst = fmax(worst, fabs(yd - Yvl[e * S + l * l + i]));
                worst = fmax(worst, fabs(Dl[i * m + l] - cnorm * Y[e * S + l * l + i]));
            }
        }
    }
    stats_add("wigner", "properties (max abs)", worst, -1.0, "L = 6");
    ck_assert_msg(worst < 1e-12, "wigner: orthogonality / column m=0 / Y(v)·D = Y(v_loc) off by %g",
                  worst);
}

/* SPEC Appendix B (6 decimals) */
static const double APPB_R[2][3] = {{0.36, -0.48, 0.80}, {0.96, 0.28, 0.00}};
static const double APPB_D[2][84] = {
    {1,
     0.857493, -0.480000, 0.185218, 0.514496, 0.800000, -0.308697, 0.000000, 0.360000, 0.932952,
     0.800000, 0.308697, -0.299298, -0.381138, 0.172800,
     -0.169412, 0.439036, -0.665108, 0.296350, -0.498353,
     -0.275090, 0.712906, 0.460000, -0.427744, -0.146715,
     0.480000, 0.185218, 0.498831, 0.635231, -0.288000,
     -0.158824, 0.411597, -0.087295, 0.424768, 0.785694,
     0.695336, 0.446095, -0.083691, -0.060109, -0.330267, -0.385703, 0.221465,
     -0.193575, 0.348612, 0.249904, -0.535401, -0.397764, 0.097073, -0.569432,
     -0.197622, -0.093752, -0.022295, -0.646665, 0.398220, -0.566085, 0.233349,
     0.008613, -0.492097, 0.693139, 0.080000, -0.415883, -0.262452, 0.170546,
     -0.286939, 0.516753, 0.370437, 0.484999, 0.290862, -0.412510, -0.153034,
     0.555134, -0.035576, 0.479633, -0.156159, 0.561893, 0.285666, -0.196973,
     -0.222262, 0.400275, 0.286939, -0.159834, -0.029077, 0.448004, 0.693502},
    {1,
     0, 0.28, 0.96, 1, 0, 0, 0, 0.96, -0.28,
     0, 0, 0.465575, 0.8432, -0.2688,
     0.96, 0.28, 0, 0, 0,
     0, 0, -0.5, 0, -0.866025,
     -0.28, 0.96, 0, 0, 0,
     0, 0, 0.730233, -0.5376, -0.4216,
     0, 0, 0, 0.59466, 0.63802, -0.460622, -0.164736,
     -0.329211, 0.8432, 0.42501, 0, 0, 0, 0,
     0, 0, 0, -0.171464, -0.24, -0.221359, -0.929516,
     -0.790569, 0, -0.612372, 0, 0, 0, 0,
     0, 0, 0, -0.587878, 0.07, -0.758947, 0.271109,
     -0.516352, -0.5376, 0.666608, 0, 0, 0, 0,
     0, 0, 0, 0.520941, -0.728307, -0.403519, 0.188048}};

void wigner_appendix_b(const env *ev)
{
    double *cg = cg_table(3), D[2 * 84];
    run_wigner(ev->be, 2, 3, cg, &APPB_R[0][0], D);
    for (int e = 0; e < 2; e++)
        for (int q = 0; q < 84; q++)
            ck_assert_msg(fabs(D[e * 84 + q] - APPB_D[e][q]) < 1.5e-6,
                          "wigner: Appendix B vector %d entry %d: %.7f vs %.6f", e, q,
                          D[e * 84 + q], APPB_D[e][q]);
}
