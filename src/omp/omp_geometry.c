/* Pair geometry and radial basis (SPEC §2.5, §3); mirrors ref_geometry.c.
 * Per-entry loops run in parallel; the atom reduction of pair_geom_vjp loops
 * atoms in parallel over their CSR entries, and the virial is summed in fixed
 * chunks, so nothing depends on the number of threads. Transcendentals are
 * evaluated in double for both precisions. */
#include "omp_ops.h"

void OMP_FN(omp_pair_geom_fwd)(int64_t n, ecenet_idx src, ecenet_idx dst, const void *shift_,
                               const void *pos_, void *d_, void *r_)
{
    const real *shift = shift_, *pos = pos_;
    real *d = d_, *r = r_;
#pragma omp parallel for schedule(static)
    for (int64_t k = 0; k < n; k++) {
        double v[3];
        for (int a = 0; a < 3; a++) {
            v[a] = ((double)pos[3 * (int64_t)dst[k] + a] - (double)pos[3 * (int64_t)src[k] + a]) +
                   (double)shift[3 * k + a];
            d[3 * k + a] = (real)v[a];
        }
        r[k] = (real)sqrt(v[0] * v[0] + v[1] * v[1] + v[2] * v[2] + 1e-30);
    }
}

#define VIR_CHUNK 4096

void OMP_FN(omp_pair_geom_vjp)(int64_t n, ecenet_idx src, ecenet_idx dst,
                               const ecenet_csr *by_src, const ecenet_csr *by_dst,
                               const void *d_, const void *dbar_, void *pos_bar_,
                               void *virial_)
{
    const real *d = d_, *dbar = dbar_;
    real *pos_bar = pos_bar_, *virial = virial_;
    if (n <= 0)
        return;
    if (!by_src || !by_dst) { /* no grouping given: serial, entry order */
        for (int64_t k = 0; k < n; k++)
            for (int a = 0; a < 3; a++) {
                pos_bar[3 * (int64_t)dst[k] + a] += dbar[3 * k + a];
                pos_bar[3 * (int64_t)src[k] + a] -= dbar[3 * k + a];
            }
    } else {
        /* atoms beyond the largest index have no entries */
        int64_t na = 0;
#pragma omp parallel for schedule(static) reduction(max : na)
        for (int64_t k = 0; k < n; k++) {
            int64_t m = src[k] > dst[k] ? src[k] : dst[k];
            if (m + 1 > na)
                na = m + 1;
        }
#pragma omp parallel for schedule(dynamic, 64)
        for (int64_t a = 0; a < na; a++) {
            real acc[3] = {0, 0, 0};
            for (int32_t q = by_dst->ptr[a]; q < by_dst->ptr[a + 1]; q++) {
                const int64_t k = by_dst->idx[q];
                for (int c = 0; c < 3; c++)
                    acc[c] += dbar[3 * k + c];
            }
            for (int32_t q = by_src->ptr[a]; q < by_src->ptr[a + 1]; q++) {
                const int64_t k = by_src->idx[q];
                for (int c = 0; c < 3; c++)
                    acc[c] -= dbar[3 * k + c];
            }
            for (int c = 0; c < 3; c++)
                pos_bar[3 * a + c] += acc[c];
        }
    }
    if (!virial)
        return;
    const int64_t nc = (n + VIR_CHUNK - 1) / VIR_CHUNK;
    double *part = OMP_FN(omp_scratch)(OMP_SCR_SHARED, (size_t)nc * 9 * sizeof(double));
#pragma omp parallel for schedule(static)
    for (int64_t c = 0; c < nc; c++) {
        double v[9] = {0, 0, 0, 0, 0, 0, 0, 0, 0};
        const int64_t k1 = (c + 1) * VIR_CHUNK < n ? (c + 1) * VIR_CHUNK : n;
        for (int64_t k = c * VIR_CHUNK; k < k1; k++)
            for (int b = 0; b < 3; b++)
                for (int a = 0; a < 3; a++)
                    v[3 * b + a] += (double)d[3 * k + b] * (double)dbar[3 * k + a];
        for (int q = 0; q < 9; q++)
            part[9 * c + q] = v[q];
    }
    double v[9] = {0, 0, 0, 0, 0, 0, 0, 0, 0};
    for (int64_t c = 0; c < nc; c++)
        for (int q = 0; q < 9; q++)
            v[q] += part[9 * c + q];
    for (int q = 0; q < 9; q++)
        virial[q] += (real)v[q];
}

void OMP_FN(omp_dist_vjp)(int64_t n, const void *d_, const void *r_, const void *rbar_,
                          void *dbar_)
{
    const real *d = d_, *r = r_, *rbar = rbar_;
    real *dbar = dbar_;
#pragma omp parallel for schedule(static)
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
        double y = r / c;
        *fc = 1.0 - 10.0 * y * y * y + 15.0 * y * y * y * y - 6.0 * y * y * y * y * y;
        *dfc = -30.0 * y * y * (1.0 - y) * (1.0 - y) / c;
    } else {
        *fc = 0.5 * (1.0 + cos(M_PI * r / c));
        *dfc = -(M_PI / (2.0 * c)) * sin(M_PI * r / c);
    }
}

void OMP_FN(omp_radial_fwd)(int64_t n, const void *r_, double c, int K, int type, void *f_,
                            void *df_)
{
    const real *r = r_;
    real *f = f_, *df = df_;
    const double norm = sqrt(2.0 / c);
#pragma omp parallel for schedule(static)
    for (int64_t k = 0; k < n; k++) {
        const double rk = (double)r[k];
        double fc, dfc;
        envelope(rk, c, type, &fc, &dfc);
        if (K == 0) {
            f[k] = (real)fc;
            if (df)
                df[k] = (real)dfc;
            continue;
        }
        for (int q = 1; q <= K; q++) {
            double x = q * M_PI * rk / c;
            double sinc, dsinc;
            if (fabs(x) < 1e-8) {
                sinc = 1.0;
                dsinc = 0.0;
            } else {
                sinc = sin(x) / x;
                dsinc = (cos(x) - sinc) / x;
            }
            f[k * K + q - 1] = (real)(norm * sinc * fc);
            if (df)
                df[k * K + q - 1] = (real)(norm * (dsinc * (q * M_PI / c) * fc + sinc * dfc));
        }
    }
}

void OMP_FN(omp_radial_vjp)(int64_t n, int K, const void *df_, const void *fbar_, void *rbar_)
{
    const real *df = df_, *fbar = fbar_;
    real *rbar = rbar_;
    const int cols = K == 0 ? 1 : K;
#pragma omp parallel for schedule(static)
    for (int64_t k = 0; k < n; k++) {
        real acc = RL(0.0);
        for (int q = 0; q < cols; q++)
            acc += fbar[k * cols + q] * df[k * cols + q];
        rbar[k] += acc;
    }
}
