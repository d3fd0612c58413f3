/* Backend registry: the backends compiled into this build. */
#ifndef ECN_BACKEND_H
#define ECN_BACKEND_H

#include "ecenet.h"
#include "ecenet/ops.h"

/* The backend with this name and precision, or NULL if not compiled in. */
const ecenet_backend *ecn_backend_get(const char *name, int precision);
/* Comma-separated names of the compiled backends. */
const char *ecn_backend_names(void);
/* Why ecn_backend_get(name, ...) gave NULL, as one phrase after the
 * backend's name: "is not compiled in (compiled backends: ...)", "is fp64
 * only" (ref), or, for a compiled-in cuda, the reason it cannot run here. */
void ecn_backend_why(const char *name, char *why, size_t why_len);

/* The transposed weights a backend with linear_w_t gets in
 * ecenet_linear_params.w_t: w[m][o][i] -> w_t[m][i][o], Q matrices of
 * fout × fin, host arrays. */
void ecn_linear_transpose(int Q, int fout, int fin, const double *w, double *w_t);

/* The table flags of a RealSpace layer, from its host (float64) tables:
 * sin0_zero and grid_sym (ecenet/ops.h), both 0 where a table is missing. */
void ecn_rs_table_flags(ecenet_realspace_params *r);

/* 1 when the backend searches neighbour lists itself (ops.h nlist_count and
 * nlist_fill); callers then pass ecn_graph_setup's set-up to the step. */
int ecn_backend_has_nlist(const ecenet_backend *be);

extern const ecenet_backend ecn_ref_backend;   /* src/ref/ref_backend.c */
#ifdef ECENET_HAVE_OMP
extern const ecenet_backend ecn_omp_backend_f32;   /* src/omp/omp_backend.c, -DOMP_F32 */
extern const ecenet_backend ecn_omp_backend_f64;   /* src/omp/omp_backend.c, -DOMP_F64 */
#endif
#ifdef ECENET_HAVE_CUDA
extern const ecenet_backend ecn_cuda_backend_f32;  /* src/cuda/cuda_backend.cu */
extern const ecenet_backend ecn_cuda_backend_f64;
/* 1 when a CUDA device can be used (src/cuda/cuda_backend.h) */
int ecn_cuda_available(char *why, size_t why_len);
#endif

#endif
