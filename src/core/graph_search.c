/* The cell-list search behind ecn_graph_build (graph_search.h).
 *
 *   - Bins: the atoms are sorted into bins of the wrapped fractional
 *     coordinates (sizes from graph.c: at least the search radius wide), found
 *     by a hash of their integer coordinates, so only occupied bins cost
 *     memory. A bin's stencil is the (2 s + 1)^3 bins around it, each with
 *     its image m (how often it wrapped); along a periodic axis narrower than
 *     the cutoff, s > 1 visits as many images as needed.
 *   - Candidates of a run of atoms of one bin: every atom of every stencil
 *     cell, at its image, that is within the search radius of the run's
 *     bounding box, as one list sorted by key (radix sort). Scanning this
 *     list for each atom of the run gives the atom's candidates already in
 *     order, so the sort is shared by the run. (A bin with a huge stencil or
 *     list — tiny cells with a long cutoff — is searched atom by atom
 *     instead: its candidates from the stencil, in pieces, then sorted.)
 *   - Each candidate passes a cheap prefilter (wrapped positions, the search
 *     radius inflated by 1e-8 relative plus a rounding slack, so that it never
 *     drops a pair the exact test keeps), then the exact test with the
 *     original positions: d = pos[dst] - pos[src] + shift, shift = n·C with
 *     n the true image, kept if r = sqrt(d·d) < cutoff (strict). The test is
 *     done on d·d against thresholds equivalent to the sqrt comparison
 *     (sq_below), bit for bit, so no square root is taken.
 *
 * A candidate of source atom i is one 64-bit key, from the top:
 *   dst | m_a - mlo_a | m_b - mlo_b | m_c - mlo_c | nb flag | edge flag
 * where m is the image of the stencil cell. The true image is
 * n = m + off[i] - off[dst] on periodic axes, so for a fixed (i, dst) the
 * order of m is the order of n, and sorting the keys gives the promised
 * (dst, n_a, n_b, n_c) order; (dst, m) is unique per atom, so the flags never
 * decide. The fields fit: dst needs at most 31 bits, the m fields together at
 * most log2(visits) + 3 (6 for ordinary cells, 32 for visits <= 1e9); a
 * search that would need more than 64 bits (over 2^29 atoms and an absurd
 * image count) is refused.
 *
 * The keys become entries (ecn_search_emit) with the shift n·C computed by
 * the same expression as in the exact test, or, when both atoms have the same
 * wrap offsets (n = m), looked up in a table of the stencil images computed
 * by that expression: the same bits either way. */
#define _POSIX_C_SOURCE 200809L

#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "graph_search.h"

/* The exact test and the reported shifts must round alike, as written: no
 * FMA contraction (gcc does none with -std=c99; clang would by default). */
#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#endif

#if defined(_OPENMP)
#define ECN_OMP(x) _Pragma(#x)
#else
#define ECN_OMP(x)
#endif

/* Small functions of the inner loops, inlined also where gcc would not. */
#if defined(__GNUC__)
#define ECN_INLINE static inline __attribute__((always_inline))
#else
#define ECN_INLINE static inline
#endif

#define ECN_COINCIDE_DIST 1e-10
#define KEY_FLAG_BITS 2
/* Stencils are built in pieces of at most this many cells, so that a huge
 * image count needs no huge buffer; a bin's candidate list is only made when
 * its whole stencil fits one piece. */
#define ECN_STENCIL_CHUNK 1024
/* A bin's candidate list is kept to this many entries (40 bytes each, twice,
 * per thread); beyond (thousands of neighbours per atom), the bin's atoms are
 * searched one by one. */
#define ECN_BIN_LIST_MAX ((int64_t)1 << 13)
/* Shifts are tabulated by image when the image fields of a key take at most
 * this many bits (3 doubles per entry). */
#define ECN_MTAB_BITS 10

/* ---- arithmetic ------------------------------------------------------------- */

static int64_t floordiv64(int64_t a, int64_t b)
{
    int64_t q = a / b;
    if ((a % b != 0) && ((a < 0) != (b < 0)))
        q--;
    return q;
}

/* floor(v / nb) for nb > 0, without a division in the common cases (v at
 * most one period outside [0, nb)). */
static int64_t wrap_count(int64_t v, int64_t nb)
{
    if (v >= 0)
        return v < nb ? 0 : v < 2 * nb ? 1 : v / nb;
    return v >= -nb ? -1 : floordiv64(v, nb);
}

/* Shift vector n·C, always with this expression (and rounding order): the
 * exact distance test and the reported shifts must agree bit for bit. */
ECN_INLINE void image_shift(const int64_t nn[3], const double *C, double sh[3])
{
    int k;
    for (k = 0; k < 3; k++)
        sh[k] = (double)nn[0] * C[0 + k] + (double)nn[1] * C[3 + k] + (double)nn[2] * C[6 + k];
}

void ecn_image_shift(const int64_t n[3], const double *C, double sh[3]) { image_shift(n, C, sh); }

void ecn_image_unreduce(const int64_t U[9], int64_t n[3])
{
    const uint64_t a = (uint64_t)n[0], b = (uint64_t)n[1], c = (uint64_t)n[2];
    for (int k = 0; k < 3; k++)
        n[k] = (int64_t)(a * (uint64_t)U[k] + b * (uint64_t)U[3 + k] + c * (uint64_t)U[6 + k]);
}

/* Squared length of d = xj - xi + sh, always with this expression. */
ECN_INLINE double dist2(const double *xi, const double *xj, const double sh[3])
{
    const double dx = xj[0] - xi[0] + sh[0];
    const double dy = xj[1] - xi[1] + sh[1];
    const double dz = xj[2] - xi[2] + sh[2];
    return dx * dx + dy * dy + dz * dz;
}

/* The smallest double q with sqrt(q) >= r (r > 0). sqrt is correctly rounded,
 * hence monotone, so for every double s (NaN and inf included):
 *   sqrt(s) < r  <=>  s < q. */
static double sq_below(double r)
{
    double q = r * r;
    while (q > 0.0 && sqrt(nextafter(q, 0.0)) >= r)
        q = nextafter(q, 0.0);
    while (sqrt(q) < r)
        q = nextafter(q, HUGE_VAL);
    return q;
}

/* The largest double q with sqrt(q) <= r (r > 0): sqrt(s) <= r <=> s <= q. */
static double sq_atmost(double r)
{
    double q = r * r;
    while (sqrt(q) > r)
        q = nextafter(q, 0.0);
    while (sqrt(nextafter(q, HUGE_VAL)) <= r)
        q = nextafter(q, HUGE_VAL);
    return q;
}

/* Number of bits to hold 0 .. v. */
static int bits_for(uint64_t v)
{
    int b = 0;
    while (v) {
        b++;
        v >>= 1;
    }
    return b;
}

/* ---- hash of occupied bins: key -> bin id ------------------------------------ */

static uint64_t bin_key(const int64_t c[3])
{
    return (uint64_t)c[0] | ((uint64_t)c[1] << 20) | ((uint64_t)c[2] << 40);
}

static uint64_t hash_slot(uint64_t key, uint64_t mask)
{
    uint64_t h = key;  /* splitmix64 finaliser */
    h = (h ^ (h >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
    h = (h ^ (h >> 27)) * UINT64_C(0x94D049BB133111EB);
    h ^= h >> 31;
    return h & mask;
}

static int32_t hash_find(const ecn_search *x, uint64_t key)
{
    uint64_t s = hash_slot(key, x->hash_mask);
    for (;;) {
        uint64_t k = x->hash_keys[s];
        if (k == 0)
            return -1;
        if (k == key + 1)
            return x->hash_ids[s];
        s = (s + 1) & x->hash_mask;
    }
}

/* Returns the id of key, inserting it with id x->n_bins (then incremented). */
static int32_t hash_insert(ecn_search *x, uint64_t key)
{
    uint64_t s = hash_slot(key, x->hash_mask);
    for (;;) {
        uint64_t k = x->hash_keys[s];
        if (k == 0) {
            x->hash_keys[s] = key + 1;
            x->hash_ids[s] = x->n_bins++;
            return x->hash_ids[s];
        }
        if (k == key + 1)
            return x->hash_ids[s];
        s = (s + 1) & x->hash_mask;
    }
}

/* ---- set-up ------------------------------------------------------------------- */

void ecn_search_free(ecn_search *x)
{
    free(x->bin_start);
    free(x->bin_atoms);
    free(x->atom_bin);
    free(x->bin_coord);
    free(x->wbin);
    free(x->bkey);
    free(x->fill);
    free(x->mtab);
    free(x->hash_keys);
    free(x->hash_ids);
    x->bin_start = x->bin_atoms = x->atom_bin = x->fill = NULL;
    x->bin_coord = NULL;
    x->wbin = x->mtab = NULL;
    x->hash_keys = x->bkey = NULL;
    x->hash_ids = NULL;
    x->atoms_cap = x->hash_cap = x->mtab_cap = 0;
}

/* A fresh array of count elements of size bytes in place of p (whose
 * contents are not kept); NULL when out of memory. */
static void *renew(void *p, size_t count, size_t size)
{
    free(p);
    return count <= SIZE_MAX / size ? malloc(count ? count * size : 1) : NULL;
}

/* Sorts the atoms into bins (ids in order of first occupation, so the
 * hash insertions stay serial; the rest runs in parallel). */
static int make_bins(ecn_search *x)
{
    const int64_t n = x->n <= (size_t)INT32_MAX ? (int64_t)x->n : 0;
    const double *C = x->C;
    uint64_t hsize = 16;
    int64_t i;
    int k;
    if (n == 0)
        return -1;  /* graph.c: 1 .. INT32_MAX atoms */
    while (hsize < 2 * (uint64_t)n)
        hsize *= 2;
    /* arrays reused while large enough (rebuilds) */
    if ((size_t)n > x->atoms_cap) {
        const size_t m = (size_t)n;
        x->atom_bin = renew(x->atom_bin, m, sizeof *x->atom_bin);
        x->bin_coord = renew(x->bin_coord, m, sizeof *x->bin_coord);
        x->bin_start = renew(x->bin_start, m + 1, sizeof *x->bin_start);
        x->bin_atoms = renew(x->bin_atoms, m, sizeof *x->bin_atoms);
        x->fill = renew(x->fill, m + 1, sizeof *x->fill);
        x->bkey = renew(x->bkey, m, sizeof *x->bkey);
        x->wbin = renew(x->wbin, 3 * m, sizeof *x->wbin);
        x->atoms_cap = m;
        if (!x->atom_bin || !x->bin_coord || !x->bin_start || !x->bin_atoms || !x->fill ||
            !x->bkey || !x->wbin) {
            ecn_search_free(x);
            return -1;
        }
    }
    if (hsize > x->hash_cap) {
        x->hash_keys = renew(x->hash_keys, (size_t)hsize, sizeof *x->hash_keys);
        x->hash_ids = renew(x->hash_ids, (size_t)hsize, sizeof *x->hash_ids);
        x->hash_cap = hsize;
        if (!x->hash_keys || !x->hash_ids) {
            ecn_search_free(x);
            return -1;
        }
    }
    x->hash_mask = hsize - 1;
    memset(x->hash_keys, 0, (size_t)hsize * sizeof *x->hash_keys);
    ECN_OMP(omp parallel for schedule(static) if (x->par))
    for (i = 0; i < n; i++) {
        int64_t c[3];
        int kk;
        for (kk = 0; kk < 3; kk++) {
            double t = floor((x->frac[3 * i + kk] - x->fmin[kk]) / x->binw[kk]);
            if (!(t >= 0.0))
                t = 0.0;
            if (t > (double)(x->nbin[kk] - 1))
                t = (double)(x->nbin[kk] - 1);
            c[kk] = (int64_t)t;
        }
        x->bkey[i] = bin_key(c);
    }
    x->n_bins = 0;
    for (i = 0; i < n; i++) {
        const int32_t before = x->n_bins, id = hash_insert(x, x->bkey[i]);
        if (x->n_bins != before) {
            x->bin_coord[id][0] = (int64_t)(x->bkey[i] & 0xFFFFF);
            x->bin_coord[id][1] = (int64_t)((x->bkey[i] >> 20) & 0xFFFFF);
            x->bin_coord[id][2] = (int64_t)(x->bkey[i] >> 40);
        }
        x->atom_bin[i] = id;
    }
    /* counting sort by bin; bin_start[b + 1] counts first */
    memset(x->bin_start, 0, ((size_t)x->n_bins + 1) * sizeof *x->bin_start);
    for (i = 0; i < n; i++)
        x->bin_start[x->atom_bin[i] + 1]++;
    for (k = 0; k < x->n_bins; k++)
        x->bin_start[k + 1] += x->bin_start[k];
    memcpy(x->fill, x->bin_start, (size_t)x->n_bins * sizeof *x->fill);
    for (i = 0; i < n; i++)
        x->bin_atoms[x->fill[x->atom_bin[i]]++] = (int32_t)i;
    /* wrapped Cartesian positions, in bin order */
    ECN_OMP(omp parallel for schedule(static) if (x->par))
    for (i = 0; i < n; i++) {
        const size_t a = (size_t)x->bin_atoms[i];
        const int64_t *o = &x->off[3 * a];
        int kk;
        for (kk = 0; kk < 3; kk++)
            x->wbin[3 * i + kk] = x->pos[3 * a + kk] - ((double)o[0] * C[kk] + (double)o[1] * C[3 + kk] +
                                                        (double)o[2] * C[6 + kk]);
    }
    return 0;
}

ecenet_status ecn_search_init(ecn_search *x, char *err, size_t err_len)
{
    const int64_t n = (int64_t)x->n;
    int shift = KEY_FLAG_BITS, k, no_off = 1;
    double big = 0.0, tmax = 0.0, rs;
    int64_t i;

    if (make_bins(x))
        return ecn_fail(err, err_len, ECENET_ERR_NOMEM, "graph: out of memory (%zu atoms)", x->n);
    x->q_max = sq_below(x->r_edge > x->r_nb ? x->r_edge : x->r_nb);
    x->q_edge = sq_below(x->r_edge);
    x->q_nb = sq_below(x->r_nb);
    x->q_coin = sq_atmost(ECN_COINCIDE_DIST);

    /* Key layout: m fields from axis c (lowest) up, then dst. */
    x->visits = 1;
    for (k = 2; k >= 0; k--) {
        int64_t mhi = 0;
        int bits;
        x->width[k] = 2 * x->span[k] + 1;
        x->visits *= x->width[k];
        x->mlo[k] = 0;
        if (x->per[k]) {
            x->mlo[k] = floordiv64(-x->span[k], x->nbin[k]);
            mhi = floordiv64(x->nbin[k] - 1 + x->span[k], x->nbin[k]);
        }
        bits = bits_for((uint64_t)(mhi - x->mlo[k]));
        x->mmask[k] = ((uint64_t)1 << bits) - 1;
        x->mshift[k] = shift;
        shift += bits;
        tmax += (double)(mhi > -x->mlo[k] ? mhi : -x->mlo[k]) *
                (fabs(x->C[3 * k]) + fabs(x->C[3 * k + 1]) + fabs(x->C[3 * k + 2]));
    }
    x->dshift = shift;
    if (shift + bits_for((uint64_t)(n - 1)) > 64)
        return ecn_fail(err, err_len, ECENET_ERR_INPUT,
                        "graph: %zu atoms with %lld cells to search each exceed the search's key range",
                        x->n, (long long)x->visits);

    /* Prefilter radius: rsearch plus an absolute slack for the rounding of
     * the wrapped positions and the image translations, so that it never
     * drops a pair the exact test keeps (it matters only for coordinates of
     * ~1e6 Å and beyond). Also: are all wrap offsets 0? */
    ECN_OMP(omp parallel for schedule(static) if (x->par) reduction(max : big) reduction(& : no_off))
    for (i = 0; i < 3 * n; i++) {
        const double a = fabs(x->pos[i]), b = fabs(x->wbin[i]);
        big = a > big ? a : big;
        big = b > big ? b : big;
        no_off &= x->off[i] == 0;
    }
    x->no_off = no_off;
    rs = x->rsearch + 16.0 * DBL_EPSILON * (big + tmax);
    x->rs2 = rs * rs;

    /* The shifts of all stencil images m, when they are few: the true image
     * of a pair is m whenever both atoms have the same wrap offsets. */
    x->mtab_mask = 0;
    if (shift - KEY_FLAG_BITS <= ECN_MTAB_BITS) {
        const uint64_t nf = (uint64_t)1 << (shift - KEY_FLAG_BITS);
        uint64_t f;
        if (nf > x->mtab_cap) {
            x->mtab = renew(x->mtab, 3 * (size_t)nf, sizeof *x->mtab);
            x->mtab_cap = x->mtab ? nf : 0;
            if (!x->mtab)
                return ecn_fail(err, err_len, ECENET_ERR_NOMEM, "graph: out of memory");
        }
        for (f = 0; f < nf; f++) {
            int64_t m[3];
            for (k = 0; k < 3; k++)
                m[k] = (int64_t)(((f << KEY_FLAG_BITS) >> x->mshift[k]) & x->mmask[k]) + x->mlo[k];
            image_shift(m, x->C, &x->mtab[3 * f]);
        }
        x->mtab_mask = nf - 1;
        x->use_mtab = 1;
    } else {
        x->use_mtab = 0;
    }
    return ECENET_OK;
}

/* ---- per-thread scratch -------------------------------------------------------- */

/* One visited cell of a stencil: an occupied bin and its image. */
typedef struct {
    double t[3];      /* m·C, as image_shift(m) */
    int64_t m[3];
    uint64_t mkey;    /* packed m - mlo, already shifted */
    int32_t bin;
} stencil_ent;

/* A candidate of a whole bin: an atom of a stencil cell, at its image. */
typedef struct {
    double y[3];      /* wrapped position + m·C */
    uint64_t key;     /* dst and m fields */
    int32_t cell;     /* stencil cell */
} bin_cand;

struct ecn_search_ws {
    stencil_ent *st;           /* (st_cap <= ECN_STENCIL_CHUNK) */
    int64_t st_n, st_cap;
    int32_t st_bin;            /* bin of the cached whole stencil, or -1 */
    bin_cand *la, *lb;         /* a bin's candidates, sorting ping-pong */
    double *y;                 /* the sorted candidates: y (3 rows of l_cap), */
    uint64_t *key;             /* keys */
    int32_t *cell;             /* and stencil cells */
    int64_t l_cap;
};

int ecn_search_ws_fit(ecn_search_ws **wsp, const ecn_search *x)
{
    const int64_t cap = x->visits < ECN_STENCIL_CHUNK ? x->visits : ECN_STENCIL_CHUNK;
    ecn_search_ws *ws = *wsp;
    if (!ws && !(ws = *wsp = calloc(1, sizeof *ws)))
        return -1;
    ws->st_bin = -1;  /* the bins are new */
    if (cap > ws->st_cap) {
        free(ws->st);
        ws->st = malloc((size_t)cap * sizeof *ws->st);
        ws->st_cap = ws->st ? cap : 0;
        if (!ws->st)
            return -1;
    }
    return 0;
}

void ecn_search_ws_free(ecn_search_ws *ws)
{
    if (!ws)
        return;
    free(ws->st);
    free(ws->la);
    free(ws->lb);
    free(ws->y);
    free(ws->key);
    free(ws->cell);
    free(ws);
}

/* ptr resized to n elements (kept as it was on failure); on failure the
 * enclosing function returns -1 */
#define GROW(ptr, n)                                                                               \
    do {                                                                                           \
        void *q_ = realloc((ptr), (size_t)(n) * sizeof *(ptr));                                    \
        if (!q_)                                                                                   \
            return -1;                                                                             \
        (ptr) = q_;                                                                                \
    } while (0)

/* Room for n candidates of a bin in ws. 0, or -1 when out of memory. */
static int ws_reserve(ecn_search_ws *ws, int64_t n)
{
    int64_t cap = ws->l_cap ? ws->l_cap : 1024;
    if (n <= ws->l_cap)
        return 0;
    while (cap < n)
        cap *= 2;
    GROW(ws->la, cap);
    GROW(ws->lb, cap);
    GROW(ws->y, 3 * cap);
    GROW(ws->key, cap);
    GROW(ws->cell, cap);
    ws->l_cap = cap;
    return 0;
}
#undef GROW

static int out_reserve(ecn_search_out *co, int64_t need)
{
    int64_t cap;
    uint64_t *p;
    if (need <= co->cap)
        return 0;
    cap = co->cap < 4096 ? 4096 : 2 * co->cap;
    if (cap < need)
        cap = need;
    if ((uint64_t)cap > SIZE_MAX / sizeof *co->keys)
        return -1;
    p = realloc(co->keys, (size_t)cap * sizeof *p);
    if (!p)
        return -1;
    co->keys = p;
    co->cap = cap;
    return 0;
}

/* ---- the search ----------------------------------------------------------------- */

/* The occupied cells among the flattened stencil offsets [first, first +
 * ECN_STENCIL_CHUNK) of bin b (axis a fastest) into ws->st; returns the next
 * offset (x->visits when done). */
static int64_t stencil_fill(const ecn_search *x, int32_t b, int64_t first, ecn_search_ws *ws)
{
    const int64_t *cb = x->bin_coord[b];
    int64_t last = first + ECN_STENCIL_CHUNK, q, d[3];
    if (last > x->visits)
        last = x->visits;
    d[0] = first % x->width[0] - x->span[0];
    d[1] = (first / x->width[0]) % x->width[1] - x->span[1];
    d[2] = first / (x->width[0] * x->width[1]) - x->span[2];
    ws->st_n = 0;
    ws->st_bin = -1;
    for (q = first; q < last; q++) {
        int64_t c[3], m[3];
        int k, inside = 1;
        for (k = 0; k < 3; k++) {
            const int64_t v = cb[k] + d[k];
            if (x->per[k]) {
                m[k] = wrap_count(v, x->nbin[k]);
                c[k] = v - m[k] * x->nbin[k];
            } else {
                inside &= v >= 0 && v < x->nbin[k];
                m[k] = 0;
                c[k] = v;
            }
        }
        if (inside) {
            const int32_t bb = hash_find(x, bin_key(c));
            if (bb >= 0) {
                stencil_ent *e = &ws->st[ws->st_n++];
                e->bin = bb;
                e->mkey = 0;
                image_shift(m, x->C, e->t);
                for (k = 0; k < 3; k++) {
                    e->m[k] = m[k];
                    e->mkey |= (uint64_t)(m[k] - x->mlo[k]) << x->mshift[k];
                }
            }
        }
        /* next offset, axis a fastest */
        if (++d[0] > x->span[0]) {
            d[0] = -x->span[0];
            if (++d[1] > x->span[1]) {
                d[1] = -x->span[1];
                d[2]++;
            }
        }
    }
    return last;
}

/* The exact test of candidate j in stencil cell se for atom i (it passed the
 * prefilter); a kept candidate is appended to co (room reserved) as its key
 * with the flags. */
ECN_INLINE void test_candidate(const ecn_search *x, int32_t i, int32_t j, const stencil_ent *se,
                               ecn_search_out *co, int64_t *cnt_e, int64_t *cnt_n)
{
    const int64_t *oi = &x->off[3 * (size_t)i], *oj = &x->off[3 * (size_t)j];
    uint64_t key = ((uint64_t)j << x->dshift) | se->mkey;
    double sh[3], s;
    if (x->no_off || (oi[0] == oj[0] && oi[1] == oj[1] && oi[2] == oj[2])) {
        /* the true image is m: its shift is the cell's translation */
        if (j == i && se->m[0] == 0 && se->m[1] == 0 && se->m[2] == 0)
            return;
        sh[0] = se->t[0];
        sh[1] = se->t[1];
        sh[2] = se->t[2];
    } else {
        int64_t nimg[3];
        int k;
        for (k = 0; k < 3; k++)
            nimg[k] = x->per[k] ? se->m[k] + oi[k] - oj[k] : 0;
        if (j == i && nimg[0] == 0 && nimg[1] == 0 && nimg[2] == 0)
            return;
        image_shift(nimg, x->C, sh);
    }
    s = dist2(&x->pos[3 * (size_t)i], &x->pos[3 * (size_t)j], sh);
    if (!(s < x->q_max) && !(s <= x->q_coin))
        return;
    {
        /* flags without branches (being in the shorter list is a coin flip) */
        const int in_e = s < x->q_edge, in_n = s < x->q_nb;
        key |= (uint64_t)in_e * ECN_KEY_EDGE | (uint64_t)in_n * ECN_KEY_NB;
        *cnt_e += in_e;
        *cnt_n += in_n;
    }
    if (s <= x->q_coin &&
        (co->coin_atom < 0 || i < co->coin_atom || (i == co->coin_atom && key < co->coin_key))) {
        co->coin_atom = i;
        co->coin_key = key;
    }
    co->keys[co->n++] = key;
}

/* Distinct keys ascending: quicksort, insertion sort for short runs. */
static void sort_u64(uint64_t *a, int64_t n)
{
    while (n > 24) {
        int64_t i = -1, j = n, mid = n / 2;
        uint64_t pivot, t;
        if (a[mid] < a[0]) {
            t = a[mid]; a[mid] = a[0]; a[0] = t;
        }
        if (a[n - 1] < a[0]) {
            t = a[n - 1]; a[n - 1] = a[0]; a[0] = t;
        }
        if (a[n - 1] < a[mid]) {
            t = a[n - 1]; a[n - 1] = a[mid]; a[mid] = t;
        }
        pivot = a[mid];
        for (;;) {
            do
                i++;
            while (a[i] < pivot);
            do
                j--;
            while (a[j] > pivot);
            if (i >= j)
                break;
            t = a[i]; a[i] = a[j]; a[j] = t;
        }
        /* [0, j] and [j + 1, n): recurse on the smaller part */
        if (j + 1 < n - (j + 1)) {
            sort_u64(a, j + 1);
            a += j + 1;
            n -= j + 1;
        } else {
            sort_u64(a + j + 1, n - (j + 1));
            n = j + 1;
        }
    }
    {
        int64_t i, j;
        for (i = 1; i < n; i++) {
            uint64_t t = a[i];
            for (j = i; j > 0 && a[j - 1] > t; j--)
                a[j] = a[j - 1];
            a[j] = t;
        }
    }
}

/* Atom i = bin_atoms[q] on its own: its candidates from the stencil (in
 * pieces; the whole stencil stays cached while it fits), then sorted. */
static int search_atom(const ecn_search *x, ecn_search_ws *ws, int64_t q, ecn_search_out *co,
                       int64_t *ne, int64_t *nn)
{
    const int32_t i = x->bin_atoms[q], b = x->atom_bin[i];
    const double *wi = &x->wbin[3 * q];
    const int64_t start = co->n;
    int64_t first = 0;
    do {
        int64_t e;
        if (ws->st_bin == b) {
            first = x->visits;
        } else {
            first = stencil_fill(x, b, first, ws);
            if (x->visits <= ECN_STENCIL_CHUNK)
                ws->st_bin = b;
        }
        for (e = 0; e < ws->st_n; e++) {
            const stencil_ent *se = &ws->st[e];
            const int32_t p0 = x->bin_start[se->bin], p1 = x->bin_start[se->bin + 1];
            /* prefilter: |wj + m·C - wi| with the wrapped positions */
            const double t0 = se->t[0] - wi[0], t1 = se->t[1] - wi[1], t2 = se->t[2] - wi[2];
            int32_t p;
            if (out_reserve(co, co->n + (p1 - p0)))
                return -1;
            for (p = p0; p < p1; p++) {
                const double *wj = &x->wbin[3 * (size_t)p];
                const double dx = wj[0] + t0, dy = wj[1] + t1, dz = wj[2] + t2;
                if (dx * dx + dy * dy + dz * dz < x->rs2)
                    test_candidate(x, i, x->bin_atoms[p], se, co, ne, nn);
            }
        }
    } while (first < x->visits);
    sort_u64(co->keys + start, co->n - start);
    return 0;
}

/* The candidates of bin b for its atoms bin_atoms[q0 .. q1) (see the top),
 * sorted by key (LSD radix sort, 8-bit digits) into ws->y / key / cell.
 * Returns the count; -1 when the stencil or the list would be too long; -2
 * when out of memory. */
static int64_t bin_list(const ecn_search *x, ecn_search_ws *ws, int32_t b, int64_t q0, int64_t q1)
{
    double lo[3], hi[3];
    int64_t nl = 0, e;
    uint64_t kmax = 0;
    bin_cand *a, *t;
    int64_t q;
    int k, sh;
    if (x->visits > ECN_STENCIL_CHUNK)
        return -1;
    if (ws->st_bin != b) {
        stencil_fill(x, b, 0, ws);
        ws->st_bin = b;
    }
    /* bounding box of these atoms */
    for (k = 0; k < 3; k++)
        lo[k] = hi[k] = x->wbin[3 * (size_t)q0 + k];
    for (q = q0 + 1; q < q1; q++)
        for (k = 0; k < 3; k++) {
            const double w = x->wbin[3 * (size_t)q + k];
            lo[k] = w < lo[k] ? w : lo[k];
            hi[k] = w > hi[k] ? w : hi[k];
        }
    for (e = 0; e < ws->st_n; e++) {
        const stencil_ent *se = &ws->st[e];
        const int32_t p0 = x->bin_start[se->bin], p1 = x->bin_start[se->bin + 1];
        int32_t p;
        if (nl + (p1 - p0) > ECN_BIN_LIST_MAX)
            return -1;
        if (ws_reserve(ws, nl + (p1 - p0)))
            return -2;
        for (p = p0; p < p1; p++) {
            bin_cand *c = &ws->la[nl];
            const double *wj = &x->wbin[3 * (size_t)p];
            double g2 = 0.0;
            for (k = 0; k < 3; k++) {
                const double y = wj[k] + se->t[k];
                const double gap = y < lo[k] ? lo[k] - y : y > hi[k] ? y - hi[k] : 0.0;
                c->y[k] = y;
                g2 += gap * gap;
            }
            if (!(g2 < x->rs2))
                continue;  /* out of reach of all these atoms */
            c->key = ((uint64_t)x->bin_atoms[p] << x->dshift) | se->mkey;
            c->cell = (int32_t)e;
            kmax = c->key > kmax ? c->key : kmax;
            nl++;
        }
    }
    /* radix passes over the digits above the (zero) flag bits */
    a = ws->la;
    t = ws->lb;
    for (sh = KEY_FLAG_BITS; sh < 64 && (kmax >> sh) != 0; sh += 8) {
        int64_t cnt[256], run = 0;
        int d;
        memset(cnt, 0, sizeof cnt);
        for (e = 0; e < nl; e++)
            cnt[(a[e].key >> sh) & 255]++;
        if (cnt[(a[0].key >> sh) & 255] == nl)
            continue;  /* a single digit value: nothing to do */
        for (d = 0; d < 256; d++) {
            const int64_t c = cnt[d];
            cnt[d] = run;
            run += c;
        }
        for (e = 0; e < nl; e++)
            t[cnt[(a[e].key >> sh) & 255]++] = a[e];
        {
            bin_cand *s = a;
            a = t;
            t = s;
        }
    }
    /* rows for the scan */
    for (e = 0; e < nl; e++) {
        ws->y[e] = a[e].y[0];
        ws->y[ws->l_cap + e] = a[e].y[1];
        ws->y[2 * ws->l_cap + e] = a[e].y[2];
        ws->key[e] = a[e].key;
        ws->cell[e] = a[e].cell;
    }
    return nl;
}

/* Atom i = bin_atoms[q] against its bin's sorted candidate list (nl from
 * bin_list): kept candidates are appended to co, in order. */
static int scan_atom(const ecn_search *x, const ecn_search_ws *ws, int64_t nl, int64_t q,
                     ecn_search_out *co, int64_t *ne, int64_t *nn)
{
    enum { BLOCK = 256 };
    const int32_t i = x->bin_atoms[q];
    const double w0 = x->wbin[3 * q], w1 = x->wbin[3 * q + 1], w2 = x->wbin[3 * q + 2];
    const double *y0 = ws->y, *y1 = ws->y + ws->l_cap, *y2 = ws->y + 2 * ws->l_cap;
    const double rs2 = x->rs2;
    int64_t e0;
    if (nl == 0)
        return 0;
    if (out_reserve(co, co->n + nl))
        return -1;
    /* a block at a time: the prefilter distances (vectorised), the passing
     * candidates picked without branches, then their exact tests */
    for (e0 = 0; e0 < nl; e0 += BLOCK) {
        const int nb = nl - e0 < BLOCK ? (int)(nl - e0) : BLOCK;
        double d2[BLOCK];
        int pass[BLOCK], np = 0, e, h;
        ECN_OMP(omp simd)
        for (e = 0; e < nb; e++) {
            const double dx = y0[e0 + e] - w0, dy = y1[e0 + e] - w1, dz = y2[e0 + e] - w2;
            d2[e] = dx * dx + dy * dy + dz * dz;
        }
        for (e = 0; e < nb; e++) {
            pass[np] = e;
            np += d2[e] < rs2;
        }
        for (h = 0; h < np; h++) {
            const int64_t c = e0 + pass[h];
            test_candidate(x, i, (int32_t)(ws->key[c] >> x->dshift), &ws->st[ws->cell[c]], co,
                           ne, nn);
        }
    }
    return 0;
}

int ecn_search_atoms(const ecn_search *x, ecn_search_ws *ws, int64_t q0, int64_t q1,
                     ecn_search_out *out, int64_t *key_off, int64_t *key_n, int64_t *cnt_e,
                     int64_t *cnt_n)
{
    const int32_t b = x->atom_bin[x->bin_atoms[q0]];
    const int64_t nl = bin_list(x, ws, b, q0, q1);
    /* the inner loops update a private copy and private counts: out and the
     * per-atom arrays share cache lines with other threads' */
    ecn_search_out o = *out;
    int64_t q;
    int rc = nl == -2 ? -1 : 0;
    for (q = q0; q < q1 && rc == 0; q++) {
        const int32_t a = x->bin_atoms[q];
        int64_t ne = 0, nn = 0;
        key_off[a] = o.n;
        rc = nl >= 0 ? scan_atom(x, ws, nl, q, &o, &ne, &nn) : search_atom(x, ws, q, &o, &ne, &nn);
        cnt_e[a] = ne;
        cnt_n[a] = nn;
        key_n[a] = o.n - key_off[a];
    }
    *out = o;
    return rc;
}

/* ---- keys to entries ---------------------------------------------------------------- */

/* Destination and true image of a key of source atom i. */
ECN_INLINE int32_t key_decode(const ecn_search *x, int32_t i, uint64_t key, int64_t nimg[3])
{
    const int32_t j = (int32_t)(key >> x->dshift);
    int k;
    for (k = 0; k < 3; k++) {
        nimg[k] = (int64_t)((key >> x->mshift[k]) & x->mmask[k]) + x->mlo[k];
        if (!x->no_off && x->per[k])
            nimg[k] += x->off[3 * (size_t)i + k] - x->off[3 * (size_t)j + k];
    }
    return j;
}

ecenet_status ecn_search_coincide_error(const ecn_search *x, int32_t i, uint64_t key, char *err,
                                        size_t err_len)
{
    int64_t n[3];
    double sh[3], r;
    const int32_t j = key_decode(x, i, key, n);
    image_shift(n, x->C, sh);
    r = sqrt(dist2(&x->pos[3 * (size_t)i], &x->pos[3 * (size_t)j], sh));
    if (x->U) /* the image in the cell as given */
        ecn_image_unreduce(x->U, n);
    if (j == i)
        return ecn_fail(err, err_len, ECENET_ERR_INPUT,
                        "atom %d coincides with its own periodic image (%lld, %lld, %lld) "
                        "(distance %g Å): the cell is too small",
                        (int)i, (long long)n[0], (long long)n[1], (long long)n[2], r);
    if (n[0] == 0 && n[1] == 0 && n[2] == 0)
        return ecn_fail(err, err_len, ECENET_ERR_INPUT, "atoms %d and %d coincide (distance %g Å)",
                        (int)i, (int)j, r);
    return ecn_fail(err, err_len, ECENET_ERR_INPUT,
                    "atoms %d and %d coincide (distance %g Å, periodic image "
                    "(%lld, %lld, %lld) of atom %d)",
                    (int)i, (int)j, r, (long long)n[0], (long long)n[1], (long long)n[2], (int)j);
}

/* A block of keys at a time: decoded once, then each list's entries are
 * picked without branches. */
void ecn_search_emit(const ecn_search *x, int32_t i, const uint64_t *keys, int64_t nk,
                     ecn_pairlist *el, int64_t pe, ecn_pairlist *nl, int64_t pn)
{
    enum { BLOCK = 128 };
    const int64_t *oi = &x->off[3 * (size_t)i];
    int64_t e0;
    for (e0 = 0; e0 < nk; e0 += BLOCK) {
        const int nb = nk - e0 < BLOCK ? (int)(nk - e0) : BLOCK;
        int32_t jj[BLOCK];
        double sh[BLOCK][3];
        int pick_e[BLOCK], pick_n[BLOCK], ne = 0, nn = 0, e, h;
        for (e = 0; e < nb; e++) {
            const uint64_t key = keys[e0 + e];
            const int32_t j = (int32_t)(key >> x->dshift);
            const int64_t *oj = &x->off[3 * (size_t)j];
            if (x->use_mtab && (x->no_off || (oi[0] == oj[0] && oi[1] == oj[1] && oi[2] == oj[2]))) {
                /* the true image is m: its shift is tabulated by the m fields */
                const double *t = &x->mtab[3 * ((key >> KEY_FLAG_BITS) & x->mtab_mask)];
                jj[e] = j;
                sh[e][0] = t[0];
                sh[e][1] = t[1];
                sh[e][2] = t[2];
            } else {
                int64_t n[3];
                jj[e] = key_decode(x, i, key, n);
                image_shift(n, x->C, sh[e]);
            }
            pick_e[ne] = e;
            ne += (key & ECN_KEY_EDGE) != 0;
            pick_n[nn] = e;
            nn += (key & ECN_KEY_NB) != 0;
        }
        for (h = 0; h < ne; h++, pe++) {
            el->src[pe] = i;
            el->dst[pe] = jj[pick_e[h]];
            memcpy(&el->shift[3 * pe], sh[pick_e[h]], sizeof sh[0]);
        }
        for (h = 0; h < nn; h++, pn++) {
            nl->src[pn] = i;
            nl->dst[pn] = jj[pick_n[h]];
            memcpy(&nl->shift[3 * pn], sh[pick_n[h]], sizeof sh[0]);
        }
    }
}
