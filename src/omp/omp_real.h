/* The omp backend's one-source precision switch. Every src/omp/omp_*.c is
 * compiled twice: with -DOMP_F32 (real = float, symbols *_f32) and with
 * -DOMP_F64 (real = double, symbols *_f64). Code is written against `real`,
 * RL(c) for literals and OMP_FN(name) for every external symbol.
 *
 * Also here: the helpers every op family shares — edge tiles, per-thread
 * scratch, the single-threaded BLIS GEMM and the edge-type grouping
 * (omp_backend.c), the activations with a vectorisable exp (inline), and the
 * compiler switches for the hot kernels (target clones, forced inlining). */
#ifndef ECN_OMP_REAL_H
#define ECN_OMP_REAL_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include "ecenet/ops.h"

#if defined(OMP_F32) == defined(OMP_F64)
#error "compile src/omp/ with exactly one of -DOMP_F32 or -DOMP_F64"
#endif

#ifndef M_PI /* strict C99 <math.h> does not define it */
#define M_PI 3.14159265358979323846
#endif

#define OMP_CAT_(a, b) a##b
#define OMP_CAT(a, b) OMP_CAT_(a, b)

#ifdef OMP_F32
typedef float real;
#define OMP_SFX _f32
#define RL(c) ((float)(c))
#define OMP_PREC ECENET_F32
#else
typedef double real;
#define OMP_SFX _f64
#define RL(c) (c)
#define OMP_PREC ECENET_F64
#endif

/* name -> name_f32 / name_f64 */
#define OMP_FN(name) OMP_CAT(name, OMP_SFX)

/* `#pragma omp simd` where it helps vectorisation (needs -fopenmp or -fopenmp-simd) */
#define OMP_PRAGMA_(x) _Pragma(#x)
#define OMP_SIMD OMP_PRAGMA_(omp simd)

/* Hot kernels are compiled for several x86-64 levels and picked at load time
 * (GCC target_clones, an ifunc): AVX-512 or AVX2+FMA where the CPU has them,
 * the baseline elsewhere. -DOMP_NO_CLONES builds the baseline only. Results
 * may differ in the last bits between levels (FMA contraction), never between
 * threads of one run. */
#if !defined(OMP_NO_CLONES) && defined(__GNUC__) && !defined(__clang__) && __GNUC__ >= 11 && \
    defined(__x86_64__) && defined(__linux__)
#define OMP_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define OMP_CLONES
#endif
/* The kernels' selects (SiLU, clamps) are if-converted into vector code only
 * when floating-point comparisons may be assumed not to trap. */
#if defined(__GNUC__) && !defined(__clang__) && !defined(__NO_TRAPPING_MATH__)
#pragma message("src/omp: compile with -fno-trapping-math -ffp-contract=fast (Makefile.am) " \
                "or the RealSpace kernels do not vectorise")
#endif
/* inlined into the clones above so that they are compiled for the clone's level */
#if defined(__GNUC__)
#define OMP_INLINE static inline __attribute__((always_inline))
#else
#define OMP_INLINE static inline
#endif

/* Edge tiles: the unit of work of the linear layer and the fused layer
 * (GEMM of a tile, then RealSpace on the tile while it is in cache), for
 * feature width F. Fixed tile boundaries (multiples of the tile size from
 * edge 0) make every result independent of the number of threads. */
int OMP_FN(omp_tile_edges)(int F);
/* Rows per tile of the readout / FiLM MLPs. */
#define OMP_MLP_TILE 128

/* ---- per-thread scratch --------------------------------------------------
 * One buffer per (OS thread, slot), 64-byte aligned, grown on demand and
 * kept for the thread's lifetime (freed at thread exit): ops never allocate
 * once the buffers have reached their working size. Contents are not kept
 * between calls. OMP_SCR_TILE is used inside parallel regions (each thread
 * its own); OMP_SCR_SHARED is taken by the calling thread before a parallel
 * region and shared with the team (partial sums). On allocation failure the
 * process aborts with a message (sizes are per tile: at most a few MB). */
enum { OMP_SCR_TILE = 0, OMP_SCR_SHARED = 1, OMP_SCR_SLOTS = 2 };
void *OMP_FN(omp_scratch)(int slot, size_t bytes);

/* Carve 64-byte-aligned pieces out of a scratch buffer. */
static inline size_t omp_pad64(size_t bytes) { return (bytes + 63) & ~(size_t)63; }

/* ---- BLIS ------------------------------------------------------------------
 * C (m x n) = A (m x k) · B (k x n) + beta·C, every matrix given by its row
 * and column strides (BLIS's general-stride typed API: no transposes or
 * copies). Single-threaded BLIS (a rntm_t with one thread): callers
 * parallelise over tiles with OpenMP. beta == 0 overwrites C without reading it.
 *
 * a_next: the caller guarantees that one more row of A (rsa elements past
 * A's last row) is readable memory. BLIS 0.9's small-matrix ("sup") kernels
 * read up to one row stride past A (measured with a guard page: e.g. m = 16,
 * n = 64, k = 30 reads rsa floats beyond the end); they are used only when
 * a_next is set (interior tiles, scratch followed by more scratch), otherwise
 * the packed path runs, which reads exactly A's elements. */
void OMP_FN(omp_gemm)(int64_t m, int64_t n, int64_t k, const real *A, int64_t rsa,
                      int64_t csa, const real *B, int64_t rsb, int64_t csb, real beta, real *C,
                      int64_t rsc, int64_t csc, int a_next);

/* ---- edge-type corrections -------------------------------------------------
 * Rows of a tile grouped by a per-edge type: perm[off[t] .. off[t+1]-1] are
 * the tile rows (0-based) of type t, in increasing order. */
void OMP_FN(omp_group_rows)(int64_t e0, int nt, ecenet_idx types, int T, int32_t *perm,
                            int32_t *off);
/* C[r] += A[r]·W_t for every tile row r of type t, W_t = W + t·wstride given
 * by strides (rsb, csb) (k x n); As (nt x k) and Cs (nt x n) are scratch,
 * Cs following As in memory. */
void OMP_FN(omp_corr_gemm)(int nt, const int32_t *perm, const int32_t *off, int T,
                           const real *W, int64_t wstride, int64_t rsb, int64_t csb, int64_t k,
                           int64_t n, const real *A, int64_t lda, real *C, int64_t ldc,
                           real *As, real *Cs);

/* ---- misc ------------------------------------------------------------------ */

/* Offset of block l in a compact Wigner-D row: Σ_{l'<l} (2l'+1)². */
static inline int omp_dblock_offset(int l) { return l * (2 * l - 1) * (2 * l + 1) / 3; }

/* Vectorisable exp (Cody–Waite reduction, Taylor polynomial, 2^n from the
 * exponent bits), ≈ 2 ulp for x in [-87, 88] (fp32) / [-708, 709] (fp64).
 * No range handling (callers select saturated values outside), no branches,
 * no calls, so `omp simd` loops vectorise it.
 *
 * Why no clamps: a clamp `x < lo ? lo : x` lets the compiler specialise the
 * rest of the computation for the constant, and the if-converted vector code
 * then evaluates that branch for every element too; there x/(1 + e^{88})
 * is subnormal for |x| < 1, and subnormal results cost a microcode assist
 * each (measured: RealSpace 4x slower on ordinary inputs). */
OMP_INLINE real omp_exp_core(real x)
{
#ifdef OMP_F32
    const float sh = 0x1.8p23f;
    float t = x * 1.44269504088896341f + sh;
    float n = t - sh;
    float r = x - n * 0x1.62e400p-1f;
    r = r - n * 0x1.7f7d1cp-20f;
    float p = 1.0f / 5040.0f;
    p = p * r + 1.0f / 720.0f;
    p = p * r + 1.0f / 120.0f;
    p = p * r + 1.0f / 24.0f;
    p = p * r + 1.0f / 6.0f;
    p = p * r + 0.5f;
    p = p * r + 1.0f;
    p = p * r + 1.0f;
    union { float f; uint32_t u; } cv;
    cv.f = t;
    cv.u = (cv.u + 127u) << 23;
    return p * cv.f;
#else
    const double sh = 0x1.8p52;
    double t = x * 1.4426950408889634 + sh;
    double n = t - sh;
    double r = x - n * 0x1.62e42fee00000p-1;
    r = r - n * 0x1.a39ef35793c76p-33;
    double p = 1.0 / 6227020800.0;
    p = p * r + 1.0 / 479001600.0;
    p = p * r + 1.0 / 39916800.0;
    p = p * r + 1.0 / 3628800.0;
    p = p * r + 1.0 / 362880.0;
    p = p * r + 1.0 / 40320.0;
    p = p * r + 1.0 / 5040.0;
    p = p * r + 1.0 / 720.0;
    p = p * r + 1.0 / 120.0;
    p = p * r + 1.0 / 24.0;
    p = p * r + 1.0 / 6.0;
    p = p * r + 0.5;
    p = p * r + 1.0;
    p = p * r + 1.0;
    union { double f; uint64_t u; } cv;
    cv.f = t;
    cv.u = (cv.u + 1023u) << 52;
    return p * cv.f;
#endif
}

/* |x| beyond which SiLU saturates to max(x, 0) and SiLU' to [x > 0]
 * (e^{-|x|} < 2e-35 resp. 1e-304; omp_exp_core is valid up to there) */
#ifdef OMP_F32
#define OMP_SILU_BIG 80.0f
#else
#define OMP_SILU_BIG 700.0
#endif

/* SiLU x·σ(x) with σ from e = e^{-|x|} ∈ (0, 1] (no overflow, no subnormals) */
OMP_INLINE real omp_silu(real x)
{
    const real a = x < RL(0.0) ? -x : x;
    const real e = omp_exp_core(-a);
    const real inv = RL(1.0) / (RL(1.0) + e);
    const real s = x >= RL(0.0) ? inv : e * inv;
    const real y = x * s;
    const real sat = x > RL(0.0) ? x : RL(0.0);
    return a > OMP_SILU_BIG ? sat : y;
}

/* SiLU' = σ(x)(1 + x(1 - σ(x))), with 1 - σ formed without cancellation */
OMP_INLINE real omp_silu_grad(real x)
{
    const real a = x < RL(0.0) ? -x : x;
    const real e = omp_exp_core(-a);
    const real inv = RL(1.0) / (RL(1.0) + e);
    const real s = x >= RL(0.0) ? inv : e * inv;
    const real c = x >= RL(0.0) ? e * inv : inv;
    const real g = s * (RL(1.0) + x * c);
    const real sat = x > RL(0.0) ? RL(1.0) : RL(0.0);
    return a > OMP_SILU_BIG ? sat : g;
}

/* scalar activation and its derivative (reference formulas) */
static inline real omp_act1(int act, real x)
{
    switch (act) {
    case ECENET_ACT_SILU: return omp_silu(x);
    case ECENET_ACT_RELU: return x > RL(0.0) ? x : RL(0.0);
    case ECENET_ACT_TANH: return (real)tanh((double)x);
    case ECENET_ACT_GELU: return (real)(0.5 * (double)x * (1.0 + erf((double)x / sqrt(2.0))));
    default: return x;
    }
}

static inline real omp_act_grad1(int act, real x)
{
    switch (act) {
    case ECENET_ACT_SILU: return omp_silu_grad(x);
    case ECENET_ACT_RELU: return x > RL(0.0) ? RL(1.0) : RL(0.0);
    case ECENET_ACT_TANH: {
        double t = tanh((double)x);
        return (real)(1.0 - t * t);
    }
    case ECENET_ACT_GELU: {
        double xd = (double)x;
        return (real)(0.5 * (1.0 + erf(xd / sqrt(2.0))) +
                      xd * exp(-0.5 * xd * xd) / sqrt(2.0 * M_PI));
    }
    default: return RL(1.0);
    }
}

/* act(x) on n contiguous values, in place (SiLU and ReLU vectorised). */
OMP_INLINE void omp_act_inplace(int act, int n, real *x)
{
    switch (act) {
    case ECENET_ACT_SILU:
        OMP_SIMD
        for (int i = 0; i < n; i++)
            x[i] = omp_silu(x[i]);
        break;
    case ECENET_ACT_RELU:
        OMP_SIMD
        for (int i = 0; i < n; i++)
            x[i] = x[i] > RL(0.0) ? x[i] : RL(0.0);
        break;
    case ECENET_ACT_IDENTITY:
        break;
    default:
        for (int i = 0; i < n; i++)
            x[i] = omp_act1(act, x[i]);
    }
}

/* g[i] *= act'(x[i]) */
OMP_INLINE void omp_act_grad_mul(int act, int n, const real *x, real *g)
{
    switch (act) {
    case ECENET_ACT_SILU:
        OMP_SIMD
        for (int i = 0; i < n; i++)
            g[i] *= omp_silu_grad(x[i]);
        break;
    case ECENET_ACT_RELU: /* 0 at x = 0, as PyTorch */
        OMP_SIMD
        for (int i = 0; i < n; i++)
            g[i] *= x[i] > RL(0.0) ? RL(1.0) : RL(0.0);
        break;
    case ECENET_ACT_IDENTITY:
        break;
    default:
        for (int i = 0; i < n; i++)
            g[i] *= omp_act_grad1(act, x[i]);
    }
}

/* Carve a 64-byte-aligned piece of `bytes` from *p. */
static inline void *omp_carve(char **p, size_t bytes)
{
    void *r = *p;
    *p += omp_pad64(bytes);
    return r;
}

#endif
