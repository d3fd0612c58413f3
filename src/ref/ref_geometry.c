/* Pair geometry and radial basis (SPEC §2.5, §3). */
#include <math.h>
#include "ref.h"

void ref_pair_geom_fwd(int64_t n, ecenet_idx src, ecenet_idx dst, const void *shift_,
                       const void *pos_, void *d_, void *r_)
{
    const double *shift = shift_, *pos = pos_;
    double *d = d_, *r = r_;
    for (int64_t k = 0; k < n; k++) {
        for (int a = 0; a < 3; a++)
            d[3 * k + a] = pos[3 * dst[k] + a] - pos[3 * src[k] + a] + shift[3 * k + a];
        const double *v = d + 3 * k;
        r[k] = sqrt(v[0] * v[0] + v[1] * v[1] + v[2] * v[2] + 1e-30);
    }
}

/* Every position dependence is through pair vectors d' = d + d·ε, so
 * dE/dε[b][a] = Σ d[b]·dbar[a] (SPEC §2.5). The reference loops in entry
 * order and needs no grouping. */
void ref_pair_geom_vjp(int64_t n, ecenet_idx src, ecenet_idx dst, const ecenet_csr *by_src,
                       const ecenet_csr *by_dst, const void *d_, const void *dbar_,
                       void *pos_bar_, void *virial_)
{
    (void)by_src;
    (void)by_dst;
    const double *d = d_, *dbar = dbar_;
    double *pos_bar = pos_bar_, *virial = virial_;
    for (int64_t k = 0; k < n; k++) {
        for (int a = 0; a < 3; a++) {
            pos_bar[3 * dst[k] + a] += dbar[3 * k + a];
            pos_bar[3 * src[k] + a] -= dbar[3 * k + a];
        }
        if (virial)
            for (int b = 0; b < 3; b++)
                for (int a = 0; a < 3; a++)
                    virial[3 * b + a] += d[3 * k + b] * dbar[3 * k + a];
    }
}

void ref_dist_vjp(int64_t n, const void *d_, const void *r_, const void *rbar_, void *dbar_)
{
    const double *d = d_, *r = r_, *rbar = rbar_;
    double *dbar = dbar_;
    for (int64_t k = 0; k < n; k++)
        for (int a = 0; a < 3; a++)
            dbar[3 * k + a] += rbar[k] * d[3 * k + a] / r[k];
}

/* Envelope fc(r) and fc'(r); 0 for r >= c (strict r < c test). */
static void envelope(double r, double c, int type, double *fc, double *dfc)
{
    if (!(r < c)) {
        *fc = 0.0;
        *dfc = 0.0;
        return;
    }
    if (type == ECENET_CUTOFF_POLY) {
        /* 1 - 10y³ + 15y⁴ - 6y⁵ in factored form: near r = c the expanded
         * sum of O(10) terms loses ~1e-9 relative to cancellation */
        double y = r / c, u = 1.0 - y;
        *fc = u * u * u * (1.0 + 3.0 * y + 6.0 * y * y);
        *dfc = -30.0 * y * y * (1.0 - y) * (1.0 - y) / c;
    } else {
        *fc = 0.5 * (1.0 + cos(M_PI * r / c));
        *dfc = -(M_PI / (2.0 * c)) * sin(M_PI * r / c);
    }
}

void ref_radial_fwd(int64_t n, const void *r_, double c, int K, int type, void *f_, void *df_)
{
    const double *r = r_;
    double *f = f_, *df = df_;
    const double norm = sqrt(2.0 / c);
    for (int64_t k = 0; k < n; k++) {
        double fc, dfc;
        envelope(r[k], c, type, &fc, &dfc);
        if (K == 0) {
            f[k] = fc;
            if (df)
                df[k] = dfc;
            continue;
        }
        for (int q = 1; q <= K; q++) {
            double x = q * M_PI * r[k] / c;
            double sinc, dsinc;
            if (fabs(x) < 1e-8) {
                sinc = 1.0;
                dsinc = 0.0;
            } else {
                sinc = sin(x) / x;
                dsinc = (cos(x) - sinc) / x;
            }
            f[k * K + q - 1] = norm * sinc * fc;
            if (df)
                df[k * K + q - 1] = norm * (dsinc * (q * M_PI / c) * fc + sinc * dfc);
        }
    }
}

void ref_radial_vjp(int64_t n, int K, const void *df_, const void *fbar_, void *rbar_)
{
    const double *df = df_, *fbar = fbar_;
    double *rbar = rbar_;
    int cols = K == 0 ? 1 : K;
    for (int64_t k = 0; k < n; k++)
        for (int q = 0; q < cols; q++)
            rbar[k] += fbar[k * cols + q] * df[k * cols + q];
}
