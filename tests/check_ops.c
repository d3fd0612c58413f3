/* Tests of the op vtable (include/ecenet/ops.h): every VJP against central
 * finite differences of its forward, for every backend in BACKENDS (ref and
 * omp in fp64).
 * Layout: this driver; the shared harness in ops/harness.[ch]; one ops/<family>.c per family.
 *
 * Method (run_case, check_fd): for random inputs x, a random output
 * cotangent ȳ and a random direction v ~ N(0, I),
 *     analytic  an = <VJP(ȳ), v>
 *     numeric   fd = (<ȳ, fwd(x + hv)> − <ȳ, fwd(x − hv)>) / 2h,  h = 1e-6
 * judged by |fd − an| / max(|fd|, |an|, floor) <= 1e-6, where the floor is
 * the larger of 5 % of the typical size of <VJP(ȳ), v> (its standard
 * deviation over v is ‖VJP(ȳ)‖; a v nearly orthogonal to the gradient cannot
 * blow the ratio up) and atol/rtol, atol = 100·ε·Σ|ȳ·y|/h the rounding level
 * of the quotient (a true gradient ~1e-16 of the outputs, e.g. a softmax over
 * a single edge, is judged absolutely). Three directions per differentiable
 * input. Ops whose forward is several backend calls (ACE: radial + sph + ace;
 * geometry: strain + pair_geom) are composed inside the test; geometry inputs
 * (positions, strain, d, r), features (X, A, A_emb, Δ, g, w), D, scores, fc
 * and radial values fr are differentiated, parameters are not.
 *
 * Noise-limited fallback: where the forward is ill-conditioned, its own
 * rounding divided by h swamps the quotient (the poly envelope
 * 1 − 10y³ + 15y⁴ − 6y⁵ is ~1e-6 near r = c but made of O(10) terms, so a
 * lone ACE pair there gives an output ~1e-7 with relative noise ~1e-9). Only
 * when the plain quotient disagrees, a Richardson-extrapolated central
 * difference (4·D(100h) − D(200h))/3 (O(h⁴) truncation, 100x less noise)
 * decides; a wrong VJP fails both. Over 300 seed sweeps this happened only for
 * ace (37 of ~50 000 checks, Richardson agreement <= 6e-7 there).
 *
 * Every case also checks (run_case):
 *  - forward entries write their whole output (outputs are poisoned with NaN
 *    before each call; an accumulating forward starts from a random X0);
 *  - VJPs ACCUMULATE: starting from random g0, two calls give g0 + 2·J
 *    (J = one call into zeros), and elements J does not touch (J == 0
 *    exactly, e.g. invalid feature slots) are poisoned with NaN and must stay
 *    NaN — a VJP never overwrites;
 *  - E = 0 / P = 0: the ops run, gradient buffers stay untouched (all NaN),
 *    and overwriting forwards over atoms (ace_fwd, mp_scatter_fwd) give 0.
 * Extra value checks: pair_geom d and r, virial = NULL, radial values against
 * SPEC §3 (and df = NULL), sph against the explicit l <= 2 formulas of SPEC §4
 * (and dY = NULL) and its full Jacobian dY against FD, Wigner-D orthogonality,
 * det D¹ = +1, column m = 0 against sqrt(4π/(2l+1)) Y_l(r̂), Y_l(v)·D^l =
 * Y_l(v_loc) (SPEC §7.3) and the Appendix B matrices, edge_frame zeros in
 * invalid slots, mp_rotate_unpack leaving invalid slots alone, attention
 * weights a and w against §17.3 evaluated here, add.
 *
 * Measured worst relative errors of the plain central difference (h = 1e-6,
 * ref backend, gcc -O2, x86-64), default seeds / worst over 300 seed sweeps
 * (ECN_CHECK_SEED=0..300):
 *   pair_geom+dist pos 7e-9 / 8e-9        strain 2e-9 / 9e-9
 *   dist_vjp d 3e-9 / 1e-8                radial r 2e-8 / 4e-7 (*)
 *   sph dY (dot) 2e-9 / 1e-8              sph dY full Jacobian (l2) 3e-9 / 4e-9
 *   ace d 5e-9 / 1e-6 (*, + fallback)     embed A 6e-9 / 1e-8
 *   wigner d (L <= 6) 3e-9 / 1e-8         Wigner-D properties 6e-15 (abs)
 *   edge_frame A_emb 3e-9 / 1e-8, D 4e-9 / 1e-8
 *   dist_embed X 9e-9 / 1e-8, fr 5e-9 / 2e-8
 *   linear X 5e-9 / 1e-8                  realspace X 5e-9 / 2e-8
 *   mp_pack_unrotate X 4e-9 / 1e-8, D 2e-9 / 1e-8
 *   mp_weight fr 4e-9 / 1e-8              mp_scatter g 5e-9 / 1e-8, w 3e-9 / 1e-8
 *   mp_rotate_unpack Delta 3e-9 / 1e-8, D 5e-9 / 1e-8
 *   mp_attn_weight scores 8e-9 / 2e-8, fc 5e-9 / 1e-8
 *   mlp X 6e-9 / 2e-8                     energy y 2e-9 / 1e-8, fr 2e-9 / 8e-9
 *   film fr 4e-9 / 9e-9                   chan_scale X 5e-9 / 1e-8, s 5e-9 / 1e-8
 * (*) radii close to a cutoff, the ill-conditioning described above. Each
 * run prints its own numbers (the "worst" lines; ECN_CHECK_VERBOSE=1 names
 * the case). With h = 1e-5 truncation reaches 2e-7 (ace, sph at L = 6,
 * radial at K = 7), with h = 1e-4 it exceeds 1e-6; at h = 1e-6 the ~1e-8
 * level is rounding. Scaling one VJP by 1 + 1e-5 (linear, wigner, sph dY,
 * virial, mlp, film) fails the check at 1e-5, dropping the softmax
 * max-term (an ε = 1e-6 effect) fails it at 1.9e-6.
 *
 * relu (realspace, readout MLP) has a kink at 0: it is piecewise linear, so
 * FD is exact except for rounding unless a pre-activation crosses 0 within
 * ±h·δ. Those cases use h = 1e-7 and redraw X until every pre-activation is
 * at least 1e-4 (realspace) / 1e-3 (MLP hidden) away from 0, far more than
 * the ~1e-6 a step can move it. Radii stay CUT_MARGIN = 0.02 away from a
 * cutoff (some lie beyond it, where everything is 0).
 *
 * Optional entries (layer_fwd/vjp) are checked when the backend has them.
 * Environment: ECN_CHECK_QUICK=1 fewer seeds; ECN_CHECK_SEED=k shifts every
 * seed; ECN_CHECK_H overrides h; ECN_CHECK_VERBOSE=1 names the worst cases.
 * Whole run: 2.4-3.4 s at -O2 on the 2-core dev VM (2026-12-07), 0.2 s with
 * ECN_CHECK_QUICK=1. */
#define _POSIX_C_SOURCE 200809L

#include <time.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "ops/harness.h"

/* ================================================================================
 * driver
 * ================================================================================ */

/* ---- backends under test ----------------------------------------------------- */

/* omp in fp64 against finite differences too (check_backends compares it
 * with ref); here that also runs the optional fused layer entries, which ref
 * does not provide. omp's measured worst errors are those of ref (e.g.
 * layer (fused) X 3.0e-9, mlp X 1.1e-8, radial r 1.7e-8). */
static const backend_entry BACKENDS[] = {
    {"ref", ECENET_F64, 1e-6, 1e-12},
    {"omp", ECENET_F64, 1e-6, 1e-12},
};
#define N_BACKENDS (sizeof BACKENDS / sizeof BACKENDS[0])

typedef void (*family_fn)(const env *ev);

static void for_backends(family_fn fn, const char *family)
{
    for (size_t b = 0; b < N_BACKENDS; b++) {
        env ev;
        ev.ent = &BACKENDS[b];
        ev.be = ecn_backend_get(ev.ent->name, ev.ent->precision);
        ev.quick = getenv("ECN_CHECK_QUICK") && *getenv("ECN_CHECK_QUICK") &&
                   *getenv("ECN_CHECK_QUICK") != '0';
        if (!ev.be) {
            ck_assert_msg(strcmp(ev.ent->name, "ref") != 0, "the ref backend is missing");
            printf("[%s] not compiled in: skipped\n", ev.ent->name);
            continue;
        }
        g_nstats = 0;
        g_verbose = getenv("ECN_CHECK_VERBOSE") != NULL;
        fn(&ev);
        pool_free();
        stats_print(family, ev.ent->name);
    }
}

static void fam_wigner_props(const env *ev)
{
    wigner_properties(ev);
    wigner_appendix_b(ev);
    pool_free();
}

START_TEST(test_geometry) { for_backends(fam_geometry, "geometry"); }
END_TEST
START_TEST(test_ace_embed) { for_backends(fam_ace, "ace"); }
END_TEST
START_TEST(test_wigner) { for_backends(fam_wigner, "wigner"); }
END_TEST
START_TEST(test_wigner_properties) { for_backends(fam_wigner_props, "wigner-D"); }
END_TEST
START_TEST(test_edge_frame) { for_backends(fam_edge_frame, "edgeframe"); }
END_TEST
START_TEST(test_layers) { for_backends(fam_layers, "layers"); }
END_TEST
START_TEST(test_message_passing) { for_backends(fam_mp, "mp"); }
END_TEST
START_TEST(test_readout) { for_backends(fam_readout, "readout"); }
END_TEST
START_TEST(test_film) { for_backends(fam_film, "film"); }
END_TEST

static Suite *ops_suite(void)
{
    Suite *s = suite_create("ops");
    TCase *tc = tcase_create("vjp vs finite differences");
    tcase_set_timeout(tc, TU_HANG_GUARD_S);
    tcase_add_test(tc, test_geometry);
    tcase_add_test(tc, test_ace_embed);
    tcase_add_test(tc, test_wigner);
    tcase_add_test(tc, test_wigner_properties);
    tcase_add_test(tc, test_edge_frame);
    tcase_add_test(tc, test_layers);
    tcase_add_test(tc, test_message_passing);
    tcase_add_test(tc, test_readout);
    tcase_add_test(tc, test_film);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    struct timespec t0, t1;
    SRunner *sr = srunner_create(ops_suite());
    int failed;
#ifdef _OPENMP
    /* One thread: these are thousands of tiny calls, and threads are not what
     * this suite tests (check_backends compares 1 and 2 threads bit for bit).
     * With 2 threads on the loaded 2-core VM the run took 40 s, not 4. */
    omp_set_num_threads(1);
#endif
    clock_gettime(CLOCK_MONOTONIC, &t0);
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    printf("check_ops: %.2f s\n", (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (t1.tv_nsec - t0.tv_nsec));
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
