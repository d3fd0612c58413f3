/* Block-diagonal Wigner-D of the bond frame (SPEC §7); mirrors
 * src/ref/ref_wigner.c. One warp per edge: D¹ from r̂ (two charts, the exact
 * |r̂x| < 0.9 rule, r̂ in double so the chart matches the reference), higher l
 * by the CG recursion with the warp's lanes over the output entries and the
 * intermediates in shared memory; all arithmetic in double, stored in T. */
#include "cuda_common.cuh"
#include "cuda_ops.cuh"

namespace ecn_cu {

/* A forward-mode dual number along one axis of r̂: the VJP's three lanes
 * each carry one derivative (one lane carrying all three held 36 doubles in
 * registers and ran the chart alone). */
struct dual1 {
    double v, g;
};
__device__ static inline dual1 operator+(dual1 a, dual1 b) { return {a.v + b.v, a.g + b.g}; }
__device__ static inline dual1 operator*(dual1 a, dual1 b)
{
    return {a.v * b.v, a.g * b.v + a.v * b.g};
}
__device__ static inline dual1 operator/(dual1 a, dual1 b)
{
    const double v = a.v / b.v;
    return {v, (a.g - v * b.g) / b.v};
}
__device__ static inline dual1 operator-(dual1 a) { return {-a.v, -a.g}; }
__device__ static inline dual1 nsqrt(dual1 a)
{
    const double s = sqrt(a.v);
    return {s, a.g / (2.0 * s)};
}
__device__ static inline double nsqrt(double a) { return sqrt(a); }
/* r̂'s component c as a number: for dual1 the variable along axis k */
template <typename N> __device__ static inline N var(double v, int c, int k);
template <> __device__ inline double var<double>(double v, int, int) { return v; }
template <> __device__ inline dual1 var<dual1>(double v, int c, int k)
{
    return {v, c == k ? 1.0 : 0.0};
}

/* D¹[g][k] (rows g in (y,z,x)); chart A (|r̂x| < 0.9): reference axis x̂, else ŷ.
 * N = double for the values (forward), dual1 for one column of dD¹/dr̂ (VJP);
 * the same operations in the same order as ref's wigner_d1.h. */
template <typename N> __device__ static void d1_from_rhat(const double rh[3], int k, N D[9])
{
    const N x = var<N>(rh[0], 0, k), y = var<N>(rh[1], 1, k), z = var<N>(rh[2], 2, k);
    const N zero = var<N>(0.0, -1, k);
    if (fabs(rh[0]) < 0.9) {
        const N s = nsqrt(y * y + z * z);
        D[0] = z / s;
        D[1] = y;
        D[2] = -(x * y / s);
        D[3] = -(y / s);
        D[4] = z;
        D[5] = -(x * z / s);
        D[6] = zero;
        D[7] = x;
        D[8] = s;
    } else {
        const N s = nsqrt(x * x + z * z);
        D[0] = zero;
        D[1] = y;
        D[2] = s;
        D[3] = x / s;
        D[4] = z;
        D[5] = -(y * z / s);
        D[6] = -(z / s);
        D[7] = x;
        D[8] = -(x * y / s);
    }
}

__host__ __device__ static inline int cg_off(int l)
{
    int off = 0;
    for (int k = 2; k < l; k++)
        off += 3 * (2 * k - 1) * (2 * k + 1);
    return off;
}

static inline int fwd_warp_doubles(int L)
{
    const int n3 = 2 * L + 1, n2 = 2 * L - 1 > 0 ? 2 * L - 1 : 1;
    int v = 9 + 2 * n3 * n3 + 2 * 3 * n2 * n3;
    return (v + 1) & ~1;
}

static inline int vjp_warp_doubles(int L)
{
    const int n3 = 2 * L + 1, n2 = 2 * L - 1 > 0 ? 2 * L - 1 : 1, nq = 3 * n2;
    int v = 18 + 2 * n3 * n3 + nq * n3 + nq * nq + n2 * n2;
    return (v + 1) & ~1;
}

/* Kernels specialised for l_max = LT <= WIG_LT: every loop bound is then a
 * compile-time constant, so a lane's dot products unroll with their loads
 * issued together, and the CG table sits in shared memory. The generic
 * kernels (LT = 0, any l_max) read the table from global memory, and each
 * of their dot products is a chain of dependent loads: latency bounded them
 * (wigner_vjp_k 321 µs a call, 79 GB/s, on the H100 bench). */
#define WIG_LT 4
#define WIG_UNROLL _Pragma("unroll")

/* CG entry i: from shared memory (LT > 0) or global */
template <int LT, typename T>
__device__ static inline double cgv(const double *sG, const T *cg, int i)
{
    return LT ? sG[i] : (double)cg[i];
}

/* LT > 0: the block copies the CG table (gsh entries) into smem; returns where
 * the warps' buffers start */
template <int LT, typename T> __device__ static inline double *stage_cg(double *smem, const T *cg, int gsh)
{
    if (LT) {
        for (int q = threadIdx.x; q < gsh; q += blockDim.x)
            smem[q] = (double)cg[q];
        __syncthreads();
    }
    return smem + (LT ? gsh : 0);
}

template <typename T, int LT>
__global__ void wigner_fwd_k(int64_t E, int Lrt, int ND, const T *cg, const T *d, const T *r, T *D,
                             int wdoubles, int gsh)
{
    extern __shared__ double smem[];
    const int L = LT ? LT : Lrt;
    const int lane = threadIdx.x & 31, w = threadIdx.x >> 5, wpb = blockDim.x >> 5;
    const double *sG = smem;
    double *sD1 = stage_cg<LT>(smem, cg, gsh) + (size_t)w * wdoubles;
    const int n3m = 2 * L + 1, n2m = 2 * L - 1 > 0 ? 2 * L - 1 : 1;
    double *bufA = sD1 + 9, *bufB = bufA + n3m * n3m, *U = bufB + n3m * n3m, *V = U + 3 * n2m * n3m;
    for (int64_t e = (int64_t)blockIdx.x * wpb + w; e < E; e += (int64_t)gridDim.x * wpb) {
        T *De = D + e * ND;
        if (lane == 0) {
            De[0] = (T)1.0;
            if (L >= 1) {
                const double re = (double)r[e];
                const double rh[3] = {(double)d[3 * e] / re, (double)d[3 * e + 1] / re,
                                      (double)d[3 * e + 2] / re};
                double D1[9];
                d1_from_rhat<double>(rh, -1, D1);
                for (int q = 0; q < 9; q++) {
                    sD1[q] = D1[q];
                    bufA[q] = D1[q];
                    De[1 + q] = (T)D1[q];
                }
            }
        }
        __syncwarp();
        double *Dp = bufA, *Dl = bufB;
        WIG_UNROLL
        for (int l = 2; l <= L; l++) {
            const int n2 = 2 * l - 1, n3 = 2 * l + 1, go = cg_off(l);
            WIG_UNROLL
            for (int q = lane; q < 3 * n2 * n3; q += 32) {
                const int a = q / (n2 * n3), bp = (q / n3) % n2, k = q % n3;
                double acc = 0.0;
                WIG_UNROLL
                for (int b = 0; b < n2; b++)
                    acc += cgv<LT>(sG, cg, go + (a * n2 + b) * n3 + k) * Dp[b * n2 + bp];
                U[q] = acc;
            }
            __syncwarp();
            WIG_UNROLL
            for (int q = lane; q < 3 * n2 * n3; q += 32) {
                const int ap = q / (n2 * n3), rest = q % (n2 * n3);
                double acc = 0.0;
                WIG_UNROLL
                for (int a = 0; a < 3; a++)
                    acc += sD1[a * 3 + ap] * U[a * n2 * n3 + rest];
                V[q] = acc;
            }
            __syncwarp();
            T *Dout = De + dblock(l);
            WIG_UNROLL
            for (int q = lane; q < n3 * n3; q += 32) {
                const int k = q / n3, kp = q % n3;
                double acc = 0.0;
                WIG_UNROLL
                for (int qq = 0; qq < 3 * n2; qq++)
                    acc += V[qq * n3 + k] * cgv<LT>(sG, cg, go + qq * n3 + kp);
                Dl[q] = acc;
                Dout[q] = (T)acc;
            }
            __syncwarp();
            double *t = Dp;
            Dp = Dl;
            Dl = t;
        }
        __syncwarp();
    }
}

template <typename T, int LT>
__global__ void wigner_vjp_k(int64_t E, int Lrt, int ND, const T *cg, const T *d, const T *r,
                             const T *D, const T *Dbar, T *dbar, int wdoubles, int gsh)
{
    extern __shared__ double smem[];
    const int L = LT ? LT : Lrt;
    const int lane = threadIdx.x & 31, w = threadIdx.x >> 5, wpb = blockDim.x >> 5;
    const int n3m = 2 * L + 1, n2m = 2 * L - 1 > 0 ? 2 * L - 1 : 1, nqm = 3 * n2m;
    const double *sG = smem;
    double *sD1 = stage_cg<LT>(smem, cg, gsh) + (size_t)w * wdoubles, *D1bar = sD1 + 9;
    double *Gb = D1bar + 9, *carry = Gb + n3m * n3m, *tmp = carry + n3m * n3m;
    double *Mt = tmp + nqm * n3m, *sDp = Mt + nqm * nqm;
    for (int64_t e = (int64_t)blockIdx.x * wpb + w; e < E; e += (int64_t)gridDim.x * wpb) {
        const T *De = D + e * ND, *Db = Dbar + e * ND;
        if (lane < 9) {
            sD1[lane] = (double)De[1 + lane];
            D1bar[lane] = (double)Db[1 + lane];
        }
        __syncwarp();
        WIG_UNROLL
        for (int l = L; l >= 2; l--) {
            const int n2 = 2 * l - 1, n3 = 2 * l + 1, nq = 3 * n2, go = cg_off(l);
            const T *Dl_bar = Db + dblock(l), *Dp = De + dblock(l - 1);
            WIG_UNROLL
            for (int q = lane; q < n3 * n3; q += 32)
                Gb[q] = (double)Dl_bar[q] + (l < L ? carry[q] : 0.0);
            WIG_UNROLL
            for (int q = lane; q < n2 * n2; q += 32)
                sDp[q] = (double)Dp[q];
            __syncwarp();
            WIG_UNROLL
            for (int q = lane; q < nq * n3; q += 32) {
                const int qa = q / n3, kp = q % n3;
                double acc = 0.0;
                WIG_UNROLL
                for (int k = 0; k < n3; k++)
                    acc += cgv<LT>(sG, cg, go + qa * n3 + k) * Gb[k * n3 + kp];
                tmp[q] = acc;
            }
            __syncwarp();
            WIG_UNROLL
            for (int q = lane; q < nq * nq; q += 32) {
                const int qa = q / nq, qp = q % nq;
                double acc = 0.0;
                WIG_UNROLL
                for (int kp = 0; kp < n3; kp++)
                    acc += tmp[qa * n3 + kp] * cgv<LT>(sG, cg, go + qp * n3 + kp);
                Mt[q] = acc;
            }
            __syncwarp();
            if (lane < 9) {
                const int a = lane / 3, ap = lane % 3;
                double acc = 0.0;
                WIG_UNROLL
                for (int b = 0; b < n2; b++)
                    WIG_UNROLL
                    for (int bp = 0; bp < n2; bp++)
                        acc += Mt[(a * n2 + b) * nq + ap * n2 + bp] * sDp[b * n2 + bp];
                D1bar[lane] += acc;
            }
            WIG_UNROLL
            for (int q = lane; q < n2 * n2; q += 32) {
                const int b = q / n2, bp = q % n2;
                double acc = 0.0;
                WIG_UNROLL
                for (int a = 0; a < 3; a++)
                    WIG_UNROLL
                    for (int ap = 0; ap < 3; ap++)
                        acc += Mt[(a * n2 + b) * nq + ap * n2 + bp] * sD1[a * 3 + ap];
                carry[q] = acc;
            }
            __syncwarp();
        }
        /* D̄¹ -> r̂̄ -> d̄: lane k < 3 takes the derivative along r̂_k and
         * writes d̄_k; r̂ = d/r gives ∂r̂_α/∂d_β = δ_αβ/r - d_α d_β/r³ */
        double hb = 0.0, dk = 0.0, re = 1.0;
        if (lane < 3) {
            re = (double)r[e];
            const double dv[3] = {(double)d[3 * e], (double)d[3 * e + 1], (double)d[3 * e + 2]};
            const double rh[3] = {dv[0] / re, dv[1] / re, dv[2] / re};
            dual1 D1d[9];
            d1_from_rhat<dual1>(rh, lane, D1d);
            for (int q = 0; q < 9; q++)
                hb += (D1bar[q] + (L >= 2 ? carry[q] : 0.0)) * D1d[q].g;
            dk = (double)d[3 * e + lane]; /* dv[lane], not an indexed local array */
        }
        const double part = hb * dk;
        const double dot = __shfl_sync(0xffffffffu, part, 0) + __shfl_sync(0xffffffffu, part, 1) +
                           __shfl_sync(0xffffffffu, part, 2);
        if (lane < 3)
            dbar[3 * e + lane] += (T)(hb / re - dot * dk / (re * re * re));
        __syncwarp();
    }
}

/* Launch a Wigner kernel as kern(E, args..., wdoubles, gsh): warps per block
 * (at most 8, within 48 KiB with the CG table) and a grid of at most one
 * wave of resident blocks (the warps loop over edges) */
template <typename K, typename... A>
static void wigner_launch(K kern, const char *op, int64_t E, int wdoubles, int gsh, A... args)
{
    const size_t per_warp = (size_t)wdoubles * sizeof(double), gbytes = (size_t)gsh * sizeof(double);
    const size_t room = 48 * 1024 > gbytes ? 48 * 1024 - gbytes : 0;
    const int n = (int)(room / per_warp), wpb = n < 1 ? 1 : (n > 8 ? 8 : n);
    const size_t smem = gbytes + per_warp * wpb;
    if (!smem_ready(kern, smem, op))
        return;
    const int64_t nb = (E + wpb - 1) / wpb, cap = resident_blocks(kern, 32 * wpb, smem);
    kern<<<grid_items(nb < cap ? nb : cap), 32 * wpb, smem>>>(E, args..., wdoubles, gsh);
    CU_LAUNCHED();
}

template <typename T, int LT>
static void wigner_fwd_launch(int64_t E, int L, const void *cg, const void *d, const void *r,
                              void *D)
{
    wigner_launch(wigner_fwd_k<T, LT>, "wigner_fwd (l_max too large)", E, fwd_warp_doubles(L),
                  LT ? cg_off(L + 1) : 0, L, dblock(L + 1), (const T *)cg, (const T *)d,
                  (const T *)r, (T *)D);
}

template <typename T, int LT>
static void wigner_vjp_launch(int64_t E, int L, const void *cg, const void *d, const void *r,
                              const void *D, const void *Dbar, void *dbar)
{
    wigner_launch(wigner_vjp_k<T, LT>, "wigner_vjp (l_max too large)", E, vjp_warp_doubles(L),
                  LT ? cg_off(L + 1) : 0, L, dblock(L + 1), (const T *)cg, (const T *)d,
                  (const T *)r, (const T *)D, (const T *)Dbar, (T *)dbar);
}

template <typename T>
static void wigner_fwd(int64_t E, int L, const void *cg, const void *d, const void *r, void *D)
{
    state();
    if (E <= 0)
        return;
    static_assert(WIG_LT == 4, "the cases below cover l_max 1..WIG_LT");
    switch (L) {
    case 1: wigner_fwd_launch<T, 1>(E, L, cg, d, r, D); break;
    case 2: wigner_fwd_launch<T, 2>(E, L, cg, d, r, D); break;
    case 3: wigner_fwd_launch<T, 3>(E, L, cg, d, r, D); break;
    case 4: wigner_fwd_launch<T, 4>(E, L, cg, d, r, D); break;
    default: wigner_fwd_launch<T, 0>(E, L, cg, d, r, D); break;
    }
}

template <typename T>
static void wigner_vjp(int64_t E, int L, const void *cg, const void *d, const void *r,
                       const void *D, const void *Dbar, void *dbar)
{
    state();
    if (E <= 0 || L < 1)
        return;
    switch (L) {
    case 1: wigner_vjp_launch<T, 1>(E, L, cg, d, r, D, Dbar, dbar); break;
    case 2: wigner_vjp_launch<T, 2>(E, L, cg, d, r, D, Dbar, dbar); break;
    case 3: wigner_vjp_launch<T, 3>(E, L, cg, d, r, D, Dbar, dbar); break;
    case 4: wigner_vjp_launch<T, 4>(E, L, cg, d, r, D, Dbar, dbar); break;
    default: wigner_vjp_launch<T, 0>(E, L, cg, d, r, D, Dbar, dbar); break;
    }
}

template <typename T> void fill_wigner(ecenet_backend &b)
{
    b.wigner_fwd = wigner_fwd<T>;
    b.wigner_vjp = wigner_vjp<T>;
}

template void fill_wigner<float>(ecenet_backend &);
template void fill_wigner<double>(ecenet_backend &);

} // namespace ecn_cu
