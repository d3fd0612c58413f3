/* Element FiLM (SPEC §17.4): a per-edge, per-channel gain from the two atom
 * types (and optionally the distance), applied to the bond-frame features. */
#include "ref.h"

/* gamma[e,:] = 1 + MLP([ea[t_src] ‖ eb[t_tgt] ‖ fr[e]]) */
void ref_film_fwd(const ecenet_dims *dm, const ecenet_mlp_params *p, const void *ea_,
                  const void *eb_, int P, int n_rbf, ecenet_idx tsrc, ecenet_idx ttgt,
                  const void *fr_, void *H_, void *gamma_)
{
    const double *ea = ea_, *eb = eb_, *fr = fr_;
    double *H = H_, *gamma = gamma_;
    const int nh = ref_mlp_hidden_size(p), F = p->dims[p->n_layers];
    double x[REF_MLP_WIDTH];
    for (int64_t e = 0; e < dm->E; e++) {
        for (int k = 0; k < P; k++) {
            x[k] = ea[tsrc[e] * P + k];
            x[P + k] = eb[ttgt[e] * P + k];
        }
        for (int k = 0; k < n_rbf; k++)
            x[2 * P + k] = fr[e * n_rbf + k];
        /* the gate's linears carry no type corrections: pass no type ids */
        ref_mlp_row_fwd(p, e, tsrc, ttgt, x, H + e * nh, gamma + e * F);
        for (int f = 0; f < F; f++)
            gamma[e * F + f] += 1.0;
    }
}

void ref_film_vjp(const ecenet_dims *dm, const ecenet_mlp_params *p, int P, int n_rbf,
                  ecenet_idx tsrc, ecenet_idx ttgt, const void *H_, const void *gamma_bar_,
                  void *frbar_)
{
    const double *H = H_, *gbar = gamma_bar_;
    double *frbar = frbar_;
    const int nh = ref_mlp_hidden_size(p), F = p->dims[p->n_layers];
    double xb[REF_MLP_WIDTH];
    if (n_rbf == 0) /* the type embeddings carry no geometry gradient */
        return;
    for (int64_t e = 0; e < dm->E; e++) {
        ref_mlp_row_vjp(p, e, tsrc, ttgt, H + e * nh, gbar + e * F, xb);
        for (int k = 0; k < n_rbf; k++)
            frbar[e * n_rbf + k] += xb[2 * P + k];
    }
}

void ref_chan_scale_fwd(int64_t E, int Q, int Fw, const void *s_, const void *X_, void *Y_)
{
    const double *s = s_, *X = X_;
    double *Y = Y_;
    for (int64_t e = 0; e < E; e++)
        for (int q = 0; q < 2 * Q; q++)
            for (int f = 0; f < Fw; f++)
                Y[(e * 2 * Q + q) * Fw + f] = X[(e * 2 * Q + q) * Fw + f] * s[e * Fw + f];
}

void ref_chan_scale_vjp(int64_t E, int Q, int Fw, const void *s_, const void *X_,
                        const void *Ybar_, void *Xbar_, void *sbar_)
{
    const double *s = s_, *X = X_, *Ybar = Ybar_;
    double *Xbar = Xbar_, *sbar = sbar_;
    for (int64_t e = 0; e < E; e++)
        for (int q = 0; q < 2 * Q; q++)
            for (int f = 0; f < Fw; f++) {
                const int64_t k = (e * 2 * Q + q) * Fw + f;
                Xbar[k] += Ybar[k] * s[e * Fw + f];
                if (sbar)
                    sbar[e * Fw + f] += Ybar[k] * X[k];
            }
}
