/* Every variant of the split-TF32 GEMM kernel (src/cuda/cuda_linear_x3.cuh:
 * WN 2 / 4, beta 0 / 1, every accumulation X3_*, B split in the kernel or
 * once before it (PRE, split_k), on awkward shapes: partial row,
 * output and K tiles, padded row strides (lda > K, ldc > N) and gaps
 * between the batches, against a double-precision sum on the host. Fails
 * (exit 1) when an output is off by more than 1e-5 of Σ|terms| or when an
 * element outside the outputs (padding, gaps) changed, or when a PRE
 * variant's outputs differ in any bit from the same variant's without PRE. Written with a
 * review of the kernel; run by tools/device/x3.sh.
 *   nvcc -O2 -arch=sm_90 -std=c++17 -o x3_check tools/device/x3_check.cu */
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "../../src/cuda/cuda_linear_x3.cuh"

using namespace ecn_x3;

static int g_fail = 0;

template <int WN, bool BETA, int RN, bool PRE = false>
static std::vector<float> check(int E, int N, int K, int nb)
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
    float *dh = nullptr;
    if (PRE && cudaMalloc(&dh, 2 * nbb * sizeof(float)) != cudaSuccess) {
        printf("cudaMalloc failed\n");
        exit(1);
    }
    Args a = make_args(E, N, K, d, lda, sA, PRE ? dh : d + na, sB, d + na + nbb, ldc, sC);
    if (PRE) {
        split_k<<<64, 256>>>((int64_t)nbb, d + na, dh, dh + nbb);
        a.Bl = dh + nbb;
    }
    if (!lin_x3_ok(a)) {
        printf("WN%d beta%d acc%d pre%d E%d N%d K%d: operands refused by lin_x3_ok\n", WN, BETA,
               RN, PRE, E, N, K);
        g_fail = 1;
        cudaFree(d);
        cudaFree(dh);
        return out;
    }
    cudaFuncSetAttribute(lin_x3_k<WN, BETA, RN, PRE>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                         (int)smem(WN, PRE));
    lin_x3_k<WN, BETA, RN, PRE><<<lin_x3_grid(a, nb, WN), threads(WN), smem(WN, PRE)>>>(a);
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
    printf("WN%d beta%d acc%d pre%d E%5d N%4d K%4d: worst |err|/sum|terms| %.3g, outside "
           "changed %ld%s\n",
           WN, BETA, RN, PRE, E, N, K, worst, touched, bad ? "  FAIL" : "");
    g_fail |= bad;
    cudaFree(d);
    cudaFree(dh);
    return out;
}

/* the variant with B split once against the same one splitting in the kernel: bitwise */
template <int WN, bool BETA, int RN> static void pair(int E, int N, int K, int nb)
{
    const std::vector<float> x = check<WN, BETA, RN>(E, N, K, nb),
                             y = check<WN, BETA, RN, true>(E, N, K, nb);
    long nd = 0;
    for (size_t i = 0; i < x.size() && i < y.size(); i++)
        nd += memcmp(&x[i], &y[i], sizeof(float)) != 0;
    if (nd || x.size() != y.size()) {
        printf("WN%d beta%d acc%d E%5d N%4d K%4d: pre-split differs from in-kernel split in %ld "
               "elements  FAIL\n",
               WN, BETA, RN, E, N, K, nd);
        g_fail = 1;
    }
}

template <int WN> static void all(int E, int N, int K)
{
    pair<WN, false, X3_TC>(E, N, K, 3);
    pair<WN, true, X3_TC>(E, N, K, 3);
    pair<WN, false, X3_CHAIN>(E, N, K, 3);
    pair<WN, true, X3_CHAIN>(E, N, K, 3);
    pair<WN, false, X3_CHAIN2>(E, N, K, 3);
    pair<WN, true, X3_CHAIN2>(E, N, K, 3);
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
