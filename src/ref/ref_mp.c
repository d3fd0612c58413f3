/* Message passing (SPEC §13): pack -> unrotate (Dᵀ) -> distance weight ->
 * scatter to the receiver edge_j; gather at the source edge_i -> rotate (D)
 * -> unpack -> residual add. */
#include "ref.h"

void ref_mp_pack_unrotate_fwd(const ecenet_dims *dm, const void *X_, const void *D_, void *g_,
                              void *Xs_)
{
    const double *X = X_, *D = D_;
    double *g = g_, *Xs = Xs_;
    const int64_t XE = (int64_t)dm->Q * 2 * dm->F, BS = (int64_t)dm->B * dm->S;
    for (int64_t e = 0; e < dm->E; e++)
        ref_frame_out(dm, X + e * XE, D + e * dm->ND, g + e * BS);
    if (Xs)
        for (int64_t i = 0; i < dm->E * XE; i++)
            Xs[i] = X[i];
}

void ref_mp_pack_unrotate_vjp(const ecenet_dims *dm, const void *X_, const void *D_,
                              const void *gbar_, void *Xbar_, void *Dbar_)
{
    const double *X = X_, *D = D_, *gbar = gbar_;
    double *Xbar = Xbar_, *Dbar = Dbar_;
    const int64_t XE = (int64_t)dm->Q * 2 * dm->F, BS = (int64_t)dm->B * dm->S;
    for (int64_t e = 0; e < dm->E; e++)
        ref_frame_out_vjp(dm, X + e * XE, D + e * dm->ND, gbar + e * BS, Xbar + e * XE,
                          Dbar + e * dm->ND);
}

/* w[e, b(L+1)+l] = Σ_n fr[e,n] W_msg[t_src, t_tgt, n, b], the same for every l */
void ref_mp_weight_fwd(const ecenet_dims *dm, int K, ecenet_idx tsrc, ecenet_idx ttgt,
                       const void *fr_, const void *W_, void *w_)
{
    const double *fr = fr_, *W = W_;
    double *w = w_;
    const int B = dm->B, T = dm->T, L1 = dm->L + 1;
    for (int64_t e = 0; e < dm->E; e++) {
        const double *We = W + ((int64_t)tsrc[e] * T + ttgt[e]) * K * B;
        for (int b = 0; b < B; b++) {
            double acc = 0.0;
            for (int n = 0; n < K; n++)
                acc += fr[e * K + n] * We[n * B + b];
            for (int l = 0; l < L1; l++)
                w[e * dm->F + b * L1 + l] = acc;
        }
    }
}

void ref_mp_weight_vjp(const ecenet_dims *dm, int K, ecenet_idx tsrc, ecenet_idx ttgt,
                       const void *W_, const void *wbar_, void *frbar_)
{
    const double *W = W_, *wbar = wbar_;
    double *frbar = frbar_;
    const int B = dm->B, T = dm->T, L1 = dm->L + 1;
    for (int64_t e = 0; e < dm->E; e++) {
        const double *We = W + ((int64_t)tsrc[e] * T + ttgt[e]) * K * B;
        for (int n = 0; n < K; n++) {
            double acc = 0.0;
            for (int b = 0; b < B; b++)
                for (int l = 0; l < L1; l++)
                    acc += wbar[e * dm->F + b * L1 + l] * We[n * B + b];
            frbar[e * K + n] += acc;
        }
    }
}

/* Delta[a] = Σ_{e: edge_j[e] = a} g[e]·w[e], in edge order (deterministic). */
void ref_mp_scatter_fwd(const ecenet_dims *dm, ecenet_idx edge_j, const void *g_,
                        const void *w_, void *Delta_)
{
    const double *g = g_, *w = w_;
    double *Delta = Delta_;
    const int B = dm->B, S = dm->S, L1 = dm->L + 1;
    for (int64_t q = 0; q < dm->N * B * S; q++)
        Delta[q] = 0.0;
    for (int64_t e = 0; e < dm->E; e++) {
        double *Da = Delta + (int64_t)edge_j[e] * B * S;
        for (int b = 0; b < B; b++)
            for (int l = 0; l < L1; l++) {
                const double we = w[e * dm->F + b * L1 + l];
                for (int s = l * l; s < (l + 1) * (l + 1); s++)
                    Da[b * S + s] += g[(e * B + b) * S + s] * we;
            }
    }
}

void ref_mp_scatter_vjp(const ecenet_dims *dm, ecenet_idx edge_j, const void *g_,
                        const void *w_, const void *Delta_bar_, void *gbar_, void *wbar_)
{
    const double *g = g_, *w = w_, *Dbar = Delta_bar_;
    double *gbar = gbar_, *wbar = wbar_;
    const int B = dm->B, S = dm->S, L1 = dm->L + 1;
    for (int64_t e = 0; e < dm->E; e++) {
        const double *qb = Dbar + (int64_t)edge_j[e] * B * S;
        for (int b = 0; b < B; b++)
            for (int l = 0; l < L1; l++) {
                const double we = w[e * dm->F + b * L1 + l];
                double acc = 0.0;
                for (int s = l * l; s < (l + 1) * (l + 1); s++) {
                    acc += qb[b * S + s] * g[(e * B + b) * S + s];
                    gbar[(e * B + b) * S + s] += qb[b * S + s] * we;
                }
                wbar[e * dm->F + b * L1 + l] += acc;
            }
    }
}

/* ---- research attention weights (SPEC §17.3 step 4-5) ---- */

/* Score slot gating channel (b, l). */
static int gate_slot(const ecenet_dims *dm, int n_heads, int l_attention, int b, int l)
{
    const int h = b / (dm->B / n_heads);
    return l_attention ? h * (dm->L + 1) + l : h;
}

/* Per (receiver, slot): M = max score, Z = Σ exp(s - M)·fc, in tmp (N, 4K). */
static void softmax_stats(const ecenet_dims *dm, int K, ecenet_idx edge_j, const double *s,
                          const double *fc, double *tmp)
{
    double *M = tmp, *Z = tmp + dm->N * K;
    for (int64_t q = 0; q < dm->N * K; q++) {
        M[q] = -HUGE_VAL;
        Z[q] = 0.0;
    }
    for (int64_t e = 0; e < dm->E; e++)
        for (int k = 0; k < K; k++)
            if (s[e * K + k] > M[edge_j[e] * K + k])
                M[edge_j[e] * K + k] = s[e * K + k];
    for (int64_t e = 0; e < dm->E; e++)
        for (int k = 0; k < K; k++)
            Z[edge_j[e] * K + k] += exp(s[e * K + k] - M[edge_j[e] * K + k]) * fc[e];
}

void ref_mp_attn_weight_fwd(const ecenet_dims *dm, int n_heads, int l_attention, int mode,
                            int msg_env, ecenet_idx edge_j, const void *scores_,
                            const void *fc_, void *a_, void *w_, void *tmp_)
{
    const double *s = scores_, *fc = fc_;
    double *a = a_, *w = w_, *tmp = tmp_;
    const int K = n_heads * (l_attention ? dm->L + 1 : 1), L1 = dm->L + 1;
    if (mode == ECENET_ATTN_SOFTMAX)
        softmax_stats(dm, K, edge_j, s, fc, tmp);
    const double *M = tmp, *Z = tmp + dm->N * K;
    for (int64_t e = 0; e < dm->E; e++) {
        for (int k = 0; k < K; k++) {
            const int64_t jk = edge_j[e] * K + k;
            if (mode == ECENET_ATTN_SOFTMAX)
                a[e * K + k] = exp(s[e * K + k] - M[jk]) * fc[e] / (Z[jk] + 1e-6) *
                               (msg_env ? fc[e] : 1.0);
            else
                a[e * K + k] = s[e * K + k] * fc[e];
        }
        for (int b = 0; b < dm->B; b++)
            for (int l = 0; l < L1; l++)
                w[e * dm->F + b * L1 + l] = a[e * K + gate_slot(dm, n_heads, l_attention, b, l)];
    }
}

#define REF_TIE 1e-12
static int is_tie(double s, double M) { return fabs(s - M) <= REF_TIE * fmax(1.0, fabs(M)); }

/* Softmax VJP with p = exp(s - M)·fc, a = p·env/(Z + ε), env = fc or 1:
 *   s̄_e = p_e/(Z+ε)·(ā_e·env_e − Σ_{e'->j} ā_e' a_e'),
 *   f̄c_e = exp(s_e - M)/(Z+ε)·(ā_e·env_e − Σ ā a) + [msg_env] ā_e·p_e/(Z+ε),
 * plus the term through the per-receiver maximum M (a = … / (Σ e^{s}fc + ε e^{M})):
 *   ∂L/∂M_j = −ε/(Z_j+ε)·Σ_{e->j} ā_e a_e, shared equally by the edges attaining
 *   M_j (E has a kink at exact ties; this is the subgradient amax's backward uses). */
void ref_mp_attn_weight_vjp(const ecenet_dims *dm, int n_heads, int l_attention, int mode,
                            int msg_env, ecenet_idx edge_j, const void *scores_,
                            const void *fc_, const void *a_, const void *wbar_, void *tmp_,
                            void *sbar_, void *fcbar_)
{
    const double *s = scores_, *fc = fc_, *a = a_, *wbar = wbar_;
    double *tmp = tmp_, *sbar = sbar_, *fcbar = fcbar_;
    const int K = n_heads * (l_attention ? dm->L + 1 : 1), L1 = dm->L + 1;
    const double eps = 1e-6;
    double abar_e[4096];
    if (mode == ECENET_ATTN_SOFTMAX)
        softmax_stats(dm, K, edge_j, s, fc, tmp);
    double *M = tmp, *Z = tmp + dm->N * K, *dot = tmp + 2 * dm->N * K; /* Σ ā a */
    for (int64_t q = 0; q < dm->N * K; q++)
        dot[q] = 0.0;
    /* ā (E,K) is recomputed per edge from w̄ (the gate map is a fixed sum) */
    for (int pass = 0; pass < (mode == ECENET_ATTN_SOFTMAX ? 2 : 1); pass++)
        for (int64_t e = 0; e < dm->E; e++) {
            for (int k = 0; k < K; k++)
                abar_e[k] = 0.0;
            for (int b = 0; b < dm->B; b++)
                for (int l = 0; l < L1; l++)
                    abar_e[gate_slot(dm, n_heads, l_attention, b, l)] +=
                        wbar[e * dm->F + b * L1 + l];
            for (int k = 0; k < K; k++) {
                const int64_t ek = e * K + k, jk = edge_j[e] * K + k;
                if (mode != ECENET_ATTN_SOFTMAX) {
                    sbar[ek] += abar_e[k] * fc[e];
                    fcbar[e] += abar_e[k] * s[ek];
                } else if (pass == 0) {
                    dot[jk] += abar_e[k] * a[ek];
                } else {
                    const double env = msg_env ? fc[e] : 1.0;
                    const double x = exp(s[ek] - M[jk]) / (Z[jk] + eps);
                    const double c = abar_e[k] * env - dot[jk];
                    sbar[ek] += x * fc[e] * c;
                    fcbar[e] += x * c + (msg_env ? abar_e[k] * x * fc[e] : 0.0);
                }
            }
        }
    if (mode != ECENET_ATTN_SOFTMAX)
        return;
    /* the maximum's term. At an exact tie E has a kink; the tied edges share
     * the term equally, i.e. the average of the one-sided derivatives (what
     * central differences measure, and mirror-symmetric for symmetric ties).
     * Ties are detected within REF_TIE of |M| because a tie that is exact in
     * one summation order can be an ulp apart in another. cnt counts them. */
    double *cnt = tmp + 3 * dm->N * K;
    for (int64_t q = 0; q < dm->N * K; q++) {
        dot[q] *= -eps / (Z[q] + eps);
        cnt[q] = 0.0;
    }
    for (int64_t e = 0; e < dm->E; e++)
        for (int k = 0; k < K; k++)
            if (is_tie(s[e * K + k], M[edge_j[e] * K + k]))
                cnt[edge_j[e] * K + k] += 1.0;
    for (int64_t e = 0; e < dm->E; e++)
        for (int k = 0; k < K; k++) {
            const int64_t jk = edge_j[e] * K + k;
            if (is_tie(s[e * K + k], M[jk]))
                sbar[e * K + k] += dot[jk] / cnt[jk];
        }
}

void ref_mp_rotate_unpack_fwd(const ecenet_dims *dm, ecenet_idx edge_i, const void *Delta_,
                              const void *D_, void *X_)
{
    const double *Delta = Delta_, *D = D_;
    double *X = X_;
    const int64_t XE = (int64_t)dm->Q * 2 * dm->F, BS = (int64_t)dm->B * dm->S;
    const int64_t CS = (int64_t)dm->C * dm->S;
    for (int64_t e = 0; e < dm->E; e++) {
        const double *u = Delta + edge_i[e] * BS;
        ref_frame_in(dm, u, u + CS, D + e * dm->ND, X + e * XE, 1);
    }
}

void ref_mp_rotate_unpack_vjp(const ecenet_dims *dm, ecenet_idx edge_i, const void *Delta_,
                              const void *D_, const void *Xbar_, void *Delta_bar_, void *Dbar_)
{
    const double *Delta = Delta_, *D = D_, *Xbar = Xbar_;
    double *Deltabar = Delta_bar_, *Dbar = Dbar_;
    const int64_t XE = (int64_t)dm->Q * 2 * dm->F, BS = (int64_t)dm->B * dm->S;
    const int64_t CS = (int64_t)dm->C * dm->S;
    for (int64_t e = 0; e < dm->E; e++) {
        const double *u = Delta + edge_i[e] * BS;
        double *ub = Deltabar + edge_i[e] * BS;
        ref_frame_in_vjp(dm, u, u + CS, D + e * dm->ND, Xbar + e * XE, ub, ub + CS,
                         Dbar + e * dm->ND);
    }
}
