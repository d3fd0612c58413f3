/* The cuda backend's op families: each file fills its vtable entries for one
 * real type (explicitly instantiated for float and double in that file). */
#ifndef ECN_CUDA_OPS_CUH
#define ECN_CUDA_OPS_CUH

#include <stdint.h>
#include <cublas_v2.h>
#include "ecenet/ops.h"

namespace ecn_cu {
template <typename T> void fill_geometry(ecenet_backend &b); /* cuda_geometry.cu */
template <typename T> void fill_wigner(ecenet_backend &b);   /* cuda_wigner.cu */
template <typename T> void fill_frame(ecenet_backend &b);    /* cuda_frame.cu */
template <typename T> void fill_mp(ecenet_backend &b);       /* cuda_mp.cu */
template <typename T> void fill_layers(ecenet_backend &b);   /* cuda_layers.cu */
template <typename T> void fill_realspace(ecenet_backend &b); /* cuda_realspace.cu */
template <typename T> void fill_readout(ecenet_backend &b);  /* cuda_readout.cu */
template <typename T> void fill_nlist(ecenet_backend &b);    /* cuda_nlist.cu */

/* cuda_layers.cu: the linears' GEMMs, cuBLAS's strided-batched call with
 * op(B) = tb, op(A) = N (gemm_sb's arguments, alpha 1): C (=|+=) A·op(B)ᵀ
 * per batch, beta 0 or 1. Strict fp32 with tb = T (B: N×K, rows of K) runs
 * the split-TF32 kernel where it applies (cuda_linear_x3.cuh), else cuBLAS;
 * Bs (optional): B's high parts as linear_split makes them (at B's
 * strides), its low parts lo further on, which the kernel then need not
 * split itself (the same results, measured 10-14% faster). */
template <typename T>
void gemm_lin(cublasOperation_t tb, int N, int64_t E, int K, const T *B, int ldb, long long sB,
              const T *A, int lda, long long sA, T beta, T *C, int ldc, long long sC, int batch,
              const T *Bs = nullptr, long long lo = 0);

/* cuda_realspace.cu: the RealSpace halves of the fused layer entries
 * (cuda_layers.cu). rs_layer_fits: the sin0_zero layer kernel applies, which
 * then also adds the linear's bias and writes Z's sin m = 0 slot (zeros), so
 * the linear leaves both to it; layer_rs_fwd: X += RealSpace(Z), with that
 * epilogue when z0; layer_rs_vjp: tmp = RealSpace_vjp(Z, Xbar), overwriting
 * tmp. */
template <typename T>
bool rs_layer_fits(const ecenet_realspace_params *p, const void *bias, const void *Z,
                   const void *X);
template <typename T>
void layer_rs_fwd(int64_t E, const ecenet_realspace_params *rs, ecenet_idx tsrc, ecenet_idx ttgt,
                  const T *bias, T *Z, T *X, bool z0);
template <typename T>
void layer_rs_vjp(int64_t E, const ecenet_realspace_params *rs, ecenet_idx tsrc, ecenet_idx ttgt,
                  const T *Z, const T *Xbar, T *tmp);

/* cuda_layer_tc.cu (and cuda_layer_wg.cu): the fused layer forward on
 * tensor cores (fp32: TF32 or split TF32); false (nothing done) where it
 * does not apply */
bool layer_tc_fwd(int64_t E, const ecenet_linear_params *lin, const ecenet_realspace_params *rs,
                  float *X, float *Z);
/* the fused layer VJP, Xbar += Linearᵀ(RealSpace_vjp(Z, Xbar)), on wgmma
 * (TF32, mode 4); false (nothing done) where it does not apply */
bool layer_tc_vjp(int64_t E, const ecenet_linear_params *lin, const ecenet_realspace_params *rs,
                  const float *Z, float *Xb);
/* Xbar += Ybar·W (every slot; not the per-type corrections) in split TF32 */
bool lin_tc_vjp(int64_t E, const ecenet_linear_params *p, const float *Yb, float *Xb);
/* cuda_linear_frame.cu: the first layer's linear (frame_nl) on the edge
 * frame's valid columns; false (nothing done) where it does not apply */
template <typename T>
bool lin_frame_fwd(int64_t E, const ecenet_linear_params *p, const void *X, void *Y);
template <typename T>
bool lin_frame_vjp(int64_t E, const ecenet_linear_params *p, const void *Yb, void *Xb);
} // namespace ecn_cu

#endif
