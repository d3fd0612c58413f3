/* Tests of the neighbour search (src/core/graph.c).
 *
 * Reference: a brute-force search inside this file that loops over every
 * ordered pair (i, j) and every integer image n in a generous range (from the
 * fractional coordinates and the perpendicular widths), in the order
 * i, j, n_a, n_b, n_c — which is exactly the order ecn_graph_build promises.
 * The reference computes shifts and distances with the same floating-point
 * expressions as the library, so the lists must be identical. The per-atom
 * groupings (CSR) are checked against a plain serial counting sort, and the
 * search with 1, 2 and 3 OpenMP threads must give identical bytes. */
#define _POSIX_C_SOURCE 200809L

#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "ecenet.h"
#include "graph.h"
#include "safetensors.h"
#include "test_util.h"

/* ---- small helpers --------------------------------------------------------- */

#define rng_seed tu_rng_seed

static double rng_range(double a, double b) { return a + (b - a) * tu_uniform(); }

static double det3(const double m[9])
{
    return m[0] * (m[4] * m[8] - m[5] * m[7]) - m[1] * (m[3] * m[8] - m[5] * m[6]) +
           m[2] * (m[3] * m[7] - m[4] * m[6]);
}

static void inv3(const double m[9], double inv[9])
{
    double d = det3(m);
    inv[0] = (m[4] * m[8] - m[5] * m[7]) / d;
    inv[1] = (m[2] * m[7] - m[1] * m[8]) / d;
    inv[2] = (m[1] * m[5] - m[2] * m[4]) / d;
    inv[3] = (m[5] * m[6] - m[3] * m[8]) / d;
    inv[4] = (m[0] * m[8] - m[2] * m[6]) / d;
    inv[5] = (m[2] * m[3] - m[0] * m[5]) / d;
    inv[6] = (m[3] * m[7] - m[4] * m[6]) / d;
    inv[7] = (m[1] * m[6] - m[0] * m[7]) / d;
    inv[8] = (m[0] * m[4] - m[1] * m[3]) / d;
}

/* Random positions: fractional coordinates in [lo, hi) along each axis times
 * the cell (or Cartesian in [lo, hi)·box when cell is NULL). */
static double *random_positions(size_t n, const double *cell, double box, double lo, double hi)
{
    double *p = malloc((n ? n : 1) * 3 * sizeof *p);
    size_t i;
    int k;
    ck_assert_ptr_nonnull(p);
    for (i = 0; i < n; i++) {
        double f[3];
        for (k = 0; k < 3; k++)
            f[k] = rng_range(lo, hi);
        for (k = 0; k < 3; k++)
            p[3 * i + k] = cell ? f[0] * cell[k] + f[1] * cell[3 + k] + f[2] * cell[6 + k]
                                : f[k] * box;
    }
    return p;
}

/* ---- brute-force reference -------------------------------------------------- */

static void pl_push(ecn_pairlist *l, int64_t *cap, int32_t s, int32_t d, const double sh[3])
{
    if (l->n == *cap) {
        *cap = *cap ? 2 * *cap : 64;
        l->src = realloc(l->src, (size_t)*cap * sizeof *l->src);
        l->dst = realloc(l->dst, (size_t)*cap * sizeof *l->dst);
        l->shift = realloc(l->shift, (size_t)*cap * 3 * sizeof *l->shift);
        if (!l->src || !l->dst || !l->shift)
            ck_abort_msg("out of memory");
    }
    l->src[l->n] = s;
    l->dst[l->n] = d;
    memcpy(&l->shift[3 * l->n], sh, 3 * sizeof *sh);
    l->n++;
}

static void brute(size_t n, const double *pos, const double *cell, const int pbc[3], double rce,
                  double rcn, ecn_graph *out)
{
    static const double zero9[9] = {0};
    int per[3] = {0, 0, 0}, k;
    double inv[9] = {0}, bn[3] = {0, 0, 0}, *F = NULL;
    double rmax = rce > rcn ? rce : rcn;
    const double *C = zero9;
    int64_t cap_e = 0, cap_n = 0;
    size_t i, j;

    memset(out, 0, sizeof *out);
    if (cell)
        for (k = 0; k < 3; k++)
            per[k] = pbc[k] != 0;
    if (per[0] || per[1] || per[2]) {
        C = cell;
        inv3(cell, inv);
        for (k = 0; k < 3; k++)
            bn[k] = sqrt(inv[k] * inv[k] + inv[3 + k] * inv[3 + k] + inv[6 + k] * inv[6 + k]);
    }
    F = malloc((n ? n : 1) * 3 * sizeof *F);
    ck_assert_ptr_nonnull(F);
    for (i = 0; i < n; i++)
        for (k = 0; k < 3; k++)
            F[3 * i + k] = pos[3 * i] * inv[k] + pos[3 * i + 1] * inv[3 + k] +
                           pos[3 * i + 2] * inv[6 + k];
    for (i = 0; i < n; i++)
        for (j = 0; j < n; j++) {
            int64_t lo[3], hi[3], n0, n1, n2;
            for (k = 0; k < 3; k++) {
                if (per[k]) {
                    double dlt = F[3 * j + k] - F[3 * i + k], rb = rmax * bn[k];
                    lo[k] = (int64_t)floor(-dlt - rb) - 1;
                    hi[k] = (int64_t)ceil(-dlt + rb) + 1;
                } else {
                    lo[k] = hi[k] = 0;
                }
            }
            for (n0 = lo[0]; n0 <= hi[0]; n0++)
                for (n1 = lo[1]; n1 <= hi[1]; n1++)
                    for (n2 = lo[2]; n2 <= hi[2]; n2++) {
                        const double *xi = &pos[3 * i], *xj = &pos[3 * j];
                        double sh[3], dx, dy, dz, r;
                        if (i == j && n0 == 0 && n1 == 0 && n2 == 0)
                            continue;
                        for (k = 0; k < 3; k++)
                            sh[k] = (double)n0 * C[0 + k] + (double)n1 * C[3 + k] +
                                    (double)n2 * C[6 + k];
                        dx = xj[0] - xi[0] + sh[0];
                        dy = xj[1] - xi[1] + sh[1];
                        dz = xj[2] - xi[2] + sh[2];
                        r = sqrt(dx * dx + dy * dy + dz * dz);
                        if (!(r > 1e-10))
                            ck_abort_msg("test set-up: atoms %zu and %zu coincide", i, j);
                        if (r < rce)
                            pl_push(&out->edges, &cap_e, (int32_t)i, (int32_t)j, sh);
                        if (r < rcn)
                            pl_push(&out->nb, &cap_n, (int32_t)i, (int32_t)j, sh);
                    }
        }
    free(F);
}

static void assert_lists_equal(const ecn_pairlist *a, const ecn_pairlist *b, const char *what,
                               double tol)
{
    int64_t e;
    ck_assert_msg(a->n == b->n, "%s: %lld entries, reference %lld", what, (long long)a->n,
                  (long long)b->n);
    for (e = 0; e < a->n; e++) {
        int k;
        if (a->src[e] != b->src[e] || a->dst[e] != b->dst[e])
            ck_abort_msg("%s entry %lld: (%d -> %d), reference (%d -> %d)", what, (long long)e,
                      a->src[e], a->dst[e], b->src[e], b->dst[e]);
        for (k = 0; k < 3; k++)
            if (!(fabs(a->shift[3 * e + k] - b->shift[3 * e + k]) <= tol))
                ck_abort_msg("%s entry %lld (%d -> %d): shift[%d] %.17g, reference %.17g", what,
                          (long long)e, a->src[e], a->dst[e], k, a->shift[3 * e + k],
                          b->shift[3 * e + k]);
    }
}

/* The groupings as step.c's csr_build makes them: a plain serial counting
 * sort of the entries by atom[k], stable. */
static void csr_reference(size_t N, int64_t n, const int32_t *atom, int32_t *ptr, int32_t *idx)
{
    int64_t k;
    size_t a;
    for (a = 0; a <= N; a++)
        ptr[a] = 0;
    for (k = 0; k < n; k++)
        ptr[atom[k] + 1]++;
    for (a = 0; a < N; a++)
        ptr[a + 1] += ptr[a];
    for (k = 0; k < n; k++)
        idx[ptr[atom[k]]++] = (int32_t)k;
    for (a = N; a > 0; a--)
        ptr[a] = ptr[a - 1];
    ptr[0] = 0;
}

/* The list's src/dst groupings equal csr_reference; src_idx is the identity. */
static void assert_csr(const ecn_pairlist *l, size_t N, const char *what)
{
    int32_t *ptr, *idx;
    int side;
    int64_t k;
    if (N == 0) {
        ck_assert(!l->src_ptr && !l->dst_ptr && !l->src_idx && !l->dst_idx);
        return;
    }
    ck_assert_msg(l->src_ptr && l->dst_ptr, "%s: ptr arrays missing", what);
    if (l->n == 0) {
        ck_assert_msg(!l->src_idx && !l->dst_idx, "%s: idx arrays of an empty list", what);
        for (k = 0; k <= (int64_t)N; k++)
            ck_assert(l->src_ptr[k] == 0 && l->dst_ptr[k] == 0);
        return;
    }
    ck_assert_msg(l->src_idx && l->dst_idx, "%s: idx arrays missing", what);
    ptr = malloc((N + 1) * sizeof *ptr);
    idx = malloc((size_t)l->n * sizeof *idx);
    ck_assert(ptr && idx);
    for (side = 0; side < 2; side++) {
        const int32_t *gp = side ? l->dst_ptr : l->src_ptr, *gi = side ? l->dst_idx : l->src_idx;
        csr_reference(N, l->n, side ? l->dst : l->src, ptr, idx);
        for (k = 0; k <= (int64_t)N; k++)
            if (gp[k] != ptr[k])
                ck_abort_msg("%s: %s_ptr[%lld] = %d, reference %d", what, side ? "dst" : "src",
                             (long long)k, gp[k], ptr[k]);
        for (k = 0; k < l->n; k++)
            if (gi[k] != idx[k])
                ck_abort_msg("%s: %s_idx[%lld] = %d, reference %d", what, side ? "dst" : "src",
                             (long long)k, gi[k], idx[k]);
    }
    for (k = 0; k < l->n; k++)
        ck_assert_int_eq(l->src_idx[k], k);
    free(ptr);
    free(idx);
}

static int64_t count_self_images(const ecn_pairlist *l)
{
    int64_t e, c = 0;
    for (e = 0; e < l->n; e++)
        c += l->src[e] == l->dst[e];
    return c;
}

/* Build with the library and with brute force; compare exactly. Returns the
 * library's graph (caller frees) when keep != NULL. */
static void check_case(const char *name, size_t n, const double *pos, const double *cell,
                       const int pbc[3], double rce, double rcn, ecn_graph *keep)
{
    ecn_graph g, ref;
    char err[256] = "";
    char what[128];
    ecenet_status st = ecn_graph_build(n, pos, cell, pbc, rce, rcn, &g, err, sizeof err);
    ck_assert_msg(st == ECENET_OK, "%s: status %d: %s", name, (int)st, err);
    brute(n, pos, cell, pbc, rce, rcn, &ref);
    snprintf(what, sizeof what, "%s edges", name);
    assert_lists_equal(&g.edges, &ref.edges, what, 1e-12);
    snprintf(what, sizeof what, "%s neighbours", name);
    assert_lists_equal(&g.nb, &ref.nb, what, 1e-12);
    snprintf(what, sizeof what, "%s edge groupings", name);
    assert_csr(&g.edges, n, what);
    snprintf(what, sizeof what, "%s neighbour groupings", name);
    assert_csr(&g.nb, n, what);
    ecn_graph_free(&ref);
    if (keep)
        *keep = g;
    else
        ecn_graph_free(&g);
}

static const int PBC_ALL[3] = {1, 1, 1};
static const int PBC_NONE[3] = {0, 0, 0};

/* ---- brute-force comparisons ----------------------------------------------- */

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

/* ---- the search's special paths ---------------------------------------------- */

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

/* ---- per-atom groupings --------------------------------------------------------- */

START_TEST(test_csr_groupings)
{
    /* check_case compares the groupings with csr_reference in every case of
     * this file; these are the kinds of systems named explicitly. */
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

/* ---- errors ------------------------------------------------------------------ */

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
        /* non-periodic: the cell is ignored */
        {
            ecn_graph g;
            ck_assert_int_eq(ecn_graph_build(n, p, s1, PBC_NONE, 5.0, 4.0, &g, NULL, 0), ECENET_OK);
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

/* ---- golden graphs ---------------------------------------------------------------- */

typedef struct {
    int64_t src, dst, n[3], idx;
} gentry;

static int gentry_cmp(const void *pa, const void *pb)
{
    const gentry *a = pa, *b = pb;
    int k;
    if (a->src != b->src)
        return a->src < b->src ? -1 : 1;
    if (a->dst != b->dst)
        return a->dst < b->dst ? -1 : 1;
    for (k = 0; k < 3; k++)
        if (a->n[k] != b->n[k])
            return a->n[k] < b->n[k] ? -1 : 1;
    return 0;
}

/* The golden list as a set: each shift converted to its integer image (and
 * checked to be one), sorted by (src, dst, image), compared with ours. */
static void compare_golden_list(const ecn_safetensors *st, const char *src_name,
                                const char *dst_name, const char *shift_name,
                                const ecn_pairlist *ours, const double *cell, int64_t n_atoms)
{
    const ecn_tensor *t = ecn_st_find(st, src_name);
    int64_t m, e;
    const int64_t *gs, *gd;
    const double *gsh;
    double inv[9] = {0};
    gentry *ge;
    ck_assert_msg(t != NULL, "%s missing", src_name);
    m = t->numel;
    gs = tu_i64(st, src_name, m);
    gd = tu_i64(st, dst_name, m);
    gsh = tu_f64(st, shift_name, 3 * m);
    if (cell)
        inv3(cell, inv);
    ge = malloc((size_t)(m ? m : 1) * sizeof *ge);
    ck_assert_ptr_nonnull(ge);
    for (e = 0; e < m; e++) {
        int k;
        if (gs[e] < 0 || gs[e] >= n_atoms || gd[e] < 0 || gd[e] >= n_atoms)
            ck_abort_msg("%s: bad atom index at %lld", src_name, (long long)e);
        ge[e].src = gs[e];
        ge[e].dst = gd[e];
        ge[e].idx = e;
        for (k = 0; k < 3; k++) {
            const double *sh = &gsh[3 * e];
            ge[e].n[k] = cell ? (int64_t)floor(sh[0] * inv[k] + sh[1] * inv[3 + k] +
                                               sh[2] * inv[6 + k] + 0.5)
                              : 0;
        }
        for (k = 0; k < 3; k++) {
            double v = cell ? ge[e].n[0] * cell[k] + ge[e].n[1] * cell[3 + k] +
                                  ge[e].n[2] * cell[6 + k]
                            : 0.0;
            if (!(fabs(v - gsh[3 * e + k]) < 1e-9))
                ck_abort_msg("%s entry %lld: shift is not a lattice vector", shift_name,
                             (long long)e);
        }
    }
    qsort(ge, (size_t)m, sizeof *ge, gentry_cmp);
    ck_assert_msg(ours->n == m, "%s: %lld entries, golden %lld", src_name, (long long)ours->n,
                  (long long)m);
    for (e = 0; e < m; e++) {
        int k;
        if (ours->src[e] != ge[e].src || ours->dst[e] != ge[e].dst)
            ck_abort_msg("%s sorted entry %lld: (%d -> %d), golden (%lld -> %lld)", src_name,
                         (long long)e, ours->src[e], ours->dst[e], (long long)ge[e].src,
                         (long long)ge[e].dst);
        for (k = 0; k < 3; k++)
            if (!(fabs(ours->shift[3 * e + k] - gsh[3 * ge[e].idx + k]) <= 1e-9))
                ck_abort_msg("%s sorted entry %lld (%d -> %d): shift[%d] %.17g, golden %.17g",
                             src_name, (long long)e, ours->src[e], ours->dst[e], k,
                             ours->shift[3 * e + k], gsh[3 * ge[e].idx + k]);
    }
    free(ge);
}

static void check_golden(const char *name, double rce, double rcn, int periodic)
{
    ecn_safetensors *st = tu_open_golden(name, "ref");
    const ecn_tensor *tp = ecn_st_find(st, "input.positions"), *tb = ecn_st_find(st, "input.pbc");
    int64_t n;
    const double *pos, *cell;
    const uint8_t *pb;
    int pbc[3], k;
    ecn_graph g;
    char err[256];
    ck_assert_ptr_nonnull(tp);
    ck_assert_int_eq(tp->rank, 2);
    n = tp->shape[0];
    pos = tu_f64(st, "input.positions", 3 * n);
    cell = tu_f64(st, "input.cell", 9);
    ck_assert_ptr_nonnull(tb);
    ck_assert_int_eq(tb->dtype, ECN_DT_U8);
    ck_assert_int_eq(tb->numel, 3);
    pb = tb->data;
    for (k = 0; k < 3; k++) {
        pbc[k] = pb[k];
        ck_assert_int_eq(pbc[k] != 0, periodic);
    }
    ck_assert_int_eq(ecn_graph_build((size_t)n, pos, periodic ? cell : NULL, pbc, rce, rcn, &g,
                                     err, sizeof err),
                     ECENET_OK);
    compare_golden_list(st, "graph.edge_i", "graph.edge_j", "graph.edge_shift", &g.edges,
                        periodic ? cell : NULL, n);
    compare_golden_list(st, "graph.nb_src", "graph.nb_dst", "graph.nb_shift", &g.nb,
                        periodic ? cell : NULL, n);
    /* and the brute force agrees too */
    ecn_graph_free(&g);
    check_case(name, (size_t)n, pos, periodic ? cell : NULL, pbc, rce, rcn, NULL);
    ecn_st_close(st);
}

START_TEST(test_golden_ethanol) { check_golden("ethanol", 5.0, 4.0, 0); }
END_TEST

START_TEST(test_golden_diamond) { check_golden("diamond", 5.0, 4.0, 1); }
END_TEST

START_TEST(test_golden_options) { check_golden("options", 4.5, 3.5, 1); }
END_TEST

/* ---- suite ---------------------------------------------------------------------- */

static Suite *graph_suite(void)
{
    Suite *s = suite_create("graph");
    TCase *tc = tcase_create("brute force");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_nonperiodic_clusters);
    tcase_add_test(tc, test_nonperiodic_wide);
    tcase_add_test(tc, test_periodic_cells);
    tcase_add_test(tc, test_skewed_cell_huge);
    tcase_add_test(tc, test_skewed_cells_random);
    tcase_add_test(tc, test_periodic_binned);
    tcase_add_test(tc, test_mixed_pbc);
    tcase_add_test(tc, test_zero_row_nonperiodic_axis);
    tcase_add_test(tc, test_cutoff_larger_than_cell);
    tcase_add_test(tc, test_single_atom_small_cell);
    tcase_add_test(tc, test_unwrapped_positions);
    tcase_add_test(tc, test_empty_and_sparse);
    tcase_add_test(tc, test_search_paths);
    tcase_add_test(tc, test_csr_groupings);
    suite_add_tcase(s, tc);
    tc = tcase_create("threads");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_thread_count);
    tcase_add_test(tc, test_rebuild);
    suite_add_tcase(s, tc);
    tc = tcase_create("errors");
    tcase_add_test(tc, test_errors);
    suite_add_tcase(s, tc);
    tc = tcase_create("golden");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_golden_ethanol);
    tcase_add_test(tc, test_golden_diamond);
    tcase_add_test(tc, test_golden_options);
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
