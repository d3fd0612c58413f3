/* Bad input: coincident atoms (also only through an image), non-finite
 * positions, singular cells, bad cutoffs and arguments; the same status and
 * message from the device search's set-up. */
#include "harness.h"

static void expect_error(size_t n, const double *pos, const double *cell, const int pbc[3],
                         double rce, double rcn, ecenet_status want, const char *needle)
{
    ecn_graph g;
    char err[256] = "";
    ecenet_status st = ecn_graph_build(n, pos, cell, pbc, rce, rcn, &g, err, sizeof err);
    ck_assert_msg(st == want, "status %d, expected %d (%s)", (int)st, (int)want, err);
    ck_assert_msg(strstr(err, needle) != NULL, "message \"%s\" lacks \"%s\"", err, needle);
    ck_assert(g.edges.n == 0 && g.nb.n == 0 && !g.edges.src && !g.edges.dst && !g.edges.shift &&
              !g.nb.src && !g.nb.dst && !g.nb.shift);
    ecn_graph_free(&g);
    /* the set-up of a device search fails alike, except for what only the
     * search itself can find (coincident atoms: the device hands those back
     * to the host search) */
    ecenet_nlist s;
    char err2[256] = "";
    memset(&g, 0, sizeof g);
    st = ecn_graph_setup(n, pos, cell, pbc, rce, rcn, &g, &s, err2, sizeof err2);
    if (strstr(needle, "coincide")) {
        ck_assert_msg(st == ECENET_OK, "set-up: status %d (%s)", (int)st, err2);
        ck_assert(s.n == (int64_t)n && s.visits >= 1 && g.edges.n == 0 && g.nb.n == 0);
    } else {
        ck_assert_msg(st == want && strcmp(err, err2) == 0, "set-up: status %d, \"%s\" vs \"%s\"",
                      (int)st, err2, err);
    }
    ecn_graph_free(&g);
}

START_TEST(test_errors)
{
    double cell[9] = {5, 0, 0, 0, 5, 0, 0, 0, 5};
    double *p;
    size_t n = 10;
    rng_seed(9);
    p = random_positions(n, cell, 0.0, 0.0, 1.0);
    /* coincident atoms 3 and 7 */
    memcpy(&p[21], &p[9], 3 * sizeof *p);
    expect_error(n, p, NULL, NULL, 5.0, 4.0, ECENET_ERR_INPUT, "atoms 3 and 7 coincide");
    expect_error(n, p, cell, PBC_ALL, 5.0, 4.0, ECENET_ERR_INPUT, "atoms 3 and 7 coincide");
    /* coincident only through a periodic image: atom 1 = atom 0 + a */
    {
        double q[9] = {0, 0, 0, 5, 0, 0, 1.3, 2.1, 0.4};
        double tri[9] = {5, 0, 0, 1, 4, 0, 0.5, 0.5, 4.5};
        double q2[9] = {0.2, 0.3, 0.1, 0, 0, 0, 0, 0, 0};
        int k;
        expect_error(3, q, cell, PBC_ALL, 5.0, 4.0, ECENET_ERR_INPUT, "atoms 0 and 1 coincide");
        /* not periodic along a: fine */
        {
            int pbc_bc[3] = {0, 1, 1};
            ecn_graph g;
            ck_assert_int_eq(ecn_graph_build(3, q, cell, pbc_bc, 5.0, 4.0, &g, NULL, 0), ECENET_OK);
            ecn_graph_free(&g);
        }
        /* triclinic, atom 2 = atom 0 - 3b + 2c */
        for (k = 0; k < 3; k++) {
            q2[3 + k] = 1.7 + tri[3 + k];
            q2[6 + k] = q2[k] - 3 * tri[3 + k] + 2 * tri[6 + k];
        }
        expect_error(3, q2, tri, PBC_ALL, 5.0, 4.0, ECENET_ERR_INPUT, "atoms 0 and 2 coincide");
    }
    /* non-finite positions */
    p[21] += 0.5;
    p[16] = NAN;
    expect_error(n, p, NULL, NULL, 5.0, 4.0, ECENET_ERR_INPUT, "atom 5 has a non-finite position");
    expect_error(n, p, cell, PBC_ALL, 5.0, 4.0, ECENET_ERR_INPUT, "atom 5 has a non-finite position");
    p[16] = 1.0;
    p[27] = -INFINITY;
    expect_error(n, p, cell, PBC_ALL, 5.0, 4.0, ECENET_ERR_INPUT, "atom 9 has a non-finite position");
    p[27] = 1.0;
    /* singular / degenerate cells */
    {
        double s1[9] = {5, 0, 0, 0, 5, 0, 5, 5, 0};          /* coplanar */
        double s2[9] = {5, 0, 0, 0, 0, 0, 0, 0, 5};          /* zero periodic row */
        double s3[9] = {5, 0, 0, 5, 1e-12, 0, 0, 0, 5};      /* nearly parallel */
        double s4[9] = {5, 0, 0, 0, NAN, 0, 0, 0, 5};
        int pbc_y[3] = {0, 1, 0};
        expect_error(n, p, s1, PBC_ALL, 5.0, 4.0, ECENET_ERR_INPUT, "singular");
        expect_error(n, p, s2, PBC_ALL, 5.0, 4.0, ECENET_ERR_INPUT, "singular");
        expect_error(n, p, s2, pbc_y, 5.0, 4.0, ECENET_ERR_INPUT, "singular");
        expect_error(n, p, s3, PBC_ALL, 5.0, 4.0, ECENET_ERR_INPUT, "singular");
        expect_error(n, p, s4, PBC_ALL, 5.0, 4.0, ECENET_ERR_INPUT, "not finite");
        /* lengths whose squares overflow are named as they are (the sum of
         * squares gave "lengths inf, inf, 5") */
        {
            double s5[9] = {1e200, 0, 0, 1e200, 0, 0, 0, 0, 5};
            expect_error(n, p, s5, PBC_ALL, 5.0, 4.0, ECENET_ERR_INPUT,
                         "lattice vector lengths 1e+200, 1e+200, 5 Å");
            /* regular, but 1e-170 Å wide: refused for its images, with its
             * true width (the reciprocal's sum of squares gave "width 0") */
            double s6[9] = {1e-170, 0, 0, 0, 1e100, 0, 0, 0, 1e80}, o[3] = {0, 0, 0};
            expect_error(1, o, s6, PBC_ALL, 5.0, 4.0, ECENET_ERR_INPUT,
                         "along cell axis 0 (width 1e-170 Å)");
        }
        /* non-periodic: the cell is ignored */
        {
            ecn_graph g;
            ck_assert_int_eq(ecn_graph_build(n, p, s1, PBC_NONE, 5.0, 4.0, &g, NULL, 0), ECENET_OK);
            ecn_graph_free(&g);
        }
    }
    /* cells far denser than matter (a lattice in nm taken for Å, a nearly
     * degenerate cell): refused before the search, along 3, 2 and 1
     * periodic axes; 10 atoms here */
    {
        double skew[9] = {10, 0, 0, 9.999, 0.001, 0, 0, 0, 10}; /* 0.1 Å^3: 100 atoms/Å^3 */
        double nm[9] = {0.5, 0, 0, 0, 0.5, 0, 0, 0, 0.5};       /* 5 Å in nm: 80 atoms/Å^3 */
        double flat[9] = {0.3, 0, 0, 0, 0.3, 0, 0, 0, 0};       /* 0.09 Å^2 of area */
        double wire[9] = {0.01, 0, 0, 0, 0, 0, 0, 0, 0};        /* 0.01 Å of length */
        int pbc_xy[3] = {1, 1, 0}, pbc_x[3] = {1, 0, 0};
        expect_error(n, p, skew, PBC_ALL, 5.0, 4.0, ECENET_ERR_INPUT, "far denser than matter");
        expect_error(n, p, nm, PBC_ALL, 5.0, 4.0, ECENET_ERR_INPUT, "is the lattice in Å?");
        /* 10 · π·5² / 0.09 images over the sphere: 16.7 atoms/Å^3 */
        expect_error(n, p, flat, pbc_xy, 5.0, 4.0, ECENET_ERR_INPUT, "far denser than matter");
        /* 10 · 2·5 / 0.01 over the sphere: 19.1 atoms/Å^3 */
        expect_error(n, p, wire, pbc_x, 5.0, 4.0, ECENET_ERR_INPUT, "far denser than matter");
        /* twice diamond's density is searched: 2 atoms in a 0.18 · 2 per Å^3 cube */
        {
            const double a = cbrt(2.0 / 0.36);
            double dense[9] = {a, 0, 0, 0, a, 0, 0, 0, a};
            double q[6] = {0, 0, 0, 0.5 * a, 0.5 * a, 0.5 * a};
            ecn_graph g;
            ck_assert_int_eq(ecn_graph_build(2, q, dense, PBC_ALL, 5.0, 4.0, &g, NULL, 0), ECENET_OK);
            ck_assert(g.edges.n > 0);
            ecn_graph_free(&g);
        }
    }
    /* bad cutoffs and arguments */
    expect_error(n, p, cell, PBC_ALL, 0.0, 4.0, ECENET_ERR_ARGUMENT, "cutoff");
    expect_error(n, p, cell, PBC_ALL, 5.0, -1.0, ECENET_ERR_ARGUMENT, "cutoff");
    expect_error(n, p, cell, PBC_ALL, NAN, 4.0, ECENET_ERR_ARGUMENT, "cutoff");
    expect_error(n, p, cell, PBC_ALL, 5.0, INFINITY, ECENET_ERR_ARGUMENT, "cutoff");
    expect_error(n, NULL, cell, PBC_ALL, 5.0, 4.0, ECENET_ERR_ARGUMENT, "positions");
    ck_assert_int_eq(ecn_graph_build(n, p, cell, PBC_ALL, 5.0, 4.0, NULL, NULL, 0),
                     ECENET_ERR_ARGUMENT);
    /* a cutoff spanning absurdly many images */
    expect_error(n, p, cell, PBC_ALL, 1e9, 4.0, ECENET_ERR_INPUT, "too many");
    /* a message never overflows a short buffer */
    {
        ecn_graph g;
        char small[8];
        memset(small, 'x', sizeof small);
        ck_assert_int_eq(ecn_graph_build(n, p, cell, PBC_ALL, -1.0, 4.0, &g, small, sizeof small),
                         ECENET_ERR_ARGUMENT);
        ck_assert_int_eq((int)strlen(small), 7);
    }
    free(p);
}
END_TEST

void error_tests(TCase *tc)
{
    tcase_add_test(tc, test_errors);
}
