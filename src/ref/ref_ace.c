/* ACE atomic basis and per-atom embedding (SPEC §5, §6). */
#include "ref.h"

/* A[i, type_k, n, s] += f_n(r_p) Y_s(d_p) over neighbour pairs p = (i -> k). */
void ref_ace_fwd(const ecenet_dims *dm, ecenet_idx nb_src, ecenet_idx nb_dst, ecenet_idx types,
                 const void *f_, const void *Y_, void *A_)
{
    const double *f = f_, *Y = Y_;
    double *A = A_;
    const int T = dm->T, R = dm->R, S = dm->S;
    for (int64_t q = 0; q < dm->N * T * R * S; q++)
        A[q] = 0.0;
    for (int64_t p = 0; p < dm->P; p++) {
        double *Ai = A + ((int64_t)nb_src[p] * T + types[nb_dst[p]]) * R * S;
        for (int n = 0; n < R; n++)
            for (int s = 0; s < S; s++)
                Ai[n * S + s] += f[p * R + n] * Y[p * S + s];
    }
}

void ref_ace_vjp(const ecenet_dims *dm, ecenet_idx nb_src, ecenet_idx nb_dst, ecenet_idx types,
                 const void *f_, const void *df_, const void *Y_, const void *dY_,
                 const void *d_, const void *r_, const void *Abar_, void *dbar_)
{
    const double *f = f_, *df = df_, *Y = Y_, *dY = dY_, *d = d_, *r = r_, *Abar = Abar_;
    double *dbar = dbar_;
    const int T = dm->T, R = dm->R, S = dm->S;
    for (int64_t p = 0; p < dm->P; p++) {
        const double *G = Abar + ((int64_t)nb_src[p] * T + types[nb_dst[p]]) * R * S;
        double rbar = 0.0, g[3] = {0.0, 0.0, 0.0};
        for (int s = 0; s < S; s++) {
            double ybar = 0.0;
            for (int n = 0; n < R; n++)
                ybar += f[p * R + n] * G[n * S + s];
            for (int a = 0; a < 3; a++)
                g[a] += ybar * dY[(p * S + s) * 3 + a];
        }
        for (int n = 0; n < R; n++) {
            double fbar = 0.0;
            for (int s = 0; s < S; s++)
                fbar += G[n * S + s] * Y[p * S + s];
            rbar += fbar * df[p * R + n];
        }
        for (int a = 0; a < 3; a++)
            dbar[3 * p + a] += g[a] + rbar * d[3 * p + a] / r[p];
    }
}

/* A_emb[i,c,s] = Σ_{t,n} A[i,t,n,s] W[type_i,t,n,c] */
void ref_embed_fwd(const ecenet_dims *dm, ecenet_idx types, const void *W_, const void *A_,
                   void *A_emb_)
{
    const double *W = W_, *A = A_;
    double *A_emb = A_emb_;
    const int T = dm->T, R = dm->R, S = dm->S, C = dm->C;
    for (int64_t i = 0; i < dm->N; i++) {
        const double *Wi = W + (int64_t)types[i] * T * R * C;
        for (int c = 0; c < C; c++)
            for (int s = 0; s < S; s++) {
                double acc = 0.0;
                for (int t = 0; t < T; t++)
                    for (int n = 0; n < R; n++)
                        acc += A[((i * T + t) * R + n) * S + s] * Wi[(t * R + n) * C + c];
                A_emb[(i * C + c) * S + s] = acc;
            }
    }
}

void ref_embed_vjp(const ecenet_dims *dm, ecenet_idx types, const void *W_,
                   const void *A_emb_bar_, void *Abar_)
{
    const double *W = W_, *Ebar = A_emb_bar_;
    double *Abar = Abar_;
    const int T = dm->T, R = dm->R, S = dm->S, C = dm->C;
    for (int64_t i = 0; i < dm->N; i++) {
        const double *Wi = W + (int64_t)types[i] * T * R * C;
        for (int t = 0; t < T; t++)
            for (int n = 0; n < R; n++)
                for (int s = 0; s < S; s++) {
                    double acc = 0.0;
                    for (int c = 0; c < C; c++)
                        acc += Ebar[(i * C + c) * S + s] * Wi[(t * R + n) * C + c];
                    Abar[((i * T + t) * R + n) * S + s] += acc;
                }
    }
}
