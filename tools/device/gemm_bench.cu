/* The equivariant linear's cuBLAS GEMM forms at the bench size, timed side by
 * side (doc/performance.md): one layer's Q cos + (Q-1) sin strided-batched
 * products on the [e][m][part][f] layout (lda = 2·Q·F), as
 * src/cuda/cuda_layers.cu calls them, and the alternatives for the VJP:
 *   fwd  TN  Y = X·Wᵀ, beta 0 (the forward)
 *   vjp  NN  Xb += Yb·W, beta 1 (the VJP today)
 *   vjp  NN  beta 0 (what the accumulation costs)
 *   vjp  TN  Xb += Yb·(Wᵀ)ᵀ with a transposed copy of W (the forward's form)
 * in strict fp32, TF32, fp32 emulated by BF16x9 (cuBLAS 12.9+), fp64 and fp64
 * emulated in fixed point; rel L2 of the forward against a DGEMM of the same
 * inputs (an emulation that cuBLAS declines shows the plain mode's error).
 * Medians of 20 CUDA-event timings.
 *   nvcc -O2 -arch=sm_90 -o gemm_bench tools/device/gemm_bench.cu -lcublas */
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <vector>

#include "bench_util.cuh"

/* the typed cuBLAS calls of src/cuda/cuda_layers.cu's gemm_sb (not GemmEx),
 * so that the kernels timed here are the ones the library gets */
static cublasStatus_t gsb(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m,
                          int n, int k, const float *al, const float *A, int lda, long long sA,
                          const float *B, int ldb, long long sB, const float *be, float *C, int ldc,
                          long long sC, int bt)
{
    return cublasSgemmStridedBatched(h, ta, tb, m, n, k, al, A, lda, sA, B, ldb, sB, be, C, ldc, sC,
                                     bt);
}
static cublasStatus_t gsb(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m,
                          int n, int k, const double *al, const double *A, int lda, long long sA,
                          const double *B, int ldb, long long sB, const double *be, double *C,
                          int ldc, long long sC, int bt)
{
    return cublasDgemmStridedBatched(h, ta, tb, m, n, k, al, A, lda, sA, B, ldb, sB, be, C, ldc, sC,
                                     bt);
}

static std::vector<double> g_ref; /* the forward's Y in fp64 */

template <typename T>
static void run(const char *name, cublasMath_t mode, int eager, int E, int F, int Q)
{
    cublasHandle_t h;
    CK(cublasCreate(&h));
    CK(cublasSetMathMode(h, mode));
    if (eager)
        CK(cublasSetEmulationStrategy(h, CUBLAS_EMULATION_STRATEGY_EAGER));
    /* W holds the Q matrices of one layer; Wt the same values (a transposed
     * copy would be a different matrix of the same size: timing only) */
    const size_t n = (size_t)E * 2 * Q * F, nw = (size_t)Q * F * F;
    T *X, *Y, *W, *Wt;
    CK(cudaMalloc(&X, n * sizeof(T)));
    CK(cudaMalloc(&Y, n * sizeof(T)));
    CK(cudaMalloc(&W, nw * sizeof(T)));
    CK(cudaMalloc(&Wt, nw * sizeof(T)));
    std::vector<T> hv(n > nw ? n : nw);
    for (size_t k = 0; k < hv.size(); k++)
        hv[k] = (T)(float)((k * 2654435761u % 1000) * 1e-3 - 0.5);
    CK(cudaMemcpy(X, hv.data(), n * sizeof(T), cudaMemcpyHostToDevice));
    CK(cudaMemcpy(Y, hv.data(), n * sizeof(T), cudaMemcpyHostToDevice));
    CK(cudaMemcpy(W, hv.data(), nw * sizeof(T), cudaMemcpyHostToDevice));
    CK(cudaMemcpy(Wt, hv.data(), nw * sizeof(T), cudaMemcpyHostToDevice));
    void *flush;
    const size_t fb = 200u << 20;
    CK(cudaMalloc(&flush, fb));
    const T one = 1, zero = 0;
    const long long sw = (long long)F * F;
    const int ld = 2 * Q * F;
    const cublasOperation_t Tt = CUBLAS_OP_T, N = CUBLAS_OP_N;
    for (int form = 0; form < 4; form++) {
        static const char *fn[] = {"fwd TN beta0", "vjp NN beta1 (now)", "vjp NN beta0",
                                   "vjp TN beta1 (W^T copy)"};
        const float tm = time_median(
            [&] {
                if (form == 0) { /* Y = X·Wᵀ: W[m][o][i] */
                    CK(gsb(h, Tt, N, F, E, F, &one, W, F, sw, X, ld, 2LL * F, &zero, Y, ld, 2LL * F,
                           Q));
                    CK(gsb(h, Tt, N, F, E, F, &one, W + sw, F, sw, X + 3 * F, ld, 2LL * F, &zero,
                           Y + 3 * F, ld, 2LL * F, Q - 1));
                } else if (form == 1 || form == 2) {
                    const T *bt = form == 1 ? &one : &zero;
                    CK(gsb(h, N, N, F, E, F, &one, W, F, sw, Y, ld, 2LL * F, bt, X, ld, 2LL * F,
                           Q));
                    CK(gsb(h, N, N, F, E, F, &one, W + sw, F, sw, Y + 3 * F, ld, 2LL * F, bt,
                           X + 3 * F, ld, 2LL * F, Q - 1));
                } else { /* Wt[m][i][o]: col-major fout×fin, op T gives W */
                    CK(gsb(h, Tt, N, F, E, F, &one, Wt, F, sw, Y, ld, 2LL * F, &one, X, ld, 2LL * F,
                           Q));
                    CK(gsb(h, Tt, N, F, E, F, &one, Wt + sw, F, sw, Y + 3 * F, ld, 2LL * F, &one,
                           X + 3 * F, ld, 2LL * F, Q - 1));
                }
            },
            flush, fb, 3, 20);
        CK(cudaGetLastError());
        const double flop = 2.0 * E * F * F * (2 * Q - 1);
        printf("%-12s %-26s %8.3f ms  %6.1f TFLOP/s\n", name, fn[form], tm, flop / tm / 1e9);
        if (form == 0) { /* Y holds the forward */
            std::vector<T> y(n);
            CK(cudaMemcpy(y.data(), Y, n * sizeof(T), cudaMemcpyDeviceToHost));
            if (g_ref.empty())
                g_ref.assign(y.begin(), y.end());
            else {
                double num = 0, den = 0;
                for (size_t k = 0; k < n; k++) {
                    if ((k / F) % (2 * Q) == 1)
                        continue; /* the sin m = 0 slot is not computed */
                    const double d = (double)y[k] - g_ref[k];
                    num += d * d;
                    den += g_ref[k] * g_ref[k];
                }
                printf("%-12s   forward rel L2 vs fp64 %.2e\n", name, sqrt(num / den));
            }
        }
    }
    cudaFree(X);
    cudaFree(Y);
    cudaFree(W);
    cudaFree(Wt);
    cudaFree(flush);
    cublasDestroy(h);
}

int main(int argc, char **argv)
{
    const int E = argc > 1 ? atoi(argv[1]) : 45648, F = argc > 2 ? atoi(argv[2]) : 256, Q = 4;
    printf("layer GEMMs: E=%d F=%d, %d (m, part) slots, L2 flushed, medians of 20\n", E, F,
           2 * Q - 1);
    run<double>("fp64", CUBLAS_DEFAULT_MATH, 0, E, F, Q); /* first: the reference */
    run<float>("tf32", CUBLAS_TF32_TENSOR_OP_MATH, 0, E, F, Q);
    run<float>("fp32", CUBLAS_DEFAULT_MATH, 0, E, F, Q);
    run<float>("fp32 bf16x9", CUBLAS_FP32_EMULATED_BF16X9_MATH, 1, E, F, Q);
    run<double>("fp64 fixedpt", CUBLAS_FP64_EMULATED_FIXEDPOINT_MATH, 1, E, F, Q);
    return 0;
}
