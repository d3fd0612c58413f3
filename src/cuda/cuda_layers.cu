/* Equivariant linear (SPEC §10) on cuBLAS, the residual add (§12) and the
 * fused layer entries; mirrors ref_layers.c, whose RealSpace (§11) is
 * cuda_realspace.cu here.
 *
 * Linear: for a fixed (m, part) the features X[e][m][part][:] are an E×fin
 * row-major matrix with row stride 2·Q·fin, so Y = X·W_mᵀ is one GEMM; the Q
 * values of m are one strided batch (cos slices, then sin slices m >= 1). The
 * sin m = 0 slot, zero in every model, is not a GEMM: a kernel checks each
 * tile of edges for zeros and writes zeros (or, for any nonzero input,
 * computes the exact product), which saves 1/8 of the FLOPs. The bias
 * (m = 0 cos only) and the per-edge-type weight corrections are added by
 * small kernels. fp32 GEMMs use TF32 tensor cores when enabled.
 *
 * The fused layer entries run the residual X += RealSpace(Z) inside the
 * RealSpace kernel and let the VJP overwrite its scratch, so neither needs
 * a zeroing or an add pass. */
#include <atomic>
#include <limits.h>
#include <mutex>
#include <stdlib.h>
#include "ecenet.h"
#include "cuda_backend.h"
#include "cuda_common.cuh"
#include "cuda_ops.cuh"
#include "cuda_linear_x3.cuh"

namespace ecn_cu {

/* ---- the linears' GEMM: cuBLAS, or split TF32 for strict fp32 -------------------------------------- */

/* The split-TF32 kernel's settings, from the environment, read once:
 * ECENET_FP32_GEMM=sgemm|x3 (mode: 0 cuBLAS SGEMM, 1 the kernel where it
 * applies; default ECN_CUDA_FP32_GEMM_DEFAULT; ecn_cuda_set_fp32_gemm
 * changes it) and ECENET_X3_ACC=chain2|chain|tc (how the sums accumulate,
 * cuda_linear_x3.cuh; default chain2: on the weights split once (ops.h
 * w_split) 15-20% faster than SGEMM on the H100 and half its error;
 * chain is slower there (its registers spill), tc is biased); an unknown
 * value leaves the default, with a line on stderr. The tile is WN = 2 (128 ×
 * 64 outputs, two blocks of 4 warps per SM; WN = 4 was 14-21% slower on
 * the H100 and H200). */
struct X3Cfg {
    int mode, acc;
};
constexpr int X3_WN = 2;
static X3Cfg &x3_cfg()
{
    static X3Cfg c;
    static std::once_flag once;
    std::call_once(once, [] {
        static const char *const modes[] = {"sgemm", "x3"}; /* index = mode */
        static const char *const accs[] = {"chain2", "chain", "tc"};
        static const int acc_of[] = {ecn_x3::X3_CHAIN2, ecn_x3::X3_CHAIN, ecn_x3::X3_TC};
        c.mode = ecn_env_pick("ECENET_FP32_GEMM", ECN_CUDA_FP32_GEMM_DEFAULT, modes, 2);
        c.acc = acc_of[ecn_env_pick("ECENET_X3_ACC", 0, accs, 3)];
    });
    return c;
}
static std::atomic<unsigned long long> x3_runs, x3_pre_runs;

/* the strict-fp32 GEMMs may run the kernel at all (mode and GPU; the
 * operands' own conditions are lin_x3_ok's) */
static bool x3_usable()
{
    const State &s = state();
    return x3_cfg().mode && s.cc_major >= 8 && s.smem_optin >= ecn_x3::smem(X3_WN);
}

/* PRE: B given split (a.B the high parts, a.Bl the low ones) */
template <int ACC, bool PRE> static void x3_launch(const ecn_x3::Args &a, int batch, bool beta)
{
    constexpr int WN = X3_WN;
    auto K = beta ? ecn_x3::lin_x3_k<WN, true, ACC, PRE> : ecn_x3::lin_x3_k<WN, false, ACC, PRE>;
    const size_t sm = ecn_x3::smem(WN, PRE);
    smem_allow(K, sm);
    K<<<ecn_x3::lin_x3_grid(a, batch, WN), ecn_x3::threads(WN), sm>>>(a);
    CU_LAUNCHED();
}
template <bool PRE> static void x3_launch(int acc, const ecn_x3::Args &a, int batch, bool beta)
{
    if (acc == ecn_x3::X3_CHAIN)
        x3_launch<ecn_x3::X3_CHAIN, PRE>(a, batch, beta);
    else if (acc == ecn_x3::X3_CHAIN2)
        x3_launch<ecn_x3::X3_CHAIN2, PRE>(a, batch, beta);
    else
        x3_launch<ecn_x3::X3_TC, PRE>(a, batch, beta);
}

static bool gemm_x3(cublasOperation_t tb, int N, int64_t E, int K, const float *B, int ldb,
                    long long sB, const float *A, int lda, long long sA, float beta, float *C,
                    int ldc, long long sC, int batch, const float *Bs, long long lo)
{
    const State &s = state();
    if (s.tf32 || !x3_usable() || tb != CUBLAS_OP_T || ldb != K ||
        (beta != 0.0f && beta != 1.0f) || batch > 65535)
        return false;
    /* the split weights where given and their larger stages fit (else the
     * kernel splits them itself: the same results) */
    const bool pre = Bs && s.smem_optin >= ecn_x3::smem(X3_WN, true);
    ecn_x3::Args a = ecn_x3::make_args(E, N, K, A, lda, sA, pre ? Bs : B, sB, C, ldc, sC);
    if (pre)
        a.Bl = Bs + lo;
    if (!ecn_x3::lin_x3_ok(a) || ecn_x3::lin_x3_tiles(a, X3_WN) > INT_MAX)
        return false;
    const bool b1 = beta != 0.0f;
    if (pre)
        x3_launch<true>(x3_cfg().acc, a, batch, b1);
    else
        x3_launch<false>(x3_cfg().acc, a, batch, b1);
    x3_runs++;
    x3_pre_runs += pre;
    return true;
}
static bool gemm_x3(cublasOperation_t, int, int64_t, int, const double *, int, long long,
                    const double *, int, long long, double, double *, int, long long, int,
                    const double *, long long)
{
    return false; /* fp64: cuBLAS DGEMM */
}

template <typename T>
void gemm_lin(cublasOperation_t tb, int N, int64_t E, int K, const T *B, int ldb, long long sB,
              const T *A, int lda, long long sA, T beta, T *C, int ldc, long long sC, int batch,
              const T *Bs, long long lo)
{
    if (E <= 0 || batch <= 0)
        return;
    if (!gemm_x3(tb, N, E, K, B, ldb, sB, A, lda, sA, beta, C, ldc, sC, batch, Bs, lo))
        gemm_sb(blas(1), tb, CUBLAS_OP_N, N, (int)E, K, (T)1, B, ldb, sB, A, lda, sA, beta, C,
                ldc, sC, batch);
}
template void gemm_lin<float>(cublasOperation_t, int, int64_t, int, const float *, int, long long,
                              const float *, int, long long, float, float *, int, long long, int,
                              const float *, long long);
template void gemm_lin<double>(cublasOperation_t, int, int64_t, int, const double *, int,
                               long long, const double *, int, long long, double, double *, int,
                               long long, int, const double *, long long);

/* ops.h linear_split (fp32): the weights' high and low parts, split as the
 * kernel splits its operands (ecn_x3::split), so that a GEMM on them gives
 * the same bits as one splitting W itself; 1 (nothing written) where the
 * strict-fp32 GEMMs do not run the kernel (ECENET_FP32_GEMM=sgemm, a GPU
 * before compute capability 8.0) */
static int linear_split_f32(size_t n, const void *x, void *hl)
{
    if (!x3_usable())
        return 1;
    if (!n)
        return 0;
    float *h = (float *)hl;
    const size_t nb = (n + 255) / 256;
    ecn_x3::split_k<<<(unsigned)(nb < 4096 ? nb : 4096), 256>>>((int64_t)n, (const float *)x, h,
                                                               h + n);
    CU_LAUNCHED();
    return 0;
}

/* ---- equivariant linear --------------------------------------------------------------------------- */

/* Y[e][j][o] += Σ_i X[e][j][i]·(w_src[t_src] + w_tgt[t_tgt])[m][o][i]: a warp per output,
 * lanes over i, a fixed shuffle tree */
template <typename T>
__global__ void lin_corr_fwd_k(int64_t E, int fin, int fout, int Q, const T *ws, const T *wt,
                               const int32_t *ts, const int32_t *tt, const T *X, T *Y)
{
    extern __shared__ unsigned char smraw[];
    T *sx = (T *)smraw;
    const int lane = threadIdx.x & 31, w = threadIdx.x >> 5, nw = blockDim.x >> 5;
    const int64_t qm = (int64_t)Q * fout * fin;
    for (int64_t e = blockIdx.x; e < E; e += gridDim.x) {
        for (int q = threadIdx.x; q < 2 * Q * fin; q += blockDim.x)
            sx[q] = X[e * 2 * Q * fin + q];
        __syncthreads();
        const T *Ws = ws ? ws + ts[e] * qm : NULL, *Wt = wt ? wt + tt[e] * qm : NULL;
        for (int jo = w; jo < 2 * Q * fout; jo += nw) {
            const int j = jo / fout, o = jo % fout, m = j / 2;
            const int64_t wo = ((int64_t)m * fout + o) * fin;
            T acc = 0;
            for (int i = lane; i < fin; i += 32) {
                T wv = 0;
                if (Ws)
                    wv += Ws[wo + i];
                if (Wt)
                    wv += Wt[wo + i];
                acc += sx[j * fin + i] * wv;
            }
            for (int s = 16; s > 0; s >>= 1)
                acc += __shfl_xor_sync(0xffffffffu, acc, s);
            if (lane == 0)
                Y[(e * 2 * Q + j) * fout + o] += acc;
        }
        __syncthreads();
    }
}

/* Xbar[e][j][i] += Σ_o Ybar[e][j][o]·(w_src + w_tgt)[m][o][i]: thread per i */
template <typename T>
__global__ void lin_corr_vjp_k(int64_t E, int fin, int fout, int Q, const T *ws, const T *wt,
                               const int32_t *ts, const int32_t *tt, const T *Yb, T *Xb)
{
    extern __shared__ unsigned char smraw[];
    T *sy = (T *)smraw;
    const int64_t qm = (int64_t)Q * fout * fin;
    for (int64_t e = blockIdx.x; e < E; e += gridDim.x) {
        for (int q = threadIdx.x; q < 2 * Q * fout; q += blockDim.x)
            sy[q] = Yb[e * 2 * Q * fout + q];
        __syncthreads();
        const T *Ws = ws ? ws + ts[e] * qm : NULL, *Wt = wt ? wt + tt[e] * qm : NULL;
        for (int ji = threadIdx.x; ji < 2 * Q * fin; ji += blockDim.x) {
            const int j = ji / fin, i = ji % fin, m = j / 2;
            T acc = 0;
            for (int o = 0; o < fout; o++) {
                const int64_t wo = ((int64_t)m * fout + o) * fin + i;
                T wv = 0;
                if (Ws)
                    wv += Ws[wo];
                if (Wt)
                    wv += Wt[wo];
                acc += sy[j * fout + o] * wv;
            }
            Xb[(e * 2 * Q + j) * fin + i] += acc;
        }
        __syncthreads();
    }
}

template <typename T>
__global__ void lin_bias_k(int64_t E, int fout, int Q, const T *bias, T *Y)
{
    const int64_t q = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (q >= E * fout)
        return;
    const int64_t e = q / fout;
    const int o = (int)(q % fout);
    Y[e * 2 * Q * fout + o] += bias[o];
}

/* The sin m = 0 slot: always zero in a model (no sin component at m = 0),
 * so its GEMM slice is replaced by a kernel that checks a tile of edges for
 * zeros and then writes zeros (forward) or nothing (VJP); a tile with any
 * nonzero (or NaN) input is computed exactly by plain dot products. */
#define SIN0_TILE 16
template <typename T>
__global__ void lin_sin0_fwd_k(int64_t E, int fin, int fout, int Q, const T *w, const T *X, T *Y)
{
    for (int64_t e0 = (int64_t)blockIdx.x * SIN0_TILE; e0 < E;
         e0 += (int64_t)gridDim.x * SIN0_TILE) {
        const int nt = E - e0 < SIN0_TILE ? (int)(E - e0) : SIN0_TILE;
        int any = 0;
        for (int q = threadIdx.x; q < nt * fin; q += blockDim.x)
            any |= X[((e0 + q / fin) * 2 * Q + 1) * fin + q % fin] != (T)0;
        any = __syncthreads_or(any);
        for (int q = threadIdx.x; q < nt * fout; q += blockDim.x) {
            const int64_t e = e0 + q / fout;
            const int o = q % fout;
            T acc = 0;
            if (any) {
                const T *x = X + (e * 2 * Q + 1) * fin, *wo = w + (int64_t)o * fin;
                for (int i = 0; i < fin; i++)
                    acc += x[i] * wo[i];
            }
            Y[(e * 2 * Q + 1) * fout + o] = acc;
        }
        __syncthreads();
    }
}

template <typename T>
__global__ void lin_sin0_vjp_k(int64_t E, int fin, int fout, int Q, const T *w, const T *Yb, T *Xb)
{
    for (int64_t e0 = (int64_t)blockIdx.x * SIN0_TILE; e0 < E;
         e0 += (int64_t)gridDim.x * SIN0_TILE) {
        const int nt = E - e0 < SIN0_TILE ? (int)(E - e0) : SIN0_TILE;
        int any = 0;
        for (int q = threadIdx.x; q < nt * fout; q += blockDim.x)
            any |= Yb[((e0 + q / fout) * 2 * Q + 1) * fout + q % fout] != (T)0;
        any = __syncthreads_or(any);
        if (any)
            for (int q = threadIdx.x; q < nt * fin; q += blockDim.x) {
                const int64_t e = e0 + q / fin;
                const int i = q % fin;
                const T *y = Yb + (e * 2 * Q + 1) * fout;
                T acc = 0;
                for (int o = 0; o < fout; o++)
                    acc += y[o] * w[(int64_t)o * fin + i];
                Xb[(e * 2 * Q + 1) * fin + i] += acc;
            }
        __syncthreads();
    }
}

/* blocks of the sin m = 0 kernels: a tile of edges each, at most 16 per SM (they loop) */
static unsigned sin0_blocks(int64_t E)
{
    const unsigned nb = blocks_for((E + SIN0_TILE - 1) / SIN0_TILE, 1), cap = state().n_sm * 16;
    return nb < cap ? nb : cap;
}

/* Y = Linear(X); layer_sin0: the caller (the layer forward on a sin0_zero
 * layer) adds the bias and writes the sin m = 0 slot itself, so neither
 * kernel runs here */
template <typename T>
static void linear_fwd_run(int64_t E, const ecenet_linear_params *p, ecenet_idx tsrc,
                           ecenet_idx ttgt, const void *X_, void *Y_, bool layer_sin0)
{
    State &s = state();
    if (E <= 0)
        return;
    const T *X = (const T *)X_, *w = (const T *)p->w;
    T *Y = (T *)Y_;
    const int fin = p->fin, fout = p->fout, Q = p->Q;
    const long long sw = (long long)fout * fin;
    /* the first layer: the slots m >= 1 on the edge frame's valid columns
     * only (cuda_linear_frame.cu); cos m = 0 has no zeros and stays here */
    const bool packed = lin_frame_fwd<T>(E, p, X, Y);
    /* cos slices, m = 0..Q-1 (m = 0 only after the packed path) */
    /* the split weights (fp32, ops.h w_split): high parts at ws, low ones Q·sw further */
    const T *ws = (const T *)p->w_split;
    gemm_lin<T>(CUBLAS_OP_T, fout, E, fin, w, fin, sw, X, 2 * Q * fin, 2LL * fin, (T)0, Y, 2 * Q * fout,
              2LL * fout, packed ? 1 : Q, ws, Q * sw);
    /* sin slices, m = 1..Q-1, and the sin m = 0 slot */
    if (Q > 1 && !packed)
        gemm_lin<T>(CUBLAS_OP_T, fout, E, fin, w + sw, fin, sw, X + 3 * fin, 2 * Q * fin,
                    2LL * fin, (T)0, Y + 3 * fout, 2 * Q * fout, 2LL * fout, Q - 1,
                    ws ? ws + sw : NULL, Q * sw);
    if (!layer_sin0) {
        lin_sin0_fwd_k<T><<<sin0_blocks(E), 256>>>(E, fin, fout, Q, w, X, Y);
        CU_LAUNCHED();
    }
    if (p->w_src || p->w_tgt) {
        const size_t sm = (size_t)2 * Q * fin * sizeof(T);
        smem_allow(lin_corr_fwd_k<T>, sm);
        lin_corr_fwd_k<T><<<grid_items(E), 256, sm>>>(E, fin, fout, Q, (const T *)p->w_src,
                                                      (const T *)p->w_tgt, tsrc, ttgt, X, Y);
        CU_LAUNCHED();
    }
    if (p->bias && !layer_sin0) {
        lin_bias_k<T><<<blocks_for(E * fout, 256), 256>>>(E, fout, Q, (const T *)p->bias, Y);
        CU_LAUNCHED();
    }
}

template <typename T>
static void linear_fwd(int64_t E, const ecenet_linear_params *p, ecenet_idx tsrc, ecenet_idx ttgt,
                       const void *X, void *Y)
{
    linear_fwd_run<T>(E, p, tsrc, ttgt, X, Y, false);
}

static bool lin_tc(int64_t E, const ecenet_linear_params *p, const float *Yb, float *Xb)
{
    return lin_tc_vjp(E, p, Yb, Xb);
}
static bool lin_tc(int64_t, const ecenet_linear_params *, const double *, double *)
{
    return false; /* fp64: cuBLAS DGEMM */
}

/* Xb += Linearᵀ(Yb); sin0_zero: Yb's sin m = 0 slot is zero (the RealSpace
 * VJP's output on a sin0_zero layer), so that slice adds nothing and is
 * skipped */
template <typename T>
static void linear_vjp_run(int64_t E, const ecenet_linear_params *p, ecenet_idx tsrc,
                           ecenet_idx ttgt, const void *Yb_, void *Xb_, bool sin0_zero)
{
    State &s = state();
    if (E <= 0)
        return;
    const T *Yb = (const T *)Yb_, *w = (const T *)p->w;
    T *Xb = (T *)Xb_;
    const int fin = p->fin, fout = p->fout, Q = p->Q;
    const long long sw = (long long)fout * fin;
    /* else split TF32 on tensor cores (cuda_layer_tc.cu) */
    if (!lin_tc(E, p, Yb, Xb)) {
        /* the first layer: the slots m >= 1 on the valid columns only
         * (cuda_linear_frame.cu, which leaves Xb's structurally zero
         * positions, the sin m = 0 slot among them, alone); cos m = 0 here */
        const bool packed = lin_frame_vjp<T>(E, p, Yb, Xb);
        /* Xbᵀ += W_mᵀ·Ybᵀ: from w_t (the forward's operand layout, op T) when
         * the engine uploaded it — cuBLAS picks faster kernels there than for
         * op N on w (doc/design.md, tools/device/gemm_bench.cu) */
        const T *wa = p->w_t ? (const T *)p->w_t : w;
        const cublasOperation_t ta = p->w_t ? CUBLAS_OP_T : CUBLAS_OP_N;
        const int lda = p->w_t ? fout : fin;
        const T *ws = p->w_t ? (const T *)p->w_t_split : NULL;
        gemm_lin<T>(ta, fin, E, fout, wa, lda, sw, Yb, 2 * Q * fout, 2LL * fout, (T)1, Xb,
                    2 * Q * fin, 2LL * fin, packed ? 1 : Q, ws, Q * sw);
        if (Q > 1 && !packed)
            gemm_lin<T>(ta, fin, E, fout, wa + sw, lda, sw, Yb + 3 * fout, 2 * Q * fout,
                        2LL * fout, (T)1, Xb + 3 * fin, 2 * Q * fin, 2LL * fin, Q - 1,
                        ws ? ws + sw : NULL, Q * sw);
        if (!sin0_zero && !packed) {
            lin_sin0_vjp_k<T><<<sin0_blocks(E), 256>>>(E, fin, fout, Q, w, Yb, Xb);
            CU_LAUNCHED();
        }
    }
    if (p->w_src || p->w_tgt) {
        const size_t sm = (size_t)2 * Q * fout * sizeof(T);
        smem_allow(lin_corr_vjp_k<T>, sm);
        lin_corr_vjp_k<T><<<grid_items(E), 256, sm>>>(E, fin, fout, Q, (const T *)p->w_src,
                                                      (const T *)p->w_tgt, tsrc, ttgt, Yb, Xb);
        CU_LAUNCHED();
    }
}

template <typename T>
static void linear_vjp(int64_t E, const ecenet_linear_params *p, ecenet_idx tsrc, ecenet_idx ttgt,
                       const void *Yb, void *Xb)
{
    linear_vjp_run<T>(E, p, tsrc, ttgt, Yb, Xb, false);
}

/* ---- residual add ------------------------------------------------------------------------------------ */

template <typename T> __global__ void add_k(int64_t n, const T *X, T *Y)
{
    for (int64_t k = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; k < n;
         k += (int64_t)gridDim.x * blockDim.x)
        Y[k] += X[k];
}

__global__ void add4_k(int64_t n4, const float4 *X, float4 *Y)
{
    for (int64_t k = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; k < n4;
         k += (int64_t)gridDim.x * blockDim.x) {
        float4 x = X[k], y = Y[k];
        y.x += x.x;
        y.y += x.y;
        y.z += x.z;
        y.w += x.w;
        Y[k] = y;
    }
}

__global__ void add2_k(int64_t n2, const double2 *X, double2 *Y)
{
    for (int64_t k = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; k < n2;
         k += (int64_t)gridDim.x * blockDim.x) {
        double2 x = X[k], y = Y[k];
        y.x += x.x;
        y.y += x.y;
        Y[k] = y;
    }
}

template <typename T> static void add(int64_t n, const void *X_, void *Y_)
{
    State &s = state();
    if (n <= 0)
        return;
    const T *X = (const T *)X_;
    T *Y = (T *)Y_;
    const unsigned cap = (unsigned)s.n_sm * 16;
    const int vec = 16 / (int)sizeof(T);
    if (n % vec == 0 && aligned16(X) && aligned16(Y)) {
        unsigned nb = blocks_for(n / vec, 256);
        nb = nb > cap ? cap : nb;
        if (sizeof(T) == 4)
            add4_k<<<nb, 256>>>(n / 4, (const float4 *)X, (float4 *)Y);
        else
            add2_k<<<nb, 256>>>(n / 2, (const double2 *)X, (double2 *)Y);
    } else {
        unsigned nb = blocks_for(n, 256);
        nb = nb > cap ? cap : nb;
        add_k<T><<<nb, 256>>>(n, X, Y);
    }
    CU_LAUNCHED();
}

/* ---- fused layer: Z = Linear(X); X += RealSpace(Z) in one pass over Z and X ------------------------- */

static bool layer_tc(int64_t E, const ecenet_linear_params *lin,
                     const ecenet_realspace_params *rs, float *X, float *Z)
{
    return layer_tc_fwd(E, lin, rs, X, Z);
}
static bool layer_tc(int64_t, const ecenet_linear_params *, const ecenet_realspace_params *,
                     double *, double *)
{
    return false; /* fp64: cuBLAS DGEMM + RealSpace */
}
static bool layer_tc_v(int64_t E, const ecenet_linear_params *lin,
                       const ecenet_realspace_params *rs, const float *Z, float *Xbar)
{
    return layer_tc_vjp(E, lin, rs, Z, Xbar);
}
static bool layer_tc_v(int64_t, const ecenet_linear_params *, const ecenet_realspace_params *,
                       const double *, double *)
{
    return false;
}

template <typename T>
static void layer_fwd(int64_t E, const ecenet_linear_params *lin,
                      const ecenet_realspace_params *rs, ecenet_idx tsrc, ecenet_idx ttgt, void *X,
                      void *Z)
{
    if (layer_tc(E, lin, rs, (T *)X, (T *)Z))
        return; /* one tensor-core kernel (cuda_layer_tc.cu) */
    /* a sin0_zero layer: the GEMMs, then bias, Z's sin m = 0 zeros and
     * X += RealSpace(Z) in one kernel (two passes over Z's slots fewer) */
    const bool z0 = rs_layer_fits<T>(rs, lin->bias, Z, X);
    linear_fwd_run<T>(E, lin, tsrc, ttgt, X, Z, z0);
    layer_rs_fwd<T>(E, rs, tsrc, ttgt, (const T *)lin->bias, (T *)Z, (T *)X, z0);
}

/* tmp = RealSpace_vjp(Z, Xbar) (overwritten: no zeroing pass); Xbar += Linearᵀ(tmp) */
template <typename T>
static void layer_vjp(int64_t E, const ecenet_linear_params *lin,
                      const ecenet_realspace_params *rs, ecenet_idx tsrc, ecenet_idx ttgt,
                      const void *Z, void *Xbar, void *tmp)
{
    if (layer_tc_v(E, lin, rs, (const T *)Z, (T *)Xbar))
        return; /* one wgmma kernel (cuda_layer_wg.cu), no tmp */
    layer_rs_vjp<T>(E, rs, tsrc, ttgt, (const T *)Z, (const T *)Xbar, (T *)tmp);
    linear_vjp_run<T>(E, lin, tsrc, ttgt, tmp, Xbar, rs->sin0_zero);
}

template <typename T> void fill_layers(ecenet_backend &b)
{
    b.linear_fwd = linear_fwd<T>;
    b.linear_vjp = linear_vjp<T>;
    b.add = add<T>;
    b.layer_fwd = layer_fwd<T>;
    b.layer_vjp = layer_vjp<T>;
    if (sizeof(T) == sizeof(float))
        b.linear_split = linear_split_f32;
}

template void fill_layers<float>(ecenet_backend &);
template void fill_layers<double>(ecenet_backend &);

} // namespace ecn_cu

extern "C" int ecn_cuda_set_fp32_gemm(int mode)
{
    int &m = ecn_cu::x3_cfg().mode;
    const int old = m;
    m = mode ? 1 : 0;
    return old;
}

extern "C" unsigned long long ecn_cuda_fp32_gemm_x3_runs(void) { return ecn_cu::x3_runs.load(); }

extern "C" unsigned long long ecn_cuda_fp32_gemm_x3_pre_runs(void)
{
    return ecn_cu::x3_pre_runs.load();
}
