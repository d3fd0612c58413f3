/* Edge frame (SPEC §8) and distance embedding (§9); mirrors
 * ref_edge_frame.c. The bond-frame map kernels here also serve message
 * passing (cuda_mp.cu) through the launchers declared in cuda_frame.cuh.
 *
 * All bond-frame maps share one slot rule: channel f = b(L+1)+l, cos slot m
 * <-> local column l+m (0 <= m <= min(l,M)), sin slot m <-> column l-m
 * (1 <= m <= min(l,M)); only the diagonal Wigner blocks are used. Four
 * kernels cover every direction:
 *   frame_in    per edge: X[e] (=|+=) select(rows(e)·D_e)     (edge frame, rotate-unpack,
 *                                                             pack-unrotate's X̄)
 *   frame_out   per edge: g[e] = pack(X[e])·D_eᵀ             (pack-unrotate)
 *   frame_atom  per atom: rows_bar[a] += Σ_{e∈CSR(a)} pack(X̄[e])·D_eᵀ (Ā_emb, Δ̄)
 *   frame_dbar  per edge: D̄_e += rows(e)ᵀ·select⁻¹(Xs[e])     (every D̄)
 * (the pack-unrotate VJP runs frame_in and frame_dbar as one kernel, pu_vjp;
 * frame_atom has a register-blocked form, frame_atom_rb, for l_max <= 4).
 * The per-edge kernels stage the edge's rows / features and its D in shared
 * memory; the per-atom kernels loop the atom's edges in CSR order, so every
 * reduction is deterministic without atomics. */
#include <atomic>
#include <mutex>
#include <stdlib.h>
#include "cuda_backend.h"
#include "cuda_frame.cuh"
#include "cuda_ops.cuh"

namespace ecn_cu {

/* ---- staging: global -> shared ---------------------------------------------------------------
 * Every map kernel first copies its edges' rows, features and D blocks into
 * shared memory. Through registers (AS = false) each copy is a load and a
 * shared store that waits for it, and a staging loop keeps about one load
 * per thread in flight. frame_atom_k moved 911 GB/s on the H100 bench (ncu,
 * twenty-second session), about what 64 warps of an SM with one 128-byte
 * load each in flight sustain over a DRAM round trip; that is the guess
 * this tests (an earlier ncu run saw these kernels busy issuing
 * instructions, 50-70% SM throughput, so the gain may be smaller). With
 * cp.async (AS = true, sm_80+) a copy needs no register, so a thread issues
 * all its copies back to back; stage_wait() before the barrier that
 * publishes them. Same values in the same places: the same results bit for
 * bit, and AS = false compiles to the same machine code as before. On an
 * H100 (twenty-third session, ncu over one TF32 bench step) the five
 * kernels took 3.72 ms instead of 4.12 (frame_atom 454 -> 409 µs a launch,
 * frame_out 449 -> 350, pu_vjp 620 -> 507; frame_in's overwriting variant
 * alone got slower, 228 -> 253) and the bench's joint step 1.5-2% less, so
 * it is the default; ECENET_FRAME_ASYNC=0 (or ecn_cuda_set_frame_async)
 * selects the register path. */
template <typename T> __device__ __forceinline__ void stage_cp(T *dst, const T *src)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    const unsigned s = (unsigned)__cvta_generic_to_shared(dst);
    asm volatile("cp.async.ca.shared.global [%0], [%1], %2;\n" ::"r"(s), "l"(src),
                 "n"((int)sizeof(T))
                 : "memory");
#else
    *dst = *src;
#endif
}
/* dst = src, through cp.async if AS (the plain assignment otherwise, written
 * as before so that the register path compiles to the same code) */
#define STAGE(AS, dst, src)                                                                        \
    do {                                                                                           \
        if (AS)                                                                                    \
            stage_cp(&(dst), &(src));                                                              \
        else                                                                                       \
            (dst) = (src);                                                                         \
    } while (0)

template <bool AS> __device__ __forceinline__ void stage_wait()
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    if (AS)
        asm volatile("cp.async.wait_all;\n" ::: "memory");
#endif
}

/* An on/off switch read once from the environment (0 or 1; unset, empty
 * or anything else: on, ecn_env_int says why), which the tests may set;
 * several contexts may use it at once. */
struct EnvSwitch {
    const char *name;
    std::atomic<int> v;
    std::once_flag once;
    std::atomic<int> &get()
    {
        std::call_once(once, [this] {
            v = ecn_env_int(name, 1, 0, 1);
        });
        return v;
    }
};

static EnvSwitch fa_switch{"ECENET_FRAME_ASYNC"};
static std::atomic<unsigned long long> fa_launches;

/* whether this launch stages with cp.async (counted for the tests) */
static bool frame_async()
{
    if (!fa_switch.get().load())
        return false;
    fa_launches++;
    return true;
}

/* the register-blocked frame_atom kernel (frame_atom_rb_k, l_max <= 4): env
 * ECENET_FRAME_ATOM_RB (read once), else on; 0 runs frame_atom_k, kept for
 * l_max > 4 (same sums in the same order) */
static EnvSwitch far_switch{"ECENET_FRAME_ATOM_RB"};
static std::atomic<unsigned long long> far_launches;
static bool frame_atom_rb() { return far_switch.get().load() != 0; }

template <typename T>
__device__ static inline const T *row_ptr(const Rows<T> &r, int64_t e, int b, int C, int S)
{
    const int64_t CS = (int64_t)C * S, BS = 2 * CS;
    switch (r.mode) {
    case ROWS_EDGE_FRAME:
        return b < C ? r.base + r.ei[e] * CS + (int64_t)b * S
                     : r.base + r.ej[e] * CS + (int64_t)(b - C) * S;
    case ROWS_ATOM_SRC: return r.base + r.ei[e] * BS + (int64_t)b * S;
    default: return r.base + e * BS + (int64_t)b * S;
    }
}


/* where rows(e) lie: row b at base + (b < C ? lo : hi) + b·S (the edge
 * frame's rows C.. are the receiver's rows 0..) */
template <typename T>
__device__ static inline void row_offsets(const Rows<T> &r, int64_t e, int C, int S, int64_t *lo,
                                          int64_t *hi)
{
    const int64_t CS = (int64_t)C * S, BS = 2 * CS;
    switch (r.mode) {
    case ROWS_EDGE_FRAME:
        *lo = r.ei[e] * CS;
        *hi = r.ej[e] * CS - CS;
        return;
    case ROWS_ATOM_SRC: *lo = *hi = r.ei[e] * BS; return;
    default: *lo = *hi = e * BS; return;
    }
}

/* ---- frame_in: X[e][m][p][f] (=|+=) Σ_s rows[b][l²+s]·D_l[s][k] ------------------------
 * A block takes a tile of te consecutive edges: their rows (padded to S+1 per
 * row: conflict-free per-lane reads) and D blocks are staged in shared memory
 * in one pass (te edges' loads in flight at once), then a thread computes
 * items (edge, l, b) with l fixed across a warp (no divergence; D entries
 * are broadcasts; l <= 3 fully unrolled) into an output tile laid out
 * [edge][slot][l][b] (stride B + ceil(32/(L+1)), so the write phase's lanes,
 * l fastest, fall in distinct banks), which is written to X in coalesced
 * runs (=, or += on the valid slots only). */
template <int LL, typename T>
__device__ static inline void frame_in_item(const T *a, const T *Dl, int l, int ml, int Q,
                                            int OS, T *o)
{
    constexpr int NN = 2 * LL + 1;
    const int n = LL >= 0 ? NN : 2 * l + 1;
    T av[LL >= 0 ? NN : 1];
    if (LL >= 0) {
#pragma unroll
        for (int s = 0; s < NN; s++)
            av[s] = a[s];
    }
    for (int m = 0; m < Q; m++) {
        T c = 0, sn = 0;
        if (m <= ml) {
            if (LL >= 0) {
#pragma unroll
                for (int s = 0; s < NN; s++)
                    c += av[s] * Dl[s * NN + LL + m];
                if (m)
#pragma unroll
                    for (int s = 0; s < NN; s++)
                        sn += av[s] * Dl[s * NN + LL - m];
            } else {
                for (int s = 0; s < n; s++)
                    c += a[s] * Dl[s * n + l + m];
                if (m)
                    for (int s = 0; s < n; s++)
                        sn += a[s] * Dl[s * n + l - m];
            }
        }
        o[(2 * m) * OS] = c;
        o[(2 * m + 1) * OS] = sn;
    }
}

/* row stride of frame_in_k's output tile */
__host__ __device__ static inline int frame_in_ob(const Geo &g)
{
    return g.B + (32 + g.L) / (g.L + 1);
}

/* shared memory of one edge in frame_in_k (elements) */
static inline size_t frame_in_edge_elems(const Geo &g)
{
    return (size_t)g.B * (g.S + 1) + g.ND + (size_t)2 * g.Q * (g.L + 1) * frame_in_ob(g);
}

template <typename T, bool ACC, bool AS>
__global__ void __launch_bounds__(256, 4) frame_in_k(int64_t E, Geo g, Rows<T> rows, const T *D,
                                                     T *X, int te)
{
    extern __shared__ unsigned char smraw[];
    const int L1 = g.L + 1, S1 = g.S + 1, CS = g.C * g.S, OB = frame_in_ob(g), OS = L1 * OB;
    const int RE = g.B * S1, OE = 2 * g.Q * OS; /* per-edge sizes: rows, output tile */
    T *sR = (T *)smraw, *sD = sR + (size_t)te * RE, *sO = sD + (size_t)te * g.ND;
    const int64_t XE = (int64_t)g.Q * 2 * g.F, e0 = (int64_t)blockIdx.x * te;
    const int ne = E - e0 < te ? (int)(E - e0) : te;
    /* stage: every edge's two runs of C·S row values (a thread keeps its
     * positions r across the edges: no per-element divisions), and its D */
    for (int r = threadIdx.x; r < 2 * CS; r += blockDim.x) {
        const int half = r < CS ? 0 : 1, rr = r - half * CS, b = r / g.S, sidx = r - b * g.S;
        for (int k = 0; k < ne; k++)
            STAGE(AS, sR[k * RE + b * S1 + sidx], row_ptr(rows, e0 + k, half * g.C, g.C, g.S)[rr]);
    }
    for (int q = threadIdx.x; q < ne * g.ND; q += blockDim.x)
        STAGE(AS, sD[q], D[e0 * g.ND + q]);
    stage_wait<AS>();
    __syncthreads();
    /* items (edge k, l, b), b fastest */
    for (int q = threadIdx.x; q < ne * L1 * g.B; q += blockDim.x) {
        const int k = q / (L1 * g.B), r = q - k * L1 * g.B, l = r / g.B, b = r - l * g.B;
        const int ml = l < g.M ? l : g.M;
        const T *a = sR + k * RE + b * S1 + l * l, *Dl = sD + k * g.ND + dblock(l);
        T *o = sO + k * OE + l * OB + b;
        switch (l) {
        case 0: frame_in_item<0>(a, Dl, l, ml, g.Q, OS, o); break;
        case 1: frame_in_item<1>(a, Dl, l, ml, g.Q, OS, o); break;
        case 2: frame_in_item<2>(a, Dl, l, ml, g.Q, OS, o); break;
        case 3: frame_in_item<3>(a, Dl, l, ml, g.Q, OS, o); break;
        default: frame_in_item<-1>(a, Dl, l, ml, g.Q, OS, o); break;
        }
    }
    __syncthreads();
    /* write: X[e0 + k][slot][f], f = b·(L+1) + l; a thread keeps its f,
     * consecutive threads on consecutive f. +=: the old values of a group of
     * GRP slots (8 fp32, 4 fp64) are loaded first, then added and stored (one
     * load-add-store chain per slot keeps one load in flight per thread; by
     * ncu on the H200 bench 0.463 -> 0.293 ms fp32, 0.962 -> 0.618 fp64); the
     * valid slots of f are 0, then 2m and 2m+1 for m = 1..ml */
    constexpr int GRP = sizeof(T) == 4 ? 8 : 4;
    for (int f = threadIdx.x; f < g.F; f += blockDim.x) {
        const int b = f / L1, l = f - b * L1, ml = l < g.M ? l : g.M;
        const T *src = sO + l * OB + b;
        const int nv = 2 * ml + 1;
        for (int k = 0; k < ne; k++) {
            T *Xe = X + (e0 + k) * XE + f;
            const T *sk = src + k * OE;
            if (ACC) {
                for (int v0 = 0; v0 < nv; v0 += GRP) {
                    T old[GRP];
#pragma unroll
                    for (int j = 0; j < GRP; j++) {
                        const int slot = v0 + j + (v0 + j > 0); /* j-th valid slot */
                        if (v0 + j < nv)
                            old[j] = Xe[slot * g.F];
                    }
#pragma unroll
                    for (int j = 0; j < GRP; j++) {
                        const int slot = v0 + j + (v0 + j > 0);
                        if (v0 + j < nv)
                            Xe[slot * g.F] = old[j] + sk[slot * OS];
                    }
                }
            } else {
                for (int slot = 0; slot < 2 * g.Q; slot++)
                    Xe[slot * g.F] = sk[slot * OS];
            }
        }
    }
}

template <typename T, bool ACC>
void launch_frame_in(int64_t E, const Geo &g, const Rows<T> &rows, const T *D, T *X)
{
    if (E <= 0)
        return;
    /* about 56 KiB of shared memory per block (4 blocks of 256 threads per SM) */
    const size_t per = frame_in_edge_elems(g) * sizeof(T);
    int te = (int)((56u << 10) / per);
    te = te < 1 ? 1 : te > 8 ? 8 : te;
    const size_t sm = per * te;
    auto K = frame_async() ? frame_in_k<T, ACC, true> : frame_in_k<T, ACC, false>;
    if (!smem_ready(K, sm, "edge frame / rotate-back (frame_in_k)"))
        return;
    K<<<grid_items((E + te - 1) / te), 256, sm>>>(E, g, rows, D, X, te);
    CU_LAUNCHED();
}

/* ---- frame_out: g[e][b][l²+s] = Σ_valid X[e][slot][f]·D_l[s][k] ------------------------------
 * blockDim = S·(a whole number): a thread keeps one s (so its l, D offsets
 * and slot range are fixed for the whole kernel) and walks b in steps. */
template <typename T, bool AS>
__global__ void frame_out_k(int64_t E, Geo g, const T *X, const T *D, T *G, T *Xs)
{
    extern __shared__ unsigned char smraw[];
    const int XE = g.Q * 2 * g.F, BS = g.B * g.S, L1 = g.L + 1;
    T *sX = (T *)smraw, *sD = sX + XE;
    const int s = threadIdx.x % g.S, b0 = threadIdx.x / g.S, bstep = blockDim.x / g.S;
    const int l = l_of_s(s), sp = s - l * l, n = 2 * l + 1, ml = l < g.M ? l : g.M;
    const int dof = dblock(l) + sp * n + l;
    for (int64_t e = blockIdx.x; e < E; e += gridDim.x) {
        for (int q = threadIdx.x; q < XE; q += blockDim.x) {
            if (AS) {
                stage_cp(&sX[q], &X[e * XE + q]);
            } else {
                const T v = X[e * XE + q];
                sX[q] = v;
                if (Xs)
                    Xs[e * XE + q] = v;
            }
        }
        for (int q = threadIdx.x; q < g.ND; q += blockDim.x)
            STAGE(AS, sD[q], D[e * g.ND + q]);
        stage_wait<AS>();
        __syncthreads();
        if (AS && Xs) /* the copy of X, from the staged values */
            for (int q = threadIdx.x; q < XE; q += blockDim.x)
                Xs[e * XE + q] = sX[q];
        for (int b = b0; b < g.B; b += bstep) {
            const int f = b * L1 + l;
            T acc = 0;
            for (int m = 0; m <= ml; m++) {
                acc += sX[(2 * m) * g.F + f] * sD[dof + m];
                if (m)
                    acc += sX[(2 * m + 1) * g.F + f] * sD[dof - m];
            }
            G[e * BS + b * g.S + s] = acc;
        }
        __syncthreads();
    }
}

/* Stream atom a's edges, list 0 (ptr0/idx0) then list 1 (ptr1/idx1, if any),
 * through shared memory TE at a time, in CSR order: start(list) once per
 * list, stage(k, e) copies edge e into the tile's place k, reduce(ne) adds
 * the tile's ne edges. The next tile's edge indices are read while a tile is
 * reduced. Every thread of the block calls it (it holds the barriers). */
template <int TE, bool AS, typename Start, typename Stage, typename Reduce>
__device__ __forceinline__ void atom_edge_tiles(int64_t a, const int32_t *ptr0,
                                                const int32_t *idx0, const int32_t *ptr1,
                                                const int32_t *idx1, int32_t (*sI)[TE],
                                                Start start, Stage stage, Reduce reduce)
{
    const int tid = threadIdx.x;
    for (int list = 0; list < (ptr1 ? 2 : 1); list++) {
        const int32_t *ptr = list ? ptr1 : ptr0, *idx = list ? idx1 : idx0;
        start(list);
        const int32_t p0 = ptr[a], p1 = ptr[a + 1];
        __syncthreads(); /* the previous list's last tile is consumed */
        if (tid < TE && p0 + tid < p1)
            sI[0][tid] = idx[p0 + tid];
        int t = 0;
        for (int32_t pt = p0; pt < p1; pt += TE, t ^= 1) {
            const int ne = p1 - pt < TE ? p1 - pt : TE;
            __syncthreads(); /* sI[t] is written, the previous tile is consumed */
#pragma unroll
            for (int k = 0; k < TE; k++)
                if (k < ne)
                    stage(k, (int64_t)sI[t][k]);
            /* the next tile's edges, while this one is reduced */
            if (tid < TE && pt + TE + tid < p1)
                sI[t ^ 1][tid] = idx[pt + TE + tid];
            stage_wait<AS>();
            __syncthreads();
            reduce(ne);
        }
    }
}

/* ---- frame_atom: rows_bar[a][c][s] += Σ over the atom's edge lists ------------------------------
 * list 0 (ptr0/idx0) feeds rows b = c + b_off0, list 1 (optional) rows b = c + b_off1;
 * nrows rows of S per atom in the output (stride nrows*S). A block takes one
 * (atom, chunk of nc rows) item; a thread keeps one (c, s) and its sum. The
 * atom's edges go through shared memory TE at a time: their features for the
 * chunk's rows (2Q runs of nc(L+1) contiguous values) and D blocks are
 * staged together (the tile's loads in flight at once, rather than one
 * dependent gather per edge and thread), then each thread adds the tile's
 * edges in CSR order, so the sum is deterministic and in the same order as
 * edge by edge. The next tile's edge indices are read while a tile is
 * reduced. At most 32 registers (8 blocks per SM, a few bytes spilled): 0.45
 * ms per call on the H200 bench, against 0.87 ms at 80 registers. */
template <typename T, int TE, bool AS>
__global__ void __launch_bounds__(256, 8) frame_atom_k(int64_t N, Geo g, int nrows, int nc,
                                                    const int32_t *ptr0, const int32_t *idx0,
                                                    int b_off0, const int32_t *ptr1,
                                                    const int32_t *idx1, int b_off1,
                                                    const T *__restrict__ Xbar,
                                                    const T *__restrict__ D, T *out)
{
    extern __shared__ __align__(16) unsigned char smraw[];
    __shared__ int32_t sI[2][TE]; /* this tile's edges and the next tile's */
    T *sm = (T *)smraw;
    const int L1 = g.L + 1, SL = 2 * g.Q, RS = nrows * g.S, nch = (nrows + nc - 1) / nc;
    const int64_t XE = (int64_t)SL * g.F;
    const int cc = threadIdx.x / g.S, s = threadIdx.x - cc * g.S;
    const int l = l_of_s(s), sp = s - l * l, ml = l < g.M ? l : g.M;
    const int dof = dblock(l) + sp * (2 * l + 1) + l;
    for (int64_t it = blockIdx.x; it < N * nch; it += gridDim.x) {
        const int64_t a = it / nch;
        const int c0 = (int)(it - a * nch) * nc, ncc = nrows - c0 < nc ? nrows - c0 : nc;
        const int FW = ncc * L1, XW = SL * FW, PE = XW + g.ND;
        /* staging: a thread keeps one feature w of the chunk and every sstep-th slot */
        const int sw = threadIdx.x % FW, ss = threadIdx.x / FW, sstep = blockDim.x / FW;
        const bool stager = ss < sstep, act = cc < ncc;
        T acc = 0;
        int64_t f0 = 0;
        atom_edge_tiles<TE, AS>(
            a, ptr0, idx0, ptr1, idx1, sI,
            [&](int list) { f0 = (int64_t)((list ? b_off1 : b_off0) + c0) * L1 + sw; },
            [&](int k, int64_t e) {
                if (stager) {
                    const T *Xe = Xbar + e * XE + f0;
                    T *dst = sm + k * PE + sw;
                    for (int slot = ss; slot < SL; slot += sstep)
                        STAGE(AS, dst[slot * FW], Xe[(int64_t)slot * g.F]);
                }
                for (int i = threadIdx.x; i < g.ND; i += blockDim.x)
                    STAGE(AS, sm[k * PE + XW + i], D[e * g.ND + i]);
            },
            [&](int ne) {
                if (act)
                    for (int k = 0; k < ne; k++) {
                        const T *xs = sm + k * PE + cc * L1 + l, *Dl = sm + k * PE + XW + dof;
                        for (int m = 0; m <= ml; m++) {
                            acc += xs[(2 * m) * FW] * Dl[m];
                            if (m)
                                acc += xs[(2 * m + 1) * FW] * Dl[-m];
                        }
                    }
            });
        if (act)
            out[a * RS + (int64_t)(c0 + cc) * g.S + s] += acc;
    }
}

/* ---- frame_atom, register-blocked (l_max <= FA_LT) ---------------------------------------------
 * The same sums as frame_atom_k, in the same order, with fewer instructions
 * per byte: ncu found frame_atom_k issue-bound (two shared loads and the
 * index arithmetic per FMA; the shared-memory scoreboard its largest stall).
 * A block takes one (atom, chunk of 32 rows); warp l keeps lane c's 2l+1
 * sums of row c0 + c, block l, in registers. Per edge a lane loads its 2ml+1
 * features once (staged as [slot][l][c], so the lanes read consecutive
 * words) and the D entries are warp-wide broadcasts: (2l+1)(2ml+1) FMAs for
 * 2ml+1 + (2l+1)(2ml+1) loads instead of two loads per FMA. The sin m = 0
 * slot, which no sum reads, is not staged (staged slot index slot - (slot > 0)). */
#define FA_LT 4

/* the stride of l in the staged [slot][l][c] tile: 32 lanes of a staging
 * warp (c = tid / (L+1), l = tid % (L+1)) land in distinct banks for L+1 in
 * 2, 4 */
__host__ __device__ static inline int fa_cw(int L1) { return L1 == 1 ? 32 : 32 + 32 / L1; }

/* warp l's sums over the tile's ne edges: acc[sp] += Σ_m x_cos[m]·D_l[sp][l+m]
 * + x_sin[m]·D_l[sp][l-m] (m <= ml; the sin term from m = 1), edge by edge */
template <typename T, int LL>
__device__ __forceinline__ void fa_edges(int ne, const T *sx, const T *sd, int PE, int SW, int ml,
                                         T *acc)
{
    constexpr int n = 2 * LL + 1;
    for (int k = 0; k < ne; k++) {
        const T *x = sx + k * PE, *Dl = sd + k * PE;
        T xc[LL + 1], xs[LL + 1];
#pragma unroll
        for (int m = 0; m <= LL; m++)
            if (m <= ml) { /* staged slot index: slot - (slot > 0) */
                xc[m] = x[(m ? 2 * m - 1 : 0) * SW];
                xs[m] = m ? x[(2 * m) * SW] : T(0);
            }
#pragma unroll
        for (int sp = 0; sp < n; sp++) {
            T a = acc[sp];
#pragma unroll
            for (int m = 0; m <= LL; m++)
                if (m <= ml) {
                    a += xc[m] * Dl[sp * n + LL + m];
                    if (m)
                        a += xs[m] * Dl[sp * n + LL - m];
                }
            acc[sp] = a;
        }
    }
}

template <typename T, int LT, int TE, bool AS>
__global__ void __launch_bounds__(32 * (LT + 1)) frame_atom_rb_k(
    int64_t N, Geo g, int nrows, const int32_t *ptr0, const int32_t *idx0, int b_off0,
    const int32_t *ptr1, const int32_t *idx1, int b_off1, const T *__restrict__ Xbar,
    const T *__restrict__ D, T *out)
{
    extern __shared__ __align__(16) unsigned char smraw[];
    __shared__ int32_t sI[2][TE]; /* this tile's edges and the next tile's */
    T *sm = (T *)smraw;
    constexpr int L1 = LT + 1, NT = 32 * L1;
    const int CW = fa_cw(L1), SW = L1 * CW, SL = 2 * g.Q, XW = (SL - 1) * SW, PE = XW + g.ND;
    const int RS = nrows * g.S, nch = (nrows + 31) / 32;
    const int64_t XE = (int64_t)SL * g.F;
    const int tid = threadIdx.x, l = tid >> 5, c = tid & 31, ml = l < g.M ? l : g.M;
    /* staging: thread tid copies feature tid of the chunk's run, to [l'][c'] */
    const int st_c = tid / L1, st_off = (tid - st_c * L1) * CW + st_c;
    for (int64_t it = blockIdx.x; it < N * nch; it += gridDim.x) {
        const int64_t a = it / nch;
        const int c0 = (int)(it - a * nch) * 32, ncc = nrows - c0 < 32 ? nrows - c0 : 32;
        const bool stager = tid < ncc * L1;
        T acc[2 * LT + 1];
#pragma unroll
        for (int sp = 0; sp < 2 * LT + 1; sp++)
            acc[sp] = T(0);
        int64_t f0 = 0;
        atom_edge_tiles<TE, AS>(
            a, ptr0, idx0, ptr1, idx1, sI,
            [&](int list) { f0 = (int64_t)((list ? b_off1 : b_off0) + c0) * L1 + tid; },
            [&](int k, int64_t e) {
                if (stager) {
                    const T *Xe = Xbar + e * XE + f0;
                    T *dst = sm + k * PE + st_off;
                    STAGE(AS, dst[0], Xe[0]);
                    for (int slot = 2; slot < SL; slot++)
                        STAGE(AS, dst[(slot - 1) * SW], Xe[(int64_t)slot * g.F]);
                }
                for (int i = tid; i < g.ND; i += NT)
                    STAGE(AS, sm[k * PE + XW + i], D[e * g.ND + i]);
            },
            [&](int ne) {
                const T *sx = sm + l * CW + c, *sd = sm + XW + dblock(l);
                switch (l) { /* warp-uniform */
                case 0: fa_edges<T, 0>(ne, sx, sd, PE, SW, ml, acc); break;
                case 1: fa_edges<T, (LT >= 1 ? 1 : 0)>(ne, sx, sd, PE, SW, ml, acc); break;
                case 2: fa_edges<T, (LT >= 2 ? 2 : 0)>(ne, sx, sd, PE, SW, ml, acc); break;
                case 3: fa_edges<T, (LT >= 3 ? 3 : 0)>(ne, sx, sd, PE, SW, ml, acc); break;
                default: fa_edges<T, (LT >= 4 ? 4 : 0)>(ne, sx, sd, PE, SW, ml, acc); break;
                }
            });
        if (c < ncc) {
            T *o = out + a * RS + (int64_t)(c0 + c) * g.S + l * l;
#pragma unroll
            for (int sp = 0; sp < 2 * LT + 1; sp++)
                if (sp <= 2 * l)
                    o[sp] += acc[sp];
        }
    }
}

/* ---- the per-edge D̄ sum, shared by frame_dbar_k and pu_vjp_k -------------------------------------
 * Staged layout: rows sR[b][s] at stride S+1, features sX[slot][f] at stride
 * F+1 (the lanes of a D̄ sum read 2l+1 different slots at one feature, which
 * at stride F, a multiple of 32, all fell in one bank). */
template <bool AS, typename T>
__device__ static inline void stage_slots(const Geo &g, const T *Xe, T *sX)
{
    /* slot by slot: no division per element (these kernels are bound by the
     * instructions they issue, ncu) */
    for (int slot = 0; slot < 2 * g.Q; slot++)
        for (int f = threadIdx.x; f < g.F; f += blockDim.x)
            STAGE(AS, sX[slot * (g.F + 1) + f], Xe[slot * g.F + f]);
}

/* Stage an edge's B rows of S into sR at row stride S + 1; row b of edge e
 * starts at base + (b < C ? lo : hi) + b·S (row_offsets). A thread walks its
 * (b, s) positions in steps of blockDim.x without a division per element. */
template <bool AS, typename T>
__device__ static inline void stage_rows(const Geo &g, const T *base, int64_t lo, int64_t hi, T *sR)
{
    const int S = g.S, S1 = S + 1, db = blockDim.x / S, ds = blockDim.x - db * S;
    int b = threadIdx.x / S, sidx = threadIdx.x - b * S;
    while (b < g.B) {
        STAGE(AS, sR[b * S1 + sidx], base[(b < g.C ? lo : hi) + (int64_t)b * S + sidx]);
        b += db;
        sidx += ds;
        if (sidx >= S) {
            sidx -= S;
            b++;
        }
    }
}

/* Dbar_e[l][s][k] += Σ_b sR[b][l²+s]·sX[slot(k)][b(L+1)+l] */
template <typename T>
__device__ static inline void dbar_edge(const Geo &g, const T *sR, const T *sX, T *Dbar_e)
{
    const int L1 = g.L + 1, S1 = g.S + 1, F1 = g.F + 1;
    for (int q = threadIdx.x; q < g.ND; q += blockDim.x) {
        int l = 0;
        while (dblock(l + 1) <= q)
            l++;
        const int n = 2 * l + 1, r = q - dblock(l), s = r / n, k = r % n;
        const int ml = l < g.M ? l : g.M;
        const int m = k >= l ? k - l : l - k, slot = k >= l ? 2 * m : 2 * m + 1;
        if (m > ml)
            continue;
        const T *xs = sX + slot * F1 + l;
        T acc = 0;
        for (int b = 0; b < g.B; b++)
            acc += sR[b * S1 + l * l + s] * xs[b * L1];
        Dbar_e[q] += acc;
    }
}

/* shared memory of frame_dbar_k (without D) and pu_vjp_k (with D), elements */
static inline size_t dbar_smem_elems(const Geo &g, bool with_d)
{
    return (size_t)g.B * (g.S + 1) + (size_t)g.Q * 2 * (g.F + 1) + (with_d ? g.ND : 0);
}

/* ---- frame_dbar: Dbar[e][l][s][k] += Σ_b rows[b][l²+s]·Xs[e][slot(k)][b(L+1)+l] ----------------- */
template <typename T, bool AS>
__global__ void frame_dbar_k(int64_t E, Geo g, Rows<T> rows, const T *Xs, T *Dbar)
{
    extern __shared__ unsigned char smraw[];
    const int XE = g.Q * 2 * g.F, S1 = g.S + 1;
    T *sR = (T *)smraw, *sX = sR + g.B * S1;
    for (int64_t e = blockIdx.x; e < E; e += gridDim.x) {
        int64_t lo, hi;
        row_offsets(rows, e, g.C, g.S, &lo, &hi);
        stage_rows<AS>(g, rows.base, lo, hi, sR);
        stage_slots<AS>(g, Xs + e * XE, sX);
        stage_wait<AS>();
        __syncthreads();
        dbar_edge(g, sR, sX, Dbar + e * g.ND);
        __syncthreads();
    }
}

/* pack-unrotate VJP in one pass per edge: X̄[e] += select(ḡ_e·D_e) on the valid
 * slots and D̄_e += ḡ_eᵀ·select⁻¹(X[e]); ḡ_e, X[e] and D_e staged once */
template <typename T, bool AS>
__global__ void pu_vjp_k(int64_t E, Geo g, const T *X, const T *D, const T *Gb, T *Xb, T *Dbar)
{
    extern __shared__ __align__(16) unsigned char smraw[];
    const int XE = g.Q * 2 * g.F, BS = g.B * g.S, L1 = g.L + 1, S1 = g.S + 1, F1 = g.F + 1;
    T *sR = (T *)smraw, *sX = sR + g.B * S1, *sD = sX + 2 * g.Q * F1;
    for (int64_t e = blockIdx.x; e < E; e += gridDim.x) {
        stage_rows<AS>(g, Gb, e * BS, e * BS, sR);
        stage_slots<AS>(g, X + e * XE, sX);
        for (int q = threadIdx.x; q < g.ND; q += blockDim.x)
            STAGE(AS, sD[q], D[e * g.ND + q]);
        stage_wait<AS>();
        __syncthreads();
        T *Xe = Xb + e * XE;
        /* item q = (l, b), b fastest: l is the same across a warp when B is a
         * multiple of 32 (the loops' trip counts grow with l; lanes of mixed
         * l, as with f = threadIdx.x, ran all at the cost of the largest) */
        for (int q = threadIdx.x; q < g.F; q += blockDim.x) {
            const int l = q / g.B, b = q - l * g.B, f = b * L1 + l;
            const int n = 2 * l + 1, ml = l < g.M ? l : g.M;
            const T *a = sR + b * S1 + l * l, *Dl = sD + dblock(l);
            for (int m = 0; m <= ml; m++) {
                T acc = 0;
                for (int s = 0; s < n; s++)
                    acc += a[s] * Dl[s * n + l + m];
                Xe[(2 * m) * g.F + f] += acc;
                if (m) {
                    acc = 0;
                    for (int s = 0; s < n; s++)
                        acc += a[s] * Dl[s * n + l - m];
                    Xe[(2 * m + 1) * g.F + f] += acc;
                }
            }
        }
        dbar_edge(g, sR, sX, Dbar + e * g.ND);
        __syncthreads();
    }
}

template <typename T>
void launch_frame_dbar(int64_t E, const Geo &g, const Rows<T> &rows, const T *Xs, T *Dbar)
{
    if (E <= 0)
        return;
    const size_t sm = dbar_smem_elems(g, false) * sizeof(T);
    auto K = frame_async() ? frame_dbar_k<T, true> : frame_dbar_k<T, false>;
    if (!smem_ready(K, sm, "edge frame VJP (frame_dbar_k)"))
        return;
    K<<<grid_items(E), 128, sm>>>(E, g, rows, Xs, Dbar);
    CU_LAUNCHED();
}

/* frame_atom_rb_k: one block of 32·(L+1) threads per (atom, 32 rows) */
template <typename T, int LT, int TE>
static void launch_frame_atom_rb(int64_t N, const Geo &g, int nrows, const ecenet_csr *l0,
                                 int off0, const ecenet_csr *l1, int off1, const T *Xbar,
                                 const T *D, T *out)
{
    static_assert(FA_LT == 4, "launch_frame_atom's cases cover l_max 0..FA_LT");
    const int L1 = LT + 1, nch = (nrows + 31) / 32;
    const size_t sm = ((size_t)(2 * g.Q - 1) * L1 * fa_cw(L1) + g.ND) * sizeof(T) * TE;
    auto K = frame_async() ? frame_atom_rb_k<T, LT, TE, true> : frame_atom_rb_k<T, LT, TE, false>;
    if (!smem_ready(K, sm, "edge frame VJP (frame_atom_rb_k)"))
        return;
    K<<<grid_items(N * nch), 32 * L1, sm>>>(N, g, nrows, l0->ptr, l0->idx, off0,
                                            l1 ? l1->ptr : NULL, l1 ? l1->idx : NULL, off1, Xbar,
                                            D, out);
    CU_LAUNCHED();
    far_launches++;
}

template <typename T>
void launch_frame_atom(int64_t N, const Geo &g, int nrows, const ecenet_csr *l0, int off0,
                       const ecenet_csr *l1, int off1, const T *Xbar, const T *D, T *out)
{
    if (N <= 0)
        return;
    /* a chunk of nc rows per block, nc·S threads of at most 256 (rounded up to
     * whole warps); TE edges per tile: about 20 KB of shared memory here */
    if (g.S > 256) {
        fail(-2, "edge frame VJP: l_max above 15 is not supported by the cuda backend", __FILE__,
             __LINE__);
        return;
    }
    constexpr int TE = sizeof(T) == 4 ? 8 : 4;
    if (g.L <= FA_LT && frame_atom_rb()) {
        switch (g.L) {
        case 0: launch_frame_atom_rb<T, 0, TE>(N, g, nrows, l0, off0, l1, off1, Xbar, D, out); break;
        case 1: launch_frame_atom_rb<T, 1, TE>(N, g, nrows, l0, off0, l1, off1, Xbar, D, out); break;
        case 2: launch_frame_atom_rb<T, 2, TE>(N, g, nrows, l0, off0, l1, off1, Xbar, D, out); break;
        case 3: launch_frame_atom_rb<T, 3, TE>(N, g, nrows, l0, off0, l1, off1, Xbar, D, out); break;
        default: launch_frame_atom_rb<T, 4, TE>(N, g, nrows, l0, off0, l1, off1, Xbar, D, out); break;
        }
        return;
    }
    int nc = 256 / g.S;
    nc = nc > nrows ? nrows : nc;
    const int th = (nc * g.S + 31) / 32 * 32, nch = (nrows + nc - 1) / nc;
    const size_t sm = ((size_t)2 * g.Q * nc * (g.L + 1) + g.ND) * sizeof(T) * TE;
    auto K = frame_async() ? frame_atom_k<T, TE, true> : frame_atom_k<T, TE, false>;
    if (!smem_ready(K, sm, "edge frame VJP (frame_atom_k)"))
        return;
    K<<<grid_items(N * nch), th, sm>>>(N, g, nrows, nc, l0->ptr, l0->idx, off0,
                                       l1 ? l1->ptr : NULL, l1 ? l1->idx : NULL, off1, Xbar, D,
                                       out);
    CU_LAUNCHED();
}

/* ---- edge frame ------------------------------------------------------------------------------ */

template <typename T>
static void edge_frame_fwd(const ecenet_dims *dm, ecenet_idx edge_i, ecenet_idx edge_j,
                           const void *A_emb, const void *D, void *X)
{
    state();
    Rows<T> rows = {(const T *)A_emb, edge_i, edge_j, ROWS_EDGE_FRAME};
    launch_frame_in<T, false>(dm->E, geo(dm), rows, (const T *)D, (T *)X);
}

template <typename T>
static void edge_frame_vjp(const ecenet_dims *dm, ecenet_idx edge_i, ecenet_idx edge_j,
                           const void *A_emb, const void *D, const void *Xbar, void *A_emb_bar,
                           void *Dbar)
{
    state();
    if (dm->E <= 0)
        return;
    const Geo g = geo(dm);
    Rows<T> rows = {(const T *)A_emb, edge_i, edge_j, ROWS_EDGE_FRAME};
    launch_frame_dbar<T>(dm->E, g, rows, (const T *)Xbar, (T *)Dbar);
    launch_frame_atom<T>(dm->N, g, g.C, &dm->e_src, 0, &dm->e_dst, g.C, (const T *)Xbar,
                         (const T *)D, (T *)A_emb_bar);
}

/* ---- distance embedding ---------------------------------------------------------------------------- */

template <typename T>
__global__ void dist_embed_fwd_k(int64_t E, int F, int QP, int K, const T *fr, const T *V,
                                 const T *X, T *Y)
{
    const int64_t q = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (q >= E * F)
        return;
    const int64_t e = q / F;
    const int f = (int)(q % F);
    T sig = 0;
    for (int n = 0; n < K; n++)
        sig += fr[e * K + n] * V[(int64_t)n * F + f];
    const T fac = (T)1 + sig;
    for (int p = 0; p < QP; p++)
        Y[(e * QP + p) * F + f] = X[(e * QP + p) * F + f] * fac;
}

template <typename T>
static void dist_embed_fwd(const ecenet_dims *dm, int K, const void *fr, const void *V,
                           const void *X, void *Y)
{
    state();
    const int64_t n = dm->E * dm->F;
    if (n <= 0)
        return;
    dist_embed_fwd_k<T><<<blocks_for(n, 256), 256>>>(dm->E, dm->F, 2 * dm->Q, K, (const T *)fr,
                                                     (const T *)V, (const T *)X, (T *)Y);
    CU_LAUNCHED();
}

template <typename T>
__global__ void dist_embed_vjp_k(int64_t E, int F, int QP, int K, const T *fr, const T *V,
                                 const T *X, const T *Yb, T *Xb, T *frb)
{
    extern __shared__ unsigned char smraw[];
    T *sb = (T *)smraw;
    for (int64_t e = blockIdx.x; e < E; e += gridDim.x) {
        for (int f = threadIdx.x; f < F; f += blockDim.x) {
            T sig = 0, acc = 0;
            for (int n = 0; n < K; n++)
                sig += fr[e * K + n] * V[(int64_t)n * F + f];
            const T fac = (T)1 + sig;
            for (int p = 0; p < QP; p++) {
                const int64_t k = (e * QP + p) * F + f;
                Xb[k] += Yb[k] * fac;
                acc += Yb[k] * X[k];
            }
            sb[f] = acc;
        }
        __syncthreads();
        for (int n = threadIdx.x; n < K; n += blockDim.x) {
            T acc = 0;
            for (int f = 0; f < F; f++)
                acc += sb[f] * V[(int64_t)n * F + f];
            frb[e * K + n] += acc;
        }
        __syncthreads();
    }
}

template <typename T>
static void dist_embed_vjp(const ecenet_dims *dm, int K, const void *fr, const void *V,
                           const void *X, const void *Ybar, void *Xbar, void *frbar)
{
    state();
    if (dm->E <= 0)
        return;
    const size_t sm = (size_t)dm->F * sizeof(T);
    smem_allow(dist_embed_vjp_k<T>, sm);
    dist_embed_vjp_k<T><<<grid_items(dm->E), 128, sm>>>(
        dm->E, dm->F, 2 * dm->Q, K, (const T *)fr, (const T *)V, (const T *)X,
        (const T *)Ybar, (T *)Xbar, (T *)frbar);
    CU_LAUNCHED();
}

/* ---- launchers for message passing (cuda_mp.cu) --------------------------------------------------- */

template <typename T>
void launch_frame_out(int64_t E, const Geo &g, const T *X, const T *D, T *G, T *Xs)
{
    if (E <= 0)
        return;
    const size_t sm = ((size_t)g.Q * 2 * g.F + g.ND) * sizeof(T);
    const int th = g.S <= 256 ? 256 / g.S * g.S : g.S; /* a multiple of S */
    if (th > 1024) {
        fail(-2, "message passing: l_max above 31 is not supported by the cuda backend", __FILE__,
             __LINE__);
        return;
    }
    auto K = frame_async() ? frame_out_k<T, true> : frame_out_k<T, false>;
    if (!smem_ready(K, sm, "message-passing pack-unrotate (frame_out_k)"))
        return;
    K<<<grid_items(E), th, sm>>>(E, g, X, D, G, Xs);
    CU_LAUNCHED();
}

template <typename T>
void launch_pu_vjp(int64_t E, const Geo &g, const T *X, const T *D, const T *Gb, T *Xb, T *Dbar)
{
    if (E <= 0)
        return;
    const size_t sm = dbar_smem_elems(g, true) * sizeof(T);
    auto K = frame_async() ? pu_vjp_k<T, true> : pu_vjp_k<T, false>;
    if (!smem_ready(K, sm, "message-passing pack-unrotate VJP (pu_vjp_k)"))
        return;
    K<<<grid_items(E), 256, sm>>>(E, g, X, D, Gb, Xb, Dbar);
    CU_LAUNCHED();
}

#define ECN_FRAME_LAUNCHERS(T)                                                                     \
    template void launch_frame_in<T, false>(int64_t, const Geo &, const Rows<T> &, const T *,     \
                                            T *);                                                  \
    template void launch_frame_in<T, true>(int64_t, const Geo &, const Rows<T> &, const T *, T *); \
    template void launch_frame_out<T>(int64_t, const Geo &, const T *, const T *, T *, T *);       \
    template void launch_frame_dbar<T>(int64_t, const Geo &, const Rows<T> &, const T *, T *);     \
    template void launch_frame_atom<T>(int64_t, const Geo &, int, const ecenet_csr *, int,         \
                                       const ecenet_csr *, int, const T *, const T *, T *);        \
    template void launch_pu_vjp<T>(int64_t, const Geo &, const T *, const T *, const T *, T *, T *)
ECN_FRAME_LAUNCHERS(float);
ECN_FRAME_LAUNCHERS(double);
#undef ECN_FRAME_LAUNCHERS

template <typename T> void fill_frame(ecenet_backend &b)
{
    b.edge_frame_fwd = edge_frame_fwd<T>;
    b.edge_frame_vjp = edge_frame_vjp<T>;
    b.dist_embed_fwd = dist_embed_fwd<T>;
    b.dist_embed_vjp = dist_embed_vjp<T>;
}

template void fill_frame<float>(ecenet_backend &);
template void fill_frame<double>(ecenet_backend &);

} // namespace ecn_cu

extern "C" int ecn_cuda_set_frame_async(int on)
{
    return ecn_cu::fa_switch.get().exchange(on != 0);
}

extern "C" unsigned long long ecn_cuda_frame_async_launches(void) { return ecn_cu::fa_launches.load(); }

extern "C" int ecn_cuda_set_frame_atom_rb(int on) { return ecn_cu::far_switch.get().exchange(on != 0); }

extern "C" unsigned long long ecn_cuda_frame_atom_rb_launches(void)
{
    return ecn_cu::far_launches.load();
}
