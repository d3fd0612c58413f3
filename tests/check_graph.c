/* Tests of the neighbour search (src/core/graph.c): every list is compared
 * exactly with a brute-force search (same order, images and shifts), the
 * per-atom groupings (CSR) with a serial counting sort, and the search with
 * 1, 2 and 3 OpenMP threads must give identical bytes.
 * Layout: this driver; the shared helpers and the reference in graph/harness.[ch];
 * one graph/<topic>.c per topic (nonperiodic, cells, periodic, search,
 * groupings, threads, errors, golden). */
#include "graph/harness.h"

static Suite *graph_suite(void)
{
    Suite *s = suite_create("graph");
    /* Check runs a tcase's tests in the order added: the order of the
     * one-file version. */
    TCase *tc = tcase_create("brute force");
    tcase_set_timeout(tc, TU_HANG_GUARD_S);
    nonperiodic_tests(tc);
    cell_tests(tc);
    periodic_tests(tc);
    search_tests(tc);
    grouping_tests(tc);
    suite_add_tcase(s, tc);

    tc = tcase_create("threads");
    tcase_set_timeout(tc, TU_HANG_GUARD_S);
    thread_tests(tc);
    suite_add_tcase(s, tc);

    tc = tcase_create("errors");
    tcase_set_timeout(tc, TU_HANG_GUARD_S);
    error_tests(tc);
    suite_add_tcase(s, tc);

    tc = tcase_create("golden");
    tcase_set_timeout(tc, TU_HANG_GUARD_S);
    golden_tests(tc);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(graph_suite());
    int failed;
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
