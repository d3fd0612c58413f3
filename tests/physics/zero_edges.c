/* Zero edges: E = Σ atomic energies, zero forces and stress, continuity as
 * a pair separates through r_cut. */
#include "harness.h"

/* A structure without edges has E = Σ atomic energies (doc/design.md; the
 * public release returns 0 there, SPEC §18.3, which the library deliberately
 * does not copy). The atomic energies are measured as single isolated atoms. */
START_TEST(test_zero_edges)
{
    static const int cfgs[3] = {0, 1, 2}; /* cosine/None, poly/n_max_d, cosine/r_nb > r_edge */
    structure *s = malloc(sizeof *s);
    for (int k = 0; k < 3; k++) {
        ecn_config c = exact_cfg(cfgs[k]);
        c.activation = ECENET_ACT_SILU;
        ecenet_model *m = tu_random_model(&c, Z_HCO, 7000 + (uint64_t)k, 1.0);
        ecenet_ctx *ctx = tu_ctx(m, "ref");
        const double rc = c.r_cut_edge;
        double e_atom[3], F[6], G[9], S[6], ae[2], E, prev = 1e300;
        memset(s, 0, sizeof *s);
        s->n = 1;
        for (int t = 0; t < 3; t++) {
            s->z[0] = Z_HCO[t];
            e_atom[t] = calc(ctx, s, NULL, NULL, F, NULL, NULL);
            ck_assert(F[0] == 0.0 && F[1] == 0.0 && F[2] == 0.0);
        }
        const double esum = e_atom[1] + e_atom[2];
        /* C and O 20 Å apart: exactly the sum, exactly zero forces */
        s->n = 2;
        s->z[0] = 6;
        s->z[1] = 8;
        s->pos[3] = 12.0;
        s->pos[4] = 16.0;
        E = calc(ctx, s, NULL, NULL, F, NULL, NULL);
        printf("zero edges cfg %d: atomic energies %.6g %.6g %.6g; C + O 20 Å apart %.17g "
               "(Σ %.17g)\n", cfgs[k], e_atom[0], e_atom[1], e_atom[2], E, esum);
        ck_assert_msg(E == esum, "E = %.17g, Σ atomic = %.17g", E, esum);
        for (int q = 0; q < 6; q++)
            ck_assert_msg(F[q] == 0.0, "F[%d] = %g", q, F[q]);
        /* the same in a periodic 20 Å cell (images 20 Å away): zero stress too */
        s->periodic = 1;
        s->pbc[0] = s->pbc[1] = s->pbc[2] = 1;
        memset(s->cell, 0, sizeof s->cell);
        s->cell[0] = s->cell[4] = s->cell[8] = 20.0;
        s->pos[3] = 8.0;
        s->pos[4] = 6.0;
        s->pos[5] = 10.0;
        E = calc(ctx, s, NULL, NULL, F, G, S);
        ck_assert_msg(E == esum, "periodic: E = %.17g, Σ atomic = %.17g", E, esum);
        ck_assert(tu_max_abs(F, 6) == 0.0 && tu_max_abs(G, 9) == 0.0 && tu_max_abs(S, 6) == 0.0);
        s->periodic = 0;
        s->pos[5] = 0.0;
        /* continuity as the pair separates through r_cut_edge */
        static const double dl[5] = {1e-1, 1e-2, 1e-3, 1e-6, -1e-6};
        for (int j = 0; j < 5; j++) {
            const double r = rc - dl[j];
            s->pos[3] = r * 0.6;
            s->pos[4] = r * 0.8;
            ecenet_system sys = {2, s->pos, s->z, NULL, {0, 0, 0}};
            ecenet_outputs out = {&E, F, 6, NULL, 0, NULL, 0, ae, 2};
            ck_assert_msg(ecenet_compute(ctx, &sys, &out) == ECENET_OK, "%s",
                          ecenet_ctx_error(ctx));
            const double d = fabs(E - esum), fm = tu_max_abs(F, 6);
            printf("  r = r_cut - %g: E - Σ = %.3e, max|F| %.3e\n", dl[j], E - esum, fm);
            if (j < 3) {
                /* vanishes at least like δ²: measured δ² (cosine, None), δ³
                 * (cosine, n_max_d: sinc(nπ) = 0 too), δ⁴ (poly, n_max_d) */
                ck_assert_msg(d > 0.0 && d <= prev / 50.0, "E - Σ = %.3e after %.3e", d, prev);
                prev = d;
            } else if (j == 3) {
                /* measured 0 and 0 (below rounding), the edge still there: max|F|
                 * 1.6e-16 .. 1.9e-14 */
                ck_assert_msg(d <= 1e-9, "E - Σ = %.3e at r_cut - 1e-6", d);
                ck_assert_msg(fm > 0.0, "the edge at r_cut - 1e-6 is missing");
            } else {
                ck_assert_msg(E == esum && fm == 0.0, "beyond r_cut: E - Σ = %.3e, max|F| %.3e",
                              E - esum, fm);
                /* and the per-atom energies are the isolated atoms' */
                ck_assert_msg(ae[0] == e_atom[1] && ae[1] == e_atom[2],
                              "atom energies %.17g %.17g", ae[0], ae[1]);
            }
        }
        ecenet_ctx_free(ctx);
        ecenet_model_free(m);
    }
    free(s);
}
END_TEST

void zero_edge_tests(TCase *tc)
{
    tcase_add_test(tc, test_zero_edges);
}
