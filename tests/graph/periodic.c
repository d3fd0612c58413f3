/* Periodic systems beyond the cell's shape, against the brute force: several
 * bins per axis, mixed pbc flags, zero lattice rows along non-periodic axes,
 * cutoffs longer than the cell (many images of one pair, self images), and
 * positions outside the cell. */
#include "harness.h"

START_TEST(test_periodic_binned)
{
    /* Enough atoms and a big enough cell that several bins per axis are used. */
    double cell[9] = {24, 0, 0, 1.5, 22, 0, -2.0, 1.0, 20};
    size_t n = 900;
    double *p;
    ecn_graph g;
    rng_seed(4);
    p = random_positions(n, cell, 0.0, 0.0, 1.0);
    check_case("binned", n, p, cell, PBC_ALL, 5.0, 4.0, &g);
    ck_assert(g.edges.n > 10 * (int64_t)n);
    ck_assert_int_eq(count_self_images(&g.edges), 0);
    ecn_graph_free(&g);
    free(p);
}
END_TEST

START_TEST(test_mixed_pbc)
{
    static const int flags[6][3] = {{1, 0, 0}, {0, 1, 0}, {0, 0, 1}, {1, 1, 0}, {0, 1, 1}, {1, 0, 1}};
    double cells[2][9] = {{6, 0, 0, 0, 7, 0, 0, 0, 8}, {6, 0, 0, 4.5, 3, 0, -3.5, 2.5, 4}};
    int f, c;
    rng_seed(5);
    for (c = 0; c < 2; c++)
        for (f = 0; f < 6; f++) {
            size_t n = 30;
            /* atoms also outside the cell along non-periodic axes */
            double *p = random_positions(n, cells[c], 0.0, -0.7, 1.6);
            ecn_graph g;
            char name[64];
            snprintf(name, sizeof name, "mixed pbc %d%d%d cell %d", flags[f][0], flags[f][1],
                     flags[f][2], c);
            check_case(name, n, p, cells[c], flags[f], 5.0, 4.0, &g);
            ck_assert(g.edges.n > 0);
            ecn_graph_free(&g);
            check_case(name, n, p, cells[c], flags[f], 9.0, 3.0, NULL);
            free(p);
        }
}
END_TEST

START_TEST(test_zero_row_nonperiodic_axis)
{
    /* Slab: pbc (1,1,0) with a zero third lattice vector; same lists as with
     * any completing third vector. */
    double cell0[9] = {5, 0, 0, 1, 6, 0, 0, 0, 0}, cell1[9] = {5, 0, 0, 1, 6, 0, 0, 0, 1};
    double wire0[9] = {4, 0, 0, 0, 0, 0, 0, 0, 0}, wire1[9] = {4, 0, 0, 0, 1, 0, 0, 0, 1};
    int slab[3] = {1, 1, 0}, wire[3] = {1, 0, 0};
    size_t n = 25;
    double *p;
    ecn_graph g0, g1;
    char err[256];
    rng_seed(6);
    p = random_positions(n, cell1, 0.0, -0.2, 1.2);
    for (size_t i = 0; i < n; i++)
        p[3 * i + 2] = rng_range(-3, 3);
    ck_assert_int_eq(ecn_graph_build(n, p, cell0, slab, 5.0, 4.0, &g0, err, sizeof err), ECENET_OK);
    check_case("slab", n, p, cell1, slab, 5.0, 4.0, &g1);
    assert_lists_equal(&g0.edges, &g1.edges, "slab zero row edges", 0.0);
    assert_lists_equal(&g0.nb, &g1.nb, "slab zero row neighbours", 0.0);
    ecn_graph_free(&g0);
    ecn_graph_free(&g1);
    ck_assert_int_eq(ecn_graph_build(n, p, wire0, wire, 5.0, 4.0, &g0, err, sizeof err), ECENET_OK);
    check_case("wire", n, p, wire1, wire, 5.0, 4.0, &g1);
    assert_lists_equal(&g0.edges, &g1.edges, "wire zero rows edges", 0.0);
    assert_lists_equal(&g0.nb, &g1.nb, "wire zero rows neighbours", 0.0);
    ecn_graph_free(&g0);
    ecn_graph_free(&g1);
    free(p);
}
END_TEST

START_TEST(test_cutoff_larger_than_cell)
{
    struct {
        double cell[9];
        size_t n;
        double rce, rcn;
    } cases[] = {
        {{3, 0, 0, 0, 3, 0, 0, 0, 3}, 2, 7.3, 4.0},
        {{2.5, 0, 0, 0, 3.1, 0, 0, 0, 4.2}, 3, 5.0, 6.0},
        {{3, 0, 0, 2.2, 2.0, 0, -1.4, 1.1, 2.6}, 4, 5.0, 4.0},
        {{6, 0, 0, 5.7, 0.9, 0, 0.3, 0.4, 1.5}, 5, 5.0, 4.0}, /* very thin */
    };
    size_t c;
    rng_seed(7);
    for (c = 0; c < sizeof cases / sizeof *cases; c++) {
        double *p = random_positions(cases[c].n, cases[c].cell, 0.0, 0.0, 1.0);
        ecn_graph g;
        int64_t e, multi = 0;
        check_case("small cell", cases[c].n, p, cases[c].cell, PBC_ALL, cases[c].rce, cases[c].rcn,
                   &g);
        ck_assert_msg(count_self_images(&g.edges) > 0, "case %zu: no self-image edges", c);
        ck_assert(count_self_images(&g.nb) > 0);
        /* several images of the same ordered pair */
        for (e = 1; e < g.edges.n; e++)
            multi += g.edges.src[e] == g.edges.src[e - 1] && g.edges.dst[e] == g.edges.dst[e - 1] &&
                     g.edges.src[e] != g.edges.dst[e];
        ck_assert(multi > 0);
        ecn_graph_free(&g);
        free(p);
    }
}
END_TEST

START_TEST(test_single_atom_small_cell)
{
    double cell[9] = {2.1, 0, 0, 0.4, 2.3, 0, 0.2, -0.3, 2.6};
    double p[3] = {0.3, -7.9, 1.1};
    ecn_graph g;
    int64_t e, n_expect = 0;
    int a, b, c;
    check_case("single atom", 1, p, cell, PBC_ALL, 5.0, 4.0, &g);
    ck_assert(g.edges.n > 0);
    for (e = 0; e < g.edges.n; e++)
        if (g.edges.src[e] != 0 || g.edges.dst[e] != 0)
            ck_abort_msg("edge %lld is not a self image", (long long)e);
    /* count lattice vectors shorter than 5 independently */
    for (a = -10; a <= 10; a++)
        for (b = -10; b <= 10; b++)
            for (c = -10; c <= 10; c++) {
                double v[3];
                int k;
                if (!a && !b && !c)
                    continue;
                for (k = 0; k < 3; k++)
                    v[k] = a * cell[k] + b * cell[3 + k] + c * cell[6 + k];
                n_expect += sqrt(v[0] * v[0] + v[1] * v[1] + v[2] * v[2]) < 5.0;
            }
    ck_assert_int_eq(g.edges.n, n_expect);
    ecn_graph_free(&g);
    /* non-periodic single atom: nothing */
    ck_assert_int_eq(ecn_graph_build(1, p, NULL, NULL, 5.0, 4.0, &g, NULL, 0), ECENET_OK);
    ck_assert_int_eq(g.edges.n, 0);
    ck_assert_int_eq(g.nb.n, 0);
    ecn_graph_free(&g);
}
END_TEST

START_TEST(test_unwrapped_positions)
{
    /* Positions outside the cell (some far away): same graph vectors as the
     * wrapped positions, and exact agreement with brute force. */
    double cell[9] = {7, 0, 0, 2.5, 6.5, 0, -1.5, 1.0, 8};
    size_t n = 40, i;
    double *p, *q;
    ecn_graph gw, gu;
    int64_t e;
    rng_seed(8);
    p = random_positions(n, cell, 0.0, 0.0, 1.0);
    q = malloc(n * 3 * sizeof *q);
    for (i = 0; i < n; i++) {
        int k;
        long m[3];
        for (k = 0; k < 3; k++)
            m[k] = (long)floor(rng_range(-3, 4));
        if (i % 7 == 0)
            m[0] += 1000;
        if (i % 11 == 0)
            m[2] -= 537;
        for (k = 0; k < 3; k++)
            q[3 * i + k] = p[3 * i + k] + m[0] * cell[k] + m[1] * cell[3 + k] + m[2] * cell[6 + k];
    }
    check_case("wrapped", n, p, cell, PBC_ALL, 5.0, 4.0, &gw);
    check_case("unwrapped", n, q, cell, PBC_ALL, 5.0, 4.0, &gu);
    /* same (src, dst) pattern and the same vectors up to rounding: the sets of
     * vectors of each (src, dst) pair are sorted by image, and the image of a
     * pair changes by a constant, so the order is the same. */
    ck_assert_int_eq(gw.edges.n, gu.edges.n);
    for (e = 0; e < gw.edges.n; e++) {
        int32_t s = gw.edges.src[e], d = gw.edges.dst[e];
        int k;
        if (gu.edges.src[e] != s || gu.edges.dst[e] != d)
            ck_abort_msg("edge %lld: pattern differs", (long long)e);
        for (k = 0; k < 3; k++) {
            double vw = p[3 * d + k] - p[3 * s + k] + gw.edges.shift[3 * e + k];
            double vu = q[3 * d + k] - q[3 * s + k] + gu.edges.shift[3 * e + k];
            if (!(fabs(vw - vu) < 1e-8))
                ck_abort_msg("edge %lld: %g vs %g", (long long)e, vw, vu);
        }
    }
    ecn_graph_free(&gw);
    ecn_graph_free(&gu);
    /* uniformly translated: identical lists (binning changes, order must not) */
    for (i = 0; i < 3 * n; i++)
        q[i] = p[i] + (i % 3 == 0 ? 0.37 : i % 3 == 1 ? -12.1 : 3.3);
    {
        ecn_graph g1, g2;
        char err[256];
        ck_assert_int_eq(ecn_graph_build(n, p, cell, PBC_ALL, 5.0, 4.0, &g1, err, sizeof err), ECENET_OK);
        ck_assert_int_eq(ecn_graph_build(n, q, cell, PBC_ALL, 5.0, 4.0, &g2, err, sizeof err), ECENET_OK);
        assert_lists_equal(&g1.edges, &g2.edges, "translated edges", 1e-12);
        assert_lists_equal(&g1.nb, &g2.nb, "translated neighbours", 1e-12);
        ecn_graph_free(&g1);
        ecn_graph_free(&g2);
    }
    /* generally scattered far outside the cell */
    free(p);
    p = random_positions(n, cell, 0.0, -40.0, 40.0);
    check_case("scattered", n, p, cell, PBC_ALL, 5.0, 4.0, NULL);
    free(p);
    free(q);
}
END_TEST

void periodic_tests(TCase *tc)
{
    tcase_add_test(tc, test_periodic_binned);
    tcase_add_test(tc, test_mixed_pbc);
    tcase_add_test(tc, test_zero_row_nonperiodic_axis);
    tcase_add_test(tc, test_cutoff_larger_than_cell);
    tcase_add_test(tc, test_single_atom_small_cell);
    tcase_add_test(tc, test_unwrapped_positions);
}
