/* Backend registry. A backend exists in a build when its sources were
 * compiled in (configure decides); ref is always present. */
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

const char *ecenet_backends(void) { return ecn_backend_names(); }

void ecn_linear_transpose(int Q, int fout, int fin, const double *w, double *w_t)
{
    const size_t fi = (size_t)fin, fo = (size_t)fout;
    for (size_t m = 0; m < (size_t)Q; m++)
        for (size_t o = 0; o < fo; o++)
            for (size_t i = 0; i < fi; i++)
                w_t[(m * fi + i) * fo + o] = w[(m * fo + o) * fi + i];
}

int ecn_backend_has_nlist(const ecenet_backend *be)
{
    return be && be->nlist_count && be->nlist_fill;
}
