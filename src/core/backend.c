/* Backend registry. A backend exists in a build when its sources were
 * compiled in (configure decides); ref is always present. */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include "backend.h"

const ecenet_backend *ecn_backend_get(const char *name, int precision)
{
    if (!name)
        return NULL;
    if (strcmp(name, "ref") == 0)
        return precision == ECENET_F64 ? &ecn_ref_backend : NULL;
#ifdef ECENET_HAVE_OMP
    if (strcmp(name, "omp") == 0)
        return precision == ECENET_F64   ? &ecn_omp_backend_f64
               : precision == ECENET_F32 ? &ecn_omp_backend_f32
                                         : NULL;
#endif
#ifdef ECENET_HAVE_CUDA
    /* compiled in, but usable only where a CUDA device is present */
    if (strcmp(name, "cuda") == 0)
        return !ecn_cuda_available(NULL, 0) ? NULL
               : precision == ECENET_F64 ? &ecn_cuda_backend_f64
               : precision == ECENET_F32 ? &ecn_cuda_backend_f32
                                         : NULL;
#endif
    return NULL;
}

const char *ecn_backend_names(void)
{
#if defined(ECENET_HAVE_OMP) && defined(ECENET_HAVE_CUDA)
    return "ref,omp,cuda";
#elif defined(ECENET_HAVE_OMP)
    return "ref,omp";
#elif defined(ECENET_HAVE_CUDA)
    return "ref,cuda";
#else
    return "ref";
#endif
}

void ecn_backend_why(const char *name, char *why, size_t why_len)
{
    if (!why || !why_len)
        return;
    if (name && strcmp(name, "ref") == 0) {
        snprintf(why, why_len, "is fp64 only");
        return;
    }
#ifdef ECENET_HAVE_CUDA
    if (name && strcmp(name, "cuda") == 0) {
        char dev[256] = "";
        if (!ecn_cuda_available(dev, sizeof dev)) {
            snprintf(why, why_len, "is compiled in but cannot run here (%s)", dev);
            return;
        }
    }
#endif
    snprintf(why, why_len, "is not compiled in (compiled backends: %s)", ecn_backend_names());
}

const char *ecenet_backends(void) { return ecn_backend_names(); }

void ecn_linear_transpose(int Q, int fout, int fin, const double *w, double *w_t)
{
    const size_t fi = (size_t)fin, fo = (size_t)fout;
    for (size_t m = 0; m < (size_t)Q; m++)
        for (size_t o = 0; o < fo; o++)
            for (size_t i = 0; i < fi; i++)
                w_t[(m * fi + i) * fo + o] = w[(m * fo + o) * fi + i];
}

/* the tables' sin m = 0 entries are exactly zero (as sin(0·θ) is), so the
 * slot is structurally zero */
static int rs_sin0_zero(const ecenet_realspace_params *r)
{
    const double *ss = (const double *)r->sin_synth, *sa = (const double *)r->sin_analysis;
    if (!ss || !sa || r->Q < 1)
        return 0;
    for (int k = 0; k < r->G; k++)
        if (ss[k] != 0.0 || sa[(size_t)k * r->Q] != 0.0)
            return 0;
    return 1;
}

/* Grid points θ_k and θ_{G-k} = 2π - θ_k mirror each other: the cos tables
 * are even and the sin tables odd under k -> G - k, to within 32 ulp of
 * each table's largest entry, and the sin entries at θ_0 = 0 are exactly
 * zero; G is odd (no self-mirrored point but θ_0). The exact DFT matrices
 * computed in float64 pass (THGLab files, ecenet's synthetic models: ~1e-15
 * off); the public release's float32-accurate tables (~1e-6 off) do not, as
 * folding them would change the model, not just the rounding. */
static int rs_grid_sym(const ecenet_realspace_params *r)
{
    const int Q = r->Q, G = r->G;
    const double *t[4] = {(const double *)r->cos_synth, (const double *)r->sin_synth,
                          (const double *)r->cos_analysis, (const double *)r->sin_analysis};
    if (Q < 1 || G < 3 || G % 2 == 0)
        return 0;
    for (int i = 0; i < 4; i++) {
        if (!t[i])
            return 0;
        /* entry (m, k): synthesis tables (Q, G), analysis tables (G, Q) */
#define RS_AT(m, k) t[i][i < 2 ? (size_t)(m) * G + (k) : (size_t)(k) * Q + (m)]
        double mx = 0.0;
        for (size_t n = 0; n < (size_t)Q * G; n++)
            mx = fmax(mx, fabs(t[i][n]));
        const double tol = 32.0 * DBL_EPSILON * mx, sg = i % 2 ? -1.0 : 1.0;
        for (int m = 0; m < Q; m++) {
            if (i % 2 && RS_AT(m, 0) != 0.0)
                return 0;
            for (int k = 1; k < G; k++)
                if (!(fabs(RS_AT(m, G - k) - sg * RS_AT(m, k)) <= tol))
                    return 0;
        }
#undef RS_AT
    }
    return 1;
}

void ecn_rs_table_flags(ecenet_realspace_params *r)
{
    r->sin0_zero = rs_sin0_zero(r);
    r->grid_sym = rs_grid_sym(r);
}

int ecn_backend_has_nlist(const ecenet_backend *be)
{
    return be && be->nlist_count && be->nlist_fill;
}
