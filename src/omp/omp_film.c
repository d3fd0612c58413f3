/* Element FiLM (SPEC §17.4) and the per-channel scale; mirrors ref_film.c.
 * The gate MLP runs as GEMMs over tiles of edges (omp_mlp_tile_*), its input
 * rows [ea[t_src] ‖ eb[t_tgt] ‖ fr[e]] gathered into per-thread scratch. */
#include "omp_ops.h"

void OMP_FN(omp_film_fwd)(const ecenet_dims *dm, const ecenet_mlp_params *p, const void *ea_,
                          const void *eb_, int P, int n_rbf, ecenet_idx tsrc, ecenet_idx ttgt,
                          const void *fr_, void *H_, void *gamma_)
{
    const real *ea = ea_, *eb = eb_, *fr = fr_;
    real *H = H_, *gamma = gamma_;
    const int64_t nh = OMP_FN(omp_mlp_hidden_size)(p), F = p->dims[p->n_layers];
    const int64_t E = dm->E, TE = OMP_MLP_TILE, nti = (E + TE - 1) / TE;
    const int din = 2 * P + n_rbf;
#pragma omp parallel if (nti > 1)
    {
        const size_t xbytes = omp_pad64((size_t)TE * din * sizeof(real));
        char *scr = OMP_FN(omp_scratch)(OMP_SCR_TILE,
                                        xbytes + OMP_FN(omp_mlp_tile_scratch)(p, (int)TE));
        real *x = omp_carve(&scr, xbytes);
#pragma omp for schedule(dynamic, 1)
        for (int64_t t = 0; t < nti; t++) {
            const int64_t e0 = t * TE;
            const int nt = (int)(E - e0 < TE ? E - e0 : TE);
            for (int r = 0; r < nt; r++) {
                const int64_t e = e0 + r;
                real *xr = x + (int64_t)r * din;
                for (int k = 0; k < P; k++) {
                    xr[k] = ea[(int64_t)tsrc[e] * P + k];
                    xr[P + k] = eb[(int64_t)ttgt[e] * P + k];
                }
                for (int k = 0; k < n_rbf; k++)
                    xr[2 * P + k] = fr[e * n_rbf + k];
            }
            real *g = gamma + e0 * F;
            /* x is followed by the MLP's scratch */
            OMP_FN(omp_mlp_tile_fwd)(p, e0, nt, tsrc, ttgt, x, din, H ? H + e0 * nh : NULL, nh, g,
                                     F, scr, 1);
            for (int64_t q = 0; q < nt * F; q++)
                g[q] += RL(1.0);
        }
    }
}

void OMP_FN(omp_film_vjp)(const ecenet_dims *dm, const ecenet_mlp_params *p, int P, int n_rbf,
                          ecenet_idx tsrc, ecenet_idx ttgt, const void *H_,
                          const void *gamma_bar_, void *frbar_)
{
    const real *H = H_, *gbar = gamma_bar_;
    real *frbar = frbar_;
    if (n_rbf == 0) /* the type embeddings carry no geometry gradient */
        return;
    const int64_t nh = OMP_FN(omp_mlp_hidden_size)(p), F = p->dims[p->n_layers];
    const int64_t E = dm->E, TE = OMP_MLP_TILE, nti = (E + TE - 1) / TE;
    const int din = 2 * P + n_rbf;
#pragma omp parallel if (nti > 1)
    {
        const size_t xbytes = omp_pad64((size_t)TE * din * sizeof(real));
        char *scr = OMP_FN(omp_scratch)(OMP_SCR_TILE,
                                        xbytes + OMP_FN(omp_mlp_tile_scratch)(p, (int)TE));
        real *xb = omp_carve(&scr, xbytes);
#pragma omp for schedule(dynamic, 1)
        for (int64_t t = 0; t < nti; t++) {
            const int64_t e0 = t * TE;
            const int nt = (int)(E - e0 < TE ? E - e0 : TE);
            OMP_FN(omp_mlp_tile_vjp)(p, e0, nt, tsrc, ttgt, H ? H + e0 * nh : NULL, nh,
                                     gbar + e0 * F, F, xb, scr, e0 + nt < E);
            for (int r = 0; r < nt; r++)
                for (int k = 0; k < n_rbf; k++)
                    frbar[(e0 + r) * n_rbf + k] += xb[(int64_t)r * din + 2 * P + k];
        }
    }
}

void OMP_FN(omp_chan_scale_fwd)(int64_t E, int Q, int Fw, const void *s_, const void *X_,
                                void *Y_)
{
    const real *s = s_, *X = X_;
    real *Y = Y_;
#pragma omp parallel for schedule(static)
    for (int64_t e = 0; e < E; e++) {
        const real *se = s + e * Fw;
        for (int q = 0; q < 2 * Q; q++) {
            const int64_t o = (e * 2 * Q + q) * Fw;
            OMP_SIMD
            for (int f = 0; f < Fw; f++)
                Y[o + f] = X[o + f] * se[f];
        }
    }
}

void OMP_FN(omp_chan_scale_vjp)(int64_t E, int Q, int Fw, const void *s_, const void *X_,
                                const void *Ybar_, void *Xbar_, void *sbar_)
{
    const real *s = s_, *X = X_, *Ybar = Ybar_;
    real *Xbar = Xbar_, *sbar = sbar_;
#pragma omp parallel for schedule(static)
    for (int64_t e = 0; e < E; e++) {
        const real *se = s + e * Fw;
        real *sb = sbar ? sbar + e * Fw : NULL;
        for (int q = 0; q < 2 * Q; q++) {
            const int64_t o = (e * 2 * Q + q) * Fw;
            OMP_SIMD
            for (int f = 0; f < Fw; f++)
                Xbar[o + f] += Ybar[o + f] * se[f];
            if (sb) {
                OMP_SIMD
                for (int f = 0; f < Fw; f++)
                    sb[f] += Ybar[o + f] * X[o + f];
            }
        }
    }
}
