/* Conservativity: the work of the forces around a closed loop vanishes (and
 * equals -ΔE along each arc); velocity-Verlet NVE keeps the energy with an
 * O(dt²) drift. */
#include "harness.h"

#define TWO_PI 6.283185307179586

/* Work of the forces around the closed curve x(θ) = x0 + u cos θ + v sin θ
 * (K points; the trapezoid rule on a periodic integrand). *scale gets
 * Σ|F·x'|Δθ, *arc_err the worst |W_arc + ΔE_arc| over the four quarter arcs
 * (Simpson), *arc_scale the largest |ΔE_arc|. */
static double loop_work(ecenet_ctx *ctx, const structure *s, double amp, int K, double *scale,
                        double *arc_err, double *arc_scale)
{
    const size_t n3 = 3 * s->n;
    double *u = malloc(n3 * sizeof *u), *v = malloc(n3 * sizeof *v);
    double *x = malloc(n3 * sizeof *x), *F = malloc(n3 * sizeof *F);
    double *p = malloc((size_t)(K + 1) * sizeof *p), *E = malloc((size_t)(K + 1) * sizeof *E);
    const double dth = TWO_PI / K;
    double W = 0.0, sc = 0.0;
    for (size_t q = 0; q < n3; q++) {
        u[q] = amp * tu_normal();
        v[q] = amp * tu_normal();
    }
    for (int k = 0; k < K; k++) {
        const double th = k * dth, c = cos(th), sn = sin(th);
        for (size_t q = 0; q < n3; q++)
            x[q] = s->pos[q] + u[q] * c + v[q] * sn;
        E[k] = calc(ctx, s, x, NULL, F, NULL, NULL);
        p[k] = 0.0; /* F · dx/dθ */
        for (size_t q = 0; q < n3; q++)
            p[k] += F[q] * (-u[q] * sn + v[q] * c);
        W += p[k] * dth;
        sc += fabs(p[k]) * dth;
    }
    p[K] = p[0];
    E[K] = E[0];
    *scale = sc;
    *arc_err = 0.0;
    *arc_scale = 0.0;
    for (int a = 0; a < 4; a++) {
        const int k0 = a * K / 4, k1 = (a + 1) * K / 4;
        double Wa = p[k0] + p[k1];
        for (int k = k0 + 1; k < k1; k++)
            Wa += (((k - k0) % 2) ? 4.0 : 2.0) * p[k];
        Wa *= dth / 3.0;
        *arc_err = dmax(*arc_err, fabs(Wa + (E[k1] - E[k0])));
        *arc_scale = dmax(*arc_scale, fabs(E[k1] - E[k0]));
    }
    free(u); free(v); free(x); free(F); free(p); free(E);
    return W;
}

START_TEST(test_closed_loop)
{
    structure *cl = malloc(sizeof *cl), *cr = malloc(sizeof *cr);
    double W[3], sc[3], aerr[3], asc[3];
    rot_structures(cl, cr, 505);
    ecn_config c = exact_cfg(3);
    c.activation = ECENET_ACT_SILU;
    ecenet_model *m = tu_random_model(&c, Z_HCO, 5001, 0.3);
    ecenet_ctx *ctx = tu_ctx(m, "ref");
    for (int k = 0; k < 3; k++) {
        static const char *label[3] = {"cluster", "crystal", "cluster"};
        const int K = k == 2 ? 400 : 200;
        tu_rng_seed(k == 1 ? 506 : 505); /* the same loop for k = 0 and 2 */
        W[k] = loop_work(ctx, k == 1 ? cr : cl, 0.05, K, &sc[k], &aerr[k], &asc[k]);
        printf("closed loop %s, %d points: work %.3e, Σ|work| %.3e (rel %.2e); quarter arcs: "
               "|W + ΔE| %.2e of |ΔE| %.3e (rel %.2e)\n",
               label[k], K, W[k], sc[k], fabs(W[k]) / sc[k], aerr[k], asc[k], aerr[k] / asc[k]);
    }
    /* The trapezoid rule on this periodic integrand leaves only quadrature
     * error (the cutoff envelopes are C¹/C², so it is algebraic, not
     * exponential). Measured |W|/Σ|W|: 1.1e-9 (cluster), 4.3e-11 (crystal)
     * with 200 points. A non-conservative part of relative size δ in the
     * forces would leave a residual of order δ. */
    for (int k = 0; k < 2; k++)
        ck_assert_msg(fabs(W[k]) <= 1e-7 * sc[k], "loop %d: work %.3e of %.3e", k, W[k], sc[k]);
    /* the residual is quadrature error: it shrinks with more points
     * (measured 7.0e-12 -> 4.8e-13, factor 15) */
    ck_assert_msg(fabs(W[2]) <= fabs(W[0]) / 3.0, "loop residual does not converge: %.3e, %.3e",
                  W[0], W[2]);
    /* the work along each quarter arc (Simpson) is minus its energy change;
     * measured worst 1.5e-8 of max|ΔE| (2.2e-11 and 1.3e-11 eV) */
    for (int k = 0; k < 3; k++)
        ck_assert_msg(aerr[k] <= 1e-6 * asc[k], "arc work vs ΔE: %.3e of %.3e", aerr[k], asc[k]);
    ecenet_ctx_free(ctx);
    ecenet_model_free(m);
    free(cl);
    free(cr);
}
END_TEST

static double mass_of(int z)
{
    switch (z) {
    case 1: return 1.008;
    case 6: return 12.011;
    case 8: return 15.999;
    default: return 0.0;
    }
}

/* Velocity Verlet (Å, eV, amu; time unit Å·sqrt(amu/eV) = 10.18 fs).
 * Returns max |E_tot(t) - E_tot(0)|; *ke_fluct = max KE - min KE. */
static double nve_drift(ecenet_ctx *ctx, const structure *s, const double *v0, double dt,
                        int steps, double *ke_fluct, double *ke0)
{
    const size_t n = s->n, n3 = 3 * n;
    double *x = malloc(n3 * sizeof *x), *v = malloc(n3 * sizeof *v), *F = malloc(n3 * sizeof *F);
    double drift = 0.0, kmin = 1e300, kmax = -1e300, Etot0 = 0.0;
    memcpy(x, s->pos, n3 * sizeof *x);
    memcpy(v, v0, n3 * sizeof *v);
    double Ep = calc(ctx, s, x, NULL, F, NULL, NULL);
    for (int t = 0; t <= steps; t++) {
        if (t > 0) {
            for (size_t q = 0; q < n3; q++) {
                v[q] += 0.5 * dt * F[q] / mass_of(s->z[q / 3]);
                x[q] += dt * v[q];
            }
            Ep = calc(ctx, s, x, NULL, F, NULL, NULL);
            for (size_t q = 0; q < n3; q++)
                v[q] += 0.5 * dt * F[q] / mass_of(s->z[q / 3]);
        }
        double ke = 0.0;
        for (size_t q = 0; q < n3; q++)
            ke += 0.5 * mass_of(s->z[q / 3]) * v[q] * v[q];
        if (t == 0) {
            Etot0 = Ep + ke;
            *ke0 = ke;
        }
        drift = dmax(drift, fabs(Ep + ke - Etot0));
        kmin = ke < kmin ? ke : kmin;
        kmax = ke > kmax ? ke : kmax;
    }
    *ke_fluct = kmax - kmin;
    free(x); free(v); free(F);
    return drift;
}

START_TEST(test_nve)
{
    structure *cl = malloc(sizeof *cl);
    double v0[3 * MAXN], p0[3] = {0, 0, 0}, mt = 0.0;
    const double kT = 0.0259; /* 300 K in eV */
    tu_rng_seed(606);
    make_cluster(cl, 10, 4.5, 1.0, Z_HCO, 3);
    for (size_t i = 0; i < cl->n; i++) {
        const double mi = mass_of(cl->z[i]);
        for (int a = 0; a < 3; a++) {
            v0[3 * i + a] = sqrt(kT / mi) * tu_normal();
            p0[a] += mi * v0[3 * i + a];
        }
        mt += mi;
    }
    for (size_t i = 0; i < cl->n; i++) /* zero total momentum */
        for (int a = 0; a < 3; a++)
            v0[3 * i + a] -= p0[a] / mt;
    ecn_config c = exact_cfg(3);
    c.activation = ECENET_ACT_SILU;
    ecenet_model *m = tu_random_model(&c, Z_HCO, 6001, 0.3);
    ecenet_ctx *ctx = tu_ctx(m, "ref");
    const double fs = 1.0 / 10.1805055, dt = 0.5 * fs;
    double kf1, kf2, ke0;
    double d1 = nve_drift(ctx, cl, v0, dt, 200, &kf1, &ke0);
    double d2 = nve_drift(ctx, cl, v0, 0.5 * dt, 400, &kf2, &ke0);
    printf("NVE: KE(0) %.4e, dt %.2f fs: drift %.3e (KE fluctuation %.3e, ratio %.2e); dt/2: "
           "drift %.3e (KE fluct %.3e); drift(dt)/drift(dt/2) = %.3f\n",
           ke0, dt / fs, d1, kf1, d1 / kf1, d2, kf2, d1 / d2);
    /* measured: drift 2.6e-4 eV against a KE fluctuation of 0.88 eV (3e-4) */
    ck_assert_msg(d1 <= 1e-2 * kf1, "energy drift %.3e vs KE fluctuation %.3e", d1, kf1);
    ck_assert_msg(kf1 > 10.0 * d1 && kf2 > 10.0 * d2, "no dynamics");
    /* Verlet's energy error is O(dt²): measured ratio 3.82 for dt/2 */
    ck_assert_msg(d1 / d2 >= 3.0 && d1 / d2 <= 5.0, "drift ratio %.3f, expected ~4", d1 / d2);
    ecenet_ctx_free(ctx);
    ecenet_model_free(m);
    free(cl);
}
END_TEST

void conservation_tests(TCase *tc)
{
    tcase_add_test(tc, test_closed_loop);
    tcase_add_test(tc, test_nve);
}
