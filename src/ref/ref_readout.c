/* Readout (SPEC §14): invariants = the m = 0 cos slot, per-edge MLP with
 * optional type-dependent weights, per-edge energy, fp64 sum. */
#include "ref.h"

static double mlp_w(const ecenet_mlp_params *p, int k, int64_t e, ecenet_idx tsrc,
                    ecenet_idx ttgt, int o, int i)
{
    const double *w = p->w[k], *ws = p->w_src[k], *wt = p->w_tgt[k];
    const int64_t q = (int64_t)o * p->dims[k] + i, qm = (int64_t)p->dims[k + 1] * p->dims[k];
    double v = w[q];
    if (ws)
        v += ws[tsrc[e] * qm + q];
    if (wt)
        v += wt[ttgt[e] * qm + q];
    return v;
}

static int hidden_size(const ecenet_mlp_params *p)
{
    int h = 0;
    for (int k = 0; k + 1 < p->n_layers; k++)
        h += p->dims[k + 1];
    return h;
}

#define MLP_WIDTH 4096 /* widest layer the reference supports (checked at load) */

void ref_mlp_fwd(const ecenet_dims *dm, const ecenet_mlp_params *p, ecenet_idx tsrc,
                 ecenet_idx ttgt, const void *X_, void *H_, void *y_)
{
    const double *X = X_;
    double *H = H_, *y = y_;
    const int nh = hidden_size(p), dout = p->dims[p->n_layers];
    double xin[MLP_WIDTH], z[MLP_WIDTH];
    for (int64_t e = 0; e < dm->E; e++) {
        const double *inv = X + e * dm->Q * 2 * dm->F; /* m = 0, cos */
        for (int i = 0; i < p->dims[0]; i++)
            xin[i] = inv[i];
        double *He = H + e * nh;
        for (int k = 0; k < p->n_layers; k++) {
            const double *b = p->b[k];
            for (int o = 0; o < p->dims[k + 1]; o++) {
                double acc = 0.0;
                for (int i = 0; i < p->dims[k]; i++)
                    acc += xin[i] * mlp_w(p, k, e, tsrc, ttgt, o, i);
                z[o] = acc + b[o];
            }
            if (k + 1 == p->n_layers)
                break;
            for (int o = 0; o < p->dims[k + 1]; o++) {
                He[o] = z[o];
                xin[o] = ref_act(p->act, z[o]);
            }
            He += p->dims[k + 1];
        }
        for (int o = 0; o < dout; o++)
            y[e * dout + o] = z[o];
    }
}

void ref_mlp_vjp(const ecenet_dims *dm, const ecenet_mlp_params *p, ecenet_idx tsrc,
                 ecenet_idx ttgt, const void *H_, const void *ybar_, void *Xbar_)
{
    const double *H = H_, *ybar = ybar_;
    double *Xbar = Xbar_;
    const int nh = hidden_size(p), dout = p->dims[p->n_layers];
    double zbar[MLP_WIDTH], xbar[MLP_WIDTH];
    int hoff[ECENET_MLP_MAX + 1];
    hoff[0] = 0;
    for (int k = 0; k + 1 < p->n_layers; k++)
        hoff[k + 1] = hoff[k] + p->dims[k + 1];
    for (int64_t e = 0; e < dm->E; e++) {
        const double *He = H + e * nh;
        for (int o = 0; o < dout; o++)
            zbar[o] = ybar[e * dout + o];
        for (int k = p->n_layers - 1; k >= 0; k--) {
            for (int i = 0; i < p->dims[k]; i++) {
                double acc = 0.0;
                for (int o = 0; o < p->dims[k + 1]; o++)
                    acc += zbar[o] * mlp_w(p, k, e, tsrc, ttgt, o, i);
                xbar[i] = acc;
            }
            if (k == 0)
                break;
            const double *zprev = He + hoff[k - 1]; /* pre-activation feeding layer k */
            for (int i = 0; i < p->dims[k]; i++)
                zbar[i] = xbar[i] * ref_act_grad(p->act, zprev[i]);
        }
        double *xb = Xbar + e * dm->Q * 2 * dm->F;
        for (int i = 0; i < p->dims[0]; i++)
            xb[i] += xbar[i];
    }
}

void ref_energy_fwd(int64_t E, int K, const void *y_, const void *fr_, void *eps_)
{
    const double *y = y_, *fr = fr_;
    double *eps = eps_;
    for (int64_t e = 0; e < E; e++) {
        double acc = 0.0;
        for (int k = 0; k < K; k++)
            acc += y[e * K + k] * fr[e * K + k];
        eps[e] = acc;
    }
}

void ref_energy_vjp(int64_t E, int K, const void *y_, const void *fr_, void *ybar_, void *frbar_)
{
    const double *y = y_, *fr = fr_;
    double *ybar = ybar_, *frbar = frbar_;
    for (int64_t q = 0; q < E * K; q++) {
        ybar[q] += fr[q];
        frbar[q] += y[q];
    }
}

double ref_sum(int64_t n, const void *x_)
{
    const double *x = x_;
    double acc = 0.0;
    for (int64_t k = 0; k < n; k++)
        acc += x[k];
    return acc;
}
