/* Every variant of the split-TF32 GEMM kernel (src/cuda/cuda_linear_x3.cuh:
 * WN 2 / 4, beta 0 / 1, every accumulation X3_*) on awkward shapes: partial row,
 * output and K tiles, padded row strides (lda > K, ldc > N) and gaps
 * between the batches, against a double-precision sum on the host. Fails
 * (exit 1) when an output is off by more than 1e-5 of Σ|terms| or when an
 * element outside the outputs (padding, gaps) changed. Written with a
 * review of the kernel; run by tools/device/x3.sh.
 *   nvcc -O2 -arch=sm_90 -std=c++17 -o x3_check tools/device/x3_check.cu */
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "../../src/cuda/cuda_linear_x3.cuh"

using namespace ecn_x3;

static int g_fail = 0;

template <int WN, bool BETA, int RN> static void check(int E, int N, int K, int nb)
{
    const int64_t lda = K + 8, ldc = N + 4;
    const int64_t sA = E * lda + 4, sB = (int64_t)N * K + 4, sC = E * ldc + 2;
    const size_t na = sA * nb, nbb = sB * nb, nc = sC * nb;
    std::vector<float> h(na + nbb + nc), out(nc);
    srand(1);
    for (float &v : h)
        v = rand() / (float)RAND_MAX - 0.5f;
    const float *hA = h.data(), *hB = hA + na, *hC = hB + nbb;
    float *d;
    if (cudaMalloc(&d, h.size() * sizeof(float)) != cudaSuccess) {
        printf("cudaMalloc failed\n");
        exit(1);
    }
    cudaMemcpy(d, h.data(), h.size() * sizeof(float), cudaMemcpyHostToDevice);
    const Args a = make_args(E, N, K, d, lda, sA, d + na, sB, d + na + nbb, ldc, sC);
    if (!lin_x3_ok(a)) {
        printf("WN%d beta%d acc%d E%d N%d K%d: operands refused by lin_x3_ok\n", WN, BETA, RN, E, N, K);
        g_fail = 1;
        cudaFree(d);
        return;
    }
    cudaFuncSetAttribute(lin_x3_k<WN, BETA, RN>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                         (int)smem(WN));
    lin_x3_k<WN, BETA, RN><<<lin_x3_grid(a, nb, WN), threads(WN), smem(WN)>>>(a);
    const cudaError_t er = cudaDeviceSynchronize();
    if (er != cudaSuccess) {
        printf("launch: %s\n", cudaGetErrorString(er));
        exit(1);
    }
    cudaMemcpy(out.data(), a.C, nc * sizeof(float), cudaMemcpyDeviceToHost);
    double worst = 0;
    long touched = 0;
    for (int b = 0; b < nb; b++) {
        for (int64_t e = 0; e < E; e++)
            for (int64_t n = 0; n < ldc; n++) {
                const size_t o = b * sC + e * ldc + n;
                if (n >= N) { /* row padding: must be left alone */
                    touched += out[o] != hC[o];
                    continue;
                }
                double s = BETA ? hC[o] : 0.0, sa = BETA ? fabs(hC[o]) : 0.0;
                for (int k = 0; k < K; k++) {
                    const double p = (double)hA[b * sA + e * lda + k] * hB[b * sB + n * K + k];
                    s += p;
                    sa += fabs(p);
                }
                worst = fmax(worst, fabs(out[o] - s) / (sa > 0 ? sa : 1));
            }
        for (int64_t o = E * ldc; o < sC; o++) /* the gap after the batch */
            touched += out[b * sC + o] != hC[b * sC + o];
    }
    const bool bad = !(worst <= 1e-5) || touched;
    printf("WN%d beta%d acc%d E%5d N%4d K%4d: worst |err|/sum|terms| %.3g, outside changed %ld%s\n",
           WN, BETA, RN, E, N, K, worst, touched, bad ? "  FAIL" : "");
    g_fail |= bad;
    cudaFree(d);
}

template <int WN> static void all(int E, int N, int K)
{
    check<WN, false, X3_TC>(E, N, K, 3);
    check<WN, true, X3_TC>(E, N, K, 3);
    check<WN, false, X3_CHAIN>(E, N, K, 3);
    check<WN, true, X3_CHAIN>(E, N, K, 3);
    check<WN, false, X3_CHAIN2>(E, N, K, 3);
    check<WN, true, X3_CHAIN2>(E, N, K, 3);
}

int main()
{
    const int shapes[][3] = {{1000, 200, 100}, {130, 2, 4}, {257, 130, 36}, {384, 256, 256},
                             {77, 66, 1000}};
    for (const auto &s : shapes) {
        all<2>(s[0], s[1], s[2]);
        all<4>(s[0], s[1], s[2]);
    }
    printf(g_fail ? "x3_check: FAILED\n" : "x3_check: all passed\n");
    return g_fail;
}
