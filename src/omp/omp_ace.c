/* ACE atomic basis and per-atom embedding (SPEC §5, §6); mirrors ref_ace.c.
 * ace_fwd: atoms in parallel, each summing its neighbour pairs in CSR order
 * (dm->p_src); ace_vjp: pairs in parallel; embedding: one GEMM per atom. */
#include "omp_ops.h"

void OMP_FN(omp_ace_fwd)(const ecenet_dims *dm, ecenet_idx nb_src, ecenet_idx nb_dst,
                         ecenet_idx types, const void *f_, const void *Y_, void *A_)
{
    (void)nb_src;
    const real *f = f_, *Y = Y_;
    real *A = A_;
    const int T = dm->T, R = dm->R, S = dm->S;
    const int64_t TRS = (int64_t)T * R * S;
#pragma omp parallel for schedule(dynamic, 16)
    for (int64_t i = 0; i < dm->N; i++) {
        real *Ai = A + i * TRS;
        for (int64_t q = 0; q < TRS; q++)
            Ai[q] = RL(0.0);
        for (int32_t c = dm->p_src.ptr[i]; c < dm->p_src.ptr[i + 1]; c++) {
            const int64_t p = dm->p_src.idx[c];
            real *At = Ai + (int64_t)types[nb_dst[p]] * R * S;
            const real *Yp = Y + p * S;
            for (int n = 0; n < R; n++) {
                const real fn = f[p * R + n];
                real *a = At + n * S;
                OMP_SIMD
                for (int s = 0; s < S; s++)
                    a[s] += fn * Yp[s];
            }
        }
    }
}

void OMP_FN(omp_ace_vjp)(const ecenet_dims *dm, ecenet_idx nb_src, ecenet_idx nb_dst,
                         ecenet_idx types, const void *f_, const void *df_, const void *Y_,
                         const void *dY_, const void *d_, const void *r_, const void *Abar_,
                         void *dbar_)
{
    const real *f = f_, *df = df_, *Y = Y_, *dY = dY_, *d = d_, *r = r_, *Abar = Abar_;
    real *dbar = dbar_;
    const int T = dm->T, R = dm->R, S = dm->S;
#pragma omp parallel for schedule(static)
    for (int64_t p = 0; p < dm->P; p++) {
        const real *G = Abar + ((int64_t)nb_src[p] * T + types[nb_dst[p]]) * R * S;
        real rbar = RL(0.0), g[3] = {0, 0, 0};
        for (int s = 0; s < S; s++) {
            real ybar = RL(0.0);
            for (int n = 0; n < R; n++)
                ybar += f[p * R + n] * G[n * S + s];
            for (int a = 0; a < 3; a++)
                g[a] += ybar * dY[(p * S + s) * 3 + a];
        }
        for (int n = 0; n < R; n++) {
            real fbar = RL(0.0);
            for (int s = 0; s < S; s++)
                fbar += G[n * S + s] * Y[p * S + s];
            rbar += fbar * df[p * R + n];
        }
        for (int a = 0; a < 3; a++)
            dbar[3 * p + a] += g[a] + rbar * d[3 * p + a] / r[p];
    }
}

/* A_emb[i] (C x S) = W[type_i]ᵀ (C x TR) · A[i] (TR x S) */
void OMP_FN(omp_embed_fwd)(const ecenet_dims *dm, ecenet_idx types, const void *W_,
                           const void *A_, void *A_emb_)
{
    const real *W = W_, *A = A_;
    real *A_emb = A_emb_;
    const int64_t TR = (int64_t)dm->T * dm->R, S = dm->S, C = dm->C;
#pragma omp parallel for schedule(dynamic, 8)
    for (int64_t i = 0; i < dm->N; i++)
        OMP_FN(omp_gemm)(C, S, TR, W + types[i] * TR * C, 1, C, A + i * TR * S, S, 1, RL(0.0),
                         A_emb + i * C * S, S, 1, 0);
}

/* Abar[i] (TR x S) += W[type_i] (TR x C) · A_emb_bar[i] (C x S) */
void OMP_FN(omp_embed_vjp)(const ecenet_dims *dm, ecenet_idx types, const void *W_,
                           const void *A_emb_bar_, void *Abar_)
{
    const real *W = W_, *Ebar = A_emb_bar_;
    real *Abar = Abar_;
    const int64_t TR = (int64_t)dm->T * dm->R, S = dm->S, C = dm->C;
#pragma omp parallel for schedule(dynamic, 8)
    for (int64_t i = 0; i < dm->N; i++)
        OMP_FN(omp_gemm)(TR, S, C, W + types[i] * TR * C, C, 1, Ebar + i * C * S, S, 1,
                         RL(1.0), Abar + i * TR * S, S, 1, 0);
}
