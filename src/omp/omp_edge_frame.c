/* Edge frame (SPEC §8) and distance embedding (§9); mirrors ref_edge_frame.c.
 * The per-edge bond-frame maps below (block-diagonal D, valid slots only,
 * vectorised over the base channel) are shared with message passing
 * (omp_mp.c). Forward: edges in parallel. VJP: D̄ per edge in parallel, then
 * Ā_emb per atom in parallel over its edges in CSR order (dm->e_src for the
 * source half, dm->e_dst for the target half). The transposed copy of A_emb
 * (N x S x C) lives in the calling thread's shared scratch. */
#include "omp_ops.h"

/* ---- the per-edge maps, vectorised over the base channel b ----------------
 * The maps act identically on every base channel b: for block l and a valid
 * slot (m, part) with local column k,
 *     X[slot][b(L+1)+l] = Σ_s A[b][l²+s] · D_l[s][k].
 * The atom tables are read transposed, T[s][b] (per atom, built once per op
 * by omp_transpose_rows), so the innermost loops run over b with unit
 * stride; X's channels of one (slot, l) are strided by L+1 and are gathered
 * into / scattered from a contiguous buffer. */

/* T (S x W per row block) = transpose of each of the n (W x S) row blocks of A */
void OMP_FN(omp_transpose_rows)(int64_t n, int W, int S, const real *A, real *T)
{
    const int64_t WS = (int64_t)W * S;
#pragma omp parallel for schedule(static) if (n * WS > 65536)
    for (int64_t a = 0; a < n; a++) {
        const real *Aa = A + a * WS;
        real *Ta = T + a * WS;
        for (int w = 0; w < W; w++)
            for (int s = 0; s < S; s++)
                Ta[(int64_t)s * W + w] = Aa[(int64_t)w * S + s];
    }
}

/* the valid (slot, k) of block l: m = 0..min(l, M), cos k = l+m, sin k = l-m */
#define FOR_SLOTS(dm, l, slot, k, body)                                          \
    for (int m_ = 0, ml_ = (l) < (dm)->M ? (l) : (dm)->M; m_ <= ml_; m_++)       \
        for (int p_ = 0; p_ < (m_ ? 2 : 1); p_++) {                              \
            const int slot = 2 * m_ + p_, k = p_ ? (l) - m_ : (l) + m_;          \
            body                                                                 \
        }

/* x[b] = Xe[slot][b(L+1)+l], b in [b0, b1) */
OMP_INLINE void gather_ch(const ecenet_dims *dm, const real *Xe, int slot, int l, int b0,
                             int b1, real *x)
{
    const int L1 = dm->L + 1;
    const real *r = Xe + (int64_t)slot * dm->F + l;
    for (int b = b0; b < b1; b++)
        x[b - b0] = r[(int64_t)b * L1];
}

OMP_CLONES
void OMP_FN(omp_frame_in_t)(const ecenet_dims *dm, const real *lo_t, const real *hi_t,
                            int64_t ldt, const real *D, real *Xe, int accumulate, real *buf)
{
    const int F = dm->F, L1 = dm->L + 1, C = dm->C, B = dm->B;
    if (!accumulate)
        for (int64_t q = 0; q < (int64_t)dm->Q * 2 * F; q++)
            Xe[q] = RL(0.0);
    for (int l = 0; l <= dm->L; l++) {
        const int n = 2 * l + 1;
        const real *Dl = D + omp_dblock_offset(l);
        FOR_SLOTS(dm, l, slot, k, {
            for (int b = 0; b < B; b++)
                buf[b] = RL(0.0);
            for (int s = 0; s < n; s++) {
                const real d = Dl[s * n + k];
                const real *tl = lo_t + (int64_t)(l * l + s) * ldt;
                const real *th = hi_t + (int64_t)(l * l + s) * ldt;
                real *bh = buf + C;
                OMP_SIMD
                for (int c = 0; c < C; c++)
                    buf[c] += tl[c] * d;
                OMP_SIMD
                for (int c = 0; c < C; c++)
                    bh[c] += th[c] * d;
            }
            real *xr = Xe + (int64_t)slot * F + l;
            for (int b = 0; b < B; b++)
                xr[(int64_t)b * L1] += buf[b];
        })
    }
}

OMP_CLONES
void OMP_FN(omp_frame_in_vjp_D_t)(const ecenet_dims *dm, const real *lo_t, const real *hi_t,
                                  int64_t ldt, const real *Xbar_e, real *Dbar_e, real *buf)
{
    const int C = dm->C, B = dm->B;
    for (int l = 0; l <= dm->L; l++) {
        const int n = 2 * l + 1;
        real *Dlb = Dbar_e + omp_dblock_offset(l);
        FOR_SLOTS(dm, l, slot, k, {
            gather_ch(dm, Xbar_e, slot, l, 0, B, buf);
            const real *bh = buf + C;
            for (int s = 0; s < n; s++) {
                const real *tl = lo_t + (int64_t)(l * l + s) * ldt;
                const real *th = hi_t + (int64_t)(l * l + s) * ldt;
                real acc = RL(0.0);
                OMP_SIMD
                for (int c = 0; c < C; c++)
                    acc += tl[c] * buf[c] + th[c] * bh[c];
                Dlb[s * n + k] += acc;
            }
        })
    }
}

OMP_CLONES
void OMP_FN(omp_frame_in_vjp_rows_t)(const ecenet_dims *dm, int b0, int b1, const real *D,
                                     const real *Xbar_e, real *Tbar, int64_t ldt, real *buf)
{
    const int W = b1 - b0;
    for (int l = 0; l <= dm->L; l++) {
        const int n = 2 * l + 1;
        const real *Dl = D + omp_dblock_offset(l);
        FOR_SLOTS(dm, l, slot, k, {
            gather_ch(dm, Xbar_e, slot, l, b0, b1, buf);
            for (int s = 0; s < n; s++) {
                const real d = Dl[s * n + k];
                real *tb = Tbar + (int64_t)(l * l + s) * ldt;
                OMP_SIMD
                for (int w = 0; w < W; w++)
                    tb[w] += buf[w] * d;
            }
        })
    }
}

OMP_CLONES
void OMP_FN(omp_frame_out_t)(const ecenet_dims *dm, const real *Xe, const real *D, real *gt,
                             real *buf)
{
    const int B = dm->B;
    for (int64_t q = 0; q < (int64_t)dm->S * B; q++)
        gt[q] = RL(0.0);
    for (int l = 0; l <= dm->L; l++) {
        const int n = 2 * l + 1;
        const real *Dl = D + omp_dblock_offset(l);
        FOR_SLOTS(dm, l, slot, k, {
            gather_ch(dm, Xe, slot, l, 0, B, buf);
            for (int s = 0; s < n; s++) {
                const real d = Dl[s * n + k];
                real *g = gt + (int64_t)(l * l + s) * B;
                OMP_SIMD
                for (int b = 0; b < B; b++)
                    g[b] += buf[b] * d;
            }
        })
    }
}

OMP_CLONES
void OMP_FN(omp_frame_out_vjp_t)(const ecenet_dims *dm, const real *Xe, const real *D,
                                 const real *gbt, real *Xbar_e, real *Dbar, real *buf)
{
    const int B = dm->B, L1 = dm->L + 1;
    real *xb = buf + B;
    for (int l = 0; l <= dm->L; l++) {
        const int n = 2 * l + 1;
        const real *Dl = D + omp_dblock_offset(l);
        real *Dlb = Dbar + omp_dblock_offset(l);
        FOR_SLOTS(dm, l, slot, k, {
            gather_ch(dm, Xe, slot, l, 0, B, buf);
            for (int b = 0; b < B; b++)
                xb[b] = RL(0.0);
            for (int s = 0; s < n; s++) {
                const real d = Dl[s * n + k];
                const real *g = gbt + (int64_t)(l * l + s) * B;
                real acc = RL(0.0);
                OMP_SIMD
                for (int b = 0; b < B; b++) {
                    xb[b] += g[b] * d;
                    acc += g[b] * buf[b];
                }
                Dlb[s * n + k] += acc;
            }
            real *xr = Xbar_e + (int64_t)slot * dm->F + l;
            for (int b = 0; b < B; b++)
                xr[(int64_t)b * L1] += xb[b];
        })
    }
}

void OMP_FN(omp_edge_frame_fwd)(const ecenet_dims *dm, ecenet_idx edge_i, ecenet_idx edge_j,
                                const void *A_emb_, const void *D_, void *X_)
{
    const real *A_emb = A_emb_, *D = D_;
    real *X = X_;
    const int64_t CS = (int64_t)dm->C * dm->S, XE = (int64_t)dm->Q * 2 * dm->F;
    if (dm->E <= 0)
        return;
    real *At = OMP_FN(omp_scratch)(OMP_SCR_SHARED, (size_t)(dm->N * CS) * sizeof(real));
    OMP_FN(omp_transpose_rows)(dm->N, dm->C, dm->S, A_emb, At);
#pragma omp parallel
    {
        real *buf = OMP_FN(omp_scratch)(OMP_SCR_TILE, (size_t)dm->B * sizeof(real));
#pragma omp for schedule(static)
        for (int64_t e = 0; e < dm->E; e++)
            OMP_FN(omp_frame_in_t)(dm, At + edge_i[e] * CS, At + edge_j[e] * CS, dm->C,
                                   D + e * dm->ND, X + e * XE, 0, buf);
    }
}

void OMP_FN(omp_edge_frame_vjp)(const ecenet_dims *dm, ecenet_idx edge_i, ecenet_idx edge_j,
                                const void *A_emb_, const void *D_, const void *Xbar_,
                                void *A_emb_bar_, void *Dbar_)
{
    const real *A_emb = A_emb_, *D = D_, *Xbar = Xbar_;
    real *Ebar = A_emb_bar_, *Dbar = Dbar_;
    const int64_t CS = (int64_t)dm->C * dm->S, XE = (int64_t)dm->Q * 2 * dm->F;
    const int C = dm->C, S = dm->S;
    if (dm->E <= 0)
        return;
    real *At = OMP_FN(omp_scratch)(OMP_SCR_SHARED, (size_t)(dm->N * CS) * sizeof(real));
    OMP_FN(omp_transpose_rows)(dm->N, C, S, A_emb, At);
#pragma omp parallel
    {
        char *scr = OMP_FN(omp_scratch)(OMP_SCR_TILE, omp_pad64((size_t)dm->B * sizeof(real)) +
                                                          omp_pad64((size_t)CS * sizeof(real)));
        real *buf = omp_carve(&scr, (size_t)dm->B * sizeof(real));
        real *Tb = omp_carve(&scr, (size_t)CS * sizeof(real));
#pragma omp for schedule(static)
        for (int64_t e = 0; e < dm->E; e++)
            OMP_FN(omp_frame_in_vjp_D_t)(dm, At + edge_i[e] * CS, At + edge_j[e] * CS, C,
                                         Xbar + e * XE, Dbar + e * dm->ND, buf);
        /* Ā_emb[a]: its source edges' first half, then its target edges' second
         * half, in CSR order, accumulated transposed (S x C) then added */
#pragma omp for schedule(dynamic, 4)
        for (int64_t a = 0; a < dm->N; a++) {
            const int32_t s0 = dm->e_src.ptr[a], s1 = dm->e_src.ptr[a + 1];
            const int32_t d0 = dm->e_dst.ptr[a], d1 = dm->e_dst.ptr[a + 1];
            if (s0 == s1 && d0 == d1)
                continue;
            for (int64_t q = 0; q < CS; q++)
                Tb[q] = RL(0.0);
            for (int32_t q = s0; q < s1; q++) {
                const int64_t e = dm->e_src.idx[q];
                OMP_FN(omp_frame_in_vjp_rows_t)(dm, 0, C, D + e * dm->ND, Xbar + e * XE, Tb, C,
                                                buf);
            }
            for (int32_t q = d0; q < d1; q++) {
                const int64_t e = dm->e_dst.idx[q];
                OMP_FN(omp_frame_in_vjp_rows_t)(dm, C, 2 * C, D + e * dm->ND, Xbar + e * XE, Tb, C,
                                                buf);
            }
            real *rb = Ebar + a * CS;
            for (int c = 0; c < C; c++)
                for (int s = 0; s < S; s++)
                    rb[(int64_t)c * S + s] += Tb[(int64_t)s * C + c];
        }
    }
}

/* σ[e,f] = Σ_n fr[e,n] V[n,f];  Y = X (1 + σ), broadcast over (m, part). */
void OMP_FN(omp_dist_embed_fwd)(const ecenet_dims *dm, int K, const void *fr_, const void *V_,
                                const void *X_, void *Y_)
{
    const real *fr = fr_, *V = V_, *X = X_;
    real *Y = Y_;
    const int F = dm->F, QP = dm->Q * 2;
#pragma omp parallel
    {
        real *sig = OMP_FN(omp_scratch)(OMP_SCR_TILE, (size_t)F * sizeof(real));
#pragma omp for schedule(static)
        for (int64_t e = 0; e < dm->E; e++) {
            for (int f = 0; f < F; f++)
                sig[f] = RL(1.0);
            for (int n = 0; n < K; n++) {
                const real c = fr[e * K + n];
                const real *v = V + (int64_t)n * F;
                OMP_SIMD
                for (int f = 0; f < F; f++)
                    sig[f] += c * v[f];
            }
            for (int q = 0; q < QP; q++) {
                const real *x = X + (e * QP + q) * F;
                real *y = Y + (e * QP + q) * F;
                OMP_SIMD
                for (int f = 0; f < F; f++)
                    y[f] = x[f] * sig[f];
            }
        }
    }
}

void OMP_FN(omp_dist_embed_vjp)(const ecenet_dims *dm, int K, const void *fr_, const void *V_,
                                const void *X_, const void *Ybar_, void *Xbar_, void *frbar_)
{
    const real *fr = fr_, *V = V_, *X = X_, *Ybar = Ybar_;
    real *Xbar = Xbar_, *frbar = frbar_;
    const int F = dm->F, QP = dm->Q * 2;
#pragma omp parallel
    {
        real *sig = OMP_FN(omp_scratch)(OMP_SCR_TILE, 2 * omp_pad64((size_t)F * sizeof(real)));
        real *sb = sig + omp_pad64((size_t)F * sizeof(real)) / sizeof(real);
#pragma omp for schedule(static)
        for (int64_t e = 0; e < dm->E; e++) {
            for (int f = 0; f < F; f++) {
                sig[f] = RL(1.0);
                sb[f] = RL(0.0);
            }
            for (int n = 0; n < K; n++) {
                const real c = fr[e * K + n];
                const real *v = V + (int64_t)n * F;
                OMP_SIMD
                for (int f = 0; f < F; f++)
                    sig[f] += c * v[f];
            }
            for (int q = 0; q < QP; q++) {
                const int64_t o = (e * QP + q) * F;
                OMP_SIMD
                for (int f = 0; f < F; f++) {
                    Xbar[o + f] += Ybar[o + f] * sig[f];
                    sb[f] += Ybar[o + f] * X[o + f];
                }
            }
            for (int n = 0; n < K; n++) {
                const real *v = V + (int64_t)n * F;
                real acc = RL(0.0);
                for (int f = 0; f < F; f++)
                    acc += sb[f] * v[f];
                frbar[e * K + n] += acc;
            }
        }
    }
}
