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
 * 64g..64g+63 (wgmma.m64n128k8, two accumulators). Measured: correct, and
 * on an H100 0.69 ms a layer (ncu), the bench forward 0.7 ms slower than
 * cuBLAS + the RealSpace kernel (doc/performance.md), so off by default.
 *
 * Operands in shared memory, K-major, no swizzle: an 8-row × 16-byte core
 * matrix is 128 contiguous bytes; an R-row × 16-k tile is [k/4][row/8] of
 * them, so cores adjacent in rows are 128 B apart (the descriptor's stride
 * byte offset) and in k 16R + 64 B (its leading byte offset; 64 B of
 * padding after each k chunk keeps the copies free of bank conflicts), as
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
#pragma unroll
    for (int h = 0; h < 2; h++) {
        const int c = threadIdx.x + TC_THREADS * h;
        R.w[h] = __ldcg(reinterpret_cast<const float4 *>(
            W + ((int64_t)m * F + n0 + wg_row(c)) * F + k0 + 4 * wg_kc(c)));
    }
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
#pragma unroll
    for (int h = 0; h < 2; h++)
        *reinterpret_cast<float4 *>(st + 2 * WG_T + wg_off(threadIdx.x + TC_THREADS * h)) =
            wg_rna4(R.w[h]);
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

} // namespace ecn_cu

extern "C" int ecn_cuda_layer_wg_available(void) { return ecn_cu::wg_available(); }
