/* Periodic cells of every shape against the brute force: cubic, orthorhombic,
 * triclinic, hexagonal, and skewed ones (a tiny perpendicular width: searched
 * in a reduced basis, reported in the basis given; the device search's set-up
 * leaves them to the host). */
#include "harness.h"

START_TEST(test_periodic_cells)
{
    struct {
        const char *name;
        double cell[9];
        size_t n;
        double rce, rcn;
    } cases[] = {
        {"cubic", {8, 0, 0, 0, 8, 0, 0, 0, 8}, 40, 5.0, 4.0},
        {"cubic large", {16, 0, 0, 0, 16, 0, 0, 0, 16}, 200, 5.0, 4.0},
        {"orthorhombic", {7, 0, 0, 0, 9, 0, 0, 0, 11.5}, 50, 5.0, 4.0},
        {"orthorhombic rcn>rce", {7, 0, 0, 0, 9, 0, 0, 0, 11.5}, 50, 3.0, 4.5},
        {"triclinic", {6, 0, 0, 4.5, 3, 0, -3.5, 2.5, 4}, 30, 5.0, 4.0},
        {"triclinic rotated", {5.1, 1.2, -0.7, 4.0, 4.4, 0.3, 2.6, -3.1, 3.3}, 30, 5.0, 4.0},
        {"triclinic sheared", {12, 0, 0, 11.5, 2.5, 0, 11.0, 1.0, 3.0}, 40, 4.5, 3.5},
        {"hexagonal", {9, 0, 0, -4.5, 7.794228634059948, 0, 0, 0, 13}, 60, 5.0, 4.0},
        /* b = 40a + (1.3, 8.5, 0), c = -7a + (0.4, 2, 9.5): a 0.21 Å
         * perpendicular width along a, so searched in a reduced basis (16×
         * fewer images) and converted back */
        {"skewed", {9, 0, 0, 361.3, 8.5, 0, -62.6, 2.0, 9.5}, 30, 5.0, 4.0},
    };
    size_t c;
    rng_seed(3);
    for (c = 0; c < sizeof cases / sizeof *cases; c++) {
        double *p = random_positions(cases[c].n, cases[c].cell, 0.0, 0.0, 1.0);
        ecn_graph g1, g2;
        check_case(cases[c].name, cases[c].n, p, cases[c].cell, PBC_ALL, cases[c].rce,
                   cases[c].rcn, &g1);
        /* pbc == NULL with a cell means periodic along all axes */
        ck_assert_int_eq(ecn_graph_build(cases[c].n, p, cases[c].cell, NULL, cases[c].rce,
                                         cases[c].rcn, &g2, NULL, 0),
                         ECENET_OK);
        assert_lists_equal(&g2.edges, &g1.edges, "pbc NULL edges", 0.0);
        assert_lists_equal(&g2.nb, &g1.nb, "pbc NULL neighbours", 0.0);
        ecn_graph_free(&g1);
        ecn_graph_free(&g2);
        free(p);
    }
}
END_TEST

/* (src, dst, vector) of every entry, sorted: the lists of two bases of one lattice agree */
typedef struct {
    int32_t s, d;
    double v[3];
} vec_entry;
static int vec_cmp(const void *pa, const void *pb)
{
    const vec_entry *a = pa, *b = pb;
    if (a->s != b->s)
        return a->s < b->s ? -1 : 1;
    if (a->d != b->d)
        return a->d < b->d ? -1 : 1;
    for (int k = 0; k < 3; k++)
        if (a->v[k] != b->v[k])
            return a->v[k] < b->v[k] ? -1 : 1;
    return 0;
}
static vec_entry *sorted_vectors(const ecn_pairlist *L, const double *pos)
{
    vec_entry *t = malloc((size_t)(L->n ? L->n : 1) * sizeof *t);
    ck_assert_ptr_nonnull(t);
    for (int64_t k = 0; k < L->n; k++) {
        t[k].s = L->src[k];
        t[k].d = L->dst[k];
        for (int c = 0; c < 3; c++)
            t[k].v[c] = pos[3 * L->dst[k] + c] - pos[3 * L->src[k] + c] + L->shift[3 * k + c];
    }
    qsort(t, (size_t)L->n, sizeof *t, vec_cmp);
    return t;
}

START_TEST(test_skewed_cell_huge)
{
    /* A 10 Å cube written with b = (1e8, 10, 0) = b_cube + 1e7·a: a 1e-6 Å
     * perpendicular width along a, i.e. ~1e8 images to search in the cell as
     * given (minutes); searched in a reduced basis, the same entries as in
     * the cube (every shift is exact here: integers times 10 and 1e8) */
    const double cube[9] = {10, 0, 0, 0, 10, 0, 0, 0, 10};
    const double skew[9] = {10, 0, 0, 1e8, 10, 0, 0, 0, 10};
    const size_t n = 24;
    double *p;
    ecn_graph gc, gs;
    char err[256] = "";
    rng_seed(31);
    p = random_positions(n, cube, 0.0, 0.0, 1.0);
    ck_assert_int_eq(ecn_graph_build(n, p, cube, PBC_ALL, 5.0, 4.0, &gc, err, sizeof err), ECENET_OK);
    ck_assert_msg(ecn_graph_build(n, p, skew, PBC_ALL, 5.0, 4.0, &gs, err, sizeof err) == ECENET_OK,
                  "skewed cell: %s", err);
    for (int l = 0; l < 2; l++) {
        const ecn_pairlist *a = l ? &gc.nb : &gc.edges, *b = l ? &gs.nb : &gs.edges;
        vec_entry *ta, *tb;
        ck_assert_int_eq(a->n, b->n);
        ck_assert(a->n > 0);
        ta = sorted_vectors(a, p);
        tb = sorted_vectors(b, p);
        for (int64_t k = 0; k < a->n; k++)
            ck_assert_msg(vec_cmp(&ta[k], &tb[k]) == 0, "list %d, sorted entry %lld differs", l,
                          (long long)k);
        free(ta);
        free(tb);
        assert_csr(b, n, l ? "skewed neighbour groupings" : "skewed edge groupings");
    }
    ecn_graph_free(&gc);
    ecn_graph_free(&gs);
    /* the device search's set-up leaves the skewed cell to the host: the
     * host's lists in the graph, those of ecn_graph_build */
    {
        ecenet_nlist su;
        ecn_graph gb;
        memset(&gs, 0, sizeof gs);
        ck_assert_int_eq(ecn_graph_setup(n, p, skew, PBC_ALL, 5.0, 4.0, &gs, &su, err, sizeof err),
                         ECENET_OK);
        ck_assert_int_eq(su.n, -1);
        ck_assert_int_eq(ecn_graph_build(n, p, skew, PBC_ALL, 5.0, 4.0, &gb, err, sizeof err),
                         ECENET_OK);
        for (int l = 0; l < 2; l++) {
            const ecn_pairlist *a = l ? &gs.nb : &gs.edges, *b = l ? &gb.nb : &gb.edges;
            ck_assert(a->n > 0 && a->n == b->n);
            ck_assert(!memcmp(a->dst, b->dst, (size_t)a->n * sizeof *a->dst));
            ck_assert(!memcmp(a->shift, b->shift, 3 * (size_t)a->n * sizeof *a->shift));
        }
        ecn_graph_free(&gb);
        ck_assert_int_eq(ecn_graph_setup(n, p, cube, PBC_ALL, 5.0, 4.0, &gs, &su, err, sizeof err),
                         ECENET_OK);
        ck_assert_int_eq(su.n, (int64_t)n);
        ecn_graph_free(&gs);
    }
    /* errors name atoms and images as in the cell given: an atom 1e14 Å out
     * along b (fractional -1e20 along a as given; the reduced basis alone
     * would have accepted it and overflowed n_R·U), and atom 1 = atom 0 + a */
    {
        double q[6] = {1, 1, 1, 1, 1e14 + 3.3, 1};
        ck_assert_int_eq(ecn_graph_build(2, q, skew, PBC_ALL, 5.0, 4.0, &gs, err, sizeof err),
                         ECENET_ERR_INPUT);
        ck_assert_msg(strstr(err, "atom 1 lies too far outside the cell"), "%s", err);
        q[3] = 11, q[4] = 1;
        ck_assert_int_eq(ecn_graph_build(2, q, skew, PBC_ALL, 5.0, 4.0, &gs, err, sizeof err),
                         ECENET_ERR_INPUT);
        ck_assert_msg(strstr(err, "atoms 0 and 1 coincide (distance 0 Å, periodic image (-1, 0, 0)"),
                      "%s", err);
        /* one atom alone: empty lists */
        ck_assert_int_eq(ecn_graph_build(1, q, skew, PBC_ALL, 5.0, 4.0, &gs, err, sizeof err),
                         ECENET_OK);
        ck_assert(gs.edges.n == 0 && gs.nb.n == 0);
        ecn_graph_free(&gs);
    }
    free(p);
}
END_TEST

START_TEST(test_skewed_cells_random)
{
    /* One lattice written in random skewed bases b = U·a (U unimodular,
     * three shears a_i += k·a_j, 6 <= |k| <= 30, of periodic rows), fully
     * and partly periodic: against the brute force in the basis as written
     * (order, images, shifts), whether or not the search reduces it */
    const double base[9] = {7.5, 0.3, 0, -0.4, 8.0, 0.2, 0.5, -0.3, 9.0};
    const int pbcs[3][3] = {{1, 1, 1}, {1, 1, 0}, {0, 1, 1}};
    rng_seed(41);
    for (int trial = 0; trial < 12; trial++) {
        const int *pbc = pbcs[trial % 3];
        double cell[9];
        char name[64];
        memcpy(cell, base, sizeof cell);
        int ax[3], na = 0;
        for (int a = 0; a < 3; a++)
            if (pbc[a])
                ax[na++] = a;
        for (int sh = 0; sh < 3; sh++) {
            const int q = (int)floor(rng_range(0, na)) % na, i = ax[q];
            const int j = ax[(q + 1 + (int)floor(rng_range(0, na - 1)) % (na - 1)) % na];
            const int k = (rng_range(0, 1) < 0.5 ? -1 : 1) * (6 + (int)floor(rng_range(0, 25)));
            for (int c = 0; c < 3; c++)
                cell[3 * i + c] += k * cell[3 * j + c];
        }
        double *p = random_positions(20, base, 0.0, -0.5, 1.5);
        snprintf(name, sizeof name, "random skew %d", trial);
        check_case(name, 20, p, cell, pbc, 5.0, 4.0, NULL);
        free(p);
    }
}
END_TEST

void cell_tests(TCase *tc)
{
    tcase_add_test(tc, test_periodic_cells);
    tcase_add_test(tc, test_skewed_cell_huge);
    tcase_add_test(tc, test_skewed_cells_random);
}
