/* The per-atom groupings (CSR) of the lists for named kinds of systems and
 * their corners: an isolated atom, empty lists, no atoms. */
#include "harness.h"

START_TEST(test_csr_groupings)
{
    /* check_case compares the groupings with csr_reference in every case of
     * check_graph; these are the kinds of systems named explicitly. */
    ecn_graph g;
    double *p;
    rng_seed(23);
    /* molecule (non-periodic), with an isolated atom far away */
    p = random_positions(13, NULL, 4.0, -0.5, 0.5);
    p[36] = 100.0;
    check_case("molecule", 13, p, NULL, PBC_NONE, 5.0, 4.0, &g);
    ck_assert_int_eq(g.edges.src_ptr[12], g.edges.src_ptr[13]);
    ck_assert_int_eq(g.edges.dst_ptr[12], g.edges.dst_ptr[13]);
    ecn_graph_free(&g);
    free(p);
    /* periodic box */
    {
        double cell[9] = {11, 0, 0, 0, 11, 0, 0, 0, 11};
        p = random_positions(120, cell, 0.0, 0.0, 1.0);
        check_case("box", 120, p, cell, PBC_ALL, 5.0, 4.0, NULL);
        check_case("box, rcn > rce", 120, p, cell, PBC_ALL, 3.0, 5.5, NULL);
        free(p);
    }
    /* small cell, many images of each pair */
    {
        double cell[9] = {2.9, 0, 0, 0.4, 3.1, 0, 0.3, -0.5, 2.7};
        p = random_positions(3, cell, 0.0, 0.0, 1.0);
        check_case("small cell", 3, p, cell, PBC_ALL, 8.0, 6.0, &g);
        ck_assert(g.edges.n > 300);
        ecn_graph_free(&g);
        free(p);
    }
    /* no edges at all: ptr arrays of zeros, no idx arrays */
    {
        double q[9] = {0, 0, 0, 10, 0, 0, 0, 20, 0};
        double cell[9] = {40, 0, 0, 0, 40, 0, 0, 0, 40};
        check_case("no edges", 3, q, NULL, PBC_NONE, 5.0, 4.0, &g);
        ck_assert(g.edges.n == 0 && g.edges.src_ptr && !g.edges.src_idx);
        ecn_graph_free(&g);
        check_case("no edges, periodic", 3, q, cell, PBC_ALL, 5.0, 4.0, NULL);
        /* edges, but no neighbour pairs */
        check_case("edges only", 3, q, NULL, PBC_NONE, 10.5, 4.0, &g);
        ck_assert(g.edges.n > 0 && g.nb.n == 0 && g.nb.dst_ptr && !g.nb.dst_idx);
        ecn_graph_free(&g);
    }
    /* triclinic, positions not wrapped */
    {
        double cell[9] = {5.1, 1.2, -0.7, 4.0, 4.4, 0.3, 2.6, -3.1, 3.3};
        p = random_positions(70, cell, 0.0, -2.0, 3.0);
        check_case("triclinic", 70, p, cell, PBC_ALL, 5.0, 4.0, NULL);
        free(p);
    }
    /* no atoms: no arrays at all */
    ck_assert_int_eq(ecn_graph_build(0, NULL, NULL, NULL, 5.0, 4.0, &g, NULL, 0), ECENET_OK);
    assert_csr(&g.edges, 0, "no atoms");
    assert_csr(&g.nb, 0, "no atoms");
    ecn_graph_free(&g);
}
END_TEST

void grouping_tests(TCase *tc)
{
    tcase_add_test(tc, test_csr_groupings);
}
