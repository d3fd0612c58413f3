/* Real spherical harmonics and their gradient (SPEC §4); mirrors ref_sph.c,
 * one pair per iteration in parallel, evaluated in double. */
#include "omp_ops.h"

#define SPH_LMAX 12

void OMP_FN(omp_sph_fwd)(int64_t n, int L, const void *d_, void *Y_, void *dY_)
{
    const real *d = d_;
    real *Y = Y_, *dY = dY_;
    const int S = (L + 1) * (L + 1);
    double N[SPH_LMAX + 1][SPH_LMAX + 1], qmm[SPH_LMAX + 2];
    for (int l = 0; l <= L; l++)
        for (int m = 0; m <= l; m++) {
            double ratio = 1.0; /* (l-m)!/(l+m)! */
            for (int k = l - m + 1; k <= l + m; k++)
                ratio /= k;
            N[l][m] = sqrt((2 * l + 1) / (4.0 * M_PI) * ratio);
        }
    for (int m = 0; m <= L + 1; m++) {
        qmm[m] = 1.0; /* (2m-1)!! */
        for (int j = 1; j <= 2 * m - 1; j += 2)
            qmm[m] *= j;
    }
#pragma omp parallel for schedule(static)
    for (int64_t k = 0; k < n; k++) {
        const double v[3] = {(double)d[3 * k], (double)d[3 * k + 1], (double)d[3 * k + 2]};
        const double rr = sqrt(v[0] * v[0] + v[1] * v[1] + v[2] * v[2]);
        const double u[3] = {v[0] / rr, v[1] / rr, v[2] / rr};
        /* Q[l][m] = d^m P_l/dt^m at t = u_z, m = 0..l+1 (Q[l][l+1] = 0) */
        double Q[SPH_LMAX + 2][SPH_LMAX + 2];
        const double t = u[2];
        for (int m = 0; m <= L + 1; m++) {
            for (int l = 0; l < m; l++)
                Q[l][m] = 0.0;
            Q[m][m] = qmm[m];
            if (m + 1 <= L + 1)
                Q[m + 1][m] = (2 * m + 1) * t * qmm[m];
            for (int l = m + 2; l <= L + 1; l++)
                Q[l][m] = ((2 * l - 1) * t * Q[l - 1][m] - (l + m - 1) * Q[l - 2][m]) / (l - m);
        }
        double c[SPH_LMAX + 1], s[SPH_LMAX + 1];
        c[0] = 1.0;
        s[0] = 0.0;
        for (int m = 1; m <= L; m++) {
            c[m] = c[m - 1] * u[0] - s[m - 1] * u[1];
            s[m] = c[m - 1] * u[1] + s[m - 1] * u[0];
        }
        real *y = Y + k * S;
        real *dy = dY ? dY + k * S * 3 : NULL;
        for (int l = 0; l <= L; l++) {
            for (int m = -l; m <= l; m++) {
                const int am = m < 0 ? -m : m;
                const double pre = (m == 0 ? 1.0 : sqrt(2.0)) * N[l][am];
                const double trig = m >= 0 ? c[am] : s[am];
                const int idx = l * l + l + m;
                y[idx] = (real)(pre * Q[l][am] * trig);
                if (!dy)
                    continue;
                double g[3];
                if (am == 0) {
                    g[0] = 0.0;
                    g[1] = 0.0;
                } else if (m > 0) {
                    g[0] = pre * Q[l][am] * am * c[am - 1];
                    g[1] = -pre * Q[l][am] * am * s[am - 1];
                } else {
                    g[0] = pre * Q[l][am] * am * s[am - 1];
                    g[1] = pre * Q[l][am] * am * c[am - 1];
                }
                g[2] = pre * Q[l][am + 1] * trig;
                const double ug = u[0] * g[0] + u[1] * g[1] + u[2] * g[2];
                for (int a = 0; a < 3; a++)
                    dy[idx * 3 + a] = (real)((g[a] - u[a] * ug) / rr);
            }
        }
    }
}
