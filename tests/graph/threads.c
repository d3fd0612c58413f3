/* The search with 1, 2 and 3 OpenMP threads gives the same bytes, and a graph
 * rebuilt in place equals a fresh build. */
#include "harness.h"

#ifdef _OPENMP
#include <omp.h>
#endif

/* ---- thread count --------------------------------------------------------------- */

static int same_bytes(const void *a, const void *b, size_t len)
{
    return len == 0 || (a && b && memcmp(a, b, len) == 0);
}

static void assert_same_list(const ecn_pairlist *a, const ecn_pairlist *b, size_t N,
                             const char *what)
{
    const size_t m = (size_t)a->n;
    ck_assert_msg(a->n == b->n, "%s: %lld vs %lld entries", what, (long long)a->n,
                  (long long)b->n);
    ck_assert_msg(same_bytes(a->src, b->src, m * sizeof *a->src) &&
                      same_bytes(a->dst, b->dst, m * sizeof *a->dst) &&
                      same_bytes(a->shift, b->shift, 3 * m * sizeof *a->shift),
                  "%s: entries differ", what);
    ck_assert_msg(same_bytes(a->src_ptr, b->src_ptr, (N + 1) * sizeof *a->src_ptr) &&
                      same_bytes(a->dst_ptr, b->dst_ptr, (N + 1) * sizeof *a->dst_ptr) &&
                      same_bytes(a->src_idx, b->src_idx, m * sizeof *a->src_idx) &&
                      same_bytes(a->dst_idx, b->dst_idx, m * sizeof *a->dst_idx),
                  "%s: groupings differ", what);
}

/* The same bytes with 1, 2 and 3 threads (without OpenMP: twice the same). */
static void check_threads(const char *name, size_t n, const double *pos, const double *cell,
                          const int pbc[3], double rce, double rcn)
{
    ecn_graph g1, g;
    char err[256] = "", what[128];
    int t;
#ifdef _OPENMP
    const int saved = omp_get_max_threads();
    omp_set_num_threads(1);
#endif
    ck_assert_msg(ecn_graph_build(n, pos, cell, pbc, rce, rcn, &g1, err, sizeof err) == ECENET_OK,
                  "%s: %s", name, err);
    for (t = 2; t <= 3; t++) {
#ifdef _OPENMP
        omp_set_num_threads(t);
#endif
        ck_assert_msg(ecn_graph_build(n, pos, cell, pbc, rce, rcn, &g, err, sizeof err) ==
                          ECENET_OK,
                      "%s: %s", name, err);
        snprintf(what, sizeof what, "%s, edges, 1 vs %d threads", name, t);
        assert_same_list(&g1.edges, &g.edges, n, what);
        snprintf(what, sizeof what, "%s, neighbours, 1 vs %d threads", name, t);
        assert_same_list(&g1.nb, &g.nb, n, what);
        ecn_graph_free(&g);
    }
#ifdef _OPENMP
    omp_set_num_threads(saved);
#endif
    ck_assert(g1.edges.n > 0);
    ecn_graph_free(&g1);
}

START_TEST(test_thread_count)
{
    double *p;
    rng_seed(24);
    /* periodic triclinic box, several bins per axis */
    {
        double cell[9] = {24, 0, 0, 1.5, 22, 0, -2.0, 1.0, 20};
        p = random_positions(900, cell, 0.0, 0.0, 1.0);
        check_threads("binned box", 900, p, cell, PBC_ALL, 5.0, 4.0);
        check_threads("binned box, rcn > rce", 900, p, cell, PBC_ALL, 3.5, 6.0);
        free(p);
    }
    /* unwrapped positions far outside the cell, mixed pbc */
    {
        double cell[9] = {9, 0, 0, 2.5, 8.5, 0, -1.5, 1.0, 10};
        const int slab[3] = {1, 1, 0};
        p = random_positions(150, cell, 0.0, -30.0, 30.0);
        check_threads("unwrapped", 150, p, cell, PBC_ALL, 5.0, 4.0);
        check_threads("unwrapped slab", 150, p, cell, slab, 5.0, 4.0);
        free(p);
    }
    /* a molecule (non-periodic cluster) */
    p = random_positions(200, NULL, 13.0, -0.5, 0.5);
    check_threads("cluster", 200, p, NULL, PBC_NONE, 5.0, 4.0);
    free(p);
    /* small cell, many images; the stencil in pieces; long candidate lists */
    {
        double small[9] = {4, 0, 0, 0.5, 4, 0, 0, 0.3, 4};
        double rod[9] = {1, 0, 0, 0, 1, 0, 0, 0, 40};
        p = random_positions(70, small, 0.0, 0.0, 1.0);
        check_threads("small cell", 70, p, small, PBC_ALL, 6.0, 4.0);
        free(p);
        p = random_positions(64, rod, 0.0, 0.0, 1.0);
        check_threads("rod", 64, p, rod, PBC_ALL, 9.0, 5.0);
        free(p);
    }
}
END_TEST

/* ---- rebuilding in place ------------------------------------------------------- */

START_TEST(test_rebuild)
{
    /* One graph rebuilt for a run of systems (growing, shrinking, empty, a
     * failure in between) equals a fresh build each time, byte for byte. */
    double box[9] = {13, 0, 0, 1.0, 12, 0, -0.5, 0.8, 14};
    double small[9] = {3.1, 0, 0, 0.2, 2.9, 0, 0, 0.4, 3.3};
    ecn_graph rg, g;
    char err[256] = "";
    double *p, *q;
    double far[6] = {0, 0, 0, 50, 0, 0};
    int step;
    rng_seed(25);
    p = random_positions(300, box, 0.0, -0.1, 1.1);
    q = random_positions(4, small, 0.0, 0.0, 1.0);
    /* rebuilding starts from a graph of ecn_graph_build (or all zeros) */
    ck_assert_int_eq(ecn_graph_build(4, q, small, PBC_ALL, 5.0, 4.0, &rg, err, sizeof err),
                     ECENET_OK);
    for (step = 0; step < 12; step++) {
        size_t n = step % 4 == 0 ? 300 : step % 4 == 1 ? 120 : step % 4 == 2 ? 4 : 2;
        const double *pos = step % 4 == 2 ? q : step % 4 == 3 ? far : p;
        const double *cell = step % 4 == 2 ? small : step % 4 == 3 ? NULL : box;
        const int *pbc = cell ? PBC_ALL : PBC_NONE;
        char what[64];
        if (step == 6) {
            /* a failure leaves the graph empty; rebuilding goes on */
            double two[6] = {1, 1, 1, 1, 1, 1};
            ck_assert_int_eq(ecn_graph_rebuild(2, two, NULL, NULL, 5.0, 4.0, &rg, err, sizeof err),
                             ECENET_ERR_INPUT);
            ck_assert(rg.edges.n == 0 && !rg.edges.src && !rg.edges.src_ptr && !rg.mem);
        }
        if (step == 9)
            ck_assert_int_eq(ecn_graph_rebuild(0, NULL, NULL, NULL, 5.0, 4.0, &rg, err, sizeof err),
                             ECENET_OK);
        /* atoms move a little */
        for (size_t i = 0; i < 3 * 300; i++)
            p[i] += rng_range(-0.05, 0.05);
        ck_assert_msg(ecn_graph_rebuild(n, pos, cell, pbc, 5.0, 4.0, &rg, err, sizeof err) ==
                          ECENET_OK,
                      "step %d: %s", step, err);
        ck_assert_int_eq(ecn_graph_build(n, pos, cell, pbc, 5.0, 4.0, &g, err, sizeof err),
                         ECENET_OK);
        snprintf(what, sizeof what, "rebuild step %d, edges", step);
        assert_same_list(&g.edges, &rg.edges, n, what);
        snprintf(what, sizeof what, "rebuild step %d, neighbours", step);
        assert_same_list(&g.nb, &rg.nb, n, what);
        ck_assert(g.mem == NULL && rg.mem != NULL);
        ecn_graph_free(&g);
    }
    ecn_graph_free(&rg);
    ck_assert(!rg.mem && !rg.edges.src);
    free(p);
    free(q);
}
END_TEST

void thread_tests(TCase *tc)
{
    tcase_add_test(tc, test_thread_count);
    tcase_add_test(tc, test_rebuild);
}
