/* Split-TF32 ("3xTF32") GEMM for the strict-fp32 equivariant linear (SPEC
 * §10): C (=|+=) A·Bᵀ per batch, A E×K (row stride lda), B N×K (K
 * contiguous), on mma.sync TF32 tensor cores with fp32 accuracy.
 *
 * Each input x is split as h = rn_tf32(x), l = rn_tf32(x − h) (|l| ≤
 * 2⁻¹¹|x|, both exact in TF32), and a·b ≈ h_a·h_b + (l_a·h_b + h_a·l_b):
 * the dropped l_a·l_b is ≤ 2⁻²²|a·b|. The tensor cores' fp32 accumulation
 * truncates, so where the three products accumulate decides the error:
 *  - X3_CHAIN: the three products of a k step chain on one zeroed partial
 *    sum p = l·h + h·l + h·h (small terms first, so they are not truncated
 *    against the large one), and an fp32 add (round to nearest) takes p
 *    into the accumulator: only 8-product partial sums are truncated.
 *    Measured (tools/device/split_bench.cu, one layer's products, H200):
 *    rel L2 vs DGEMM 1.36e-7, half cuBLAS SGEMM's 2.87e-7.
 *  - X3_CHAIN2 (the library's default): p chains two k steps (half the
 *    fp32 adds), rel L2 1.54e-7; with PRE the fastest unbiased form.
 *  - X3_TC: the main products accumulate in the tensor cores across all
 *    of K, the small ones in a second sum, which meet at the end: the
 *    fastest, but the truncation of the running total is a bias (rel L2
 *    6.4e-7; a bench energy 2.6e-6 from fp64 against SGEMM's 4.9e-7).
 * PRE: B arrives split (B the high parts, Bl the low ones, from split_k,
 * which splits as the kernel does: the same bits), so only A is split in
 * the loop. The library's weights are split once (ops.h w_split). One
 * layer's products on an H100 (split_bench, ms, fwd / VJP form): SGEMM
 * 0.955 / 1.063, chain2 0.947 / 0.973, chain2 + PRE 0.813 / 0.850, chain
 * + PRE 0.946 / 0.902 (its 255 registers spill with PRE), tc + PRE 0.772 /
 * 0.837.
 * (Measured and dropped: each main MMA's 8-term sum added in fp32 while
 * the small terms keep their own sum, Ootomo & Yokota's form: X3_CHAIN's
 * accuracy, 6-9% slower, 64 registers more; and p over a whole 32-wide K
 * tile: rel L2 2.5e-7 for -0.5 to +3% speed.)
 *
 * Tiles: a block of 64·WN threads computes 128 rows × 32·WN outputs, 2 × WN
 * warps of 64 × 32 (WN = 2, the library's: 4 warps, two blocks per SM, so
 * one block's prologue and epilogue overlap another's main loop; WN = 4: 8
 * warps, one block per SM at 255 registers, 14-21% slower), K in steps of
 * 32 through a 3-stage cp.async pipeline (PRE: a stage holds B's high and
 * low tiles, 96 KB for three stages; two blocks still fit an H100/H200 SM). Shared
 * rows are 32 floats; a row's 16-byte chunk c sits at chunk c ^ 4(r & 1),
 * so the 8 lanes of a quarter-warp (rows g, g+1; chunks t) hit 32 distinct
 * banks. Within each 16-wide half of a K step the MMA's k index is
 * permuted (k step q: thread column t ↔ 4t + 2q, t + 4 ↔ 4t + 2q + 1, for A
 * and B alike) so that a thread's fragments are one 16-byte load. Rows
 * past E, outputs past N and k past K load zeros; stores are guarded.
 *
 * Requirements (checked by lin_x3_ok): K % 4 == 0, lda, sA, sB multiples of
 * 4 and A, B (and Bl) 16-byte aligned (cp.async), N, ldc, sC even and C 8-byte
 * aligned (float2 stores). Deterministic: each output is written by one
 * thread, sums in a fixed order. A non-finite input gives NaN (inf − inf
 * in its split) where SGEMM may give ±inf: either way not a number a step
 * can use. */
#ifndef ECN_CUDA_LINEAR_X3_CUH
#define ECN_CUDA_LINEAR_X3_CUH

#include <cuda_runtime.h>
#include <stdint.h>

namespace ecn_x3 {

constexpr int BM = 128, BK = 32, NST = 3;
enum { X3_TC = 0, X3_CHAIN = 1, X3_CHAIN2 = 2 }; /* the accumulation (above) */
__host__ __device__ constexpr int bn(int WN) { return 32 * WN; }
__host__ __device__ constexpr int threads(int WN) { return 64 * WN; }
/* floats of one pipeline stage: the A tile, then the B tile (PRE: its hi
 * part, then its lo part) */
__host__ __device__ constexpr int stage(int WN, bool PRE = false)
{
    return (BM + (PRE ? 2 : 1) * bn(WN)) * BK;
}
__host__ __device__ constexpr size_t smem(int WN, bool PRE = false)
{
    return (size_t)NST * stage(WN, PRE) * sizeof(float);
}

struct Args {
    const float *A, *B;
    const float *Bl; /* PRE: B holds rn_tf32(b), Bl rn_tf32(b - rn_tf32(b)) (split_k) */
    float *C;
    int64_t lda, ldc, sA, sB, sC; /* row strides of A and C, batch strides */
    int64_t E;
    int K, N;
};

/* C (E×N, row stride ldc) (=|+=) A (E×K, lda) · Bᵀ (B: N×K, rows of K), per
 * batch offsets sA, sB, sC (in floats) */
static inline Args make_args(int64_t E, int N, int K, const float *A, int64_t lda, int64_t sA,
                             const float *B, int64_t sB, float *C, int64_t ldc, int64_t sC)
{
    return Args{A, B, nullptr, C, lda, ldc, sA, sB, sC, E, K, N};
}

__device__ __forceinline__ uint32_t rn_tf32(float x)
{
    uint32_t r;
    asm("cvt.rna.tf32.f32 %0, %1;\n" : "=r"(r) : "f"(x));
    return r;
}
__device__ __forceinline__ void split(float x, uint32_t &h, uint32_t &l)
{
    h = rn_tf32(x);
    l = rn_tf32(x - __uint_as_float(h));
}
__device__ __forceinline__ void mma(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1)
{
    asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, "
                 "{%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
__device__ __forceinline__ void cp16(float *dst, const float *src, bool valid)
{
    const unsigned s = (unsigned)__cvta_generic_to_shared(dst);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(s), "l"(src),
                 "r"(valid ? 16 : 0));
}
__device__ __forceinline__ void commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N> __device__ __forceinline__ void wait_groups()
{
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}
/* a warp tile's accumulators: d = 0, d += s (fp32 adds, round to nearest) */
__device__ __forceinline__ void zero(float (&d)[4][4][4])
{
#pragma unroll
    for (int i = 0; i < 64; i++)
        d[i / 16][i / 4 % 4][i % 4] = 0.0f;
}
__device__ __forceinline__ void add(float (&d)[4][4][4], const float (&s)[4][4][4])
{
#pragma unroll
    for (int i = 0; i < 64; i++)
        d[i / 16][i / 4 % 4][i % 4] += s[i / 16][i / 4 % 4][i % 4];
}
/* float offset of row r's 16-byte chunk c in a stage tile */
__device__ __forceinline__ int swz(int r, int c) { return r * BK + 4 * (c ^ (4 * (r & 1))); }

/* the operand split once, for PRE: h[i] = rn_tf32(x[i]), l[i] = rn_tf32(x[i] - h[i]) as
 * the kernel splits (the same bits) */
static __global__ void split_k(int64_t n, const float *x, float *h, float *l)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x) {
        uint32_t hb, lb;
        split(x[i], hb, lb);
        h[i] = __uint_as_float(hb);
        l[i] = __uint_as_float(lb);
    }
}

template <int WN, bool BETA, int ACC = X3_TC, bool PRE = false>
__global__ void __launch_bounds__(64 * WN, 4 / WN) lin_x3_k(Args a)
{
    constexpr int BN = bn(WN), TH = threads(WN), RP = TH / 8; /* rows per load pass */
    extern __shared__ __align__(16) float sm[];
    const int NT = (a.N + BN - 1) / BN;
    const int64_t e0 = (int64_t)(blockIdx.x / NT) * BM;
    const int n0 = (int)(blockIdx.x % NT) * BN;
    const float *A = a.A + blockIdx.y * a.sA, *B = a.B + blockIdx.y * a.sB;
    const float *Bl = PRE ? a.Bl + blockIdx.y * a.sB : nullptr;
    float *C = a.C + blockIdx.y * a.sC;
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int g = lane >> 2, t = lane & 3, wr = (warp & 1) * 64, wc = (warp >> 1) * 32;

    /* loads: thread → chunk tid % 8 of rows tid / 8 + RP j, A and B alike;
     * addresses recomputed per load (registers go to the accumulators) */
    const int lc = tid & 7, lr = tid >> 3, so = swz(lr, lc); /* row lr + RP j: so + RP j·BK */
    const int KT = (a.K + BK - 1) / BK;
    auto load = [&](int st, int kt) {
        const int k = kt * BK + 4 * lc;
        const bool kok = k < a.K;
        const int kk = kok ? k : 0;
        float *As = sm + st * stage(WN, PRE), *Bs = As + BM * BK;
#pragma unroll
        for (int j = 0; j < BM / RP; j++) {
            const int64_t e = e0 + lr + RP * j;
            cp16(As + so + RP * j * BK, A + (e < a.E ? e : 0) * a.lda + kk, e < a.E && kok);
        }
#pragma unroll
        for (int j = 0; j < BN / RP; j++) {
            const int n = n0 + lr + RP * j;
            const int64_t ob = (int64_t)(n < a.N ? n : 0) * a.K + kk;
            cp16(Bs + so + RP * j * BK, B + ob, n < a.N && kok);
            if (PRE)
                cp16(Bs + BN * BK + so + RP * j * BK, Bl + ob, n < a.N && kok);
        }
    };

    float acc[4][4][4], cor[4][4][4];
    zero(acc);
    zero(cor);

#pragma unroll
    for (int st = 0; st < NST - 1; st++) {
        if (st < KT)
            load(st, st);
        commit();
    }
    for (int kt = 0; kt < KT; kt++) {
        wait_groups<NST - 2>();
        __syncthreads(); /* tile kt landed; all warps are done with tile kt - 1's stage */
        if (kt + NST - 1 < KT)
            load((kt + NST - 1) % NST, kt + NST - 1);
        commit();
        const float *As = sm + (kt % NST) * stage(WN, PRE), *Bs = As + BM * BK;
#pragma unroll 1
        for (int h = 0; h < 2; h++) {
            if (ACC == X3_CHAIN2) /* cor is the partial sum of this half tile */
                zero(cor);
            float4 bv[4], bw[4]; /* PRE: bv the hi parts, bw the lo parts */
#pragma unroll
            for (int j = 0; j < 4; j++) {
                bv[j] = *reinterpret_cast<const float4 *>(Bs + swz(wc + 8 * j + g, 4 * h + t));
                if (PRE)
                    bw[j] = *reinterpret_cast<const float4 *>(Bs + BN * BK +
                                                              swz(wc + 8 * j + g, 4 * h + t));
            }
#pragma unroll
            for (int q = 0; q < 2; q++) {
                uint32_t bh[4][2], bl[4][2];
#pragma unroll
                for (int j = 0; j < 4; j++) {
                    if (PRE) {
                        bh[j][0] = __float_as_uint(q ? bv[j].z : bv[j].x);
                        bh[j][1] = __float_as_uint(q ? bv[j].w : bv[j].y);
                        bl[j][0] = __float_as_uint(q ? bw[j].z : bw[j].x);
                        bl[j][1] = __float_as_uint(q ? bw[j].w : bw[j].y);
                    } else {
                        split(q ? bv[j].z : bv[j].x, bh[j][0], bl[j][0]);
                        split(q ? bv[j].w : bv[j].y, bh[j][1], bl[j][1]);
                    }
                }
#pragma unroll
                for (int i = 0; i < 4; i++) {
                    const int r = wr + 16 * i + g;
                    const float4 v0 = *reinterpret_cast<const float4 *>(As + swz(r, 4 * h + t));
                    const float4 v1 = *reinterpret_cast<const float4 *>(As + swz(r + 8, 4 * h + t));
                    const float av[4] = {q ? v0.z : v0.x, q ? v1.z : v1.x, q ? v0.w : v0.y,
                                         q ? v1.w : v1.y};
                    uint32_t ah[4], al[4];
#pragma unroll
                    for (int c = 0; c < 4; c++)
                        split(av[c], ah[c], al[c]);
#pragma unroll
                    for (int j = 0; j < 4; j++) {
                        if (ACC == X3_CHAIN) {
                            float p[4] = {0.0f, 0.0f, 0.0f, 0.0f};
                            mma(p, al, bh[j][0], bh[j][1]);
                            mma(p, ah, bl[j][0], bl[j][1]);
                            mma(p, ah, bh[j][0], bh[j][1]);
#pragma unroll
                            for (int r = 0; r < 4; r++)
                                acc[i][j][r] += p[r];
                        } else {
                            mma(cor[i][j], al, bh[j][0], bh[j][1]);
                            mma(cor[i][j], ah, bl[j][0], bl[j][1]);
                            mma(ACC == X3_CHAIN2 ? cor[i][j] : acc[i][j], ah, bh[j][0], bh[j][1]);
                        }
                    }
                }
            }
            if (ACC == X3_CHAIN2)
                add(acc, cor);
        }
    }
    wait_groups<0>();

    /* c0, c1: row g, outputs 2t, 2t + 1; c2, c3: row g + 8. X3_TC's two sums
     * meet here; with BETA the old C values are all loaded (into the correction
     * registers, free now) before the first store, so the loads overlap
     * instead of each waiting behind the previous store (the compiler cannot
     * move a load past a store to C: it may alias). Same sums, same order:
     * (main + correction) + old. */
    if (ACC == X3_TC)
        add(acc, cor);
    if (BETA) {
#pragma unroll
        for (int i = 0; i < 4; i++)
#pragma unroll
            for (int hr = 0; hr < 2; hr++) {
                const int64_t e = e0 + wr + 16 * i + g + 8 * hr;
#pragma unroll
                for (int j = 0; j < 4; j++) {
                    const int n = n0 + wc + 8 * j + 2 * t;
                    float2 o = make_float2(0.0f, 0.0f);
                    if (e < a.E && n < a.N)
                        o = *reinterpret_cast<const float2 *>(C + e * a.ldc + n);
                    cor[i][j][2 * hr] = o.x;
                    cor[i][j][2 * hr + 1] = o.y;
                }
            }
    }
#pragma unroll
    for (int i = 0; i < 4; i++)
#pragma unroll
        for (int hr = 0; hr < 2; hr++) {
            const int64_t e = e0 + wr + 16 * i + g + 8 * hr;
            if (e >= a.E)
                continue;
            float *crow = C + e * a.ldc;
#pragma unroll
            for (int j = 0; j < 4; j++) {
                const int n = n0 + wc + 8 * j + 2 * t;
                if (n >= a.N)
                    continue;
                float2 v = make_float2(acc[i][j][2 * hr], acc[i][j][2 * hr + 1]);
                if (BETA) {
                    v.x += cor[i][j][2 * hr];
                    v.y += cor[i][j][2 * hr + 1];
                }
                *reinterpret_cast<float2 *>(crow + n) = v;
            }
        }
}

/* can lin_x3_k take these operands (alignment and divisibility above)? */
static inline bool lin_x3_ok(const Args &a)
{
    const uintptr_t pa = (uintptr_t)a.A, pb = (uintptr_t)a.B, pc = (uintptr_t)a.C;
    return a.K > 0 && a.N > 0 && a.lda >= a.K && a.ldc >= a.N && a.K % 4 == 0 &&
           (uintptr_t)a.Bl % 16 == 0 &&
           a.lda % 4 == 0 && a.sA % 4 == 0 && a.sB % 4 == 0 && pa % 16 == 0 && pb % 16 == 0 &&
           a.N % 2 == 0 && a.ldc % 2 == 0 && a.sC % 2 == 0 && pc % 8 == 0;
}

/* blocks of one batch: row tiles × output tiles (grid x) */
static inline int64_t lin_x3_tiles(const Args &a, int WN)
{
    return (a.N + bn(WN) - 1) / bn(WN) * ((a.E + BM - 1) / BM);
}

/* grid of one lin_x3_k<WN> launch over `batch` products (the caller raises
 * the kernel's shared-memory limit to smem(WN)) */
static inline dim3 lin_x3_grid(const Args &a, int batch, int WN)
{
    return dim3((unsigned)lin_x3_tiles(a, WN), (unsigned)batch);
}

} /* namespace ecn_x3 */

#endif
