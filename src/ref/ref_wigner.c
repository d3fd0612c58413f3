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

/* SPEC §7.5, one edge at a time (ecn_wigner_vjp_edge, shared with omp). */
void ref_wigner_vjp(int64_t E, int L, const void *cg_, const void *d_, const void *r_,
                    const void *D_, const void *Dbar_, void *dbar_)
{
    const double *cg = cg_, *d = d_, *r = r_, *D = D_, *Dbar = Dbar_;
    double *dbar = dbar_;
    const int ND = ref_dblock_offset(L + 1);
    for (int64_t e = 0; e < E; e++)
        ecn_wigner_vjp_edge(L, cg, D + e * ND, Dbar + e * ND, d + 3 * e, r[e], dbar + 3 * e);
}
