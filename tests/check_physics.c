/* Physics tests through the public API (reference backend, float64):
 *
 *  1. SO(3), exact case: activation = identity, random rotations: energy
 *     invariant, forces and stress covariant (several configurations).
 *  2. SO(3), approximate case: SiLU with small weights; the aliasing error of
 *     the θ-grid nonlinearity (SPEC §11, §18.1) is measured and bounded.
 *  3. Translation, permutation and periodic-image invariance (random systems
 *     and the golden crystals).
 *  4. Whole-model finite differences: forces and the unsymmetrised dE/dε,
 *     stress = dE/dε / V.
 *  5. Conservativity: work around a closed loop, velocity-Verlet NVE drift.
 *  6. Zero edges: E = Σ atomic energies, zero forces, continuity at r_cut.
 *  7. Bad input: statuses, messages, untouched output buffers.
 *
 * Every tolerance states, next to it, the value measured when it was set.
 * Layout: this driver; the shared helpers in physics/harness.[ch]; one
 * physics/<topic>.c per topic (rotation, invariance, finite_differences,
 * conservation, zero_edges, bad_input). */
#include "physics/harness.h"

static Suite *physics_suite(void)
{
    Suite *s = suite_create("physics");
    TCase *tc = tcase_create("rotation");
    tcase_set_timeout(tc, TU_HANG_GUARD_S);
    rotation_tests(tc);
    suite_add_tcase(s, tc);

    tc = tcase_create("invariance"); /* 14 s here: diamond (216 atoms) dominates */
    tcase_set_timeout(tc, TU_HANG_GUARD_S);
    invariance_tests(tc);
    suite_add_tcase(s, tc);

    tc = tcase_create("finite_differences");
    tcase_set_timeout(tc, TU_HANG_GUARD_S);
    fd_tests(tc);
    suite_add_tcase(s, tc);

    tc = tcase_create("conservation");
    tcase_set_timeout(tc, TU_HANG_GUARD_S);
    conservation_tests(tc);
    suite_add_tcase(s, tc);

    tc = tcase_create("zero_edges");
    tcase_set_timeout(tc, TU_HANG_GUARD_S);
    zero_edge_tests(tc);
    suite_add_tcase(s, tc);

    tc = tcase_create("bad_input");
    tcase_set_timeout(tc, TU_HANG_GUARD_S);
    bad_input_tests(tc);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return tu_run_suite(physics_suite()); }
