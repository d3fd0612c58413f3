/* Block-diagonal Wigner-D of the bond frame (SPEC §7): D¹ from r̂ with the
 * two charts of ECENet's build_D1_from_rhat, higher l by the CG recursion
 * D^l = Γ_lᵀ (D¹ ⊗ D^{l-1}) Γ_l, and the VJP back to the edge vector. */
#include <string.h>
#include "ref.h"

#define WL_MAX 12
#define WN (2 * WL_MAX + 1)

#include "wigner_d1.h"

void ref_wigner_fwd(int64_t E, int L, const void *cg_, const void *d_, const void *r_, void *D_)
{
    const double *cg = cg_, *d = d_, *r = r_;
    double *D = D_;
    const int ND = ref_dblock_offset(L + 1);
    for (int64_t e = 0; e < E; e++) {
        double *De = D + e * ND;
        De[0] = 1.0;
        if (L < 1)
            continue;
        double rh[3] = {d[3 * e] / r[e], d[3 * e + 1] / r[e], d[3 * e + 2] / r[e]};
        dual D1[9];
        d1_from_rhat(rh, D1);
        for (int q = 0; q < 9; q++)
            De[1 + q] = D1[q].v;
        for (int l = 2; l <= L; l++)
            d_next(l, cg + ecenet_cg_offset(l), De + 1, De + ref_dblock_offset(l - 1),
                   De + ref_dblock_offset(l));
    }
}

/* SPEC §7.5: for l = L..2, Mtx = Γ D̄^l Γᵀ feeds D̄¹ and D̄^{l-1}; then
 * D̄¹ -> r̂̄ through the chart, r̂̄ -> d̄ through r̂ = d/r. */
void ref_wigner_vjp(int64_t E, int L, const void *cg_, const void *d_, const void *r_,
                    const void *D_, const void *Dbar_, void *dbar_)
{
    const double *cg = cg_, *d = d_, *r = r_, *D = D_, *Dbar = Dbar_;
    double *dbar = dbar_;
    const int ND = ref_dblock_offset(L + 1);
    if (L < 1)
        return;
    double Gb[WN * WN]; /* running D̄^{l} for the block being processed */
    double Mt[3 * WN * 3 * WN], tmp[3 * WN * WN];
    for (int64_t e = 0; e < E; e++) {
        const double *De = D + e * ND;
        const double *Db = Dbar + e * ND;
        double D1bar[9];
        for (int q = 0; q < 9; q++)
            D1bar[q] = Db[1 + q];
        /* carry: D̄^{l-1} accumulated from level l */
        double carry[WN * WN];
        for (int l = L; l >= 2; l--) {
            const int n2 = 2 * l - 1, n3 = 2 * l + 1, nq = 3 * n2;
            const double *G = cg + ecenet_cg_offset(l);
            const double *Dl_bar = Db + ref_dblock_offset(l);
            for (int q = 0; q < n3 * n3; q++)
                Gb[q] = Dl_bar[q] + (l < L ? carry[q] : 0.0);
            /* Mtx = Γ Gb Γᵀ : tmp[q,k'] = Σ_k Γ[q,k] Gb[k,k'] ; Mt[q,q'] = Σ_k' tmp[q,k'] Γ[q',k'] */
            for (int q = 0; q < nq; q++)
                for (int kp = 0; kp < n3; kp++) {
                    double acc = 0.0;
                    for (int k = 0; k < n3; k++)
                        acc += G[q * n3 + k] * Gb[k * n3 + kp];
                    tmp[q * n3 + kp] = acc;
                }
            for (int q = 0; q < nq; q++)
                for (int qp = 0; qp < nq; qp++) {
                    double acc = 0.0;
                    for (int kp = 0; kp < n3; kp++)
                        acc += tmp[q * n3 + kp] * G[qp * n3 + kp];
                    Mt[q * nq + qp] = acc;
                }
            const double *Dp = De + ref_dblock_offset(l - 1);
            const double *D1 = De + 1;
            for (int a = 0; a < 3; a++)
                for (int ap = 0; ap < 3; ap++) {
                    double acc = 0.0;
                    for (int b = 0; b < n2; b++)
                        for (int bp = 0; bp < n2; bp++)
                            acc += Mt[(a * n2 + b) * nq + ap * n2 + bp] * Dp[b * n2 + bp];
                    D1bar[a * 3 + ap] += acc;
                }
            for (int b = 0; b < n2; b++)
                for (int bp = 0; bp < n2; bp++) {
                    double acc = 0.0;
                    for (int a = 0; a < 3; a++)
                        for (int ap = 0; ap < 3; ap++)
                            acc += Mt[(a * n2 + b) * nq + ap * n2 + bp] * D1[a * 3 + ap];
                    carry[b * n2 + bp] = acc;
                }
        }
        if (L >= 2) /* the l = 1 part of the carry is a D̄¹ contribution */
            for (int q = 0; q < 9; q++)
                D1bar[q] += carry[q];
        double rh[3] = {d[3 * e] / r[e], d[3 * e + 1] / r[e], d[3 * e + 2] / r[e]};
        dual D1d[9];
        d1_from_rhat(rh, D1d);
        double rhbar[3] = {0, 0, 0};
        for (int q = 0; q < 9; q++)
            for (int k = 0; k < 3; k++)
                rhbar[k] += D1bar[q] * D1d[q].g[k];
        /* r̂ = d/r: ∂r̂_α/∂d_β = δ_αβ/r - d_α d_β / r³ */
        double dot = rhbar[0] * d[3 * e] + rhbar[1] * d[3 * e + 1] + rhbar[2] * d[3 * e + 2];
        double r3 = r[e] * r[e] * r[e];
        for (int b = 0; b < 3; b++)
            dbar[3 * e + b] += rhbar[b] / r[e] - dot * d[3 * e + b] / r3;
    }
}
