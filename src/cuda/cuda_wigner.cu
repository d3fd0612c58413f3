/* Block-diagonal Wigner-D of the bond frame (SPEC §7); mirrors
 * src/ref/ref_wigner.c. One warp per edge: D¹ from r̂ (two charts, the exact
 * |r̂x| < 0.9 rule, r̂ in double so the chart matches the reference), higher l
 * by the CG recursion with the warp's lanes over the output entries and the
 * intermediates in shared memory; all arithmetic in double, stored in T. */
#include "cuda_common.cuh"
#include "cuda_ops.cuh"

namespace ecn_cu {

struct dual {
    double v, g[3];
};

__device__ static inline dual dconst(double v)
{
    dual r;
    r.v = v;
    r.g[0] = r.g[1] = r.g[2] = 0.0;
    return r;
}
__device__ static inline dual dvar(double v, int k)
{
    dual r = dconst(v);
    r.g[k] = 1.0;
    return r;
}
__device__ static inline dual dmul(dual a, dual b)
{
    dual r;
    r.v = a.v * b.v;
    for (int k = 0; k < 3; k++)
        r.g[k] = a.g[k] * b.v + a.v * b.g[k];
    return r;
}
__device__ static inline dual ddiv(dual a, dual b)
{
    dual r;
    r.v = a.v / b.v;
    for (int k = 0; k < 3; k++)
        r.g[k] = (a.g[k] - r.v * b.g[k]) / b.v;
    return r;
}
__device__ static inline dual dneg(dual a)
{
    for (int k = 0; k < 3; k++)
        a.g[k] = -a.g[k];
    a.v = -a.v;
    return a;
}
__device__ static inline dual dsqrt(dual a)
{
    dual r;
    r.v = sqrt(a.v);
    for (int k = 0; k < 3; k++)
        r.g[k] = a.g[k] / (2.0 * r.v);
    return r;
}
__device__ static inline dual dadd(dual a, dual b)
{
    a.v += b.v;
    for (int k = 0; k < 3; k++)
        a.g[k] += b.g[k];
    return a;
}

/* D¹[g][k] (rows g in (y,z,x)); chart A (|r̂x| < 0.9): reference axis x̂, else ŷ */
__device__ static void d1_from_rhat(const double rh[3], dual D[9])
{
    dual x = dvar(rh[0], 0), y = dvar(rh[1], 1), z = dvar(rh[2], 2);
    if (fabs(rh[0]) < 0.9) {
        dual s = dsqrt(dadd(dmul(y, y), dmul(z, z)));
        D[0] = ddiv(z, s);
        D[1] = y;
        D[2] = dneg(ddiv(dmul(x, y), s));
        D[3] = dneg(ddiv(y, s));
        D[4] = z;
        D[5] = dneg(ddiv(dmul(x, z), s));
        D[6] = dconst(0.0);
        D[7] = x;
        D[8] = s;
    } else {
        dual s = dsqrt(dadd(dmul(x, x), dmul(z, z)));
        D[0] = dconst(0.0);
        D[1] = y;
        D[2] = s;
        D[3] = ddiv(x, s);
        D[4] = z;
        D[5] = dneg(ddiv(dmul(y, z), s));
        D[6] = dneg(ddiv(z, s));
        D[7] = x;
        D[8] = dneg(ddiv(dmul(x, y), s));
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

template <typename T>
__global__ void wigner_fwd_k(int64_t E, int L, int ND, const T *cg, const T *d, const T *r, T *D,
                             int wdoubles)
{
    extern __shared__ double smem[];
    const int lane = threadIdx.x & 31, w = threadIdx.x >> 5, wpb = blockDim.x >> 5;
    double *sD1 = smem + (size_t)w * wdoubles;
    const int n3m = 2 * L + 1, n2m = 2 * L - 1 > 0 ? 2 * L - 1 : 1;
    double *bufA = sD1 + 9, *bufB = bufA + n3m * n3m, *U = bufB + n3m * n3m, *V = U + 3 * n2m * n3m;
    for (int64_t e = (int64_t)blockIdx.x * wpb + w; e < E; e += (int64_t)gridDim.x * wpb) {
        T *De = D + e * ND;
        if (lane == 0) {
            De[0] = (T)1.0;
            if (L >= 1) {
                const double re = (double)r[e];
                double rh[3] = {(double)d[3 * e] / re, (double)d[3 * e + 1] / re,
                                (double)d[3 * e + 2] / re};
                dual D1[9];
                d1_from_rhat(rh, D1);
                for (int q = 0; q < 9; q++) {
                    sD1[q] = D1[q].v;
                    bufA[q] = D1[q].v;
                    De[1 + q] = (T)D1[q].v;
                }
            }
        }
        __syncwarp();
        double *Dp = bufA, *Dl = bufB;
        for (int l = 2; l <= L; l++) {
            const int n2 = 2 * l - 1, n3 = 2 * l + 1;
            const T *G = cg + cg_off(l);
            for (int q = lane; q < 3 * n2 * n3; q += 32) {
                const int a = q / (n2 * n3), bp = (q / n3) % n2, k = q % n3;
                double acc = 0.0;
                for (int b = 0; b < n2; b++)
                    acc += (double)G[(a * n2 + b) * n3 + k] * Dp[b * n2 + bp];
                U[q] = acc;
            }
            __syncwarp();
            for (int q = lane; q < 3 * n2 * n3; q += 32) {
                const int ap = q / (n2 * n3), rest = q % (n2 * n3);
                double acc = 0.0;
                for (int a = 0; a < 3; a++)
                    acc += sD1[a * 3 + ap] * U[a * n2 * n3 + rest];
                V[q] = acc;
            }
            __syncwarp();
            T *Dout = De + dblock(l);
            for (int q = lane; q < n3 * n3; q += 32) {
                const int k = q / n3, kp = q % n3;
                double acc = 0.0;
                for (int qq = 0; qq < 3 * n2; qq++)
                    acc += V[qq * n3 + k] * (double)G[qq * n3 + kp];
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

template <typename T>
static void wigner_fwd(int64_t E, int L, const void *cg, const void *d, const void *r, void *D)
{
    state();
    if (E <= 0)
        return;
    const int ND = dblock(L + 1), wd = fwd_warp_doubles(L);
    const size_t per_warp = (size_t)wd * sizeof(double);
    int wpb = (int)((48 * 1024) / per_warp);
    wpb = wpb < 1 ? 1 : (wpb > 4 ? 4 : wpb);
    const size_t sm = per_warp * wpb;
    if (!smem_ready(wigner_fwd_k<T>, sm, "wigner_fwd (l_max too large)"))
        return;
    const int64_t nb = (E + wpb - 1) / wpb;
    wigner_fwd_k<T><<<grid_items(nb), 32 * wpb, sm>>>(E, L, ND, (const T *)cg, (const T *)d,
                                                      (const T *)r, (T *)D, wd);
    CU_LAUNCHED();
}

template <typename T>
__global__ void wigner_vjp_k(int64_t E, int L, int ND, const T *cg, const T *d, const T *r,
                             const T *D, const T *Dbar, T *dbar, int wdoubles)
{
    extern __shared__ double smem[];
    const int lane = threadIdx.x & 31, w = threadIdx.x >> 5, wpb = blockDim.x >> 5;
    const int n3m = 2 * L + 1, n2m = 2 * L - 1 > 0 ? 2 * L - 1 : 1, nqm = 3 * n2m;
    double *sD1 = smem + (size_t)w * wdoubles, *D1bar = sD1 + 9, *Gb = D1bar + 9;
    double *carry = Gb + n3m * n3m, *tmp = carry + n3m * n3m, *Mt = tmp + nqm * n3m;
    double *sDp = Mt + nqm * nqm;
    for (int64_t e = (int64_t)blockIdx.x * wpb + w; e < E; e += (int64_t)gridDim.x * wpb) {
        const T *De = D + e * ND, *Db = Dbar + e * ND;
        if (lane < 9) {
            sD1[lane] = (double)De[1 + lane];
            D1bar[lane] = (double)Db[1 + lane];
        }
        __syncwarp();
        for (int l = L; l >= 2; l--) {
            const int n2 = 2 * l - 1, n3 = 2 * l + 1, nq = 3 * n2;
            const T *G = cg + cg_off(l);
            const T *Dl_bar = Db + dblock(l), *Dp = De + dblock(l - 1);
            for (int q = lane; q < n3 * n3; q += 32)
                Gb[q] = (double)Dl_bar[q] + (l < L ? carry[q] : 0.0);
            for (int q = lane; q < n2 * n2; q += 32)
                sDp[q] = (double)Dp[q];
            __syncwarp();
            for (int q = lane; q < nq * n3; q += 32) {
                const int qa = q / n3, kp = q % n3;
                double acc = 0.0;
                for (int k = 0; k < n3; k++)
                    acc += (double)G[qa * n3 + k] * Gb[k * n3 + kp];
                tmp[q] = acc;
            }
            __syncwarp();
            for (int q = lane; q < nq * nq; q += 32) {
                const int qa = q / nq, qp = q % nq;
                double acc = 0.0;
                for (int kp = 0; kp < n3; kp++)
                    acc += tmp[qa * n3 + kp] * (double)G[qp * n3 + kp];
                Mt[q] = acc;
            }
            __syncwarp();
            if (lane < 9) {
                const int a = lane / 3, ap = lane % 3;
                double acc = 0.0;
                for (int b = 0; b < n2; b++)
                    for (int bp = 0; bp < n2; bp++)
                        acc += Mt[(a * n2 + b) * nq + ap * n2 + bp] * sDp[b * n2 + bp];
                D1bar[lane] += acc;
            }
            for (int q = lane; q < n2 * n2; q += 32) {
                const int b = q / n2, bp = q % n2;
                double acc = 0.0;
                for (int a = 0; a < 3; a++)
                    for (int ap = 0; ap < 3; ap++)
                        acc += Mt[(a * n2 + b) * nq + ap * n2 + bp] * sD1[a * 3 + ap];
                carry[q] = acc;
            }
            __syncwarp();
        }
        if (lane == 0 && L >= 1) {
            double D1b[9];
            for (int q = 0; q < 9; q++)
                D1b[q] = D1bar[q] + (L >= 2 ? carry[q] : 0.0);
            const double re = (double)r[e];
            const double dv[3] = {(double)d[3 * e], (double)d[3 * e + 1], (double)d[3 * e + 2]};
            double rh[3] = {dv[0] / re, dv[1] / re, dv[2] / re};
            dual D1d[9];
            d1_from_rhat(rh, D1d);
            double rhbar[3] = {0, 0, 0};
            for (int q = 0; q < 9; q++)
                for (int k = 0; k < 3; k++)
                    rhbar[k] += D1b[q] * D1d[q].g[k];
            const double dot = rhbar[0] * dv[0] + rhbar[1] * dv[1] + rhbar[2] * dv[2];
            const double r3 = re * re * re;
            for (int b = 0; b < 3; b++)
                dbar[3 * e + b] += (T)(rhbar[b] / re - dot * dv[b] / r3);
        }
        __syncwarp();
    }
}

template <typename T>
static void wigner_vjp(int64_t E, int L, const void *cg, const void *d, const void *r,
                       const void *D, const void *Dbar, void *dbar)
{
    state();
    if (E <= 0 || L < 1)
        return;
    const int ND = dblock(L + 1), wd = vjp_warp_doubles(L);
    const size_t per_warp = (size_t)wd * sizeof(double);
    int wpb = (int)((48 * 1024) / per_warp);
    wpb = wpb < 1 ? 1 : (wpb > 4 ? 4 : wpb);
    const size_t sm = per_warp * wpb;
    if (!smem_ready(wigner_vjp_k<T>, sm, "wigner_vjp (l_max too large)"))
        return;
    const int64_t nb = (E + wpb - 1) / wpb;
    wigner_vjp_k<T><<<grid_items(nb), 32 * wpb, sm>>>(E, L, ND, (const T *)cg, (const T *)d,
                                                      (const T *)r, (const T *)D,
                                                      (const T *)Dbar, (T *)dbar, wd);
    CU_LAUNCHED();
}

template <typename T> void fill_wigner(ecenet_backend &b)
{
    b.wigner_fwd = wigner_fwd<T>;
    b.wigner_vjp = wigner_vjp<T>;
}

template void fill_wigner<float>(ecenet_backend &);
template void fill_wigner<double>(ecenet_backend &);

} // namespace ecn_cu
