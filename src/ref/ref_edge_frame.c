/* Edge frame (SPEC §8): gather both endpoints' embeddings, rotate into the
 * bond frame by D, select the (cos, sin) slots; optional distance embedding (§9).
 * The per-edge frame maps below are shared with message passing (ref_mp.c). */
#include "ref.h"

/* Calls body(f, slot, k) for every valid slot of base channel b: f the
 * channel, slot = (m*2 + part) the feature row, k the local column in block l. */
#define FOR_VALID_SLOTS(dm, b, l, f, slot, k, body)                             \
    for (int l = 0; l <= (dm)->L; l++) {                                         \
        const int f = (b) * ((dm)->L + 1) + l, ml_ = l < (dm)->M ? l : (dm)->M;  \
        for (int m_ = 0; m_ <= ml_; m_++)                                        \
            for (int p_ = 0; p_ < (m_ ? 2 : 1); p_++) {                          \
                const int slot = m_ * 2 + p_, k = p_ ? l - m_ : l + m_;          \
                body                                                             \
            }                                                                    \
    }

static const double *row(const ecenet_dims *dm, const double *lo, const double *hi, int b)
{
    return b < dm->C ? lo + (int64_t)b * dm->S : hi + (int64_t)(b - dm->C) * dm->S;
}

void ref_frame_in(const ecenet_dims *dm, const double *lo, const double *hi, const double *D,
                  double *Xe, int accumulate)
{
    const int F = dm->F;
    if (!accumulate)
        for (int q = 0; q < dm->Q * 2 * F; q++)
            Xe[q] = 0.0;
    for (int b = 0; b < dm->B; b++) {
        const double *a = row(dm, lo, hi, b);
        FOR_VALID_SLOTS(dm, b, l, f, slot, k, {
            const int n = 2 * l + 1;
            const double *Dl = D + ref_dblock_offset(l);
            double acc = 0.0;
            for (int s = 0; s < n; s++)
                acc += a[l * l + s] * Dl[s * n + k];
            Xe[slot * F + f] += acc;
        })
    }
}

void ref_frame_in_vjp(const ecenet_dims *dm, const double *lo, const double *hi,
                      const double *D, const double *Xbar_e, double *lo_bar, double *hi_bar,
                      double *Dbar)
{
    const int F = dm->F;
    for (int b = 0; b < dm->B; b++) {
        const double *a = row(dm, lo, hi, b);
        double *abar = (double *)row(dm, lo_bar, hi_bar, b);
        FOR_VALID_SLOTS(dm, b, l, f, slot, k, {
            const int n = 2 * l + 1;
            const double *Dl = D + ref_dblock_offset(l);
            double *Dlb = Dbar + ref_dblock_offset(l);
            const double gv = Xbar_e[slot * F + f];
            for (int s = 0; s < n; s++) {
                abar[l * l + s] += gv * Dl[s * n + k];
                Dlb[s * n + k] += a[l * l + s] * gv;
            }
        })
    }
}

void ref_frame_out(const ecenet_dims *dm, const double *Xe, const double *D, double *g)
{
    const int F = dm->F, S = dm->S;
    for (int q = 0; q < dm->B * S; q++)
        g[q] = 0.0;
    for (int b = 0; b < dm->B; b++) {
        double *gb = g + b * S;
        FOR_VALID_SLOTS(dm, b, l, f, slot, k, {
            const int n = 2 * l + 1;
            const double *Dl = D + ref_dblock_offset(l);
            const double x = Xe[slot * F + f];
            for (int s = 0; s < n; s++)
                gb[l * l + s] += x * Dl[s * n + k];
        })
    }
}

void ref_frame_out_vjp(const ecenet_dims *dm, const double *Xe, const double *D,
                       const double *gbar, double *Xbar_e, double *Dbar)
{
    const int F = dm->F, S = dm->S;
    for (int b = 0; b < dm->B; b++) {
        const double *gb = gbar + b * S;
        FOR_VALID_SLOTS(dm, b, l, f, slot, k, {
            const int n = 2 * l + 1;
            const double *Dl = D + ref_dblock_offset(l);
            double *Dlb = Dbar + ref_dblock_offset(l);
            const double x = Xe[slot * F + f];
            double acc = 0.0;
            for (int s = 0; s < n; s++) {
                acc += gb[l * l + s] * Dl[s * n + k];
                Dlb[s * n + k] += gb[l * l + s] * x;
            }
            Xbar_e[slot * F + f] += acc;
        })
    }
}

void ref_edge_frame_fwd(const ecenet_dims *dm, ecenet_idx edge_i, ecenet_idx edge_j,
                        const void *A_emb_, const void *D_, void *X_)
{
    const double *A_emb = A_emb_, *D = D_;
    double *X = X_;
    const int64_t CS = (int64_t)dm->C * dm->S, XE = (int64_t)dm->Q * 2 * dm->F;
    for (int64_t e = 0; e < dm->E; e++)
        ref_frame_in(dm, A_emb + edge_i[e] * CS, A_emb + edge_j[e] * CS, D + e * dm->ND,
                     X + e * XE, 0);
}

void ref_edge_frame_vjp(const ecenet_dims *dm, ecenet_idx edge_i, ecenet_idx edge_j,
                        const void *A_emb_, const void *D_, const void *Xbar_, void *A_emb_bar_,
                        void *Dbar_)
{
    const double *A_emb = A_emb_, *D = D_, *Xbar = Xbar_;
    double *Ebar = A_emb_bar_, *Dbar = Dbar_;
    const int64_t CS = (int64_t)dm->C * dm->S, XE = (int64_t)dm->Q * 2 * dm->F;
    for (int64_t e = 0; e < dm->E; e++)
        ref_frame_in_vjp(dm, A_emb + edge_i[e] * CS, A_emb + edge_j[e] * CS, D + e * dm->ND,
                         Xbar + e * XE, Ebar + edge_i[e] * CS, Ebar + edge_j[e] * CS,
                         Dbar + e * dm->ND);
}

/* σ[e,f] = Σ_n fr[e,n] V[n,f];  Y = X (1 + σ), broadcast over (m, part). */
void ref_dist_embed_fwd(const ecenet_dims *dm, int K, const void *fr_, const void *V_,
                        const void *X_, void *Y_)
{
    const double *fr = fr_, *V = V_, *X = X_;
    double *Y = Y_;
    const int F = dm->F, QP = dm->Q * 2;
    for (int64_t e = 0; e < dm->E; e++)
        for (int f = 0; f < F; f++) {
            double sig = 0.0;
            for (int n = 0; n < K; n++)
                sig += fr[e * K + n] * V[n * F + f];
            for (int q = 0; q < QP; q++)
                Y[(e * QP + q) * F + f] = X[(e * QP + q) * F + f] * (1.0 + sig);
        }
}

void ref_dist_embed_vjp(const ecenet_dims *dm, int K, const void *fr_, const void *V_,
                        const void *X_, const void *Ybar_, void *Xbar_, void *frbar_)
{
    const double *fr = fr_, *V = V_, *X = X_, *Ybar = Ybar_;
    double *Xbar = Xbar_, *frbar = frbar_;
    const int F = dm->F, QP = dm->Q * 2;
    for (int64_t e = 0; e < dm->E; e++)
        for (int f = 0; f < F; f++) {
            double sig = 0.0, sbar = 0.0;
            for (int n = 0; n < K; n++)
                sig += fr[e * K + n] * V[n * F + f];
            for (int q = 0; q < QP; q++) {
                int64_t k = (e * QP + q) * F + f;
                Xbar[k] += Ybar[k] * (1.0 + sig);
                sbar += Ybar[k] * X[k];
            }
            for (int n = 0; n < K; n++)
                frbar[e * K + n] += sbar * V[n * F + f];
        }
}
