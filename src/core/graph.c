/* Neighbour search for ECENet: directed edges (r < r_cut_edge) and ACE
 * neighbour pairs (1e-10 < r < r_cut_neighbor), all periodic images, as ASE's
 * neighbor_list('ijS') and ECENet's MPtrj trainer (SPEC §2.4): several images
 * of one pair and self-image pairs (i, i, n != 0) are all listed.
 *
 * Method (one search at max(r_cut_edge, r_cut_neighbor)):
 *   1. Frame: the cell when any pbc flag is set (a zero row on a non-periodic
 *      axis is completed with a unit vector orthogonal to the others),
 *      otherwise the identity. Fractional coordinates F = pos · cell⁻¹.
 *      Periodic axes are wrapped, f = F - off with off = floor(F); the integer
 *      offsets go back into the reported image, so every shift refers to the
 *      ORIGINAL positions.
 *   2. Linked cells: bins along each axis at least the search radius wide
 *      (measured perpendicular to the other two lattice vectors). Bins are
 *      found by a hash of their integer coordinates, so only occupied bins
 *      cost memory (sparse or very wide non-periodic systems are fine).
 *      Along a periodic axis narrower than the cutoff the search visits
 *      s = ceil(r·|b_k| / bin width) bins each side, i.e. as many images as
 *      needed.
 *   3. Candidates pass a cheap prefilter (wrapped positions, search radius
 *      inflated by 1e-8 relative, so rounding can never drop a pair), then
 *      are tested exactly with the original positions:
 *      d = pos[dst] - pos[src] + shift, shift = n_a·a + n_b·b + n_c·c,
 *      r = sqrt(d·d), kept if r < cutoff (strict).
 *   4. Per source atom the candidates are sorted by (dst, n_a, n_b, n_c), so
 *      the order is independent of the binning.
 * Cost O(N · neighbours) time, O(N + pairs) memory.
 *
 * Details of the contract (beyond graph.h):
 *   - pbc may be NULL when a cell is given: all three axes are then periodic.
 *     A cell with all pbc flags 0 is ignored (it may be all zeros).
 *   - n_atoms == 0 gives two empty lists (pos may then be NULL).
 *   - Empty lists have NULL arrays; on failure *g is left empty.
 *   - Pairs at distance <= 1e-10 Å (any image, not i->i with n = 0) are an
 *     error naming the first such pair in list order.
 *   - Each list is limited to INT32_MAX entries (ECENET_ERR_INPUT beyond).
 *   - An atom more than 2^52 cells away from the cell is rejected. */
#define _POSIX_C_SOURCE 200809L

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "graph.h"

#define ECN_COINCIDE_DIST 1e-10
/* Each list is indexed with int32 downstream. */
#define ECN_MAX_PAIRS ((int64_t)INT32_MAX)
/* The search radius is inflated by this relative amount so that rounding in
 * the binning can never lose a pair that the exact test keeps. */
#define ECN_SEARCH_INFLATE 1e-8
/* Bins are chosen this much (relatively) wider than the search radius so that
 * s = ceil(r / width) is robustly 1 for ordinary cells. */
#define ECN_BIN_INFLATE 1e-9
/* At most 2^20 bins per axis (keys fit in 60 bits). */
#define ECN_MAX_BINS_AXIS ((int64_t)1 << 20)
/* Fractional coordinates beyond this cannot be wrapped meaningfully. */
#define ECN_MAX_FRAC 4503599627370496.0 /* 2^52 */

typedef struct {
    int64_t n[3];   /* reported integer image */
    double r;       /* distance */
    int32_t dst;
} cand;

typedef struct {
    int64_t n, cap;
    int32_t *src, *dst;
    double *shift;
} plist;

static void plist_free(plist *l)
{
    free(l->src);
    free(l->dst);
    free(l->shift);
    memset(l, 0, sizeof *l);
}

/* Ensure room for `need` entries; `proj` is a projection of the final size
 * (grown to at least 1.5x anyway). 0 on success, -1 on allocation failure. */
static int plist_reserve(plist *l, int64_t need, double proj)
{
    int64_t cap;
    void *p;
    if (need <= l->cap)
        return 0;
    cap = l->cap < 1024 ? 1024 : l->cap + l->cap / 2;
    if (proj > (double)cap)
        cap = proj < (double)ECN_MAX_PAIRS ? (int64_t)proj : ECN_MAX_PAIRS;
    if (cap < need)
        cap = need;
    if (cap > ECN_MAX_PAIRS)
        cap = ECN_MAX_PAIRS;
    if ((uint64_t)cap > SIZE_MAX / (3 * sizeof(double)))
        return -1;
    p = realloc(l->src, (size_t)cap * sizeof(int32_t));
    if (!p)
        return -1;
    l->src = p;
    p = realloc(l->dst, (size_t)cap * sizeof(int32_t));
    if (!p)
        return -1;
    l->dst = p;
    p = realloc(l->shift, (size_t)cap * 3 * sizeof(double));
    if (!p)
        return -1;
    l->shift = p;
    l->cap = cap;
    return 0;
}

/* Shrink to the exact size and move into the public struct. */
static void plist_finish(plist *l, ecn_pairlist *out)
{
    if (l->n == 0) {
        plist_free(l);
    } else if (l->n < l->cap) {
        void *p;
        size_t n = (size_t)l->n;
        if ((p = realloc(l->src, n * sizeof(int32_t))) != NULL)
            l->src = p;
        if ((p = realloc(l->dst, n * sizeof(int32_t))) != NULL)
            l->dst = p;
        if ((p = realloc(l->shift, n * 3 * sizeof(double))) != NULL)
            l->shift = p;
    }
    out->n = l->n;
    out->src = l->src;
    out->dst = l->dst;
    out->shift = l->shift;
    memset(l, 0, sizeof *l);
}

static int cand_cmp(const void *pa, const void *pb)
{
    const cand *a = pa, *b = pb;
    int k;
    if (a->dst != b->dst)
        return a->dst < b->dst ? -1 : 1;
    for (k = 0; k < 3; k++)
        if (a->n[k] != b->n[k])
            return a->n[k] < b->n[k] ? -1 : 1;
    return 0;
}

/* Sort keys (unique) ascending: quicksort, insertion sort for short runs. */
typedef struct {
    uint64_t key;
    int64_t idx;
} skey;

static void skey_sort(skey *a, int64_t n)
{
    while (n > 16) {
        int64_t i = -1, j = n, mid = n / 2;
        uint64_t pivot;
        skey t;
        if (a[mid].key < a[0].key) {
            t = a[mid]; a[mid] = a[0]; a[0] = t;
        }
        if (a[n - 1].key < a[0].key) {
            t = a[n - 1]; a[n - 1] = a[0]; a[0] = t;
        }
        if (a[n - 1].key < a[mid].key) {
            t = a[n - 1]; a[n - 1] = a[mid]; a[mid] = t;
        }
        pivot = a[mid].key;
        for (;;) {
            do
                i++;
            while (a[i].key < pivot);
            do
                j--;
            while (a[j].key > pivot);
            if (i >= j)
                break;
            t = a[i]; a[i] = a[j]; a[j] = t;
        }
        /* [0, j] and [j + 1, n): recurse on the smaller part */
        if (j + 1 < n - (j + 1)) {
            skey_sort(a, j + 1);
            a += j + 1;
            n -= j + 1;
        } else {
            skey_sort(a + j + 1, n - (j + 1));
            n = j + 1;
        }
    }
    {
        int64_t i, j;
        for (i = 1; i < n; i++) {
            skey t = a[i];
            for (j = i; j > 0 && a[j - 1].key > t.key; j--)
                a[j] = a[j - 1];
            a[j] = t;
        }
    }
}

static double det3(const double m[9])
{
    return m[0] * (m[4] * m[8] - m[5] * m[7]) - m[1] * (m[3] * m[8] - m[5] * m[6]) +
           m[2] * (m[3] * m[7] - m[4] * m[6]);
}

static void cross3(const double *a, const double *b, double *c)
{
    c[0] = a[1] * b[2] - a[2] * b[1];
    c[1] = a[2] * b[0] - a[0] * b[2];
    c[2] = a[0] * b[1] - a[1] * b[0];
}

static double norm3(const double *a)
{
    return sqrt(a[0] * a[0] + a[1] * a[1] + a[2] * a[2]);
}

/* Replace zero rows of non-periodic axes by unit vectors completing a basis.
 * Rows of periodic axes are left as they are. */
static void complete_cell(double m[9], const int per[3])
{
    int zero[3], nz = 0, k;
    for (k = 0; k < 3; k++) {
        zero[k] = !per[k] && m[3 * k] == 0.0 && m[3 * k + 1] == 0.0 && m[3 * k + 2] == 0.0;
        nz += zero[k];
    }
    if (nz == 0 || nz == 3)
        return;
    if (nz == 1) {
        for (k = 0; k < 3; k++)
            if (zero[k]) {
                double c[3], len;
                cross3(&m[3 * ((k + 1) % 3)], &m[3 * ((k + 2) % 3)], c);
                len = norm3(c);
                if (len > 0.0 && isfinite(len)) {
                    m[3 * k] = c[0] / len;
                    m[3 * k + 1] = c[1] / len;
                    m[3 * k + 2] = c[2] / len;
                }
            }
        return;
    }
    /* nz == 2: one non-zero row r; pick u orthogonal to r, then w = r × u. */
    {
        int kr = 0, k1 = -1, k2 = -1, j, jmin = 0;
        double r[3], u[3], w[3], e[3] = {0.0, 0.0, 0.0}, len;
        for (k = 0; k < 3; k++) {
            if (!zero[k])
                kr = k;
            else if (k1 < 0)
                k1 = k;
            else
                k2 = k;
        }
        len = norm3(&m[3 * kr]);
        if (!(len > 0.0) || !isfinite(len))
            return;
        for (j = 0; j < 3; j++)
            r[j] = m[3 * kr + j] / len;
        for (j = 1; j < 3; j++)
            if (fabs(r[j]) < fabs(r[jmin]))
                jmin = j;
        e[jmin] = 1.0;
        cross3(r, e, u);
        len = norm3(u);
        for (j = 0; j < 3; j++)
            u[j] /= len;
        cross3(r, u, w);
        for (j = 0; j < 3; j++) {
            m[3 * k1 + j] = u[j];
            m[3 * k2 + j] = w[j];
        }
    }
}

/* Inverse of a 3x3 row-major matrix with determinant det. */
static void inv3(const double m[9], double det, double inv[9])
{
    inv[0] = (m[4] * m[8] - m[5] * m[7]) / det;
    inv[1] = (m[2] * m[7] - m[1] * m[8]) / det;
    inv[2] = (m[1] * m[5] - m[2] * m[4]) / det;
    inv[3] = (m[5] * m[6] - m[3] * m[8]) / det;
    inv[4] = (m[0] * m[8] - m[2] * m[6]) / det;
    inv[5] = (m[2] * m[3] - m[0] * m[5]) / det;
    inv[6] = (m[3] * m[7] - m[4] * m[6]) / det;
    inv[7] = (m[1] * m[6] - m[0] * m[7]) / det;
    inv[8] = (m[0] * m[4] - m[1] * m[3]) / det;
}

static int64_t floordiv64(int64_t a, int64_t b)
{
    int64_t q = a / b;
    if ((a % b != 0) && ((a < 0) != (b < 0)))
        q--;
    return q;
}

/* ---- hash of occupied bins: key -> bin id ------------------------------ */

typedef struct {
    uint64_t mask;
    uint64_t *keys;   /* key + 1, 0 = empty */
    int32_t *ids;
} bin_hash;

static uint64_t hash_slot(uint64_t key, uint64_t mask)
{
    uint64_t h = key;  /* splitmix64 finaliser */
    h = (h ^ (h >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
    h = (h ^ (h >> 27)) * UINT64_C(0x94D049BB133111EB);
    h ^= h >> 31;
    return h & mask;
}

static int32_t hash_find(const bin_hash *h, uint64_t key)
{
    uint64_t s = hash_slot(key, h->mask);
    for (;;) {
        uint64_t k = h->keys[s];
        if (k == 0)
            return -1;
        if (k == key + 1)
            return h->ids[s];
        s = (s + 1) & h->mask;
    }
}

/* Returns the id of key, inserting it with id *next (then incremented). */
static int32_t hash_insert(bin_hash *h, uint64_t key, int32_t *next)
{
    uint64_t s = hash_slot(key, h->mask);
    for (;;) {
        uint64_t k = h->keys[s];
        if (k == 0) {
            h->keys[s] = key + 1;
            h->ids[s] = (*next)++;
            return h->ids[s];
        }
        if (k == key + 1)
            return h->ids[s];
        s = (s + 1) & h->mask;
    }
}

/* ---- search --------------------------------------------------------------- */

void ecn_graph_free(ecn_graph *g)
{
    if (!g)
        return;
    free(g->edges.src);
    free(g->edges.dst);
    free(g->edges.shift);
    free(g->nb.src);
    free(g->nb.dst);
    free(g->nb.shift);
    memset(g, 0, sizeof *g);
}

ecenet_status ecn_graph_build(size_t n_atoms, const double *pos, const double *cell,
                              const int pbc[3], double r_cut_edge, double r_cut_nb,
                              ecn_graph *g, char *err, size_t err_len)
{
    ecenet_status st = ECENET_OK;
    int per[3] = {0, 0, 0}, any_per = 0, k;
    double frame[9] = {1, 0, 0, 0, 1, 0, 0, 0, 1}, inv[9] = {1, 0, 0, 0, 1, 0, 0, 0, 1};
    double rmax, rsearch, bnorm[3], binw[3], fmin[3], fmax[3];
    int64_t nbin[3], span[3];
    size_t i, n = n_atoms;
    double *frac = NULL;          /* wrapped fractional coordinates (n,3) */
    int64_t *off = NULL;          /* integer offsets of the wrap (n,3) */
    int32_t *atom_bin = NULL, *bin_start = NULL, *bin_atoms = NULL;
    int32_t *bin_fill = NULL;
    double *wrap = NULL, *wbin = NULL;  /* wrapped Cartesian positions (atom / bin order) */
    double rs2;
    int64_t (*bin_coord)[3] = NULL;
    bin_hash hash = {0, NULL, NULL};
    cand *cb = NULL;
    int64_t cb_n = 0, cb_cap = 0;
    skey *sk = NULL;
    int64_t sk_cap = 0;
    plist le = {0, 0, NULL, NULL, NULL}, ln = {0, 0, NULL, NULL, NULL};
    int32_t n_bins = 0;
    static const double zero9[9] = {0, 0, 0, 0, 0, 0, 0, 0, 0};
    const double *C = zero9;      /* lattice rows used for shifts */

    if (!g)
        return ecn_fail(err, err_len, ECENET_ERR_ARGUMENT, "graph: output graph is NULL");
    memset(g, 0, sizeof *g);
    if (!isfinite(r_cut_edge) || !(r_cut_edge > 0.0) || !isfinite(r_cut_nb) || !(r_cut_nb > 0.0))
        return ecn_fail(err, err_len, ECENET_ERR_ARGUMENT,
                        "graph: cutoffs must be finite and positive (r_cut_edge %g, r_cut_neighbor %g)",
                        r_cut_edge, r_cut_nb);
    if (n > (size_t)INT32_MAX)
        return ecn_fail(err, err_len, ECENET_ERR_INPUT,
                        "graph: %zu atoms exceed the limit of %d", n, (int)INT32_MAX);
    if (cell)
        for (k = 0; k < 3; k++) {
            per[k] = pbc ? (pbc[k] != 0) : 1;
            any_per |= per[k];
        }

    /* Frame and its inverse. */
    if (any_per) {
        double len[3], det;
        for (k = 0; k < 9; k++)
            if (!isfinite(cell[k]))
                return ecn_fail(err, err_len, ECENET_ERR_INPUT,
                                "cell entry [%d][%d] is not finite", k / 3, k % 3);
        memcpy(frame, cell, sizeof frame);
        complete_cell(frame, per);
        for (k = 0; k < 3; k++)
            len[k] = norm3(&frame[3 * k]);
        det = det3(frame);
        if (!(fabs(det) > 1e-10 * len[0] * len[1] * len[2]) || !isfinite(det) ||
            !(len[0] > 0.0 && len[1] > 0.0 && len[2] > 0.0))
            return ecn_fail(err, err_len, ECENET_ERR_INPUT,
                            "the cell is singular or degenerate (det %g, lattice vector lengths %g, %g, %g Å)",
                            det, len[0], len[1], len[2]);
        inv3(frame, det, inv);
        C = cell;
        for (k = 0; k < 9; k++)
            if (!isfinite(inv[k]))
                return ecn_fail(err, err_len, ECENET_ERR_INPUT,
                                "the cell is singular or degenerate (its inverse is not finite)");
    }
    if (n == 0)
        return ECENET_OK;
    if (!pos)
        return ecn_fail(err, err_len, ECENET_ERR_ARGUMENT, "graph: positions are NULL");
    for (i = 0; i < n; i++)
        if (!isfinite(pos[3 * i]) || !isfinite(pos[3 * i + 1]) || !isfinite(pos[3 * i + 2]))
            return ecn_fail(err, err_len, ECENET_ERR_INPUT,
                            "atom %zu has a non-finite position (%g, %g, %g)", i, pos[3 * i],
                            pos[3 * i + 1], pos[3 * i + 2]);

    rmax = r_cut_edge > r_cut_nb ? r_cut_edge : r_cut_nb;
    rsearch = (rmax > 2.0 * ECN_COINCIDE_DIST ? rmax : 2.0 * ECN_COINCIDE_DIST) *
              (1.0 + ECN_SEARCH_INFLATE);
    rs2 = rsearch * rsearch;
    /* |b_k| = norm of column k of the inverse = 1 / perpendicular width. */
    for (k = 0; k < 3; k++)
        bnorm[k] = sqrt(inv[k] * inv[k] + inv[3 + k] * inv[3 + k] + inv[6 + k] * inv[6 + k]);

    frac = malloc(n * 3 * sizeof *frac);
    off = malloc(n * 3 * sizeof *off);
    if (!frac || !off) {
        st = ecn_fail(err, err_len, ECENET_ERR_NOMEM, "graph: out of memory (%zu atoms)", n);
        goto done;
    }
    for (k = 0; k < 3; k++) {
        fmin[k] = HUGE_VAL;
        fmax[k] = -HUGE_VAL;
    }
    for (i = 0; i < n; i++) {
        const double *x = &pos[3 * i];
        for (k = 0; k < 3; k++) {
            double f = x[0] * inv[k] + x[1] * inv[3 + k] + x[2] * inv[6 + k];
            int64_t o = 0;
            if (per[k]) {
                double fl;
                if (!(fabs(f) < ECN_MAX_FRAC)) {
                    st = ecn_fail(err, err_len, ECENET_ERR_INPUT,
                                  "atom %zu lies too far outside the cell (fractional coordinate %g)",
                                  i, f);
                    goto done;
                }
                fl = floor(f);
                o = (int64_t)fl;
                f -= fl;
                if (f >= 1.0) {
                    f -= 1.0;
                    o += 1;
                }
                if (f < 0.0)
                    f = 0.0;
            }
            frac[3 * i + k] = f;
            off[3 * i + k] = o;
            if (f < fmin[k])
                fmin[k] = f;
            if (f > fmax[k])
                fmax[k] = f;
        }
    }

    /* Bins per axis. */
    for (k = 0; k < 3; k++) {
        double rb = rsearch * bnorm[k];  /* cutoff in fractional units along k */
        double want = rb * (1.0 + ECN_BIN_INFLATE), s;
        if (per[k]) {
            double nb = floor(1.0 / want);
            if (!(nb >= 1.0))
                nb = 1.0;
            if (nb > (double)ECN_MAX_BINS_AXIS)
                nb = (double)ECN_MAX_BINS_AXIS;
            nbin[k] = (int64_t)nb;
            binw[k] = 1.0 / nb;
            fmin[k] = 0.0;
        } else {
            double range = fmax[k] - fmin[k], nb;
            binw[k] = want;
            nb = floor(range / want) + 1.0;
            if (!(nb <= (double)ECN_MAX_BINS_AXIS)) {
                nb = (double)ECN_MAX_BINS_AXIS;
                binw[k] = range / (nb - 1.0);
                if (binw[k] < want)
                    binw[k] = want;
            }
            nbin[k] = (int64_t)nb;
        }
        s = ceil(rb / binw[k]);
        if (!(s <= 1e7)) {
            st = ecn_fail(err, err_len, ECENET_ERR_INPUT,
                          "cutoff %g Å spans too many periodic images along cell axis %d (width %g Å)",
                          rmax, k, 1.0 / bnorm[k]);
            goto done;
        }
        if (s < 1.0)
            s = 1.0;
        span[k] = (int64_t)s;
        if (!per[k] && span[k] > nbin[k] - 1)
            span[k] = nbin[k] - 1;
    }
    {
        double visits = (double)(2 * span[0] + 1) * (double)(2 * span[1] + 1) *
                        (double)(2 * span[2] + 1);
        if (visits > 1e9) {
            st = ecn_fail(err, err_len, ECENET_ERR_INPUT,
                          "cutoff %g Å spans too many periodic images of the cell (%g cells to search)",
                          rmax, visits);
            goto done;
        }
    }

    /* Linked cells via a hash of occupied bins. */
    {
        uint64_t hsize = 16;
        int32_t *count;
        while (hsize < 2 * (uint64_t)n)
            hsize *= 2;
        hash.mask = hsize - 1;
        hash.keys = calloc((size_t)hsize, sizeof *hash.keys);
        hash.ids = malloc((size_t)hsize * sizeof *hash.ids);
        atom_bin = malloc(n * sizeof *atom_bin);
        bin_coord = malloc(n * sizeof *bin_coord);
        bin_start = calloc(n + 1, sizeof *bin_start);
        bin_atoms = malloc(n * sizeof *bin_atoms);
        bin_fill = malloc(n * sizeof *bin_fill);
        wrap = malloc(n * 3 * sizeof *wrap);
        wbin = malloc(n * 3 * sizeof *wbin);
        if (!wrap || !wbin || !hash.keys || !hash.ids || !atom_bin || !bin_coord || !bin_start || !bin_atoms ||
            !bin_fill) {
            st = ecn_fail(err, err_len, ECENET_ERR_NOMEM, "graph: out of memory (%zu atoms)", n);
            goto done;
        }
        for (i = 0; i < n; i++) {
            int64_t c[3];
            uint64_t key;
            int32_t id, before = n_bins;
            for (k = 0; k < 3; k++) {
                double t = floor((frac[3 * i + k] - fmin[k]) / binw[k]);
                if (!(t >= 0.0))
                    t = 0.0;
                if (t > (double)(nbin[k] - 1))
                    t = (double)(nbin[k] - 1);
                c[k] = (int64_t)t;
            }
            key = (uint64_t)c[0] | ((uint64_t)c[1] << 20) | ((uint64_t)c[2] << 40);
            id = hash_insert(&hash, key, &n_bins);
            if (n_bins != before)
                memcpy(bin_coord[id], c, sizeof c);
            atom_bin[i] = id;
        }
        count = bin_start + 1;  /* counts, then prefix sums */
        for (i = 0; i < n; i++)
            count[atom_bin[i]]++;
        {
            int32_t b;
            for (b = 0; b < n_bins; b++)
                bin_start[b + 1] += bin_start[b];
        }
        memcpy(bin_fill, bin_start, (size_t)n_bins * sizeof *bin_fill);
        for (i = 0; i < n; i++)
            bin_atoms[bin_fill[atom_bin[i]]++] = (int32_t)i;
        /* wrapped Cartesian positions, in bin order */
        for (i = 0; i < n; i++)
            for (k = 0; k < 3; k++)
                wrap[3 * i + k] = pos[3 * i + k] - ((double)off[3 * i] * C[k] +
                                                    (double)off[3 * i + 1] * C[3 + k] +
                                                    (double)off[3 * i + 2] * C[6 + k]);
        for (i = 0; i < n; i++)
            memcpy(&wbin[3 * i], &wrap[3 * (size_t)bin_atoms[i]], 3 * sizeof *wbin);
    }

    /* Search. */
    for (i = 0; i < n; i++) {
        const int64_t *ci = bin_coord[atom_bin[i]];
        const double *xi = &pos[3 * i];
        double wi[3], t[3];
        int64_t d0, d1, d2, e;
        for (k = 0; k < 3; k++)
            wi[k] = wrap[3 * i + k];
        cb_n = 0;
        for (d2 = -span[2]; d2 <= span[2]; d2++)
            for (d1 = -span[1]; d1 <= span[1]; d1++)
                for (d0 = -span[0]; d0 <= span[0]; d0++) {
                    int64_t dd[3], c[3], m[3];
                    uint64_t key;
                    int32_t b, p;
                    int skip = 0;
                    dd[0] = d0;
                    dd[1] = d1;
                    dd[2] = d2;
                    for (k = 0; k < 3; k++) {
                        int64_t v = ci[k] + dd[k];
                        if (per[k]) {
                            m[k] = floordiv64(v, nbin[k]);
                            c[k] = v - m[k] * nbin[k];
                        } else {
                            if (v < 0 || v >= nbin[k])
                                skip = 1;
                            m[k] = 0;
                            c[k] = v;
                        }
                    }
                    if (skip)
                        continue;
                    key = (uint64_t)c[0] | ((uint64_t)c[1] << 20) | ((uint64_t)c[2] << 40);
                    b = hash_find(&hash, key);
                    if (b < 0)
                        continue;
                    for (k = 0; k < 3; k++)
                        t[k] = (double)m[0] * C[0 + k] + (double)m[1] * C[3 + k] +
                               (double)m[2] * C[6 + k] - wi[k];
                    for (p = bin_start[b]; p < bin_start[b + 1]; p++) {
                        const double *wj = &wbin[3 * (size_t)p];
                        int32_t j;
                        const double *xj;
                        int64_t nn[3];
                        double sh[3], dx, dy, dz, r;
                        /* cheap prefilter with the wrapped positions */
                        dx = wj[0] + t[0];
                        dy = wj[1] + t[1];
                        dz = wj[2] + t[2];
                        if (!(dx * dx + dy * dy + dz * dz < rs2))
                            continue;
                        j = bin_atoms[p];
                        xj = &pos[3 * (size_t)j];
                        for (k = 0; k < 3; k++)
                            nn[k] = per[k] ? m[k] + off[3 * i + k] - off[3 * (size_t)j + k] : 0;
                        if ((size_t)j == i && nn[0] == 0 && nn[1] == 0 && nn[2] == 0)
                            continue;
                        for (k = 0; k < 3; k++)
                            sh[k] = (double)nn[0] * C[0 + k] +
                                    (double)nn[1] * C[3 + k] +
                                    (double)nn[2] * C[6 + k];
                        dx = xj[0] - xi[0] + sh[0];
                        dy = xj[1] - xi[1] + sh[1];
                        dz = xj[2] - xi[2] + sh[2];
                        r = sqrt(dx * dx + dy * dy + dz * dz);
                        if (!(r < rmax) && !(r <= ECN_COINCIDE_DIST))
                            continue;
                        if (cb_n == cb_cap) {
                            int64_t nc = cb_cap < 256 ? 256 : cb_cap * 2;
                            cand *q;
                            if ((uint64_t)nc > SIZE_MAX / sizeof *cb ||
                                !(q = realloc(cb, (size_t)nc * sizeof *cb))) {
                                st = ecn_fail(err, err_len, ECENET_ERR_NOMEM,
                                              "graph: out of memory (%lld pairs of atom %zu)",
                                              (long long)cb_n, i);
                                goto done;
                            }
                            cb = q;
                            cb_cap = nc;
                        }
                        cb[cb_n].dst = j;
                        cb[cb_n].r = r;
                        memcpy(cb[cb_n].n, nn, sizeof nn);
                        cb_n++;
                    }
                }
        /* Order by (dst, n): packed 64-bit keys when the images of this
         * atom span < 1024 layers per axis (always, in practice), else qsort. */
        if (cb_n > sk_cap) {
            skey *q;
            if ((uint64_t)cb_cap > SIZE_MAX / sizeof *sk ||
                !(q = realloc(sk, (size_t)cb_cap * sizeof *sk))) {
                st = ecn_fail(err, err_len, ECENET_ERR_NOMEM,
                              "graph: out of memory (%lld pairs of atom %zu)", (long long)cb_n, i);
                goto done;
            }
            sk = q;
            sk_cap = cb_cap;
        }
        {
            int64_t lo[3] = {INT64_MAX, INT64_MAX, INT64_MAX}, hi[3] = {INT64_MIN, INT64_MIN, INT64_MIN};
            int packed = 1;
            for (e = 0; e < cb_n; e++)
                for (k = 0; k < 3; k++) {
                    if (cb[e].n[k] < lo[k])
                        lo[k] = cb[e].n[k];
                    if (cb[e].n[k] > hi[k])
                        hi[k] = cb[e].n[k];
                }
            for (k = 0; k < 3 && cb_n > 0; k++)
                if ((uint64_t)(hi[k] - lo[k]) >= 1024)
                    packed = 0;
            if (packed) {
                for (e = 0; e < cb_n; e++) {
                    sk[e].key = ((uint64_t)cb[e].dst << 30) | ((uint64_t)(cb[e].n[0] - lo[0]) << 20) |
                                ((uint64_t)(cb[e].n[1] - lo[1]) << 10) | (uint64_t)(cb[e].n[2] - lo[2]);
                    sk[e].idx = e;
                }
                skey_sort(sk, cb_n);
            } else {
                qsort(cb, (size_t)cb_n, sizeof *cb, cand_cmp);
                for (e = 0; e < cb_n; e++)
                    sk[e].idx = e;
            }
        }
        for (e = 0; e < cb_n; e++) {
            const cand *q = &cb[sk[e].idx];
            int lst;
            if (q->r <= ECN_COINCIDE_DIST) {
                if ((size_t)q->dst == i)
                    st = ecn_fail(err, err_len, ECENET_ERR_INPUT,
                                  "atom %zu coincides with its own periodic image (%lld, %lld, %lld) "
                                  "(distance %g Å): the cell is too small",
                                  i, (long long)q->n[0], (long long)q->n[1], (long long)q->n[2], q->r);
                else if (q->n[0] == 0 && q->n[1] == 0 && q->n[2] == 0)
                    st = ecn_fail(err, err_len, ECENET_ERR_INPUT,
                                  "atoms %zu and %d coincide (distance %g Å)", i, (int)q->dst, q->r);
                else
                    st = ecn_fail(err, err_len, ECENET_ERR_INPUT,
                                  "atoms %zu and %d coincide (distance %g Å, periodic image "
                                  "(%lld, %lld, %lld) of atom %d)",
                                  i, (int)q->dst, q->r, (long long)q->n[0], (long long)q->n[1],
                                  (long long)q->n[2], (int)q->dst);
                goto done;
            }
            for (lst = 0; lst < 2; lst++) {
                plist *l = lst == 0 ? &le : &ln;
                double rc = lst == 0 ? r_cut_edge : r_cut_nb;
                double *sh;
                if (!(q->r < rc))
                    continue;
                if (l->n >= ECN_MAX_PAIRS) {
                    st = ecn_fail(err, err_len, ECENET_ERR_INPUT,
                                  "graph: more than %lld %s (cutoff %g Å, %zu atoms)",
                                  (long long)ECN_MAX_PAIRS, lst == 0 ? "edges" : "neighbour pairs",
                                  rc, n);
                    goto done;
                }
                if (plist_reserve(l, l->n + 1,
                                  1.05 * (double)l->n * ((double)n / (double)(i + 1)) + 1024.0)) {
                    st = ecn_fail(err, err_len, ECENET_ERR_NOMEM,
                                  "graph: out of memory (%lld %s)", (long long)l->n,
                                  lst == 0 ? "edges" : "neighbour pairs");
                    goto done;
                }
                l->src[l->n] = (int32_t)i;
                l->dst[l->n] = q->dst;
                sh = &l->shift[3 * l->n];
                for (k = 0; k < 3; k++)
                    sh[k] = (double)q->n[0] * C[0 + k] +
                            (double)q->n[1] * C[3 + k] +
                            (double)q->n[2] * C[6 + k];
                l->n++;
            }
        }
    }
    plist_finish(&le, &g->edges);
    plist_finish(&ln, &g->nb);

done:
    free(frac);
    free(off);
    free(atom_bin);
    free(bin_coord);
    free(bin_start);
    free(bin_atoms);
    free(bin_fill);
    free(wrap);
    free(wbin);
    free(hash.keys);
    free(hash.ids);
    free(cb);
    free(sk);
    plist_free(&le);
    plist_free(&ln);
    if (st != ECENET_OK)
        ecn_graph_free(g);
    return st;
}
