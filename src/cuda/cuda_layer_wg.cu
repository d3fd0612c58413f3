/* The fused TF32 layer kernels on Hopper's warpgroup MMA (opt-in; SPEC
 * §10-§12), on sin0_zero layers, F = 128 or 256, compute capability 9.0
 * (wgmma is sm_90a code, which configure's sm_90 builds): the forward,
 * Z = Linear(X), X += RealSpace(Z) in one kernel (ECENET_LAYER_TC=3), and,
 * at the end of the file, the layer VJP (ECENET_LAYER_TC=4).
 *
 * The RealSpace epilogue of an (edge, feature) needs all seven nonzero
 * (m, part) slots, so the mma.sync kernel (cuda_layer_tc.cu) holds all of
 * them for a 64 × 64 tile, and a wgmma version of that tile (the first one
 * written) re-read W for every 64 edges and X for every 64 features: ≈ 2
 * GB of L2 traffic a layer at the bench shape, L2-bound at 1.36 ms. Here a
 * CTA computes one m's cos and sin slots (which share W_m's tile) for 128
 * edges × 128 features, so each operand tile serves twice as many
 * products; the 4 · F/128 CTAs of a row tile (every m, every feature tile)
 * form one cluster, stage their results in shared memory, and after the
 * cluster barrier each runs the epilogue on a quarter of its feature
 * tile's rows, reading the other m's slots through distributed shared
 * memory. The barrier also makes the in-place update safe: every CTA that
 * reads the row tile's X has finished its K loop. Warpgroup g owns edges
 * 64g..64g+63 (wgmma.m64n128k8, two accumulators). Measured: correct, and
 * on an H100 0.69 ms a layer (ncu), the bench forward 0.7 ms slower than
 * cuBLAS + the RealSpace kernel (doc/performance.md), so off by default.
 *
 * Operands in shared memory, K-major, no swizzle: an 8-row × 16-byte core
 * matrix is 128 contiguous bytes; an R-row × 16-k tile is [k/4][row/8] of
 * them, so cores adjacent in rows are 128 B apart (the descriptor's stride
 * byte offset) and in k 16R + 64 B (its leading byte offset; 64 B of
 * padding after each k chunk keeps the copies free of bank conflicts; the
 * VJP's Zbar operand has 32 B, for its own stores), as
 * the PTX ISA defines them (tools/device/wgmma_probe.cu checked both fields
 * on the device). The K loop goes through registers (ld.global.cg, round,
 * st.shared): cp.async moved 32 L2 sectors and 32 shared wavefronts per
 * instruction (ncu; 16 and 4 ideal) and left the rounding a shared-memory
 * round trip.
 *
 * TF32 rounding: the tensor cores would take the top 19 bits of each fp32
 * operand (truncation, a bias that reached 3.1e-3 in the ethanol golden
 * energy), so each thread rounds its own chunks to nearest (cvt.rna, as the
 * mma.sync kernel and cuBLAS's TF32 path) in registers. */
#include <atomic>
#include <cooperative_groups.h>
#include <limits.h>
#include "cuda_backend.h"
#include "cuda_layer_tc.cuh"

namespace cgr = cooperative_groups;

namespace ecn_cu {

constexpr int WG_BK = 16;         /* k of one operand tile */
constexpr int WG_NBUF = 3;        /* stages in shared memory */
constexpr int WG_BN = 128;        /* features per CTA */
constexpr int WG_LDO = WG_BN + 4; /* staged output row: [part][edge][feature] */
/* A CTA: 128 edges (two warpgroups, each 64 edges × 128 features of both
 * parts), one per SM; a stage: two 16-k operand tiles. 64-edge CTAs (two
 * per SM) and one tile a stage were slower (doc/performance.md). Every
 * operand tile (X's 128 edges, W_m's 128 features) is 128 rows × 16 k. */
constexpr int WG_BM = 128, WG_KS = 2;
static_assert(WG_BN % (WG_BK * WG_KS) == 0, "F (a multiple of WG_BN) is a whole number of stages");
static_assert(WG_BM == WG_BN && TC_THREADS == 2 * WG_BM,
              "one tile layout for both operands; a warpgroup per 64 edges");
/* floats between k-adjacent core matrices of a tile: its 16 cores of one k
 * chunk, then 64 bytes of padding, so that the two k chunks a quarter warp
 * stores land on different banks */
constexpr int WG_LB = 4 * WG_BM + 16;
constexpr int WG_T = 4 * WG_LB;             /* one 128 × 16 operand tile */
constexpr int WG_SUB = 3 * WG_T;            /* X's cos and sin slots of m, W_m: 16 k */
constexpr int WG_STAGE = WG_KS * WG_SUB;
constexpr int WG_OUT = 2 * WG_BM * WG_LDO;
constexpr int WG_MAIN = WG_NBUF * WG_STAGE > WG_OUT ? WG_NBUF * WG_STAGE : WG_OUT;
constexpr size_t WG_SMEM = (size_t)(WG_MAIN + 4 * TC_Q * TC_GMAX) * sizeof(float);
constexpr int WG_EPI = (WG_BM / 4) * (WG_BN / 4) / TC_THREADS; /* epilogue items a thread */
static_assert(WG_EPI * TC_THREADS == (WG_BM / 4) * (WG_BN / 4), "one thread an epilogue item");

#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define ECN_WGMMA 1 /* device code for sm_90a: wgmma */
/* shared-memory descriptor of an operand tile (k step lb floats, rows 128 B) */
__device__ static inline uint64_t wg_desc(const float *p, int lb = WG_LB)
{
    const uint32_t a = (uint32_t)__cvta_generic_to_shared(p);
    return (uint64_t)((a & 0x3FFFF) >> 4) | (uint64_t)((4 * lb) >> 4) << 16 |
           (uint64_t)(128 >> 4) << 32;
}

#define WG_R8(i)                                                                                   \
    "+f"(d[i]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3]), "+f"(d[i + 4]), "+f"(d[i + 5]),    \
        "+f"(d[i + 6]), "+f"(d[i + 7])
/* d += A·Bᵀ, A 64 × 8 and B 128 × 8 (K-major) in shared memory; register j
 * of thread (warp w, lane): row 16w + lane/4 (+8 for j%4 >= 2), column
 * 8(j/4) + 2(lane%4) + j%2 */
__device__ static inline void wgmma128(float (&d)[64], uint64_t da, uint64_t db)
{
    asm volatile("wgmma.mma_async.sync.aligned.m64n128k8.f32.tf32.tf32 "
                 "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,"
                 "%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31,"
                 "%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,"
                 "%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63}, "
                 "%64, %65, 1, 1, 1;\n"
                 : WG_R8(0), WG_R8(8), WG_R8(16), WG_R8(24), WG_R8(32), WG_R8(40), WG_R8(48),
                   WG_R8(56)
                 : "l"(da), "l"(db));
}
#undef WG_R8

/* 16-byte chunk c of a tile (quarter warp q = (c/8)%4, t = c%8):
 * row 8·(c/32) + 4·(q%2) + t/2, k chunk 2·(q/2) + t%2, at float offset
 * kc·WG_LB + 4·row: a quarter warp reads the two halves of four 32-byte
 * sectors and writes 128 bytes on distinct banks */
__device__ static inline int wg_row(int c) { return 8 * (c >> 5) + 4 * ((c >> 3) & 1) + ((c & 7) >> 1); }
__device__ static inline int wg_kc(int c) { return 2 * ((c >> 4) & 1) + (c & 1); }
__device__ static inline int wg_off(int c) { return wg_kc(c) * WG_LB + 4 * wg_row(c); }

/* A thread's chunks of one 16-k operand tile of X's slots (m, cos), (m,
 * sin) and of W_m, in registers between the global load and the store */
struct WgRegs {
    float4 x[2][2]; /* [chunk c = tid, tid + 256][part] */
    float4 w[2];
};
__device__ static inline float4 wg_rna4(float4 v)
{
    return make_float4(__uint_as_float(to_tf32(v.x)), __uint_as_float(to_tf32(v.y)),
                       __uint_as_float(to_tf32(v.z)), __uint_as_float(to_tf32(v.w)));
}
/* one 16-k tile of W_m (rows n0.., k0..; the forward's w, the VJP's w_t)
 * in registers / rounded into the tile at st */
__device__ static inline void wg_fetch_w(float4 (&w)[2], const float *W, int F, int n0, int m,
                                          int k0)
{
#pragma unroll
    for (int h = 0; h < 2; h++) {
        const int c = threadIdx.x + TC_THREADS * h;
        w[h] = __ldcg(reinterpret_cast<const float4 *>(
            W + ((int64_t)m * F + n0 + wg_row(c)) * F + k0 + 4 * wg_kc(c)));
    }
}
__device__ static inline void wg_store_w(float *st, const float4 (&w)[2])
{
#pragma unroll
    for (int h = 0; h < 2; h++)
        *reinterpret_cast<float4 *>(st + wg_off(threadIdx.x + TC_THREADS * h)) = wg_rna4(w[h]);
}
/* load k0..k0+15 (L2 only: each X tile is read by the F/128 CTAs of its
 * row tile's feature tiles, W_m's by every row tile) */
__device__ static inline void wg_fetch(WgRegs &R, const float *X, const float *W, int64_t E,
                                       int F, int64_t e0, int n0, int m, int k0)
{
    const float4 z = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
#pragma unroll
    for (int h = 0; h < 2; h++) {
        const int c = threadIdx.x + TC_THREADS * h;
        const int64_t e = e0 + wg_row(c);
        const bool ok = e < E; /* rows past E read nothing: zeros */
        const float *xa = X + (ok ? e : 0) * (2LL * TC_Q * F) + 2 * m * F + k0 + 4 * wg_kc(c);
        R.x[h][0] = ok ? __ldcg(reinterpret_cast<const float4 *>(xa)) : z;
        R.x[h][1] = ok && m ? __ldcg(reinterpret_cast<const float4 *>(xa + F)) : z;
    }
    wg_fetch_w(R.w, W, F, n0, m, k0);
}
/* ... rounded to TF32 (to nearest, see the top) into the tiles at st */
__device__ static inline void wg_store(float *st, const WgRegs &R, int m)
{
#pragma unroll
    for (int h = 0; h < 2; h++) {
        const int o = wg_off(threadIdx.x + TC_THREADS * h);
        *reinterpret_cast<float4 *>(st + o) = wg_rna4(R.x[h][0]);
        if (m)
            *reinterpret_cast<float4 *>(st + WG_T + o) = wg_rna4(R.x[h][1]);
    }
    wg_store_w(st + 2 * WG_T, R.w);
}
#endif

/* The K loop: three stages in shared memory, one in registers. Step kt
 * issues the MMAs of stage kt, waits for those of kt - 1
 * (wgmma.wait_group 1), stores stage kt + 1 into the buffer of kt - 2
 * (whose MMAs every warpgroup waited for before the barrier of step
 * kt - 1) and fetches stage kt + 2 into registers, so the global loads
 * have a step of MMAs to land; two 16-k tiles a stage (WG_KS) double the
 * loads in flight: 0.69 ms a layer against 0.79 with one (H100, ncu). */
template <bool SILU, bool SYM>
__global__ void __launch_bounds__(TC_THREADS, 1)
    layer_wg_fwd_k(int64_t E, int F, TcArgs a, float *X, float *Z)
{
#ifdef ECN_WGMMA
    extern __shared__ __align__(16) float sm[];
    float *tab = sm + WG_MAIN;
    cgr::cluster_group cl = cgr::this_cluster();
    const int NT = F / WG_BN, rank = (int)cl.block_rank(); /* rank = n·4 + m */
    const int m = rank & 3, n = rank >> 2, n0 = n * WG_BN;
    const int64_t e0 = (int64_t)(blockIdx.x / (4 * NT)) * WG_BM;
    const int tid = threadIdx.x, g = tid >> 7;
    float acc[2][64];
#pragma unroll
    for (int p = 0; p < 2; p++)
#pragma unroll
        for (int j = 0; j < 64; j++)
            acc[p][j] = 0.0f;
    const int NS = F / (WG_BK * WG_KS); /* stages */
    WgRegs R[WG_KS];
#pragma unroll
    for (int ks = 0; ks < WG_KS; ks++)
        wg_fetch(R[ks], X, a.w, E, F, e0, n0, m, ks * WG_BK);
#pragma unroll
    for (int ks = 0; ks < WG_KS; ks++)
        wg_store(sm + ks * WG_SUB, R[ks], m);
    if (NS > 1)
#pragma unroll
        for (int ks = 0; ks < WG_KS; ks++)
            wg_fetch(R[ks], X, a.w, E, F, e0, n0, m, (WG_KS + ks) * WG_BK);
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
    __syncthreads();
    for (int kt = 0; kt < NS; kt++) {
        const float *st = sm + (kt % WG_NBUF) * WG_STAGE;
        asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#pragma unroll
        for (int ks = 0; ks < WG_KS; ks++)
#pragma unroll
            for (int q = 0; q < 2; q++) {
                /* k step q of tile ks: cores 2q, 2q+1; warpgroup g: rows 64g.
                 * m = 0 has no sin slot: its second product repeats the cos
                 * one (unused) rather than branch, which makes ptxas fence
                 * the MMAs */
                const float *t = st + ks * WG_SUB + 2 * q * WG_LB + 256 * g;
                const uint64_t db = wg_desc(st + ks * WG_SUB + 2 * WG_T + 2 * q * WG_LB);
                wgmma128(acc[0], wg_desc(t), db);
                wgmma128(acc[1], wg_desc(t + (m ? WG_T : 0)), db);
            }
        asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
        asm volatile("wgmma.wait_group.sync.aligned 1;\n" ::: "memory");
        if (kt + 1 < NS)
#pragma unroll
            for (int ks = 0; ks < WG_KS; ks++)
                wg_store(sm + ((kt + 1) % WG_NBUF) * WG_STAGE + ks * WG_SUB, R[ks], m);
        if (kt + 2 < NS)
#pragma unroll
            for (int ks = 0; ks < WG_KS; ks++)
                wg_fetch(R[ks], X, a.w, E, F, e0, n0, m, ((kt + 2) * WG_KS + ks) * WG_BK);
        asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
        __syncthreads();
    }
    asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
    __syncthreads(); /* the pipeline's shared memory is free for the output */
    {
        const int w = (tid >> 5) & 3, lane = tid & 31;
#pragma unroll
        for (int p = 0; p < 2; p++) {
            if (p && !m)
                break;
#pragma unroll
            for (int j = 0; j < 64; j += 2) {
                const int row = 64 * g + 16 * w + (lane >> 2) + 8 * ((j & 3) >> 1);
                const int col = 8 * (j >> 2) + 2 * (lane & 3);
                *reinterpret_cast<float2 *>(sm + (p * WG_BM + row) * WG_LDO + col) =
                    make_float2(acc[p][j], acc[p][j + 1]);
            }
        }
    }
    rs_tables<float, TC_Q>(a.rs, tab);
    cl.sync(); /* every CTA staged its slots and has read X's rows */

    /* epilogue: rows 32m..32m+31 of the feature tile, the four m's slots from
     * the four CTAs of this feature tile */
    const float *O[TC_Q];
#pragma unroll
    for (int mm = 0; mm < TC_Q; mm++)
        O[mm] = cl.map_shared_rank(sm, (unsigned)(n * 4 + mm));
    const int64_t rstride = 2LL * TC_Q * F;
#pragma unroll
    for (int it = 0; it < WG_EPI; it++) {
        const int i = tid + TC_THREADS * it;
        const int r = (WG_BM / 4) * m + i / (WG_BN / 4), c = 4 * (i % (WG_BN / 4));
        const int64_t e = e0 + r;
        if (e >= E)
            break; /* rows only grow with it */
        float zc[TC_Q][4], zs[TC_Q][4];
#pragma unroll
        for (int mm = 0; mm < TC_Q; mm++) {
            unpack4(ld4(O[mm] + r * WG_LDO + c), zc[mm]);
            unpack4(mm ? ld4(O[mm] + (WG_BM + r) * WG_LDO + c)
                       : make_float4(0.0f, 0.0f, 0.0f, 0.0f),
                    zs[mm]);
        }
        tc_epi4<SILU, true, SYM>(tab, a, F, n0 + c, Z + e * rstride + n0 + c,
                                 X + e * rstride + n0 + c, zc, zs);
    }
    cl.sync(); /* no CTA leaves while another still reads its shared memory */
#else
    (void)E; (void)F; (void)a; (void)X; (void)Z;
    __trap(); /* the host launches it only where the sm_90a code was built (ECN_CUDA_SM90A) */
#endif
}

/* ---- the fused layer VJP: Xbar += Linearᵀ(RealSpace_vjp(Z, Xbar)) --------------------------------

 * The RealSpace VJP of an (edge, feature) needs all seven slots of Z and
 * Xbar there and gives all seven of Zbar; the GEMM of slot (m, part) then
 * contracts Zbar's features against W_m. A cluster of 4 · F/128 CTAs (rank
 * n·4 + m, as the forward) owns a row tile of 64 edges: first each CTA
 * runs the RealSpace VJP on its 32-feature slice of the row tile (every
 * slot) and writes Zbar, rounded to TF32, straight into the shared memory
 * of the CTAs that multiply it (slots of m to the CTAs of m), so Zbar never
 * goes to global memory and is computed once; after the cluster barrier
 * each CTA holds its m's cos and sin Zbar for all F features (the whole
 * K extent, 2 · 64 · F floats) and runs the K loop over W_m from w_t
 * (w[m][o][i] transposed, K-major as wgmma wants it), warpgroup g on part g
 * (wgmma.m64n128k8, one accumulator); then it adds the products into
 * Xbar's 128 features of its two slots. The barrier makes the in-place
 * update safe: every read of the row tile's Xbar (phase one) precedes it.
 * Measured: correct, and 1.04 ms a layer on an H100 (1.14 on an H200
 * before phase one's loads ran an item ahead) against 0.57 for rs_vjp_vk
 * + cuBLAS on an H200 (latency-bound: one CTA per SM runs its phases in
 * turn; doc/design.md), so opt-in (ECENET_LAYER_TC=4). */
constexpr int WV_BM = 64;              /* edges of a row tile */
constexpr int WV_FS = 32;              /* features of a CTA's RealSpace slice */
constexpr int WV_FMAX = 256;           /* A holds every feature: F <= 256 */
/* A: floats between k-adjacent core matrices; 8 floats of padding (LBA = 8
 * mod 32 banks) make phase one's float2 stores (a warp: two rows, sixteen
 * feature pairs) two wavefronts, the fewest for 256 bytes */
constexpr int WV_LBA = 4 * WV_BM + 8;
constexpr int WV_APART = WV_FMAX / 4 * WV_LBA; /* A of one part: F/4 k chunks */
constexpr int WV_STAGE = WG_KS * WG_T;         /* a stage: two 16-k tiles of W_m */
constexpr int WV_MAIN = 2 * WV_APART + WG_NBUF * WV_STAGE;
constexpr size_t WV_SMEM = (size_t)(WV_MAIN + 4 * TC_Q * TC_GMAX) * sizeof(float);
constexpr int WV_ITEMS = WV_BM * WV_FS / 2 / TC_THREADS; /* 2-feature items a thread */
static_assert(WV_ITEMS * TC_THREADS * 2 == WV_BM * WV_FS, "whole items per thread");
static_assert(4 * WV_FS == WG_BN, "the 4·F/128 ranks of a cluster cover F in 32-feature slices");
static_assert(WV_SMEM <= 227 * 1024, "one CTA's shared memory on sm_90");

#ifdef ECN_WGMMA
__device__ static inline float2 wv_rna2(float x, float y)
{
    return make_float2(__uint_as_float(to_tf32(x)), __uint_as_float(to_tf32(y)));
}
/* phase one's item it of a thread: features f, f+1 of row r, Z's and Xbar's
 * eight slots (the sin m = 0 slot not read: zero, as sin0_zero allows);
 * rows past E read nothing: zeros in, zeros out */
struct WvIn {
    float2 z[TC_S], b[TC_S];
};
__device__ static inline void wv_load(WvIn &in, const float *Z, const float *Xb, int64_t E,
                                      int64_t e0, int F, int rank, int it)
{
    const int i = threadIdx.x + TC_THREADS * it;
    const int64_t e = e0 + (i >> 4);
    const int64_t o = e * (2LL * TC_Q * F) + WV_FS * rank + 2 * (i & 15);
#pragma unroll
    for (int s = 0; s < TC_S; s++) {
        const bool ok = e < E && s != 1;
        in.z[s] = ok ? __ldcs(reinterpret_cast<const float2 *>(Z + o + (int64_t)s * F))
                     : make_float2(0.0f, 0.0f);
        in.b[s] = ok ? *reinterpret_cast<const float2 *>(Xb + o + (int64_t)s * F)
                     : make_float2(0.0f, 0.0f);
    }
}
#endif

template <bool SILU, bool SYM>
__global__ void __launch_bounds__(TC_THREADS, 1)
    layer_wg_vjp_k(int64_t E, int F, TcArgs a, float *Xb, float *Z_)
{
#ifdef ECN_WGMMA
    extern __shared__ __align__(16) float sm[];
    float *A = sm, *Bs = sm + 2 * WV_APART, *tab = sm + WV_MAIN;
    const float *Z = Z_;
    cgr::cluster_group cl = cgr::this_cluster();
    const int NT = F / WG_BN, rank = (int)cl.block_rank(); /* rank = n·4 + m */
    const int m = rank & 3, n0 = (rank >> 2) * WG_BN;
    const int64_t e0 = (int64_t)(blockIdx.x / (4 * NT)) * WV_BM;
    const int tid = threadIdx.x, g = tid >> 7;
    const int NS = F / (WG_BK * WG_KS); /* stages of the K loop */
    /* the other CTAs of the cluster must have started before their shared
     * memory is written: arrive now, wait before the first remote store */
    asm volatile("barrier.cluster.arrive.relaxed.aligned;\n" ::: "memory");
    /* W_m's first two stages: stage 0 stored, stage 1 in registers */
    float4 R[WG_KS][2];
#pragma unroll
    for (int ks = 0; ks < WG_KS; ks++)
        wg_fetch_w(R[ks], a.w, F, n0, m, ks * WG_BK);
#pragma unroll
    for (int ks = 0; ks < WG_KS; ks++)
        wg_store_w(Bs + ks * WG_T, R[ks]);
    if (NS > 1)
#pragma unroll
        for (int ks = 0; ks < WG_KS; ks++)
            wg_fetch_w(R[ks], a.w, F, n0, m, (WG_KS + ks) * WG_BK);
    rs_tables<float, TC_Q>(a.rs, tab); /* (ends with __syncthreads) */

    /* phase one: Zbar of features f_r..f_r+31, every slot, rows e0..e0+63 */
    float *dst[TC_Q][2]; /* A of the CTAs (n, m') */
#pragma unroll
    for (int mm = 0; mm < TC_Q; mm++)
#pragma unroll
        for (int nn = 0; nn < 2; nn++)
            dst[mm][nn] = nn < NT ? cl.map_shared_rank(sm, (unsigned)(nn * 4 + mm)) : NULL;
    const int64_t rstride = 2LL * TC_Q * F;
    /* the loads of item it + 1 are issued before item it's grid: one CTA
     * per SM has few warps to hide their latency with */
    WvIn cur, nxt;
    wv_load(cur, Z, Xb, E, e0, F, rank, 0);
#pragma unroll
    for (int it = 0; it < WV_ITEMS; it++) {
        if (it + 1 < WV_ITEMS)
            wv_load(nxt, Z, Xb, E, e0, F, rank, it + 1);
        const int i = tid + TC_THREADS * it, r = i >> 4, f = WV_FS * rank + 2 * (i & 15);
        const int64_t e = e0 + r;
        float xc[TC_Q][2], xs[TC_Q][2], bc[TC_Q][2], bs[TC_Q][2], gc[TC_Q][2], gs[TC_Q][2];
        float scale[2], shift[2];
#pragma unroll
        for (int mm = 0; mm < TC_Q; mm++) {
            xc[mm][0] = cur.z[2 * mm].x; xc[mm][1] = cur.z[2 * mm].y;
            bc[mm][0] = cur.b[2 * mm].x; bc[mm][1] = cur.b[2 * mm].y;
            xs[mm][0] = cur.z[2 * mm + 1].x; xs[mm][1] = cur.z[2 * mm + 1].y;
            bs[mm][0] = cur.b[2 * mm + 1].x; bs[mm][1] = cur.b[2 * mm + 1].y;
            gc[mm][0] = gc[mm][1] = gs[mm][0] = gs[mm][1] = 0.0f;
        }
#pragma unroll
        for (int v = 0; v < 2; v++)
            rs_affine(a.rs, e, f + v, scale[v], shift[v]);
        if (SYM)
            rs_vjp_sym_v<float, TC_Q, 2, 2, SILU, true>(tab, a.rs.G, a.rs.act, 0, xc, xs, bc, bs,
                                                        scale, shift, gc, gs);
        else
            rs_vjp_grid_v<float, TC_Q, 2, 2, SILU, true>(tab, a.rs.G, a.rs.act, 0, xc, xs, bc, bs,
                                                         scale, shift, gc, gs);
        if (it == 0)
            asm volatile("barrier.cluster.wait.aligned;\n" ::: "memory");
        /* row r, features f, f+1 in the K-major core-matrix layout of A */
        const int o = (f >> 2) * WV_LBA + 32 * (r >> 3) + 4 * (r & 7) + (f & 3);
#pragma unroll
        for (int mm = 0; mm < TC_Q; mm++) {
            const float2 c = wv_rna2(gc[mm][0], gc[mm][1]), sn = wv_rna2(gs[mm][0], gs[mm][1]);
#pragma unroll
            for (int nn = 0; nn < 2; nn++)
                if (nn < NT) {
                    *reinterpret_cast<float2 *>(dst[mm][nn] + o) = c;
                    if (mm)
                        *reinterpret_cast<float2 *>(dst[mm][nn] + WV_APART + o) = sn;
                }
        }
        cur = nxt;
    }
    /* every slice of A written (remote stores visible to the wgmma proxy),
     * every read of the row tile's Xbar done */
    asm volatile("fence.proxy.async.shared::cluster;\n" ::: "memory");
    cl.sync();
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");

    /* phase two: the K loop over W_m's stages, as the forward's; warpgroup g
     * multiplies part g (m = 0 has no sin part: warpgroup 1 repeats the cos
     * product, unused, rather than branch around the MMAs) */
    /* phase three's Xbar values, loaded now to land during the K loop (only
     * this CTA writes them, after the barrier above) */
    const int w = (tid >> 5) & 3, lane = tid & 31;
    const bool mine = m || !g; /* m = 0 has no sin slot */
    float *xs0 = Xb + (2 * m + g) * F + n0 + 2 * (lane & 3);
    float2 xo[32];
#pragma unroll
    for (int j = 0; j < 64; j += 2) {
        const int64_t e = e0 + 16 * w + (lane >> 2) + 8 * ((j & 3) >> 1);
        xo[j / 2] = mine && e < E
                        ? *reinterpret_cast<const float2 *>(xs0 + e * rstride + 8 * (j >> 2))
                        : make_float2(0.0f, 0.0f);
    }
    float acc[64];
#pragma unroll
    for (int j = 0; j < 64; j++)
        acc[j] = 0.0f;
    const float *Ag = A + (m ? g : 0) * WV_APART;
    for (int kt = 0; kt < NS; kt++) {
        const float *st = Bs + (kt % WG_NBUF) * WV_STAGE;
        asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#pragma unroll
        for (int ks = 0; ks < WG_KS; ks++)
#pragma unroll
            for (int q = 0; q < 2; q++) {
                const int kc = ((kt * WG_KS + ks) * WG_BK + 8 * q) >> 2;
                wgmma128(acc, wg_desc(Ag + kc * WV_LBA, WV_LBA),
                         wg_desc(st + ks * WG_T + 2 * q * WG_LB));
            }
        asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
        asm volatile("wgmma.wait_group.sync.aligned 1;\n" ::: "memory");
        if (kt + 1 < NS)
#pragma unroll
            for (int ks = 0; ks < WG_KS; ks++)
                wg_store_w(Bs + ((kt + 1) % WG_NBUF) * WV_STAGE + ks * WG_T, R[ks]);
        if (kt + 2 < NS)
#pragma unroll
            for (int ks = 0; ks < WG_KS; ks++)
                wg_fetch_w(R[ks], a.w, F, n0, m, ((kt + 2) * WG_KS + ks) * WG_BK);
        asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
        __syncthreads();
    }
    asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");

    /* phase three: Xbar += the products, slot (m, g), features n0.. */
    if (mine)
#pragma unroll
        for (int j = 0; j < 64; j += 2) {
            const int64_t e = e0 + 16 * w + (lane >> 2) + 8 * ((j & 3) >> 1);
            if (e < E)
                __stwb(reinterpret_cast<float2 *>(xs0 + e * rstride + 8 * (j >> 2)),
                       make_float2(xo[j / 2].x + acc[j], xo[j / 2].y + acc[j + 1]));
        }
#else
    (void)E; (void)F; (void)a; (void)Xb; (void)Z_;
    __trap(); /* the host launches it only where the sm_90a code was built (ECN_CUDA_SM90A) */
#endif
}

/* ---- host side ----------------------------------------------------------------------------------- */

bool wg_available()
{
#ifdef ECN_CUDA_SM90A
    const State &s = state();
    return s.cc_major == 9 && s.cc_minor == 0 && s.smem_optin >= WG_SMEM;
#else
    return false;
#endif
}

/* The layers both wgmma kernels take: TF32, sin0_zero, F = 128 or 256 (a
 * cluster of 4·F/128 <= 8 CTAs per row tile of bm edges), Q = 4, a grid
 * the tables hold, no per-type terms, smem bytes of shared memory per CTA.
 * Returns the cluster size, 0 where the layer is not one of them. */
static int wg_cluster(int64_t E, const ecenet_linear_params *lin,
                      const ecenet_realspace_params *rs, int bm, size_t smem)
{
    const State &s = state();
    const int F = lin->fin, C = 4 * (F / WG_BN);
    if (!s.tf32 || !wg_available() || s.smem_optin < smem || !rs->sin0_zero || E <= 0 ||
        F <= 0 || lin->fout != F || rs->F != F || lin->Q != TC_Q || rs->Q != TC_Q || F % WG_BN ||
        C > 8 || rs->G > TC_GMAX || lin->w_src || lin->w_tgt || rs->scale_src || rs->scale_tgt ||
        rs->shift_src || rs->shift_tgt || (E + bm - 1) / bm * C > INT_MAX)
        return 0;
    return C;
}

bool layer_wg_fwd(int64_t E, const ecenet_linear_params *lin, const ecenet_realspace_params *rs,
                  float *X, float *Z)
{
    const int F = lin->fin, C = wg_cluster(E, lin, rs, WG_BM, WG_SMEM);
    if (!C || !aligned16(X) || !aligned16(Z) || !aligned16(lin->w))
        return false;
    TcArgs a;
    if (!tc_args(lin, rs, a))
        return false;
    static std::atomic<int> known[9];
    if (!tc_cluster_fits(known, (const void *)layer_wg_fwd_k<true, false>, WG_SMEM, C))
        return false;
    /* the folded grid where the RealSpace kernels fold (ECENET_RS_SYM) */
    const bool silu = rs->act == ECENET_ACT_SILU, sym = rs->grid_sym && ecn_cuda_rs_sym_on();
    auto k = silu ? (sym ? layer_wg_fwd_k<true, true> : layer_wg_fwd_k<true, false>)
                  : (sym ? layer_wg_fwd_k<false, true> : layer_wg_fwd_k<false, false>);
    tc_launch(k, WG_SMEM, WG_BM, C, E, F, a, X, Z);
    return true;
}

bool layer_wg_vjp(int64_t E, const ecenet_linear_params *lin, const ecenet_realspace_params *rs,
                  const float *Z, float *Xb)
{
    const int F = lin->fin, C = wg_cluster(E, lin, rs, WV_BM, WV_SMEM);
    if (!C || F > WV_FMAX || !lin->w_t || !aligned16(Z) || !aligned16(Xb) ||
        !aligned16(lin->w_t))
        return false;
    TcArgs a;
    a.w = (const float *)lin->w_t; /* the GEMM's B operand, K-major: w_t[m][i][o] */
    a.bias = NULL;
    a.rs = rs_args<float>(rs, NULL, NULL);
    static std::atomic<int> known[9];
    if (!tc_cluster_fits(known, (const void *)layer_wg_vjp_k<true, false>, WV_SMEM, C))
        return false;
    const bool silu = rs->act == ECENET_ACT_SILU, sym = rs->grid_sym && ecn_cuda_rs_sym_on();
    auto k = silu ? (sym ? layer_wg_vjp_k<true, true> : layer_wg_vjp_k<true, false>)
                  : (sym ? layer_wg_vjp_k<false, true> : layer_wg_vjp_k<false, false>);
    tc_launch(k, WV_SMEM, WV_BM, C, E, F, a, Xb, const_cast<float *>(Z));
    return true;
}
} // namespace ecn_cu

extern "C" int ecn_cuda_layer_wg_available(void) { return ecn_cu::wg_available(); }
