/* Reference backend: fp64, plain loops, one function per op (SPEC.md §3-§14).
 * This is the executable specification: clarity over speed. Every function
 * here is an entry of ecn_ref_backend (include/ecenet/ops.h documents the
 * shared conventions: VJPs accumulate, feature layout [e][m][part][f]). */
#ifndef ECN_REF_H
#define ECN_REF_H

#include <math.h>
#include <stdint.h>
#include "ecenet/ops.h"

#ifndef M_PI /* strict C99 <math.h> does not define it */
#define M_PI 3.14159265358979323846
#endif

/* Offset of block l in a compact Wigner-D row: Σ_{l'<l} (2l'+1)². */
static inline int ref_dblock_offset(int l) { return l * (2 * l - 1) * (2 * l + 1) / 3; }

/* Per-edge bond-frame maps shared by the edge frame and message passing
 * (SPEC §8.2, §13). Rows: b < C from `lo`, b >= C from `hi` (each (C,S));
 * Xe is one edge's (Q,2,F) features. Only valid slots are touched: channel
 * f = b(L+1)+l, cos slot m <-> local column l+m (0 <= m <= min(l,M)),
 * sin slot m <-> local column l-m (1 <= m <= min(l,M)). */
/* Xe (=, or += if accumulate) select(rows · D); invalid slots 0 (or untouched) */
void ref_frame_in(const ecenet_dims *dm, const double *lo, const double *hi, const double *D,
                  double *Xe, int accumulate);
void ref_frame_in_vjp(const ecenet_dims *dm, const double *lo, const double *hi,
                      const double *D, const double *Xbar_e, double *lo_bar, double *hi_bar,
                      double *Dbar);
/* g (B,S) = pack(Xe) · Dᵀ (overwrites g) */
void ref_frame_out(const ecenet_dims *dm, const double *Xe, const double *D, double *g);
void ref_frame_out_vjp(const ecenet_dims *dm, const double *Xe, const double *D,
                       const double *gbar, double *Xbar_e, double *Dbar);

/* activation and its derivative */
double ref_act(int act, double x);
double ref_act_grad(int act, double x);

/* geometry (ref_geometry.c) */
void ref_pair_geom_fwd(int64_t n, ecenet_idx src, ecenet_idx dst, const void *shift,
                       const void *pos, void *d, void *r);
void ref_pair_geom_vjp(int64_t n, ecenet_idx src, ecenet_idx dst, const ecenet_csr *by_src,
                       const ecenet_csr *by_dst, const void *d, const void *dbar, void *pos_bar,
                       void *virial);
void ref_dist_vjp(int64_t n, const void *d, const void *r, const void *rbar, void *dbar);
void ref_radial_fwd(int64_t n, const void *r, double cutoff, int K, int cutoff_type,
                    void *f, void *df);
void ref_radial_vjp(int64_t n, int K, const void *df, const void *fbar, void *rbar);
/* ref_sph.c */
void ref_sph_fwd(int64_t n, int L, const void *d, void *Y, void *dY);
/* ref_ace.c */
void ref_ace_fwd(const ecenet_dims *dm, ecenet_idx nb_src, ecenet_idx nb_dst, ecenet_idx types,
                 const void *f, const void *Y, void *A);
void ref_ace_vjp(const ecenet_dims *dm, ecenet_idx nb_src, ecenet_idx nb_dst, ecenet_idx types,
                 const void *f, const void *df, const void *Y, const void *dY, const void *d,
                 const void *r, const void *Abar, void *dbar);
void ref_embed_fwd(const ecenet_dims *dm, ecenet_idx types, const void *W, const void *A,
                   void *A_emb);
void ref_embed_vjp(const ecenet_dims *dm, ecenet_idx types, const void *W,
                   const void *A_emb_bar, void *Abar);
/* ref_wigner.c */
void ref_wigner_fwd(int64_t E, int L, const void *cg, const void *d, const void *r, void *D);
void ref_wigner_vjp(int64_t E, int L, const void *cg, const void *d, const void *r,
                    const void *D, const void *Dbar, void *dbar);
/* ref_edge_frame.c */
void ref_edge_frame_fwd(const ecenet_dims *dm, ecenet_idx edge_i, ecenet_idx edge_j,
                        const void *A_emb, const void *D, void *X);
void ref_edge_frame_vjp(const ecenet_dims *dm, ecenet_idx edge_i, ecenet_idx edge_j,
                        const void *A_emb, const void *D, const void *Xbar, void *A_emb_bar,
                        void *Dbar);
void ref_dist_embed_fwd(const ecenet_dims *dm, int K, const void *fr, const void *V,
                        const void *X, void *Y);
void ref_dist_embed_vjp(const ecenet_dims *dm, int K, const void *fr, const void *V,
                        const void *X, const void *Ybar, void *Xbar, void *frbar);
/* ref_layers.c */
void ref_linear_fwd(int64_t E, const ecenet_linear_params *p, ecenet_idx tsrc, ecenet_idx ttgt,
                    const void *X, void *Y);
void ref_linear_vjp(int64_t E, const ecenet_linear_params *p, ecenet_idx tsrc, ecenet_idx ttgt,
                    const void *Ybar, void *Xbar);
void ref_realspace_fwd(int64_t E, const ecenet_realspace_params *p, ecenet_idx tsrc,
                       ecenet_idx ttgt, const void *X, void *Y);
void ref_realspace_vjp(int64_t E, const ecenet_realspace_params *p, ecenet_idx tsrc,
                       ecenet_idx ttgt, const void *X, const void *Ybar, void *Xbar);
void ref_add(int64_t n, const void *X, void *Y);
/* ref_mp.c */
void ref_mp_pack_unrotate_fwd(const ecenet_dims *dm, const void *X, const void *D, void *g,
                              void *Xs);
void ref_mp_pack_unrotate_vjp(const ecenet_dims *dm, const void *X, const void *D,
                              const void *gbar, void *Xbar, void *Dbar);
void ref_mp_weight_fwd(const ecenet_dims *dm, int K, ecenet_idx tsrc, ecenet_idx ttgt,
                       const void *fr, const void *W_msg, void *w);
void ref_mp_weight_vjp(const ecenet_dims *dm, int K, ecenet_idx tsrc, ecenet_idx ttgt,
                       const void *W_msg, const void *wbar, void *frbar);
void ref_mp_scatter_fwd(const ecenet_dims *dm, ecenet_idx edge_j, const void *g, const void *w,
                        void *Delta);
void ref_mp_scatter_vjp(const ecenet_dims *dm, ecenet_idx edge_j, const void *g, const void *w,
                        const void *Delta_bar, void *gbar, void *wbar);
void ref_mp_rotate_unpack_fwd(const ecenet_dims *dm, ecenet_idx edge_i, const void *Delta,
                              const void *D, void *X);
void ref_mp_rotate_unpack_vjp(const ecenet_dims *dm, ecenet_idx edge_i, const void *Delta,
                              const void *D, const void *Xbar, void *Delta_bar, void *Dbar);
/* ref_readout.c */
#define REF_MLP_WIDTH 4096 /* widest MLP layer the reference supports (checked at ctx creation) */
int ref_mlp_hidden_size(const ecenet_mlp_params *p);
void ref_mlp_row_fwd(const ecenet_mlp_params *p, int64_t e, ecenet_idx tsrc, ecenet_idx ttgt,
                     const double *x, double *Hrow, double *out);
void ref_mlp_row_vjp(const ecenet_mlp_params *p, int64_t e, ecenet_idx tsrc, ecenet_idx ttgt,
                     const double *Hrow, const double *outbar, double *xbar);
void ref_mlp_fwd(const ecenet_dims *dm, const ecenet_mlp_params *p, ecenet_idx tsrc,
                 ecenet_idx ttgt, const void *X, void *H, void *y);
void ref_mlp_vjp(const ecenet_dims *dm, const ecenet_mlp_params *p, ecenet_idx tsrc,
                 ecenet_idx ttgt, const void *H, const void *ybar, void *Xbar);
void ref_energy_fwd(int64_t E, int K, const void *y, const void *fr, void *eps);
void ref_energy_vjp(int64_t E, int K, const void *y, const void *fr, void *ybar, void *frbar);
double ref_sum(int64_t n, const void *x);
/* ref_mp.c (research) */
void ref_mp_attn_weight_fwd(const ecenet_dims *dm, int n_heads, int l_attention, int mode,
                            int msg_env, ecenet_idx edge_j, const void *scores, const void *fc,
                            void *a, void *w, void *tmp);
void ref_mp_attn_weight_vjp(const ecenet_dims *dm, int n_heads, int l_attention, int mode,
                            int msg_env, ecenet_idx edge_j, const void *scores, const void *fc,
                            const void *a, const void *wbar, void *tmp, void *sbar, void *fcbar);
/* ref_film.c */
void ref_film_fwd(const ecenet_dims *dm, const ecenet_mlp_params *p, const void *ea,
                  const void *eb, int P, int n_rbf, ecenet_idx tsrc, ecenet_idx ttgt,
                  const void *fr, void *H, void *gamma);
void ref_film_vjp(const ecenet_dims *dm, const ecenet_mlp_params *p, int P, int n_rbf,
                  ecenet_idx tsrc, ecenet_idx ttgt, const void *H, const void *gamma_bar,
                  void *frbar);
void ref_chan_scale_fwd(int64_t E, int Q, int Fw, const void *s, const void *X, void *Y);
void ref_chan_scale_vjp(int64_t E, int Q, int Fw, const void *s, const void *X, const void *Ybar,
                        void *Xbar, void *sbar);

#endif
