/* The first layer's linear on the edge frame's valid columns only
 * (ecenet_linear_params.frame_nl; SPEC §8.2, §10).
 *
 * The edge frame writes channel f = b·nl + l (nl = L+1) of slot (m, part)
 * only where l >= m, and nothing in the sin m = 0 slot: of the 2Q·F input
 * columns of an edge, B·(nl + 2·Σ_{m=1}^{Q-1}(nl − m)) are nonzero (16·B of
 * 32·B at L = M = 3, against the 28·B the plain path multiplies). The valid
 * columns are interleaved with the zeros (l is the fastest index), so a GEMM
 * cannot skip them in place: a chunk of edges is packed, slot by slot, into
 * l-major order k = (l − m)·B + b (the valid columns of slot m are then one
 * contiguous run of K_m = B·(nl − m)), the weights' matching columns are
 * packed the same way, and slot m is a GEMM with K = K_m (cos and sin of one
 * m as a batch of two). The VJP runs the transposed products into a packed
 * chunk and adds it back to Xb's valid positions; Xb's other positions are
 * left as they were (nothing reads them). The cos m = 0 slot has no zeros
 * (every l >= 0), so it is not packed: the caller (cuda_layers.cu) runs its
 * plain GEMM on that slot alone. With nl = 4 the pack and unpack kernels
 * move each (b) group of four channels as one 16-byte (fp32) or two 16-byte
 * (fp64) accesses; the unpack writes the whole group back (its l < m entries
 * unchanged). The same products as the plain path less the exact zeros,
 * summed in another order: results agree to rounding, and two runs stay
 * bitwise equal.
 *
 * Worth it where the GEMMs are slow next to the pack's extra pass over the
 * features: strict fp32 and fp64, not TF32 (there the GEMMs it saves take
 * about as long as the pack). Measurements in doc/performance.md.
 * ECENET_FRAME_PACK=0 turns it off (read once; for measurements). */
#include <atomic>
#include <mutex>
#include <stdlib.h>
#include "cuda_common.cuh"
#include "cuda_ops.cuh"

namespace ecn_cu {

#define FP_MAX_Q 16
/* packed chunk bytes (+ the packed weights): bounds the scratch, so no
 * allocation grows with the system */
#define FP_CHUNK_MB 64

/* the packed layout of one edge: segments s = 0..2Q-3 are (m, part) = (1, cos),
 * (1, sin), (2, cos), ...; segment s holds K_m columns from off[s] */
struct FpLayout {
    int nl, B, Q, F, fout, Kc, nseg, wtot;
    int seg_m[2 * FP_MAX_Q], seg_p[2 * FP_MAX_Q], off[2 * FP_MAX_Q];
    int woff[FP_MAX_Q + 1]; /* packed weights of m >= 1: fout × K_m from woff[m] */
};

static bool fp_layout(const ecenet_linear_params *p, FpLayout &L)
{
    const int nl = p->frame_nl, Q = p->Q;
    /* Q = 1: only the cos m = 0 slot, which has no zeros */
    if (nl <= 0 || Q < 2 || Q > nl || Q > FP_MAX_Q || p->fin % nl)
        return false;
    L.nl = nl;
    L.B = p->fin / nl;
    L.Q = Q;
    L.F = p->fin;
    L.fout = p->fout;
    L.nseg = 0;
    int k = 0;
    L.woff[0] = L.woff[1] = 0;
    for (int m = 1; m < Q; m++) {
        const int Km = L.B * (nl - m);
        for (int part = 0; part < 2; part++) {
            L.seg_m[L.nseg] = m;
            L.seg_p[L.nseg] = part;
            L.off[L.nseg++] = k;
            k += Km;
        }
        L.woff[m + 1] = L.woff[m] + Km * p->fout;
    }
    L.Kc = k;
    L.wtot = L.woff[Q];
    return true;
}

/* a group of four channels (l = 0..3 of one b), 16-byte aligned */
__device__ static inline void ld4(const float *p, float v[4])
{
    const float4 a = *(const float4 *)p;
    v[0] = a.x, v[1] = a.y, v[2] = a.z, v[3] = a.w;
}
__device__ static inline void ld4(const double *p, double v[4])
{
    const double2 a = ((const double2 *)p)[0], b = ((const double2 *)p)[1];
    v[0] = a.x, v[1] = a.y, v[2] = b.x, v[3] = b.y;
}
__device__ static inline void st4(float *p, const float v[4])
{
    *(float4 *)p = make_float4(v[0], v[1], v[2], v[3]);
}
__device__ static inline void st4(double *p, const double v[4])
{
    ((double2 *)p)[0] = make_double2(v[0], v[1]);
    ((double2 *)p)[1] = make_double2(v[2], v[3]);
}

/* Xc[e][off[s] + (l−m)·B + b] = X[e][2m+part][b·nl + l], l >= m; one thread
 * per (edge, b) of a segment (blockIdx.y): consecutive threads write
 * consecutive columns; NL4: nl = 4 and 16-byte aligned rows, one group load */
template <typename T, bool NL4>
__global__ void fp_pack_k(int64_t n, FpLayout L, const T *X, T *Xc)
{
    const int s = blockIdx.y, m = L.seg_m[s], slot = 2 * m + L.seg_p[s];
    const int64_t XE = 2LL * L.Q * L.F;
    for (int64_t t = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; t < n * L.B;
         t += (int64_t)gridDim.x * blockDim.x) {
        const int64_t e = t / L.B;
        const int b = (int)(t % L.B);
        const T *x = X + e * XE + (int64_t)slot * L.F + (int64_t)b * L.nl;
        T *o = Xc + e * L.Kc + L.off[s] + b;
        if (NL4) {
            T v[4];
            ld4(x, v);
#pragma unroll
            for (int l = 1; l < 4; l++)
                if (l >= m)
                    o[(l - m) * L.B] = v[l];
        } else
            for (int l = m; l < L.nl; l++)
                o[(l - m) * L.B] = x[l];
    }
}

/* Xb[e][2m+part][b·nl + l] += Xbc[e][off[s] + (l−m)·B + b], l >= m */
template <typename T, bool NL4>
__global__ void fp_unpack_add_k(int64_t n, FpLayout L, const T *Xbc, T *Xb)
{
    const int s = blockIdx.y, m = L.seg_m[s], slot = 2 * m + L.seg_p[s];
    const int64_t XE = 2LL * L.Q * L.F;
    for (int64_t t = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; t < n * L.B;
         t += (int64_t)gridDim.x * blockDim.x) {
        const int64_t e = t / L.B;
        const int b = (int)(t % L.B);
        T *x = Xb + e * XE + (int64_t)slot * L.F + (int64_t)b * L.nl;
        const T *g = Xbc + e * L.Kc + L.off[s] + b;
        if (NL4) {
            T v[4];
            ld4(x, v);
#pragma unroll
            for (int l = 1; l < 4; l++)
                if (l >= m)
                    v[l] += g[(l - m) * L.B];
            st4(x, v);
        } else
            for (int l = m; l < L.nl; l++)
                x[l] += g[(l - m) * L.B];
    }
}

/* the weights' valid columns, packed like the features: Wp[m] (fout × K_m,
 * the forward's operand) and its transpose Wpt[m] (K_m × fout, the VJP's:
 * the op-T form cuBLAS runs faster, as for ecenet_linear_params.w_t) */
template <typename T>
__global__ void fp_pack_w_k(FpLayout L, const T *w, T *Wp, T *Wpt)
{
    for (int t = blockIdx.x * blockDim.x + threadIdx.x; t < L.wtot; t += gridDim.x * blockDim.x) {
        int m = 1;
        while (t >= L.woff[m + 1])
            m++;
        const int Km = L.B * (L.nl - m), r = t - L.woff[m], o = r / Km, k = r % Km;
        const int l = m + k / L.B, b = k % L.B;
        const T v = w[((int64_t)m * L.fout + o) * L.F + (int64_t)b * L.nl + l];
        Wp[L.woff[m] + o * Km + k] = v;
        Wpt[L.woff[m] + k * L.fout + o] = v;
    }
}

/* ---- scratch: one buffer, reused (one computation at a time per process, as
 * for the readout's scratch) ---- */
static void *fp_buf;
static size_t fp_bytes;

static void *fp_scratch(size_t bytes)
{
    if (bytes <= fp_bytes)
        return fp_buf;
    if (fp_buf)
        mem_release(fp_buf);
    fp_buf = mem_alloc(bytes);
    fp_bytes = fp_buf ? bytes : 0;
    return fp_buf;
}

static int fp_on = 1;
static size_t fp_chunk = (size_t)FP_CHUNK_MB << 20;
static std::once_flag fp_once;

/* ECENET_FRAME_PACK=0: off; ECENET_FRAME_PACK_MB: the chunk's size (for
 * measurements) */
static bool fp_enabled()
{
    std::call_once(fp_once, [] {
        fp_on = ecn_env_int("ECENET_FRAME_PACK", 1, 0, 1) != 0;
        const int c = ecn_env_int("ECENET_FRAME_PACK_MB", 0, 1, 65536); /* 0: unset */
        if (c > 0)
            fp_chunk = (size_t)c << 20;
    });
    return fp_on;
}

static std::atomic<unsigned long long> fp_runs;

/* the plan of one call: layout, chunk rows, scratch pointers; false where
 * the packed path does not apply (the caller runs the plain GEMMs) */
template <typename T> struct FpPlan {
    FpLayout L;
    int64_t rows;
    T *Wp, *Wpt, *Xc;
};

template <typename T> static bool fp_plan(int64_t E, const ecenet_linear_params *p, FpPlan<T> &P)
{
    if (E <= 0 || !fp_enabled() || !fp_layout(p, P.L))
        return false;
    if (sizeof(T) == sizeof(float) && state().tf32)
        return false; /* TF32: the GEMMs saved cost about what the pack costs */
    const size_t wbytes = ((size_t)2 * P.L.wtot * sizeof(T) + 255) & ~(size_t)255;
    const size_t row = (size_t)P.L.Kc * sizeof(T);
    int64_t rows = (int64_t)(fp_chunk / row);
    if (rows < 1)
        rows = 1;
    if (rows > E)
        rows = E;
    if (rows > 0x7fffffffLL)
        rows = 0x7fffffffLL;
    char *buf = (char *)fp_scratch(wbytes + (size_t)rows * row);
    if (!buf)
        return false; /* out of memory: the plain path needs no scratch */
    P.rows = rows;
    P.Wp = (T *)buf;
    P.Wpt = P.Wp + P.L.wtot;
    P.Xc = (T *)(buf + wbytes);
    fp_pack_w_k<T><<<blocks_for(P.L.wtot, 256), 256>>>(P.L, (const T *)p->w, P.Wp, P.Wpt);
    CU_LAUNCHED();
    fp_runs++;
    return true;
}

/* the group kernels: nl = 4, rows 16-byte aligned (X and Xb come from
 * cudaMalloc; F = 4B keeps every row and slot aligned) */
static bool fp_nl4(const FpLayout &L, const void *X)
{
    return L.nl == 4 && aligned16(X);
}

static dim3 fp_grid(int64_t n, const FpLayout &L)
{
    const unsigned nb = blocks_for(n * L.B, 256), cap = state().n_sm * 32;
    return dim3(nb < cap ? nb : cap, L.nseg);
}

/* Y = X·Wᵀ for the slots m >= 1, over their valid columns; the cos m = 0
 * slot, bias, corrections and the sin m = 0 slot are the caller's
 * (linear_fwd_run) */
template <typename T>
bool lin_frame_fwd(int64_t E, const ecenet_linear_params *p, const void *X_, void *Y_)
{
    FpPlan<T> P;
    if (!fp_plan<T>(E, p, P))
        return false;
    const FpLayout &L = P.L;
    const T *X = (const T *)X_;
    T *Y = (T *)Y_;
    const int64_t XE = 2LL * L.Q * L.F, YE = 2LL * L.Q * L.fout;
    const bool v4 = fp_nl4(L, X);
    for (int64_t e0 = 0; e0 < E; e0 += P.rows) {
        const int n = (int)(E - e0 < P.rows ? E - e0 : P.rows);
        if (v4)
            fp_pack_k<T, true><<<fp_grid(n, L), 256>>>(n, L, X + e0 * XE, P.Xc);
        else
            fp_pack_k<T, false><<<fp_grid(n, L), 256>>>(n, L, X + e0 * XE, P.Xc);
        CU_LAUNCHED();
        for (int m = 1, s = 0; m < L.Q; s += 2, m++) {
            const int Km = L.B * (L.nl - m);
            gemm_lin<T>(CUBLAS_OP_T, L.fout, n, Km, P.Wp + L.woff[m], Km, 0, P.Xc + L.off[s],
                        L.Kc, Km, (T)0, Y + e0 * YE + 2LL * m * L.fout, (int)YE, L.fout, 2);
        }
    }
    return true;
}

/* Xb += Linearᵀ(Yb) for the slots m >= 1, at their valid positions (l < m
 * untouched); the cos m = 0 slot and the corrections are the caller's */
template <typename T>
bool lin_frame_vjp(int64_t E, const ecenet_linear_params *p, const void *Yb_, void *Xb_)
{
    FpPlan<T> P;
    if (!fp_plan<T>(E, p, P))
        return false;
    const FpLayout &L = P.L;
    const T *Yb = (const T *)Yb_;
    T *Xb = (T *)Xb_;
    const int64_t XE = 2LL * L.Q * L.F, YE = 2LL * L.Q * L.fout;
    const bool v4 = fp_nl4(L, Xb);
    for (int64_t e0 = 0; e0 < E; e0 += P.rows) {
        const int n = (int)(E - e0 < P.rows ? E - e0 : P.rows);
        for (int m = 1, s = 0; m < L.Q; s += 2, m++) {
            const int Km = L.B * (L.nl - m);
            gemm_lin<T>(CUBLAS_OP_T, Km, n, L.fout, P.Wpt + L.woff[m], L.fout, 0,
                        Yb + e0 * YE + 2LL * m * L.fout, (int)YE, L.fout, (T)0, P.Xc + L.off[s],
                        L.Kc, Km, 2);
        }
        if (v4)
            fp_unpack_add_k<T, true><<<fp_grid(n, L), 256>>>(n, L, P.Xc, Xb + e0 * XE);
        else
            fp_unpack_add_k<T, false><<<fp_grid(n, L), 256>>>(n, L, P.Xc, Xb + e0 * XE);
        CU_LAUNCHED();
    }
    return true;
}

template bool lin_frame_fwd<float>(int64_t, const ecenet_linear_params *, const void *, void *);
template bool lin_frame_fwd<double>(int64_t, const ecenet_linear_params *, const void *, void *);
template bool lin_frame_vjp<float>(int64_t, const ecenet_linear_params *, const void *, void *);
template bool lin_frame_vjp<double>(int64_t, const ecenet_linear_params *, const void *, void *);

} // namespace ecn_cu

extern "C" unsigned long long ecn_cuda_frame_pack_runs(void) { return ecn_cu::fp_runs.load(); }
