/* Tensor-core kernels of the equivariant layer (SPEC §10-§12), opt-in
 * (ECENET_LAYER_TC, cuda_backend.h; measured slower than cuBLAS + the
 * RealSpace kernel on the H200 and H100, doc/performance.md).
 *
 * layer_tc_fwd_k: Z = Linear(X), X += RealSpace(Z) in one kernel, so a
 * layer reads X once and writes Z and X once (the cuBLAS path reads X,
 * writes Z, then reads Z and X again and writes X). A block computes a
 * 64-edge × 64-feature tile of Z for all 2Q = 8 (m, part) slots: eight GEMM
 * tiles over K = F on mma.m16n8k8, the two parts of one m sharing W_m's
 * tile. The accumulators go through shared memory (the pipeline's, free by
 * then) so that the epilogue (bias, store Z, the RealSpace grid, residual
 * add into X) reads and writes 16-byte vectors of consecutive features.
 *
 * In place: X is the GEMM input of every feature tile of its rows and the
 * residual output. The F/64 blocks of one row tile form a thread-block
 * cluster (sm_90) and meet at a cluster barrier after their K loops, so no
 * block writes X before all of them have read it; each block then reads
 * and writes only its own feature tile of X.
 *
 * lin_tc_vjp_k: Xbar += Ybar·W_m for every slot (the linear VJP), the same
 * main loop with W's tile transposed; each block owns its output tile.
 *
 * Precision: SPLIT = 1 is TF32 (inputs rounded to nearest, fp32
 * accumulate), the ECENET_OPT_TF32 mode; SPLIT = 3 is the split-TF32
 * scheme (x = hi + lo, both TF32; lo·hi + hi·lo + hi·hi) at three times
 * the MMA work: near fp32 (layer op 1.8e-6 rel L2 vs 2.8e-7 for SGEMM;
 * the dropped lo·lo and the MMA's internal accumulation), within the strict
 * fp32 test bounds but not as accurate as SGEMM (doc/performance.md).
 *
 * The sin m = 0 slot, zero in every model, is skipped per warp and K tile
 * when its inputs are all zero; any nonzero value is multiplied, so the
 * result is always the exact product.
 *
 * Forward used when: fp32, Q = 4, fin = fout = F with F % 64 == 0 and
 * F <= 512 (cluster <= 8), no per-edge-type weights or affine, 16-byte
 * aligned tensors, a GPU with thread-block clusters; VJP when Q = 4,
 * fin % 64 == 0, fout % 16 == 0 (split TF32 only). Otherwise the callers
 * take the cuBLAS path.
 *
 * layer_wg_fwd_k (mode 3): the same forward with a wgmma main loop (sm_90a,
 * TF32, sin0_zero layers), below. Both fused forwards are bound by the
 * L2 traffic of their tiles (each 64-edge tile re-reads the four W_m
 * tiles, each 64-feature tile re-reads X): ≈ 2 GB per layer at the bench
 * shape against ≈ 1 GB for the cuBLAS GEMMs (doc/performance.md). */
#include <atomic>
#include <cooperative_groups.h>
#include <limits.h>
#include <mutex>
#include <stdlib.h>
#include "cuda_backend.h"
#include "cuda_common.cuh"
#include "cuda_ops.cuh"
#include "cuda_realspace.cuh"

namespace cgr = cooperative_groups;

namespace ecn_cu {

constexpr int TC_Q = 4, TC_S = 2 * TC_Q;     /* angular slots m, (m, part) slots */
constexpr int TC_BM = 64, TC_BN = 64;        /* edges, features per block */
constexpr int TC_BK = 16;                    /* K step */
constexpr int TC_NST = 3;                    /* cp.async pipeline stages */
constexpr int TC_THREADS = 256;
constexpr int TC_GMAX = 32;                  /* largest RealSpace grid */
constexpr int TC_A = TC_S * TC_BM * TC_BK;   /* X tile: [slot][edge][k], k permuted (below) */
constexpr int TC_LDV = TC_BN + 4;            /* VJP W tile row: [m][k][feature], padded */
constexpr int TC_B = TC_Q * TC_BK * TC_LDV;  /* W tile; forward [m][feature][k] needs less */
static_assert(TC_Q * TC_BN * TC_BK <= TC_B, "forward W tile fits the stage");
static_assert(TC_THREADS == 256 && TC_BM == 64 && TC_BN == 64 && TC_BK == 16,
              "tc_load's thread-to-chunk map assumes these");
constexpr int TC_STAGE = TC_A + TC_B;
constexpr int TC_LDO = TC_BN + 4;            /* output tile row: [slot][edge][feature] */
static_assert(TC_S * TC_BM * TC_LDO <= TC_NST * TC_STAGE, "output tile fits the pipeline");
constexpr size_t TC_SMEM = (size_t)(TC_NST * TC_STAGE + 4 * TC_Q * TC_GMAX) * sizeof(float);

struct TcArgs {
    const float *w, *bias;   /* (Q, F, F) [m][o][i]; (F) or NULL */
    RS<float> rs;            /* tables, act, per-feature scale/shift (no types) */
};

__device__ static inline void cp16(float *dst, const float *src, bool valid)
{
    const unsigned s = (unsigned)__cvta_generic_to_shared(dst);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(s), "l"(src),
                 "r"(valid ? 16 : 0));
}
__device__ static inline void cp_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N> __device__ static inline void cp_wait()
{
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

__device__ static inline uint32_t to_tf32(float x)
{
    uint32_t r;
    asm("cvt.rna.tf32.f32 %0, %1;\n" : "=r"(r) : "f"(x));
    return r;
}
/* x = hi (+ lo for the split scheme) */
template <int SPLIT> __device__ static inline void split(float x, uint32_t &hi, uint32_t &lo)
{
    hi = to_tf32(x);
    lo = SPLIT == 3 ? to_tf32(x - __uint_as_float(hi)) : 0u;
}

/* d += a·b, m16n8k8, TF32 inputs, fp32 accumulate */
__device__ static inline void mma(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2])
{
    asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, "
                 "{%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

/* a thread's place in the block tile: mma fragment row group g and column t,
 * its warp's first edge wr (16 edges) and feature wc (32 features) */
struct TcLane {
    int g, t, wr, wc;
};
__device__ static inline TcLane tc_lane()
{
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    return TcLane{lane >> 2, lane & 3, (warp & 3) * 16, (warp >> 2) * 32};
}

/* Per-thread sources of the K tiles (fixed over the K loop). A (the 8 slots
 * of the block's 64 edges; row stride 2·Q·K): thread → edge tid/4, 16-byte
 * chunk tid%4, all 8 slots. W, forward (Y = X·W_mᵀ, W[m][n][k]): thread →
 * output n0 + tid/4, chunk tid%4, all 4 m. W, VJP (Xbar += Ybar·W_m,
 * W[m][k][n]): thread → k row tid/16, chunk tid%16, all 4 m. Edges past E
 * read nothing and fill zeros. */
struct TcSrc {
    const float *a, *w;
    bool a_ok;
};
template <bool VJP>
__device__ static inline TcSrc tc_src(const float *A, const float *W, int64_t E, int K, int N,
                                      int64_t e0, int n0)
{
    const int tid = threadIdx.x;
    TcSrc p;
    const int64_t e = e0 + tid / 4;
    p.a_ok = e < E;
    p.a = A + (p.a_ok ? e : 0) * (2LL * TC_Q * K) + 4 * (tid % 4);
    p.w = VJP ? W + (int64_t)(tid / 16) * N + n0 + 4 * (tid % 16)
              : W + (int64_t)(n0 + tid / 4) * K + 4 * (tid % 4);
    return p;
}
/* The K tile k0..k0+15 into shared memory, asynchronously: A as
 * [slot][edge][16], W as [m][n][16] (forward) or [m][k][TC_LDV] (VJP) */
template <bool VJP>
__device__ static inline void tc_load(float *st, const TcSrc &p, int K, int N, int k0)
{
    const int tid = threadIdx.x;
    float *As = st, *Bs = st + TC_A;
#pragma unroll
    for (int s = 0; s < TC_S; s++)
        cp16(As + (s * TC_BM + tid / 4) * TC_BK + 4 * (tid % 4), p.a + s * K + k0, p.a_ok);
#pragma unroll
    for (int m = 0; m < TC_Q; m++)
        if (VJP)
            cp16(Bs + (m * TC_BK + tid / 16) * TC_LDV + 4 * (tid % 16),
                 p.w + ((int64_t)m * K + k0) * N, true);
        else
            cp16(Bs + (m * TC_BN + tid / 4) * TC_BK + 4 * (tid % 4),
                 p.w + (int64_t)m * N * K + k0, true);
}

/* acc[s][j] = the warp's 16 edges × 8 outputs (column tile j) of slot s:
 * Σ_k A[e][s][k]·B_m[k][n], m = s/2, over k = 0..K-1; a TC_NST-stage
 * cp.async pipeline.
 *
 * k order: the sum over a 16-wide K tile is taken in a permuted order so
 * that each thread's fragments are one 16-byte shared-memory load: in
 * k step q (0, 1) the MMA's k index t (thread column) reads tile column
 * 4t + 2q and its index t + 4 column 4t + 2q + 1, for A and W alike, so a
 * thread's 4 consecutive columns 4t..4t+3 serve both k steps.
 *
 * The sin m = 0 slot (s = 1), zero in every model, is skipped per warp and
 * K tile when the warp's 16 × 16 inputs are all zero (exact: those products
 * are zero). */
template <int SPLIT, bool VJP>
__device__ static inline void tc_mainloop(float *sm, const float *A, const float *W, int64_t E,
                                          int K, int N, int64_t e0, int n0,
                                          float (&acc)[TC_S][4][4])
{
    const TcLane L = tc_lane();
    const int g = L.g, t = L.t, wr = L.wr, wc = L.wc;
#pragma unroll
    for (int s = 0; s < TC_S; s++)
#pragma unroll
        for (int j = 0; j < 4; j++)
#pragma unroll
            for (int r = 0; r < 4; r++)
                acc[s][j][r] = 0.0f;
    const TcSrc src = tc_src<VJP>(A, W, E, K, N, e0, n0);
    const int KT = K / TC_BK; /* >= 1; past the end the prologue commits empty groups */
#pragma unroll
    for (int st = 0; st < TC_NST - 1; st++) {
        if (st < KT)
            tc_load<VJP>(sm + st * TC_STAGE, src, K, N, st * TC_BK);
        cp_commit();
    }
    for (int kt = 0; kt < KT; kt++) {
        cp_wait<TC_NST - 2>();
        __syncthreads(); /* tile kt landed; everyone is done with tile kt-1's buffer */
        if (kt + TC_NST - 1 < KT)
            tc_load<VJP>(sm + ((kt + TC_NST - 1) % TC_NST) * TC_STAGE, src, K, N,
                         (kt + TC_NST - 1) * TC_BK);
        cp_commit(); /* (empty near the end: keeps the group count) */
        const float *As = sm + (kt % TC_NST) * TC_STAGE, *Bs = As + TC_A;
#pragma unroll
        for (int m = 0; m < TC_Q; m++) {
            /* W fragments of both k steps: b[q][j] = {B[4t+2q][n], B[4t+2q+1][n]} */
            uint32_t bh[2][4][2], bl[2][4][2];
#pragma unroll
            for (int j = 0; j < 4; j++) {
                const int n = wc + 8 * j + g;
                float b[4];
                if (VJP) {
                    const float *bp = Bs + (m * TC_BK + 4 * t) * TC_LDV + n;
#pragma unroll
                    for (int c = 0; c < 4; c++)
                        b[c] = bp[c * TC_LDV];
                } else {
                    const float4 v =
                        *reinterpret_cast<const float4 *>(Bs + (m * TC_BN + n) * TC_BK + 4 * t);
                    b[0] = v.x;
                    b[1] = v.y;
                    b[2] = v.z;
                    b[3] = v.w;
                }
#pragma unroll
                for (int q = 0; q < 2; q++) {
                    split<SPLIT>(b[2 * q], bh[q][j][0], bl[q][j][0]);
                    split<SPLIT>(b[2 * q + 1], bh[q][j][1], bl[q][j][1]);
                }
            }
#pragma unroll
            for (int part = 0; part < 2; part++) {
                const int s = 2 * m + part;
                /* rows g and g + 8, columns 4t..4t+3: a0/a2 (row g) and a1/a3 (row g+8) of both k steps */
                const float *ap = As + (s * TC_BM + wr + g) * TC_BK + 4 * t;
                const float4 lo = *reinterpret_cast<const float4 *>(ap);
                const float4 hi = *reinterpret_cast<const float4 *>(ap + 8 * TC_BK);
                if (s == 1 &&
                    !__any_sync(0xffffffffu, (lo.x != 0.0f) | (lo.y != 0.0f) | (lo.z != 0.0f) |
                                                 (lo.w != 0.0f) | (hi.x != 0.0f) | (hi.y != 0.0f) |
                                                 (hi.z != 0.0f) | (hi.w != 0.0f)))
                    continue;
                const float av[2][4] = {{lo.x, hi.x, lo.y, hi.y}, {lo.z, hi.z, lo.w, hi.w}};
#pragma unroll
                for (int q = 0; q < 2; q++) {
                    uint32_t ah[4], al[4];
#pragma unroll
                    for (int c = 0; c < 4; c++)
                        split<SPLIT>(av[q][c], ah[c], al[c]);
#pragma unroll
                    for (int j = 0; j < 4; j++) {
                        if (SPLIT == 3) { /* small terms first */
                            mma(acc[s][j], al, bh[q][j]);
                            mma(acc[s][j], ah, bl[q][j]);
                        }
                        mma(acc[s][j], ah, bh[q][j]);
                    }
                }
            }
        }
    }
    cp_wait<0>();
    __syncthreads(); /* the pipeline's shared memory is free for the output tile */
}

/* the accumulators into shared memory as the output tile [slot][edge][feature] */
__device__ static inline void tc_stage_out(float *O, const float (&acc)[TC_S][4][4])
{
    const TcLane L = tc_lane();
    const int g = L.g, t = L.t, wr = L.wr, wc = L.wc;
#pragma unroll
    for (int s = 0; s < TC_S; s++)
#pragma unroll
        for (int j = 0; j < 4; j++)
#pragma unroll
            for (int h = 0; h < 2; h++)
                *reinterpret_cast<float2 *>(O + (s * TC_BM + wr + g + 8 * h) * TC_LDO + wc +
                                            8 * j + 2 * t) =
                    make_float2(acc[s][j][2 * h], acc[s][j][2 * h + 1]);
}

__device__ static inline float4 ld4(const float *p) { return *reinterpret_cast<const float4 *>(p); }
__device__ static inline void st4(float *p, float4 v) { __stwb(reinterpret_cast<float4 *>(p), v); }
__device__ static inline float4 add4(float4 a, float4 b)
{
    return make_float4(a.x + b.x, a.y + b.y, a.z + b.z, a.w + b.w);
}

/* The fused layer's epilogue for 4 consecutive features f..f+3 of one edge
 * (16-byte accesses at ze, xe: Z's and X's row at f), given their linear
 * outputs zc, zs (cos, sin slots of each m): Z = them (+ bias), store Z,
 * X += RealSpace(Z) with the operations of the RealSpace kernels. Z0 (a
 * sin0_zero layer, the slot's GEMM not run, zs[0] zero): Z's sin m = 0
 * slot is written zero and X's left alone, as rs_layer_fwd_vk does; SYM:
 * the folded grid of a grid_sym layer. */
template <bool SILU, bool Z0, bool SYM>
__device__ static inline void tc_epi4(const float *tab, const TcArgs &a, int F, int f, float *ze,
                                      float *xe, float (&zc)[TC_Q][4], float (&zs)[TC_Q][4])
{
    float4 x[TC_S];
#pragma unroll
    for (int s = 0; s < TC_S; s++)
        x[s] = Z0 && s == 1 ? make_float4(0.0f, 0.0f, 0.0f, 0.0f) : ld4(xe + s * F);
    float yc[TC_Q][4], ys[TC_Q][4], scale[4], shift[4];
#pragma unroll
    for (int v = 0; v < 4; v++) {
        if (a.bias)
            zc[0][v] += a.bias[f + v];
        scale[v] = a.rs.scale ? a.rs.scale[f + v] : 1.0f;
        shift[v] = a.rs.shift ? a.rs.shift[f + v] : 0.0f;
#pragma unroll
        for (int m = 0; m < TC_Q; m++)
            yc[m][v] = ys[m][v] = 0.0f;
    }
#pragma unroll
    for (int m = 0; m < TC_Q; m++) {
        st4(ze + (2 * m) * F, make_float4(zc[m][0], zc[m][1], zc[m][2], zc[m][3]));
        st4(ze + (2 * m + 1) * F, make_float4(zs[m][0], zs[m][1], zs[m][2], zs[m][3]));
    }
    if (SYM)
        rs_grid_sym_v<float, TC_Q, 4, 4, SILU, Z0>(tab, a.rs.G, a.rs.act, 0, zc, zs, scale, shift,
                                                   yc, ys);
    else
        rs_grid_v<float, TC_Q, 4, 4, SILU, Z0>(tab, a.rs.G, a.rs.act, 0, zc, zs, scale, shift, yc,
                                               ys);
#pragma unroll
    for (int m = 0; m < TC_Q; m++) {
        st4(xe + (2 * m) * F, add4(x[2 * m], make_float4(yc[m][0], yc[m][1], yc[m][2], yc[m][3])));
        if (!Z0 || m)
            st4(xe + (2 * m + 1) * F,
                add4(x[2 * m + 1], make_float4(ys[m][0], ys[m][1], ys[m][2], ys[m][3])));
    }
}

/* x, y, z, w of a float4 into v[0..3] */
__device__ static inline void unpack4(float4 q, float (&v)[4])
{
    v[0] = q.x;
    v[1] = q.y;
    v[2] = q.z;
    v[3] = q.w;
}

/* tc_epi4 over a block's 64 edges × 64 features, 4 consecutive features per
 * thread and step (consecutive threads on consecutive features), from the
 * output tile O ([slot][edge][feature], TC_LDO) */
template <bool SILU, bool Z0, bool SYM>
__device__ static inline void tc_epilogue(const float *O, const float *tab, const TcArgs &a,
                                          int64_t E, int F, int64_t e0, int n0, float *X, float *Z)
{
    const int64_t rstride = 2LL * TC_Q * F;
    for (int i = threadIdx.x; i < TC_BM * (TC_BN / 4); i += TC_THREADS) {
        const int r = i / (TC_BN / 4), c = 4 * (i % (TC_BN / 4));
        const int64_t e = e0 + r;
        if (e >= E)
            break; /* rows only grow with i */
        float zc[TC_Q][4], zs[TC_Q][4];
#pragma unroll
        for (int m = 0; m < TC_Q; m++) {
            unpack4(ld4(O + ((2 * m) * TC_BM + r) * TC_LDO + c), zc[m]);
            unpack4(Z0 && m == 0 ? make_float4(0.0f, 0.0f, 0.0f, 0.0f)
                                 : ld4(O + ((2 * m + 1) * TC_BM + r) * TC_LDO + c),
                    zs[m]);
        }
        tc_epi4<SILU, Z0, SYM>(tab, a, F, n0 + c, Z + e * rstride + n0 + c,
                               X + e * rstride + n0 + c, zc, zs);
    }
}

template <int SPLIT, bool SILU>
__global__ void __launch_bounds__(TC_THREADS, 1)
    layer_tc_fwd_k(int64_t E, int F, TcArgs a, float *X, float *Z)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    extern __shared__ __align__(16) float sm[];
    float *tab = sm + TC_NST * TC_STAGE;
    const int C = F / TC_BN;
    const int n0 = (blockIdx.x % C) * TC_BN;              /* this block's features */
    const int64_t e0 = (int64_t)(blockIdx.x / C) * TC_BM; /* the cluster's edges */
    float acc[TC_S][4][4];
    tc_mainloop<SPLIT, false>(sm, X, a.w, E, F, F, e0, n0, acc);
    tc_stage_out(sm, acc);
    /* RealSpace tables, then the barrier of the row tile's blocks: past it
     * every block of the cluster has read all of X's rows */
    rs_tables<float, TC_Q>(a.rs, tab);
    cgr::this_cluster().sync();
    tc_epilogue<SILU, false, false>(sm, tab, a, E, F, e0, n0, X, Z);
#else
    (void)E; (void)F; (void)a; (void)X; (void)Z;
    __trap(); /* the host launches it only on sm_90+ */
#endif
}

/* ---- the same layer on wgmma (sm_90a): TF32, sin0_zero layers -------------------------------------- */

/* Hopper's warpgroup MMA reads both operands from shared memory, so the K
 * loop issues one instruction per 64 × 64 × 8 product of a warpgroup
 * instead of mma.sync's 32 per warp plus their fragment loads and TF32
 * conversions (the hardware takes the top 19 bits of each fp32 operand, as
 * cuBLAS's TF32 GEMMs do). Same block tile and epilogue as layer_tc_fwd_k;
 * the sin m = 0 slot is neither loaded nor multiplied (sin0_zero layers
 * only: Z's slot is written zero, as the cuBLAS path's). Warpgroup g owns
 * features 32g..32g+31 of the tile in all seven slots (the same
 * instructions in both, which the compiler needs to keep the MMAs
 * asynchronous; a split by slots, 3 and 4, serialised them).
 *
 * Shared-memory operand layout (K-major, no swizzle): an 8-row × 16-byte
 * core matrix is 128 contiguous bytes; a 64-row × 16-k tile is [k/4][row/8]
 * of them, so cores adjacent in rows are 128 B apart (the descriptor's
 * stride byte offset) and in k 1024 B (its leading byte offset), as the PTX
 * ISA defines them for K-major operands (tools/device/wgmma_probe.cu checked
 * both on the device). A thread's 16-byte cp.async chunk of a tile is row
 * 8·warp + lane%8, chunk lane/8: each quarter warp writes 128 contiguous
 * bytes and each warp reads 64 contiguous bytes of 8 rows.
 *
 * TF32 rounding: the tensor cores would take the top 19 bits of each fp32
 * operand (truncation, a bias that reached 3e-3 in the golden energies), so
 * each thread rounds its own chunks to nearest (cvt.rna, as the mma.sync
 * kernel and cuBLAS's TF32 path) once they have landed. */
constexpr int WG_BK = 16, WG_NST = 4;     /* K step, cp.async stages */
constexpr int WG_SL = TC_S - 1;           /* slots loaded: all but sin m = 0 */
constexpr int WG_T = TC_BM * WG_BK;       /* one 64 × 16 operand tile */
constexpr int WG_A = WG_SL * WG_T, WG_STAGE = WG_A + TC_Q * WG_T;
static_assert(TC_BM == 64 && TC_BN == 64 && WG_BK == 16 && TC_THREADS == 256,
              "wg_load's chunk map and the descriptors assume these");
static_assert(TC_S * TC_BM * TC_LDO <= WG_NST * WG_STAGE, "output tile fits the pipeline");
constexpr size_t WG_SMEM = (size_t)(WG_NST * WG_STAGE + 4 * TC_Q * TC_GMAX) * sizeof(float);

#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define ECN_WGMMA 1
/* shared-memory matrix descriptor: start, leading (k) and stride (row) byte offsets */
__device__ static inline uint64_t wg_desc(const float *p)
{
    const uint32_t a = (uint32_t)__cvta_generic_to_shared(p);
    return (uint64_t)((a & 0x3FFFF) >> 4) | (uint64_t)(1024 >> 4) << 16 | (uint64_t)(128 >> 4) << 32;
}

#define WG_R8(i)                                                                                   \
    "+f"(d[i]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3]), "+f"(d[i + 4]), "+f"(d[i + 5]),    \
        "+f"(d[i + 6]), "+f"(d[i + 7])
/* d += A·Bᵀ, A 64 × 8 and B 32 × 8 (both K-major) in shared memory; the
 * accumulator of thread (warp w, lane) holds rows 16w + lane/4 (+8 for
 * registers 2, 3 mod 4) and columns 8(j/4) + 2(lane%4) + j%2 */
__device__ static inline void wgmma32(float (&d)[16], uint64_t da, uint64_t db)
{
    asm volatile("wgmma.mma_async.sync.aligned.m64n32k8.f32.tf32.tf32 "
                 "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15}, "
                 "%16, %17, 1, 1, 1;\n"
                 : WG_R8(0), WG_R8(8)
                 : "l"(da), "l"(db));
}
#undef WG_R8

/* the slot of loaded slot sl (the sin m = 0 slot, 1, is not loaded) */
__device__ static inline int wg_slot(int sl) { return sl ? sl + 1 : 0; }

/* this thread's 16-byte chunk of a 64 × 16 tile: row 8·warp + lane%8, k chunk lane/8 */
__device__ static inline int wg_chunk()
{
    const int tid = threadIdx.x;
    return ((tid >> 3) & 3) * 256 + (8 * (tid >> 5) + (tid & 7)) * 4;
}

/* the K tile k0..k0+15 of the 7 slots' X rows and the 4 W_m into a stage */
__device__ static inline void wg_load(float *st, const float *xa, bool ok, const float *wb, int F,
                                      int k0)
{
    const int o = wg_chunk();
#pragma unroll
    for (int sl = 0; sl < WG_SL; sl++)
        cp16(st + sl * WG_T + o, xa + wg_slot(sl) * F + k0, ok);
#pragma unroll
    for (int m = 0; m < TC_Q; m++)
        cp16(st + WG_A + m * WG_T + o, wb + (int64_t)m * F * F + k0, true);
}

/* this thread's chunks of a landed stage, rounded to TF32 in place */
__device__ static inline void wg_round(float *st)
{
    const int o = wg_chunk();
#pragma unroll
    for (int t = 0; t < WG_SL + TC_Q; t++) {
        float4 *p = reinterpret_cast<float4 *>(st + t * WG_T + o);
        float4 v = *p;
        v.x = __uint_as_float(to_tf32(v.x));
        v.y = __uint_as_float(to_tf32(v.y));
        v.z = __uint_as_float(to_tf32(v.z));
        v.w = __uint_as_float(to_tf32(v.w));
        *p = v;
    }
}

/* acc[sl] = the 64 edges × 32 features (32g.., warpgroup g) of slot
 * wg_slot(sl), summed over k = 0..F-1 */
__device__ static inline void wg_mainloop(float *sm, const float *X, const float *W, int64_t E,
                                          int F, int64_t e0, int n0, float (&acc)[WG_SL][16])
{
    const int tid = threadIdx.x, g = tid >> 7;
#pragma unroll
    for (int i = 0; i < WG_SL; i++)
#pragma unroll
        for (int j = 0; j < 16; j++)
            acc[i][j] = 0.0f;
    const int r = 8 * (tid >> 5) + (tid & 7), kc = (tid >> 3) & 3;
    const int64_t e = e0 + r;
    const bool ok = e < E; /* rows past E read nothing and fill zeros */
    const float *xa = X + (ok ? e : 0) * (2LL * TC_Q * F) + 4 * kc;
    const float *wb = W + (int64_t)(n0 + r) * F + 4 * kc;
    const int KT = F / WG_BK;
#pragma unroll
    for (int st = 0; st < WG_NST - 1; st++) {
        if (st < KT)
            wg_load(sm + st * WG_STAGE, xa, ok, wb, F, st * WG_BK);
        cp_commit();
    }
    for (int kt = 0; kt < KT; kt++) {
        cp_wait<WG_NST - 2>();
        wg_round(sm + (kt % WG_NST) * WG_STAGE);
        /* this thread's writes, visible to the tensor cores' proxy; past
         * the barrier all of tile kt is, and every warpgroup has finished
         * (waited for) its MMAs on tile kt-1, whose buffer the next load
         * reuses */
        asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
        __syncthreads();
        if (kt + WG_NST - 1 < KT)
            wg_load(sm + ((kt + WG_NST - 1) % WG_NST) * WG_STAGE, xa, ok, wb, F,
                    (kt + WG_NST - 1) * WG_BK);
        cp_commit();
        const float *st = sm + (kt % WG_NST) * WG_STAGE;
        /* k step q: cores 2q, 2q+1 (512q floats in); features 32g: rows 32g (128g floats) */
        asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#pragma unroll
        for (int q = 0; q < 2; q++)
#pragma unroll
            for (int sl = 0; sl < WG_SL; sl++)
                wgmma32(acc[sl], wg_desc(st + sl * WG_T + 512 * q),
                        wg_desc(st + WG_A + (wg_slot(sl) >> 1) * WG_T + 128 * g + 512 * q));
        asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
        asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
    }
    cp_wait<0>();
    __syncthreads(); /* the pipeline's shared memory is free for the output tile */
}

/* the accumulators into the output tile [slot][edge][feature] (slot 1 unwritten) */
__device__ static inline void wg_stage_out(float *O, const float (&acc)[WG_SL][16])
{
    const int tid = threadIdx.x, g = tid >> 7, w = (tid >> 5) & 3, lane = tid & 31;
#pragma unroll
    for (int sl = 0; sl < WG_SL; sl++)
#pragma unroll
        for (int j = 0; j < 16; j += 2) {
            const int row = 16 * w + (lane >> 2) + 8 * ((j & 3) >> 1);
            const int col = 32 * g + 8 * (j >> 2) + 2 * (lane & 3);
            *reinterpret_cast<float2 *>(O + (wg_slot(sl) * TC_BM + row) * TC_LDO + col) =
                make_float2(acc[sl][j], acc[sl][j + 1]);
        }
}
#endif

template <bool SILU, bool SYM>
__global__ void __launch_bounds__(TC_THREADS, 1)
    layer_wg_fwd_k(int64_t E, int F, TcArgs a, float *X, float *Z)
{
#ifdef ECN_WGMMA
    extern __shared__ __align__(16) float sm[];
    float *tab = sm + WG_NST * WG_STAGE;
    const int C = F / TC_BN;
    const int n0 = (blockIdx.x % C) * TC_BN;
    const int64_t e0 = (int64_t)(blockIdx.x / C) * TC_BM;
    float acc[WG_SL][16];
    wg_mainloop(sm, X, a.w, E, F, e0, n0, acc);
    wg_stage_out(sm, acc);
    rs_tables<float, TC_Q>(a.rs, tab); /* (its barrier: the tile is staged) */
    cgr::this_cluster().sync();        /* every block of the row tile has read X */
    tc_epilogue<SILU, true, SYM>(sm, tab, a, E, F, e0, n0, X, Z);
#else
    (void)E; (void)F; (void)a; (void)X; (void)Z;
    __trap(); /* the host launches it only where the sm_90a code was built (ECN_CUDA_SM90A) */
#endif
}

/* ---- wgmma, one CTA per m: the m's and feature tiles of a row tile one cluster ------------------- */

/* layer_wc_fwd_k (mode 4): the tile of layer_wg_fwd_k re-reads W for every
 * 64 edges and X for every 64 features (≈ 2 GB of L2 traffic a layer at the
 * bench shape) because one block must hold all seven slots of its tile for
 * the RealSpace epilogue. Here a CTA computes one m's cos and sin slots
 * (which share W_m) for 128 edges × 128 features, so each operand tile
 * serves twice as many products; the 4 · F/128 CTAs of a row tile (every m,
 * every feature tile) form one cluster, stage their results in shared
 * memory, and after the cluster barrier each runs the epilogue on a quarter
 * of its feature tile's rows, reading the other m's slots through
 * distributed shared memory. The barrier also makes the in-place update
 * safe: every CTA that reads the row tile's X has finished its K loop.
 * Warpgroup g owns edges 64g..64g+63 (wgmma.m64n128k8, two accumulators).
 * Operand tiles as layer_wg_fwd_k's with 128 rows: cores adjacent in rows
 * 128 B apart, in k 2048 B. */
constexpr int WC_BM = 128, WC_BN = 128;   /* edges, features per CTA */
constexpr int WC_T = WC_BM * WG_BK;       /* one 128 × 16 operand tile */
constexpr int WC_STAGE = 3 * WC_T;        /* X's cos and sin slots of m, W_m */
constexpr int WC_LDO = WC_BN + 4;         /* staged output row: [part][edge][feature] */
constexpr int WC_OUT = 2 * WC_BM * WC_LDO;
constexpr int WC_MAIN = WG_NST * WC_STAGE > WC_OUT ? WG_NST * WC_STAGE : WC_OUT;
constexpr size_t WC_SMEM = (size_t)(WC_MAIN + 4 * TC_Q * TC_GMAX) * sizeof(float);
static_assert(WC_BM == 128 && WC_BN == 128 && TC_THREADS == 256, "wc_load's chunk map assumes these");

#ifdef ECN_WGMMA
/* shared-memory descriptor of a 128-row operand tile (k step 2048 B, rows 128 B) */
__device__ static inline uint64_t wc_desc(const float *p)
{
    const uint32_t a = (uint32_t)__cvta_generic_to_shared(p);
    return (uint64_t)((a & 0x3FFFF) >> 4) | (uint64_t)(2048 >> 4) << 16 | (uint64_t)(128 >> 4) << 32;
}

#define WC_R8(i)                                                                                   \
    "+f"(d[i]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3]), "+f"(d[i + 4]), "+f"(d[i + 5]),    \
        "+f"(d[i + 6]), "+f"(d[i + 7])
/* d += A·Bᵀ, A 64 × 8 and B 128 × 8 (K-major) in shared memory; register j
 * of thread (warp w, lane): row 16w + lane/4 (+8 for j%4 >= 2), column
 * 8(j/4) + 2(lane%4) + j%2 */
__device__ static inline void wgmma128(float (&d)[64], uint64_t da, uint64_t db)
{
    asm volatile("wgmma.mma_async.sync.aligned.m64n128k8.f32.tf32.tf32 "
                 "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,"
                 "%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31,"
                 "%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,"
                 "%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63}, "
                 "%64, %65, 1, 1, 1;\n"
                 : WC_R8(0), WC_R8(8), WC_R8(16), WC_R8(24), WC_R8(32), WC_R8(40), WC_R8(48),
                   WC_R8(56)
                 : "l"(da), "l"(db));
}
#undef WC_R8

/* this thread's chunk h (0, 1) of a 128 × 16 tile: row 8·(c/32) + c%8, k chunk (c/8)%4, c = tid + 256h */
__device__ static inline int wc_row(int h)
{
    const int c = threadIdx.x + 256 * h;
    return 8 * (c >> 5) + (c & 7);
}
__device__ static inline int wc_kc(int h) { return ((threadIdx.x + 256 * h) >> 3) & 3; }
__device__ static inline int wc_chunk(int h) { return wc_kc(h) * 512 + wc_row(h) * 4; }

/* K tile k0..k0+15 of X's slots (m, cos) and (m, sin) (m > 0) and of W_m into a stage */
__device__ static inline void wc_load(float *st, const float *X, const float *W, int64_t E, int F,
                                      int64_t e0, int n0, int m, int k0)
{
#pragma unroll
    for (int h = 0; h < 2; h++) {
        const int r = wc_row(h), kc = wc_kc(h), o = wc_chunk(h);
        const int64_t e = e0 + r;
        const bool ok = e < E; /* rows past E read nothing and fill zeros */
        const float *xa = X + (ok ? e : 0) * (2LL * TC_Q * F) + 2 * m * F + k0 + 4 * kc;
        cp16(st + o, xa, ok);
        if (m)
            cp16(st + WC_T + o, xa + F, ok);
        cp16(st + 2 * WC_T + o, W + ((int64_t)m * F + n0 + r) * F + k0 + 4 * kc, true);
    }
}

/* this thread's chunks of a landed stage, rounded to TF32 in place */
__device__ static inline void wc_round(float *st, int m)
{
#pragma unroll
    for (int h = 0; h < 2; h++)
#pragma unroll
        for (int t = 0; t < 3; t++) {
            if (t == 1 && !m)
                continue;
            float4 *p = reinterpret_cast<float4 *>(st + t * WC_T + wc_chunk(h));
            float4 v = *p;
            v.x = __uint_as_float(to_tf32(v.x));
            v.y = __uint_as_float(to_tf32(v.y));
            v.z = __uint_as_float(to_tf32(v.z));
            v.w = __uint_as_float(to_tf32(v.w));
            *p = v;
        }
}
#endif

template <bool SILU, bool SYM>
__global__ void __launch_bounds__(TC_THREADS, 1)
    layer_wc_fwd_k(int64_t E, int F, TcArgs a, float *X, float *Z)
{
#ifdef ECN_WGMMA
    extern __shared__ __align__(16) float sm[];
    float *tab = sm + WC_MAIN;
    cgr::cluster_group cl = cgr::this_cluster();
    const int NT = F / WC_BN, rank = (int)cl.block_rank(); /* rank = n·4 + m */
    const int m = rank & 3, n = rank >> 2, n0 = n * WC_BN;
    const int64_t e0 = (int64_t)(blockIdx.x / (4 * NT)) * WC_BM;
    const int tid = threadIdx.x, g = tid >> 7;
    float acc[2][64];
#pragma unroll
    for (int p = 0; p < 2; p++)
#pragma unroll
        for (int j = 0; j < 64; j++)
            acc[p][j] = 0.0f;
    const int KT = F / WG_BK;
#pragma unroll
    for (int st = 0; st < WG_NST - 1; st++) {
        if (st < KT)
            wc_load(sm + st * WC_STAGE, X, a.w, E, F, e0, n0, m, st * WG_BK);
        cp_commit();
    }
    for (int kt = 0; kt < KT; kt++) {
        cp_wait<WG_NST - 2>();
        float *st = sm + (kt % WG_NST) * WC_STAGE;
        wc_round(st, m);
        asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
        __syncthreads(); /* as in wg_mainloop */
        if (kt + WG_NST - 1 < KT)
            wc_load(sm + ((kt + WG_NST - 1) % WG_NST) * WC_STAGE, X, a.w, E, F, e0, n0, m,
                    (kt + WG_NST - 1) * WG_BK);
        cp_commit();
        /* k step q: cores 2q, 2q+1 (1024q floats in); warpgroup g: rows 64g (256g floats) */
        asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#pragma unroll
        for (int q = 0; q < 2; q++) {
            /* m = 0 has no sin slot: its second product repeats the cos one
             * (unused) rather than branch, which makes ptxas fence the MMAs */
            const uint64_t db = wc_desc(st + 2 * WC_T + 1024 * q);
            wgmma128(acc[0], wc_desc(st + 256 * g + 1024 * q), db);
            wgmma128(acc[1], wc_desc(st + (m ? WC_T : 0) + 256 * g + 1024 * q), db);
        }
        asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
        asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
    }
    cp_wait<0>();
    __syncthreads(); /* the pipeline's shared memory is free for the output */
    {
        const int w = (tid >> 5) & 3, lane = tid & 31;
#pragma unroll
        for (int p = 0; p < 2; p++) {
            if (p && !m)
                break;
#pragma unroll
            for (int j = 0; j < 64; j += 2) {
                const int row = 64 * g + 16 * w + (lane >> 2) + 8 * ((j & 3) >> 1);
                const int col = 8 * (j >> 2) + 2 * (lane & 3);
                *reinterpret_cast<float2 *>(sm + (p * WC_BM + row) * WC_LDO + col) =
                    make_float2(acc[p][j], acc[p][j + 1]);
            }
        }
    }
    rs_tables<float, TC_Q>(a.rs, tab);
    cl.sync(); /* every CTA staged its slots and has read X's rows */

    /* epilogue: rows 32m..32m+31 of the feature tile, the four m's slots from
     * the four CTAs of this feature tile */
    const float *O[TC_Q];
#pragma unroll
    for (int mm = 0; mm < TC_Q; mm++)
        O[mm] = cl.map_shared_rank(sm, (unsigned)(n * 4 + mm));
    const int64_t rstride = 2LL * TC_Q * F;
    for (int i = tid; i < (WC_BM / 4) * (WC_BN / 4); i += TC_THREADS) {
        const int r = 32 * m + i / (WC_BN / 4), c = 4 * (i % (WC_BN / 4));
        const int64_t e = e0 + r;
        if (e >= E)
            break; /* rows only grow with i */
        float zc[TC_Q][4], zs[TC_Q][4];
#pragma unroll
        for (int mm = 0; mm < TC_Q; mm++) {
            unpack4(ld4(O[mm] + r * WC_LDO + c), zc[mm]);
            unpack4(mm ? ld4(O[mm] + (WC_BM + r) * WC_LDO + c)
                       : make_float4(0.0f, 0.0f, 0.0f, 0.0f),
                    zs[mm]);
        }
        tc_epi4<SILU, true, SYM>(tab, a, F, n0 + c, Z + e * rstride + n0 + c,
                                 X + e * rstride + n0 + c, zc, zs);
    }
    cl.sync(); /* no CTA leaves while another still reads its shared memory */
#else
    (void)E; (void)F; (void)a; (void)X; (void)Z;
    __trap(); /* the host launches it only where the sm_90a code was built (ECN_CUDA_SM90A) */
#endif
}

/* Xbar += Ybar·W (the linear VJP of every slot, SPEC §10) on tensor cores:
 * the same main loop with W's tile transposed; each block adds into its own
 * 64 × 64 tile of Xbar, which nothing else reads (no cluster needed). */
template <int SPLIT>
__global__ void __launch_bounds__(TC_THREADS, 1)
    lin_tc_vjp_k(int64_t E, int fin, int fout, const float *W, const float *Yb, float *Xb)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    extern __shared__ __align__(16) float sm[];
    const int C = fin / TC_BN;
    const int n0 = (blockIdx.x % C) * TC_BN;
    const int64_t e0 = (int64_t)(blockIdx.x / C) * TC_BM;
    const int64_t rstride = 2LL * TC_Q * fin;
    float acc[TC_S][4][4];
    tc_mainloop<SPLIT, true>(sm, Yb, W, E, fout, fin, e0, n0, acc);
    tc_stage_out(sm, acc);
    __syncthreads();
    for (int i = threadIdx.x; i < TC_BM * (TC_BN / 4); i += TC_THREADS) {
        const int r = i / (TC_BN / 4), c = 4 * (i % (TC_BN / 4));
        const int64_t e = e0 + r;
        if (e >= E)
            break;
        float *xe = Xb + e * rstride + n0 + c;
        float4 x[TC_S];
#pragma unroll
        for (int s = 0; s < TC_S; s++)
            x[s] = ld4(xe + s * fin);
#pragma unroll
        for (int s = 0; s < TC_S; s++)
            st4(xe + s * fin, add4(x[s], ld4(sm + (s * TC_BM + r) * TC_LDO + c)));
    }
#else
    (void)E; (void)fin; (void)fout; (void)W; (void)Yb; (void)Xb;
    __trap(); /* the host launches it only on sm_80+ */
#endif
}

/* ---- host side ----------------------------------------------------------------------------------- */

static int tc_mode_v;
static std::once_flag tc_once;
static std::atomic<unsigned long long> tc_launches; /* several contexts may run at once */

static int &tc_mode()
{
    std::call_once(tc_once, [] {
        const char *v = getenv("ECENET_LAYER_TC");
        long m = v && *v ? strtol(v, NULL, 10) : ECN_CUDA_LAYER_TC_DEFAULT;
        tc_mode_v = m <= 0 ? 0 : m >= 4 ? 4 : (int)m;
    });
    return tc_mode_v;
}

/* the wgmma kernel's code was built (sm_90a, configure's sm_90) and this is
 * a compute capability 9.0 GPU, the only one sm_90a code runs on */
static bool wg_available()
{
#ifdef ECN_CUDA_SM90A
    const State &s = state();
    return s.cc_major == 9 && s.cc_minor == 0 && s.smem_optin >= WG_SMEM;
#else
    return false;
#endif
}

static inline bool al16(const void *p) { return ((uintptr_t)p & 15) == 0; }

/* grid of nrb row tiles × C blocks (one cluster each) */
static void tc_config(cudaLaunchConfig_t &cfg, cudaLaunchAttribute *at, int64_t nrb, int C,
                      size_t smem)
{
    memset(&cfg, 0, sizeof cfg);
    cfg.gridDim = dim3((unsigned)(nrb * C), 1, 1);
    cfg.blockDim = dim3(TC_THREADS, 1, 1);
    cfg.dynamicSmemBytes = smem;
    cfg.stream = 0;
    at[0].id = cudaLaunchAttributeClusterDimension;
    at[0].val.clusterDim.x = (unsigned)C;
    at[0].val.clusterDim.y = 1;
    at[0].val.clusterDim.z = 1;
    cfg.attrs = at;
    cfg.numAttrs = 1;
}

/* whether a cluster of C blocks of the mma.sync (wg = 0), the wgmma
 * (wg = 1) or the per-m wgmma (wg = 2) kernel fits on this GPU (asked once
 * per kernel and C) */
static bool tc_cluster_fits(int wg, int C)
{
    static std::atomic<int> known[3][9]; /* 0 unknown, 1 fits, -1 does not */
    if (!known[wg][C].load()) {
        const void *kern = wg == 2   ? (const void *)layer_wc_fwd_k<true, false>
                           : wg == 1 ? (const void *)layer_wg_fwd_k<true, false>
                                     : (const void *)layer_tc_fwd_k<1, true>;
        const size_t smem = wg == 2 ? WC_SMEM : wg ? WG_SMEM : TC_SMEM;
        int n = 0;
        cudaLaunchConfig_t cfg;
        cudaLaunchAttribute at[1];
        tc_config(cfg, at, 1, C, smem);
        const bool ok =
            cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem) ==
                cudaSuccess &&
            cudaOccupancyMaxActiveClusters(&n, kern, &cfg) == cudaSuccess && n > 0;
        (void)cudaGetLastError(); /* a refusal here only means: not this path */
        known[wg][C].store(ok ? 1 : -1);
    }
    return known[wg][C].load() > 0;
}

/* C blocks per row tile of BM edges, one cluster */
template <typename K>
static void tc_launch(K kern, size_t smem, int BM, int C, int64_t E, int F, const TcArgs &a,
                      float *X, float *Z)
{
    CU_CHECK(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
    cudaLaunchConfig_t cfg;
    cudaLaunchAttribute at[1];
    tc_config(cfg, at, (E + BM - 1) / BM, C, smem);
    CU_CHECK(cudaLaunchKernelEx(&cfg, kern, E, F, a, X, Z));
}

bool layer_tc_fwd(int64_t E, const ecenet_linear_params *lin, const ecenet_realspace_params *rs,
                  float *X, float *Z)
{
    State &s = state();
    const int mode = tc_mode();
    const int split_n = s.tf32 ? 1 : 3;
    /* modes 3, 4: the wgmma kernels, TF32 on sin0_zero layers only; 4: one
     * CTA per m, 128-feature tiles, clusters of 4·F/128 <= 8 */
    const int wg = mode == 4 ? 2 : mode == 3 ? 1 : 0;
    const size_t smem = wg == 2 ? WC_SMEM : wg ? WG_SMEM : TC_SMEM;
    if (mode == 0 || (split_n == 3 && mode != 2) || s.cc_major < 9 || s.smem_optin < smem ||
        (wg && (!wg_available() || !rs->sin0_zero)))
        return false;
    const int F = lin->fin, BN = wg == 2 ? WC_BN : TC_BN, BM = wg == 2 ? WC_BM : TC_BM;
    const int C = wg == 2 ? 4 * (F / BN) : F / BN;
    if (E <= 0 || lin->fout != F || rs->F != F || lin->Q != TC_Q || rs->Q != TC_Q || F % BN ||
        C > 8 || rs->G > TC_GMAX || lin->w_src || lin->w_tgt || rs->scale_src || rs->scale_tgt ||
        rs->shift_src || rs->shift_tgt)
        return false;
    if (!al16(X) || !al16(Z) || !al16(lin->w) || (E + BM - 1) / BM * C > INT_MAX ||
        !tc_cluster_fits(wg, C))
        return false;
    TcArgs a;
    a.w = (const float *)lin->w;
    a.bias = (const float *)lin->bias;
    a.rs = rs_args<float>(rs, NULL, NULL);
    const bool silu = rs->act == ECENET_ACT_SILU;
    /* the wgmma kernels fold the grid where the RealSpace kernels do (ECENET_RS_SYM) */
    const bool sym = rs->grid_sym && ecn_cuda_rs_sym_on();
    if (wg == 2) {
        auto k = silu ? (sym ? layer_wc_fwd_k<true, true> : layer_wc_fwd_k<true, false>)
                      : (sym ? layer_wc_fwd_k<false, true> : layer_wc_fwd_k<false, false>);
        tc_launch(k, smem, BM, C, E, F, a, X, Z);
    } else if (wg) {
        auto k = silu ? (sym ? layer_wg_fwd_k<true, true> : layer_wg_fwd_k<true, false>)
                      : (sym ? layer_wg_fwd_k<false, true> : layer_wg_fwd_k<false, false>);
        tc_launch(k, smem, BM, C, E, F, a, X, Z);
    } else if (split_n == 1)
        tc_launch(silu ? layer_tc_fwd_k<1, true> : layer_tc_fwd_k<1, false>, smem, BM, C, E, F, a,
                  X, Z);
    else
        tc_launch(silu ? layer_tc_fwd_k<3, true> : layer_tc_fwd_k<3, false>, smem, BM, C, E, F, a,
                  X, Z);
    tc_launches++;
    return true;
}

bool lin_tc_vjp(int64_t E, const ecenet_linear_params *p, const float *Yb, float *Xb)
{
    State &s = state();
    /* split TF32 only: with TF32 on, cuBLAS's TF32 GEMM is the faster one */
    if (tc_mode() != 2 || s.tf32 || s.cc_major < 8 || s.smem_optin < TC_SMEM)
        return false;
    const int fin = p->fin, fout = p->fout;
    if (E <= 0 || p->Q != TC_Q || fin % TC_BN || fout % TC_BK || !al16(Yb) || !al16(Xb) ||
        !al16(p->w) || (E + TC_BM - 1) / TC_BM * (fin / TC_BN) > INT_MAX)
        return false;
    const unsigned nb = (unsigned)((E + TC_BM - 1) / TC_BM * (fin / TC_BN));
    CU_CHECK(cudaFuncSetAttribute(lin_tc_vjp_k<3>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                  (int)TC_SMEM));
    lin_tc_vjp_k<3><<<nb, TC_THREADS, TC_SMEM>>>(E, fin, fout, (const float *)p->w, Yb, Xb);
    CU_LAUNCHED();
    tc_launches++;
    return true;
}

} // namespace ecn_cu

extern "C" int ecn_cuda_set_layer_tc(int mode)
{
    int &m = ecn_cu::tc_mode();
    const int old = m;
    m = mode <= 0 ? 0 : mode >= 4 ? 4 : mode;
    return old;
}

extern "C" int ecn_cuda_layer_wg_available(void) { return ecn_cu::wg_available(); }

extern "C" unsigned long long ecn_cuda_layer_tc_launches(void) { return ecn_cu::tc_launches.load(); }
