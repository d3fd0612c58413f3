/*
 * The op vtable: every numerical step of an ECENet evaluation, forward and
 * VJP, as one entry per op. Installed for tests and bindings; users need only
 * <ecenet.h>. ECENET_ABI_VERSION does not cover this header: while the
 * library is 0.x its entries may change (an entry gains an argument, an
 * entry or a field is added), so build against the header of the library
 * you link.
 *
 * Conventions shared by every entry:
 *  - Real arrays (`void *`) are in the backend's memory and precision
 *    (double for ECENET_F64, float for ECENET_F32). Index arrays are int32_t.
 *  - Forward entries overwrite their outputs. VJP entries ACCUMULATE (+=)
 *    into every gradient output; the caller zeroes them first.
 *  - Ops never allocate.
 *  - Sizes (doc/design.md): N atoms, E edges, P neighbour pairs, T types,
 *    R = n_max, L = l_max, M = m_max, C = embed_dim, B = 2C, F = B(L+1)
 *    features per (m, part), S = (L+1)², Q = M+1 angular slots, G = n_grid,
 *    ND = Σ_l (2l+1)² compact Wigner entries per edge.
 *  - Edge features: X[e][m][part][f], part 0 = cos, 1 = sin, f fastest;
 *    element (e, m, p, f) at ((e*Q + m)*2 + p)*F + f.
 *  - Compact Wigner-D: per edge ND values; block l starts at Σ_{l'<l}(2l'+1)²
 *    and is row-major [global m][local m], m = -l..l.
 *  - Channel f = b*(L+1) + l, b = side*C + κ (side 0 = source atom edge_i).
 */
#ifndef ECENET_OPS_H
#define ECENET_OPS_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

enum { ECENET_CUTOFF_COSINE = 0, ECENET_CUTOFF_POLY = 1 };
enum {
    ECENET_ACT_SILU = 0, ECENET_ACT_RELU = 1, ECENET_ACT_TANH = 2,
    ECENET_ACT_GELU = 3, ECENET_ACT_IDENTITY = 4
};

/* research MP aggregation (same values as the model's mp_type) */
enum { ECENET_ATTN_SUM = 1, ECENET_ATTN_SOFTMAX = 2 };

#define ECENET_MLP_MAX 8

/* Entries of a pair list grouped by atom: the entries of atom a are
 * idx[ptr[a]] .. idx[ptr[a+1]-1], in increasing order (a stable grouping).
 * Backends use them for deterministic per-atom reductions without atomics. */
typedef struct {
    const int32_t *ptr;   /* (N+1) */
    const int32_t *idx;   /* (n entries) */
} ecenet_csr;

/* Sizes of a step, and the groupings of its two pair lists (backend memory). */
typedef struct {
    int64_t N, E, P;
    int T, R, L, M, C, B, F, S, Q, G, ND;
    ecenet_csr e_src, e_dst;   /* edges grouped by edge_i / by edge_j */
    ecenet_csr p_src, p_dst;   /* neighbour pairs grouped by nb_src / by nb_dst */
} ecenet_dims;

/* Equivariant linear: Y[e,m,p,o] = Σ_i X[e,m,p,i]·W_eff(e)[m,o,i] + [m=0,p=0]·bias[o],
 * W_eff(e) = w + w_src[t_src(e)] + w_tgt[t_tgt(e)] (corrections optional).
 * Zero-initialise the parameter structs before filling them: optional
 * fields (NULL / 0) are added over time. */
typedef struct {
    int fin, fout, Q, T;
    const void *w;               /* (Q, fout, fin) */
    const void *bias;            /* (fout) or NULL */
    const void *w_src, *w_tgt;   /* (T, Q, fout, fin) or NULL */
    /* w transposed, (Q, fin, fout), for the VJP's product; set by the engine
     * only for a backend with linear_w_t (else NULL) */
    const void *w_t;
    /* Nonzero (= L+1) only on the first linear of the layer stack, set by the
     * engine where that linear reads the edge frame's output unchanged (no
     * distance embedding or FiLM in between) and M <= L: X then has the
     * frame's validity pattern (SPEC §8.2): in slot (m, part) the channel
     * f = b·frame_nl + l is exactly zero where l < m, and the sin m = 0 slot
     * is zero. linear_fwd may skip those input columns; linear_vjp (and
     * layer_vjp) need to update Xb only at the valid positions (l >= m, not
     * sin m = 0) and may leave the others as they were: nothing reads them
     * (the edge frame VJP reads the valid slots only). 0: no assumption (ref
     * and omp compute every column either way). */
    int frame_nl;
    /* w and w_t split for the backend's split-TF32 GEMM, (2, Q, fout, fin)
     * and (2, Q, fin, fout): the high parts, then the low parts, as the
     * backend's linear_split makes them; set by the engine only for a
     * backend with linear_split (else NULL: such a backend then splits the
     * weights inside its GEMM, with the same results). */
    const void *w_split, *w_t_split;
} ecenet_linear_params;

/* RealSpace nonlinearity on the θ grid (SPEC §11). */
typedef struct {
    int F, Q, G, T, act;
    const void *cos_synth, *sin_synth;        /* (Q, G) */
    const void *cos_analysis, *sin_analysis;  /* (G, Q) */
    const void *scale, *shift;                /* (F) or NULL (= 1, 0) */
    const void *scale_src, *scale_tgt;        /* (T, F) or NULL */
    const void *shift_src, *shift_tgt;        /* (T, F) or NULL */
    /* Nonzero: the sin m = 0 slot is structurally zero in this layer. Its
     * table entries (sin_synth[0][·], sin_analysis[·][0]) are exactly zero,
     * so no RealSpace output depends on that slot of its inputs and its sin
     * m = 0 outputs are zero, and the inputs of the fused layer entries hold
     * zeros there (true in every model: the engine sets it from the tables).
     * The fused layer entries may then skip the slot: layer_fwd still writes
     * Z's as zero and leaves X's unchanged, layer_vjp leaves Xbar's unchanged
     * (and tmp's, scratch, zero or untouched). realspace_vjp may skip reading its inputs'
     * sin m = 0 slot (it meets only zero table entries: the same result for
     * finite inputs) and, when accumulating, leave that output slot (+= 0)
     * unchanged. 0: no assumption (ref and omp compute every slot either
     * way). */
    int sin0_zero;
    /* Nonzero: the grid is mirror-symmetric, θ_{G-k} = -θ_k (G odd): the
     * cos tables are even and the sin tables odd under k -> G - k, to within
     * a few ulp of float64 (ecn_rs_table_flags; the engine sets it from the
     * tables). A backend may then evaluate each pair (k, G - k) from row k
     * of the tables alone: the synthesis sums c (cos) and s (sin) once for
     * f = c ± s, the analysis on the pair's even and odd parts. The result
     * differs from the unfolded sums by rounding only. 0: no assumption. */
    int grid_sym;
} ecenet_realspace_params;

/* Readout MLP: dims[0] = F -> ... -> dims[n_layers]; act between layers. */
typedef struct {
    int n_layers, T, act;
    int dims[ECENET_MLP_MAX + 1];
    const void *w[ECENET_MLP_MAX];       /* (dims[k+1], dims[k]) */
    const void *b[ECENET_MLP_MAX];       /* (dims[k+1]) */
    const void *w_src[ECENET_MLP_MAX];   /* (T, dims[k+1], dims[k]) or NULL */
    const void *w_tgt[ECENET_MLP_MAX];
} ecenet_mlp_params;

typedef const int32_t *ecenet_idx;

/* The neighbour search on a device (optional entries nlist_count/fill): the
 * host's cell-list set-up (src/core/graph_search.h, ecn_search; O(N + bins),
 * all HOST memory), from which the device finds the same lists, in the same
 * order and with the same bits, as the host's ecn_graph_build
 * (src/core/graph.h). */
typedef struct {
    int64_t n;                   /* atoms, >= 1 */
    const double *pos;           /* (n,3) original positions */
    const int64_t *off;          /* (n,3) integer wrap offsets */
    const double *wbin;          /* (n,3) wrapped positions, bin order */
    const int32_t *bin_atoms;    /* (n) atoms in bin order */
    const int32_t *atom_bin;     /* (n) bin of each atom */
    int32_t n_bins;
    const int32_t *bin_start;    /* (n_bins+1) */
    const int64_t *bin_coord;    /* (n_bins,3) integer bin coordinates */
    uint64_t hash_mask;          /* occupied bins: hash of bin key -> id */
    const uint64_t *hash_keys;   /* (hash_mask+1) key + 1, 0 = empty */
    const int32_t *hash_ids;     /* (hash_mask+1) */
    double C[9];                 /* lattice rows of the shifts (zeros if none) */
    int per[3], no_off;
    int64_t nbin[3], span[3], width[3], visits;
    double rs2, q_max, q_edge, q_nb, q_coin; /* prefilter and exact thresholds */
    int64_t mlo[3];              /* key layout (graph_search.c) */
    uint64_t mmask[3];
    int mshift[3], dshift;
    int use_mtab;                /* shifts of the m fields tabulated in mtab */
    const double *mtab;          /* (mtab_mask+1, 3) */
    uint64_t mtab_mask;
} ecenet_nlist;

/* Totals of a device search. fallback: the lists cannot be built on the
 * device (a coincident pair, or a list over INT32_MAX entries): the caller
 * builds them on the host, which gives the error message. */
typedef struct {
    int64_t n_edges, n_nb;
    int fallback;
} ecenet_nlist_counts;

/* One list in backend memory, written by nlist_fill: src/dst (n), the
 * Cartesian shifts (n,3) in the backend's precision, the groupings by source
 * and by destination (graph.h), and for the edge list the types of both
 * endpoints (tsrc/tdst, NULL for the neighbour pairs). */
typedef struct {
    int32_t *src, *dst, *tsrc, *tdst;
    void *shift;
    int32_t *src_ptr, *src_idx, *dst_ptr, *dst_idx;
} ecenet_nlist_out;

/* Offset of Γ_l (l >= 2) in the packed real Clebsch-Gordan table passed to
 * wigner_fwd/vjp: Γ_l is (3(2l-1)) x (2l+1), row a*(2l-1)+b (a: D¹ index). */
static inline int ecenet_cg_offset(int l)
{
    int off = 0;
    for (int k = 2; k < l; k++)
        off += 3 * (2 * k - 1) * (2 * k + 1);
    return off;
}

typedef struct ecenet_backend {
    const char *name;
    int precision;            /* ECENET_F64 / ECENET_F32 */
    size_t real_size;         /* sizeof(double) or sizeof(float) */

    /* memory: backend buffers; upload/download convert from/to fp64 host */
    void *(*alloc)(size_t bytes);
    void (*release)(void *p);
    void (*zero)(void *p, size_t bytes);
    void (*copy)(void *dst, const void *src, size_t bytes); /* no overlap */
    void (*upload)(void *dst, const double *src, size_t count);
    void (*download)(double *dst, const void *src, size_t count);
    void (*upload_idx)(int32_t *dst, const int32_t *src, size_t count);
    /* timer hook for the profiler (seconds), and a barrier */
    double (*now)(void);
    void (*sync)(void);
    /* optional (NULL if absent): named ranges around every op for external
     * timeline tools (NVTX on CUDA), and the TF32 switch of fp32 GEMMs
     * (on = 0/1 sets, on < 0 only asks; returns the setting now in effect) */
    void (*range_push)(const char *name);
    void (*range_pop)(void);
    int (*set_tf32)(int on);
    /* optional: one line naming the device the backend runs on (cuda: the
     * GPU, its SMs, memory and compute capability; omp: the CPU and its
     * threads), for benchmark logs; a static string, valid until the
     * process ends */
    const char *(*device)(void);
    /* the default mode's stage chunk in edges where ECENET_STAGE_CHUNK is
     * unset (step.c stage_fwd: a stage's layers run chunk by chunk of edges;
     * 0 = all edges at once): a tuning value for the backend's memory
     * hierarchy, measured (cuda fp64: 8192, doc/performance.md) */
    int64_t stage_chunk;

    /* ---- geometry ---- */
    /* d[k] = pos[dst[k]] - pos[src[k]] + shift[k];  r = sqrt(|d|² + 1e-30) */
    void (*pair_geom_fwd)(int64_t n, ecenet_idx src, ecenet_idx dst,
                          const void *shift, const void *pos, void *d, void *r);
    /* pos_bar[dst] += dbar, pos_bar[src] -= dbar; virial[b*3+a] += d[b]·dbar[a]
     * (virial may be NULL); by_src/by_dst group the n entries by atom */
    void (*pair_geom_vjp)(int64_t n, ecenet_idx src, ecenet_idx dst, const ecenet_csr *by_src,
                          const ecenet_csr *by_dst, const void *d, const void *dbar,
                          void *pos_bar, void *virial);
    /* dbar += rbar · d / r */
    void (*dist_vjp)(int64_t n, const void *d, const void *r, const void *rbar, void *dbar);
    /* f[k,n] = sqrt(2/c)·sinc(nπr/c)·fc(r), n = 1..K, and df = ∂f/∂r (NULL to skip).
     * K = 0: the envelope fc alone, one column. */
    void (*radial_fwd)(int64_t n, const void *r, double cutoff, int K, int cutoff_type,
                       void *f, void *df);
    /* rbar[k] += Σ_n fbar[k,n]·df[k,n]  (K = 0: one column) */
    void (*radial_vjp)(int64_t n, int K, const void *df, const void *fbar, void *rbar);
    /* Y (n, S) real spherical harmonics of direction d; dY (n, S, 3) = ∂Y/∂d or NULL */
    void (*sph_fwd)(int64_t n, int L, const void *d, void *Y, void *dY);

    /* ---- atom environment ---- */
    /* A[i,t,n,s] = Σ_{pairs p=(i->k), type_k=t} f[p,n]·Y[p,s]; A is (N,T,R,S) */
    void (*ace_fwd)(const ecenet_dims *dm, ecenet_idx nb_src, ecenet_idx nb_dst,
                    ecenet_idx types, const void *f, const void *Y, void *A);
    /* dbar[p] += ∂/∂d_p of Σ Abar·A (needs f, df, Y, dY, d, r) */
    void (*ace_vjp)(const ecenet_dims *dm, ecenet_idx nb_src, ecenet_idx nb_dst,
                    ecenet_idx types, const void *f, const void *df, const void *Y,
                    const void *dY, const void *d, const void *r, const void *Abar,
                    void *dbar);
    /* A_emb[i,c,s] = Σ_{t,n} A[i,t,n,s]·W[type_i,t,n,c]; W is (T,T,R,C) */
    void (*embed_fwd)(const ecenet_dims *dm, ecenet_idx types, const void *W,
                      const void *A, void *A_emb);
    void (*embed_vjp)(const ecenet_dims *dm, ecenet_idx types, const void *W,
                      const void *A_emb_bar, void *Abar);

    /* ---- bond frame ---- */
    /* D (E, ND) from the edge vectors; cg = Γ_2..Γ_L packed, each (3(2l-1), 2l+1) */
    void (*wigner_fwd)(int64_t E, int L, const void *cg, const void *d, const void *r,
                       void *D);
    void (*wigner_vjp)(int64_t E, int L, const void *cg, const void *d, const void *r,
                       const void *D, const void *Dbar, void *dbar);
    /* X (E,Q,2,F) = select(concat(A_emb[i], A_emb[j]) · D) */
    void (*edge_frame_fwd)(const ecenet_dims *dm, ecenet_idx edge_i, ecenet_idx edge_j,
                           const void *A_emb, const void *D, void *X);
    void (*edge_frame_vjp)(const ecenet_dims *dm, ecenet_idx edge_i, ecenet_idx edge_j,
                           const void *A_emb, const void *D, const void *Xbar,
                           void *A_emb_bar, void *Dbar);
    /* Y = X·(1 + fr·V) per channel; fr (E,K), V (K,F) */
    void (*dist_embed_fwd)(const ecenet_dims *dm, int K, const void *fr, const void *V,
                           const void *X, void *Y);
    void (*dist_embed_vjp)(const ecenet_dims *dm, int K, const void *fr, const void *V,
                           const void *X, const void *Ybar, void *Xbar, void *frbar);

    /* ---- layers ---- */
    void (*linear_fwd)(int64_t E, const ecenet_linear_params *p, ecenet_idx tsrc,
                       ecenet_idx ttgt, const void *X, void *Y);
    void (*linear_vjp)(int64_t E, const ecenet_linear_params *p, ecenet_idx tsrc,
                       ecenet_idx ttgt, const void *Ybar, void *Xbar);
    void (*realspace_fwd)(int64_t E, const ecenet_realspace_params *p, ecenet_idx tsrc,
                          ecenet_idx ttgt, const void *X, void *Y);
    /* recomputes the grid from X */
    void (*realspace_vjp)(int64_t E, const ecenet_realspace_params *p, ecenet_idx tsrc,
                          ecenet_idx ttgt, const void *X, const void *Ybar, void *Xbar);
    /* Y += X (residual) */
    void (*add)(int64_t n, const void *X, void *Y);
    /* Optional fused layer (NULL: the orchestration composes linear, realspace
     * and add): Z = Linear(X) (saved), X += RealSpace(Z). */
    void (*layer_fwd)(int64_t E, const ecenet_linear_params *lin,
                      const ecenet_realspace_params *rs, ecenet_idx tsrc, ecenet_idx ttgt,
                      void *X, void *Z);
    /* Xbar += Linearᵀ(RealSpace_vjp(Z, Xbar)); tmp is (E,Q,2,F) scratch */
    void (*layer_vjp)(int64_t E, const ecenet_linear_params *lin,
                      const ecenet_realspace_params *rs, ecenet_idx tsrc, ecenet_idx ttgt,
                      const void *Z, void *Xbar, void *tmp);

    /* ---- message passing (SPEC §13) ---- */
    /* g (E,B,S) = pack(X) · Dᵀ; Xs, when not NULL, receives a copy of X (E,Q,2,F): the VJP's
     * input saved while X is read anyway, where the caller then changes X in place */
    void (*mp_pack_unrotate_fwd)(const ecenet_dims *dm, const void *X, const void *D, void *g,
                                 void *Xs);
    void (*mp_pack_unrotate_vjp)(const ecenet_dims *dm, const void *X, const void *D,
                                 const void *gbar, void *Xbar, void *Dbar);
    /* Public MP weight (§13): w (E,F) per channel f = b(L+1)+l,
     * w[e,f] = Σ_n fr[e,n]·W_msg[t_src,t_tgt,n,b] (the same for every l); fr (E,K) */
    void (*mp_weight_fwd)(const ecenet_dims *dm, int K, ecenet_idx tsrc, ecenet_idx ttgt,
                          const void *fr, const void *W_msg, void *w);
    void (*mp_weight_vjp)(const ecenet_dims *dm, int K, ecenet_idx tsrc, ecenet_idx ttgt,
                          const void *W_msg, const void *wbar, void *frbar);
    /* Delta[a,b,s] = Σ_{e: edge_j[e]=a} g[e,b,s]·w[e, b(L+1)+l(s)] (overwrites Delta) */
    void (*mp_scatter_fwd)(const ecenet_dims *dm, ecenet_idx edge_j, const void *g,
                           const void *w, void *Delta);
    void (*mp_scatter_vjp)(const ecenet_dims *dm, ecenet_idx edge_j, const void *g,
                           const void *w, const void *Delta_bar, void *gbar, void *wbar);
    /* X += unpack(Delta[edge_i] · D) */
    void (*mp_rotate_unpack_fwd)(const ecenet_dims *dm, ecenet_idx edge_i, const void *Delta,
                                 const void *D, void *X);
    void (*mp_rotate_unpack_vjp)(const ecenet_dims *dm, ecenet_idx edge_i, const void *Delta,
                                 const void *D, const void *Xbar, void *Delta_bar, void *Dbar);

    /* Research attention weights (§17.3): scores (E,K), fc (E) the plain
     * envelope; a (E,K) = s·fc ('sum') or the per-receiver softmax
     * exp(s-M_j)·fc / (Σ_{e'->j} exp(s-M_j)·fc + 1e-6) (·fc if msg_env);
     * w (E,F): head h = b / (B/H) gates base channel b, slot
     * k = h·(L+1)+l if l_attention else h. tmp: (N, 4K) scratch.
     * The VJP is the exact gradient (the per-receiver max is not detached); edges
 * tied at the maximum (within ~1e-12 relative in fp64) share its term equally. */
    void (*mp_attn_weight_fwd)(const ecenet_dims *dm, int n_heads, int l_attention, int mode,
                               int msg_env, ecenet_idx edge_j, const void *scores,
                               const void *fc, void *a, void *w, void *tmp);
    void (*mp_attn_weight_vjp)(const ecenet_dims *dm, int n_heads, int l_attention, int mode,
                               int msg_env, ecenet_idx edge_j, const void *scores,
                               const void *fc, const void *a, const void *wbar, void *tmp,
                               void *sbar, void *fcbar);

    /* ---- element FiLM (§17.4) ---- */
    /* gamma (E,F) = 1 + MLP([ea[t_src] ‖ eb[t_tgt] ‖ fr[e]]), ea/eb (T,P), fr (E,n_rbf)
     * or NULL; H saves the hidden pre-activations (E, Σ hidden) */
    void (*film_fwd)(const ecenet_dims *dm, const ecenet_mlp_params *p, const void *ea,
                     const void *eb, int P, int n_rbf, ecenet_idx tsrc, ecenet_idx ttgt,
                     const void *fr, void *H, void *gamma);
    /* frbar += ∂/∂fr (only the distance features carry a geometry gradient) */
    void (*film_vjp)(const ecenet_dims *dm, const ecenet_mlp_params *p, int P, int n_rbf,
                     ecenet_idx tsrc, ecenet_idx ttgt, const void *H, const void *gamma_bar,
                     void *frbar);
    /* Y[e,m,p,f] = X[e,m,p,f]·s[e,f] at width Fw */
    void (*chan_scale_fwd)(int64_t E, int Q, int Fw, const void *s, const void *X, void *Y);
    void (*chan_scale_vjp)(int64_t E, int Q, int Fw, const void *s, const void *X,
                           const void *Ybar, void *Xbar, void *sbar);

    /* ---- readout ---- */
    /* y (E, dims[n]) = MLP(X[e, m=0, cos, :]); H saves pre-activations
     * (E, Σ_{k<n-1} dims[k+1]) for the VJP */
    void (*mlp_fwd)(const ecenet_dims *dm, const ecenet_mlp_params *p, ecenet_idx tsrc,
                    ecenet_idx ttgt, const void *X, void *H, void *y);
    void (*mlp_vjp)(const ecenet_dims *dm, const ecenet_mlp_params *p, ecenet_idx tsrc,
                    ecenet_idx ttgt, const void *H, const void *ybar, void *Xbar);
    /* eps[e] = Σ_k y[e,k]·fr[e,k]  (K columns) */
    void (*energy_fwd)(int64_t E, int K, const void *y, const void *fr, void *eps);
    /* ybar += fr, frbar += y  (d Σ eps) */
    void (*energy_vjp)(int64_t E, int K, const void *y, const void *fr, void *ybar,
                       void *frbar);
    /* Σ x in fp64, in a fixed order */
    double (*sum)(int64_t n, const void *x);

    /* Nonzero: the engine also uploads each linear's weights transposed
     * (ecenet_linear_params.w_t); cuda's VJP GEMM is faster on that layout.
     * (Last, so that the entries above keep their offsets.) */
    int linear_w_t;

    /* Optional (NULL if absent; after linear_w_t, so the offsets above are
     * kept). download_idx: backend int32 -> host. The device neighbour
     * search: nlist_count searches and returns the totals (it may keep
     * scratch of its own between the two calls; 0, or -1 out of memory);
     * nlist_fill, with the same s, writes both lists and the groupings
     * (types: (n) backend memory). */
    void (*download_idx)(int32_t *dst, const int32_t *src, size_t count);
    int (*nlist_count)(const ecenet_nlist *s, ecenet_nlist_counts *c);
    void (*nlist_fill)(const ecenet_nlist *s, ecenet_idx types, const ecenet_nlist_out *edges,
                       const ecenet_nlist_out *nb);
    /* Optional: hl[0..n) = the high parts, hl[n..2n) = the low parts of the
     * n weights x (backend memory) for the backend's split-TF32 GEMM, and 0;
     * nonzero (nothing written) where its GEMMs would not read them now
     * (n = 0 only asks). Where present, the engine gives each linear
     * w_split and w_t_split. */
    int (*linear_split)(size_t n, const void *x, void *hl);
} ecenet_backend;

#ifdef __cplusplus
}
#endif
#endif
