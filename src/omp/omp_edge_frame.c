/* Edge frame (SPEC §8) and distance embedding (§9); mirrors ref_edge_frame.c.
 * The per-edge bond-frame maps below (block-diagonal D, valid slots only) are
 * shared with message passing (omp_mp.c). Forward: edges in parallel. VJP:
 * D̄ per edge in parallel, then Ā_emb per atom in parallel over its edges in
 * CSR order (dm->e_src for the source half, dm->e_dst for the target half). */
#include "omp_ops.h"

static const real *row(const ecenet_dims *dm, const real *lo, const real *hi, int b)
{
    return b < dm->C ? lo + (int64_t)b * dm->S : hi + (int64_t)(b - dm->C) * dm->S;
}

void OMP_FN(omp_frame_in)(const ecenet_dims *dm, const real *lo, const real *hi, const real *D,
                          real *Xe, int accumulate)
{
    const int F = dm->F, L = dm->L, M = dm->M;
    if (!accumulate)
        for (int64_t q = 0; q < (int64_t)dm->Q * 2 * F; q++)
            Xe[q] = RL(0.0);
    for (int b = 0; b < dm->B; b++) {
        const real *a = row(dm, lo, hi, b);
        for (int l = 0; l <= L; l++) {
            const int f = b * (L + 1) + l, ml = l < M ? l : M, n = 2 * l + 1;
            const real *Dl = D + omp_dblock_offset(l), *al = a + l * l;
            for (int m = 0; m <= ml; m++) {
                real acc = RL(0.0);
                for (int s = 0; s < n; s++)
                    acc += al[s] * Dl[s * n + l + m];
                Xe[(2 * m) * F + f] += acc;
                if (!m)
                    continue;
                acc = RL(0.0);
                for (int s = 0; s < n; s++)
                    acc += al[s] * Dl[s * n + l - m];
                Xe[(2 * m + 1) * F + f] += acc;
            }
        }
    }
}

void OMP_FN(omp_frame_in_vjp_D)(const ecenet_dims *dm, const real *lo, const real *hi,
                                const real *D, const real *Xbar_e, real *Dbar_e)
{
    (void)D;
    const int F = dm->F, L = dm->L, M = dm->M;
    for (int b = 0; b < dm->B; b++) {
        const real *a = row(dm, lo, hi, b);
        for (int l = 0; l <= L; l++) {
            const int f = b * (L + 1) + l, ml = l < M ? l : M, n = 2 * l + 1;
            real *Dlb = Dbar_e + omp_dblock_offset(l);
            const real *al = a + l * l;
            for (int m = 0; m <= ml; m++) {
                const real gc = Xbar_e[(2 * m) * F + f];
                for (int s = 0; s < n; s++)
                    Dlb[s * n + l + m] += al[s] * gc;
                if (!m)
                    continue;
                const real gs = Xbar_e[(2 * m + 1) * F + f];
                for (int s = 0; s < n; s++)
                    Dlb[s * n + l - m] += al[s] * gs;
            }
        }
    }
}

void OMP_FN(omp_frame_in_vjp_rows)(const ecenet_dims *dm, int b0, int b1, const real *D,
                                   const real *Xbar_e, real *rows_bar)
{
    const int F = dm->F, L = dm->L, M = dm->M, S = dm->S;
    for (int b = b0; b < b1; b++) {
        real *ab = rows_bar + (int64_t)(b - b0) * S;
        for (int l = 0; l <= L; l++) {
            const int f = b * (L + 1) + l, ml = l < M ? l : M, n = 2 * l + 1;
            const real *Dl = D + omp_dblock_offset(l);
            real *abl = ab + l * l;
            for (int m = 0; m <= ml; m++) {
                const real gc = Xbar_e[(2 * m) * F + f];
                for (int s = 0; s < n; s++)
                    abl[s] += gc * Dl[s * n + l + m];
                if (!m)
                    continue;
                const real gs = Xbar_e[(2 * m + 1) * F + f];
                for (int s = 0; s < n; s++)
                    abl[s] += gs * Dl[s * n + l - m];
            }
        }
    }
}

void OMP_FN(omp_frame_out)(const ecenet_dims *dm, const real *Xe, const real *D, real *g)
{
    const int F = dm->F, L = dm->L, M = dm->M, S = dm->S;
    for (int b = 0; b < dm->B; b++) {
        real *gb = g + (int64_t)b * S;
        for (int l = 0; l <= L; l++) {
            const int f = b * (L + 1) + l, ml = l < M ? l : M, n = 2 * l + 1;
            const real *Dl = D + omp_dblock_offset(l);
            real *gl = gb + l * l;
            for (int s = 0; s < n; s++)
                gl[s] = RL(0.0);
            for (int m = 0; m <= ml; m++) {
                const real xc = Xe[(2 * m) * F + f];
                for (int s = 0; s < n; s++)
                    gl[s] += xc * Dl[s * n + l + m];
                if (!m)
                    continue;
                const real xs = Xe[(2 * m + 1) * F + f];
                for (int s = 0; s < n; s++)
                    gl[s] += xs * Dl[s * n + l - m];
            }
        }
    }
}

void OMP_FN(omp_frame_out_vjp)(const ecenet_dims *dm, const real *Xe, const real *D,
                               const real *gbar, real *Xbar_e, real *Dbar)
{
    const int F = dm->F, L = dm->L, M = dm->M, S = dm->S;
    for (int b = 0; b < dm->B; b++) {
        const real *gb = gbar + (int64_t)b * S;
        for (int l = 0; l <= L; l++) {
            const int f = b * (L + 1) + l, ml = l < M ? l : M, n = 2 * l + 1;
            const real *Dl = D + omp_dblock_offset(l), *gl = gb + l * l;
            real *Dlb = Dbar + omp_dblock_offset(l);
            for (int m = 0; m <= ml; m++) {
                for (int p = 0; p < (m ? 2 : 1); p++) {
                    const int slot = 2 * m + p, k = p ? l - m : l + m;
                    const real x = Xe[slot * F + f];
                    real acc = RL(0.0);
                    for (int s = 0; s < n; s++) {
                        acc += gl[s] * Dl[s * n + k];
                        Dlb[s * n + k] += gl[s] * x;
                    }
                    Xbar_e[slot * F + f] += acc;
                }
            }
        }
    }
}

void OMP_FN(omp_edge_frame_fwd)(const ecenet_dims *dm, ecenet_idx edge_i, ecenet_idx edge_j,
                                const void *A_emb_, const void *D_, void *X_)
{
    const real *A_emb = A_emb_, *D = D_;
    real *X = X_;
    const int64_t CS = (int64_t)dm->C * dm->S, XE = (int64_t)dm->Q * 2 * dm->F;
#pragma omp parallel for schedule(static)
    for (int64_t e = 0; e < dm->E; e++)
        OMP_FN(omp_frame_in)(dm, A_emb + edge_i[e] * CS, A_emb + edge_j[e] * CS, D + e * dm->ND,
                             X + e * XE, 0);
}

void OMP_FN(omp_edge_frame_vjp)(const ecenet_dims *dm, ecenet_idx edge_i, ecenet_idx edge_j,
                                const void *A_emb_, const void *D_, const void *Xbar_,
                                void *A_emb_bar_, void *Dbar_)
{
    const real *A_emb = A_emb_, *D = D_, *Xbar = Xbar_;
    real *Ebar = A_emb_bar_, *Dbar = Dbar_;
    const int64_t CS = (int64_t)dm->C * dm->S, XE = (int64_t)dm->Q * 2 * dm->F;
    const int C = dm->C;
#pragma omp parallel
    {
#pragma omp for schedule(static)
        for (int64_t e = 0; e < dm->E; e++)
            OMP_FN(omp_frame_in_vjp_D)(dm, A_emb + edge_i[e] * CS, A_emb + edge_j[e] * CS,
                                       D + e * dm->ND, Xbar + e * XE, Dbar + e * dm->ND);
#pragma omp for schedule(dynamic, 4)
        for (int64_t a = 0; a < dm->N; a++) {
            real *rb = Ebar + a * CS;
            for (int32_t q = dm->e_src.ptr[a]; q < dm->e_src.ptr[a + 1]; q++) {
                const int64_t e = dm->e_src.idx[q];
                OMP_FN(omp_frame_in_vjp_rows)(dm, 0, C, D + e * dm->ND, Xbar + e * XE, rb);
            }
            for (int32_t q = dm->e_dst.ptr[a]; q < dm->e_dst.ptr[a + 1]; q++) {
                const int64_t e = dm->e_dst.idx[q];
                OMP_FN(omp_frame_in_vjp_rows)(dm, C, 2 * C, D + e * dm->ND, Xbar + e * XE, rb);
            }
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
