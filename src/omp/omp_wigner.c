/* Block-diagonal Wigner-D of the bond frame (SPEC §7); mirrors ref_wigner.c
 * (same charts, same CG recursion and contraction order), one edge per
 * iteration in parallel, evaluated in double for both precisions. */
#include "omp_ops.h"

#define WL_MAX 12
#define WN (2 * WL_MAX + 1)
#define WCG_SIZE 7755 /* ecenet_cg_offset(WL_MAX + 1) */
#define WND 2925      /* Σ_{l<=WL_MAX} (2l+1)² */

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
        double De[WND], Db[WND], g[3] = {0, 0, 0};
        for (int q = 0; q < ND; q++) {
            De[q] = (double)D[e * ND + q];
            Db[q] = (double)Dbar[e * ND + q];
        }
        const double de[3] = {(double)d[3 * e], (double)d[3 * e + 1], (double)d[3 * e + 2]};
        ecn_wigner_vjp_edge(L, cg, De, Db, de, (double)r[e], g);
        for (int b = 0; b < 3; b++)
            dbar[3 * e + b] += (real)g[b];
    }
}
