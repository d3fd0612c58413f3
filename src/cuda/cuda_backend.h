/* CUDA backend: the two vtable instances and the few controls the backend
 * exposes to C (tests, bench drivers). C linkage; implemented in
 * src/cuda/cuda_backend.cu. */
#ifndef ECN_CUDA_BACKEND_H
#define ECN_CUDA_BACKEND_H

#include <stddef.h>
#include "ecenet/ops.h"

#ifdef __cplusplus
extern "C" {
#endif

extern const ecenet_backend ecn_cuda_backend_f32;
extern const ecenet_backend ecn_cuda_backend_f64;

/* 1 when a CUDA device can be used; otherwise 0 and, if why is not NULL, the
 * reason (e.g. "no CUDA device: cudaGetDeviceCount: no CUDA-capable device
 * is detected"). Does not create a context beyond what the runtime needs. */
int ecn_cuda_available(char *why, size_t why_len);

/* TF32 tensor cores for the fp32 GEMMs (default: env ECENET_TF32=1, read
 * once). Returns the previous setting. */
int ecn_cuda_set_tf32(int on);
int ecn_cuda_tf32(void);

/* The strict-fp32 linears' GEMM engine (not TF32, not fp64): 0 cuBLAS
 * SGEMM; 1 the split-TF32 kernel (src/cuda/cuda_linear_x3.cuh: three TF32
 * tensor-core products per multiply-add, fp32-class accuracy, one pass over
 * the operands) wherever its shape and alignment conditions hold, cuBLAS
 * elsewhere. Default: env ECENET_FP32_GEMM=sgemm|x3, read once, else
 * ECN_CUDA_FP32_GEMM_DEFAULT. Returns the previous mode. */
#define ECN_CUDA_FP32_GEMM_DEFAULT 1
int ecn_cuda_set_fp32_gemm(int mode);
/* how many GEMMs the split-TF32 kernel has run (tests check that the path
 * they mean to test really ran) */
unsigned long long ecn_cuda_fp32_gemm_x3_runs(void);
/* of those, how many ran on weights split beforehand (ops.h w_split) */
unsigned long long ecn_cuda_fp32_gemm_x3_pre_runs(void);

/* RealSpace launch configuration (rows per block, warps per block; default
 * env ECENET_RS_BLOCK / ECENET_RS_WARPS, read once, else 512 / 4). A row is
 * one thread's unit of work: one edge's V consecutive channels in the vector
 * kernels (V = 4 fp32, 2 fp64; see ecn_cuda_set_rs_vector), one (edge,
 * channel) in the scalar ones; each thread does rows / (32*warps) rows.
 * rows must be a multiple of 32*warps, warps <= 16; returns 0, or -1
 * (unchanged) otherwise. */
int ecn_cuda_set_rs_launch(int rows, int warps);

/* RealSpace vector kernels (internal, for side-by-side measurement). A
 * vector kernel's row is V = 16/sizeof(real) consecutive channels, moved
 * with 16-byte loads and stores; it applies where Q == 4, F % V == 0 and the
 * tensors are 16-byte aligned (elsewhere the scalar kernels run). on: 0 the
 * scalar kernels only; 1 (default; any value above 0) the vector kernels
 * wherever they apply; below 0 only asks. Same results in every mode (the same arithmetic per
 * element, in the same order), except on a grid_sym layer, where the vector
 * kernels fold the grid (ECENET_RS_SYM) and the scalar ones do not.
 * Default: env ECENET_RS_VECTOR (0, 1; read once), else 1. Returns the
 * previous setting. Implemented in cuda_realspace.cu. */
int ecn_cuda_set_rs_vector(int on);

/* The RealSpace kernel of the fused layer entries alone, for measurements
 * (tools/device/cuda_bench.c): which = 0, what layer_fwd runs after its
 * GEMMs (X += RealSpace(Z), and where the fused sin0_zero kernel applies
 * also the bias on Z's cos m = 0 slot and zeros in its sin m = 0 slot; bias
 * may be NULL, and is ignored elsewhere); which = 1,
 * what layer_vjp runs before its GEMMs (tmp = RealSpace_vjp(Z, X), X being
 * the layer's Xbar). No edge types (the affine's per-type terms must be
 * NULL). Implemented in cuda_realspace.cu. */
void ecn_cuda_rs_layer_kernels(int prec, int which, int64_t E, const ecenet_realspace_params *p,
                               const void *bias, void *Z, void *X, void *tmp);

/* The tensor-core layer kernels (cuda_layer_tc.cu, cuda_layer_wg.cu): the
 * fused layer forward (one GEMM kernel with the RealSpace + residual
 * epilogue), in split TF32 the linear VJP GEMM, and on wgmma the fused
 * layer VJP (the RealSpace VJP feeding the GEMM in one kernel). mode: 0 off (cuBLAS
 * GEMMs and the RealSpace kernel); 1 the fused forward on mma.sync for
 * fp32 with TF32; 2 also strict fp32 through split TF32 (three MMAs per
 * product, near fp32 but measurably less accurate than SGEMM: fused
 * forward and VJP GEMM); 3 the
 * fused forward on wgmma (cuda_layer_wg.cu) for fp32 with TF32 on
 * sin0_zero layers with F = 128 or 256, where ecn_cuda_layer_wg_available
 * (otherwise as 0); 4 the fused layer VJP on wgmma, on the same layers
 * given the transposed weights (ecenet_linear_params.w_t, which the engine
 * uploads for cuda) (the forward as 0). fp64 never uses them. Default: env ECENET_LAYER_TC
 * (0-4; read once), else ECN_CUDA_LAYER_TC_DEFAULT = 0: on the H200 and
 * H100 they are slower than cuBLAS + RealSpace (doc/performance.md), so
 * they are opt-in until they win. Returns the previous mode. */
#define ECN_CUDA_LAYER_TC_DEFAULT 0
int ecn_cuda_set_layer_tc(int mode);
/* how many times the tensor-core layer kernel was launched (tests check
 * that the path they mean to test really ran) */
unsigned long long ecn_cuda_layer_tc_launches(void);
/* whether the wgmma kernels of modes 3 and 4 can run here: built for
 * sm_90a (configure's sm_90) and on a compute capability 9.0 GPU (each
 * also checks its own shared memory and cluster when launched) */
int ecn_cuda_layer_wg_available(void);

/* Staging of the bond-frame map kernels (cuda_frame.cu: edge frame, pack-
 * unrotate, rotate-unpack and their VJPs): 1 copies global to shared memory
 * with cp.async (sm_80+; the same results bit for bit), 0 through registers.
 * Default: env ECENET_FRAME_ASYNC (read once), else 1 (measured faster on an
 * H100, doc/performance.md). Returns the previous setting. */
int ecn_cuda_set_frame_async(int on);
/* how many map-kernel launches staged with cp.async (for the tests) */
unsigned long long ecn_cuda_frame_async_launches(void);
/* The per-atom sums of the edge-frame and rotate-unpack VJPs
 * (launch_frame_atom): 1 runs the register-blocked kernel for l_max <= 4,
 * 0 the general one (the same sums in the same order). Default: env
 * ECENET_FRAME_ATOM_RB (read once), else 1. Returns the previous setting. */
int ecn_cuda_set_frame_atom_rb(int on);
/* how many launches ran the register-blocked kernel (for the tests) */
unsigned long long ecn_cuda_frame_atom_rb_launches(void);

/* how many linear calls ran on the edge frame's valid columns only
 * (ecenet_linear_params.frame_nl, cuda_linear_frame.cu; tests check that the
 * path they mean to test really ran) */
unsigned long long ecn_cuda_frame_pack_runs(void);
/* how many RealSpace launches ran the folded kernels of a grid_sym layer
 * (cuda_realspace.cu, ECENET_RS_SYM; tests check that the default path they
 * mean to test really ran) */
unsigned long long ecn_cuda_rs_sym_runs(void);
/* whether the folded kernels run on grid_sym layers (env ECENET_RS_SYM, not
 * "0"; read once) */
int ecn_cuda_rs_sym_on(void);

/* The first CUDA / cuBLAS error the backend saw (sticky): 0 if none, else a
 * nonzero code with a message in buf. Once an error is recorded, download
 * writes NaN so that no silently wrong result leaves the backend. */
int ecn_cuda_error(char *buf, size_t len);
void ecn_cuda_clear_error(void);

/* Warps per atom in the device neighbour search (internal, for the tests:
 * the automatic choice gives small systems many warps and systems over
 * 64 x SMs atoms one, so a test forces np to cover both). np <= 0: the
 * automatic choice (default); otherwise np, capped by the stencil size and
 * 32 as the automatic one is. Returns the previous setting. Implemented in
 * cuda_nlist.cu. */
int ecn_cuda_set_nlist_warps(int np);

/* Bytes of device memory currently held / at most held through the
 * backend's alloc hook since the start (or the last reset). */
size_t ecn_cuda_bytes_in_use(void);
size_t ecn_cuda_peak_bytes(void);
void ecn_cuda_reset_peak(void);

#ifdef __cplusplus
}
#endif
#endif
