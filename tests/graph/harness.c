/* The shared helpers of check_graph (declared in harness.h): random positions
 * and the brute-force reference search that every list is compared with. */
#include "harness.h"

const int PBC_ALL[3] = {1, 1, 1};
const int PBC_NONE[3] = {0, 0, 0};

/* ---- small helpers --------------------------------------------------------- */

double rng_range(double a, double b) { return a + (b - a) * tu_uniform(); }

static double det3(const double m[9])
{
    return m[0] * (m[4] * m[8] - m[5] * m[7]) - m[1] * (m[3] * m[8] - m[5] * m[6]) +
           m[2] * (m[3] * m[7] - m[4] * m[6]);
}

void inv3(const double m[9], double inv[9])
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
double *random_positions(size_t n, const double *cell, double box, double lo, double hi)
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

void assert_lists_equal(const ecn_pairlist *a, const ecn_pairlist *b, const char *what,
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
void assert_csr(const ecn_pairlist *l, size_t N, const char *what)
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

int64_t count_self_images(const ecn_pairlist *l)
{
    int64_t e, c = 0;
    for (e = 0; e < l->n; e++)
        c += l->src[e] == l->dst[e];
    return c;
}

/* Build with the library and with brute force; compare exactly. Returns the
 * library's graph (caller frees) when keep != NULL. */
void check_case(const char *name, size_t n, const double *pos, const double *cell,
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
