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
 *      (measured perpendicular to the other two lattice vectors). Along a
 *      periodic axis narrower than the cutoff the search visits
 *      s = ceil(r·|b_k| / bin width) bins each side, i.e. as many images as
 *      needed.
 *   3. The search itself (graph_search.c), a bin at a time: candidates from
 *      the bins around, a cheap prefilter, then the exact test with the
 *      original positions, d = pos[dst] - pos[src] + shift,
 *      shift = n_a·a + n_b·b + n_c·c, kept if r = |d| < cutoff (strict);
 *      per source atom sorted by (dst, n_a, n_b, n_c), so the order does not
 *      depend on the binning.
 *   4. In parallel (OpenMP) and deterministic: the atoms, in bin order, are
 *      searched in chunks, each source atom on its own; per-atom counts give
 *      every atom its place in the lists (prefix sums), and the lists are
 *      written atom by atom. The result does not depend on the number of
 *      threads (nor on the chunks).
 *   5. The per-atom groupings (graph.h): by source from the counts, by
 *      destination with a stable counting sort.
 *   6. All memory but the lists is scratch, kept by the graph for
 *      ecn_graph_rebuild (first touches of fresh pages cost as much as the
 *      search itself), released at the end of ecn_graph_build.
 * Cost O(N · neighbours) time, O(N + pairs) memory.
 *
 * Details of the contract (beyond graph.h):
 *   - pbc may be NULL when a cell is given: all three axes are then periodic.
 *     A cell with all pbc flags 0 is ignored (it may be all zeros).
 *   - n_atoms == 0 gives two empty lists (pos may then be NULL).
 *   - ecn_graph_build: empty lists have NULL arrays (but ptr arrays when
 *     n_atoms > 0). On failure *g is left empty.
 *   - Pairs at distance <= 1e-10 Å (any image, not i->i with n = 0) are an
 *     error naming the first such pair in list order.
 *   - Each list is limited to INT32_MAX entries (ECENET_ERR_INPUT beyond).
 *   - An atom more than 2^52 cells away from the cell is rejected (or 2^40
 *     cells of a reduced basis, below).
 *   - A cell far from reduced (a perpendicular width much below its vectors'
 *     lengths) is searched in a reduced basis when that visits 8× fewer
 *     images (ecn_cell_reduce, graph_cell.c); the lists and the errors
 *     (images, atoms too far outside the cell) are those of the cell as
 *     given. The device search's set-up (ecn_graph_setup) searches such a
 *     cell on the host instead (s->n = -1, the lists in g). */
#define _POSIX_C_SOURCE 200809L

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "error.h"
#include "graph.h"
#include "graph_cell.h"
#include "graph_search.h"

/* OpenMP pragmas only when compiled with OpenMP (the code is then serial,
 * without unknown-pragma warnings). */
#ifdef _OPENMP
#define ECN_OMP(x) _Pragma(#x)
#else
#define ECN_OMP(x)
#endif

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
/* ... and in a reduced basis (ecn_cell_reduce), so that an image n_R is
 * recovered exactly from its shift and n_R·U (in wrap-around arithmetic)
 * gives the true image, which the bound above keeps within int64 */
#define ECN_MAX_FRAC_REDUCED 1099511627776.0 /* 2^40 */
/* Fewer atoms than this are searched serially (starting threads would cost
 * more than it saves). */
#define ECN_PAR_MIN_ATOMS 64
/* The search is cut into about this many chunks per thread, for balance,
 * of at least ECN_MIN_CHUNK atoms. */
#define ECN_CHUNKS_PER_THREAD 8
#define ECN_MIN_CHUNK 16
/* At most this many threads (the destination grouping takes 2 × threads ×
 * n_atoms ints). */
#define ECN_MAX_THREADS 32

/* ---- skewed cells: the lists of a search in a reduced basis (graph_cell.c,
 * ecn_cell_reduce) put back in the cell as given ------------------------------ */

typedef struct {
    int32_t dst;
    int64_t n[3];
} img_entry;

static int img_cmp(const void *pa, const void *pb)
{
    const img_entry *a = pa, *b = pb;
    if (a->dst != b->dst)
        return a->dst < b->dst ? -1 : 1;
    for (int k = 0; k < 3; k++)
        if (a->n[k] != b->n[k])
            return a->n[k] < b->n[k] ? -1 : 1;
    return 0;
}

/* A list found in the reduced basis (inverse invr), back to the cell as
 * given: images n = n_R·U, shifts n·cell, each source atom's entries sorted
 * by (dst, n), the destination grouping rebuilt (stable, by entry). */
static int unreduce_list(ecn_pairlist *L, size_t n_atoms, const double *cell, const double invr[9],
                         const int64_t U[9], const int per[3])
{
    if (L->n == 0)
        return 0;
    img_entry *t = malloc((size_t)L->n * sizeof *t);
    int32_t *fill = malloc(n_atoms * sizeof *fill);
    if (!t || !fill) {
        free(t);
        free(fill);
        return -1;
    }
    for (int64_t k = 0; k < L->n; k++) {
        t[k].dst = L->dst[k];
        for (int c = 0; c < 3; c++)
            t[k].n[c] = per[c] ? (int64_t)nearbyint(ecn_cell_frac(&L->shift[3 * k], invr, c)) : 0;
        ecn_image_unreduce(U, t[k].n);
    }
    for (size_t a = 0; a < n_atoms; a++)
        qsort(t + L->src_ptr[a], (size_t)(L->src_ptr[a + 1] - L->src_ptr[a]), sizeof *t, img_cmp);
    for (int64_t k = 0; k < L->n; k++) {
        L->dst[k] = t[k].dst;
        ecn_image_shift(t[k].n, cell, &L->shift[3 * k]);
    }
    for (size_t a = 0; a < n_atoms; a++)
        fill[a] = L->dst_ptr[a];
    for (int64_t k = 0; k < L->n; k++)
        L->dst_idx[fill[L->dst[k]]++] = (int32_t)k;
    free(t);
    free(fill);
    return 0;
}

/* ---- memory -------------------------------------------------------------------- */

/* Scratch buffers of a build, by use. */
enum {
    BUF_FRAC, BUF_OFF, BUF_ATOM_CHUNK, BUF_KEY_OFF, BUF_KEY_N, BUF_CNT_E, BUF_CNT_N, BUF_BEG_E,
    BUF_BEG_N, BUF_HIST, BUF_BSUM, N_BUF
};

/* What a graph keeps for ecn_graph_rebuild: the capacity of its lists'
 * arrays, the scratch buffers and the search's key buffers. Reusing memory
 * matters: first touches of fresh pages cost about as much as the search. */
struct ecn_graph_mem {
    int64_t cap[2];            /* entries the entry arrays of edges / nb hold */
    size_t ptr_cap[2];         /* entries their ptr arrays hold */
    void *buf[N_BUF];          /* contents not kept between builds */
    size_t size[N_BUF];
    ecn_search x;              /* the search (its arrays kept) */
    ecn_search_ws *ws[ECN_MAX_THREADS]; /* per-thread scratch of the search */
    ecn_search_out *out;       /* the search's chunks (key buffers kept) */
    int64_t out_n;
};

static void mem_free(ecn_graph_mem *m)
{
    int64_t c;
    int k;
    if (!m)
        return;
    for (k = 0; k < N_BUF; k++)
        free(m->buf[k]);
    ecn_search_free(&m->x);
    for (k = 0; k < ECN_MAX_THREADS; k++)
        ecn_search_ws_free(m->ws[k]);
    for (c = 0; c < m->out_n; c++)
        free(m->out[c].keys);
    free(m->out);
    free(m);
}

/* Scratch buffer `slot` of at least `bytes`; NULL when out of memory. */
static void *mem_buf(ecn_graph_mem *m, int slot, size_t bytes)
{
    if (bytes > m->size[slot] || !m->buf[slot]) {
        free(m->buf[slot]);
        m->buf[slot] = malloc(bytes ? bytes : 1);
        m->size[slot] = m->buf[slot] ? bytes : 0;
    }
    return m->buf[slot];
}

static void pairlist_free(ecn_pairlist *l)
{
    free(l->src);
    free(l->dst);
    free(l->shift);
    free(l->src_ptr);
    free(l->src_idx);
    free(l->dst_ptr);
    free(l->dst_idx);
    memset(l, 0, sizeof *l);
}

void ecn_graph_recentre(size_t n, const double *pos, const double *cell, const int pbc[3],
                        double *out)
{
    double t[3] = {0.0, 0.0, 0.0}, frame[9], inv[9];
    int per[3];
    const int any_per = ecn_cell_periodic(cell, pbc, per);
    if (n == 0)
        return;
    for (size_t i = 0; i < n; i++)
        for (int c = 0; c < 3; c++)
            t[c] += pos[3 * i + c];
    for (int c = 0; c < 3; c++)
        t[c] /= (double)n;
    for (size_t i = 0; i < 3 * n; i++)
        out[i] = pos[i] - t[i % 3];
    /* a cell the search will refuse is left to it to name */
    if (!any_per || ecn_cell_frame(cell, per, frame, inv, NULL, 0) != ECENET_OK)
        return;
    for (size_t i = 0; i < n; i++)
        for (int k = 0; k < 3; k++) {
            /* a whole number of lattice vectors, exactly representable */
            const double q = per[k] ? floor(ecn_cell_frac(&out[3 * i], inv, k) + 0.5) : 0.0;
            if (q != 0.0 && fabs(q) < 0x1p52)
                for (int c = 0; c < 3; c++)
                    out[3 * i + c] -= q * cell[3 * k + c];
        }
}

void ecn_graph_free(ecn_graph *g)
{
    if (!g)
        return;
    pairlist_free(&g->edges);
    pairlist_free(&g->nb);
    mem_free(g->mem);
    g->mem = NULL;
}

/* Arrays of list l (0 edges, 1 nb) for m entries and N atoms, reused when
 * large enough (entry arrays stay NULL while nothing was ever needed). A
 * rebuild allocates 1/8 more, as the counts drift from step to step. 0, or
 * -1 when out of memory. */
static int pairlist_alloc(ecn_graph *g, int l, int64_t m, size_t N, int reuse)
{
    ecn_pairlist *pl = l ? &g->nb : &g->edges;
    ecn_graph_mem *mem = g->mem;
    pl->n = m;
    if (mem->ptr_cap[l] < N + 1) {
        free(pl->src_ptr);
        free(pl->dst_ptr);
        pl->src_ptr = malloc((N + 1) * sizeof *pl->src_ptr);
        pl->dst_ptr = malloc((N + 1) * sizeof *pl->dst_ptr);
        mem->ptr_cap[l] = pl->src_ptr && pl->dst_ptr ? N + 1 : 0;
        if (!mem->ptr_cap[l])
            return -1;
    }
    if (mem->cap[l] < m) {
        const size_t c = (size_t)(reuse ? m + m / 8 : m);
        free(pl->src);
        free(pl->dst);
        free(pl->shift);
        free(pl->src_idx);
        free(pl->dst_idx);
        pl->src = malloc(c * sizeof *pl->src);
        pl->dst = malloc(c * sizeof *pl->dst);
        pl->shift = malloc(c * 3 * sizeof *pl->shift);
        pl->src_idx = malloc(c * sizeof *pl->src_idx);
        pl->dst_idx = malloc(c * sizeof *pl->dst_idx);
        mem->cap[l] = pl->src && pl->dst && pl->shift && pl->src_idx && pl->dst_idx ? (int64_t)c : 0;
        if (!mem->cap[l])
            return -1;
    }
    return 0;
}

static int max_threads(void)
{
#ifdef _OPENMP
    return omp_get_max_threads();
#else
    return 1;
#endif
}

/* ---- build ------------------------------------------------------------------------ */

/* Per-atom results of the search (memory of the graph's ecn_graph_mem). */
typedef struct {
    int64_t nch, cs;             /* chunks of cs atoms (in bin order) */
    ecn_search_out *out;         /* (nch) keys of each chunk */
    int32_t *atom_chunk;         /* (n) chunk of each atom */
    int64_t *key_off, *key_n;    /* (n) atom a's keys: out[atom_chunk[a]].keys + key_off[a] */
    int64_t *cnt_e, *cnt_n;      /* (n) its edges / neighbour pairs */
    int64_t *beg_e, *beg_n;      /* (n + 1) prefix sums: where its entries begin */
} found;

/* Runs the search over all atoms, in chunks of the bin order (several per
 * thread, taken dynamically; a chunk takes its atoms a bin at a time). 0, or
 * -1 when out of memory. */
static int search_all(const ecn_search *x, found *f, ecn_graph_mem *mem, int threads, int par)
{
    const size_t n = x->n;
    int64_t c;
    int oom = 0;
    f->cs = (int64_t)n / (ECN_CHUNKS_PER_THREAD * (int64_t)threads);
    if (f->cs < ECN_MIN_CHUNK)
        f->cs = ECN_MIN_CHUNK;
    f->nch = ((int64_t)n + f->cs - 1) / f->cs;
    if (f->nch > mem->out_n) {
        ecn_search_out *o = realloc(mem->out, (size_t)f->nch * sizeof *o);
        if (!o)
            return -1;
        memset(o + mem->out_n, 0, (size_t)(f->nch - mem->out_n) * sizeof *o);
        mem->out = o;
        mem->out_n = f->nch;
    }
    f->out = mem->out;
    f->atom_chunk = mem_buf(mem, BUF_ATOM_CHUNK, n * sizeof *f->atom_chunk);
    f->key_off = mem_buf(mem, BUF_KEY_OFF, n * sizeof *f->key_off);
    f->key_n = mem_buf(mem, BUF_KEY_N, n * sizeof *f->key_n);
    f->cnt_e = mem_buf(mem, BUF_CNT_E, n * sizeof *f->cnt_e);
    f->cnt_n = mem_buf(mem, BUF_CNT_N, n * sizeof *f->cnt_n);
    f->beg_e = mem_buf(mem, BUF_BEG_E, (n + 1) * sizeof *f->beg_e);
    f->beg_n = mem_buf(mem, BUF_BEG_N, (n + 1) * sizeof *f->beg_n);
    if (!f->atom_chunk || !f->key_off || !f->key_n || !f->cnt_e || !f->cnt_n || !f->beg_e ||
        !f->beg_n)
        return -1;
    for (c = 0; c < f->nch; c++) {
        f->out[c].n = 0;
        f->out[c].coin_atom = -1;
    }
    (void)par;
    ECN_OMP(omp parallel num_threads(threads) if (par) reduction(| : oom))
    {
        int t = 0;
        ecn_search_ws *ws;
#ifdef _OPENMP
        t = omp_get_thread_num();
#endif
        if (ecn_search_ws_fit(&mem->ws[t], x))
            oom = 1;
        ws = oom ? NULL : mem->ws[t];
        ECN_OMP(omp for schedule(dynamic, 1))
        for (int64_t ch = 0; ch < f->nch; ch++) {
            const int64_t q1 = (ch + 1) * f->cs < (int64_t)n ? (ch + 1) * f->cs : (int64_t)n;
            int64_t q = ch * f->cs;
            while (ws && q < q1) {
                /* the chunk's atoms of one bin */
                const int32_t b = x->atom_bin[x->bin_atoms[q]];
                const int64_t qe = x->bin_start[b + 1] < q1 ? x->bin_start[b + 1] : q1;
                if (ecn_search_atoms(x, ws, q, qe, &f->out[ch], f->key_off, f->key_n, f->cnt_e,
                                     f->cnt_n)) {
                    oom = 1;
                    break;
                }
                for (; q < qe; q++)
                    f->atom_chunk[x->bin_atoms[q]] = (int32_t)ch;
            }
        }
    }
    return oom ? -1 : 0;
}

/* Errors in list order: the first coincident pair, unless a list overflows
 * before it; otherwise the prefix sums (beg_e, beg_n). */
static ecenet_status check_found(const ecn_search *x, found *f, char *err, size_t err_len)
{
    const size_t n = x->n;
    int32_t ia = -1;
    uint64_t ikey = 0;
    int64_t lim = (int64_t)n, c;
    for (c = 0; c < f->nch; c++)
        if (f->out[c].coin_atom >= 0 && (ia < 0 || f->out[c].coin_atom < ia)) {
            ia = f->out[c].coin_atom;
            ikey = f->out[c].coin_key;
        }
    if (ia >= 0) {
        /* only atom ia's entries before its coincident pair count */
        const uint64_t *kk = f->out[f->atom_chunk[ia]].keys + f->key_off[ia];
        int64_t e;
        f->cnt_e[ia] = f->cnt_n[ia] = 0;
        for (e = 0; e < f->key_n[ia] && kk[e] < ikey; e++) {
            f->cnt_e[ia] += (kk[e] & ECN_KEY_EDGE) != 0;
            f->cnt_n[ia] += (kk[e] & ECN_KEY_NB) != 0;
        }
        lim = ia + 1;
    }
    f->beg_e[0] = f->beg_n[0] = 0;
    for (c = 0; c < lim; c++) {
        f->beg_e[c + 1] = f->beg_e[c] + f->cnt_e[c];
        f->beg_n[c + 1] = f->beg_n[c] + f->cnt_n[c];
        if (f->beg_e[c + 1] > ECN_MAX_PAIRS || f->beg_n[c + 1] > ECN_MAX_PAIRS) {
            const int edges = f->beg_e[c + 1] > ECN_MAX_PAIRS;
            return ecn_fail(err, err_len, ECENET_ERR_INPUT,
                            "graph: more than %lld %s (cutoff %g Å, %zu atoms)",
                            (long long)ECN_MAX_PAIRS, edges ? "edges" : "neighbour pairs",
                            edges ? x->r_edge : x->r_nb, n);
        }
    }
    if (ia >= 0)
        return ecn_search_coincide_error(x, ia, ikey, err, err_len);
    return ECENET_OK;
}

/* First atom a with at least `target` entries (both lists) before it. */
static int64_t atom_at(const found *f, int64_t n, int64_t target)
{
    int64_t lo = 0, hi = n;
    while (lo < hi) {
        const int64_t mid = lo + (hi - lo) / 2;
        if (f->beg_e[mid] + f->beg_n[mid] < target)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* The lists from the keys, and their groupings: by source from the counts
 * (src_idx the identity), by destination a stable counting sort. One
 * parallel region with few barriers (with more threads than free cores, a
 * barrier can cost a time slice). Thread t of T:
 *   A. writes the entries of its atoms [a0, a1) (about 1/T of all entries,
 *      contiguous in both lists) and counts their destinations: row t of
 *      hist (per list, T × N);
 *   B. for its block of atoms, the total counts and their running sums;
 *   C. adds the sums of the blocks before (bsum), giving dst_ptr, and turns
 *      the rows of hist into each part's first slot per atom;
 *   D. scatters its entries into dst_idx.
 * The result does not depend on T. hist: 2 × team × N ints, bsum: 2 × team. */
static void assemble(const ecn_search *x, const found *f, ecn_graph *g, int32_t *hist,
                     int64_t *bsum, int team, int par)
{
    const int64_t N = (int64_t)x->n, tot = f->beg_e[N] + f->beg_n[N];
    (void)team;
    (void)par;
    ECN_OMP(omp parallel num_threads(team) if (par))
    {
        ecn_pairlist *const L[2] = {&g->edges, &g->nb};
        const int64_t *const beg[2] = {f->beg_e, f->beg_n};
        int T = 1, t = 0, l, s;
        int64_t a0, a1, b0, b1, a, k;
#ifdef _OPENMP
        T = omp_get_num_threads();
        t = omp_get_thread_num();
#endif
        a0 = t == 0 ? 0 : atom_at(f, N, tot * t / T);
        a1 = t == T - 1 ? N : atom_at(f, N, tot * (t + 1) / T);
        b0 = N * t / T;
        b1 = N * (t + 1) / T;

        /* A */
        for (a = a0; a < a1; a++) {
            ecn_search_emit(x, (int32_t)a, f->out[f->atom_chunk[a]].keys + f->key_off[a],
                            f->key_n[a], L[0], f->beg_e[a], L[1], f->beg_n[a]);
            L[0]->src_ptr[a] = (int32_t)f->beg_e[a];
            L[1]->src_ptr[a] = (int32_t)f->beg_n[a];
        }
        for (l = 0; l < 2; l++) {
            int32_t *h = hist + ((size_t)l * (size_t)T + (size_t)t) * (size_t)N;
            memset(h, 0, (size_t)N * sizeof *h);
            for (k = beg[l][a0]; k < beg[l][a1]; k++) {
                h[L[l]->dst[k]]++;
                L[l]->src_idx[k] = (int32_t)k;
            }
        }
        if (t == T - 1) {
            L[0]->src_ptr[N] = (int32_t)f->beg_e[N];
            L[1]->src_ptr[N] = (int32_t)f->beg_n[N];
        }
        ECN_OMP(omp barrier)

        /* B */
        for (l = 0; l < 2; l++) {
            int32_t run = 0;
            for (a = b0; a < b1; a++) {
                for (s = 0; s < T; s++)
                    run += hist[((size_t)l * (size_t)T + (size_t)s) * (size_t)N + (size_t)a];
                L[l]->dst_ptr[a + 1] = run;
            }
            bsum[l * T + t] = run;
        }
        ECN_OMP(omp barrier)

        /* C */
        for (l = 0; l < 2; l++) {
            int32_t off = 0, start;
            for (s = 0; s < t; s++)
                off += (int32_t)bsum[l * T + s];
            if (t == 0)
                L[l]->dst_ptr[0] = 0;
            start = off;
            for (a = b0; a < b1; a++) {
                int32_t run = start;
                L[l]->dst_ptr[a + 1] += off;
                for (s = 0; s < T; s++) {
                    int32_t *h = &hist[((size_t)l * (size_t)T + (size_t)s) * (size_t)N + (size_t)a];
                    const int32_t c = *h;
                    *h = run;
                    run += c;
                }
                start = L[l]->dst_ptr[a + 1];
            }
        }
        ECN_OMP(omp barrier)

        /* D */
        for (l = 0; l < 2; l++) {
            int32_t *h = hist + ((size_t)l * (size_t)T + (size_t)t) * (size_t)N;
            for (k = beg[l][a0]; k < beg[l][a1]; k++)
                L[l]->dst_idx[h[L[l]->dst[k]]++] = (int32_t)k;
        }
    }
}

/* The device search's view of the set-up (ops.h). */
static void nlist_from_search(const ecn_search *x, ecenet_nlist *s)
{
    int k;
    s->n = (int64_t)x->n;
    s->pos = x->pos;
    s->off = x->off;
    s->wbin = x->wbin;
    s->bin_atoms = x->bin_atoms;
    s->atom_bin = x->atom_bin;
    s->n_bins = x->n_bins;
    s->bin_start = x->bin_start;
    s->bin_coord = &x->bin_coord[0][0];
    s->hash_mask = x->hash_mask;
    s->hash_keys = x->hash_keys;
    s->hash_ids = x->hash_ids;
    memcpy(s->C, x->C, sizeof s->C);
    for (k = 0; k < 3; k++) {
        s->per[k] = x->per[k];
        s->nbin[k] = x->nbin[k];
        s->span[k] = x->span[k];
        s->width[k] = x->width[k];
        s->mlo[k] = x->mlo[k];
        s->mmask[k] = x->mmask[k];
        s->mshift[k] = x->mshift[k];
    }
    s->no_off = x->no_off;
    s->visits = x->visits;
    s->rs2 = x->rs2;
    s->q_max = x->q_max;
    s->q_edge = x->q_edge;
    s->q_nb = x->q_nb;
    s->q_coin = x->q_coin;
    s->dshift = x->dshift;
    s->use_mtab = x->use_mtab;
    s->mtab = x->use_mtab ? x->mtab : NULL;
    s->mtab_mask = x->use_mtab ? x->mtab_mask : 0;
}


/* ecn_graph_build / ecn_graph_rebuild into g (zeroed, or holding an earlier
 * graph); g is left to the callers on failure. reuse: keep spare capacity. */
static ecenet_status build(size_t n_atoms, const double *pos, const double *cell, const int pbc[3],
                           double r_cut_edge, double r_cut_nb, ecn_graph *g, int reuse,
                           ecenet_nlist *setup, char *err, size_t err_len)
{
    ecenet_status st = ECENET_OK;
    int per[3] = {0, 0, 0}, any_per = 0, k;
    double frame[9] = {1, 0, 0, 0, 1, 0, 0, 0, 1}, inv[9] = {1, 0, 0, 0, 1, 0, 0, 0, 1};
    double rmax, rsearch, bnorm[3], binw[3], fmin[3], fmax[3];
    int64_t nbin[3], span[3];
    size_t i, n = n_atoms;
    double *frac;                 /* wrapped fractional coordinates (n,3) */
    int64_t *off;                 /* integer offsets of the wrap (n,3) */
    int32_t *hist;                /* assemble's scratch */
    int64_t *bsum;
    static const double zero9[9] = {0, 0, 0, 0, 0, 0, 0, 0, 0};
    const double *C = zero9;      /* lattice rows used for shifts */
    double Cr[9];                 /* the reduced cell's rows, U·cell */
    int64_t U[9];
    int reduced = 0;
    double inv0[9];               /* the inverse of the frame as given */
    double maxfrac = ECN_MAX_FRAC; /* farthest wrap, in the searched basis */
    ecn_search *x;
    found f;
    int threads = max_threads(), par;
    int64_t tot_e, tot_n;

    memset(&f, 0, sizeof f);
    g->edges.n = g->nb.n = 0;
    if (!isfinite(r_cut_edge) || !(r_cut_edge > 0.0) || !isfinite(r_cut_nb) || !(r_cut_nb > 0.0))
        return ecn_fail(err, err_len, ECENET_ERR_ARGUMENT,
                        "graph: cutoffs must be finite and positive (r_cut_edge %g, r_cut_neighbor %g)",
                        r_cut_edge, r_cut_nb);
    if (n > (size_t)INT32_MAX)
        return ecn_fail(err, err_len, ECENET_ERR_INPUT,
                        "graph: %zu atoms exceed the limit of %d", n, (int)INT32_MAX);
    any_per = ecn_cell_periodic(cell, pbc, per);

    /* Frame and its inverse. */
    if (any_per) {
        if ((st = ecn_cell_frame(cell, per, frame, inv, err, err_len)) != ECENET_OK)
            return st;
        C = cell;
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
    if (any_per && (st = ecn_cell_check_density(n, frame, per, rmax, err, err_len)) != ECENET_OK)
        return st;
    rsearch = (rmax > 2.0 * ECN_COINCIDE_DIST ? rmax : 2.0 * ECN_COINCIDE_DIST) *
              (1.0 + ECN_SEARCH_INFLATE);
    /* a skewed cell is searched in a reduced basis (see ecn_cell_reduce) */
    memcpy(inv0, inv, sizeof inv0);
    if (any_per && (reduced = ecn_cell_reduce(frame, inv, per, rsearch, U))) {
        if (setup) { /* the device search takes no reduced basis: g gets the host's lists */
            setup->n = -1;
            setup = NULL;
        }
        ecn_cell_apply_u(U, cell, Cr);
        C = Cr;
        maxfrac = ECN_MAX_FRAC_REDUCED;
    }
    /* |b_k| = norm of column k of the inverse = 1 / perpendicular width. */
    for (k = 0; k < 3; k++)
        bnorm[k] = ecn_cell_recip_norm(inv, k);

    par = threads > 1 && n >= ECN_PAR_MIN_ATOMS;
    if (!par)
        threads = 1;
    if (threads > ECN_MAX_THREADS)
        threads = ECN_MAX_THREADS;
    if (!g->mem && !(g->mem = calloc(1, sizeof *g->mem)))
        return ecn_fail(err, err_len, ECENET_ERR_NOMEM, "graph: out of memory");
    x = &g->mem->x;
    frac = mem_buf(g->mem, BUF_FRAC, n * 3 * sizeof *frac);
    off = mem_buf(g->mem, BUF_OFF, n * 3 * sizeof *off);
    if (!frac || !off)
        return ecn_fail(err, err_len, ECENET_ERR_NOMEM, "graph: out of memory (%zu atoms)", n);
    /* Fractional coordinates, wrapped along periodic axes, and their range. */
    {
        double lo0 = HUGE_VAL, lo1 = HUGE_VAL, lo2 = HUGE_VAL;
        double hi0 = -HUGE_VAL, hi1 = -HUGE_VAL, hi2 = -HUGE_VAL;
        int bad = 0;
        ECN_OMP(omp parallel for schedule(static) num_threads(threads) if (par) \
                reduction(min : lo0, lo1, lo2) reduction(max : hi0, hi1, hi2) reduction(| : bad))
        for (int64_t a = 0; a < (int64_t)n; a++) {
            const double *xp = &pos[3 * a];
            double fr[3];
            int kk;
            for (kk = 0; kk < 3; kk++) {
                double fa = ecn_cell_frac(xp, inv, kk);
                int64_t o = 0;
                if (per[kk]) {
                    double fl;
                    if (!(fabs(fa) < maxfrac) ||
                        (reduced && !(fabs(ecn_cell_frac(xp, inv0, kk)) < ECN_MAX_FRAC))) {
                        bad = 1;  /* reported below */
                        fa = 0.0;
                    }
                    fl = floor(fa);
                    o = (int64_t)fl;
                    fa -= fl;
                    if (fa >= 1.0) {
                        fa -= 1.0;
                        o += 1;
                    }
                    if (fa < 0.0)
                        fa = 0.0;
                }
                frac[3 * a + kk] = fa;
                off[3 * a + kk] = o;
                fr[kk] = fa;
            }
            lo0 = fr[0] < lo0 ? fr[0] : lo0;
            lo1 = fr[1] < lo1 ? fr[1] : lo1;
            lo2 = fr[2] < lo2 ? fr[2] : lo2;
            hi0 = fr[0] > hi0 ? fr[0] : hi0;
            hi1 = fr[1] > hi1 ? fr[1] : hi1;
            hi2 = fr[2] > hi2 ? fr[2] : hi2;
        }
        if (bad)  /* the first atom too far outside */
            for (i = 0; i < n; i++)
                for (k = 0; k < 3; k++) {
                    const double fa = ecn_cell_frac(&pos[3 * i], inv, k);
                    const double f0 = ecn_cell_frac(&pos[3 * i], inv0, k);
                    if (per[k] && (!(fabs(fa) < maxfrac) || !(fabs(f0) < ECN_MAX_FRAC)))
                        return ecn_fail(err, err_len, ECENET_ERR_INPUT,
                                        "atom %zu lies too far outside the cell (fractional coordinate %g)",
                                        i, fabs(f0) < ECN_MAX_FRAC ? fa : f0);
                }
        fmin[0] = lo0;
        fmin[1] = lo1;
        fmin[2] = lo2;
        fmax[0] = hi0;
        fmax[1] = hi1;
        fmax[2] = hi2;
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

    /* The search. */
    x->n = n;
    x->pos = pos;
    x->C = C;
    x->U = reduced ? U : NULL;
    x->frac = frac;
    x->off = off;
    for (k = 0; k < 3; k++) {
        x->per[k] = per[k];
        x->nbin[k] = nbin[k];
        x->span[k] = span[k];
        x->fmin[k] = fmin[k];
        x->binw[k] = binw[k];
    }
    x->rsearch = rsearch;
    x->r_edge = r_cut_edge;
    x->r_nb = r_cut_nb;
    x->par = par;
    if ((st = ecn_search_init(x, err, err_len)) != ECENET_OK)
        goto done;
    if (setup) {
        nlist_from_search(x, setup);
        goto done;
    }
    if (search_all(x, &f, g->mem, threads, par)) {
        st = ecn_fail(err, err_len, ECENET_ERR_NOMEM, "graph: out of memory (neighbour search, %zu atoms)", n);
        goto done;
    }
    if ((st = check_found(x, &f, err, err_len)) != ECENET_OK)
        goto done;
    tot_e = f.beg_e[n];
    tot_n = f.beg_n[n];

    /* The lists and their groupings. */
    hist = mem_buf(g->mem, BUF_HIST, (size_t)threads * 2 * n * sizeof *hist);
    bsum = mem_buf(g->mem, BUF_BSUM, (size_t)threads * 2 * sizeof *bsum);
    if (!hist || !bsum || pairlist_alloc(g, 0, tot_e, n, reuse) ||
        pairlist_alloc(g, 1, tot_n, n, reuse)) {
        st = ecn_fail(err, err_len, ECENET_ERR_NOMEM,
                      "graph: out of memory (%lld edges, %lld neighbour pairs)", (long long)tot_e,
                      (long long)tot_n);
        goto done;
    }
    assemble(x, &f, g, hist, bsum, threads, par);
    if (reduced && (unreduce_list(&g->edges, n, cell, inv, U, per) ||
                    unreduce_list(&g->nb, n, cell, inv, U, per)))
        st = ecn_fail(err, err_len, ECENET_ERR_NOMEM,
                      "graph: out of memory (%lld edges, %lld neighbour pairs)", (long long)tot_e,
                      (long long)tot_n);

done:
    return st;
}

/* The two entry points: build (g starts empty, no memory kept afterwards)
 * or rebuild (g's memory reused and kept, with spare capacity) */
static ecenet_status build_entry(size_t n_atoms, const double *pos, const double *cell,
                                 const int pbc[3], double r_cut_edge, double r_cut_nb,
                                 ecn_graph *g, int reuse, ecenet_nlist *setup, char *err,
                                 size_t err_len)
{
    if (!g)
        return ecn_fail(err, err_len, ECENET_ERR_ARGUMENT, "graph: output graph is NULL");
    if (!reuse)
        memset(g, 0, sizeof *g);
    if (setup)
        memset(setup, 0, sizeof *setup);
    const ecenet_status st =
        build(n_atoms, pos, cell, pbc, r_cut_edge, r_cut_nb, g, reuse, setup, err, err_len);
    if (st != ECENET_OK) {
        ecn_graph_free(g);
    } else if (!reuse) {
        mem_free(g->mem);
        g->mem = NULL;
    }
    return st;
}

ecenet_status ecn_graph_build(size_t n_atoms, const double *pos, const double *cell,
                              const int pbc[3], double r_cut_edge, double r_cut_nb,
                              ecn_graph *g, char *err, size_t err_len)
{
    return build_entry(n_atoms, pos, cell, pbc, r_cut_edge, r_cut_nb, g, 0, NULL, err, err_len);
}

ecenet_status ecn_graph_rebuild(size_t n_atoms, const double *pos, const double *cell,
                                const int pbc[3], double r_cut_edge, double r_cut_nb,
                                ecn_graph *g, char *err, size_t err_len)
{
    return build_entry(n_atoms, pos, cell, pbc, r_cut_edge, r_cut_nb, g, 1, NULL, err, err_len);
}

ecenet_status ecn_graph_setup(size_t n_atoms, const double *pos, const double *cell,
                              const int pbc[3], double r_cut_edge, double r_cut_nb,
                              ecn_graph *g, ecenet_nlist *s, char *err, size_t err_len)
{
    if (!s)
        return ecn_fail(err, err_len, ECENET_ERR_ARGUMENT, "graph: set-up output is NULL");
    return build_entry(n_atoms, pos, cell, pbc, r_cut_edge, r_cut_nb, g, 1, s, err, err_len);
}
