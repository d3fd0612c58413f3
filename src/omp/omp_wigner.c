/* Block-diagonal Wigner-D of the bond frame (SPEC §7); mirrors ref_wigner.c
 * (same charts, same CG recursion and contraction order), one edge per
 * iteration in parallel, evaluated in double for both precisions. */
#include "omp_ops.h"

#define WL_MAX 12
#define WN (2 * WL_MAX + 1)
#define WCG_SIZE 7755 /* ecenet_cg_offset(WL_MAX + 1) */

#include "wigner_d1.h"

void OMP_FN(omp_wigner_fwd)(int64_t E, int L, const void *cg_, const void *d_, const void *r_,
                            void *D_)
{
    const real *cgr = cg_, *d = d_, *r = r_;
    real *D = D_;
    const int ND = omp_dblock_offset(L + 1);
    const int ncg = L >= 2 ? ecenet_cg_offset(L + 1) : 0;
    double cg[WCG_SIZE];
    for (int q = 0; q < ncg; q++)
        cg[q] = (double)cgr[q];
#pragma omp parallel for schedule(static)
    for (int64_t e = 0; e < E; e++) {
        real *De = D + e * ND;
        double Dd[WL_MAX * (2 * WL_MAX - 1) * (2 * WL_MAX + 1) / 3 + WN * WN];
        Dd[0] = 1.0;
        if (L >= 1) {
            const double re = (double)r[e];
            double rh[3] = {(double)d[3 * e] / re, (double)d[3 * e + 1] / re,
                            (double)d[3 * e + 2] / re};
            dual D1[9];
            d1_from_rhat(rh, D1);
            for (int q = 0; q < 9; q++)
                Dd[1 + q] = D1[q].v;
            for (int l = 2; l <= L; l++)
                d_next(l, cg + ecenet_cg_offset(l), Dd + 1, Dd + omp_dblock_offset(l - 1),
                       Dd + omp_dblock_offset(l));
        }
        for (int q = 0; q < ND; q++)
            De[q] = (real)Dd[q];
    }
}

/* SPEC §7.5, as ref_wigner_vjp. */
void OMP_FN(omp_wigner_vjp)(int64_t E, int L, const void *cg_, const void *d_, const void *r_,
                            const void *D_, const void *Dbar_, void *dbar_)
{
    const real *cgr = cg_, *d = d_, *r = r_, *D = D_, *Dbar = Dbar_;
    real *dbar = dbar_;
    const int ND = omp_dblock_offset(L + 1);
    if (L < 1)
        return;
    const int ncg = L >= 2 ? ecenet_cg_offset(L + 1) : 0;
    double cg[WCG_SIZE];
    for (int q = 0; q < ncg; q++)
        cg[q] = (double)cgr[q];
#pragma omp parallel for schedule(static)
    for (int64_t e = 0; e < E; e++) {
        double Gb[WN * WN], Mt[3 * WN * 3 * WN], tmp[3 * WN * WN], carry[WN * WN];
        const real *De = D + e * ND;
        const real *Db = Dbar + e * ND;
        double D1bar[9];
        for (int q = 0; q < 9; q++)
            D1bar[q] = (double)Db[1 + q];
        for (int l = L; l >= 2; l--) {
            const int n2 = 2 * l - 1, n3 = 2 * l + 1, nq = 3 * n2;
            const double *G = cg + ecenet_cg_offset(l);
            const real *Dl_bar = Db + omp_dblock_offset(l);
            for (int q = 0; q < n3 * n3; q++)
                Gb[q] = (double)Dl_bar[q] + (l < L ? carry[q] : 0.0);
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
            const real *Dp = De + omp_dblock_offset(l - 1);
            const real *D1 = De + 1;
            for (int a = 0; a < 3; a++)
                for (int ap = 0; ap < 3; ap++) {
                    double acc = 0.0;
                    for (int b = 0; b < n2; b++)
                        for (int bp = 0; bp < n2; bp++)
                            acc += Mt[(a * n2 + b) * nq + ap * n2 + bp] * (double)Dp[b * n2 + bp];
                    D1bar[a * 3 + ap] += acc;
                }
            for (int b = 0; b < n2; b++)
                for (int bp = 0; bp < n2; bp++) {
                    double acc = 0.0;
                    for (int a = 0; a < 3; a++)
                        for (int ap = 0; ap < 3; ap++)
                            acc += Mt[(a * n2 + b) * nq + ap * n2 + bp] * (double)D1[a * 3 + ap];
                    carry[b * n2 + bp] = acc;
                }
        }
        if (L >= 2)
            for (int q = 0; q < 9; q++)
                D1bar[q] += carry[q];
        const double re = (double)r[e];
        const double de[3] = {(double)d[3 * e], (double)d[3 * e + 1], (double)d[3 * e + 2]};
        double rh[3] = {de[0] / re, de[1] / re, de[2] / re};
        dual D1d[9];
        d1_from_rhat(rh, D1d);
        double rhbar[3] = {0, 0, 0};
        for (int q = 0; q < 9; q++)
            for (int k = 0; k < 3; k++)
                rhbar[k] += D1bar[q] * D1d[q].g[k];
        double dot = rhbar[0] * de[0] + rhbar[1] * de[1] + rhbar[2] * de[2];
        double r3 = re * re * re;
        for (int b = 0; b < 3; b++)
            dbar[3 * e + b] += (real)(rhbar[b] / re - dot * de[b] / r3);
    }
}
