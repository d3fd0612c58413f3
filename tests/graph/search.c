/* The search at its edges: no atoms, distant atoms, a pair at the cutoff
 * (strict), and the special paths of the stencil search (stencil in pieces,
 * candidate lists too long to keep). */
#include "harness.h"

START_TEST(test_empty_and_sparse)
{
    ecn_graph g;
    char err[256];
    double p[6] = {0, 0, 0, 10, 0, 0};
    double cell[9] = {30, 0, 0, 0, 30, 0, 0, 0, 30};
    /* N = 0, with and without positions / cell */
    ck_assert_int_eq(ecn_graph_build(0, NULL, NULL, NULL, 5.0, 4.0, &g, err, sizeof err), ECENET_OK);
    ck_assert(g.edges.n == 0 && g.nb.n == 0 && !g.edges.src && !g.nb.src);
    ecn_graph_free(&g);
    ck_assert_int_eq(ecn_graph_build(0, p, cell, PBC_ALL, 5.0, 4.0, &g, err, sizeof err), ECENET_OK);
    ck_assert(g.edges.n == 0 && g.nb.n == 0);
    ecn_graph_free(&g);
    /* two distant atoms */
    check_case("distant", 2, p, NULL, PBC_NONE, 5.0, 4.0, &g);
    ck_assert(g.edges.n == 0 && g.nb.n == 0);
    ecn_graph_free(&g);
    check_case("distant periodic", 2, p, cell, PBC_ALL, 5.0, 4.0, &g);
    ck_assert(g.edges.n == 0 && g.nb.n == 0);
    ecn_graph_free(&g);
    /* exactly at the cutoff: excluded (strict), just inside: included */
    p[3] = 5.0;
    check_case("at cutoff", 2, p, NULL, PBC_NONE, 5.0, 5.0, &g);
    ck_assert(g.edges.n == 0 && g.nb.n == 0);
    ecn_graph_free(&g);
    p[3] = nextafter(5.0, 0.0);
    check_case("inside cutoff", 2, p, NULL, PBC_NONE, 5.0, 4.0, &g);
    ck_assert_int_eq(g.edges.n, 2);
    ck_assert_int_eq(g.nb.n, 0);
    ck_assert(g.edges.src[0] == 0 && g.edges.dst[0] == 1 && g.edges.src[1] == 1 && g.edges.dst[1] == 0);
    ecn_graph_free(&g);
}
END_TEST

START_TEST(test_search_paths)
{
    /* A rod of a cell (1 x 1 x 40 Å, cutoff 9 Å): 19 x 19 x 3 = 1083 stencil
     * cells per bin, more than the search builds at once, so each atom is
     * searched on its own with the stencil in pieces. */
    {
        double cell[9] = {1, 0, 0, 0, 1, 0, 0, 0, 40};
        double *p;
        rng_seed(21);
        p = random_positions(64, cell, 0.0, 0.0, 1.0);
        check_case("rod, stencil in pieces", 64, p, cell, PBC_ALL, 9.0, 5.0, NULL);
        free(p);
    }
    /* A dense 2 Å cell with a 7 Å cutoff: 729 stencil cells, but ~10^4
     * candidates in the one bin's list, more than the search keeps, so again
     * atom by atom (with the whole stencil cached). */
    {
        double cell[9] = {2, 0, 0, 0.3, 2, 0, -0.2, 0.1, 2};
        double *p;
        rng_seed(22);
        p = random_positions(30, cell, 0.0, 0.0, 1.0);
        check_case("dense small cell, long list", 30, p, cell, PBC_ALL, 7.0, 4.0, NULL);
        free(p);
    }
}
END_TEST

void search_tests(TCase *tc)
{
    tcase_add_test(tc, test_empty_and_sparse);
    tcase_add_test(tc, test_search_paths);
}
