/* The neighbour search on the device (ops.h nlist_count / nlist_fill): the
 * host's cell-list set-up (graph_search.c: bins, hash of occupied bins,
 * thresholds, key layout) goes up in one copy, and the device repeats the
 * host's search exactly:
 *
 *   1. search (twice: count, then fill): np warps per source atom (np > 1
 *      for small systems, so that the GPU fills), atoms in bin order; the
 *      warps walk the atom's stencil (every cell the host visits, same
 *      images, shared out cell by cell), lanes take a cell's candidates; the same
 *      prefilter and the same exact test, on d·d with the host's thresholds,
 *      every product and sum rounded as the host writes it (__dmul_rn /
 *      __dadd_rn: no FMA contraction), so the same pairs pass. Each kept
 *      candidate is the host's 64-bit key (dst | image fields | flags).
 *   2. per-atom prefix sums of the counts (cub::DeviceScan): every atom's
 *      place in the keys and in both lists; the totals go down (the caller
 *      sizes its workspace from them).
 *   3. the keys of each atom sorted (cub::DeviceSegmentedSort; keys are
 *      distinct, so the order is the host's (dst, n_a, n_b, n_c)), then
 *      decoded into entries with the host's shift expression (or its table):
 *      the same bits.
 *   4. groupings: by source from the prefix sums (src_idx the identity); by
 *      destination a stable radix sort of (dst, entry) (cub::DeviceRadixSort
 *      is stable), i.e. the host's counting sort, and dst_ptr from where the
 *      sorted destinations change.
 *
 * Integer atomics only, for the "coincident pair seen" flag; the lists do not
 * depend on scheduling. A coincident pair or an overflowing list sets
 * counts.fallback: the caller runs the host search, which names the atoms. */
#include <atomic>
#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_scan.cuh>
#include <cub/device/device_segmented_sort.cuh>

#include "cuda_common.cuh"
#include "cuda_ops.cuh"

namespace ecn_cu {

namespace {

#define KEY_FLAG_BITS 2
#define KEY_EDGE 1ull
#define KEY_NB 2ull
#define WARPS_PER_BLOCK 4

/* The set-up in device memory (pointers into one uploaded blob). */
struct Dev {
    int64_t n;
    const double *pos, *wbin, *mtab;
    const int64_t *off, *bin_coord;
    const int32_t *bin_atoms, *atom_bin, *bin_start, *hash_ids;
    const uint64_t *hash_keys;
    uint64_t hash_mask, mtab_mask, mmask[3];
    double C[9], rs2, q_max, q_edge, q_nb, q_coin;
    int64_t nbin[3], span[3], width[3], visits, mlo[3];
    int per[3], no_off, use_mtab, mshift[3], dshift;
};

/* A device buffer kept between steps (grown, never shrunk). */
struct Buf {
    void *p = nullptr;
    size_t cap = 0;
    bool fit(size_t bytes)
    {
        if (bytes <= cap && p)
            return true;
        mem_release(p);
        cap = 0;
        p = mem_alloc(bytes ? bytes : 16);
        if (p)
            cap = bytes;
        return p != nullptr;
    }
};

/* What nlist_count leaves for nlist_fill. One per host thread (contexts on
 * different threads do not share it). */
struct Scratch {
    Buf blob, cnt, beg, abeg, keys, sorted, dkeys, tot, temp;
    char *pinned = nullptr;  /* page-locked staging of the blob (one DMA) */
    size_t pinned_cap = 0;
    Dev d;
    int64_t n = 0, K = 0, E = 0, P = 0;
    int np = 1; /* warps per atom in the search */
    int ready = 0;
    ~Scratch()
    {
        /* at thread exit; the runtime may already be gone: errors ignored */
        if (pinned)
            (void)cudaFreeHost(pinned);
        for (Buf *b : {&blob, &cnt, &beg, &abeg, &keys, &sorted, &dkeys, &tot, &temp})
            if (b->p)
                (void)cudaFree(b->p);
    }
};
thread_local Scratch scr;
std::atomic<int> warps_override{0}; /* ecn_cuda_set_nlist_warps; 0 = automatic */

/* ---- the host's arithmetic (graph_search.c), rounded as written there ---------------- */

__device__ inline int64_t floordiv64(int64_t a, int64_t b)
{
    int64_t q = a / b;
    if ((a % b != 0) && ((a < 0) != (b < 0)))
        q--;
    return q;
}

__device__ inline int64_t wrap_count(int64_t v, int64_t nb)
{
    if (v >= 0)
        return v < nb ? 0 : v < 2 * nb ? 1 : v / nb;
    return v >= -nb ? -1 : floordiv64(v, nb);
}

/* sh = n·C: (n0 C0k + n1 C1k) + n2 C2k */
__device__ inline void image_shift(const int64_t nn[3], const double *C, double sh[3])
{
    for (int k = 0; k < 3; k++)
        sh[k] = __dadd_rn(__dadd_rn(__dmul_rn((double)nn[0], C[k]), __dmul_rn((double)nn[1], C[3 + k])),
                          __dmul_rn((double)nn[2], C[6 + k]));
}

/* |xj - xi + sh|²: ((dx dx + dy dy) + dz dz), d = (xj - xi) + sh */
__device__ inline double dist2(const double *xi, const double *xj, const double sh[3])
{
    const double dx = __dadd_rn(__dsub_rn(xj[0], xi[0]), sh[0]);
    const double dy = __dadd_rn(__dsub_rn(xj[1], xi[1]), sh[1]);
    const double dz = __dadd_rn(__dsub_rn(xj[2], xi[2]), sh[2]);
    return __dadd_rn(__dadd_rn(__dmul_rn(dx, dx), __dmul_rn(dy, dy)), __dmul_rn(dz, dz));
}

__device__ inline uint64_t bin_key(const int64_t c[3])
{
    return (uint64_t)c[0] | ((uint64_t)c[1] << 20) | ((uint64_t)c[2] << 40);
}

__device__ inline int32_t hash_find(const Dev &x, uint64_t key)
{
    uint64_t h = key; /* splitmix64 finaliser */
    h = (h ^ (h >> 30)) * 0xBF58476D1CE4E5B9ull;
    h = (h ^ (h >> 27)) * 0x94D049BB133111EBull;
    h ^= h >> 31;
    uint64_t s = h & x.hash_mask;
    for (;;) {
        const uint64_t k = x.hash_keys[s];
        if (k == 0)
            return -1;
        if (k == key + 1)
            return x.hash_ids[s];
        s = (s + 1) & x.hash_mask;
    }
}

/* ---- 1. the search -------------------------------------------------------------------- */

/* Warp per (atom bin_atoms[q], part): part of np takes the stencil cells
 * so = part, part + np, ... (small systems get np > 1: enough warps to fill
 * the GPU). Count pass (FILL false): per (atom, part), indexed atom·np +
 * part, its keys, edges and neighbour pairs; any coincident pair sets *coin.
 * Fill pass: the keys at key_off[atom·np + part] on, in any order (each
 * atom's keys are contiguous and sorted next). */
template <bool FILL>
__global__ void __launch_bounds__(32 * WARPS_PER_BLOCK)
    nl_search_k(Dev x, int np, int64_t *cnt, int *coin, const int64_t *key_off, uint64_t *keys)
{
    const int lane = threadIdx.x & 31;
    const int64_t w = (int64_t)blockIdx.x * WARPS_PER_BLOCK + (threadIdx.x >> 5);
    if (w >= x.n * np) /* uniform across the warp */
        return;
    const int64_t q = w / np;
    const int part = (int)(w - q * np);
    const int32_t i = x.bin_atoms[q], b = x.atom_bin[i];
    const double wi[3] = {x.wbin[3 * q], x.wbin[3 * q + 1], x.wbin[3 * q + 2]};
    const double xi[3] = {x.pos[3 * (int64_t)i], x.pos[3 * (int64_t)i + 1], x.pos[3 * (int64_t)i + 2]};
    const int64_t oi[3] = {x.off[3 * (int64_t)i], x.off[3 * (int64_t)i + 1], x.off[3 * (int64_t)i + 2]};
    const int64_t cb[3] = {x.bin_coord[3 * (int64_t)b], x.bin_coord[3 * (int64_t)b + 1],
                           x.bin_coord[3 * (int64_t)b + 2]};
    const unsigned lt = (1u << lane) - 1u;
    const int64_t slot = (int64_t)i * np + part, nslot = x.n * np + 1;
    const uint64_t base = FILL ? (uint64_t)key_off[slot] : 0;
    int64_t nk = 0, ne = 0, nn = 0;
    int seen_coin = 0;
    for (int64_t so = part; so < x.visits; so += np) {
        /* stencil offset so, axis a fastest (stencil_fill) */
        const int64_t d[3] = {so % x.width[0] - x.span[0], (so / x.width[0]) % x.width[1] - x.span[1],
                              so / (x.width[0] * x.width[1]) - x.span[2]};
        int64_t c[3], m[3];
        bool inside = true;
        for (int k = 0; k < 3; k++) {
            const int64_t v = cb[k] + d[k];
            if (x.per[k]) {
                m[k] = wrap_count(v, x.nbin[k]);
                c[k] = v - m[k] * x.nbin[k];
            } else {
                inside = inside && v >= 0 && v < x.nbin[k];
                m[k] = 0;
                c[k] = v;
            }
        }
        if (!inside)
            continue;
        const int32_t bb = hash_find(x, bin_key(c));
        if (bb < 0)
            continue;
        double t[3];
        image_shift(m, x.C, t);
        uint64_t mkey = 0;
        for (int k = 0; k < 3; k++)
            mkey |= (uint64_t)(m[k] - x.mlo[k]) << x.mshift[k];
        const double t0 = t[0] - wi[0], t1 = t[1] - wi[1], t2 = t[2] - wi[2];
        const bool m0 = m[0] == 0 && m[1] == 0 && m[2] == 0;
        const int32_t p0 = x.bin_start[bb], p1 = x.bin_start[bb + 1];
        for (int64_t pb = p0; pb < p1; pb += 32) {
            const int64_t p = pb + lane;
            uint64_t key = 0;
            if (p < p1) {
                const double *wj = &x.wbin[3 * (int64_t)p];
                const double dx = __dadd_rn(wj[0], t0), dy = __dadd_rn(wj[1], t1),
                             dz = __dadd_rn(wj[2], t2);
                if (__dadd_rn(__dadd_rn(__dmul_rn(dx, dx), __dmul_rn(dy, dy)), __dmul_rn(dz, dz)) <
                    x.rs2) {
                    /* the exact test (test_candidate) */
                    const int32_t j = x.bin_atoms[p];
                    const int64_t *oj = &x.off[3 * (int64_t)j];
                    double sh[3];
                    bool self = false;
                    if (x.no_off || (oi[0] == oj[0] && oi[1] == oj[1] && oi[2] == oj[2])) {
                        self = j == i && m0;
                        sh[0] = t[0];
                        sh[1] = t[1];
                        sh[2] = t[2];
                    } else {
                        int64_t ni[3];
                        for (int k = 0; k < 3; k++)
                            ni[k] = x.per[k] ? m[k] + oi[k] - oj[k] : 0;
                        self = j == i && ni[0] == 0 && ni[1] == 0 && ni[2] == 0;
                        image_shift(ni, x.C, sh);
                    }
                    if (!self) {
                        const double s = dist2(xi, &x.pos[3 * (int64_t)j], sh);
                        if (s < x.q_max || s <= x.q_coin) {
                            key = ((uint64_t)j << x.dshift) | mkey |
                                  (s < x.q_edge ? KEY_EDGE : 0ull) | (s < x.q_nb ? KEY_NB : 0ull);
                            seen_coin |= s <= x.q_coin;
                        }
                    }
                }
            }
            const unsigned kept = __ballot_sync(0xffffffffu, key != 0);
            if (FILL && key)
                keys[base + (uint64_t)nk + (uint64_t)__popc(kept & lt)] = key;
            nk += __popc(kept);
            ne += __popc(__ballot_sync(0xffffffffu, (key & KEY_EDGE) != 0));
            nn += __popc(__ballot_sync(0xffffffffu, (key & KEY_NB) != 0));
        }
    }
    if (!FILL) {
        if (__any_sync(0xffffffffu, seen_coin) && lane == 0)
            atomicOr(coin, 1);
        if (lane == 0) {
            cnt[slot] = nk;
            cnt[nslot + slot] = ne;
            cnt[2 * nslot + slot] = nn;
        }
    }
}

/* totals: keys, edges, pairs (the last prefix sums) and the flag */
__global__ void nl_totals_k(int64_t ns, const int64_t *beg, const int *coin, int64_t *tot)
{
    tot[0] = beg[ns - 1];
    tot[1] = beg[ns + ns - 1];
    tot[2] = beg[2 * ns + ns - 1];
    tot[3] = *coin;
}

/* per-atom offsets (3, n+1) from the per-(atom, part) sums (3, n·np+1) */
__global__ void nl_atom_beg_k(int64_t n, int np, const int64_t *beg, int64_t *abeg)
{
    const int64_t ns = n * np + 1;
    for (int64_t k = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; k < 3 * (n + 1);
         k += (int64_t)gridDim.x * blockDim.x) {
        const int64_t l = k / (n + 1), a = k - l * (n + 1);
        abeg[k] = beg[l * ns + a * np];
    }
}

/* ---- 3. keys to entries ------------------------------------------------------------- */

template <typename T>
__global__ void __launch_bounds__(32 * WARPS_PER_BLOCK)
    nl_emit_k(Dev x, const int64_t *beg, const uint64_t *keys, const int32_t *types,
              ecenet_nlist_out eo, ecenet_nlist_out no)
{
    const int lane = threadIdx.x & 31;
    const int64_t i = (int64_t)blockIdx.x * WARPS_PER_BLOCK + (threadIdx.x >> 5);
    if (i >= x.n)
        return;
    const int64_t n1 = x.n + 1;
    const int64_t k0 = beg[i], k1 = beg[i + 1];
    int64_t pe = beg[n1 + i], pn = beg[2 * n1 + i];
    const int64_t oi[3] = {x.off[3 * i], x.off[3 * i + 1], x.off[3 * i + 2]};
    const unsigned lt = (1u << lane) - 1u;
    if (lane == 0) {
        eo.src_ptr[i] = (int32_t)pe;
        no.src_ptr[i] = (int32_t)pn;
        if (i == x.n - 1) {
            eo.src_ptr[x.n] = (int32_t)beg[n1 + x.n];
            no.src_ptr[x.n] = (int32_t)beg[2 * n1 + x.n];
        }
    }
    for (int64_t kb = k0; kb < k1; kb += 32) {
        const int64_t k = kb + lane;
        const uint64_t key = k < k1 ? keys[k] : 0;
        int32_t j = 0;
        double sh[3] = {0.0, 0.0, 0.0};
        if (key) {
            j = (int32_t)(key >> x.dshift);
            const int64_t *oj = &x.off[3 * (int64_t)j];
            if (x.use_mtab && (x.no_off || (oi[0] == oj[0] && oi[1] == oj[1] && oi[2] == oj[2]))) {
                const double *tb = &x.mtab[3 * ((key >> KEY_FLAG_BITS) & x.mtab_mask)];
                sh[0] = tb[0];
                sh[1] = tb[1];
                sh[2] = tb[2];
            } else {
                int64_t ni[3];
                for (int c = 0; c < 3; c++) {
                    ni[c] = (int64_t)((key >> x.mshift[c]) & x.mmask[c]) + x.mlo[c];
                    if (!x.no_off && x.per[c])
                        ni[c] += oi[c] - oj[c];
                }
                image_shift(ni, x.C, sh);
            }
        }
        const unsigned be = __ballot_sync(0xffffffffu, (key & KEY_EDGE) != 0);
        const unsigned bn = __ballot_sync(0xffffffffu, (key & KEY_NB) != 0);
        if (key & KEY_EDGE) {
            const int64_t p = pe + __popc(be & lt);
            eo.src[p] = (int32_t)i;
            eo.dst[p] = j;
            eo.tsrc[p] = types[i];
            eo.tdst[p] = types[j];
            T *s = (T *)eo.shift + 3 * p;
            s[0] = (T)sh[0];
            s[1] = (T)sh[1];
            s[2] = (T)sh[2];
        }
        if (key & KEY_NB) {
            const int64_t p = pn + __popc(bn & lt);
            no.src[p] = (int32_t)i;
            no.dst[p] = j;
            T *s = (T *)no.shift + 3 * p;
            s[0] = (T)sh[0];
            s[1] = (T)sh[1];
            s[2] = (T)sh[2];
        }
        pe += __popc(be);
        pn += __popc(bn);
    }
}

__global__ void nl_iota_k(int64_t n, int32_t *a)
{
    for (int64_t k = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; k < n;
         k += (int64_t)gridDim.x * blockDim.x)
        a[k] = (int32_t)k;
}

/* dst_ptr from the sorted destinations: ptr[a] = first position with
 * destination >= a, for a in (ds[p-1], ds[p]] at position p (p = m: n). */
__global__ void nl_dst_ptr_k(int64_t m, int64_t n, const uint32_t *ds, int32_t *ptr)
{
    for (int64_t p = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; p <= m;
         p += (int64_t)gridDim.x * blockDim.x) {
        const int64_t prev = p == 0 ? -1 : (int64_t)ds[p - 1];
        const int64_t cur = p == m ? n : (int64_t)ds[p];
        for (int64_t a = prev + 1; a <= cur; a++)
            ptr[a] = (int32_t)p;
    }
}

/* ---- host side ---------------------------------------------------------------------------- */

/* The blob: every set-up array, each 16-byte aligned. */
struct Piece {
    const void *src;
    size_t bytes;
    const void **dst;
};

static int upload_setup(const ecenet_nlist *s, Scratch &w)
{
    Dev &d = w.d;
    memset(&d, 0, sizeof d);
    const int64_t n = s->n, nb = s->n_bins;
    const size_t H = (size_t)s->hash_mask + 1, M = s->use_mtab ? (size_t)s->mtab_mask + 1 : 0;
    Piece pc[] = {
        {s->pos, 3 * (size_t)n * sizeof(double), (const void **)&d.pos},
        {s->wbin, 3 * (size_t)n * sizeof(double), (const void **)&d.wbin},
        {s->off, 3 * (size_t)n * sizeof(int64_t), (const void **)&d.off},
        {s->bin_coord, 3 * (size_t)nb * sizeof(int64_t), (const void **)&d.bin_coord},
        {s->bin_atoms, (size_t)n * sizeof(int32_t), (const void **)&d.bin_atoms},
        {s->atom_bin, (size_t)n * sizeof(int32_t), (const void **)&d.atom_bin},
        {s->bin_start, ((size_t)nb + 1) * sizeof(int32_t), (const void **)&d.bin_start},
        {s->hash_keys, H * sizeof(uint64_t), (const void **)&d.hash_keys},
        {s->hash_ids, H * sizeof(int32_t), (const void **)&d.hash_ids},
        {s->mtab, 3 * M * sizeof(double), (const void **)&d.mtab},
    };
    const int np = (int)(sizeof pc / sizeof pc[0]);
    size_t off[sizeof pc / sizeof pc[0]], total = 0;
    for (int k = 0; k < np; k++) {
        off[k] = total;
        total += (pc[k].bytes + 15) / 16 * 16;
    }
    if (!w.blob.fit(total))
        return -1;
    if (total > w.pinned_cap) {
        if (w.pinned)
            CU_CHECK(cudaFreeHost(w.pinned));
        w.pinned = nullptr;
        w.pinned_cap = 0;
        if (cudaMallocHost((void **)&w.pinned, total + total / 4) != cudaSuccess) {
            (void)cudaGetLastError();
            w.pinned = nullptr;
            return -1;
        }
        w.pinned_cap = total + total / 4;
    }
    /* the previous step's copy from the pinned buffer must be done */
    CU_CHECK(cudaStreamSynchronize(0));
    for (int k = 0; k < np; k++) {
        if (pc[k].bytes)
            memcpy(w.pinned + off[k], pc[k].src, pc[k].bytes);
        *pc[k].dst = (const char *)w.blob.p + off[k];
    }
    CU_CHECK(cudaMemcpyAsync(w.blob.p, w.pinned, total, cudaMemcpyHostToDevice, 0));
    d.n = n;
    d.hash_mask = s->hash_mask;
    d.mtab_mask = s->mtab_mask;
    memcpy(d.C, s->C, sizeof d.C);
    d.rs2 = s->rs2;
    d.q_max = s->q_max;
    d.q_edge = s->q_edge;
    d.q_nb = s->q_nb;
    d.q_coin = s->q_coin;
    for (int k = 0; k < 3; k++) {
        d.mmask[k] = s->mmask[k];
        d.nbin[k] = s->nbin[k];
        d.span[k] = s->span[k];
        d.width[k] = s->width[k];
        d.mlo[k] = s->mlo[k];
        d.per[k] = s->per[k];
        d.mshift[k] = s->mshift[k];
    }
    d.visits = s->visits;
    d.no_off = s->no_off;
    d.use_mtab = s->use_mtab;
    d.dshift = s->dshift;
    return 0;
}

static unsigned warp_blocks(int64_t n)
{
    return grid_items((n + WARPS_PER_BLOCK - 1) / WARPS_PER_BLOCK);
}

/* bits of the destinations 0 .. n-1 for the radix sort */
static int dst_bits(int64_t n)
{
    int end_bit = 1;
    while (end_bit < 32 && ((int64_t)1 << end_bit) < n)
        end_bit++;
    return end_bit;
}

/* Every buffer nlist_fill needs for K keys and lists of E and P entries
 * (sized by nlist_count, so that an out-of-memory is its -1 and not an
 * error in the middle of a step). false when out of memory. */
static bool fill_memory(Scratch &w, int64_t n)
{
    const int64_t K = w.K, mx = w.E > w.P ? w.E : w.P;
    size_t sort_bytes = 0, eb = 0, pb = 0;
    CU_CHECK(cub::DeviceSegmentedSort::SortKeys(nullptr, sort_bytes, (const uint64_t *)nullptr,
                                                (uint64_t *)nullptr, K, n, (const int64_t *)w.abeg.p,
                                                (const int64_t *)w.abeg.p + 1));
    CU_CHECK(cub::DeviceRadixSort::SortPairs(nullptr, eb, (const uint32_t *)nullptr,
                                             (uint32_t *)nullptr, (const int32_t *)nullptr,
                                             (int32_t *)nullptr, w.E, 0, dst_bits(n)));
    CU_CHECK(cub::DeviceRadixSort::SortPairs(nullptr, pb, (const uint32_t *)nullptr,
                                             (uint32_t *)nullptr, (const int32_t *)nullptr,
                                             (int32_t *)nullptr, w.P, 0, dst_bits(n)));
    size_t tb = sort_bytes > eb ? sort_bytes : eb;
    tb = tb > pb ? tb : pb;
    return w.keys.fit((size_t)K * sizeof(uint64_t)) && w.sorted.fit((size_t)K * sizeof(uint64_t)) &&
           w.dkeys.fit((size_t)mx * sizeof(uint32_t)) && w.temp.fit(tb);
}

static int nlist_count(const ecenet_nlist *s, ecenet_nlist_counts *c)
{
    state();
    Scratch &w = scr;
    w.ready = 0;
    memset(c, 0, sizeof *c);
    if (failed())
        return 0; /* a CUDA error is sticky: every later download gives NaN */
    const int64_t n = s->n, n1 = n + 1;
    if (upload_setup(s, w))
        return -1;
    /* warps per atom: about 64 per SM in all (a small system's atoms alone
     * would leave most of the GPU idle), at most one per stencil cell */
    const int64_t want = (int64_t)state().n_sm * 64;
    int64_t np = (want + n - 1) / n;
    if (warps_override.load() > 0)
        np = warps_override.load();
    if (np > s->visits)
        np = s->visits;
    if (np > 32)
        np = 32;
    if (np < 1)
        np = 1;
    w.np = (int)np;
    const int64_t ns = n * np + 1;
    /* cnt: (3, ns) counts per (atom, part) (last entries 0); beg: their
     * exclusive sums; abeg: the sums at each atom's first part (3, n+1);
     * tot: 4 totals + the coincidence flag */
    size_t scan_bytes = 0;
    CU_CHECK(cub::DeviceScan::ExclusiveSum(nullptr, scan_bytes, (int64_t *)nullptr,
                                           (int64_t *)nullptr, ns));
    if (!w.cnt.fit(3 * (size_t)ns * sizeof(int64_t)) || !w.beg.fit(3 * (size_t)ns * sizeof(int64_t)) ||
        !w.abeg.fit(3 * (size_t)n1 * sizeof(int64_t)) ||
        !w.tot.fit(4 * sizeof(int64_t) + sizeof(int)) || !w.temp.fit(scan_bytes))
        return -1;
    int64_t *cnt = (int64_t *)w.cnt.p, *beg = (int64_t *)w.beg.p, *tot = (int64_t *)w.tot.p;
    int *coin = (int *)(tot + 4);
    CU_CHECK(cudaMemsetAsync(cnt, 0, 3 * (size_t)ns * sizeof(int64_t), 0));
    CU_CHECK(cudaMemsetAsync(coin, 0, sizeof(int), 0));
    nl_search_k<false><<<warp_blocks(n * np), 32 * WARPS_PER_BLOCK>>>(w.d, w.np, cnt, coin, nullptr,
                                                                     nullptr);
    CU_LAUNCHED();
    for (int l = 0; l < 3; l++) {
        size_t bytes = w.temp.cap;
        CU_CHECK(cub::DeviceScan::ExclusiveSum(w.temp.p, bytes, cnt + l * ns, beg + l * ns, ns));
    }
    nl_atom_beg_k<<<blocks_for(3 * n1, 256), 256>>>(n, w.np, beg, (int64_t *)w.abeg.p);
    CU_LAUNCHED();
    nl_totals_k<<<1, 1>>>(ns, beg, coin, tot);
    CU_LAUNCHED();
    int64_t h[4] = {0, 0, 0, 0};
    CU_CHECK(cudaMemcpy(h, tot, sizeof h, cudaMemcpyDeviceToHost));
    if (failed())
        return 0;
    w.n = n;
    w.K = h[0];
    w.E = h[1];
    w.P = h[2];
    c->n_edges = h[1];
    c->n_nb = h[2];
    c->fallback = h[3] != 0 || h[0] > (int64_t)INT32_MAX || h[1] > (int64_t)INT32_MAX ||
                  h[2] > (int64_t)INT32_MAX;
    if (c->fallback)
        return 0;
    if (!fill_memory(w, n))
        return -1;
    w.ready = !failed();
    return 0;
}

/* Stable grouping of list l by destination (radix sort of (dst, entry)). */
static void group_by_dst(Scratch &w, int64_t m, int64_t n, const ecenet_nlist_out *o)
{
    if (m > 0) {
        size_t bytes = w.temp.cap; /* sized for both lists by fill_memory */
        CU_CHECK(cub::DeviceRadixSort::SortPairs(w.temp.p, bytes, (const uint32_t *)o->dst,
                                                 (uint32_t *)w.dkeys.p, (const int32_t *)o->src_idx,
                                                 o->dst_idx, m, 0, dst_bits(n)));
    }
    nl_dst_ptr_k<<<blocks_for(m + 1, 256), 256>>>(m, n, (const uint32_t *)w.dkeys.p, o->dst_ptr);
    CU_LAUNCHED();
}

template <typename T>
static void nlist_fill(const ecenet_nlist *s, ecenet_idx types, const ecenet_nlist_out *eo,
                       const ecenet_nlist_out *no)
{
    Scratch &w = scr;
    if (failed())
        return;
    if (!w.ready || w.n != s->n) {
        fail(-2, "nlist_fill without a matching nlist_count", __FILE__, __LINE__);
        return;
    }
    w.ready = 0;
    const int64_t n = s->n, K = w.K; /* nlist_count sized every buffer (fill_memory) */
    uint64_t *keys = (uint64_t *)w.keys.p, *sorted = (uint64_t *)w.sorted.p;
    const int64_t *beg = (const int64_t *)w.beg.p, *abeg = (const int64_t *)w.abeg.p;
    if (K > 0) {
        nl_search_k<true><<<warp_blocks(n * w.np), 32 * WARPS_PER_BLOCK>>>(w.d, w.np, nullptr,
                                                                          nullptr, beg, keys);
        CU_LAUNCHED();
        size_t bytes = w.temp.cap;
        CU_CHECK(cub::DeviceSegmentedSort::SortKeys(w.temp.p, bytes, keys, sorted, K, n, abeg,
                                                    abeg + 1));
    }
    nl_emit_k<T><<<warp_blocks(n), 32 * WARPS_PER_BLOCK>>>(w.d, abeg, sorted, types, *eo, *no);
    CU_LAUNCHED();
    for (const ecenet_nlist_out *o : {eo, no}) { /* src_idx: the identity */
        const int64_t m = o == eo ? w.E : w.P;
        if (m > 0) {
            const unsigned nb = blocks_for(m, 256);
            nl_iota_k<<<nb < 4096 ? nb : 4096, 256>>>(m, o->src_idx);
            CU_LAUNCHED();
        }
    }
    group_by_dst(w, w.E, n, eo);
    group_by_dst(w, w.P, n, no);
}

} // namespace

template <typename T> void fill_nlist(ecenet_backend &b)
{
    b.nlist_count = nlist_count;
    b.nlist_fill = nlist_fill<T>;
}
template void fill_nlist<float>(ecenet_backend &);
template void fill_nlist<double>(ecenet_backend &);

} // namespace ecn_cu

extern "C" int ecn_cuda_set_nlist_warps(int np)
{
    return ecn_cu::warps_override.exchange(np > 0 ? np : 0);
}
