/* The fused TF32 layer forward on Hopper's warpgroup MMA (ECENET_LAYER_TC=3,
 * opt-in; SPEC §10-§12): Z = Linear(X), X += RealSpace(Z) in one kernel,
 * sin0_zero layers, F = 128 or 256, compute capability 9.0 (wgmma is
 * sm_90a code, which configure's sm_90 builds).
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
 * 64g..64g+63 (wgmma.m64n128k8, two accumulators); the K loop keeps one
 * MMA group in flight while the next stages load and round. Measured:
 * correct, and 0.90 ms a layer on an H100 against 0.64-0.66 for cuBLAS +
 * the RealSpace kernel (doc/performance.md), so off by default. 64-edge
 * CTAs (one warpgroup, three CTAs per SM) were slower: 0.97 ms.
 *
 * Operands in shared memory, K-major, no swizzle: an 8-row × 16-byte core
 * matrix is 128 contiguous bytes; an R-row × 16-k tile is [k/4][row/8] of
 * them, so cores adjacent in rows are 128 B apart (the descriptor's stride
 * byte offset) and in k 16R + 64 B (its leading byte offset; 64 B of
 * padding after each k chunk keeps the copies free of bank conflicts), as
 * the PTX ISA defines them (tools/device/wgmma_probe.cu checked both fields
 * on the device). ncu counts each 16-byte cp.async chunk as its own
 * 32-byte L2 sector and its own shared-memory wavefront (32 of each per
 * instruction, 16 and 4 ideal) with either chunk map tried; a K loop
 * staged through registers (commit 79c4564, reverted unmeasured) is the
 * next thing to try.
 *
 * TF32 rounding: the tensor cores would take the top 19 bits of each fp32
 * operand (truncation, a bias that reached 3.1e-3 in the ethanol golden
 * energy), so each thread rounds its own chunks to nearest (cvt.rna, as the
 * mma.sync kernel and cuBLAS's TF32 path) once they have landed. */
#include <atomic>
#include <cooperative_groups.h>
#include <limits.h>
#include "cuda_backend.h"
#include "cuda_layer_tc.cuh"

namespace cgr = cooperative_groups;

namespace ecn_cu {

constexpr int WG_BK = 16, WG_NST = 4;     /* K step, cp.async stages */
static_assert(WG_BK == 16, "the chunk map (wg_row, wg_kc) covers four 16-byte k chunks");
constexpr int WG_BN = 128;                /* features per CTA */
constexpr int WG_LDO = WG_BN + 4;         /* staged output row: [part][edge][feature] */
/* A CTA: 128 edges (two warpgroups, each 64 edges × 128 features of both
 * parts), one per SM. 64-edge CTAs (one warpgroup, three per SM) measured
 * slower (doc/performance.md). Every operand tile (X's 128 edges, W_m's
 * 128 features) is 128 rows × 16 k. */
constexpr int WG_BM = 128;
static_assert(WG_BM == WG_BN && TC_THREADS == 2 * WG_BM,
              "one tile layout for both operands; a warpgroup per 64 edges");
/* floats between k-adjacent core matrices of a tile: its 16 cores of one k
 * chunk, then 64 bytes of padding, so that the two k chunks a quarter warp
 * copies land on different banks */
constexpr int WG_LB = 4 * WG_BM + 16;
constexpr int WG_T = 4 * WG_LB;       /* one 128 × 16 operand tile */
constexpr int WG_STAGE = 3 * WG_T;    /* X's cos and sin slots of m, W_m */
constexpr int WG_OUT = 2 * WG_BM * WG_LDO;
constexpr int WG_MAIN = WG_NST * WG_STAGE > WG_OUT ? WG_NST * WG_STAGE : WG_OUT;
constexpr size_t WG_SMEM = (size_t)(WG_MAIN + 4 * TC_Q * TC_GMAX) * sizeof(float);

#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define ECN_WGMMA 1 /* device code for sm_90a: wgmma */
/* shared-memory descriptor of an operand tile (k step WG_LB floats, rows 128 B) */
__device__ static inline uint64_t wg_desc(const float *p)
{
    const uint32_t a = (uint32_t)__cvta_generic_to_shared(p);
    return (uint64_t)((a & 0x3FFFF) >> 4) | (uint64_t)((4 * WG_LB) >> 4) << 16 |
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

/* 16-byte chunk c of a tile (quarter warp q = (c/8)%4, t = c%8): row
 * 8·(c/32) + 4·(q%2) + t/2, k chunk 2·(q/2) + t%2, at float offset
 * kc·WG_LB + 4·row: a quarter warp reads the two halves of four 32-byte
 * sectors and writes 128 bytes on distinct banks; a warp covers 64 bytes
 * of 8 rows. With the padding, 0.90 ms a layer against 0.95 for one chunk
 * of 8 rows per quarter warp (H100, doc/performance.md) */
__device__ static inline int wg_row(int c) { return 8 * (c >> 5) + 4 * ((c >> 3) & 1) + ((c & 7) >> 1); }
__device__ static inline int wg_kc(int c) { return 2 * ((c >> 4) & 1) + (c & 1); }
__device__ static inline int wg_off(int c) { return wg_kc(c) * WG_LB + 4 * wg_row(c); }

/* K tile k0..k0+15 of X's slots (m, cos) and (m, sin) (m > 0) and of W_m
 * into a stage: a thread's chunks c = tid, tid + 256 of each tile */
__device__ static inline void wg_load(float *st, const float *X, const float *W, int64_t E, int F,
                                      int64_t e0, int n0, int m, int k0)
{
#pragma unroll
    for (int h = 0; h < 2; h++) {
        const int c = threadIdx.x + TC_THREADS * h, o = wg_off(c);
        const int64_t e = e0 + wg_row(c);
        const bool ok = e < E; /* rows past E read nothing and fill zeros */
        const float *xa = X + (ok ? e : 0) * (2LL * TC_Q * F) + 2 * m * F + k0 + 4 * wg_kc(c);
        cp16(st + o, xa, ok);
        if (m)
            cp16(st + WG_T + o, xa + F, ok);
    }
#pragma unroll
    for (int h = 0; h < 2; h++) {
        const int c = threadIdx.x + TC_THREADS * h;
        cp16(st + 2 * WG_T + wg_off(c),
             W + ((int64_t)m * F + n0 + wg_row(c)) * F + k0 + 4 * wg_kc(c), true);
    }
}

__device__ static inline void wg_round4(float *q)
{
    float4 *p = reinterpret_cast<float4 *>(q);
    float4 v = *p;
    v.x = __uint_as_float(to_tf32(v.x));
    v.y = __uint_as_float(to_tf32(v.y));
    v.z = __uint_as_float(to_tf32(v.z));
    v.w = __uint_as_float(to_tf32(v.w));
    *p = v;
}

/* this thread's chunks of a landed stage (those wg_load copied), rounded to TF32 in place */
__device__ static inline void wg_round(float *st, int m)
{
#pragma unroll
    for (int h = 0; h < 2; h++) {
        const int o = wg_off(threadIdx.x + TC_THREADS * h);
        wg_round4(st + o);
        if (m)
            wg_round4(st + WG_T + o);
    }
#pragma unroll
    for (int h = 0; h < 2; h++)
        wg_round4(st + 2 * WG_T + wg_off(threadIdx.x + TC_THREADS * h));
}
#endif

/* The pipeline: stage kt + 2 is loaded while the MMAs of stage kt - 1 still
 * run (wgmma.wait_group 1), so the rounding of stage kt and the loads overlap
 * the tensor cores; the block barrier of step kt orders every warpgroup's
 * wait for step kt - 2's MMAs before stage (kt - 2)'s refill. */
template <bool SILU, bool SYM>
__global__ void __launch_bounds__(TC_THREADS, 1)
    layer_wg_fwd_k(int64_t E, int F, TcArgs a, float *X, float *Z)
{
#ifdef ECN_WGMMA
    constexpr int PD = WG_NST - 2; /* stages loaded ahead */
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
    const int KT = F / WG_BK;
#pragma unroll
    for (int st = 0; st < PD; st++) {
        if (st < KT)
            wg_load(sm + st * WG_STAGE, X, a.w, E, F, e0, n0, m, st * WG_BK);
        cp_commit();
    }
    for (int kt = 0; kt < KT; kt++) {
        cp_wait<PD - 1>();
        float *st = sm + (kt % WG_NST) * WG_STAGE;
        wg_round(st, m);
        asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
        __syncthreads();
        if (kt + PD < KT)
            wg_load(sm + ((kt + PD) % WG_NST) * WG_STAGE, X, a.w, E, F, e0, n0, m,
                        (kt + PD) * WG_BK);
        cp_commit();
        /* k step q: cores 2q, 2q+1 (2q·WG_LB floats in); warpgroup g: rows 64g */
        asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#pragma unroll
        for (int q = 0; q < 2; q++) {
            /* m = 0 has no sin slot: its second product repeats the cos one
             * (unused) rather than branch, which makes ptxas fence the MMAs */
            const uint64_t db = wg_desc(st + 2 * WG_T + 2 * WG_LB * q);
            wgmma128(acc[0], wg_desc(st + 256 * g + 2 * WG_LB * q), db);
            wgmma128(acc[1], wg_desc(st + (m ? WG_T : 0) + 256 * g + 2 * WG_LB * q), db);
        }
        asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
        asm volatile("wgmma.wait_group.sync.aligned 1;\n" ::: "memory");
    }
    asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
    cp_wait<0>();
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
    for (int i = tid; i < (WG_BM / 4) * (WG_BN / 4); i += TC_THREADS) {
        const int r = (WG_BM / 4) * m + i / (WG_BN / 4), c = 4 * (i % (WG_BN / 4));
        const int64_t e = e0 + r;
        if (e >= E)
            break; /* rows only grow with i */
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

bool layer_wg_fwd(int64_t E, const ecenet_linear_params *lin, const ecenet_realspace_params *rs,
                  float *X, float *Z)
{
    const State &s = state();
    const int F = lin->fin, C = 4 * (F / WG_BN); /* clusters of 4·F/128 <= 8 */
    if (!s.tf32 || !wg_available() || !rs->sin0_zero || E <= 0 || F <= 0 || lin->fout != F ||
        rs->F != F || lin->Q != TC_Q || rs->Q != TC_Q || F % WG_BN || C > 8 || rs->G > TC_GMAX ||
        lin->w_src || lin->w_tgt || rs->scale_src || rs->scale_tgt || rs->shift_src ||
        rs->shift_tgt || !aligned16(X) || !aligned16(Z) || !aligned16(lin->w) ||
        (E + WG_BM - 1) / WG_BM * C > INT_MAX)
        return false;
    static std::atomic<int> fits[9]; /* per cluster size: 0 unknown, 1 fits, -1 does not */
    if (!fits[C].load())
        fits[C].store(tc_cluster_fits((const void *)layer_wg_fwd_k<true, false>, WG_SMEM, C) ? 1
                                                                                             : -1);
    if (fits[C].load() < 0)
        return false;
    TcArgs a;
    a.w = (const float *)lin->w;
    a.bias = (const float *)lin->bias;
    a.rs = rs_args<float>(rs, NULL, NULL);
    /* the folded grid where the RealSpace kernels fold (ECENET_RS_SYM) */
    const bool silu = rs->act == ECENET_ACT_SILU, sym = rs->grid_sym && ecn_cuda_rs_sym_on();
    auto k = silu ? (sym ? layer_wg_fwd_k<true, true> : layer_wg_fwd_k<true, false>)
                  : (sym ? layer_wg_fwd_k<false, true> : layer_wg_fwd_k<false, false>);
    tc_launch(k, WG_SMEM, WG_BM, C, E, F, a, X, Z);
    return true;
}

} // namespace ecn_cu

extern "C" int ecn_cuda_layer_wg_available(void) { return ecn_cu::wg_available(); }
