/* Message passing (SPEC §13) and the research attention weights (§17.3);
 * mirrors ref_mp.c. Pack+unrotate and rotate-back+unpack are fused per edge
 * (block-diagonal D, valid slots only, vectorised over the base channel:
 * omp_frame_out_t / omp_frame_in_t; Δ is read through a transposed copy in
 * the calling thread's shared scratch). Every per-atom sum runs atoms in
 * parallel, each over its edges in CSR order: dm->e_dst for the receiver
 * scatter and the softmax, dm->e_src for the source gather's VJP. No
 * atomics; results do not depend on the number of threads. */
#include "omp_ops.h"

void OMP_FN(omp_mp_pack_unrotate_fwd)(const ecenet_dims *dm, const void *X_, const void *D_,
                                      void *g_, void *Xs_)
{
    const real *X = X_, *D = D_;
    real *g = g_, *Xs = Xs_;
    const int64_t XE = (int64_t)dm->Q * 2 * dm->F, BS = (int64_t)dm->B * dm->S;
    const int B = dm->B, S = dm->S;
#pragma omp parallel
    {
        char *scr = OMP_FN(omp_scratch)(OMP_SCR_TILE, omp_pad64(2 * (size_t)B * sizeof(real)) +
                                                          omp_pad64((size_t)BS * sizeof(real)));
        real *buf = omp_carve(&scr, 2 * (size_t)B * sizeof(real));
        real *gt = omp_carve(&scr, (size_t)BS * sizeof(real));
#pragma omp for schedule(static)
        for (int64_t e = 0; e < dm->E; e++) {
            OMP_FN(omp_frame_out_t)(dm, X + e * XE, D + e * dm->ND, gt, buf);
            real *ge = g + e * BS;
            for (int b = 0; b < B; b++)
                for (int s = 0; s < S; s++)
                    ge[(int64_t)b * S + s] = gt[(int64_t)s * B + b];
            if (Xs) /* while the edge's features are in cache */
                memcpy(Xs + e * XE, X + e * XE, (size_t)XE * sizeof(real));
        }
    }
}

void OMP_FN(omp_mp_pack_unrotate_vjp)(const ecenet_dims *dm, const void *X_, const void *D_,
                                      const void *gbar_, void *Xbar_, void *Dbar_)
{
    const real *X = X_, *D = D_, *gbar = gbar_;
    real *Xbar = Xbar_, *Dbar = Dbar_;
    const int64_t XE = (int64_t)dm->Q * 2 * dm->F, BS = (int64_t)dm->B * dm->S;
    const int B = dm->B, S = dm->S;
#pragma omp parallel
    {
        char *scr = OMP_FN(omp_scratch)(OMP_SCR_TILE, omp_pad64(2 * (size_t)B * sizeof(real)) +
                                                          omp_pad64((size_t)BS * sizeof(real)));
        real *buf = omp_carve(&scr, 2 * (size_t)B * sizeof(real));
        real *gbt = omp_carve(&scr, (size_t)BS * sizeof(real));
#pragma omp for schedule(static)
        for (int64_t e = 0; e < dm->E; e++) {
            const real *ge = gbar + e * BS;
            for (int b = 0; b < B; b++)
                for (int s = 0; s < S; s++)
                    gbt[(int64_t)s * B + b] = ge[(int64_t)b * S + s];
            OMP_FN(omp_frame_out_vjp_t)(dm, X + e * XE, D + e * dm->ND, gbt, Xbar + e * XE,
                                        Dbar + e * dm->ND, buf);
        }
    }
}

/* w[e, b(L+1)+l] = Σ_n fr[e,n] W_msg[t_src, t_tgt, n, b], the same for every l */
void OMP_FN(omp_mp_weight_fwd)(const ecenet_dims *dm, int K, ecenet_idx tsrc, ecenet_idx ttgt,
                               const void *fr_, const void *W_, void *w_)
{
    const real *fr = fr_, *W = W_;
    real *w = w_;
    const int B = dm->B, T = dm->T, L1 = dm->L + 1;
#pragma omp parallel
    {
        real *acc = OMP_FN(omp_scratch)(OMP_SCR_TILE, (size_t)B * sizeof(real));
#pragma omp for schedule(static)
        for (int64_t e = 0; e < dm->E; e++) {
            const real *We = W + ((int64_t)tsrc[e] * T + ttgt[e]) * K * B;
            for (int b = 0; b < B; b++)
                acc[b] = RL(0.0);
            for (int n = 0; n < K; n++) {
                const real c = fr[e * K + n];
                const real *wn = We + (int64_t)n * B;
                OMP_SIMD
                for (int b = 0; b < B; b++)
                    acc[b] += c * wn[b];
            }
            real *we = w + e * dm->F;
            for (int b = 0; b < B; b++)
                for (int l = 0; l < L1; l++)
                    we[b * L1 + l] = acc[b];
        }
    }
}

void OMP_FN(omp_mp_weight_vjp)(const ecenet_dims *dm, int K, ecenet_idx tsrc, ecenet_idx ttgt,
                               const void *W_, const void *wbar_, void *frbar_)
{
    const real *W = W_, *wbar = wbar_;
    real *frbar = frbar_;
    const int B = dm->B, T = dm->T, L1 = dm->L + 1;
#pragma omp parallel
    {
        real *sb = OMP_FN(omp_scratch)(OMP_SCR_TILE, (size_t)B * sizeof(real));
#pragma omp for schedule(static)
        for (int64_t e = 0; e < dm->E; e++) {
            const real *We = W + ((int64_t)tsrc[e] * T + ttgt[e]) * K * B;
            const real *wb = wbar + e * dm->F;
            for (int b = 0; b < B; b++) {
                real a = RL(0.0);
                for (int l = 0; l < L1; l++)
                    a += wb[b * L1 + l];
                sb[b] = a;
            }
            for (int n = 0; n < K; n++) {
                const real *wn = We + (int64_t)n * B;
                real acc = RL(0.0);
                for (int b = 0; b < B; b++)
                    acc += sb[b] * wn[b];
                frbar[e * K + n] += acc;
            }
        }
    }
}

/* Delta[a] = Σ_{e ∈ e_dst[a]} g[e]·w[e], edges in increasing order */
void OMP_FN(omp_mp_scatter_fwd)(const ecenet_dims *dm, ecenet_idx edge_j, const void *g_,
                                const void *w_, void *Delta_)
{
    (void)edge_j;
    const real *g = g_, *w = w_;
    real *Delta = Delta_;
    const int B = dm->B, S = dm->S, L1 = dm->L + 1;
    const int64_t BS = (int64_t)B * S;
#pragma omp parallel for schedule(dynamic, 4)
    for (int64_t a = 0; a < dm->N; a++) {
        real *Da = Delta + a * BS;
        for (int64_t q = 0; q < BS; q++)
            Da[q] = RL(0.0);
        for (int32_t c = dm->e_dst.ptr[a]; c < dm->e_dst.ptr[a + 1]; c++) {
            const int64_t e = dm->e_dst.idx[c];
            const real *ge = g + e * BS, *we = w + e * dm->F;
            for (int b = 0; b < B; b++)
                for (int l = 0; l < L1; l++) {
                    const real wv = we[b * L1 + l];
                    for (int s = l * l; s < (l + 1) * (l + 1); s++)
                        Da[b * S + s] += ge[b * S + s] * wv;
                }
        }
    }
}

void OMP_FN(omp_mp_scatter_vjp)(const ecenet_dims *dm, ecenet_idx edge_j, const void *g_,
                                const void *w_, const void *Delta_bar_, void *gbar_,
                                void *wbar_)
{
    const real *g = g_, *w = w_, *Dbar = Delta_bar_;
    real *gbar = gbar_, *wbar = wbar_;
    const int B = dm->B, S = dm->S, L1 = dm->L + 1;
    const int64_t BS = (int64_t)B * S;
#pragma omp parallel for schedule(static)
    for (int64_t e = 0; e < dm->E; e++) {
        const real *qb = Dbar + (int64_t)edge_j[e] * BS, *ge = g + e * BS;
        real *gbe = gbar + e * BS, *wbe = wbar + e * dm->F;
        const real *we = w + e * dm->F;
        for (int b = 0; b < B; b++)
            for (int l = 0; l < L1; l++) {
                const real wv = we[b * L1 + l];
                real acc = RL(0.0);
                for (int s = l * l; s < (l + 1) * (l + 1); s++) {
                    acc += qb[b * S + s] * ge[b * S + s];
                    gbe[b * S + s] += qb[b * S + s] * wv;
                }
                wbe[b * L1 + l] += acc;
            }
    }
}

void OMP_FN(omp_mp_rotate_unpack_fwd)(const ecenet_dims *dm, ecenet_idx edge_i,
                                      const void *Delta_, const void *D_, void *X_)
{
    const real *Delta = Delta_, *D = D_;
    real *X = X_;
    const int64_t XE = (int64_t)dm->Q * 2 * dm->F, BS = (int64_t)dm->B * dm->S;
    if (dm->E <= 0)
        return;
    real *Dt = OMP_FN(omp_scratch)(OMP_SCR_SHARED, (size_t)(dm->N * BS) * sizeof(real));
    OMP_FN(omp_transpose_rows)(dm->N, dm->B, dm->S, Delta, Dt);
#pragma omp parallel
    {
        real *buf = OMP_FN(omp_scratch)(OMP_SCR_TILE, 2 * (size_t)dm->B * sizeof(real));
#pragma omp for schedule(static)
        for (int64_t e = 0; e < dm->E; e++) {
            const real *u = Dt + edge_i[e] * BS;
            OMP_FN(omp_frame_in_t)(dm, u, u + dm->C, dm->B, D + e * dm->ND, X + e * XE, 1, buf);
        }
    }
}

/* Δ̄[a] over a's source edges in CSR order (dm->e_src), accumulated transposed */
void OMP_FN(omp_mp_rotate_unpack_vjp)(const ecenet_dims *dm, ecenet_idx edge_i,
                                      const void *Delta_, const void *D_, const void *Xbar_,
                                      void *Delta_bar_, void *Dbar_)
{
    const real *Delta = Delta_, *D = D_, *Xbar = Xbar_;
    real *Deltabar = Delta_bar_, *Dbar = Dbar_;
    const int64_t XE = (int64_t)dm->Q * 2 * dm->F, BS = (int64_t)dm->B * dm->S;
    const int B = dm->B, S = dm->S;
    if (dm->E <= 0)
        return;
    real *Dt = OMP_FN(omp_scratch)(OMP_SCR_SHARED, (size_t)(dm->N * BS) * sizeof(real));
    OMP_FN(omp_transpose_rows)(dm->N, B, S, Delta, Dt);
#pragma omp parallel
    {
        char *scr = OMP_FN(omp_scratch)(OMP_SCR_TILE, omp_pad64(2 * (size_t)B * sizeof(real)) +
                                                          omp_pad64((size_t)BS * sizeof(real)));
        real *buf = omp_carve(&scr, 2 * (size_t)B * sizeof(real));
        real *Tb = omp_carve(&scr, (size_t)BS * sizeof(real));
#pragma omp for schedule(static)
        for (int64_t e = 0; e < dm->E; e++) {
            const real *u = Dt + edge_i[e] * BS;
            OMP_FN(omp_frame_in_vjp_D_t)(dm, u, u + dm->C, B, Xbar + e * XE, Dbar + e * dm->ND,
                                         buf);
        }
#pragma omp for schedule(dynamic, 4)
        for (int64_t a = 0; a < dm->N; a++) {
            const int32_t c0 = dm->e_src.ptr[a], c1 = dm->e_src.ptr[a + 1];
            if (c0 == c1)
                continue;
            for (int64_t q = 0; q < BS; q++)
                Tb[q] = RL(0.0);
            for (int32_t c = c0; c < c1; c++) {
                const int64_t e = dm->e_src.idx[c];
                OMP_FN(omp_frame_in_vjp_rows_t)(dm, 0, B, D + e * dm->ND, Xbar + e * XE, Tb, B,
                                                buf);
            }
            real *rb = Deltabar + a * BS;
            for (int b = 0; b < B; b++)
                for (int s = 0; s < S; s++)
                    rb[(int64_t)b * S + s] += Tb[(int64_t)s * B + b];
        }
    }
}

/* ---- research attention weights (SPEC §17.3 step 4-5) ---- */

static int gate_slot(const ecenet_dims *dm, int n_heads, int l_attention, int b, int l)
{
    const int h = b / (dm->B / n_heads);
    return l_attention ? h * (dm->L + 1) + l : h;
}

/* Per receiver j and slot k, over j's edges in CSR order: M = max score and
 * Z = Σ exp(s - M)·fc, in double (M, Z: K each). */
static void softmax_stats(const ecenet_dims *dm, int K, int64_t j, const real *s,
                          const real *fc, double *M, double *Z)
{
    for (int k = 0; k < K; k++) {
        M[k] = -HUGE_VAL;
        Z[k] = 0.0;
    }
    for (int32_t c = dm->e_dst.ptr[j]; c < dm->e_dst.ptr[j + 1]; c++) {
        const int64_t e = dm->e_dst.idx[c];
        for (int k = 0; k < K; k++)
            if ((double)s[e * K + k] > M[k])
                M[k] = (double)s[e * K + k];
    }
    for (int32_t c = dm->e_dst.ptr[j]; c < dm->e_dst.ptr[j + 1]; c++) {
        const int64_t e = dm->e_dst.idx[c];
        for (int k = 0; k < K; k++)
            Z[k] += exp((double)s[e * K + k] - M[k]) * (double)fc[e];
    }
}

static void gate_edge(const ecenet_dims *dm, int n_heads, int l_attention, int K, int64_t e,
                      const real *a, real *w)
{
    const int L1 = dm->L + 1;
    (void)K;
    for (int b = 0; b < dm->B; b++)
        for (int l = 0; l < L1; l++)
            w[e * dm->F + b * L1 + l] = a[e * K + gate_slot(dm, n_heads, l_attention, b, l)];
}

/* Softmax: receivers in parallel, each over its edges in CSR order (every edge
 * has one receiver, so every edge is written once). The statistics stay in
 * double and in per-thread scratch: tmp is not needed. */
void OMP_FN(omp_mp_attn_weight_fwd)(const ecenet_dims *dm, int n_heads, int l_attention,
                                    int mode, int msg_env, ecenet_idx edge_j,
                                    const void *scores_, const void *fc_, void *a_, void *w_,
                                    void *tmp_)
{
    (void)edge_j;
    (void)tmp_;
    const real *s = scores_, *fc = fc_;
    real *a = a_, *w = w_;
    const int K = n_heads * (l_attention ? dm->L + 1 : 1);
    if (mode != ECENET_ATTN_SOFTMAX) {
#pragma omp parallel for schedule(static)
        for (int64_t e = 0; e < dm->E; e++) {
            for (int k = 0; k < K; k++)
                a[e * K + k] = s[e * K + k] * fc[e];
            gate_edge(dm, n_heads, l_attention, K, e, a, w);
        }
        return;
    }
#pragma omp parallel
    {
        double *M = OMP_FN(omp_scratch)(OMP_SCR_TILE, 2 * (size_t)K * sizeof(double)), *Z = M + K;
#pragma omp for schedule(dynamic, 16)
        for (int64_t j = 0; j < dm->N; j++) {
            softmax_stats(dm, K, j, s, fc, M, Z);
            for (int32_t c = dm->e_dst.ptr[j]; c < dm->e_dst.ptr[j + 1]; c++) {
                const int64_t e = dm->e_dst.idx[c];
                const double f = (double)fc[e];
                for (int k = 0; k < K; k++)
                    a[e * K + k] = (real)(exp((double)s[e * K + k] - M[k]) * f / (Z[k] + 1e-6) *
                                          (msg_env ? f : 1.0));
                gate_edge(dm, n_heads, l_attention, K, e, a, w);
            }
        }
    }
}

/* ā (K) of edge e from w̄ (the gate map is a fixed sum) */
static void abar_edge(const ecenet_dims *dm, int n_heads, int l_attention, int K,
                      const real *wbar, int64_t e, double *ab)
{
    const int L1 = dm->L + 1;
    for (int k = 0; k < K; k++)
        ab[k] = 0.0;
    for (int b = 0; b < dm->B; b++)
        for (int l = 0; l < L1; l++)
            ab[gate_slot(dm, n_heads, l_attention, b, l)] += (double)wbar[e * dm->F + b * L1 + l];
}

/* Scores within OMP_TIE (relative to max(1, |M|)) of the per-receiver maximum
 * count as tied and share the maximum's term equally (ops.h): a tie exact in
 * one summation order can be a few ulps apart in another, so the tolerance
 * follows the precision. */
#ifdef OMP_F32
#define OMP_TIE 1e-6
#else
#define OMP_TIE 1e-12
#endif
static int is_tie(double s, double M) { return fabs(s - M) <= OMP_TIE * fmax(1.0, fabs(M)); }

/* The VJP of ref_mp_attn_weight_vjp (see there for the formulas). Softmax:
 * per receiver over its edges in CSR order, in double: the statistics, Σ ā a
 * (with a recomputed in double from s and fc: the same value as the forward's,
 * without its rounding, which matters in fp32 where ā·env − Σ ā a cancels),
 * then each edge's s̄, f̄c and the maximum's term. tmp is not needed. */
void OMP_FN(omp_mp_attn_weight_vjp)(const ecenet_dims *dm, int n_heads, int l_attention,
                                    int mode, int msg_env, ecenet_idx edge_j,
                                    const void *scores_, const void *fc_, const void *a_,
                                    const void *wbar_, void *tmp_, void *sbar_, void *fcbar_)
{
    (void)edge_j;
    (void)tmp_;
    (void)a_;
    const real *s = scores_, *fc = fc_, *wbar = wbar_;
    real *sbar = sbar_, *fcbar = fcbar_;
    const int K = n_heads * (l_attention ? dm->L + 1 : 1);
    const double eps = 1e-6;
#pragma omp parallel
    {
        double *ab = OMP_FN(omp_scratch)(OMP_SCR_TILE, 4 * (size_t)K * sizeof(double));
        double *M = ab + K, *Z = M + K, *dot = Z + K;
        if (mode != ECENET_ATTN_SOFTMAX) {
#pragma omp for schedule(static)
            for (int64_t e = 0; e < dm->E; e++) {
                abar_edge(dm, n_heads, l_attention, K, wbar, e, ab);
                double fb = 0.0;
                for (int k = 0; k < K; k++) {
                    sbar[e * K + k] += (real)(ab[k] * (double)fc[e]);
                    fb += ab[k] * (double)s[e * K + k];
                }
                fcbar[e] += (real)fb;
            }
        } else {
#pragma omp for schedule(dynamic, 16)
            for (int64_t j = 0; j < dm->N; j++) {
                const int32_t c0 = dm->e_dst.ptr[j], c1 = dm->e_dst.ptr[j + 1];
                if (c0 == c1)
                    continue;
                softmax_stats(dm, K, j, s, fc, M, Z);
                for (int k = 0; k < K; k++)
                    dot[k] = 0.0;
                for (int32_t c = c0; c < c1; c++) {
                    const int64_t e = dm->e_dst.idx[c];
                    const double f = (double)fc[e];
                    abar_edge(dm, n_heads, l_attention, K, wbar, e, ab);
                    for (int k = 0; k < K; k++)
                        dot[k] += ab[k] * (exp((double)s[e * K + k] - M[k]) * f / (Z[k] + eps) *
                                           (msg_env ? f : 1.0));
                }
                for (int32_t c = c0; c < c1; c++) {
                    const int64_t e = dm->e_dst.idx[c];
                    const double f = (double)fc[e], env = msg_env ? f : 1.0;
                    abar_edge(dm, n_heads, l_attention, K, wbar, e, ab);
                    double fb = 0.0;
                    for (int k = 0; k < K; k++) {
                        const double x = exp((double)s[e * K + k] - M[k]) / (Z[k] + eps);
                        const double cc = ab[k] * env - dot[k];
                        sbar[e * K + k] += (real)(x * f * cc);
                        fb += x * cc + (msg_env ? ab[k] * x * f : 0.0);
                    }
                    fcbar[e] += (real)fb;
                }
                /* the maximum's term, shared equally by the edges tied at the maximum */
                for (int k = 0; k < K; k++) {
                    int cnt = 0;
                    for (int32_t c = c0; c < c1; c++)
                        cnt += is_tie((double)s[dm->e_dst.idx[c] * K + k], M[k]);
                    const double dM = dot[k] * (-eps / (Z[k] + eps)) / (cnt ? cnt : 1);
                    for (int32_t c = c0; c < c1; c++) {
                        const int64_t e = dm->e_dst.idx[c];
                        if (is_tie((double)s[e * K + k], M[k]))
                            sbar[e * K + k] += (real)dM;
                    }
                }
            }
        }
    }
}
