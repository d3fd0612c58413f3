/* Can three TF32 GEMMs stand in for the strict-fp32 SGEMM of the layer
 * linear? (issue 5: "an fp32-accurate split-TF32 scheme"). One layer's seven
 * (m, part) strided-batched products on the [e][m][part][f] layout, as
 * src/cuda/cuda_layers.cu calls them, on random normal inputs, each variant's
 * rel L2 and max error against a DGEMM of the same fp32 inputs, and its time
 * (CUDA events, L2 flushed, medians of 20):
 *   sgemm      cublasSgemmStridedBatched, default math (the library's fp32 path)
 *   tf32       the same call in CUBLAS_TF32_TENSOR_OP_MATH (the library's TF32 path)
 *   3x trunc   C = Xl·W + X·Wl + X·W, all TF32; X, W raw (the tensor cores
 *              see them truncated), lo = rn_tf32(x - trunc_tf32(x))
 *   3x rn      C = Xl·Wh + Xh·Wl + Xh·Wh with h = rn_tf32(x), l = rn_tf32(x - h)
 *   3x rn, main first / 4x rn (+ Xl·Wl): the order and the dropped term
 * and whether cuBLAS's TF32 kernels truncate or round their operands (the
 * tf32 row against DGEMMs of truncated and of rounded inputs). Then the
 * VJP form (Xb += Yb·W, beta 1, W transposed operand) in sgemm and 3x rn.
 * The library's kernel (x3, cuda_linear_x3.cuh) in each accumulation, with
 * W split in the kernel and split beforehand (PRE, "pre-split W").
 *   nvcc -O2 -arch=sm_90 -o split_bench tools/device/split_bench.cu -lcublas */
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <initializer_list>
#include <utility>
#include <vector>

#include "bench_util.cuh"
#include "../../src/cuda/cuda_linear_x3.cuh"

__device__ __forceinline__ float tf32_rn(float x)
{
    uint32_t r;
    asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(r) : "f"(x));
    return __uint_as_float(r);
}
__device__ __forceinline__ float tf32_tr(float x) { return __uint_as_float(__float_as_uint(x) & 0xffffe000u); }

/* normal(0, s) from a counter hash (Box-Muller) */
__device__ __forceinline__ uint64_t mix(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}
__global__ void fill_k(size_t n, uint64_t seed, float s, float *x)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        const uint64_t h = mix(seed * 0x9e3779b97f4a7c15ull + i);
        const double u1 = ((h >> 11) + 1.0) * (1.0 / 9007199254740993.0), u2 = (mix(h) >> 11) * (1.0 / 9007199254740992.0);
        x[i] = (float)(s * sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
    }
}
/* mode 0: d = (double)x; 1: d = trunc_tf32(x); 2: d = rn_tf32(x) */
__global__ void widen_k(size_t n, int mode, const float *x, double *d)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        d[i] = mode == 0 ? (double)x[i] : mode == 1 ? (double)tf32_tr(x[i]) : (double)tf32_rn(x[i]);
}
/* rn split: h = rn(x), l = rn(x - h); trunc split: l = rn(x - trunc(x)), h untouched */
__global__ void split_rn_k(size_t n, const float4 *x, float4 *h, float4 *l)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        const float4 v = x[i];
        float4 a, b;
        a.x = tf32_rn(v.x); b.x = tf32_rn(v.x - a.x);
        a.y = tf32_rn(v.y); b.y = tf32_rn(v.y - a.y);
        a.z = tf32_rn(v.z); b.z = tf32_rn(v.z - a.z);
        a.w = tf32_rn(v.w); b.w = tf32_rn(v.w - a.w);
        h[i] = a;
        l[i] = b;
    }
}
__global__ void split_tr_k(size_t n, const float4 *x, float4 *l)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        const float4 v = x[i];
        float4 b;
        b.x = tf32_rn(v.x - tf32_tr(v.x));
        b.y = tf32_rn(v.y - tf32_tr(v.y));
        b.z = tf32_rn(v.z - tf32_tr(v.z));
        b.w = tf32_rn(v.w - tf32_tr(v.w));
        l[i] = b;
    }
}
/* Σ (y - r)², Σ r², max |y - r| over the computed slots (not sin m = 0) */
__global__ void err_k(size_t n, int F, int S, const float *y, const double *r, double *out)
{
    __shared__ double s0[256], s1[256], s2[256];
    double a = 0, b = 0, c = 0;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        if ((i / F) % S == 1)
            continue;
        const double d = (double)y[i] - r[i];
        a += d * d;
        b += r[i] * r[i];
        c = fmax(c, fabs(d));
    }
    s0[threadIdx.x] = a; s1[threadIdx.x] = b; s2[threadIdx.x] = c;
    __syncthreads();
    for (int k = 128; k > 0; k >>= 1) {
        if ((int)threadIdx.x < k) {
            s0[threadIdx.x] += s0[threadIdx.x + k];
            s1[threadIdx.x] += s1[threadIdx.x + k];
            s2[threadIdx.x] = fmax(s2[threadIdx.x], s2[threadIdx.x + k]);
        }
        __syncthreads();
    }
    if (threadIdx.x == 0) {
        out[3 * blockIdx.x] = s0[0];
        out[3 * blockIdx.x + 1] = s1[0];
        out[3 * blockIdx.x + 2] = s2[0];
    }
}

static const int NB = 1024;
static int E, F, Q, S, LD;
static size_t N, NW;
static double *g_part;

static void report(const char *name, float ms, const float *y, const double *ref)
{
    err_k<<<NB, 256>>>(N, F, S, y, ref, g_part);
    CK(cudaGetLastError());
    std::vector<double> p(3 * NB);
    CK(cudaMemcpy(p.data(), g_part, p.size() * sizeof(double), cudaMemcpyDeviceToHost));
    double a = 0, b = 0, c = 0;
    for (int k = 0; k < NB; k++) {
        a += p[3 * k];
        b += p[3 * k + 1];
        c = fmax(c, p[3 * k + 2]);
    }
    const double rms = sqrt(b / (N / S * (S - 1)));
    printf("%-34s %8.3f ms   rel L2 %.3e   max|err|/rms %.3e\n", name, ms, sqrt(a / b), c / rms);
}

/* the same 7 products through the fused split-TF32 kernel (cuda_linear_x3.cuh):
 * variants {WN, accumulation}, in layer_x3's switch order */
static const int vars[][3] = {{2, ecn_x3::X3_TC, 0},     {2, ecn_x3::X3_CHAIN, 0},
                              {2, ecn_x3::X3_CHAIN2, 0}, {2, ecn_x3::X3_TC, 1},
                              {2, ecn_x3::X3_CHAIN, 1},  {2, ecn_x3::X3_CHAIN2, 1}};
static const float *g_Wh, *g_Wl; /* PRE: W split once (split_rn_k, the kernel's split) */
static const char *acc_name[] = {"tc", "chain", "chain2"};
static int g_var = 0;
template <int WN, int ACC, bool PRE = false>
static void x3_go(const ecn_x3::Args &b, int bt, bool beta)
{
    auto K = beta ? ecn_x3::lin_x3_k<WN, true, ACC, PRE> : ecn_x3::lin_x3_k<WN, false, ACC, PRE>;
    const size_t sm = ecn_x3::smem(WN, PRE);
    CK(cudaFuncSetAttribute(K, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)sm));
    K<<<ecn_x3::lin_x3_grid(b, bt, WN), ecn_x3::threads(WN), sm>>>(b);
}
static void layer_x3(const float *W, const float *A, float *C, bool beta)
{
    const bool pre = vars[g_var][2];
    ecn_x3::Args a = ecn_x3::make_args(E, F, F, A, LD, 2LL * F, pre ? g_Wh : W, (int64_t)F * F, C, LD, 2LL * F);
    if (pre)
        a.Bl = g_Wl;
    if (!ecn_x3::lin_x3_ok(a)) { printf("x3: operands not supported\n"); exit(1); }
    for (int part = 0; part < 2; part++) {
        ecn_x3::Args b = a;
        if (part) { b.A += 3 * F; b.B += (int64_t)F * F; b.C += 3 * F; if (pre) b.Bl += (int64_t)F * F; }
        const int bt = part ? Q - 1 : Q;
        switch (g_var) {
        case 0: x3_go<2, ecn_x3::X3_TC>(b, bt, beta); break;
        case 1: x3_go<2, ecn_x3::X3_CHAIN>(b, bt, beta); break;
        case 2: x3_go<2, ecn_x3::X3_CHAIN2>(b, bt, beta); break;
        case 3: x3_go<2, ecn_x3::X3_TC, true>(b, bt, beta); break;
        case 4: x3_go<2, ecn_x3::X3_CHAIN, true>(b, bt, beta); break;
        default: x3_go<2, ecn_x3::X3_CHAIN2, true>(b, bt, beta); break;
        }
    }
}
static const char *var_name()
{
    static char nm[48];
    const int *v = vars[g_var];
    snprintf(nm, sizeof nm, "WN=%d %s%s", v[0], acc_name[v[1]], v[2] ? " pre-split W" : "");
    return nm;
}

static cublasStatus_t gsb(cublasHandle_t h, const float *W, long long sw, const float *A,
                          const float *beta, float *C, int bt)
{
    const float one = 1;
    return cublasSgemmStridedBatched(h, CUBLAS_OP_T, CUBLAS_OP_N, F, E, F, &one, W, F, sw, A, LD,
                                     2LL * F, beta, C, LD, 2LL * F, bt);
}
static cublasStatus_t gsb(cublasHandle_t h, const double *W, long long sw, const double *A,
                          const double *beta, double *C, int bt)
{
    const double one = 1;
    return cublasDgemmStridedBatched(h, CUBLAS_OP_T, CUBLAS_OP_N, F, E, F, &one, W, F, sw, A, LD,
                                     2LL * F, beta, C, LD, 2LL * F, bt);
}
/* the layer's 7 products: C (=|+=) A·Bᵀ per slot, B = Q weight matrices [m][o][i] */
template <typename T> static void layer(cublasHandle_t h, const T *W, const T *A, T *C, T beta)
{
    const long long sw = (long long)F * F;
    CK(gsb(h, W, sw, A, &beta, C, Q));                                 /* cos, m = 0..Q-1 */
    CK(gsb(h, W + sw, sw, A + 3 * F, &beta, C + 3 * F, Q - 1));        /* sin, m = 1..Q-1 */
}

/* C (=|+=) Σ_p A_p·W_pᵀ as one cuBLAS pass per (W_p, A_p): the first with
 * beta b0, the rest accumulating */
typedef std::pair<const float *, const float *> WA;
static void passes(cublasHandle_t h, std::initializer_list<WA> wa, float *C, float b0 = 0)
{
    float beta = b0;
    for (const WA &p : wa) {
        layer<float>(h, p.first, p.second, C, beta);
        beta = 1;
    }
}

int main(int argc, char **argv)
{
    E = argc > 1 ? atoi(argv[1]) : 45648;
    F = argc > 2 ? atoi(argv[2]) : 256;
    Q = 4;
    S = 2 * Q;
    LD = S * F;
    N = (size_t)E * LD;
    NW = (size_t)Q * F * F;
    printf("split-TF32 layer GEMMs: E=%d F=%d, %d slots, X ~ N(0,1), W ~ N(0,1/F), L2 flushed, medians of 20\n",
           E, F, S - 1);
    cublasHandle_t h32, htf, h64;
    CK(cublasCreate(&h32));
    CK(cublasCreate(&htf));
    CK(cublasCreate(&h64));
    CK(cublasSetMathMode(htf, CUBLAS_TF32_TENSOR_OP_MATH));
    float *X, *Xh, *Xl, *W, *Wh, *Wl, *Wlt, *Y, *Y0;
    double *Xd, *Wd, *R;
    CK(cudaMalloc(&X, N * 4));
    CK(cudaMalloc(&Xh, N * 4));
    CK(cudaMalloc(&Xl, N * 4));
    CK(cudaMalloc(&Y, N * 4));
    CK(cudaMalloc(&Y0, N * 4));
    CK(cudaMalloc(&W, NW * 4));
    CK(cudaMalloc(&Wh, NW * 4));
    CK(cudaMalloc(&Wl, NW * 4));
    CK(cudaMalloc(&Wlt, NW * 4));
    CK(cudaMalloc(&Xd, N * 8));
    CK(cudaMalloc(&R, N * 8));
    CK(cudaMalloc(&Wd, NW * 8));
    CK(cudaMalloc(&g_part, 3 * NB * sizeof(double)));
    void *flush;
    const size_t fb = 200u << 20;
    CK(cudaMalloc(&flush, fb));
    fill_k<<<1024, 256>>>(N, 1, 1.0f, X);
    fill_k<<<1024, 256>>>(NW, 2, 1.0f / sqrtf((float)F), W);
    fill_k<<<1024, 256>>>(N, 3, 1.0f, Y0); /* the VJP's initial Xb */
    CK(cudaGetLastError());
    split_rn_k<<<1024, 256>>>(NW / 4, (const float4 *)W, (float4 *)Wh, (float4 *)Wl);
    split_tr_k<<<1024, 256>>>(NW / 4, (const float4 *)W, (float4 *)Wlt);
    g_Wh = Wh;
    g_Wl = Wl;

    /* does cuBLAS's TF32 truncate or round? */
    for (int mode = 1; mode <= 2; mode++) {
        widen_k<<<1024, 256>>>(N, mode, X, Xd);
        widen_k<<<1024, 256>>>(NW, mode, W, Wd);
        layer<double>(h64, Wd, Xd, R, 0);
        layer<float>(htf, W, X, Y, 0);
        CK(cudaDeviceSynchronize());
        report(mode == 1 ? "tf32 vs DGEMM(trunc X, trunc W)" : "tf32 vs DGEMM(rn X, rn W)", 0, Y, R);
    }
    widen_k<<<1024, 256>>>(N, 0, X, Xd);
    widen_k<<<1024, 256>>>(NW, 0, W, Wd);
    layer<double>(h64, Wd, Xd, R, 0);
    CK(cudaDeviceSynchronize());

    auto T = [&](auto fn) { return time_median(fn, flush, fb, 3, 20); };
    const size_t n4 = N / 4;
    float t;
    t = T([&] { split_rn_k<<<4 * 132, 256>>>(n4, (const float4 *)X, (float4 *)Xh, (float4 *)Xl); });
    printf("%-34s %8.3f ms\n", "split kernel x -> (h, l)", t);
    t = T([&] { split_tr_k<<<4 * 132, 256>>>(n4, (const float4 *)X, (float4 *)Xl); });
    printf("%-34s %8.3f ms\n", "split kernel x -> l (trunc h)", t);
    t = T([&] { CK(cudaMemcpyAsync(Xl, X, N * 4, cudaMemcpyDeviceToDevice)); });
    printf("%-34s %8.3f ms  (%.0f GB/s)\n", "device copy of X", t, 2.0 * N * 4 / t / 1e6);

    t = T([&] { layer<float>(h32, W, X, Y, 0); });
    report("sgemm", t, Y, R);
    t = T([&] { layer<float>(htf, W, X, Y, 0); });
    report("tf32", t, Y, R);
    t = T([&] { layer<float>(htf, W, X, Y, 1); });
    report("tf32 beta 1 (time only)", t, Y, R);
    for (g_var = 0; g_var < (int)(sizeof vars / sizeof vars[0]); g_var++) {
        char nm[64];
        CK(cudaMemset(Y, 0xff, N * 4)); /* NaN poison: unwritten outputs show */
        layer_x3(W, X, Y, false);
        CK(cudaDeviceSynchronize());
        snprintf(nm, sizeof nm, "x3 %s (poisoned first run)", var_name());
        report(nm, 0, Y, R);
        t = T([&] { layer_x3(W, X, Y, false); });
        CK(cudaGetLastError());
        snprintf(nm, sizeof nm, "x3 %s fwd", var_name());
        report(nm, t, Y, R);
    }

    split_tr_k<<<4 * 132, 256>>>(n4, (const float4 *)X, (float4 *)Xl);
    t = T([&] { passes(htf, {{W, Xl}, {Wlt, X}, {W, X}}, Y); });
    report("3x trunc (GEMMs only)", t, Y, R);

    split_rn_k<<<4 * 132, 256>>>(n4, (const float4 *)X, (float4 *)Xh, (float4 *)Xl);
    const std::initializer_list<WA> x3 = {{Wh, Xl}, {Wl, Xh}, {Wh, Xh}};
    t = T([&] { passes(htf, x3, Y); });
    report("3x rn (GEMMs only)", t, Y, R);
    t = T([&] { passes(htf, {{Wh, Xh}, {Wh, Xl}, {Wl, Xh}}, Y); });
    report("3x rn, main first", t, Y, R);
    t = T([&] { passes(htf, {{Wl, Xl}, {Wh, Xl}, {Wl, Xh}, {Wh, Xh}}, Y); });
    report("4x rn", t, Y, R);
    t = T([&] {
        split_rn_k<<<4 * 132, 256>>>(n4, (const float4 *)X, (float4 *)Xh, (float4 *)Xl);
        passes(htf, x3, Y);
    });
    report("3x rn with its split", t, Y, R);
    /* raw X as the main operand when cuBLAS rounds it itself */
    t = T([&] { passes(htf, {{Wh, Xl}, {Wl, Xh}, {W, X}}, Y); });
    report("3x rn, raw X/W in the main GEMM", t, Y, R);

    /* VJP: Xb = Xb0 + Yb·W (here Yb := X, Xb0 := Y0), beta 1 */
    widen_k<<<1024, 256>>>(N, 0, Y0, R);
    layer<double>(h64, Wd, Xd, R, 1);
    CK(cudaMemcpy(Y, Y0, N * 4, cudaMemcpyDeviceToDevice));
    t = T([&] { layer<float>(h32, W, X, Y, 1); });
    CK(cudaMemcpy(Y, Y0, N * 4, cudaMemcpyDeviceToDevice));
    layer<float>(h32, W, X, Y, 1);
    report("vjp sgemm beta 1", t, Y, R);
    t = T([&] {
        split_rn_k<<<4 * 132, 256>>>(n4, (const float4 *)X, (float4 *)Xh, (float4 *)Xl);
        passes(htf, x3, Y, 1);
    });
    CK(cudaMemcpy(Y, Y0, N * 4, cudaMemcpyDeviceToDevice));
    passes(htf, x3, Y, 1);
    report("vjp 3x rn beta 1 (with split)", t, Y, R);
    for (g_var = 0; g_var < (int)(sizeof vars / sizeof vars[0]); g_var++) {
        t = T([&] { layer_x3(W, X, Y, true); });
        CK(cudaMemcpy(Y, Y0, N * 4, cudaMemcpyDeviceToDevice));
        layer_x3(W, X, Y, true);
        char nm[64];
        snprintf(nm, sizeof nm, "vjp x3 %s beta 1", var_name());
        report(nm, t, Y, R);
    }
    CK(cudaDeviceSynchronize());
    return 0;
}
