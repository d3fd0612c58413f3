/* SO(3): random rotations of clusters and crystals leave the energy
 * invariant and turn forces and stress covariantly; exactly with the
 * identity activation, up to the θ-grid aliasing (SPEC §11, §18.1) with SiLU. */
#include "harness.h"

typedef struct {
    double e_rel, f_rel, s_rel, asym; /* worst over the rotations */
} rot_err;

/* n_rot random rotations of s; errors relative to |E|, max|F|, max|dE/dε|. */
static rot_err rotation_errors(ecenet_ctx *ctx, const structure *s, int n_rot)
{
    rot_err r = {0, 0, 0, 0};
    double F0[3 * MAXN], F1[3 * MAXN], Fr[3 * MAXN], pos[3 * MAXN];
    double G0[9], G1[9], Gr[9], S1[6], cell[9], R[9];
    const size_t n = s->n;
    double E0 = calc(ctx, s, NULL, NULL, F0, s->periodic ? G0 : NULL, NULL);
    double fmax = tu_max_abs(F0, 3 * n);
    ck_assert_msg(fmax > 0.0 && isfinite(E0), "degenerate reference evaluation");
    if (s->periodic) {
        double gmax = tu_max_abs(G0, 9);
        for (int a = 0; a < 3; a++)
            for (int b = 0; b < 3; b++)
                r.asym = dmax(r.asym, fabs(G0[3 * a + b] - G0[3 * b + a]) / gmax);
    }
    for (int k = 0; k < n_rot; k++) {
        tu_random_rotation(R);
        tu_rotate_rows(R, s->pos, pos, n);
        tu_rotate_rows(R, s->cell, cell, 3);
        double E1 = calc(ctx, s, pos, cell, F1, s->periodic ? G1 : NULL, s->periodic ? S1 : NULL);
        tu_rotate_rows(R, F0, Fr, n);
        r.e_rel = dmax(r.e_rel, fabs(E1 - E0) / fabs(E0));
        r.f_rel = dmax(r.f_rel, tu_max_abs_diff(F1, Fr, 3 * n) / fmax);
        if (s->periodic) {
            const double V = fabs(det3(s->cell));
            double gmax = tu_max_abs(G0, 9), d = 0.0;
            tu_rotate_tensor(R, G0, Gr);
            d = tu_max_abs_diff(G1, Gr, 9) / gmax;
            /* stress σ' = R σ Rᵀ, Voigt entries from the upper triangle */
            for (int v = 0; v < 6; v++)
                d = dmax(d, fabs(S1[v] - Gr[VOIGT[v]] / V) / (gmax / V));
            r.s_rel = dmax(r.s_rel, d);
        }
    }
    return r;
}

/* Exact case: with the identity activation the RealSpace op is linear and
 * band-limited (n_grid ≥ 2·m_max + 1), so the bond-frame gauge drops out and
 * the model is invariant to rounding (golden README: 5e-16). Measured worst
 * over 4 configurations × 5 structures × 4 rotations: energy 1.3e-14
 * relative (the tiny cell, |E| = 0.007 from cancelling terms; ≤ 2.8e-15
 * elsewhere), forces 1.0e-14 of max|F|, stress 1.5e-14 of max|σ|, asymmetry
 * of dE/dε 1.4e-15 of max|dE/dε|. */
START_TEST(test_rotation_exact)
{
    static const double ortho[9] = {7.4, 0.0, 0.0, 0.0, 8.1, 0.0, 0.0, 0.0, 8.8};
    structure *cl = malloc(sizeof *cl), *cr = malloc(sizeof *cr), *co = malloc(sizeof *co);
    structure *tiny = malloc(sizeof *tiny), *slab = malloc(sizeof *slab);
    rot_err worst = {0, 0, 0, 0};
    rot_structures(cl, cr, 101);
    make_crystal(co, 12, ortho, 1.0, Z_HCO, 2); /* H and C only */
    extra_structures(tiny, slab, 102);
    for (int k = 0; k < 4; k++) {
        ecn_config c = exact_cfg(k);
        ecenet_model *m = tu_random_model(&c, Z_HCO, 1000 + (uint64_t)k, 1.0);
        ecenet_ctx *ctx = tu_ctx(m, "ref");
        rot_err e[5];
        e[0] = rotation_errors(ctx, cl, 4);
        e[1] = rotation_errors(ctx, cr, 4);
        e[2] = rotation_errors(ctx, co, 4);
        e[3] = rotation_errors(ctx, tiny, 4);
        e[4] = rotation_errors(ctx, slab, 4);
        printf("rotation, identity cfg %d: cluster dE %.2e dF %.2e | triclinic dE %.2e dF %.2e "
               "dσ %.2e asym %.2e | orthorhombic dE %.2e dF %.2e dσ %.2e asym %.2e\n",
               k, e[0].e_rel, e[0].f_rel, e[1].e_rel, e[1].f_rel, e[1].s_rel, e[1].asym,
               e[2].e_rel, e[2].f_rel, e[2].s_rel, e[2].asym);
        printf("                          tiny cell dE %.2e dF %.2e dσ %.2e asym %.2e | slab dE "
               "%.2e dF %.2e dσ %.2e asym %.2e\n", e[3].e_rel, e[3].f_rel, e[3].s_rel, e[3].asym,
               e[4].e_rel, e[4].f_rel, e[4].s_rel, e[4].asym);
        for (int j = 0; j < 5; j++) {
            worst.e_rel = dmax(worst.e_rel, e[j].e_rel);
            worst.f_rel = dmax(worst.f_rel, e[j].f_rel);
            worst.s_rel = dmax(worst.s_rel, e[j].s_rel);
            worst.asym = dmax(worst.asym, e[j].asym);
        }
        ecenet_ctx_free(ctx);
        ecenet_model_free(m);
    }
    printf("rotation, identity worst: dE %.2e dF %.2e dσ %.2e asym %.2e\n", worst.e_rel,
           worst.f_rel, worst.s_rel, worst.asym);
    ck_assert_msg(worst.e_rel <= 1e-12, "energy not invariant: %.3e", worst.e_rel); /* 1.3e-14 */
    ck_assert_msg(worst.f_rel <= 1e-10, "forces not covariant: %.3e", worst.f_rel); /* 1.0e-14 */
    ck_assert_msg(worst.s_rel <= 1e-10, "stress not covariant: %.3e", worst.s_rel); /* 1.5e-14 */
    /* exact invariance makes dE/dε symmetric */
    ck_assert_msg(worst.asym <= 1e-12, "dE/dε not symmetric: %.3e", worst.asym); /* 1.4e-15 */
    free(cl);
    free(cr);
    free(co);
    free(tiny);
    free(slab);
}
END_TEST

/* Approximate case (SPEC §11, §18.1): with SiLU the θ-grid activation
 * aliases, so a rotation (which twists every bond frame) changes E by an
 * amount that grows with the feature amplitude: harmonics ≥ n_grid - m_max
 * fold back, at 4th order in the amplitude for m ≥ 1 and 6th for m = 0.
 * SPEC §18.1 measured max|ΔE| = 1.2e-10 (k = 0.1) to 1e-8 (k = 1) for a
 * 40-atom box with C = 8 (embedding scaled by k); the golden README 1.7e-4
 * relative for ethanol with large weights. Here every weight is scaled by 0.1
 * or 0.3 and the models are smaller; the bounds are ~100x the measured
 * values. */
START_TEST(test_rotation_approx)
{
    structure *cl = malloc(sizeof *cl), *cr = malloc(sizeof *cr);
    static const double scales[2] = {0.1, 0.3};
    rot_err w[2] = {{0, 0, 0, 0}, {0, 0, 0, 0}};
    rot_structures(cl, cr, 202);
    for (int si = 0; si < 2; si++)
        for (int k = 0; k < 4; k++) {
            ecn_config c = exact_cfg(k);
            c.activation = ECENET_ACT_SILU;
            ecenet_model *m = tu_random_model(&c, Z_HCO, 2000 + (uint64_t)k, scales[si]);
            ecenet_ctx *ctx = tu_ctx(m, "ref");
            rot_err a = rotation_errors(ctx, cl, 4), b = rotation_errors(ctx, cr, 4);
            printf("rotation, silu scale %.1f cfg %d: cluster dE %.2e dF %.2e | crystal dE %.2e "
                   "dF %.2e dσ %.2e\n",
                   scales[si], k, a.e_rel, a.f_rel, b.e_rel, b.f_rel, b.s_rel);
            w[si].e_rel = dmax(w[si].e_rel, dmax(a.e_rel, b.e_rel));
            w[si].f_rel = dmax(w[si].f_rel, dmax(a.f_rel, b.f_rel));
            w[si].s_rel = dmax(w[si].s_rel, b.s_rel);
            ecenet_ctx_free(ctx);
            ecenet_model_free(m);
        }
    for (int si = 0; si < 2; si++)
        printf("rotation, silu scale %.1f worst: dE %.2e dF %.2e dσ %.2e\n", scales[si],
               w[si].e_rel, w[si].f_rel, w[si].s_rel);
    /* scale 0.3: measured dE 2.3e-13, dF 8.8e-12, dσ 7.8e-13 (cfg 3 and cfg 1) */
    ck_assert_msg(w[1].e_rel <= 2e-11, "scale 0.3: energy changes by %.3e", w[1].e_rel);
    ck_assert_msg(w[1].f_rel <= 8e-10, "scale 0.3: forces differ by %.3e", w[1].f_rel);
    ck_assert_msg(w[1].s_rel <= 5e-11, "scale 0.3: stress differs by %.3e", w[1].s_rel);
    /* scale 0.1: 4th-order scaling predicts 2.3e-13/81 = 2.9e-15, i.e. the
     * rounding level; measured dE 2.8e-15, dF 5.4e-15, dσ 2.8e-15 */
    ck_assert_msg(w[0].e_rel <= 2e-13, "scale 0.1: energy changes by %.3e", w[0].e_rel);
    ck_assert_msg(w[0].f_rel <= 5e-13, "scale 0.1: forces differ by %.3e", w[0].f_rel);
    ck_assert_msg(w[0].s_rel <= 2e-13, "scale 0.1: stress differs by %.3e", w[0].s_rel);
    /* the error at 0.3 is aliasing, not rounding: it is far above the 0.1
     * level (measured ratio 83; at least (0.3/0.1)^4 = 81 is expected once
     * both are above rounding) */
    ck_assert_msg(w[1].e_rel >= 10.0 * w[0].e_rel, "no growth with amplitude: %.3e vs %.3e",
                  w[1].e_rel, w[0].e_rel);
    free(cl);
    free(cr);
}
END_TEST

void rotation_tests(TCase *tc)
{
    tcase_add_test(tc, test_rotation_exact);
    tcase_add_test(tc, test_rotation_approx);
}
