/* Shared pieces of the CUDA backend: error recording, the backend state
 * (cuBLAS handle, TF32 and RealSpace launch settings), launch helpers,
 * activations, deterministic block reductions. One source serves fp32 and
 * fp64: every op is a template on the real type T, instantiated twice in the
 * vtables (cuda_backend.cu).
 *
 * Determinism: no floating-point atomics anywhere. Per-atom reductions loop
 * over the atom's entries in CSR order (ecenet_dims groupings); reductions
 * over all entries use fixed block/grid shapes that depend only on the
 * problem size, and fixed shared-memory trees. */
#ifndef ECN_CUDA_COMMON_CUH
#define ECN_CUDA_COMMON_CUH

#include <cuda_runtime.h>
#include <cublas_v2.h>
#include <math.h>
#include <stdio.h>
#include <stdint.h>
#include <string.h>
#include "ecenet/ops.h"
#include "error.h" /* ecn_env_int */

#ifndef M_PI
#define M_PI 3.14159265358979323846
#endif

namespace ecn_cu {

/* ---- errors: the first one is kept (sticky) and printed once ---------------- */
void fail(int code, const char *what, const char *file, int line);
int failed();

#define CU_CHECK(call)                                                                             \
    do {                                                                                           \
        cudaError_t e_ = (call);                                                                   \
        if (e_ != cudaSuccess)                                                                     \
            ::ecn_cu::fail((int)e_, cudaGetErrorString(e_), __FILE__, __LINE__);                   \
    } while (0)
/* after every kernel launch */
#define CU_LAUNCHED() CU_CHECK(cudaGetLastError())
#define BLAS_CHECK(call)                                                                           \
    do {                                                                                           \
        cublasStatus_t s_ = (call);                                                                \
        if (s_ != CUBLAS_STATUS_SUCCESS)                                                           \
            ::ecn_cu::fail(10000 + (int)s_, "cuBLAS: " #call, __FILE__, __LINE__);                 \
    } while (0)

/* ---- backend state ---------------------------------------------------------------- */
struct State {
    cublasHandle_t blas;
    int blas_ok;
    int tf32;               /* fp32 GEMMs on TF32 tensor cores */
    int rs_block, rs_warps; /* RealSpace: rows per block, warps per block */
    int n_sm;
    int cc_major, cc_minor; /* compute capability (thread-block clusters from 9) */
    size_t smem_optin;      /* max dynamic shared memory per block (opt-in) */
};
/* Initialised on first use (thread-safe); every op calls it. */
State &state();
cublasHandle_t blas(int tf32_allowed);


/* Device memory counted in ecn_cuda_bytes_in_use / peak (the backend's
 * alloc/release): NULL when out of memory. */
void *mem_alloc(size_t bytes);
void mem_release(void *p);

/* device scalar scratch for reductions (sum, virial): no allocation per op */
double *reduce_scratch(); /* REDUCE_MAX_BLOCKS * 9 doubles, device */
double *reduce_result();  /* 9 doubles, device */
#define REDUCE_MAX_BLOCKS 1024

static inline unsigned blocks_for(int64_t n, int threads)
{
    int64_t b = (n + threads - 1) / threads;
    if (b > 0x7fffffffLL)
        b = 0x7fffffffLL;
    return (unsigned)(b < 1 ? 1 : b);
}
/* grid of at most 2^31-1 blocks for per-item (edge, atom) kernels that loop */
static inline unsigned grid_items(int64_t n)
{
    return (unsigned)(n > 0x7fffffffLL ? 0x7fffffffLL : (n < 1 ? 1 : n));
}

/* how many blocks of this kernel (threads, dynamic shared memory) fit on
 * the GPU at once: one wave, for kernels whose blocks loop over the work */
template <typename K> static inline int64_t resident_blocks(K kernel, int threads, size_t smem)
{
    int per_sm = 0;
    if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, threads, smem) !=
            cudaSuccess ||
        per_sm < 1)
        per_sm = 1;
    return (int64_t)state().n_sm * per_sm;
}

/* p is 16-byte aligned (the vector kernels' 16-byte loads and stores) */
static inline bool aligned16(const void *p) { return ((uintptr_t)p & 15) == 0; }

/* Raise a kernel's dynamic shared-memory limit when it needs more than 48 KiB. */
template <typename K> static inline void smem_allow(K kernel, size_t bytes)
{
    if (bytes > 48 * 1024)
        CU_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                      (int)bytes));
}

/* For a launch whose shared memory grows with the model: false, with an
 * error naming the op and both sizes, when it exceeds this GPU's per-block
 * limit (so a model too wide for a kernel's tile does not surface as a
 * generic launch failure); otherwise smem_allow. */
template <typename K> static inline bool smem_ready(K kernel, size_t bytes, const char *op)
{
    const size_t lim = state().smem_optin;
    if (bytes > lim) {
        char msg[200];
        snprintf(msg, sizeof msg,
                 "%s needs %zu bytes of shared memory per block, this GPU allows %zu (model too "
                 "wide for this kernel)",
                 op, bytes, lim);
        fail(-2, msg, __FILE__, __LINE__);
        return false;
    }
    smem_allow(kernel, bytes);
    return true;
}

/* ---- cuBLAS strided-batched GEMM for float / double ----------------------------------------- */

static inline void gemm_sb(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n,
                    int k, float alpha, const float *A, int lda, long long sA, const float *B,
                    int ldb, long long sB, float beta, float *C, int ldc, long long sC, int batch)
{
    BLAS_CHECK(cublasSgemmStridedBatched(h, ta, tb, m, n, k, &alpha, A, lda, sA, B, ldb, sB,
                                         &beta, C, ldc, sC, batch));
}

static inline void gemm_sb(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n,
                    int k, double alpha, const double *A, int lda, long long sA, const double *B,
                    int ldb, long long sB, double beta, double *C, int ldc, long long sC,
                    int batch)
{
    BLAS_CHECK(cublasDgemmStridedBatched(h, ta, tb, m, n, k, &alpha, A, lda, sA, B, ldb, sB,
                                         &beta, C, ldc, sC, batch));
}

/* ---- compact Wigner-D block offset: Σ_{l'<l}(2l'+1)² ------------------------------- */
__host__ __device__ static inline int dblock(int l) { return l * (2 * l - 1) * (2 * l + 1) / 3; }

/* ---- activations ------------------------------------------------------------------------ */
__device__ static inline float act_f(int act, float x)
{
    switch (act) {
    case ECENET_ACT_SILU: return x / (1.0f + expf(-x));
    case ECENET_ACT_RELU: return x > 0.0f ? x : 0.0f;
    case ECENET_ACT_TANH: return tanhf(x);
    case ECENET_ACT_GELU: return 0.5f * x * (1.0f + erff(x * 0.70710678118654752f));
    default: return x;
    }
}
__device__ static inline double act_f(int act, double x)
{
    switch (act) {
    case ECENET_ACT_SILU: return x / (1.0 + exp(-x));
    case ECENET_ACT_RELU: return x > 0.0 ? x : 0.0;
    case ECENET_ACT_TANH: return tanh(x);
    case ECENET_ACT_GELU: return 0.5 * x * (1.0 + erf(x * 0.70710678118654752));
    default: return x;
    }
}
__device__ static inline float act_g(int act, float x)
{
    switch (act) {
    case ECENET_ACT_SILU: {
        float s = 1.0f / (1.0f + expf(-x));
        return s * (1.0f + x * (1.0f - s));
    }
    case ECENET_ACT_RELU: return x > 0.0f ? 1.0f : 0.0f;
    case ECENET_ACT_TANH: {
        float t = tanhf(x);
        return 1.0f - t * t;
    }
    case ECENET_ACT_GELU:
        return 0.5f * (1.0f + erff(x * 0.70710678118654752f)) +
               x * expf(-0.5f * x * x) * 0.39894228040143268f;
    default: return 1.0f;
    }
}
__device__ static inline double act_g(int act, double x)
{
    switch (act) {
    case ECENET_ACT_SILU: {
        double s = 1.0 / (1.0 + exp(-x));
        return s * (1.0 + x * (1.0 - s));
    }
    case ECENET_ACT_RELU: return x > 0.0 ? 1.0 : 0.0;
    case ECENET_ACT_TANH: {
        double t = tanh(x);
        return 1.0 - t * t;
    }
    case ECENET_ACT_GELU:
        return 0.5 * (1.0 + erf(x * 0.70710678118654752)) +
               x * exp(-0.5 * x * x) * 0.39894228040143268;
    default: return 1.0;
    }
}

/* ---- deterministic block reduction (fixed tree) of NV doubles per thread ------------------- */
/* sh: blockDim.x * NV doubles of shared memory; result in sh[0..NV) for thread 0 */
template <int NV> __device__ static inline void block_reduce(double *v, double *sh)
{
    const int t = threadIdx.x, n = blockDim.x;
    for (int q = 0; q < NV; q++)
        sh[q * n + t] = v[q];
    __syncthreads();
    for (int s = n / 2; s > 0; s >>= 1) { /* blockDim is a power of two */
        if (t < s)
            for (int q = 0; q < NV; q++)
                sh[q * n + t] += sh[q * n + t + s];
        __syncthreads();
    }
    if (t == 0)
        for (int q = 0; q < NV; q++)
            v[q] = sh[q * n];
}

} // namespace ecn_cu

#endif
