/* Message passing (SPEC §13): pack -> unrotate (Dᵀ) -> distance weight ->
 * scatter to the receiver edge_j; gather at the source edge_i -> rotate (D)
 * -> unpack -> residual add. */
#include "ref.h"

void ref_mp_pack_unrotate_fwd(const ecenet_dims *dm, const void *X_, const void *D_, void *g_)
{
    const double *X = X_, *D = D_;
    double *g = g_;
    const int64_t XE = (int64_t)dm->Q * 2 * dm->F, BS = (int64_t)dm->B * dm->S;
    for (int64_t e = 0; e < dm->E; e++)
        ref_frame_out(dm, X + e * XE, D + e * dm->ND, g + e * BS);
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

/* w[e,b] = Σ_n fr[e,n] W_msg[t_src, t_tgt, n, b] */
void ref_mp_weight_fwd(const ecenet_dims *dm, int K, ecenet_idx tsrc, ecenet_idx ttgt,
                       const void *fr_, const void *W_, void *w_)
{
    const double *fr = fr_, *W = W_;
    double *w = w_;
    const int B = dm->B, T = dm->T;
    for (int64_t e = 0; e < dm->E; e++) {
        const double *We = W + ((int64_t)tsrc[e] * T + ttgt[e]) * K * B;
        for (int b = 0; b < B; b++) {
            double acc = 0.0;
            for (int n = 0; n < K; n++)
                acc += fr[e * K + n] * We[n * B + b];
            w[e * B + b] = acc;
        }
    }
}

void ref_mp_weight_vjp(const ecenet_dims *dm, int K, ecenet_idx tsrc, ecenet_idx ttgt,
                       const void *W_, const void *wbar_, void *frbar_)
{
    const double *W = W_, *wbar = wbar_;
    double *frbar = frbar_;
    const int B = dm->B, T = dm->T;
    for (int64_t e = 0; e < dm->E; e++) {
        const double *We = W + ((int64_t)tsrc[e] * T + ttgt[e]) * K * B;
        for (int n = 0; n < K; n++) {
            double acc = 0.0;
            for (int b = 0; b < B; b++)
                acc += wbar[e * B + b] * We[n * B + b];
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
    const int B = dm->B, S = dm->S;
    for (int64_t q = 0; q < dm->N * B * S; q++)
        Delta[q] = 0.0;
    for (int64_t e = 0; e < dm->E; e++) {
        double *Da = Delta + (int64_t)edge_j[e] * B * S;
        for (int b = 0; b < B; b++)
            for (int s = 0; s < S; s++)
                Da[b * S + s] += g[(e * B + b) * S + s] * w[e * B + b];
    }
}

void ref_mp_scatter_vjp(const ecenet_dims *dm, ecenet_idx edge_j, const void *g_,
                        const void *w_, const void *Delta_bar_, void *gbar_, void *wbar_)
{
    const double *g = g_, *w = w_, *Dbar = Delta_bar_;
    double *gbar = gbar_, *wbar = wbar_;
    const int B = dm->B, S = dm->S;
    for (int64_t e = 0; e < dm->E; e++) {
        const double *qb = Dbar + (int64_t)edge_j[e] * B * S;
        for (int b = 0; b < B; b++) {
            double acc = 0.0;
            for (int s = 0; s < S; s++) {
                acc += qb[b * S + s] * g[(e * B + b) * S + s];
                gbar[(e * B + b) * S + s] += qb[b * S + s] * w[e * B + b];
            }
            wbar[e * B + b] += acc;
        }
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
