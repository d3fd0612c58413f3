/* The RealSpace nonlinearity (SPEC §11) on the GPU: its kernels, their
 * launch configuration, and the RealSpace halves of the fused layer entries
 * (layer_fwd, layer_vjp in cuda_layers.cu); mirrors ref_realspace_fwd and
 * ref_realspace_vjp (ref_layers.c). The device helpers it shares with the
 * tensor-core layers (cuda_layer_tc.cu's epilogue, cuda_layer_wg.cu's
 * fused VJP) are in cuda_realspace.cuh.
 *
 * A thread per row, consecutive threads on consecutive rows (coalesced); a
 * row is one edge's V consecutive channels, V = 16/sizeof(T) (4 floats, 2
 * doubles: each of the 2Q inputs and outputs is one 16-byte load / store)
 * when Q == 4, F % V == 0 and the tensors are 16-byte aligned, else a single
 * (edge, channel) (the scalar kernels; ecn_cuda_set_rs_vector / env
 * ECENET_RS_VECTOR select them for measurements). The 2Q inputs and outputs
 * and the grid values live in registers, the θ tables in shared memory
 * interleaved per grid point (16-byte broadcast loads, each serving the
 * row's V channels); SiLU in fp32 through the fast exp/rcp intrinsics; the
 * VJP recomputes the grid. Both kinds of kernel do the same operations per
 * element in the same order (bitwise identical results), except on a
 * grid_sym layer, where the vector kernels fold the grid (rs_grid_sym_v,
 * rs_vjp_sym_v; ECENET_RS_SYM=0 turns that off) and the scalar ones do not.
 * Launch configuration: ECENET_RS_BLOCK rows and ECENET_RS_WARPS warps per
 * block (read once; default 512 rows, 4 warps), i.e. each thread does
 * ECENET_RS_BLOCK / (32·ECENET_RS_WARPS) rows; with vector rows a block
 * covers V times as many channels. */
#include <atomic>
#include <mutex>
#include <stdlib.h>
#include <type_traits>
#include "ecenet.h"
#include "cuda_backend.h"
#include "cuda_common.cuh"
#include "cuda_ops.cuh"
#include "cuda_realspace.cuh"

namespace ecn_cu {

/* ---- RealSpace (helpers in cuda_realspace.cuh) ---------------------------------------------------- */

/* Y (=|+=) RealSpace(X) */
template <typename T, int QT, bool ACC, bool SILU>
__global__ void __launch_bounds__(512) rs_fwd_k(int64_t R, RS<T> a, int rpt,
                                                 const T *__restrict__ X, T *Y)
{
    extern __shared__ __align__(16) unsigned char smraw[];
    T *sm = (T *)smraw;
    rs_tables<T, QT>(a, sm);
    const int F = a.F, Q = a.Q, G = a.G;
    const bool full = Q == QT; /* no padded slots */
    const int64_t base = (int64_t)blockIdx.x * rpt * blockDim.x + threadIdx.x;
    for (int j = 0; j < rpt; j++) {
        const int64_t r = base + (int64_t)j * blockDim.x;
        if (r >= R)
            return;
        int64_t e;
        int f;
        rs_row(r, R, F, e, f);
        const T *xe = X + e * 2 * Q * F + f;
        T xc[QT], xs[QT], yc[QT], ys[QT];
#pragma unroll
        for (int m = 0; m < QT; m++) {
            xc[m] = (full || m < Q) ? xe[(2 * m) * F] : (T)0;
            xs[m] = (full || m < Q) ? xe[(2 * m + 1) * F] : (T)0;
            yc[m] = 0;
            ys[m] = 0;
        }
        T scale, shift;
        rs_affine(a, e, f, scale, shift);
        for (int k = 0; k < G; k++) {
            T cs[QT], ss[QT], ca[QT], sa[QT];
            rs_tab_k<T, QT>(sm, k, cs, ss, ca, sa);
            T c = 0, s = 0;
#pragma unroll
            for (int m = 0; m < QT; m++) {
                c += xc[m] * cs[m];
                s += xs[m] * ss[m];
            }
            const T g = rs_act<T, SILU>(a.act, scale * (c + s) + shift);
#pragma unroll
            for (int m = 0; m < QT; m++) {
                yc[m] += g * ca[m];
                ys[m] += g * sa[m];
            }
        }
        T *ye = Y + e * 2 * Q * F + f;
#pragma unroll
        for (int m = 0; m < QT; m++)
            if (full || m < Q) {
                if (ACC) {
                    ye[(2 * m) * F] += yc[m];
                    ye[(2 * m + 1) * F] += ys[m];
                } else {
                    ye[(2 * m) * F] = yc[m];
                    ye[(2 * m + 1) * F] = ys[m];
                }
            }
    }
}

/* Xbar (=|+=) RealSpace_vjp(X, Ybar), the grid recomputed from X */
template <typename T, int QT, bool ACC, bool SILU>
__global__ void __launch_bounds__(512) rs_vjp_k(int64_t R, RS<T> a, int rpt,
                                                 const T *__restrict__ X,
                                                 const T *__restrict__ Yb, T *Xb)
{
    extern __shared__ __align__(16) unsigned char smraw[];
    T *sm = (T *)smraw;
    rs_tables<T, QT>(a, sm);
    const int F = a.F, Q = a.Q, G = a.G;
    const bool full = Q == QT;
    const int64_t base = (int64_t)blockIdx.x * rpt * blockDim.x + threadIdx.x;
    for (int j = 0; j < rpt; j++) {
        const int64_t r = base + (int64_t)j * blockDim.x;
        if (r >= R)
            return;
        int64_t e;
        int f;
        rs_row(r, R, F, e, f);
        const int64_t o = e * 2 * Q * F + f;
        T xc[QT], xs[QT], bc[QT], bs[QT], gc[QT], gs[QT];
#pragma unroll
        for (int m = 0; m < QT; m++) {
            const bool ok = full || m < Q;
            xc[m] = ok ? X[o + (2 * m) * F] : (T)0;
            xs[m] = ok ? X[o + (2 * m + 1) * F] : (T)0;
            bc[m] = ok ? Yb[o + (2 * m) * F] : (T)0;
            bs[m] = ok ? Yb[o + (2 * m + 1) * F] : (T)0;
            gc[m] = 0;
            gs[m] = 0;
        }
        T scale, shift;
        rs_affine(a, e, f, scale, shift);
        for (int k = 0; k < G; k++) {
            T cs[QT], ss[QT], ca[QT], sa[QT];
            rs_tab_k<T, QT>(sm, k, cs, ss, ca, sa);
            T gbar = 0, c = 0, s = 0;
#pragma unroll
            for (int m = 0; m < QT; m++) {
                gbar += bc[m] * ca[m] + bs[m] * sa[m];
                c += xc[m] * cs[m];
                s += xs[m] * ss[m];
            }
            const T fb = gbar * rs_act_g<T, SILU>(a.act, scale * (c + s) + shift) * scale;
#pragma unroll
            for (int m = 0; m < QT; m++) {
                gc[m] += fb * cs[m];
                gs[m] += fb * ss[m];
            }
        }
#pragma unroll
        for (int m = 0; m < QT; m++)
            if (full || m < Q) {
                if (ACC) {
                    Xb[o + (2 * m) * F] += gc[m];
                    Xb[o + (2 * m + 1) * F] += gs[m];
                } else {
                    Xb[o + (2 * m) * F] = gc[m];
                    Xb[o + (2 * m + 1) * F] = gs[m];
                }
            }
    }
}

/* ---- RealSpace, vector rows ------------------------------------------------------------------------
 * The same per-element arithmetic as rs_fwd_k / rs_vjp_k (the same operations
 * in the same order, so the results are bitwise identical), for Q = 4, but a
 * row is V = 16/sizeof(T) consecutive channels of one edge (4 floats, 2
 * doubles): each of the 2Q = 8 inputs and outputs of a row is one 16-byte
 * load or store (consecutive threads on consecutive 16 bytes: a warp moves
 * 512 contiguous bytes per instruction), and each θ-table load from shared
 * memory serves VC channels at a time (VC = V: one pass through the grid,
 * the channels' independent chains interleaved; VC < V: V/VC passes, fewer
 * live temporaries). Used when F % V == 0 and every tensor pointer is
 * 16-byte aligned. */

constexpr int RSV_Q = 4;

template <typename T> struct Vec;
template <> struct Vec<float> {
    static const int n = 4;
};
template <> struct Vec<double> {
    static const int n = 2;
};

__device__ static inline void vld(const float *p, float (&v)[4])
{
    const float4 q = *reinterpret_cast<const float4 *>(p);
    v[0] = q.x;
    v[1] = q.y;
    v[2] = q.z;
    v[3] = q.w;
}
__device__ static inline void vld(const double *p, double (&v)[2])
{
    const double2 q = *reinterpret_cast<const double2 *>(p);
    v[0] = q.x;
    v[1] = q.y;
}
__device__ static inline void vld(const float *p, float (&v)[2])
{
    const float2 q = *reinterpret_cast<const float2 *>(p);
    v[0] = q.x;
    v[1] = q.y;
}
/* the store intrinsic (st.global.wb, the default policy) keeps each store one
 * 16-byte transaction: plain float4 assignments were split into scalars */
__device__ static inline void vst(float *p, const float (&v)[2])
{
    __stwb(reinterpret_cast<float2 *>(p), make_float2(v[0], v[1]));
}
__device__ static inline void vst(float *p, const float (&v)[4])
{
    __stwb(reinterpret_cast<float4 *>(p), make_float4(v[0], v[1], v[2], v[3]));
}
__device__ static inline void vst(double *p, const double (&v)[2])
{
    __stwb(reinterpret_cast<double2 *>(p), make_double2(v[0], v[1]));
}

/* out (=|+=) (ac, as) for the 8 slots of one vector row at p (ACC: the 8 old
 * values are all loaded first, then added (old + new, as the scalar kernel)
 * and stored). Z0 (a sin0_zero layer) with ACC: the sin m = 0 slot, whose
 * output is exactly zero, is neither read nor written. */
template <typename T, int V, bool ACC, bool Z0 = false>
__device__ static inline void rs_vstore(T *p, int F, const T (&ac)[RSV_Q][V],
                                        const T (&as)[RSV_Q][V])
{
    if (ACC) {
        T oc[RSV_Q][V], os[RSV_Q][V];
#pragma unroll
        for (int m = 0; m < RSV_Q; m++) {
            vld(p + (2 * m) * F, oc[m]);
            if (!Z0 || m)
                vld(p + (2 * m + 1) * F, os[m]);
        }
#pragma unroll
        for (int m = 0; m < RSV_Q; m++) {
#pragma unroll
            for (int v = 0; v < V; v++) {
                oc[m][v] += ac[m][v];
                os[m][v] += as[m][v];
            }
            vst(p + (2 * m) * F, oc[m]);
            if (!Z0 || m)
                vst(p + (2 * m + 1) * F, os[m]);
        }
    } else {
#pragma unroll
        for (int m = 0; m < RSV_Q; m++) {
            vst(p + (2 * m) * F, ac[m]);
            vst(p + (2 * m + 1) * F, as[m]);
        }
    }
}

/* the 2Q slot vectors (V channels each) of one row at p; Z0: the sin m = 0
 * slot is not read and taken as zero (its table entries are zero, so its
 * value never matters) */
template <typename T, int V, bool Z0 = false>
__device__ static inline void rs_vload(const T *p, int F, T (&c)[RSV_Q][V], T (&s)[RSV_Q][V])
{
#pragma unroll
    for (int m = 0; m < RSV_Q; m++) {
        vld(p + (2 * m) * F, c[m]);
        if (!Z0 || m)
            vld(p + (2 * m + 1) * F, s[m]);
        else
#pragma unroll
            for (int v = 0; v < V; v++)
                s[m][v] = (T)0;
    }
}

/* Vector row r of a vector kernel: its input slots from X, zeroed
 * accumulators, the per-channel affine; returns the row's offset (edge e,
 * slot 0, first channel) */
template <typename T, int V, bool Z0 = false>
__device__ static inline int64_t rs_vrow(const RS<T> &a, int64_t r, int64_t R, const T *X,
                                         T (&xc)[RSV_Q][V], T (&xs)[RSV_Q][V], T (&yc)[RSV_Q][V],
                                         T (&ys)[RSV_Q][V], T (&scale)[V], T (&shift)[V],
                                         int &f0)
{
    const int F = a.F;
    int64_t e;
    int fv;
    rs_row(r, R, F / V, e, fv);
    f0 = fv * V;
    const int64_t o = e * 2 * RSV_Q * F + f0;
    rs_vload<T, V, Z0>(X + o, F, xc, xs);
#pragma unroll
    for (int m = 0; m < RSV_Q; m++)
#pragma unroll
        for (int v = 0; v < V; v++)
            yc[m][v] = ys[m][v] = (T)0;
#pragma unroll
    for (int v = 0; v < V; v++)
        rs_affine(a, e, f0 + v, scale[v], shift[v]);
    return o;
}

/* Y (=|+=) RealSpace(X); R = E·F/V vector rows. No sin0_zero variant: skipping
 * that slot here measured slower on the H200 (0.207 -> 0.240 ms, fp32, E = 44k),
 * unlike the VJP (rs_vjp_launch's z0). */
template <typename T, int VC, bool ACC, bool SILU, bool SYM = false>
__global__ void __launch_bounds__(512) rs_fwd_vk(int64_t R, RS<T> a, int rpt,
                                                  const T *__restrict__ X, T *Y)
{
    constexpr int V = Vec<T>::n, Q = RSV_Q;
    static_assert(V % VC == 0, "VC must divide V");
    extern __shared__ __align__(16) unsigned char smraw[];
    T *sm = (T *)smraw;
    rs_tables<T, Q>(a, sm);
    const int F = a.F, G = a.G;
    const int64_t base = (int64_t)blockIdx.x * rpt * blockDim.x + threadIdx.x;
    for (int j = 0; j < rpt; j++) {
        const int64_t r = base + (int64_t)j * blockDim.x;
        if (r >= R)
            return;
        T xc[Q][V], xs[Q][V], yc[Q][V], ys[Q][V], scale[V], shift[V];
        int f0;
        const int64_t o = rs_vrow(a, r, R, X, xc, xs, yc, ys, scale, shift, f0);
#pragma unroll
        for (int v0 = 0; v0 < V; v0 += VC)
            if (SYM)
                rs_grid_sym_v<T, Q, V, VC, SILU>(sm, G, a.act, v0, xc, xs, scale, shift, yc, ys);
            else
                rs_grid_v<T, Q, V, VC, SILU>(sm, G, a.act, v0, xc, xs, scale, shift, yc, ys);
        rs_vstore<T, V, ACC>(Y + o, F, yc, ys);
    }
}

/* The layer forward of a sin0_zero layer, X += RealSpace(Z), with the
 * linear's epilogue: Z's cos m = 0 slot gets the bias on the way in and is
 * stored back (Z stays Linear(X), the same floating-point sum as
 * lin_bias_k), Z's sin m = 0 slot is written zero without being read, and
 * X's sin m = 0 slot (whose RealSpace output is exactly zero) is left alone.
 * Otherwise the operations of rs_fwd_vk<ACC = true> in the same order. */
template <typename T, int VC, bool SILU, bool SYM = false>
__global__ void __launch_bounds__(512) rs_layer_fwd_vk(int64_t R, RS<T> a, int rpt,
                                                        const T *__restrict__ bias, T *Z, T *X)
{
    constexpr int V = Vec<T>::n, Q = RSV_Q;
    static_assert(V % VC == 0, "VC must divide V");
    extern __shared__ __align__(16) unsigned char smraw[];
    T *sm = (T *)smraw;
    rs_tables<T, Q>(a, sm);
    const int F = a.F, G = a.G;
    const int64_t base = (int64_t)blockIdx.x * rpt * blockDim.x + threadIdx.x;
    for (int j = 0; j < rpt; j++) {
        const int64_t r = base + (int64_t)j * blockDim.x;
        if (r >= R)
            return;
        T xc[Q][V], xs[Q][V], yc[Q][V], ys[Q][V], scale[V], shift[V];
        int f0;
        const int64_t o = rs_vrow<T, V, true>(a, r, R, Z, xc, xs, yc, ys, scale, shift, f0);
        if (bias) {
            T b[V];
            vld(bias + f0, b);
#pragma unroll
            for (int v = 0; v < V; v++)
                xc[0][v] += b[v];
            vst(Z + o, xc[0]);
        }
        vst(Z + o + F, xs[0]); /* zeros */
#pragma unroll
        for (int v0 = 0; v0 < V; v0 += VC)
            if (SYM)
                rs_grid_sym_v<T, Q, V, VC, SILU, true>(sm, G, a.act, v0, xc, xs, scale, shift, yc,
                                                       ys);
            else
                rs_grid_v<T, Q, V, VC, SILU, true>(sm, G, a.act, v0, xc, xs, scale, shift, yc, ys);
        rs_vstore<T, V, true, true>(X + o, F, yc, ys);
    }
}

/* Xbar (=|+=) RealSpace_vjp(X, Ybar), the grid recomputed from X; R = E·F/V vector rows.
 * Z0 (a sin0_zero layer): the sin m = 0 slots of X and Ybar are not read (their
 * table entries are zero, so they never matter); that slot of the output is
 * exactly zero (still stored when overwriting, skipped when accumulating). */
template <typename T, int VC, bool ACC, bool SILU, bool Z0 = false, int V = Vec<T>::n,
          bool SYM = false>
__global__ void __launch_bounds__(512) rs_vjp_vk(int64_t R, RS<T> a, int rpt,
                                                  const T *__restrict__ X,
                                                  const T *__restrict__ Yb, T *Xb)
{
    constexpr int Q = RSV_Q;
    static_assert(V % VC == 0, "VC must divide V");
    extern __shared__ __align__(16) unsigned char smraw[];
    T *sm = (T *)smraw;
    rs_tables<T, Q>(a, sm);
    const int F = a.F, G = a.G;
    const int64_t base = (int64_t)blockIdx.x * rpt * blockDim.x + threadIdx.x;
    for (int j = 0; j < rpt; j++) {
        const int64_t r = base + (int64_t)j * blockDim.x;
        if (r >= R)
            return;
        T xc[Q][V], xs[Q][V], bc[Q][V], bs[Q][V], gc[Q][V], gs[Q][V], scale[V], shift[V];
        int f0;
        const int64_t o = rs_vrow<T, V, Z0>(a, r, R, X, xc, xs, gc, gs, scale, shift, f0);
        rs_vload<T, V, Z0>(Yb + o, F, bc, bs);
#pragma unroll
        for (int v0 = 0; v0 < V; v0 += VC) {
            if constexpr (SYM)
                rs_vjp_sym_v<T, Q, V, VC, SILU, Z0>(sm, G, a.act, v0, xc, xs, bc, bs, scale,
                                                    shift, gc, gs);
            else
                rs_vjp_grid_v<T, Q, V, VC, SILU, Z0>(sm, G, a.act, v0, xc, xs, bc, bs, scale,
                                                     shift, gc, gs);
        }
        rs_vstore<T, V, ACC, Z0>(Xb + o, F, gc, gs);
    }
}

/* Channels per pass through the grid (VC) of the vector kernels, chosen from
 * the ptxas report (sm_90, at most 128 registers under __launch_bounds__(512)):
 * fp32 fwd 95 (SiLU) / 107 registers, fp32 VJP 128, fp64 fwd 128, all without
 * spills at VC = V. The fp64 VJP holds 48 doubles of row data plus 16 of
 * tables: at VC = 1 it spills 0-56 bytes unfolded and 16-96 bytes folded,
 * depending on the variant (none unfolded in the SiLU layer VJP of a
 * sin0_zero layer and in the accumulating VJP), and is still faster than
 * the scalar kernel (H100, E = 44,000, eighteenth session: VJP += 1.325 ->
 * 0.937 ms unfolded, 0.864 folded; layer VJP 0.864 -> 0.840 / 0.732), so it
 * is no longer left to the scalar kernel. */
template <typename T> struct RsVC;
template <> struct RsVC<float> {
    static const int fwd = 4, vjp = 4;
};
template <> struct RsVC<double> {
    static const int fwd = 2, vjp = 1;
};

/* vector mode: 0 scalar kernels only; 1 (default) the vector kernels wherever
 * they apply. Env ECENET_RS_VECTOR=0|1, read once. */
static int rs_vec_mode;
static std::once_flag rs_vec_once;

static int clamp_mode(long v) { return v <= 0 ? 0 : 1; }

static int &rs_vec()
{
    std::call_once(rs_vec_once, [] {
        rs_vec_mode = ecn_env_int("ECENET_RS_VECTOR", 1, 0, 1);
    });
    return rs_vec_mode;
}

/* the vector kernels apply: Q == 4, F a multiple of V, 16-byte aligned tensors */
template <typename T>
static bool rs_vec_fits(const ecenet_realspace_params *p, const void *A, const void *B,
                        const void *C)
{
    return p->Q == RSV_Q && p->F % Vec<T>::n == 0 && aligned16(A) && aligned16(B) &&
           aligned16(C);
}

/* fp32 SiLU VJP: vector rows of 2 channels (8-byte loads) instead of 4 —
 * fewer registers, more warps per SM; the same bits, faster on the H200
 * (doc/performance.md; the forwards gain nothing from it). Env
 * ECENET_RS_VJP_V=4 selects the 4-channel rows (default 2), read once. */
static bool rs_vjp_v2()
{
    static int v2;
    static std::once_flag once;
    std::call_once(once, [] {
        static const char *const rows[] = {"2", "4"};
        v2 = ecn_env_pick("ECENET_RS_VJP_V", 0, rows, 2) == 0;
    });
    return v2;
}

/* the folded vector kernels on a grid_sym layer (rs_grid_sym_v, rs_vjp_sym_v),
 * as in omp: on by default, env ECENET_RS_SYM=0 (read once) turns them off.
 * They remove a quarter of the fp32 kernels' instructions (ncu, H100, E =
 * 44,000: forward 145.3M -> 107.4M warp instructions, layer VJP 235.1M ->
 * 165.7M), which the fp32 kernels, memory-bound on an H100, do not show
 * there; the fp64 ones gain 5-13% (layer forward 0.802 -> 0.758 ms, layer
 * VJP 0.840 -> 0.732). The scalar kernels and the mma.sync tensor-core layer's
 * epilogue (cuda_layer_tc.cu) do not fold; the wgmma one (cuda_layer_wg.cu) does. */
static std::atomic<unsigned long long> rs_sym_runs; /* launches of the folded kernels */

/* The scalar kernels' template for p, passed to f as compile-time constants
 * (std::integral_constant): table slots QT = 4, 8 or 16 (Q <= QT) and the
 * SiLU specialisation, which exists for Q = 4. */
template <typename Fn> static void rs_scalar(const ecenet_realspace_params *p, Fn f)
{
    using Q4 = std::integral_constant<int, 4>;
    if (p->Q == 4 && p->act == ECENET_ACT_SILU)
        f(Q4(), std::true_type());
    else if (p->Q <= 4)
        f(Q4(), std::false_type());
    else if (p->Q <= 8)
        f(std::integral_constant<int, 8>(), std::false_type());
    else
        f(std::integral_constant<int, 16>(), std::false_type());
}

static bool rs_sym_on()
{
    static bool on;
    static std::once_flag once;
    std::call_once(once, [] {
        on = ecn_env_int("ECENET_RS_SYM", 1, 0, 1) != 0;
    });
    return on;
}
static bool rs_sym(const ecenet_realspace_params *p) { return rs_sym_on() && p->grid_sym; }

template <typename T, bool ACC>
static void rs_fwd_launch(int64_t E, const ecenet_realspace_params *p, ecenet_idx ts,
                          ecenet_idx tt, const T *X, T *Y)
{
    State &s = state();
    if (E * p->F <= 0)
        return;
    if (p->Q > 16) {
        fail(-2, "realspace: more than 16 angular slots", __FILE__, __LINE__);
        return;
    }
    const RS<T> a = rs_args<T>(p, ts, tt);
    const bool vec = rs_vec() >= 1 && rs_vec_fits<T>(p, X, Y, Y);
    const int64_t R = E * p->F / (vec ? Vec<T>::n : 1); /* rows: channels or vectors of V */
    const int th = 32 * s.rs_warps, rpt = s.rs_block / th;
    const unsigned nb = blocks_for(R, s.rs_block);
    if (vec) { /* the vector kernel: pick its template, one launch */
        constexpr int VC = RsVC<T>::fwd;
        const bool silu = p->act == ECENET_ACT_SILU, sym = rs_sym(p);
        auto K = silu ? (sym ? rs_fwd_vk<T, VC, ACC, true, true> : rs_fwd_vk<T, VC, ACC, true, false>)
                      : (sym ? rs_fwd_vk<T, VC, ACC, false, true>
                             : rs_fwd_vk<T, VC, ACC, false, false>);
        const size_t sm = (size_t)4 * RSV_Q * p->G * sizeof(T);
        smem_allow(K, sm);
        K<<<nb, th, sm>>>(R, a, rpt, X, Y);
        CU_LAUNCHED();
        rs_sym_runs += sym;
        return;
    }
    rs_scalar(p, [&](auto qt, auto silu) {
        constexpr int QT = decltype(qt)::value;
        constexpr bool SILU = decltype(silu)::value;
        const size_t sm = (size_t)4 * QT * p->G * sizeof(T);
        smem_allow(rs_fwd_k<T, QT, ACC, SILU>, sm);
        rs_fwd_k<T, QT, ACC, SILU><<<nb, th, sm>>>(R, a, rpt, X, Y);
    });
    CU_LAUNCHED();
}

/* the layer forward of a sin0_zero layer runs rs_layer_fwd_vk: vector rows apply */
template <typename T>
bool rs_layer_fits(const ecenet_realspace_params *p, const void *bias, const void *Z,
                   const void *X)
{
    return p->sin0_zero && rs_vec() >= 1 && rs_vec_fits<T>(p, Z, X, X) &&
           (!bias || aligned16(bias));
}

/* X += RealSpace(Z) with the linear's epilogue (rs_layer_fwd_vk), where rs_layer_fits */
template <typename T>
static void rs_layer_fwd_launch(int64_t E, const ecenet_realspace_params *p, ecenet_idx ts,
                                ecenet_idx tt, const T *bias, T *Z, T *X)
{
    State &s = state();
    if (E * p->F <= 0)
        return;
    const RS<T> a = rs_args<T>(p, ts, tt);
    const int64_t R = E * p->F / Vec<T>::n;
    const int th = 32 * s.rs_warps, rpt = s.rs_block / th;
    const unsigned nb = blocks_for(R, s.rs_block);
    const size_t sm = (size_t)4 * RSV_Q * p->G * sizeof(T);
    constexpr int VC = RsVC<T>::fwd;
    const bool sym = rs_sym(p);
    auto K = p->act == ECENET_ACT_SILU
                 ? (sym ? rs_layer_fwd_vk<T, VC, true, true> : rs_layer_fwd_vk<T, VC, true, false>)
                 : (sym ? rs_layer_fwd_vk<T, VC, false, true>
                        : rs_layer_fwd_vk<T, VC, false, false>);
    smem_allow(K, sm);
    K<<<nb, th, sm>>>(R, a, rpt, bias, Z, X);
    CU_LAUNCHED();
    rs_sym_runs += sym;
}

/* the vector VJP kernel for (z0, sym) */
template <typename T, int VC, bool ACC, bool SILU, int V>
static auto rs_vjp_pick(bool z0, bool sym) -> decltype(&rs_vjp_vk<T, VC, ACC, SILU, true, V, true>)
{
    return z0 ? (sym ? rs_vjp_vk<T, VC, ACC, SILU, true, V, true>
                     : rs_vjp_vk<T, VC, ACC, SILU, true, V, false>)
              : (sym ? rs_vjp_vk<T, VC, ACC, SILU, false, V, true>
                     : rs_vjp_vk<T, VC, ACC, SILU, false, V, false>);
}

/* z0: use the sin0_zero variant of the vector kernel (the layer VJP) */
template <typename T, bool ACC>
static void rs_vjp_launch(int64_t E, const ecenet_realspace_params *p, ecenet_idx ts,
                          ecenet_idx tt, const T *X, const T *Yb, T *Xb, bool z0 = false)
{
    State &s = state();
    if (E * p->F <= 0)
        return;
    if (p->Q > 16) {
        fail(-2, "realspace: more than 16 angular slots", __FILE__, __LINE__);
        return;
    }
    const RS<T> a = rs_args<T>(p, ts, tt);
    const bool vec = rs_vec() >= 1 && rs_vec_fits<T>(p, X, Yb, Xb);
    const bool v2 = sizeof(T) == 4 && vec && p->act == ECENET_ACT_SILU && rs_vjp_v2();
    /* rows: channels or vectors of V */
    const int64_t R = E * p->F / (v2 ? 2 : vec ? Vec<T>::n : 1);
    const int th = 32 * s.rs_warps, rpt = s.rs_block / th;
    const unsigned nb = blocks_for(R, s.rs_block);
    if (vec) { /* the vector kernel: pick its template, one launch */
        constexpr int VC = RsVC<T>::vjp, V = Vec<T>::n;
        const bool silu = p->act == ECENET_ACT_SILU, sym = rs_sym(p);
        auto K = silu ? rs_vjp_pick<T, VC, ACC, true, V>(z0, sym)
                      : rs_vjp_pick<T, VC, ACC, false, V>(z0, sym);
        if constexpr (sizeof(T) == 4)
            if (v2)
                K = rs_vjp_pick<T, 2, ACC, true, 2>(z0, sym);
        const size_t sm = (size_t)4 * RSV_Q * p->G * sizeof(T);
        smem_allow(K, sm);
        K<<<nb, th, sm>>>(R, a, rpt, X, Yb, Xb);
        CU_LAUNCHED();
        rs_sym_runs += sym;
        return;
    }
    rs_scalar(p, [&](auto qt, auto silu) {
        constexpr int QT = decltype(qt)::value;
        constexpr bool SILU = decltype(silu)::value;
        const size_t sm = (size_t)4 * QT * p->G * sizeof(T);
        smem_allow(rs_vjp_k<T, QT, ACC, SILU>, sm);
        rs_vjp_k<T, QT, ACC, SILU><<<nb, th, sm>>>(R, a, rpt, X, Yb, Xb);
    });
    CU_LAUNCHED();
}

template <typename T>
static void realspace_fwd(int64_t E, const ecenet_realspace_params *p, ecenet_idx tsrc,
                          ecenet_idx ttgt, const void *X, void *Y)
{
    rs_fwd_launch<T, false>(E, p, tsrc, ttgt, (const T *)X, (T *)Y);
}

template <typename T>
static void realspace_vjp(int64_t E, const ecenet_realspace_params *p, ecenet_idx tsrc,
                          ecenet_idx ttgt, const void *X, const void *Ybar, void *Xbar)
{
    rs_vjp_launch<T, true>(E, p, tsrc, ttgt, (const T *)X, (const T *)Ybar, (T *)Xbar,
                           p->sin0_zero);
}

/* ---- the RealSpace halves of the fused layer entries (cuda_ops.cuh) ------------------------------- */

/* the RealSpace part of layer_fwd, X += RealSpace(Z); z0 (rs_layer_fits):
 * with the linear's epilogue (bias, Z's sin m = 0 zeros) in the same kernel */
template <typename T>
void layer_rs_fwd(int64_t E, const ecenet_realspace_params *rs, ecenet_idx tsrc, ecenet_idx ttgt,
                  const T *bias, T *Z, T *X, bool z0)
{
    if (z0)
        rs_layer_fwd_launch<T>(E, rs, tsrc, ttgt, bias, Z, X);
    else
        rs_fwd_launch<T, true>(E, rs, tsrc, ttgt, Z, X);
}

/* tmp = RealSpace_vjp(Z, Xbar), overwriting tmp (no zeroing pass) */
template <typename T>
void layer_rs_vjp(int64_t E, const ecenet_realspace_params *rs, ecenet_idx tsrc, ecenet_idx ttgt,
                  const T *Z, const T *Xbar, T *tmp)
{
    rs_vjp_launch<T, false>(E, rs, tsrc, ttgt, Z, Xbar, tmp, rs->sin0_zero);
}

/* the RealSpace kernels of layer_fwd / layer_vjp alone (measurement hook);
 * where the fused sin0_zero kernel does not apply, layer_fwd's bias belongs
 * to its linear, so this path leaves it out */
template <typename T>
static void rs_layer_kernels(int which, int64_t E, const ecenet_realspace_params *p,
                             const void *bias, void *Z, void *X, void *tmp)
{
    if (which == 0)
        layer_rs_fwd<T>(E, p, NULL, NULL, (const T *)bias, (T *)Z, (T *)X,
                        rs_layer_fits<T>(p, bias, Z, X));
    else
        layer_rs_vjp<T>(E, p, NULL, NULL, (const T *)Z, (const T *)X, (T *)tmp);
}

template <typename T> void fill_realspace(ecenet_backend &b)
{
    b.realspace_fwd = realspace_fwd<T>;
    b.realspace_vjp = realspace_vjp<T>;
}

template void fill_realspace<float>(ecenet_backend &);
template bool rs_layer_fits<float>(const ecenet_realspace_params *, const void *, const void *,
                                 const void *);
template void layer_rs_fwd<float>(int64_t, const ecenet_realspace_params *, ecenet_idx, ecenet_idx,
                                const float *, float *, float *, bool);
template void layer_rs_vjp<float>(int64_t, const ecenet_realspace_params *, ecenet_idx, ecenet_idx,
                                const float *, const float *, float *);
template void fill_realspace<double>(ecenet_backend &);
template bool rs_layer_fits<double>(const ecenet_realspace_params *, const void *, const void *,
                                 const void *);
template void layer_rs_fwd<double>(int64_t, const ecenet_realspace_params *, ecenet_idx, ecenet_idx,
                                const double *, double *, double *, bool);
template void layer_rs_vjp<double>(int64_t, const ecenet_realspace_params *, ecenet_idx, ecenet_idx,
                                const double *, const double *, double *);
} // namespace ecn_cu

extern "C" void ecn_cuda_rs_layer_kernels(int prec, int which, int64_t E,
                                          const ecenet_realspace_params *p, const void *bias,
                                          void *Z, void *X, void *tmp)
{
    if (prec == ECENET_F64)
        ecn_cu::rs_layer_kernels<double>(which, E, p, bias, Z, X, tmp);
    else
        ecn_cu::rs_layer_kernels<float>(which, E, p, bias, Z, X, tmp);
}
extern "C" unsigned long long ecn_cuda_rs_sym_runs(void) { return ecn_cu::rs_sym_runs.load(); }
extern "C" int ecn_cuda_rs_sym_on(void) { return ecn_cu::rs_sym_on(); }
extern "C" int ecn_cuda_set_rs_vector(int on)
{
    int &v = ecn_cu::rs_vec();
    const int old = v;
    if (on >= 0)
        v = ecn_cu::clamp_mode(on);
    return old;
}
