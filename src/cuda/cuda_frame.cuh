/* The bond-frame maps shared by the edge frame (cuda_frame.cu) and message
 * passing (cuda_mp.cu): the slot rule, the problem's dimensions and the
 * launchers of the four map kernels, which live in cuda_frame.cu. */
#ifndef ECENET_CUDA_FRAME_CUH
#define ECENET_CUDA_FRAME_CUH
#include "cuda_common.cuh"

namespace ecn_cu {

/* where the (B,S) rows of an edge come from */
enum { ROWS_EDGE_FRAME = 0, ROWS_ATOM_SRC = 1, ROWS_PER_EDGE = 2 };

template <typename T> struct Rows {
    const T *base;
    const int32_t *ei, *ej;
    int mode;
};

struct Geo {
    int L, M, C, B, S, F, Q, ND;
};

static inline Geo geo(const ecenet_dims *dm)
{
    Geo g = {dm->L, dm->M, dm->C, dm->B, dm->S, dm->F, dm->Q, dm->ND};
    return g;
}

/* the l of a packed index s = l² + (0..2l) */
__device__ static inline int l_of_s(int s)
{
    int l = 0;
    while ((l + 1) * (l + 1) <= s)
        l++;
    return l;
}

/* X[e] (=|+=) select(rows(e)·D_e) */
template <typename T, bool ACC>
void launch_frame_in(int64_t E, const Geo &g, const Rows<T> &rows, const T *D, T *X);
/* G[e] = pack(X[e])·D_eᵀ; Xs (optional) = X */
template <typename T>
void launch_frame_out(int64_t E, const Geo &g, const T *X, const T *D, T *G, T *Xs);
/* Dbar[e] += rows(e)ᵀ·select⁻¹(Xs[e]) */
template <typename T>
void launch_frame_dbar(int64_t E, const Geo &g, const Rows<T> &rows, const T *Xs, T *Dbar);
/* out[a] += Σ over the atom's edges in l0 (rows off0..) and l1 (rows off1..)
 * of pack(Xbar[e])·D_eᵀ, nrows rows per atom */
template <typename T>
void launch_frame_atom(int64_t N, const Geo &g, int nrows, const ecenet_csr *l0, int off0,
                       const ecenet_csr *l1, int off1, const T *Xbar, const T *D, T *out);
/* the pack-unrotate VJP in one kernel: Xb += select(Gb·D) on the valid
 * slots, Dbar += Gbᵀ·select⁻¹(X) */
template <typename T>
void launch_pu_vjp(int64_t E, const Geo &g, const T *X, const T *D, const T *Gb, T *Xb, T *Dbar);

} // namespace ecn_cu

#endif
