/* The fused layer forward on tensor cores (SPEC §10-§12): Z = Linear(X),
 * X += RealSpace(Z) in one kernel, so a layer reads X once and writes Z and
 * X once (the cuBLAS path reads X, writes Z, then reads Z and X again and
 * writes X).
 *
 * A block computes a 64-edge × 64-feature tile of Z for all 2Q = 8 (m,
 * part) slots: eight GEMM tiles over K = F, the two parts of one m sharing
 * W_m's tile. Every thread then holds all 8 slots of the same (edge,
 * feature) accumulator positions (mma.m16n8k8 fragments, the same position
 * in each slot's fragment), so the epilogue (bias, store Z, the RealSpace
 * grid, residual add into X) runs in registers with no shared-memory
 * staging.
 *
 * In place: X is the GEMM input of every feature tile of its rows and the
 * residual output. The F/64 blocks of one row tile form a thread-block
 * cluster (sm_90) and meet at a cluster barrier after their K loops, so no
 * block writes X before all of them have read it; each block then reads
 * and writes only its own feature tile of X.
 *
 * Precision: SPLIT = 1 is TF32 (inputs rounded to nearest, fp32
 * accumulate), the ECENET_OPT_TF32 mode; SPLIT = 3 is the split-TF32
 * scheme (x = hi + lo, both TF32; hi·hi + hi·lo + lo·hi), which keeps fp32
 * accuracy on the tensor cores at three times the MMA work.
 *
 * The sin m = 0 slot, zero in every model, is skipped (zero output) when
 * the block's rows hold only zeros there; any nonzero value makes the block
 * compute it, so the result is always the exact product.
 *
 * Used when: fp32, Q = 4, fin = fout = F with F % 64 == 0 and F <= 512
 * (cluster <= 8), no per-edge-type weights or affine, 16-byte aligned
 * tensors, a GPU with thread-block clusters; otherwise the caller takes
 * the cuBLAS + RealSpace path. Mode: ECENET_LAYER_TC (see cuda_backend.h). */
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
constexpr int TC_BK = 16, TC_LD = TC_BK + 4; /* K step; padded smem row (no bank conflicts) */
constexpr int TC_NST = 3;                    /* cp.async pipeline stages */
constexpr int TC_THREADS = 256;
constexpr int TC_GMAX = 32;                  /* largest RealSpace grid */
constexpr int TC_A = TC_S * TC_BM * TC_LD;   /* X tile: [slot][edge][k] */
constexpr int TC_LDV = TC_BN + 8;            /* VJP W tile row: [m][k][feature], padded */
constexpr int TC_B = TC_Q * TC_BN * TC_LD;   /* W tile: [m][feature][k] */
static_assert(TC_Q * TC_BK * TC_LDV <= TC_B, "VJP W tile fits the stage");
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

/* The block's K tile k0..k0+15 into shared memory, asynchronously: A (the 8
 * slots of its 64 edges; row stride 2·Q·K) as [slot][edge][k], and W's tile
 * for the 64 outputs n0.. of each m. Forward (Y = X·W_mᵀ): W[m][n][k], kept
 * as [m][n][k]; VJP (Xbar += Ybar·W_m): W[m][k][n], kept as [m][k][n]. Edges
 * past E read nothing and fill zeros. */
template <bool VJP>
__device__ static inline void tc_load(float *st, const float *A, const float *W, int64_t E,
                                      int K, int N, int64_t e0, int n0, int k0)
{
    float *As = st, *Bs = st + TC_A;
    const int64_t rstride = 2LL * TC_Q * K;
    for (int i = threadIdx.x; i < TC_S * TC_BM * (TC_BK / 4); i += TC_THREADS) {
        const int ch = i % (TC_BK / 4), r = (i / (TC_BK / 4)) % TC_BM, s = i / (TC_BM * TC_BK / 4);
        const int64_t e = e0 + r;
        const bool v = e < E;
        cp16(As + (s * TC_BM + r) * TC_LD + 4 * ch, v ? A + e * rstride + s * K + k0 + 4 * ch : A,
             v);
    }
    if (VJP) /* 16 rows k of 64 outputs n per m, rows padded to TC_LDV */
        for (int i = threadIdx.x; i < TC_Q * TC_BK * (TC_BN / 4); i += TC_THREADS) {
            const int ch = i % (TC_BN / 4), k = (i / (TC_BN / 4)) % TC_BK, m = i / (TC_BK * TC_BN / 4);
            cp16(Bs + (m * TC_BK + k) * TC_LDV + 4 * ch,
                 W + ((int64_t)m * K + k0 + k) * N + n0 + 4 * ch, true);
        }
    else
        for (int i = threadIdx.x; i < TC_Q * TC_BN * (TC_BK / 4); i += TC_THREADS) {
            const int ch = i % (TC_BK / 4), n = (i / (TC_BK / 4)) % TC_BN, m = i / (TC_BN * TC_BK / 4);
            cp16(Bs + (m * TC_BN + n) * TC_LD + 4 * ch,
                 W + ((int64_t)m * N + n0 + n) * K + k0 + 4 * ch, true);
        }
}

/* acc[s][j] = the warp's 16 edges × 8 outputs (column tile j) of slot s:
 * Σ_k A[e][s][k]·B_m[k][n], m = s/2, over k = 0..K-1; a TC_NST-stage
 * cp.async pipeline. The sin m = 0 slot (s = 1), zero in every model, is
 * skipped per warp and k step when the warp's 16 × 8 inputs are all zero
 * (exact: those products are zero). */
template <int SPLIT, bool VJP>
__device__ static inline void tc_mainloop(float *sm, const float *A, const float *W, int64_t E,
                                          int K, int N, int64_t e0, int n0,
                                          float (&acc)[TC_S][4][4])
{
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int g = lane >> 2, t = lane & 3;
    const int wr = (warp & 3) * 16, wc = (warp >> 2) * 32;
#pragma unroll
    for (int s = 0; s < TC_S; s++)
#pragma unroll
        for (int j = 0; j < 4; j++)
#pragma unroll
            for (int r = 0; r < 4; r++)
                acc[s][j][r] = 0.0f;
    const int KT = K / TC_BK; /* >= 2 */
#pragma unroll
    for (int st = 0; st < TC_NST - 1; st++) {
        if (st < KT)
            tc_load<VJP>(sm + st * TC_STAGE, A, W, E, K, N, e0, n0, st * TC_BK);
        cp_commit();
    }
    for (int kt = 0; kt < KT; kt++) {
        cp_wait<TC_NST - 2>();
        __syncthreads(); /* tile kt landed; everyone is done with tile kt-1's buffer */
        if (kt + TC_NST - 1 < KT)
            tc_load<VJP>(sm + ((kt + TC_NST - 1) % TC_NST) * TC_STAGE, A, W, E, K, N, e0, n0,
                         (kt + TC_NST - 1) * TC_BK);
        cp_commit(); /* (empty near the end: keeps the group count) */
        const float *As = sm + (kt % TC_NST) * TC_STAGE, *Bs = As + TC_A;
#pragma unroll
        for (int kk = 0; kk < TC_BK; kk += 8) {
#pragma unroll
            for (int m = 0; m < TC_Q; m++) {
                uint32_t bh[4][2], bl[4][2];
#pragma unroll
                for (int j = 0; j < 4; j++) { /* b0 = B[k = t][n = g], b1 = B[t + 4][g] */
                    const int n = wc + 8 * j + g;
                    const float *bp = VJP ? Bs + (m * TC_BK + kk + t) * TC_LDV + n
                                          : Bs + (m * TC_BN + n) * TC_LD + kk + t;
                    split<SPLIT>(bp[0], bh[j][0], bl[j][0]);
                    split<SPLIT>(bp[VJP ? 4 * TC_LDV : 4], bh[j][1], bl[j][1]);
                }
#pragma unroll
                for (int part = 0; part < 2; part++) {
                    const int s = 2 * m + part;
                    /* a0 = A[g][t], a1 = A[g + 8][t], a2 = A[g][t + 4], a3 = A[g + 8][t + 4] */
                    const float *ap = As + (s * TC_BM + wr + g) * TC_LD + kk + t;
                    const float a0 = ap[0], a1 = ap[8 * TC_LD], a2 = ap[4], a3 = ap[8 * TC_LD + 4];
                    if (s == 1 && !__any_sync(0xffffffffu, (a0 != 0.0f) | (a1 != 0.0f) |
                                                               (a2 != 0.0f) | (a3 != 0.0f)))
                        continue;
                    uint32_t ah[4], al[4];
                    split<SPLIT>(a0, ah[0], al[0]);
                    split<SPLIT>(a1, ah[1], al[1]);
                    split<SPLIT>(a2, ah[2], al[2]);
                    split<SPLIT>(a3, ah[3], al[3]);
#pragma unroll
                    for (int j = 0; j < 4; j++) {
                        if (SPLIT == 3) { /* small terms first */
                            mma(acc[s][j], al, bh[j]);
                            mma(acc[s][j], ah, bl[j]);
                        }
                        mma(acc[s][j], ah, bh[j]);
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
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int g = lane >> 2, t = lane & 3;
    const int wr = (warp & 3) * 16, wc = (warp >> 2) * 32;
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
    const int64_t rstride = 2LL * TC_Q * F;
    float acc[TC_S][4][4];
    tc_mainloop<SPLIT, false>(sm, X, a.w, E, F, F, e0, n0, acc);
    tc_stage_out(sm, acc);
    /* RealSpace tables, then the barrier of the row tile's blocks: past it
     * every block of the cluster has read all of X's rows */
    rs_tables<float, TC_Q>(a.rs, tab);
    cgr::this_cluster().sync();

    /* epilogue, 4 consecutive features per thread and step (16-byte accesses,
     * consecutive threads on consecutive features): Z = tile (+ bias), store
     * Z, X += RealSpace(Z) with the operations of the RealSpace kernels */
    const int G = a.rs.G;
    for (int i = threadIdx.x; i < TC_BM * (TC_BN / 4); i += TC_THREADS) {
        const int r = i / (TC_BN / 4), c = 4 * (i % (TC_BN / 4));
        const int64_t e = e0 + r;
        if (e >= E)
            break; /* rows only grow with i */
        const int f = n0 + c;
        float *ze = Z + e * rstride + f, *xe = X + e * rstride + f;
        float4 x[TC_S];
#pragma unroll
        for (int s = 0; s < TC_S; s++)
            x[s] = ld4(xe + s * F);
        float z[TC_S][4], y[TC_S][4], scale[4], shift[4];
#pragma unroll
        for (int s = 0; s < TC_S; s++) {
            const float4 v = ld4(sm + (s * TC_BM + r) * TC_LDO + c);
            z[s][0] = v.x;
            z[s][1] = v.y;
            z[s][2] = v.z;
            z[s][3] = v.w;
        }
#pragma unroll
        for (int v = 0; v < 4; v++) {
            if (a.bias)
                z[0][v] += a.bias[f + v];
            scale[v] = a.rs.scale ? a.rs.scale[f + v] : 1.0f;
            shift[v] = a.rs.shift ? a.rs.shift[f + v] : 0.0f;
#pragma unroll
            for (int s = 0; s < TC_S; s++)
                y[s][v] = 0.0f;
        }
#pragma unroll
        for (int s = 0; s < TC_S; s++)
            st4(ze + s * F, make_float4(z[s][0], z[s][1], z[s][2], z[s][3]));
        for (int k = 0; k < G; k++) {
            float cs[TC_Q], ss[TC_Q], ca[TC_Q], sa[TC_Q];
            const float *tk = tab + k * 4 * TC_Q;
            lds<TC_Q>(tk, cs);
            lds<TC_Q>(tk + TC_Q, ss);
            lds<TC_Q>(tk + 2 * TC_Q, ca);
            lds<TC_Q>(tk + 3 * TC_Q, sa);
#pragma unroll
            for (int v = 0; v < 4; v++) {
                float cc = 0.0f, sn = 0.0f;
#pragma unroll
                for (int m = 0; m < TC_Q; m++) {
                    cc += z[2 * m][v] * cs[m];
                    sn += z[2 * m + 1][v] * ss[m];
                }
                const float gk = rs_act<float, SILU>(a.rs.act, scale[v] * (cc + sn) + shift[v]);
#pragma unroll
                for (int m = 0; m < TC_Q; m++) {
                    y[2 * m][v] += gk * ca[m];
                    y[2 * m + 1][v] += gk * sa[m];
                }
            }
        }
#pragma unroll
        for (int s = 0; s < TC_S; s++)
            st4(xe + s * F, add4(x[s], make_float4(y[s][0], y[s][1], y[s][2], y[s][3])));
    }
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
static unsigned long long tc_launches;

static int &tc_mode()
{
    std::call_once(tc_once, [] {
        const char *v = getenv("ECENET_LAYER_TC");
        long m = v && *v ? strtol(v, NULL, 10) : ECN_CUDA_LAYER_TC_DEFAULT;
        tc_mode_v = m <= 0 ? 0 : m >= 2 ? 2 : 1;
    });
    return tc_mode_v;
}

static inline bool al16(const void *p) { return ((uintptr_t)p & 15) == 0; }

static void tc_config(cudaLaunchConfig_t &cfg, cudaLaunchAttribute *at, int64_t nrb, int C)
{
    memset(&cfg, 0, sizeof cfg);
    cfg.gridDim = dim3((unsigned)(nrb * C), 1, 1);
    cfg.blockDim = dim3(TC_THREADS, 1, 1);
    cfg.dynamicSmemBytes = TC_SMEM;
    cfg.stream = 0;
    at[0].id = cudaLaunchAttributeClusterDimension;
    at[0].val.clusterDim.x = (unsigned)C;
    at[0].val.clusterDim.y = 1;
    at[0].val.clusterDim.z = 1;
    cfg.attrs = at;
    cfg.numAttrs = 1;
}

/* whether a cluster of C such blocks fits on this GPU (asked once per C) */
static bool tc_cluster_fits(int C)
{
    static int known[9]; /* 0 unknown, 1 fits, -1 does not */
    if (!known[C]) {
        auto kern = layer_tc_fwd_k<1, true>;
        int n = 0;
        cudaLaunchConfig_t cfg;
        cudaLaunchAttribute at[1];
        tc_config(cfg, at, 1, C);
        const bool ok =
            cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                 (int)TC_SMEM) == cudaSuccess &&
            cudaOccupancyMaxActiveClusters(&n, kern, &cfg) == cudaSuccess && n > 0;
        (void)cudaGetLastError(); /* a refusal here only means: not this path */
        known[C] = ok ? 1 : -1;
    }
    return known[C] > 0;
}

template <int SPLIT, bool SILU>
static void tc_launch(int64_t E, int F, const TcArgs &a, float *X, float *Z)
{
    const int C = F / TC_BN;
    auto kern = layer_tc_fwd_k<SPLIT, SILU>;
    CU_CHECK(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)TC_SMEM));
    cudaLaunchConfig_t cfg;
    cudaLaunchAttribute at[1];
    tc_config(cfg, at, (E + TC_BM - 1) / TC_BM, C);
    CU_CHECK(cudaLaunchKernelEx(&cfg, kern, E, F, a, X, Z));
}

bool layer_tc_fwd(int64_t E, const ecenet_linear_params *lin, const ecenet_realspace_params *rs,
                  float *X, float *Z)
{
    State &s = state();
    const int mode = tc_mode();
    const int split_n = s.tf32 ? 1 : 3;
    if (mode == 0 || (split_n == 3 && mode < 2) || s.cc_major < 9 || s.smem_optin < TC_SMEM)
        return false;
    const int F = lin->fin;
    if (E <= 0 || lin->fout != F || rs->F != F || lin->Q != TC_Q || rs->Q != TC_Q ||
        F % TC_BN || F / TC_BN > 8 || rs->G > TC_GMAX || lin->w_src || lin->w_tgt ||
        rs->scale_src || rs->scale_tgt || rs->shift_src || rs->shift_tgt)
        return false;
    if (!al16(X) || !al16(Z) || !al16(lin->w) || (E + TC_BM - 1) / TC_BM * (F / TC_BN) > INT_MAX ||
        !tc_cluster_fits(F / TC_BN))
        return false;
    TcArgs a;
    a.w = (const float *)lin->w;
    a.bias = (const float *)lin->bias;
    a.rs = rs_args<float>(rs, NULL, NULL);
    const bool silu = rs->act == ECENET_ACT_SILU;
    if (split_n == 1)
        silu ? tc_launch<1, true>(E, F, a, X, Z) : tc_launch<1, false>(E, F, a, X, Z);
    else
        silu ? tc_launch<3, true>(E, F, a, X, Z) : tc_launch<3, false>(E, F, a, X, Z);
    tc_launches++;
    return true;
}

bool lin_tc_vjp(int64_t E, const ecenet_linear_params *p, const float *Yb, float *Xb)
{
    State &s = state();
    /* split TF32 only: with TF32 on, cuBLAS's TF32 GEMM is the faster one */
    if (tc_mode() < 2 || s.tf32 || s.cc_major < 8 || s.smem_optin < TC_SMEM)
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
    m = mode <= 0 ? 0 : mode >= 2 ? 2 : 1;
    return old;
}

extern "C" unsigned long long ecn_cuda_layer_tc_launches(void) { return ecn_cu::tc_launches; }
