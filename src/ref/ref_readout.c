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

int ref_mlp_hidden_size(const ecenet_mlp_params *p)
{
    int h = 0;
    for (int k = 0; k + 1 < p->n_layers; k++)
        h += p->dims[k + 1];
    return h;
}

/* One row through the MLP: x (dims[0]) -> out (dims[n]); the hidden
 * pre-activations go to Hrow. Shared with the FiLM gate (ref_film.c). */
void ref_mlp_row_fwd(const ecenet_mlp_params *p, int64_t e, ecenet_idx tsrc, ecenet_idx ttgt,
                     const double *x, double *Hrow, double *out)
{
    double xin[REF_MLP_WIDTH], z[REF_MLP_WIDTH];
    for (int i = 0; i < p->dims[0]; i++)
        xin[i] = x[i];
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
            Hrow[o] = z[o];
            xin[o] = ref_act(p->act, z[o]);
        }
        Hrow += p->dims[k + 1];
    }
    for (int o = 0; o < p->dims[p->n_layers]; o++)
        out[o] = z[o];
}

/* xbar (dims[0]) = ∂/∂x of Σ outbar·out, from the saved pre-activations. */
void ref_mlp_row_vjp(const ecenet_mlp_params *p, int64_t e, ecenet_idx tsrc, ecenet_idx ttgt,
                     const double *Hrow, const double *outbar, double *xbar)
{
    double zbar[REF_MLP_WIDTH], xb[REF_MLP_WIDTH];
    int hoff[ECENET_MLP_MAX + 1];
    hoff[0] = 0;
    for (int k = 0; k + 1 < p->n_layers; k++)
        hoff[k + 1] = hoff[k] + p->dims[k + 1];
    for (int o = 0; o < p->dims[p->n_layers]; o++)
        zbar[o] = outbar[o];
    for (int k = p->n_layers - 1; k >= 0; k--) {
        for (int i = 0; i < p->dims[k]; i++) {
            double acc = 0.0;
            for (int o = 0; o < p->dims[k + 1]; o++)
                acc += zbar[o] * mlp_w(p, k, e, tsrc, ttgt, o, i);
            xb[i] = acc;
        }
        if (k == 0)
            break;
        const double *zprev = Hrow + hoff[k - 1]; /* pre-activation feeding layer k */
        for (int i = 0; i < p->dims[k]; i++)
            zbar[i] = xb[i] * ref_act_grad(p->act, zprev[i]);
    }
    for (int i = 0; i < p->dims[0]; i++)
        xbar[i] = xb[i];
}

void ref_mlp_fwd(const ecenet_dims *dm, const ecenet_mlp_params *p, ecenet_idx tsrc,
                 ecenet_idx ttgt, const void *X_, void *H_, void *y_)
{
    const double *X = X_;
    double *H = H_, *y = y_;
    const int nh = ref_mlp_hidden_size(p), dout = p->dims[p->n_layers];
    for (int64_t e = 0; e < dm->E; e++) /* invariants: the m = 0 cos slot */
        ref_mlp_row_fwd(p, e, tsrc, ttgt, X + e * dm->Q * 2 * dm->F, H + e * nh, y + e * dout);
}

void ref_mlp_vjp(const ecenet_dims *dm, const ecenet_mlp_params *p, ecenet_idx tsrc,
                 ecenet_idx ttgt, const void *H_, const void *ybar_, void *Xbar_)
{
    const double *H = H_, *ybar = ybar_;
    double *Xbar = Xbar_;
    const int nh = ref_mlp_hidden_size(p), dout = p->dims[p->n_layers];
    double xb[REF_MLP_WIDTH];
    for (int64_t e = 0; e < dm->E; e++) {
        ref_mlp_row_vjp(p, e, tsrc, ttgt, H + e * nh, ybar + e * dout, xb);
        double *x = Xbar + e * dm->Q * 2 * dm->F;
        for (int i = 0; i < p->dims[0]; i++)
            x[i] += xb[i];
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
