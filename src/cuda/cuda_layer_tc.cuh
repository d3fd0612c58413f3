/* Shared by the fused tensor-core layer kernels (SPEC §10-§12):
 * cuda_layer_tc.cu (mma.sync: ECENET_LAYER_TC modes 1 and 2, and the
 * dispatch of every mode) and cuda_layer_wg.cu (wgmma: modes 3 and 4). The kernel
 * arguments, the TF32 and vector helpers, the epilogue of one edge and
 * four features (the same operations as the RealSpace kernels), and the
 * launch of a grid of thread-block clusters. */
#ifndef ECN_CUDA_LAYER_TC_CUH
#define ECN_CUDA_LAYER_TC_CUH

#include <atomic>
#include <string.h>
#include "cuda_common.cuh"
#include "cuda_realspace.cuh"

namespace ecn_cu {

constexpr int TC_Q = 4, TC_S = 2 * TC_Q; /* angular slots m, (m, part) slots */
constexpr int TC_THREADS = 256;          /* threads per block */
constexpr int TC_GMAX = 32;              /* largest RealSpace grid */

struct TcArgs {
    const float *w, *bias;   /* (Q, F, F) [m][o][i]; (F) or NULL */
    RS<float> rs;            /* tables, act, per-feature scale/shift (no types) */
};

__device__ static inline uint32_t to_tf32(float x)
{
    uint32_t r;
    asm("cvt.rna.tf32.f32 %0, %1;\n" : "=r"(r) : "f"(x));
    return r;
}
__device__ static inline float4 ld4(const float *p) { return *reinterpret_cast<const float4 *>(p); }
__device__ static inline void st4(float *p, float4 v) { __stwb(reinterpret_cast<float4 *>(p), v); }
__device__ static inline float4 add4(float4 a, float4 b)
{
    return make_float4(a.x + b.x, a.y + b.y, a.z + b.z, a.w + b.w);
}

/* x, y, z, w of a float4 into v[0..3] */
__device__ static inline void unpack4(float4 q, float (&v)[4])
{
    v[0] = q.x;
    v[1] = q.y;
    v[2] = q.z;
    v[3] = q.w;
}

/* a fused layer's arguments; false where the epilogue's per-feature vectors
 * do not allow its 16-byte loads (the caller then leaves the layer to the
 * unfused kernels) */
static inline bool tc_args(const ecenet_linear_params *lin, const ecenet_realspace_params *rs,
                           TcArgs &a)
{
    a.w = (const float *)lin->w;
    a.bias = (const float *)lin->bias;
    a.rs = rs_args<float>(rs, NULL, NULL);
    return aligned16(a.bias) && aligned16(a.rs.scale) && aligned16(a.rs.shift);
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
    /* 16-byte loads (checked by tc_args): four scalar loads of a warp whose lanes are
     * 16 bytes apart fetched each sector four times (ncu: 13.3M excess
     * sectors a wgmma layer) */
    float yc[TC_Q][4], ys[TC_Q][4], scale[4], shift[4], bias[4];
    unpack4(a.bias ? ld4(a.bias + f) : make_float4(0.0f, 0.0f, 0.0f, 0.0f), bias);
    unpack4(a.rs.scale ? ld4(a.rs.scale + f) : make_float4(1.0f, 1.0f, 1.0f, 1.0f), scale);
    unpack4(a.rs.shift ? ld4(a.rs.shift + f) : make_float4(0.0f, 0.0f, 0.0f, 0.0f), shift);
#pragma unroll
    for (int v = 0; v < 4; v++) {
        if (a.bias)
            zc[0][v] += bias[v];
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


/* ---- host side: grids of thread-block clusters ----------------------------------------------------- */

/* grid of nrb row tiles × C blocks (one cluster each) */
static inline void tc_config(cudaLaunchConfig_t &cfg, cudaLaunchAttribute *at, int64_t nrb, int C,
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

/* whether a cluster of C (<= 8) blocks of kernel kern (smem bytes each)
 * fits on this GPU, asked once per C: the answer is kept in known[C] (0
 * unknown, 1 fits, -1 does not), one array per kernel */
static inline bool tc_cluster_fits(std::atomic<int> (&known)[9], const void *kern, size_t smem,
                                   int C)
{
    if (!known[C].load()) {
        int n = 0;
        cudaLaunchConfig_t cfg;
        cudaLaunchAttribute at[1];
        tc_config(cfg, at, 1, C, smem);
        const bool ok =
            cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem) ==
                cudaSuccess &&
            cudaOccupancyMaxActiveClusters(&n, kern, &cfg) == cudaSuccess && n > 0;
        (void)cudaGetLastError(); /* a refusal here only means: not this path */
        known[C].store(ok ? 1 : -1);
    }
    return known[C].load() > 0;
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

/* cuda_layer_wg.cu: whether its kernels can run here (built for sm_90a, a
 * compute capability 9.0 GPU); the fused TF32 layer forward (mode 3) and
 * layer VJP (mode 4, on lin->w_t) on wgmma, false (nothing done) where
 * they do not apply */
bool wg_available();
bool layer_wg_fwd(int64_t E, const ecenet_linear_params *lin, const ecenet_realspace_params *rs,
                  float *X, float *Z);
bool layer_wg_vjp(int64_t E, const ecenet_linear_params *lin, const ecenet_realspace_params *rs,
                  const float *Z, float *Xb);

} // namespace ecn_cu

#endif
