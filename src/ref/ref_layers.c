/* Equivariant linear (SPEC §10), RealSpace nonlinearity (§11), residual (§12). */
#include "ref.h"

double ref_act(int act, double x)
{
    switch (act) {
    case ECENET_ACT_SILU: return x / (1.0 + exp(-x));
    case ECENET_ACT_RELU: return x > 0.0 ? x : 0.0;
    case ECENET_ACT_TANH: return tanh(x);
    case ECENET_ACT_GELU: return 0.5 * x * (1.0 + erf(x / sqrt(2.0)));
    default: return x; /* identity */
    }
}

double ref_act_grad(int act, double x)
{
    switch (act) {
    case ECENET_ACT_SILU: {
        double s = 1.0 / (1.0 + exp(-x));
        return s * (1.0 + x * (1.0 - s));
    }
    case ECENET_ACT_RELU: return x > 0.0 ? 1.0 : 0.0; /* PyTorch: 0 at x = 0 */
    case ECENET_ACT_TANH: {
        double t = tanh(x);
        return 1.0 - t * t;
    }
    case ECENET_ACT_GELU:
        return 0.5 * (1.0 + erf(x / sqrt(2.0))) + x * exp(-0.5 * x * x) / sqrt(2.0 * M_PI);
    default: return 1.0;
    }
}

/* W_eff(e)[m,o,i] = w + w_src[t_src] + w_tgt[t_tgt] */
static double weff(const ecenet_linear_params *p, int64_t e, ecenet_idx tsrc, ecenet_idx ttgt,
                   int m, int o, int i)
{
    const double *w = p->w, *ws = p->w_src, *wt = p->w_tgt;
    const int64_t q = ((int64_t)m * p->fout + o) * p->fin + i;
    const int64_t qm = (int64_t)p->Q * p->fout * p->fin;
    double v = w[q];
    if (ws)
        v += ws[tsrc[e] * qm + q];
    if (wt)
        v += wt[ttgt[e] * qm + q];
    return v;
}

void ref_linear_fwd(int64_t E, const ecenet_linear_params *p, ecenet_idx tsrc, ecenet_idx ttgt,
                    const void *X_, void *Y_)
{
    const double *X = X_, *bias = p->bias;
    double *Y = Y_;
    for (int64_t e = 0; e < E; e++)
        for (int m = 0; m < p->Q; m++)
            for (int part = 0; part < 2; part++) {
                const double *x = X + ((e * p->Q + m) * 2 + part) * p->fin;
                double *y = Y + ((e * p->Q + m) * 2 + part) * p->fout;
                for (int o = 0; o < p->fout; o++) {
                    double acc = 0.0;
                    for (int i = 0; i < p->fin; i++)
                        acc += x[i] * weff(p, e, tsrc, ttgt, m, o, i);
                    if (bias && m == 0 && part == 0) /* no bias on sin or m > 0 */
                        acc += bias[o];
                    y[o] = acc;
                }
            }
}

void ref_linear_vjp(int64_t E, const ecenet_linear_params *p, ecenet_idx tsrc, ecenet_idx ttgt,
                    const void *Ybar_, void *Xbar_)
{
    const double *Ybar = Ybar_;
    double *Xbar = Xbar_;
    for (int64_t e = 0; e < E; e++)
        for (int m = 0; m < p->Q; m++)
            for (int part = 0; part < 2; part++) {
                const double *yb = Ybar + ((e * p->Q + m) * 2 + part) * p->fout;
                double *xb = Xbar + ((e * p->Q + m) * 2 + part) * p->fin;
                for (int i = 0; i < p->fin; i++) {
                    double acc = 0.0;
                    for (int o = 0; o < p->fout; o++)
                        acc += yb[o] * weff(p, e, tsrc, ttgt, m, o, i);
                    xb[i] += acc;
                }
            }
}

/* Per-edge affine of the grid values: scale = base + src[t_i] + tgt[t_j]. */
static void affine(const ecenet_realspace_params *p, int64_t e, ecenet_idx tsrc,
                   ecenet_idx ttgt, int f, double *scale, double *shift)
{
    const double *sc = p->scale, *sh = p->shift;
    const double *ss = p->scale_src, *st = p->scale_tgt, *hs = p->shift_src, *ht = p->shift_tgt;
    *scale = sc ? sc[f] : 1.0;
    *shift = sh ? sh[f] : 0.0;
    if (ss) *scale += ss[tsrc[e] * p->F + f];
    if (st) *scale += st[ttgt[e] * p->F + f];
    if (hs) *shift += hs[tsrc[e] * p->F + f];
    if (ht) *shift += ht[ttgt[e] * p->F + f];
}

/* grid value f_k = Σ_m Xc[m] cos_synth[m,k] + Σ_m Xs[m] sin_synth[m,k] */
static double synth(const ecenet_realspace_params *p, const double *Xe, int f, int k)
{
    const double *cs = p->cos_synth, *ss = p->sin_synth;
    double c = 0.0, s = 0.0;
    for (int m = 0; m < p->Q; m++) {
        c += Xe[(m * 2 + 0) * p->F + f] * cs[m * p->G + k];
        s += Xe[(m * 2 + 1) * p->F + f] * ss[m * p->G + k];
    }
    return c + s;
}

void ref_realspace_fwd(int64_t E, const ecenet_realspace_params *p, ecenet_idx tsrc,
                       ecenet_idx ttgt, const void *X_, void *Y_)
{
    const double *X = X_, *ca = p->cos_analysis, *sa = p->sin_analysis;
    double *Y = Y_;
    const int F = p->F, Q = p->Q, G = p->G;
    for (int64_t e = 0; e < E; e++) {
        const double *Xe = X + e * Q * 2 * F;
        double *Ye = Y + e * Q * 2 * F;
        for (int f = 0; f < F; f++) {
            double scale, shift;
            affine(p, e, tsrc, ttgt, f, &scale, &shift);
            for (int m = 0; m < Q; m++)
                Ye[(m * 2 + 0) * F + f] = Ye[(m * 2 + 1) * F + f] = 0.0;
            for (int k = 0; k < G; k++) {
                double g = ref_act(p->act, scale * synth(p, Xe, f, k) + shift);
                for (int m = 0; m < Q; m++) {
                    Ye[(m * 2 + 0) * F + f] += g * ca[k * Q + m];
                    Ye[(m * 2 + 1) * F + f] += g * sa[k * Q + m];
                }
            }
        }
    }
}

/* The grid is recomputed from X rather than saved (SPEC §11). */
void ref_realspace_vjp(int64_t E, const ecenet_realspace_params *p, ecenet_idx tsrc,
                       ecenet_idx ttgt, const void *X_, const void *Ybar_, void *Xbar_)
{
    const double *X = X_, *Ybar = Ybar_;
    const double *cs = p->cos_synth, *ss = p->sin_synth, *ca = p->cos_analysis,
                 *sa = p->sin_analysis;
    double *Xbar = Xbar_;
    const int F = p->F, Q = p->Q, G = p->G;
    for (int64_t e = 0; e < E; e++) {
        const double *Xe = X + e * Q * 2 * F, *Yb = Ybar + e * Q * 2 * F;
        double *Xb = Xbar + e * Q * 2 * F;
        for (int f = 0; f < F; f++) {
            double scale, shift;
            affine(p, e, tsrc, ttgt, f, &scale, &shift);
            for (int k = 0; k < G; k++) {
                double gbar = 0.0;
                for (int m = 0; m < Q; m++)
                    gbar += Yb[(m * 2 + 0) * F + f] * ca[k * Q + m] +
                            Yb[(m * 2 + 1) * F + f] * sa[k * Q + m];
                double fbar = gbar * ref_act_grad(p->act, scale * synth(p, Xe, f, k) + shift) * scale;
                for (int m = 0; m < Q; m++) {
                    Xb[(m * 2 + 0) * F + f] += fbar * cs[m * G + k];
                    Xb[(m * 2 + 1) * F + f] += fbar * ss[m * G + k];
                }
            }
        }
    }
}

void ref_add(int64_t n, const void *X_, void *Y_)
{
    const double *X = X_;
    double *Y = Y_;
    for (int64_t k = 0; k < n; k++)
        Y[k] += X[k];
}
