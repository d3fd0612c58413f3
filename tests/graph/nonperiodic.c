/* Non-periodic systems against the brute force: random clusters of 1 to 150
 * atoms (also with an ignored cell), clusters millions of Å apart, a line. */
#include "harness.h"

START_TEST(test_nonperiodic_clusters)
{
    static const size_t sizes[] = {1, 2, 7, 40, 150};
    size_t s;
    rng_seed(1);
    for (s = 0; s < sizeof sizes / sizeof *sizes; s++) {
        size_t n = sizes[s];
        double *p = random_positions(n, NULL, 2.0 * cbrt((double)n) + 1.0, -0.5, 0.5);
        double cell[9] = {0};
        ecn_graph g;
        check_case("cluster", n, p, NULL, PBC_NONE, 5.0, 4.0, &g);
        if (n >= 40)
            ck_assert(g.edges.n > 0 && g.nb.n > 0);
        ck_assert_int_eq(count_self_images(&g.edges), 0);
        ecn_graph_free(&g);
        /* a cell with all pbc flags off is ignored (even an all-zero one) */
        check_case("cluster, zero cell, pbc off", n, p, cell, PBC_NONE, 5.0, 4.0, NULL);
        /* r_cut_neighbor larger than r_cut_edge */
        check_case("cluster, rcn > rce", n, p, NULL, PBC_NONE, 2.5, 4.5, NULL);
        free(p);
    }
}
END_TEST

START_TEST(test_nonperiodic_wide)
{
    /* Several dense clusters very far apart plus scattered atoms: binning of
     * a huge bounding box. */
    size_t n = 400, i;
    double *p = malloc(n * 3 * sizeof *p);
    ecn_graph g;
    rng_seed(2);
    for (i = 0; i < n; i++) {
        int c = (int)(i % 5), k;
        double centre[5][3] = {{0, 0, 0}, {1e5, 0, 0}, {0, -3e6, 0}, {2e4, 2e4, 7e5}, {-1e3, 0, 0}};
        for (k = 0; k < 3; k++)
            p[3 * i + k] = centre[c][k] + rng_range(-4.0, 4.0);
        if (i % 37 == 0)
            for (k = 0; k < 3; k++)
                p[3 * i + k] = rng_range(-1e7, 1e7);
    }
    check_case("wide cluster", n, p, NULL, PBC_NONE, 5.0, 4.0, &g);
    ck_assert(g.edges.n > 1000);
    ecn_graph_free(&g);
    /* points on a line (degenerate bounding box in two axes) */
    for (i = 0; i < n; i++) {
        p[3 * i] = 0.731 * (double)i;
        p[3 * i + 1] = 1.0;
        p[3 * i + 2] = -2.0;
    }
    check_case("line", n, p, NULL, PBC_NONE, 5.0, 4.0, &g);
    ck_assert(g.edges.n > 0);
    ecn_graph_free(&g);
    free(p);
}
END_TEST

void nonperiodic_tests(TCase *tc)
{
    tcase_add_test(tc, test_nonperiodic_clusters);
    tcase_add_test(tc, test_nonperiodic_wide);
}
