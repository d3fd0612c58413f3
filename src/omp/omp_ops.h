/* OpenMP + BLIS backend (fp32 and fp64 from one source, see omp_real.h).
 * Every function here is an entry of ecn_omp_backend_f32 / _f64 and mirrors
 * the reference op of the same name (src/ref/ref.h): same arguments, same
 * conventions (ops.h: forward overwrites, VJP accumulates, [e][m][part][f]).
 *
 * Threads: OpenMP over edges, edge tiles or atoms; per-atom reductions loop
 * over the atom's entries in CSR order (ecenet_dims groupings), so results do
 * not depend on the number of threads (fp64: bitwise). BLIS runs
 * single-threaded inside each tile. */
#ifndef ECN_OMP_OPS_H
#define ECN_OMP_OPS_H

#include "omp_real.h"

/* ---- shared per-edge bond-frame maps (omp_edge_frame.c; used by omp_mp.c) ----
 * The maps of ref_frame_in/out (ref.h), vectorised over the base channel b.
 * Atom rows are read transposed: T[s][c] (row stride ldt); lo_t supplies
 * b < C, hi_t b >= C. Xe is one edge's (Q,2,F) block; only valid slots are
 * touched. buf: per-thread scratch of 2B reals. */
void OMP_FN(omp_transpose_rows)(int64_t n, int W, int S, const real *A, real *T);
/* Xe (=, or += if accumulate) select(rows · D) */
void OMP_FN(omp_frame_in_t)(const ecenet_dims *dm, const real *lo_t, const real *hi_t,
                            int64_t ldt, const real *D, real *Xe, int accumulate, real *buf);
/* Dbar_e += ∂/∂D of <Xbar_e, frame_in(rows, D)> */
void OMP_FN(omp_frame_in_vjp_D_t)(const ecenet_dims *dm, const real *lo_t, const real *hi_t,
                                  int64_t ldt, const real *Xbar_e, real *Dbar_e, real *buf);
/* Tbar[s][b - b0] += ∂/∂rows[b][s] for b in [b0, b1) (row stride ldt) */
void OMP_FN(omp_frame_in_vjp_rows_t)(const ecenet_dims *dm, int b0, int b1, const real *D,
                                     const real *Xbar_e, real *Tbar, int64_t ldt, real *buf);
/* gt (S x B) = (pack(Xe) · Dᵀ)ᵀ (overwritten) */
void OMP_FN(omp_frame_out_t)(const ecenet_dims *dm, const real *Xe, const real *D, real *gt,
                             real *buf);
/* Xbar_e += unpack(ḡ · D), Dbar += ḡᵀ·pack(Xe); gbt (S x B) is ḡ transposed */
void OMP_FN(omp_frame_out_vjp_t)(const ecenet_dims *dm, const real *Xe, const real *D,
                                 const real *gbt, real *Xbar_e, real *Dbar, real *buf);

/* ---- shared MLP on a tile of rows (omp_readout.c; used by omp_film.c) ----
 * x (nt rows at stride ldx) -> out (nt rows at stride ldo); pre-activations of
 * the hidden layers to H rows (stride nh) when H is not NULL. scr: scratch of
 * omp_mlp_tile_scratch(p, nt) bytes (64-byte aligned). Rows e0.. of the tile
 * select the type corrections. a_next: one more row follows the tile's input
 * rows (x, resp. outbar) in memory (omp_gemm). */
size_t OMP_FN(omp_mlp_tile_scratch)(const ecenet_mlp_params *p, int nt);
void OMP_FN(omp_mlp_tile_fwd)(const ecenet_mlp_params *p, int64_t e0, int nt, ecenet_idx tsrc,
                              ecenet_idx ttgt, const real *x, int64_t ldx, real *H, int64_t nh,
                              real *out, int64_t ldo, char *scr, int a_next);
/* xb (nt x dims[0], overwritten) = ∂/∂x of Σ outbar·out, from the saved H
 * (needed when n_layers > 1) */
void OMP_FN(omp_mlp_tile_vjp)(const ecenet_mlp_params *p, int64_t e0, int nt, ecenet_idx tsrc,
                              ecenet_idx ttgt, const real *H, int64_t nh, const real *outbar,
                              int64_t ldob, real *xb, char *scr, int a_next);
int OMP_FN(omp_mlp_hidden_size)(const ecenet_mlp_params *p);

/* ---- the ops ---- */
/* omp_geometry.c */
void OMP_FN(omp_pair_geom_fwd)(int64_t n, ecenet_idx src, ecenet_idx dst, const void *shift,
                               const void *pos, void *d, void *r);
void OMP_FN(omp_pair_geom_vjp)(int64_t n, ecenet_idx src, ecenet_idx dst,
                               const ecenet_csr *by_src, const ecenet_csr *by_dst,
                               const void *d, const void *dbar, void *pos_bar, void *virial);
void OMP_FN(omp_dist_vjp)(int64_t n, const void *d, const void *r, const void *rbar,
                          void *dbar);
void OMP_FN(omp_radial_fwd)(int64_t n, const void *r, double cutoff, int K, int cutoff_type,
                            void *f, void *df);
void OMP_FN(omp_radial_vjp)(int64_t n, int K, const void *df, const void *fbar, void *rbar);
/* omp_sph.c */
void OMP_FN(omp_sph_fwd)(int64_t n, int L, const void *d, void *Y, void *dY);
/* omp_ace.c */
void OMP_FN(omp_ace_fwd)(const ecenet_dims *dm, ecenet_idx nb_src, ecenet_idx nb_dst,
                         ecenet_idx types, const void *f, const void *Y, void *A);
void OMP_FN(omp_ace_vjp)(const ecenet_dims *dm, ecenet_idx nb_src, ecenet_idx nb_dst,
                         ecenet_idx types, const void *f, const void *df, const void *Y,
                         const void *dY, const void *d, const void *r, const void *Abar,
                         void *dbar);
void OMP_FN(omp_embed_fwd)(const ecenet_dims *dm, ecenet_idx types, const void *W,
                           const void *A, void *A_emb);
void OMP_FN(omp_embed_vjp)(const ecenet_dims *dm, ecenet_idx types, const void *W,
                           const void *A_emb_bar, void *Abar);
/* omp_wigner.c */
void OMP_FN(omp_wigner_fwd)(int64_t E, int L, const void *cg, const void *d, const void *r,
                            void *D);
void OMP_FN(omp_wigner_vjp)(int64_t E, int L, const void *cg, const void *d, const void *r,
                            const void *D, const void *Dbar, void *dbar);
/* omp_edge_frame.c */
void OMP_FN(omp_edge_frame_fwd)(const ecenet_dims *dm, ecenet_idx edge_i, ecenet_idx edge_j,
                                const void *A_emb, const void *D, void *X);
void OMP_FN(omp_edge_frame_vjp)(const ecenet_dims *dm, ecenet_idx edge_i, ecenet_idx edge_j,
                                const void *A_emb, const void *D, const void *Xbar,
                                void *A_emb_bar, void *Dbar);
void OMP_FN(omp_dist_embed_fwd)(const ecenet_dims *dm, int K, const void *fr, const void *V,
                                const void *X, void *Y);
void OMP_FN(omp_dist_embed_vjp)(const ecenet_dims *dm, int K, const void *fr, const void *V,
                                const void *X, const void *Ybar, void *Xbar, void *frbar);
/* omp_layers.c */
void OMP_FN(omp_linear_fwd)(int64_t E, const ecenet_linear_params *p, ecenet_idx tsrc,
                            ecenet_idx ttgt, const void *X, void *Y);
void OMP_FN(omp_linear_vjp)(int64_t E, const ecenet_linear_params *p, ecenet_idx tsrc,
                            ecenet_idx ttgt, const void *Ybar, void *Xbar);
void OMP_FN(omp_realspace_fwd)(int64_t E, const ecenet_realspace_params *p, ecenet_idx tsrc,
                               ecenet_idx ttgt, const void *X, void *Y);
void OMP_FN(omp_realspace_vjp)(int64_t E, const ecenet_realspace_params *p, ecenet_idx tsrc,
                               ecenet_idx ttgt, const void *X, const void *Ybar, void *Xbar);
void OMP_FN(omp_add)(int64_t n, const void *X, void *Y);
void OMP_FN(omp_layer_fwd)(int64_t E, const ecenet_linear_params *lin,
                           const ecenet_realspace_params *rs, ecenet_idx tsrc, ecenet_idx ttgt,
                           void *X, void *Z);
void OMP_FN(omp_layer_vjp)(int64_t E, const ecenet_linear_params *lin,
                           const ecenet_realspace_params *rs, ecenet_idx tsrc, ecenet_idx ttgt,
                           const void *Z, void *Xbar, void *tmp);
/* omp_mp.c */
void OMP_FN(omp_mp_pack_unrotate_fwd)(const ecenet_dims *dm, const void *X, const void *D,
                                      void *g, void *Xs);
void OMP_FN(omp_mp_pack_unrotate_vjp)(const ecenet_dims *dm, const void *X, const void *D,
                                      const void *gbar, void *Xbar, void *Dbar);
void OMP_FN(omp_mp_weight_fwd)(const ecenet_dims *dm, int K, ecenet_idx tsrc, ecenet_idx ttgt,
                               const void *fr, const void *W_msg, void *w);
void OMP_FN(omp_mp_weight_vjp)(const ecenet_dims *dm, int K, ecenet_idx tsrc, ecenet_idx ttgt,
                               const void *W_msg, const void *wbar, void *frbar);
void OMP_FN(omp_mp_scatter_fwd)(const ecenet_dims *dm, ecenet_idx edge_j, const void *g,
                                const void *w, void *Delta);
void OMP_FN(omp_mp_scatter_vjp)(const ecenet_dims *dm, ecenet_idx edge_j, const void *g,
                                const void *w, const void *Delta_bar, void *gbar, void *wbar);
void OMP_FN(omp_mp_rotate_unpack_fwd)(const ecenet_dims *dm, ecenet_idx edge_i,
                                      const void *Delta, const void *D, void *X);
void OMP_FN(omp_mp_rotate_unpack_vjp)(const ecenet_dims *dm, ecenet_idx edge_i,
                                      const void *Delta, const void *D, const void *Xbar,
                                      void *Delta_bar, void *Dbar);
void OMP_FN(omp_mp_attn_weight_fwd)(const ecenet_dims *dm, int n_heads, int l_attention,
                                    int mode, int msg_env, ecenet_idx edge_j,
                                    const void *scores, const void *fc, void *a, void *w,
                                    void *tmp);
void OMP_FN(omp_mp_attn_weight_vjp)(const ecenet_dims *dm, int n_heads, int l_attention,
                                    int mode, int msg_env, ecenet_idx edge_j,
                                    const void *scores, const void *fc, const void *a,
                                    const void *wbar, void *tmp, void *sbar, void *fcbar);
/* omp_film.c */
void OMP_FN(omp_film_fwd)(const ecenet_dims *dm, const ecenet_mlp_params *p, const void *ea,
                          const void *eb, int P, int n_rbf, ecenet_idx tsrc, ecenet_idx ttgt,
                          const void *fr, void *H, void *gamma);
void OMP_FN(omp_film_vjp)(const ecenet_dims *dm, const ecenet_mlp_params *p, int P, int n_rbf,
                          ecenet_idx tsrc, ecenet_idx ttgt, const void *H,
                          const void *gamma_bar, void *frbar);
void OMP_FN(omp_chan_scale_fwd)(int64_t E, int Q, int Fw, const void *s, const void *X,
                                void *Y);
void OMP_FN(omp_chan_scale_vjp)(int64_t E, int Q, int Fw, const void *s, const void *X,
                                const void *Ybar, void *Xbar, void *sbar);
/* omp_readout.c */
void OMP_FN(omp_mlp_fwd)(const ecenet_dims *dm, const ecenet_mlp_params *p, ecenet_idx tsrc,
                         ecenet_idx ttgt, const void *X, void *H, void *y);
void OMP_FN(omp_mlp_vjp)(const ecenet_dims *dm, const ecenet_mlp_params *p, ecenet_idx tsrc,
                         ecenet_idx ttgt, const void *H, const void *ybar, void *Xbar);
void OMP_FN(omp_energy_fwd)(int64_t E, int K, const void *y, const void *fr, void *eps);
void OMP_FN(omp_energy_vjp)(int64_t E, int K, const void *y, const void *fr, void *ybar,
                            void *frbar);
double OMP_FN(omp_sum)(int64_t n, const void *x);

#endif
