/* Strict fp32 layer GEMM: does any cublasLt algorithm beat the one that
 * cublasSgemmStridedBatched picks? One layer's forward (Q cos slots, as
 * src/cuda/cuda_layers.cu calls it: Y = X·Wᵀ, op T on W[m][o][i], lda = 2QF),
 * every algorithm cublasLt's heuristic offers (up to 64) timed with the L2
 * flushed, medians of 15, against the plain cuBLAS call; the output of each
 * algorithm compared bitwise with cuBLAS's and its rel L2 against a DGEMM.
 *   nvcc -O2 -arch=sm_90 -o lt_bench tools/device/lt_bench.cu -lcublasLt -lcublas */
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <vector>

#include "bench_util.cuh"

int main(int argc, char **argv)
{
    const int E = argc > 1 ? atoi(argv[1]) : 45648, F = 256, Q = 4, ld = 2 * Q * F;
    const long long sw = (long long)F * F, sx = 2LL * F;
    const size_t n = (size_t)E * ld, nw = (size_t)Q * F * F;
    std::vector<float> hx(n), hw(nw);
    for (size_t k = 0; k < n; k++)
        hx[k] = (float)((k * 2654435761u % 1000) * 1e-3 - 0.5);
    for (size_t k = 0; k < nw; k++)
        hw[k] = (float)((k * 40503u % 1000) * 1e-3 - 0.5) * 0.0625f;
    float *X, *Y, *W;
    double *Xd, *Yd, *Wd;
    CK(cudaMalloc(&X, n * 4));
    CK(cudaMalloc(&Y, n * 4));
    CK(cudaMalloc(&W, nw * 4));
    CK(cudaMalloc(&Xd, n * 8));
    CK(cudaMalloc(&Yd, n * 8));
    CK(cudaMalloc(&Wd, nw * 8));
    CK(cudaMemcpy(X, hx.data(), n * 4, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(W, hw.data(), nw * 4, cudaMemcpyHostToDevice));
    {
        std::vector<double> t(hx.begin(), hx.end()), u(hw.begin(), hw.end());
        CK(cudaMemcpy(Xd, t.data(), n * 8, cudaMemcpyHostToDevice));
        CK(cudaMemcpy(Wd, u.data(), nw * 8, cudaMemcpyHostToDevice));
    }
    const size_t fb = 200u << 20, wsb = 64u << 20;
    void *flush, *ws;
    CK(cudaMalloc(&flush, fb));
    CK(cudaMalloc(&ws, wsb));
    cublasHandle_t h;
    CK(cublasCreate(&h));
    const float one = 1, zero = 0;
    const double oned = 1, zerod = 0;
    /* fp64 reference and the plain cuBLAS call */
    CK(cublasDgemmStridedBatched(h, CUBLAS_OP_T, CUBLAS_OP_N, F, E, F, &oned, Wd, F, sw, Xd, ld, sx,
                                 &zerod, Yd, ld, sx, Q));
    std::vector<double> ref(n);
    CK(cudaMemcpy(ref.data(), Yd, n * 8, cudaMemcpyDeviceToHost));
    auto time_it = [&](auto fn) { return time_median(fn, flush, fb, 3, 15); };
    auto err = [&](std::vector<float> &y) {
        double num = 0, den = 0;
        for (size_t k = 0; k < n; k++) {
            if ((k / F) % 2)
                continue; /* only the cos slots are computed here */
            const double d = (double)y[k] - ref[k];
            num += d * d;
            den += ref[k] * ref[k];
        }
        return sqrt(num / den);
    };
    const double flop = 2.0 * E * F * F * Q;
    CK(cudaMemset(Y, 0, n * 4));
    const float tb = time_it([&] {
        CK(cublasSgemmStridedBatched(h, CUBLAS_OP_T, CUBLAS_OP_N, F, E, F, &one, W, F, sw, X, ld,
                                     sx, &zero, Y, ld, sx, Q));
    });
    std::vector<float> y0(n), y1(n);
    CK(cudaMemcpy(y0.data(), Y, n * 4, cudaMemcpyDeviceToHost));
    printf("E=%d F=%d, %d cos slots, fp32, L2 flushed, medians of 15\n", E, F, Q);
    printf("cublasSgemmStridedBatched   %8.3f ms %6.1f TFLOP/s  rel L2 %.2e\n", tb, flop / tb / 1e9,
           err(y0));

    cublasLtHandle_t lt;
    CK(cublasLtCreate(&lt));
    cublasLtMatmulDesc_t op;
    CK(cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    cublasOperation_t tA = CUBLAS_OP_T, tB = CUBLAS_OP_N;
    CK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &tA, sizeof tA));
    CK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &tB, sizeof tB));
    cublasLtMatrixLayout_t la, lb, lc;
    CK(cublasLtMatrixLayoutCreate(&la, CUDA_R_32F, F, F, F)); /* stored F×F, op T */
    CK(cublasLtMatrixLayoutCreate(&lb, CUDA_R_32F, F, E, ld));
    CK(cublasLtMatrixLayoutCreate(&lc, CUDA_R_32F, F, E, ld));
    int bc = Q;
    CK(cublasLtMatrixLayoutSetAttribute(la, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &bc, sizeof bc));
    CK(cublasLtMatrixLayoutSetAttribute(lb, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &bc, sizeof bc));
    CK(cublasLtMatrixLayoutSetAttribute(lc, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &bc, sizeof bc));
    long long s1 = sw, s2 = sx;
    CK(cublasLtMatrixLayoutSetAttribute(la, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &s1,
                                        sizeof s1));
    CK(cublasLtMatrixLayoutSetAttribute(lb, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &s2,
                                        sizeof s2));
    CK(cublasLtMatrixLayoutSetAttribute(lc, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &s2,
                                        sizeof s2));
    cublasLtMatmulPreference_t pref;
    CK(cublasLtMatmulPreferenceCreate(&pref));
    CK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &wsb,
                                            sizeof wsb));
    cublasLtMatmulHeuristicResult_t res[64];
    int nres = 0;
    CK(cublasLtMatmulAlgoGetHeuristic(lt, op, la, lb, lc, lc, pref, 64, res, &nres));
    printf("cublasLt heuristic: %d algorithms\n", nres);
    for (int i = 0; i < nres; i++) {
        if (res[i].state != CUBLAS_STATUS_SUCCESS)
            continue;
        int id = -1, tile = -1, sk = -1, stages = -1;
        size_t sz;
        cublasLtMatmulAlgoConfigGetAttribute(&res[i].algo, CUBLASLT_ALGO_CONFIG_ID, &id, sizeof id,
                                             &sz);
        cublasLtMatmulAlgoConfigGetAttribute(&res[i].algo, CUBLASLT_ALGO_CONFIG_TILE_ID, &tile,
                                             sizeof tile, &sz);
        cublasLtMatmulAlgoConfigGetAttribute(&res[i].algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &sk,
                                             sizeof sk, &sz);
        cublasLtMatmulAlgoConfigGetAttribute(&res[i].algo, CUBLASLT_ALGO_CONFIG_STAGES_ID, &stages,
                                             sizeof stages, &sz);
        CK(cudaMemset(Y, 0, n * 4));
        cublasStatus_t st = CUBLAS_STATUS_SUCCESS;
        const float t = time_it([&] {
            st = cublasLtMatmul(lt, op, &one, W, la, X, lb, &zero, Y, lc, Y, lc, &res[i].algo, ws,
                                wsb, 0);
        });
        if (st != CUBLAS_STATUS_SUCCESS) {
            printf("  algo %2d: status %d\n", i, (int)st);
            continue;
        }
        CK(cudaMemcpy(y1.data(), Y, n * 4, cudaMemcpyDeviceToHost));
        const bool same = memcmp(y0.data(), y1.data(), n * 4) == 0;
        printf("  algo %2d id %3d tile %3d splitK %2d stages %3d ws %8zu  %8.3f ms %6.1f TFLOP/s "
               "rel L2 %.2e%s\n",
               i, id, tile, sk, stages, res[i].workspaceSize, t, flop / t / 1e9, err(y1),
               same ? "  (= cuBLAS bits)" : "");
    }
    return 0;
}
