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
 * The wgmma kernels (the forward, mode 3; the layer VJP, mode 4) are in
 * cuda_layer_wg.cu; the pieces they share with this file (arguments, the
 * epilogue, cluster launches) are in cuda_layer_tc.cuh. This file also
 * dispatches every mode. */
#include <atomic>
#include <cooperative_groups.h>
#include <limits.h>
#include <mutex>
#include <stdlib.h>
#include "cuda_backend.h"
#include "cuda_layer_tc.cuh"
#include "cuda_ops.cuh"

namespace cgr = cooperative_groups;

namespace ecn_cu {

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

constexpr int TC_BM = 64, TC_BN = 64;        /* edges, features per block */
constexpr int TC_BK = 16;                    /* K step */
constexpr int TC_NST = 3;                    /* cp.async pipeline stages */
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

/* tc_epi4 over a block's 64 edges × 64 features, 4 consecutive features per
 * thread and step (consecutive threads on consecutive features), from the
 * output tile O ([slot][edge][feature], TC_LDO) */
template <bool SILU>
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
            unpack4(ld4(O + ((2 * m + 1) * TC_BM + r) * TC_LDO + c), zs[m]);
        }
        tc_epi4<SILU, false, false>(tab, a, F, n0 + c, Z + e * rstride + n0 + c,
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
    tc_epilogue<SILU>(sm, tab, a, E, F, e0, n0, X, Z);
#else
    (void)E; (void)F; (void)a; (void)X; (void)Z;
    __trap(); /* the host launches it only on sm_90+ */
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

constexpr int TC_MODE_MAX = 4; /* modes 0..4 (cuda_backend.h) */
static int tc_clamp(long m) { return m <= 0 ? 0 : m >= TC_MODE_MAX ? TC_MODE_MAX : (int)m; }

static int &tc_mode()
{
    std::call_once(tc_once, [] {
        tc_mode_v = ecn_env_int("ECENET_LAYER_TC", ECN_CUDA_LAYER_TC_DEFAULT, 0, TC_MODE_MAX);
    });
    return tc_mode_v;
}

/* whether a cluster of C blocks of the forward kernel fits on this GPU (asked once per C) */
static bool tc_fits(int C)
{
    static std::atomic<int> known[9];
    return tc_cluster_fits(known, (const void *)layer_tc_fwd_k<1, true>, TC_SMEM, C);
}

bool layer_tc_fwd(int64_t E, const ecenet_linear_params *lin, const ecenet_realspace_params *rs,
                  float *X, float *Z)
{
    State &s = state();
    const int mode = tc_mode();
    if (mode == 3) { /* wgmma (cuda_layer_wg.cu), TF32 on sin0_zero layers */
        if (!layer_wg_fwd(E, lin, rs, X, Z))
            return false;
        tc_launches++;
        return true;
    }
    const int split_n = s.tf32 ? 1 : 3;
    if (mode == 0 || mode == 4 || (split_n == 3 && mode < 2) || s.cc_major < 9 || s.smem_optin < TC_SMEM)
        return false;
    const int F = lin->fin;
    if (E <= 0 || lin->fout != F || rs->F != F || lin->Q != TC_Q || rs->Q != TC_Q || F % TC_BN ||
        F / TC_BN > 8 || rs->G > TC_GMAX || lin->w_src || lin->w_tgt || rs->scale_src ||
        rs->scale_tgt || rs->shift_src || rs->shift_tgt)
        return false;
    if (!aligned16(X) || !aligned16(Z) || !aligned16(lin->w) ||
        (E + TC_BM - 1) / TC_BM * (F / TC_BN) > INT_MAX || !tc_fits(F / TC_BN))
        return false;
    TcArgs a;
    if (!tc_args(lin, rs, a))
        return false;
    const bool silu = rs->act == ECENET_ACT_SILU;
    const int C = F / TC_BN;
    if (split_n == 1)
        tc_launch(silu ? layer_tc_fwd_k<1, true> : layer_tc_fwd_k<1, false>, TC_SMEM, TC_BM, C, E,
                  F, a, X, Z);
    else
        tc_launch(silu ? layer_tc_fwd_k<3, true> : layer_tc_fwd_k<3, false>, TC_SMEM, TC_BM, C, E,
                  F, a, X, Z);
    tc_launches++;
    return true;
}

bool layer_tc_vjp(int64_t E, const ecenet_linear_params *lin, const ecenet_realspace_params *rs,
                  const float *Z, float *Xb)
{
    if (tc_mode() != 4 || !layer_wg_vjp(E, lin, rs, Z, Xb))
        return false;
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
    if (E <= 0 || p->Q != TC_Q || fin % TC_BN || fout % TC_BK || !aligned16(Yb) || !aligned16(Xb) ||
        !aligned16(p->w) || (E + TC_BM - 1) / TC_BM * (fin / TC_BN) > INT_MAX)
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
    m = ecn_cu::tc_clamp(mode);
    return old;
}

extern "C" unsigned long long ecn_cuda_layer_tc_launches(void) { return ecn_cu::tc_launches.load(); }
