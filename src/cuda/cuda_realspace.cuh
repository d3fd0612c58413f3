/* RealSpace (SPEC §11) device helpers shared by the RealSpace kernels
 * (cuda_realspace.cu) and the fused tensor-core layers (cuda_layer_tc.cuh,
 * cuda_layer_wg.cu): the kernel arguments, the θ tables in shared memory,
 * the activation, the per-edge affine and the forward and VJP grids. */
#ifndef ECN_CUDA_REALSPACE_CUH
#define ECN_CUDA_REALSPACE_CUH

#include "cuda_common.cuh"

namespace ecn_cu {

template <typename T> struct RS {
    int F, Q, G, act;
    const T *cs, *ss, *ca, *sa;
    const T *scale, *shift, *scale_src, *scale_tgt, *shift_src, *shift_tgt;
    const int32_t *ts, *tt;
};

template <typename T>
static RS<T> rs_args(const ecenet_realspace_params *p, ecenet_idx ts, ecenet_idx tt)
{
    RS<T> a;
    a.F = p->F;
    a.Q = p->Q;
    a.G = p->G;
    a.act = p->act;
    a.cs = (const T *)p->cos_synth;
    a.ss = (const T *)p->sin_synth;
    a.ca = (const T *)p->cos_analysis;
    a.sa = (const T *)p->sin_analysis;
    a.scale = (const T *)p->scale;
    a.shift = (const T *)p->shift;
    a.scale_src = (const T *)p->scale_src;
    a.scale_tgt = (const T *)p->scale_tgt;
    a.shift_src = (const T *)p->shift_src;
    a.shift_tgt = (const T *)p->shift_tgt;
    a.ts = ts;
    a.tt = tt;
    return a;
}

/* Tables in shared memory, zero-padded to QT slots and interleaved per grid
 * point: tab[k][t][m], t = cos_synth, sin_synth, cos_analysis, sin_analysis,
 * so one grid point's 4·QT values are a few 16-byte (broadcast) loads. */
template <typename T, int QT>
__device__ static inline void rs_tables(const RS<T> &a, T *sm)
{
    const int G = a.G;
    for (int q = threadIdx.x; q < 4 * QT * G; q += blockDim.x) {
        const int k = q / (4 * QT), t = (q / QT) % 4, m = q % QT;
        T v = 0;
        if (m < a.Q)
            v = t == 0 ? a.cs[m * G + k]
                : t == 1 ? a.ss[m * G + k]
                : t == 2 ? a.ca[k * a.Q + m]
                         : a.sa[k * a.Q + m];
        sm[q] = v;
    }
    __syncthreads();
}

/* QT consecutive values from 16-byte aligned shared memory */
template <int QT> __device__ static inline void lds(const float *p, float (&v)[QT])
{
#pragma unroll
    for (int j = 0; j < QT / 4; j++) {
        const float4 q = reinterpret_cast<const float4 *>(p)[j];
        v[4 * j] = q.x;
        v[4 * j + 1] = q.y;
        v[4 * j + 2] = q.z;
        v[4 * j + 3] = q.w;
    }
}
template <int QT> __device__ static inline void lds(const double *p, double (&v)[QT])
{
#pragma unroll
    for (int j = 0; j < QT / 2; j++) {
        const double2 q = reinterpret_cast<const double2 *>(p)[j];
        v[2 * j] = q.x;
        v[2 * j + 1] = q.y;
    }
}

/* exp(-x) and a/b as __expf and __fdividef compute them (one MUFU op each,
 * ex2.approx and a·rcp.approx) but in their flush-to-zero forms: the plain
 * forms guard against subnormal operands with a compare and two scaling
 * multiplies around each MUFU op, which made the SiLU 11 instructions
 * instead of 5, and the fp32 RealSpace kernels issue-bound on the H200 (ncu:
 * 75% of issue slots busy in rs_fwd_vk). Here the guards barely matter: a
 * subnormal e^-x is lost in 1 + e^-x either way, 1 + e^-x >= 1, and
 * div.approx returns 0 for b > 2^126 in both forms; only a subnormal x or
 * x/b (|x| < 2^-125) becomes ±0, a change below 1.2e-38. The derivative's
 * s = 1/(1 + e^-x) is the same in both forms. */
__device__ static inline float exp_neg_ftz(float x)
{
    float r;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(x * -1.44269504f));
    return r;
}
__device__ static inline float div_ftz(float a, float b)
{
    float r;
    asm("div.approx.ftz.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b));
    return r;
}

/* activation and its derivative; SiLU in fp32 through the fast MUFU ops
 * (a few ulp, far below the fp32 tolerance) */
template <typename T, bool SILU> __device__ static inline T rs_act(int act, T x)
{
    if (SILU) {
        if (sizeof(T) == 4)
            return (T)div_ftz((float)x, 1.0f + exp_neg_ftz((float)x));
        return x / ((T)1 + exp(-x));
    }
    return act_f(act, x);
}
template <typename T, bool SILU> __device__ static inline T rs_act_g(int act, T x)
{
    if (SILU) {
        T s;
        if (sizeof(T) == 4)
            s = (T)div_ftz(1.0f, 1.0f + exp_neg_ftz((float)x));
        else
            s = (T)1 / ((T)1 + exp(-x));
        return s * ((T)1 + x * ((T)1 - s));
    }
    return act_g(act, x);
}

template <typename T>
__device__ static inline void rs_affine(const RS<T> &a, int64_t e, int f, T &scale, T &shift)
{
    scale = a.scale ? a.scale[f] : (T)1;
    shift = a.shift ? a.shift[f] : (T)0;
    if (a.scale_src)
        scale += a.scale_src[(int64_t)a.ts[e] * a.F + f];
    if (a.scale_tgt)
        scale += a.scale_tgt[(int64_t)a.tt[e] * a.F + f];
    if (a.shift_src)
        shift += a.shift_src[(int64_t)a.ts[e] * a.F + f];
    if (a.shift_tgt)
        shift += a.shift_tgt[(int64_t)a.tt[e] * a.F + f];
}

/* grid point k's table rows (cos_synth, sin_synth, cos_analysis,
 * sin_analysis; QT slots each) from the rs_tables layout */
template <typename T, int QT>
__device__ static inline void rs_tab_k(const T *tab, int k, T (&cs)[QT], T (&ss)[QT], T (&ca)[QT],
                                       T (&sa)[QT])
{
    const T *tk = tab + k * 4 * QT;
    lds<QT>(tk, cs);
    lds<QT>(tk + QT, ss);
    lds<QT>(tk + 2 * QT, ca);
    lds<QT>(tk + 3 * QT, sa);
}

/* The forward grid of V features (SPEC §11), their channels v0..v0+VC-1:
 * yc, ys += Σ_k act(scale·(Σ_m xc·cos_synth + Σ_m xs·sin_synth) + shift)
 * · (cos_analysis, sin_analysis), tables tab as rs_tables lays them out. One
 * definition for the RealSpace vector kernel and the tensor-core layer's
 * epilogue, so both do the same operations in the same order (on a grid_sym
 * layer the vector kernels run rs_grid_sym_v instead, by default). Z0 (a
 * sin0_zero layer, whose xs[0] is zero): the exact-zero sin m = 0 terms are
 * left out. */
template <typename T, int Q, int V, int VC, bool SILU, bool Z0 = false>
__device__ static inline void rs_grid_v(const T *tab, int G, int act, int v0,
                                        const T (&xc)[Q][V], const T (&xs)[Q][V],
                                        const T (&scale)[V], const T (&shift)[V], T (&yc)[Q][V],
                                        T (&ys)[Q][V])
{
    for (int k = 0; k < G; k++) {
        T cs[Q], ss[Q], ca[Q], sa[Q];
        rs_tab_k<T, Q>(tab, k, cs, ss, ca, sa);
#pragma unroll
        for (int v = v0; v < v0 + VC; v++) {
            T c = 0, s = 0;
#pragma unroll
            for (int m = 0; m < Q; m++) {
                c += xc[m][v] * cs[m];
                if (!Z0 || m) /* Z0: xs[0] and the sin m = 0 table row are zero */
                    s += xs[m][v] * ss[m];
            }
            const T g = rs_act<T, SILU>(act, scale[v] * (c + s) + shift[v]);
#pragma unroll
            for (int m = 0; m < Q; m++) {
                yc[m][v] += g * ca[m];
                ys[m][v] += g * sa[m];
            }
        }
    }
}

/* rs_grid_v on a mirror-symmetric grid (ecenet_realspace_params.grid_sym,
 * G odd): θ_0 = 0, where the sin entries are zero, then the pairs (θ_k,
 * θ_{G-k} = -θ_k), k = 1 .. (G-1)/2, from row k of the tables alone: the
 * cos and sin sums c, s once for f = c ± s, the analysis on the pair's even
 * and odd parts g+ + g-, g+ - g-. Per pair 7 FMAs of synthesis and 7 of
 * analysis (Z0) instead of 2 × 15; the activations are the same G. */
template <typename T, int Q, int V, int VC, bool SILU, bool Z0 = false>
__device__ static inline void rs_grid_sym_v(const T *tab, int G, int act, int v0,
                                            const T (&xc)[Q][V], const T (&xs)[Q][V],
                                            const T (&scale)[V], const T (&shift)[V],
                                            T (&yc)[Q][V], T (&ys)[Q][V])
{
    {
        T cs[Q], ss[Q], ca[Q], sa[Q];
        rs_tab_k<T, Q>(tab, 0, cs, ss, ca, sa);
#pragma unroll
        for (int v = v0; v < v0 + VC; v++) {
            T c = 0;
#pragma unroll
            for (int m = 0; m < Q; m++)
                c += xc[m][v] * cs[m];
            const T g = rs_act<T, SILU>(act, scale[v] * c + shift[v]);
#pragma unroll
            for (int m = 0; m < Q; m++)
                yc[m][v] += g * ca[m];
        }
    }
    for (int k = 1; 2 * k < G; k++) {
        T cs[Q], ss[Q], ca[Q], sa[Q];
        rs_tab_k<T, Q>(tab, k, cs, ss, ca, sa);
#pragma unroll
        for (int v = v0; v < v0 + VC; v++) {
            T c = 0, s = 0;
#pragma unroll
            for (int m = 0; m < Q; m++) {
                c += xc[m][v] * cs[m];
                if (!Z0 || m)
                    s += xs[m][v] * ss[m];
            }
            const T gp = rs_act<T, SILU>(act, scale[v] * (c + s) + shift[v]);
            const T gm = rs_act<T, SILU>(act, scale[v] * (c - s) + shift[v]);
            const T ge = gp + gm, go = gp - gm;
#pragma unroll
            for (int m = 0; m < Q; m++) {
                yc[m][v] += ge * ca[m];
                if (!Z0 || m)
                    ys[m][v] += go * sa[m];
            }
        }
    }
}

/* a product rounded on its own (never contracted into an FMA) */
__device__ static inline float mul_rn(float a, float b) { return __fmul_rn(a, b); }
__device__ static inline double mul_rn(double a, double b) { return __dmul_rn(a, b); }

/* The VJP grid of V features, channels v0..v0+VC-1 (SPEC §11): the grid
 * recomputed from xc, xs, then gc, gs += Σ_k scale·act'(·)·(Σ_m bc·ca + bs·sa)
 * · (cos_synth, sin_synth). One definition for rs_vjp_vk and the fused
 * wgmma layer VJP (cuda_layer_wg.cu), so both do the same operations in the
 * same order. Z0 (a sin0_zero layer): the sin m = 0 terms are exact zeros
 * (zero inputs, zero table entries) and are left out; the m = 0 product is
 * rounded on its own, as bc·ca + 0·0 was. */
template <typename T, int Q, int V, int VC, bool SILU, bool Z0>
__device__ static inline void rs_vjp_grid_v(const T *tab, int G, int act, int v0,
                                            const T (&xc)[Q][V], const T (&xs)[Q][V],
                                            const T (&bc)[Q][V], const T (&bs)[Q][V],
                                            const T (&scale)[V], const T (&shift)[V],
                                            T (&gc)[Q][V], T (&gs)[Q][V])
{
    for (int k = 0; k < G; k++) {
        T cs[Q], ss[Q], ca[Q], sa[Q];
        rs_tab_k<T, Q>(tab, k, cs, ss, ca, sa);
#pragma unroll
        for (int v = v0; v < v0 + VC; v++) {
            T gbar = 0, c = 0, s = 0;
#pragma unroll
            for (int m = 0; m < Q; m++) {
                if (Z0 && m == 0)
                    gbar += mul_rn(bc[0][v], ca[0]);
                else
                    gbar += bc[m][v] * ca[m] + bs[m][v] * sa[m];
                c += xc[m][v] * cs[m];
                if (!Z0 || m)
                    s += xs[m][v] * ss[m];
            }
            const T fb = gbar * rs_act_g<T, SILU>(act, scale[v] * (c + s) + shift[v]) * scale[v];
#pragma unroll
            for (int m = 0; m < Q; m++) {
                gc[m][v] += fb * cs[m];
                if (!Z0 || m)
                    gs[m][v] += fb * ss[m];
            }
        }
    }
}

/* The VJP grid of rs_vjp_vk on a mirror-symmetric grid (rs_grid_sym_v's
 * pairs): per pair (θ_k, -θ_k) the analysis-side sums A (cos) and B (sin)
 * give ḡ = A ± B, the recomputed grid f = c ± s, and the synthesis-side
 * updates take the pair's even and odd parts f̄+ + f̄-, f̄+ - f̄-. */
template <typename T, int Q, int V, int VC, bool SILU, bool Z0>
__device__ static inline void rs_vjp_sym_v(const T *tab, int G, int act, int v0,
                                           const T (&xc)[Q][V], const T (&xs)[Q][V],
                                           const T (&bc)[Q][V], const T (&bs)[Q][V],
                                           const T (&scale)[V], const T (&shift)[V],
                                           T (&gc)[Q][V], T (&gs)[Q][V])
{
    {
        T cs[Q], ss[Q], ca[Q], sa[Q];
        rs_tab_k<T, Q>(tab, 0, cs, ss, ca, sa);
#pragma unroll
        for (int v = v0; v < v0 + VC; v++) {
            T A = 0, c = 0;
#pragma unroll
            for (int m = 0; m < Q; m++) {
                A += bc[m][v] * ca[m];
                c += xc[m][v] * cs[m];
            }
            const T fb = A * rs_act_g<T, SILU>(act, scale[v] * c + shift[v]) * scale[v];
#pragma unroll
            for (int m = 0; m < Q; m++)
                gc[m][v] += fb * cs[m];
        }
    }
    for (int k = 1; 2 * k < G; k++) {
        T cs[Q], ss[Q], ca[Q], sa[Q];
        rs_tab_k<T, Q>(tab, k, cs, ss, ca, sa);
#pragma unroll
        for (int v = v0; v < v0 + VC; v++) {
            T A = 0, B = 0, c = 0, s = 0;
#pragma unroll
            for (int m = 0; m < Q; m++) {
                A += bc[m][v] * ca[m];
                c += xc[m][v] * cs[m];
                if (!Z0 || m) {
                    B += bs[m][v] * sa[m];
                    s += xs[m][v] * ss[m];
                }
            }
            const T fp =
                (A + B) * rs_act_g<T, SILU>(act, scale[v] * (c + s) + shift[v]) * scale[v];
            const T fm =
                (A - B) * rs_act_g<T, SILU>(act, scale[v] * (c - s) + shift[v]) * scale[v];
            const T fe = fp + fm, fo = fp - fm;
#pragma unroll
            for (int m = 0; m < Q; m++) {
                gc[m][v] += fe * cs[m];
                if (!Z0 || m)
                    gs[m][v] += fo * ss[m];
            }
        }
    }
}

/* row r = e·F + f -> (e, f); 32-bit division when the rows fit */
__device__ static inline void rs_row(int64_t r, int64_t R, int F, int64_t &e, int &f)
{
    if (R < 0x7fffffffLL) {
        const unsigned ru = (unsigned)r, q = ru / (unsigned)F;
        e = q;
        f = (int)(ru - q * (unsigned)F);
    } else {
        e = r / F;
        f = (int)(r - e * F);
    }
}

} // namespace ecn_cu

#endif
