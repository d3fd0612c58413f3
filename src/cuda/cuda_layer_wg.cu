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
 * 0.97 ms a layer on an H100 against 0.65-0.70 for cuBLAS + the RealSpace
 * kernel (doc/performance.md), so off by default.
 *
 * Operands in shared memory, K-major, no swizzle: an 8-row × 16-byte core
 * matrix is 128 contiguous bytes; an R-row × 16-k tile is [k/4][row/8] of
 * them, so cores adjacent in rows are 128 B apart (the descriptor's stride
 * byte offset) and in k 16R + 64 B (its leading byte offset; 64 B of
 * padding after each k chunk keeps the copies free of bank conflicts), as
 * the PTX ISA defines them (tools/device/wgmma_probe.cu checked both fields
 * on the device). The cp.async chunk map (wg_row, wg_kc) reads whole
 * 32-byte sectors per quarter warp.
 *
 * TF32 rounding: the tensor cores would take the top 19 bits of each fp32
 * operand (truncation, a bias that reached 3.1e-3 in the ethanol golden
 * energy), so each thread rounds its own chunks to nearest (cvt.rna, as the
 * mma.sync kernel and cuBLAS's TF32 path) once they have landed. */
#include <atomic>
#include <mutex>
#include <stdlib.h>
#include <stdio.h>
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
static_assert(WG_BN % (2 * WG_BK) == 0, "F (a multiple of WG_BN) is a whole number of stages");
/* floats between k-adjacent core matrices of an R-row tile: the R/8 cores
 * of one k chunk, then 64 bytes of padding, so that the two k chunks a
 * quarter warp stores land on different banks */
__host__ __device__ constexpr int wg_lb(int R) { return 4 * R + 16; }
/* A CTA of BM edges (BM/64 warpgroups, each 64 edges × 128 features of
 * both parts); a stage of KS operand tiles of 16 k each */
template <int BM, int KS> struct WgShape {
    static constexpr int THREADS = 2 * BM;
    static constexpr int TA = 4 * wg_lb(BM);       /* one BM × 16 X tile */
    static constexpr int TW = 4 * wg_lb(WG_BN);    /* one 128 × 16 tile of W_m */
    static constexpr int SUB = 2 * TA + TW;        /* X's cos and sin slots of m, W_m */
    static constexpr int STAGE = KS * SUB;
    static constexpr int OUT = 2 * BM * WG_LDO;
    static constexpr int MAIN = WG_NBUF * STAGE > OUT ? WG_NBUF * STAGE : OUT;
    static constexpr size_t SMEM = (size_t)(MAIN + 4 * TC_Q * TC_GMAX) * sizeof(float);
    static constexpr int MINB = BM == 64 ? 2 : 1;  /* CTAs per SM (registers, shared memory) */
    static constexpr int XH = BM * 4 / THREADS;    /* 16-byte chunks a thread: of an X tile */
    static constexpr int WH = WG_BN * 4 / THREADS; /* of a W tile */
    static constexpr int EPI = (BM / 4) * (WG_BN / 4) / THREADS; /* epilogue items a thread */
    static_assert(XH * THREADS == BM * 4 && WH * THREADS == WG_BN * 4 &&
                      EPI * THREADS == (BM / 4) * (WG_BN / 4),
                  "every chunk and epilogue item has one thread");
};

#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define ECN_WGMMA 1 /* device code for sm_90a: wgmma */
/* shared-memory descriptor of an operand tile of R rows (k step wg_lb(R) floats, rows 128 B) */
template <int R> __device__ static inline uint64_t wg_desc(const float *p)
{
    const uint32_t a = (uint32_t)__cvta_generic_to_shared(p);
    return (uint64_t)((a & 0x3FFFF) >> 4) | (uint64_t)((4 * wg_lb(R)) >> 4) << 16 |
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

/* 16-byte chunk c of an R × 16 tile (quarter warp q = (c/8)%4, t = c%8):
 * row 8·(c/32) + 4·(q%2) + t/2, k chunk 2·(q/2) + t%2, at float offset
 * kc·wg_lb(R) + 4·row: a quarter warp reads the two halves of four 32-byte
 * sectors and writes 128 bytes on distinct banks */
__device__ static inline int wg_row(int c) { return 8 * (c >> 5) + 4 * ((c >> 3) & 1) + ((c & 7) >> 1); }
__device__ static inline int wg_kc(int c) { return 2 * ((c >> 4) & 1) + (c & 1); }
template <int R> __device__ static inline int wg_off(int c) { return wg_kc(c) * wg_lb(R) + 4 * wg_row(c); }

/* A thread's chunks of one 16-k operand tile of X's slots (m, cos), (m,
 * sin) and of W_m, in registers between the global load and the store */
template <int BM> struct WgRegs {
    float4 x[WgShape<BM, 1>::XH][2]; /* [chunk][part] */
    float4 w[WgShape<BM, 1>::WH];
};
__device__ static inline float4 wg_rna4(float4 v)
{
    return make_float4(__uint_as_float(to_tf32(v.x)), __uint_as_float(to_tf32(v.y)),
                       __uint_as_float(to_tf32(v.z)), __uint_as_float(to_tf32(v.w)));
}
/* load k0..k0+15 (L2 only: each X tile is read by the F/128 CTAs of its
 * row tile's feature tiles, W_m's by every row tile) */
template <int BM>
__device__ static inline void wg_fetch(WgRegs<BM> &R, const float *X, const float *W, int64_t E,
                                       int F, int64_t e0, int n0, int m, int k0)
{
    using S = WgShape<BM, 1>;
    const float4 z = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
#pragma unroll
    for (int h = 0; h < S::XH; h++) {
        const int c = threadIdx.x + S::THREADS * h;
        const int64_t e = e0 + wg_row(c);
        const bool ok = e < E; /* rows past E read nothing: zeros */
        const float *xa = X + (ok ? e : 0) * (2LL * TC_Q * F) + 2 * m * F + k0 + 4 * wg_kc(c);
        R.x[h][0] = ok ? __ldcg(reinterpret_cast<const float4 *>(xa)) : z;
        R.x[h][1] = ok && m ? __ldcg(reinterpret_cast<const float4 *>(xa + F)) : z;
    }
#pragma unroll
    for (int h = 0; h < S::WH; h++) {
        const int c = threadIdx.x + S::THREADS * h;
        R.w[h] = __ldcg(reinterpret_cast<const float4 *>(
            W + ((int64_t)m * F + n0 + wg_row(c)) * F + k0 + 4 * wg_kc(c)));
    }
}
/* ... rounded to TF32 (nearest: the tensor cores would truncate, a bias that
 * reached 3.1e-3 in the ethanol golden energy) into the tiles at st */
template <int BM> __device__ static inline void wg_store(float *st, const WgRegs<BM> &R, int m)
{
    using S = WgShape<BM, 1>;
#pragma unroll
    for (int h = 0; h < S::XH; h++) {
        const int o = wg_off<BM>(threadIdx.x + S::THREADS * h);
        *reinterpret_cast<float4 *>(st + o) = wg_rna4(R.x[h][0]);
        if (m)
            *reinterpret_cast<float4 *>(st + S::TA + o) = wg_rna4(R.x[h][1]);
    }
#pragma unroll
    for (int h = 0; h < S::WH; h++)
        *reinterpret_cast<float4 *>(st + 2 * S::TA + wg_off<WG_BN>(threadIdx.x + S::THREADS * h)) =
            wg_rna4(R.w[h]);
}
#endif

/* The K loop: three stages in shared memory, one in registers. Step kt
 * issues the MMAs of stage kt, waits for those of kt - 1
 * (wgmma.wait_group 1), stores stage kt + 1 into the buffer of kt - 2
 * (whose MMAs every warpgroup waited for before the barrier of step
 * kt - 1) and fetches stage kt + 2 into registers, so the global loads
 * have a step of MMAs to land. PRE: the epilogue's X values are loaded
 * before the cluster barrier (its wait hides their latency). */
template <int BM, int KS, bool PRE, bool SILU, bool SYM>
__global__ void __launch_bounds__(WgShape<BM, KS>::THREADS, WgShape<BM, KS>::MINB)
    layer_wg_fwd_k(int64_t E, int F, TcArgs a, float *X, float *Z)
{
#ifdef ECN_WGMMA
    using S = WgShape<BM, KS>;
    extern __shared__ __align__(16) float sm[];
    float *tab = sm + S::MAIN;
    cgr::cluster_group cl = cgr::this_cluster();
    const int NT = F / WG_BN, rank = (int)cl.block_rank(); /* rank = n·4 + m */
    const int m = rank & 3, n = rank >> 2, n0 = n * WG_BN;
    const int64_t e0 = (int64_t)(blockIdx.x / (4 * NT)) * BM;
    const int tid = threadIdx.x, g = tid >> 7;
    float acc[2][64];
#pragma unroll
    for (int p = 0; p < 2; p++)
#pragma unroll
        for (int j = 0; j < 64; j++)
            acc[p][j] = 0.0f;
    const int NS = F / (WG_BK * KS); /* stages */
    WgRegs<BM> R[KS];
#pragma unroll
    for (int ks = 0; ks < KS; ks++)
        wg_fetch<BM>(R[ks], X, a.w, E, F, e0, n0, m, ks * WG_BK);
#pragma unroll
    for (int ks = 0; ks < KS; ks++)
        wg_store<BM>(sm + ks * S::SUB, R[ks], m);
    if (NS > 1)
#pragma unroll
        for (int ks = 0; ks < KS; ks++)
            wg_fetch<BM>(R[ks], X, a.w, E, F, e0, n0, m, (KS + ks) * WG_BK);
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
    __syncthreads();
    for (int kt = 0; kt < NS; kt++) {
        const float *st = sm + (kt % WG_NBUF) * S::STAGE;
        asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#pragma unroll
        for (int ks = 0; ks < KS; ks++)
#pragma unroll
            for (int q = 0; q < 2; q++) {
                /* k step q of tile ks: cores 2q, 2q+1; warpgroup g: rows 64g.
                 * m = 0 has no sin slot: its second product repeats the cos
                 * one (unused) rather than branch, which makes ptxas fence
                 * the MMAs */
                const float *t = st + ks * S::SUB + 2 * q * wg_lb(BM) + 256 * g;
                const uint64_t db = wg_desc<WG_BN>(st + ks * S::SUB + 2 * S::TA + 2 * q * wg_lb(WG_BN));
                wgmma128(acc[0], wg_desc<BM>(t), db);
                wgmma128(acc[1], wg_desc<BM>(t + (m ? S::TA : 0)), db);
            }
        asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
        asm volatile("wgmma.wait_group.sync.aligned 1;\n" ::: "memory");
        if (kt + 1 < NS)
#pragma unroll
            for (int ks = 0; ks < KS; ks++)
                wg_store<BM>(sm + ((kt + 1) % WG_NBUF) * S::STAGE + ks * S::SUB, R[ks], m);
        if (kt + 2 < NS)
#pragma unroll
            for (int ks = 0; ks < KS; ks++)
                wg_fetch<BM>(R[ks], X, a.w, E, F, e0, n0, m, ((kt + 2) * KS + ks) * WG_BK);
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
                *reinterpret_cast<float2 *>(sm + (p * BM + row) * WG_LDO + col) =
                    make_float2(acc[p][j], acc[p][j + 1]);
            }
        }
    }
    /* epilogue item it of this thread: row r (of BM/4 in the quarter m of
     * the row tile), features c..c+3 of the feature tile */
    const int64_t rstride = 2LL * TC_Q * F;
    auto item = [&](int it, int &r, int &c) {
        const int i = tid + S::THREADS * it;
        r = (BM / 4) * m + i / (WG_BN / 4);
        c = 4 * (i % (WG_BN / 4));
    };
    float4 xp[PRE ? S::EPI : 1][TC_S];
    if (PRE)
#pragma unroll
        for (int it = 0; it < S::EPI; it++) {
            int r, c;
            item(it, r, c);
            tc_ldx<true>(e0 + r < E ? X + (e0 + r) * rstride + n0 + c : NULL, F, xp[PRE ? it : 0]);
        }
    rs_tables<float, TC_Q>(a.rs, tab);
    cl.sync(); /* every CTA staged its slots and has read X's rows */

    /* the four m's slots from the four CTAs of this feature tile */
    const float *O[TC_Q];
#pragma unroll
    for (int mm = 0; mm < TC_Q; mm++)
        O[mm] = cl.map_shared_rank(sm, (unsigned)(n * 4 + mm));
#pragma unroll
    for (int it = 0; it < S::EPI; it++) {
        int r, c;
        item(it, r, c);
        const int64_t e = e0 + r;
        if (e >= E)
            break; /* rows only grow with it */
        float zc[TC_Q][4], zs[TC_Q][4];
#pragma unroll
        for (int mm = 0; mm < TC_Q; mm++) {
            unpack4(ld4(O[mm] + r * WG_LDO + c), zc[mm]);
            unpack4(mm ? ld4(O[mm] + (BM + r) * WG_LDO + c) : make_float4(0.0f, 0.0f, 0.0f, 0.0f),
                    zs[mm]);
        }
        float *xe = X + e * rstride + n0 + c;
        float4 x[TC_S];
        if (PRE) {
#pragma unroll
            for (int s = 0; s < TC_S; s++)
                x[s] = xp[PRE ? it : 0][s];
        } else {
            tc_ldx<true>(xe, F, x);
        }
        tc_epi4<SILU, true, SYM>(tab, a, F, n0 + c, Z + e * rstride + n0 + c, xe, x, zc, zs);
    }
    cl.sync(); /* no CTA leaves while another still reads its shared memory */
#else
    (void)E; (void)F; (void)a; (void)X; (void)Z;
    __trap(); /* the host launches it only where the sm_90a code was built (ECN_CUDA_SM90A) */
#endif
}

/* ---- host side ----------------------------------------------------------------------------------- */

/* the kernel's variant: ECENET_WG_VARIANT = "BM,KS,PRE" (read once) */
struct WgVariant {
    int bm = 128, ks = 1, pre = 0;
};
static const WgVariant &wg_variant()
{
    static std::once_flag once;
    static WgVariant v;
    std::call_once(once, [] {
        const char *s = getenv("ECENET_WG_VARIANT");
        WgVariant t;
        if (s && sscanf(s, "%d,%d,%d", &t.bm, &t.ks, &t.pre) == 3 && (t.bm == 64 || t.bm == 128) &&
            (t.ks == 1 || t.ks == 2) && (t.pre == 0 || t.pre == 1))
            v = t;
    });
    return v;
}

bool wg_available()
{
#ifdef ECN_CUDA_SM90A
    const State &s = state();
    return s.cc_major == 9 && s.cc_minor == 0 && s.smem_optin >= WgShape<128, 2>::SMEM;
#else
    return false;
#endif
}

template <int BM, int KS, bool PRE>
static bool wg_launch(int64_t E, int F, int C, bool silu, bool sym, const TcArgs &a, float *X,
                      float *Z)
{
    using S = WgShape<BM, KS>;
    static std::atomic<int> fits[9]; /* per cluster size: 0 unknown, 1 fits, -1 does not */
    if ((E + BM - 1) / BM * C > INT_MAX)
        return false;
    if (!fits[C].load())
        fits[C].store(tc_cluster_fits((const void *)layer_wg_fwd_k<BM, KS, PRE, true, false>,
                                      S::SMEM, C, S::THREADS)
                          ? 1
                          : -1);
    if (fits[C].load() < 0)
        return false;
    auto k = silu ? (sym ? layer_wg_fwd_k<BM, KS, PRE, true, true>
                         : layer_wg_fwd_k<BM, KS, PRE, true, false>)
                  : (sym ? layer_wg_fwd_k<BM, KS, PRE, false, true>
                         : layer_wg_fwd_k<BM, KS, PRE, false, false>);
    tc_launch(k, S::SMEM, BM, C, E, F, a, X, Z, S::THREADS);
    return true;
}

bool layer_wg_fwd(int64_t E, const ecenet_linear_params *lin, const ecenet_realspace_params *rs,
                  float *X, float *Z)
{
    const State &s = state();
    const int F = lin->fin, C = 4 * (F / WG_BN); /* clusters of 4·F/128 <= 8 */
    if (!s.tf32 || !wg_available() || !rs->sin0_zero || E <= 0 || F <= 0 || lin->fout != F ||
        rs->F != F || lin->Q != TC_Q || rs->Q != TC_Q || F % WG_BN || C > 8 || rs->G > TC_GMAX ||
        lin->w_src || lin->w_tgt || rs->scale_src || rs->scale_tgt || rs->shift_src ||
        rs->shift_tgt || !aligned16(X) || !aligned16(Z) || !aligned16(lin->w))
        return false;
    TcArgs a;
    a.w = (const float *)lin->w;
    a.bias = (const float *)lin->bias;
    a.rs = rs_args<float>(rs, NULL, NULL);
    if (!tc_vec_ok(a))
        return false;
    /* the folded grid where the RealSpace kernels fold (ECENET_RS_SYM) */
    const bool silu = rs->act == ECENET_ACT_SILU, sym = rs->grid_sym && ecn_cuda_rs_sym_on();
    const WgVariant &v = wg_variant();
#define WG_V(B, K, P)                                                                              \
    if (v.bm == B && v.ks == K && v.pre == P)                                                      \
        return wg_launch<B, K, P>(E, F, C, silu, sym, a, X, Z);
    WG_V(128, 1, 0) WG_V(128, 1, 1) WG_V(128, 2, 0) WG_V(128, 2, 1)
    WG_V(64, 1, 0) WG_V(64, 1, 1) WG_V(64, 2, 0) WG_V(64, 2, 1)
#undef WG_V
    return false;
}

} // namespace ecn_cu

extern "C" int ecn_cuda_layer_wg_available(void) { return ecn_cu::wg_available(); }
