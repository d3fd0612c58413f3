/* Public message passing (SPEC §13) and the research attention weights
 * (§17.3); mirrors ref_mp.c. Pack-unrotate and rotate-back-unpack are the
 * edge frame's bond-frame maps (cuda_frame.cu, launched through
 * cuda_frame.cuh); the weighting and the scatter to receiver atoms are
 * here. Every reduction over edges walks the receiver's CSR list in order:
 * deterministic, no atomics. */
#include "cuda_frame.cuh"
#include "cuda_ops.cuh"

namespace ecn_cu {

/* ---- message passing ---------------------------------------------------------------------------------- */

template <typename T>
static void mp_pack_unrotate_fwd(const ecenet_dims *dm, const void *X, const void *D, void *G,
                                 void *Xs)
{
    state();
    launch_frame_out<T>(dm->E, geo(dm), (const T *)X, (const T *)D, (T *)G, (T *)Xs);
}

template <typename T>
static void mp_pack_unrotate_vjp(const ecenet_dims *dm, const void *X, const void *D,
                                 const void *gbar, void *Xbar, void *Dbar)
{
    state();
    /* X̄ += select(ḡ·D) on the valid slots; D̄ += ḡᵀ·select⁻¹(X) */
    launch_pu_vjp<T>(dm->E, geo(dm), (const T *)X, (const T *)D, (const T *)gbar, (T *)Xbar,
                     (T *)Dbar);
}

template <typename T>
__global__ void mp_weight_fwd_k(int64_t E, int F, int B, int L1, int T_, int K,
                                const int32_t *ts, const int32_t *tt, const T *fr, const T *W,
                                T *w)
{
    const int64_t q = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (q >= E * F)
        return;
    const int64_t e = q / F;
    const int b = (int)(q % F) / L1;
    const T *We = W + ((int64_t)ts[e] * T_ + tt[e]) * K * B;
    T acc = 0;
    for (int n = 0; n < K; n++)
        acc += fr[e * K + n] * We[n * B + b];
    w[q] = acc;
}

template <typename T>
static void mp_weight_fwd(const ecenet_dims *dm, int K, ecenet_idx tsrc, ecenet_idx ttgt,
                          const void *fr, const void *W_msg, void *w)
{
    state();
    const int64_t n = dm->E * dm->F;
    if (n <= 0)
        return;
    mp_weight_fwd_k<T><<<blocks_for(n, 256), 256>>>(dm->E, dm->F, dm->B, dm->L + 1, dm->T, K,
                                                    tsrc, ttgt, (const T *)fr, (const T *)W_msg,
                                                    (T *)w);
    CU_LAUNCHED();
}

template <typename T>
__global__ void mp_weight_vjp_k(int64_t E, int F, int B, int L1, int T_, int K,
                                const int32_t *ts, const int32_t *tt, const T *W, const T *wbar,
                                T *frbar)
{
    const int64_t q = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (q >= E * K)
        return;
    const int64_t e = q / K;
    const int n = (int)(q % K);
    const T *We = W + ((int64_t)ts[e] * T_ + tt[e]) * K * B;
    T acc = 0;
    for (int b = 0; b < B; b++)
        for (int l = 0; l < L1; l++)
            acc += wbar[e * F + b * L1 + l] * We[n * B + b];
    frbar[q] += acc;
}

template <typename T>
static void mp_weight_vjp(const ecenet_dims *dm, int K, ecenet_idx tsrc, ecenet_idx ttgt,
                          const void *W_msg, const void *wbar, void *frbar)
{
    state();
    const int64_t n = dm->E * K;
    if (n <= 0)
        return;
    mp_weight_vjp_k<T><<<blocks_for(n, 128), 128>>>(dm->E, dm->F, dm->B, dm->L + 1, dm->T, K,
                                                    tsrc, ttgt, (const T *)W_msg,
                                                    (const T *)wbar, (T *)frbar);
    CU_LAUNCHED();
}

/* Δ[a][b][s] = Σ_{e∈e_dst(a)} g[e][b][s]·w[e][b(L+1)+l(s)], CSR order */
template <typename T>
__global__ void mp_scatter_fwd_k(int64_t N, int B, int S, int L1, int F, const int32_t *ptr,
                                 const int32_t *idx, const T *G, const T *w, T *Delta)
{
    const int BS = B * S;
    for (int64_t a = blockIdx.x; a < N; a += gridDim.x)
        for (int q = threadIdx.x; q < BS; q += blockDim.x) {
            const int b = q / S, s = q % S, f = b * L1 + l_of_s(s);
            T acc = 0;
#pragma unroll 4
            for (int32_t p = ptr[a]; p < ptr[a + 1]; p++) {
                const int64_t e = idx[p];
                acc += G[e * BS + q] * w[e * F + f];
            }
            Delta[a * BS + q] = acc;
        }
}

template <typename T>
static void mp_scatter_fwd(const ecenet_dims *dm, ecenet_idx edge_j, const void *g, const void *w,
                           void *Delta)
{
    (void)edge_j;
    state();
    if (dm->N <= 0)
        return;
    const int BS = dm->B * dm->S, th = BS >= 512 ? 512 : (BS + 31) / 32 * 32;
    mp_scatter_fwd_k<T><<<grid_items(dm->N), th>>>(dm->N, dm->B, dm->S, dm->L + 1, dm->F,
                                                   dm->e_dst.ptr, dm->e_dst.idx, (const T *)g,
                                                   (const T *)w, (T *)Delta);
    CU_LAUNCHED();
}

template <typename T>
__global__ void mp_scatter_vjp_k(int64_t E, int B, int S, int L, int F, const int32_t *edge_j,
                                 const T *G, const T *w, const T *Db, T *gbar, T *wbar)
{
    const int BS = B * S, L1 = L + 1;
    /* fp32: NB = 4 ḡ items' loads before their stores, and w̄ items (l, b),
     * b fastest (a warp shares l and its loop's trip count 2l+1): by ncu on
     * the H200 bench 0.403 -> 0.310 ms. fp64 keeps one item at a time and
     * items f (lanes of 8 b's: fewer cache lines per load, which the doubles'
     * 128-byte rows need more): NB = 4 measured 0.390 -> 0.419 ms there, and
     * (l, b) items 0.391 -> 0.528 */
    constexpr int NB = sizeof(T) == 4 ? 4 : 1;
    constexpr bool LB = sizeof(T) == 4;
    for (int64_t e = blockIdx.x; e < E; e += gridDim.x) {
        const T *qb = Db + (int64_t)edge_j[e] * BS, *we = w + e * F, *Ge = G + e * BS;
        T *gb = gbar + e * BS;
        /* ḡ[e][q] += Δ̄[j][q]·w[e][f(q)]: NB items' loads before their stores */
        for (int q0 = threadIdx.x; q0 < BS; q0 += NB * blockDim.x) {
            T a[NB], x[NB], o[NB];
#pragma unroll
            for (int k = 0; k < NB; k++) {
                const int q = q0 + k * blockDim.x;
                if (q < BS) {
                    const int b = q / S, s = q - b * S;
                    a[k] = qb[q];
                    x[k] = we[b * L1 + l_of_s(s)];
                    o[k] = gb[q];
                }
            }
#pragma unroll
            for (int k = 0; k < NB; k++) {
                const int q = q0 + k * blockDim.x;
                if (q < BS)
                    gb[q] = o[k] + a[k] * x[k];
            }
        }
        /* w̄[e][f] += Σ_{s of l} Δ̄[j][b][s]·g[e][b][s] */
        for (int q = threadIdx.x; q < F; q += blockDim.x) {
            const int l = LB ? q / B : q % L1, b = LB ? q - l * B : q / L1;
            T acc = 0;
            for (int s = l * l; s < (l + 1) * (l + 1); s++)
                acc += qb[b * S + s] * Ge[b * S + s];
            wbar[e * F + b * L1 + l] += acc;
        }
    }
}

template <typename T>
static void mp_scatter_vjp(const ecenet_dims *dm, ecenet_idx edge_j, const void *g, const void *w,
                           const void *Delta_bar, void *gbar, void *wbar)
{
    state();
    if (dm->E <= 0)
        return;
    mp_scatter_vjp_k<T><<<grid_items(dm->E), 256>>>(dm->E, dm->B, dm->S, dm->L, dm->F, edge_j,
                                                    (const T *)g, (const T *)w,
                                                    (const T *)Delta_bar, (T *)gbar, (T *)wbar);
    CU_LAUNCHED();
}

template <typename T>
static void mp_rotate_unpack_fwd(const ecenet_dims *dm, ecenet_idx edge_i, const void *Delta,
                                 const void *D, void *X)
{
    state();
    Rows<T> rows = {(const T *)Delta, edge_i, NULL, ROWS_ATOM_SRC};
    launch_frame_in<T, true>(dm->E, geo(dm), rows, (const T *)D, (T *)X);
}

template <typename T>
static void mp_rotate_unpack_vjp(const ecenet_dims *dm, ecenet_idx edge_i, const void *Delta,
                                 const void *D, const void *Xbar, void *Delta_bar, void *Dbar)
{
    state();
    if (dm->E <= 0)
        return;
    const Geo g = geo(dm);
    Rows<T> rows = {(const T *)Delta, edge_i, NULL, ROWS_ATOM_SRC};
    launch_frame_dbar<T>(dm->E, g, rows, (const T *)Xbar, (T *)Dbar);
    launch_frame_atom<T>(dm->N, g, g.B, &dm->e_src, 0, (const ecenet_csr *)NULL, 0,
                         (const T *)Xbar, (const T *)D, (T *)Delta_bar);
}

/* ---- research attention weights (SPEC §17.3; ref_mp.c) ---------------------------------------------- */

/* ā_e[k]: Σ of w̄ over the channels gated by slot k, b-major (the reference's order) */
template <typename T>
__device__ static inline double abar_slot(const T *wb, int k, int B, int L1, int H, int l_att)
{
    const int BH = B / H;
    double acc = 0.0;
    if (l_att) {
        const int h = k / L1, l = k % L1;
        for (int b = h * BH; b < (h + 1) * BH; b++)
            acc += (double)wb[b * L1 + l];
    } else {
        for (int b = k * BH; b < (k + 1) * BH; b++)
            for (int l = 0; l < L1; l++)
                acc += (double)wb[b * L1 + l];
    }
    return acc;
}

__device__ static inline int is_tie(double s, double M)
{
    return fabs(s - M) <= 1e-12 * fmax(1.0, fabs(M));
}

/* per (receiver, slot): M, Z (and for the VJP: Σ ā a, tie count) into tmp (N, 4K) */
template <typename T>
__global__ void attn_stats_k(int64_t N, int K, const int32_t *ptr, const int32_t *idx,
                             const T *s, const T *fc, const T *a, const T *wbar, int F, int B,
                             int L1, int H, int l_att, T *tmp)
{
    const int64_t q = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (q >= N * K)
        return;
    const int64_t j = q / K;
    const int k = (int)(q % K);
    double M = -HUGE_VAL, Z = 0.0;
    for (int32_t p = ptr[j]; p < ptr[j + 1]; p++) {
        const double v = (double)s[(int64_t)idx[p] * K + k];
        if (v > M)
            M = v;
    }
    for (int32_t p = ptr[j]; p < ptr[j + 1]; p++) {
        const int64_t e = idx[p];
        Z += exp((double)s[e * K + k] - M) * (double)fc[e];
    }
    tmp[q] = (T)M;
    tmp[N * K + q] = (T)Z;
    if (!wbar)
        return;
    double dot = 0.0, cnt = 0.0;
    for (int32_t p = ptr[j]; p < ptr[j + 1]; p++) {
        const int64_t e = idx[p];
        dot += abar_slot(wbar + e * F, k, B, L1, H, l_att) * (double)a[e * K + k];
        if (is_tie((double)s[e * K + k], M))
            cnt += 1.0;
    }
    tmp[2 * N * K + q] = (T)dot;
    tmp[3 * N * K + q] = (T)cnt;
}

template <typename T>
__global__ void attn_fwd_k(int64_t E, int64_t N, int K, int mode, int msg_env,
                           const int32_t *edge_j, const T *s, const T *fc, const T *tmp, T *a)
{
    const int64_t q = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (q >= E * K)
        return;
    const int64_t e = q / K;
    const int k = (int)(q % K);
    if (mode == ECENET_ATTN_SOFTMAX) {
        const int64_t jk = (int64_t)edge_j[e] * K + k;
        const double M = (double)tmp[jk], Z = (double)tmp[N * K + jk], f = (double)fc[e];
        a[q] = (T)(exp((double)s[q] - M) * f / (Z + 1e-6) * (msg_env ? f : 1.0));
    } else {
        a[q] = s[q] * fc[e];
    }
}

template <typename T>
__global__ void attn_gate_k(int64_t E, int F, int K, int L1, int BH, int l_att, const T *a, T *w)
{
    const int64_t q = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (q >= E * F)
        return;
    const int64_t e = q / F;
    const int f = (int)(q % F), b = f / L1, l = f % L1, h = b / BH;
    w[q] = a[e * K + (l_att ? h * L1 + l : h)];
}

template <typename T>
static void mp_attn_weight_fwd(const ecenet_dims *dm, int n_heads, int l_attention, int mode,
                               int msg_env, ecenet_idx edge_j, const void *scores, const void *fc,
                               void *a, void *w, void *tmp)
{
    state();
    const int L1 = dm->L + 1, K = n_heads * (l_attention ? L1 : 1);
    if (mode == ECENET_ATTN_SOFTMAX && dm->N > 0) {
        attn_stats_k<T><<<blocks_for(dm->N * K, 128), 128>>>(
            dm->N, K, dm->e_dst.ptr, dm->e_dst.idx, (const T *)scores, (const T *)fc, NULL,
            NULL, dm->F, dm->B, L1, n_heads, l_attention, (T *)tmp);
        CU_LAUNCHED();
    }
    if (dm->E <= 0)
        return;
    attn_fwd_k<T><<<blocks_for(dm->E * K, 256), 256>>>(dm->E, dm->N, K, mode, msg_env, edge_j,
                                                       (const T *)scores, (const T *)fc,
                                                       (const T *)tmp, (T *)a);
    CU_LAUNCHED();
    attn_gate_k<T><<<blocks_for(dm->E * dm->F, 256), 256>>>(
        dm->E, dm->F, K, L1, dm->B / n_heads, l_attention, (const T *)a, (T *)w);
    CU_LAUNCHED();
}

template <typename T>
__global__ void attn_vjp_k(int64_t E, int64_t N, int K, int mode, int msg_env,
                           const int32_t *edge_j, const T *s, const T *fc, const T *wbar, int F,
                           int B, int L1, int H, int l_att, const T *tmp, T *sbar, T *fcbar)
{
    const int64_t e = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (e >= E)
        return;
    const double eps = 1e-6, f = (double)fc[e];
    T fb = 0;
    for (int k = 0; k < K; k++) {
        const int64_t ek = e * K + k;
        const double ab = abar_slot(wbar + e * F, k, B, L1, H, l_att);
        if (mode != ECENET_ATTN_SOFTMAX) {
            sbar[ek] += (T)(ab * f);
            fb += (T)(ab * (double)s[ek]);
            continue;
        }
        const int64_t jk = (int64_t)edge_j[e] * K + k;
        const double M = (double)tmp[jk], Z = (double)tmp[N * K + jk];
        const double dot = (double)tmp[2 * N * K + jk], cnt = (double)tmp[3 * N * K + jk];
        const double env = msg_env ? f : 1.0;
        const double x = exp((double)s[ek] - M) / (Z + eps);
        const double c = ab * env - dot;
        sbar[ek] += (T)(x * f * c);
        fb += (T)(x * c + (msg_env ? ab * x * f : 0.0));
        if (is_tie((double)s[ek], M))
            sbar[ek] += (T)(dot * (-eps / (Z + eps)) / cnt);
    }
    fcbar[e] += fb;
}

template <typename T>
static void mp_attn_weight_vjp(const ecenet_dims *dm, int n_heads, int l_attention, int mode,
                               int msg_env, ecenet_idx edge_j, const void *scores, const void *fc,
                               const void *a, const void *wbar, void *tmp, void *sbar,
                               void *fcbar)
{
    state();
    const int L1 = dm->L + 1, K = n_heads * (l_attention ? L1 : 1);
    if (mode == ECENET_ATTN_SOFTMAX && dm->N > 0) {
        attn_stats_k<T><<<blocks_for(dm->N * K, 128), 128>>>(
            dm->N, K, dm->e_dst.ptr, dm->e_dst.idx, (const T *)scores, (const T *)fc,
            (const T *)a, (const T *)wbar, dm->F, dm->B, L1, n_heads, l_attention, (T *)tmp);
        CU_LAUNCHED();
    }
    if (dm->E <= 0)
        return;
    attn_vjp_k<T><<<blocks_for(dm->E, 128), 128>>>(
        dm->E, dm->N, K, mode, msg_env, edge_j, (const T *)scores, (const T *)fc,
        (const T *)wbar, dm->F, dm->B, L1, n_heads, l_attention, (const T *)tmp, (T *)sbar,
        (T *)fcbar);
    CU_LAUNCHED();
}

template <typename T> void fill_mp(ecenet_backend &b)
{
    b.mp_pack_unrotate_fwd = mp_pack_unrotate_fwd<T>;
    b.mp_pack_unrotate_vjp = mp_pack_unrotate_vjp<T>;
    b.mp_weight_fwd = mp_weight_fwd<T>;
    b.mp_weight_vjp = mp_weight_vjp<T>;
    b.mp_scatter_fwd = mp_scatter_fwd<T>;
    b.mp_scatter_vjp = mp_scatter_vjp<T>;
    b.mp_rotate_unpack_fwd = mp_rotate_unpack_fwd<T>;
    b.mp_rotate_unpack_vjp = mp_rotate_unpack_vjp<T>;
    b.mp_attn_weight_fwd = mp_attn_weight_fwd<T>;
    b.mp_attn_weight_vjp = mp_attn_weight_vjp<T>;
}

template void fill_mp<float>(ecenet_backend &);
template void fill_mp<double>(ecenet_backend &);

} // namespace ecn_cu
