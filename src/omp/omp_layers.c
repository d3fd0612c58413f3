/* Equivariant linear (SPEC §10), RealSpace nonlinearity (§11), residual
 * (§12), and the fused layer; mirrors ref_layers.c.
 *
 * Linear: for a tile of edges and each (m, part), Y = X·W_mᵀ is one BLIS
 * GEMM read in place from the [e][m][part][f] layout (row stride 2·Q·F); the
 * bias only on m = 0 cos. The sin part of m = 0 is skipped when the tile's
 * input rows are all zero (always, in a model: no valid slot feeds it), its
 * output then being exactly zero. Edge-type corrections: the tile's rows are
 * grouped by type once per tile and each group gets one GEMM with its
 * correction matrix (gather/scatter through per-thread scratch).
 *
 * RealSpace: per edge and block of FB features, loop over the grid points k:
 * synthesis f_k (vectorised over f), activation, analysis into 2Q
 * accumulators; the grid is never stored. The VJP recomputes f_k.
 *
 * Fused layer: per tile, the GEMMs write Z (saved for the backward) and
 * RealSpace adds into X while the tile is still in cache. The VJP recomputes
 * the grid from Z, writes ∂/∂Z of the tile to per-thread scratch (reading the
 * tile of X̄ fully first), then accumulates the transposed GEMMs into X̄.
 * OpenMP over tiles, BLIS single-threaded inside. */
#include <pthread.h>
#include <stdlib.h>
#include "error.h"
#include "omp_ops.h"

/* ---- helpers ---------------------------------------------------------------- */

static int rows_zero(const real *x, int nt, int64_t ld, int n)
{
    for (int r = 0; r < nt; r++)
        for (int i = 0; i < n; i++)
            if (x[r * ld + i] != RL(0.0))
                return 0;
    return 1;
}

/* Scratch of one tile: type groupings and the correction staging buffers. */
typedef struct {
    int32_t *perm_s, *off_s, *perm_t, *off_t;
    real *As, *Cs;
} lin_scratch;

static size_t lin_scratch_bytes(const ecenet_linear_params *p, int nt)
{
    if (!p->w_src && !p->w_tgt)
        return 0;
    const size_t wmax = (size_t)(p->fin > p->fout ? p->fin : p->fout);
    return 2 * omp_pad64((size_t)nt * sizeof(int32_t)) +
           2 * omp_pad64((size_t)(2 * p->T + 1) * sizeof(int32_t)) +
           2 * omp_pad64((size_t)nt * wmax * sizeof(real));
}

static void lin_scratch_carve(const ecenet_linear_params *p, int nt, char **buf,
                              lin_scratch *s)
{
    memset(s, 0, sizeof *s);
    if (!p->w_src && !p->w_tgt)
        return;
    const size_t wmax = (size_t)(p->fin > p->fout ? p->fin : p->fout);
    s->perm_s = omp_carve(buf, (size_t)nt * sizeof(int32_t));
    s->perm_t = omp_carve(buf, (size_t)nt * sizeof(int32_t));
    s->off_s = omp_carve(buf, (size_t)(2 * p->T + 1) * sizeof(int32_t));
    s->off_t = omp_carve(buf, (size_t)(2 * p->T + 1) * sizeof(int32_t));
    s->As = omp_carve(buf, (size_t)nt * wmax * sizeof(real));
    s->Cs = omp_carve(buf, (size_t)nt * wmax * sizeof(real));
}

static void lin_group(const ecenet_linear_params *p, int64_t e0, int nt, ecenet_idx tsrc,
                      ecenet_idx ttgt, lin_scratch *s)
{
    if (p->w_src)
        OMP_FN(omp_group_rows)(e0, nt, tsrc, p->T, s->perm_s, s->off_s);
    if (p->w_tgt)
        OMP_FN(omp_group_rows)(e0, nt, ttgt, p->T, s->perm_t, s->off_t);
}

/* Y tile = Linear(X tile); X, Y point at the tile's first edge; a_next: more
 * rows follow the tile in X (see omp_gemm) */
static void lin_tile_fwd(const ecenet_linear_params *p, int nt, const lin_scratch *s,
                         const real *X, real *Y, int a_next)
{
    const int fin = p->fin, fout = p->fout, Q = p->Q;
    const int64_t ldx = 2 * (int64_t)Q * fin, ldy = 2 * (int64_t)Q * fout;
    const int64_t wm = (int64_t)fout * fin, wt = (int64_t)Q * wm;
    const real *w = p->w, *bias = p->bias;
    for (int m = 0; m < Q; m++)
        for (int part = 0; part < 2; part++) {
            const real *x = X + (2 * m + part) * (int64_t)fin;
            real *y = Y + (2 * m + part) * (int64_t)fout;
            if (m == 0 && part == 1 && rows_zero(x, nt, ldx, fin)) {
                for (int r = 0; r < nt; r++)
                    memset(y + r * ldy, 0, (size_t)fout * sizeof(real));
                continue;
            }
            OMP_FN(omp_gemm)(nt, fout, fin, x, ldx, 1, w + m * wm, 1, fin, RL(0.0), y, ldy, 1,
                             a_next);
            if (bias && m == 0 && part == 0)
                for (int r = 0; r < nt; r++) {
                    real *yr = y + r * ldy;
                    OMP_SIMD
                    for (int o = 0; o < fout; o++)
                        yr[o] += bias[o];
                }
            const real *ws = p->w_src, *wg = p->w_tgt;
            if (ws)
                OMP_FN(omp_corr_gemm)(nt, s->perm_s, s->off_s, p->T, ws + m * wm, wt, 1, fin, fin,
                                      fout, x, ldx, y, ldy, s->As, s->Cs);
            if (wg)
                OMP_FN(omp_corr_gemm)(nt, s->perm_t, s->off_t, p->T, wg + m * wm, wt, 1, fin, fin,
                                      fout, x, ldx, y, ldy, s->As, s->Cs);
        }
}

/* X̄ tile += Linearᵀ(Ȳ tile); Ȳ rows at stride ldyb (a_next: see lin_tile_fwd). */
static void lin_tile_vjp(const ecenet_linear_params *p, int nt, const lin_scratch *s,
                         const real *Yb, int64_t ldyb, real *Xb, int a_next)
{
    const int fin = p->fin, fout = p->fout, Q = p->Q;
    const int64_t ldx = 2 * (int64_t)Q * fin;
    const int64_t wm = (int64_t)fout * fin, wt = (int64_t)Q * wm;
    const real *w = p->w;
    for (int m = 0; m < Q; m++)
        for (int part = 0; part < 2; part++) {
            const real *yb = Yb + (2 * m + part) * (int64_t)fout;
            real *xb = Xb + (2 * m + part) * (int64_t)fin;
            if (m == 0 && part == 1 && rows_zero(yb, nt, ldyb, fout))
                continue; /* exactly zero contribution */
            OMP_FN(omp_gemm)(nt, fin, fout, yb, ldyb, 1, w + m * wm, fin, 1, RL(1.0), xb, ldx, 1,
                             a_next);
            const real *ws = p->w_src, *wg = p->w_tgt;
            if (ws)
                OMP_FN(omp_corr_gemm)(nt, s->perm_s, s->off_s, p->T, ws + m * wm, wt, fin, 1, fout,
                                      fin, yb, ldyb, xb, ldx, s->As, s->Cs);
            if (wg)
                OMP_FN(omp_corr_gemm)(nt, s->perm_t, s->off_t, p->T, wg + m * wm, wt, fin, 1, fout,
                                      fin, yb, ldyb, xb, ldx, s->As, s->Cs);
        }
}

/* Both directions tile the edges the same way: per tile, group the edges by
 * type (for the per-type corrections) and run the tile's GEMMs. */
static void lin_tiles(int64_t E, const ecenet_linear_params *p, ecenet_idx tsrc,
                      ecenet_idx ttgt, const real *in, real *out, int vjp)
{
    const int TE = OMP_FN(omp_tile_edges)(p->fin > p->fout ? p->fin : p->fout);
    const int64_t nti = (E + TE - 1) / TE;
    const int64_t XEi = 2 * (int64_t)p->Q * p->fin, XEo = 2 * (int64_t)p->Q * p->fout;
#pragma omp parallel if (nti > 1)
    {
        char *buf = OMP_FN(omp_scratch)(OMP_SCR_TILE, lin_scratch_bytes(p, TE) + 64);
        lin_scratch s;
        lin_scratch_carve(p, TE, &buf, &s);
#pragma omp for schedule(dynamic, 1)
        for (int64_t t = 0; t < nti; t++) {
            const int64_t e0 = t * TE;
            const int nt = (int)(E - e0 < TE ? E - e0 : TE);
            lin_group(p, e0, nt, tsrc, ttgt, &s);
            if (vjp) /* in = Ybar (width fout), out = Xbar (width fin) */
                lin_tile_vjp(p, nt, &s, in + e0 * XEo, XEo, out + e0 * XEi, e0 + nt < E);
            else
                lin_tile_fwd(p, nt, &s, in + e0 * XEi, out + e0 * XEo, e0 + nt < E);
        }
    }
}

void OMP_FN(omp_linear_fwd)(int64_t E, const ecenet_linear_params *p, ecenet_idx tsrc,
                            ecenet_idx ttgt, const void *X, void *Y)
{
    lin_tiles(E, p, tsrc, ttgt, X, Y, 0);
}

void OMP_FN(omp_linear_vjp)(int64_t E, const ecenet_linear_params *p, ecenet_idx tsrc,
                            ecenet_idx ttgt, const void *Ybar, void *Xbar)
{
    lin_tiles(E, p, tsrc, ttgt, Ybar, Xbar, 1);
}

/* ---- RealSpace ------------------------------------------------------------------ */

#define RS_FB 64         /* features per block */
#define RS_ACC 8192      /* accumulator reals per block: 2Q·fb <= RS_ACC */

/* Write (or add) a block's 2Q accumulated rows of fb channels into an edge's
 * features at channel f0 (row stride F). */
static void rs_store(real *dst, const real *acc, int Q, int64_t F, int f0, int fb,
                     int accumulate)
{
    for (int q = 0; q < 2 * Q; q++) {
        real *y = dst + (int64_t)q * F + f0;
        const real *a = acc + q * fb;
        if (accumulate) {
            OMP_SIMD
            for (int f = 0; f < fb; f++)
                y[f] += a[f];
        } else {
            OMP_SIMD
            for (int f = 0; f < fb; f++)
                y[f] = a[f];
        }
    }
}

typedef struct {
    const real *cs, *ss, *ca, *sa;
    int F, Q, G, act, fbmax;
    int m0sin;           /* 1 if the sin m = 0 row of the synthesis is used (not all zero) */
    int sym;             /* fold the mirror-symmetric grid (grid_sym; rs_edge_fwd) */
    int affine;          /* 0: identity; 1: the same for every edge (sc0, sh0); 2: per edge */
    const real *sc0, *sh0;
} rs_info;

/* ECENET_RS_SYM=0: the unfolded grid sums (read once, as in cuda; a value
 * other than 0 or 1 keeps the default with a line on stderr) */
static int rs_sym_env = 1;
static pthread_once_t rs_sym_once = PTHREAD_ONCE_INIT;
static void rs_sym_init(void) { rs_sym_env = ecn_env_int("ECENET_RS_SYM", 1, 0, 1); }

static void rs_info_init(const ecenet_realspace_params *p, rs_info *ri)
{
    ri->cs = p->cos_synth;
    ri->ss = p->sin_synth;
    ri->ca = p->cos_analysis;
    ri->sa = p->sin_analysis;
    ri->F = p->F;
    ri->Q = p->Q;
    ri->G = p->G;
    ri->act = p->act;
    ri->m0sin = 0;
    pthread_once(&rs_sym_once, rs_sym_init);
    ri->sym = p->grid_sym && rs_sym_env;
    for (int k = 0; k < p->G; k++)
        if (ri->ss[k] != RL(0.0))
            ri->m0sin = 1;
    ri->affine = 0;
    ri->sc0 = ri->sh0 = NULL;
    if (p->scale_src || p->scale_tgt || p->shift_src || p->shift_tgt) {
        ri->affine = 2;
    } else if (p->scale || p->shift) {
        /* one scale/shift for all edges: skipped when it is the identity (the
         * public models' fixed buffers), else kept in the calling thread's
         * shared scratch for the team */
        const real *sc = p->scale, *sh = p->shift;
        for (int f = 0; f < p->F; f++)
            if ((sc && sc[f] != RL(1.0)) || (sh && sh[f] != RL(0.0)))
                ri->affine = 1;
        if (ri->affine) {
            real *b = OMP_FN(omp_scratch)(OMP_SCR_SHARED, 2 * (size_t)p->F * sizeof(real));
            for (int f = 0; f < p->F; f++) {
                b[f] = sc ? sc[f] : RL(1.0);
                b[p->F + f] = sh ? sh[f] : RL(0.0);
            }
            ri->sc0 = b;
            ri->sh0 = b + p->F;
        }
    }
    int fb = RS_ACC / (2 * p->Q);
    if (fb > RS_FB)
        fb = RS_FB;
    if (fb > 8)
        fb &= ~7;
    ri->fbmax = fb < 1 ? 1 : fb;
}

/* scale/shift of edge e for features [f0, f0+fb) */
static void rs_affine(const ecenet_realspace_params *p, int64_t e, ecenet_idx tsrc,
                      ecenet_idx ttgt, int f0, int fb, real *sc, real *sh)
{
    const real *bs = p->scale, *bh = p->shift;
    const real *ss = p->scale_src, *st = p->scale_tgt, *hs = p->shift_src, *ht = p->shift_tgt;
    const int64_t F = p->F;
    for (int f = 0; f < fb; f++) {
        sc[f] = bs ? bs[f0 + f] : RL(1.0);
        sh[f] = bh ? bh[f0 + f] : RL(0.0);
    }
    if (ss)
        for (int f = 0; f < fb; f++)
            sc[f] += ss[tsrc[e] * F + f0 + f];
    if (st)
        for (int f = 0; f < fb; f++)
            sc[f] += st[ttgt[e] * F + f0 + f];
    if (hs)
        for (int f = 0; f < fb; f++)
            sh[f] += hs[tsrc[e] * F + f0 + f];
    if (ht)
        for (int f = 0; f < fb; f++)
            sh[f] += ht[ttgt[e] * F + f0 + f];
}

/* grid values v[0..fb) at grid point k from the (Q,2,F) block Xe */
OMP_INLINE void rs_synth(const rs_info *ri, const real *Xe, int f0, int fb, int k, real *v)
{
    const int F = ri->F, G = ri->G;
    {
        const real c = ri->cs[k];
        const real *xc = Xe + f0;
        if (ri->m0sin) {
            const real s = ri->ss[k];
            const real *xs = Xe + F + f0;
            OMP_SIMD
            for (int f = 0; f < fb; f++)
                v[f] = xc[f] * c + xs[f] * s;
        } else {
            OMP_SIMD
            for (int f = 0; f < fb; f++)
                v[f] = xc[f] * c;
        }
    }
    for (int m = 1; m < ri->Q; m++) {
        const real c = ri->cs[m * G + k], s = ri->ss[m * G + k];
        const real *xc = Xe + (int64_t)(2 * m) * F + f0, *xs = xc + F;
        OMP_SIMD
        for (int f = 0; f < fb; f++)
            v[f] += xc[f] * c + xs[f] * s;
    }
}

/* the cos and sin halves of rs_synth at grid point k: c[f] = Σ_m Xc[m]
 * cos_synth[m,k], s[f] = Σ_m Xs[m] sin_synth[m,k] (f_k = c + s; on a
 * grid_sym layer f_{G-k} = c - s) */
OMP_INLINE void rs_synth_cs(const rs_info *ri, const real *Xe, int f0, int fb, int k, real *c,
                            real *s)
{
    const int F = ri->F, G = ri->G;
    {
        const real a = ri->cs[k], b = ri->ss[k];
        const real *xc = Xe + f0, *xs = Xe + F + f0;
        OMP_SIMD
        for (int f = 0; f < fb; f++)
            c[f] = xc[f] * a;
        if (ri->m0sin) {
            OMP_SIMD
            for (int f = 0; f < fb; f++)
                s[f] = xs[f] * b;
        } else {
            for (int f = 0; f < fb; f++)
                s[f] = RL(0.0);
        }
    }
    for (int m = 1; m < ri->Q; m++) {
        const real a = ri->cs[m * G + k], b = ri->ss[m * G + k];
        const real *xc = Xe + (int64_t)(2 * m) * F + f0, *xs = xc + F;
        OMP_SIMD
        for (int f = 0; f < fb; f++) {
            c[f] += xc[f] * a;
            s[f] += xs[f] * b;
        }
    }
}

/* (v, w) <- (v + w, v - w): a mirrored pair's two points from its halves, or
 * its even and odd parts from its two points */
OMP_INLINE void rs_pm(int fb, real *v, real *w)
{
    OMP_SIMD
    for (int f = 0; f < fb; f++) {
        const real a = v[f], b = w[f];
        v[f] = a + b;
        w[f] = a - b;
    }
}

/* v <- scale·v + shift (the affine, where there is one) */
OMP_INLINE void rs_affine_apply(const rs_info *ri, int fb, const real *scp, const real *shp,
                                real *v)
{
    if (ri->affine) {
        OMP_SIMD
        for (int f = 0; f < fb; f++)
            v[f] = scp[f] * v[f] + shp[f];
    }
}

/* Ye (=, or += if accumulate) RealSpace(Xe) for edge e */
OMP_CLONES
static void rs_edge_fwd(const ecenet_realspace_params *p, const rs_info *ri, int64_t e,
                        ecenet_idx tsrc, ecenet_idx ttgt, const real *Xe, real *Ye,
                        int accumulate)
{
    const int F = ri->F, Q = ri->Q, G = ri->G;
    real acc[RS_ACC], v[RS_FB], w[RS_FB], sc[RS_FB], sh[RS_FB];
    for (int f0 = 0; f0 < F; f0 += ri->fbmax) {
        const int fb = F - f0 < ri->fbmax ? F - f0 : ri->fbmax;
        const real *scp = sc, *shp = sh;
        if (ri->affine == 2) {
            rs_affine(p, e, tsrc, ttgt, f0, fb, sc, sh);
        } else if (ri->affine == 1) {
            scp = ri->sc0 + f0;
            shp = ri->sh0 + f0;
        }
        for (int q = 0; q < 2 * Q * fb; q++)
            acc[q] = RL(0.0);
        /* grid_sym: points 0 and the pairs (k, G - k) from row k; the
         * analysis of a pair on its even (v) and odd (w) parts */
        for (int k = 0; k < (ri->sym ? (G + 1) / 2 : G); k++) {
            if (ri->sym && k > 0) {
                rs_synth_cs(ri, Xe, f0, fb, k, v, w);
                rs_pm(fb, v, w);
                rs_affine_apply(ri, fb, scp, shp, v);
                rs_affine_apply(ri, fb, scp, shp, w);
                omp_act_inplace(ri->act, fb, v);
                omp_act_inplace(ri->act, fb, w);
                rs_pm(fb, v, w);
                for (int m = 0; m < Q; m++) {
                    const real a = ri->ca[k * Q + m], b = ri->sa[k * Q + m];
                    real *ac = acc + (2 * m) * fb, *as = ac + fb;
                    OMP_SIMD
                    for (int f = 0; f < fb; f++) {
                        ac[f] += v[f] * a;
                        as[f] += w[f] * b;
                    }
                }
                continue;
            }
            rs_synth(ri, Xe, f0, fb, k, v);
            rs_affine_apply(ri, fb, scp, shp, v);
            omp_act_inplace(ri->act, fb, v);
            for (int m = 0; m < Q; m++) {
                const real a = ri->ca[k * Q + m], b = ri->sa[k * Q + m];
                real *ac = acc + (2 * m) * fb, *as = ac + fb;
                OMP_SIMD
                for (int f = 0; f < fb; f++) {
                    ac[f] += v[f] * a;
                    as[f] += v[f] * b;
                }
            }
        }
        rs_store(Ye, acc, Q, F, f0, fb, accumulate);
    }
}

/* Xb (=, or += if accumulate) ∂/∂X of <Yb, RealSpace(X)> for edge e */
OMP_CLONES
static void rs_edge_vjp(const ecenet_realspace_params *p, const rs_info *ri, int64_t e,
                        ecenet_idx tsrc, ecenet_idx ttgt, const real *Xe, const real *Yb,
                        real *Xb, int accumulate)
{
    const int F = ri->F, Q = ri->Q, G = ri->G;
    real acc[RS_ACC], v[RS_FB], w[RS_FB], gb[RS_FB], hb[RS_FB], sc[RS_FB], sh[RS_FB];
    for (int f0 = 0; f0 < F; f0 += ri->fbmax) {
        const int fb = F - f0 < ri->fbmax ? F - f0 : ri->fbmax;
        const real *scp = sc, *shp = sh;
        if (ri->affine == 2) {
            rs_affine(p, e, tsrc, ttgt, f0, fb, sc, sh);
        } else if (ri->affine == 1) {
            scp = ri->sc0 + f0;
            shp = ri->sh0 + f0;
        }
        for (int q = 0; q < 2 * Q * fb; q++)
            acc[q] = RL(0.0);
        for (int k = 0; k < (ri->sym ? (G + 1) / 2 : G); k++) {
            if (ri->sym && k > 0) {
                /* the pair (k, G - k): grid values v, w; their output
                 * gradients gb, hb from the cos and sin halves of the
                 * analysis; the synthesis side on the even and odd parts */
                rs_synth_cs(ri, Xe, f0, fb, k, v, w);
                rs_pm(fb, v, w);
                rs_affine_apply(ri, fb, scp, shp, v);
                rs_affine_apply(ri, fb, scp, shp, w);
                for (int f = 0; f < fb; f++)
                    gb[f] = hb[f] = RL(0.0);
                for (int m = 0; m < Q; m++) {
                    const real a = ri->ca[k * Q + m], b = ri->sa[k * Q + m];
                    const real *yc = Yb + (int64_t)(2 * m) * F + f0, *ys = yc + F;
                    OMP_SIMD
                    for (int f = 0; f < fb; f++) {
                        gb[f] += yc[f] * a;
                        hb[f] += ys[f] * b;
                    }
                }
                rs_pm(fb, gb, hb);
                omp_act_grad_mul(ri->act, fb, v, gb);
                omp_act_grad_mul(ri->act, fb, w, hb);
                if (ri->affine) {
                    OMP_SIMD
                    for (int f = 0; f < fb; f++) {
                        gb[f] *= scp[f];
                        hb[f] *= scp[f];
                    }
                }
                rs_pm(fb, gb, hb);
                for (int m = 0; m < Q; m++) {
                    const real c = ri->cs[m * G + k], s = ri->ss[m * G + k];
                    real *ac = acc + (2 * m) * fb, *as = ac + fb;
                    OMP_SIMD
                    for (int f = 0; f < fb; f++) {
                        ac[f] += gb[f] * c;
                        as[f] += hb[f] * s;
                    }
                }
                continue;
            }
            rs_synth(ri, Xe, f0, fb, k, v);
            rs_affine_apply(ri, fb, scp, shp, v);
            {
                const real a = ri->ca[k * Q], b = ri->sa[k * Q];
                const real *yc = Yb + f0, *ys = Yb + F + f0;
                OMP_SIMD
                for (int f = 0; f < fb; f++)
                    gb[f] = yc[f] * a + ys[f] * b;
            }
            for (int m = 1; m < Q; m++) {
                const real a = ri->ca[k * Q + m], b = ri->sa[k * Q + m];
                const real *yc = Yb + (int64_t)(2 * m) * F + f0, *ys = yc + F;
                OMP_SIMD
                for (int f = 0; f < fb; f++)
                    gb[f] += yc[f] * a + ys[f] * b;
            }
            omp_act_grad_mul(ri->act, fb, v, gb);
            if (ri->affine) {
                OMP_SIMD
                for (int f = 0; f < fb; f++)
                    gb[f] *= scp[f];
            }
            for (int m = 0; m < Q; m++) {
                const real c = ri->cs[m * G + k], s = ri->ss[m * G + k];
                real *ac = acc + (2 * m) * fb, *as = ac + fb;
                if (m == 0 && !ri->m0sin) {
                    OMP_SIMD
                    for (int f = 0; f < fb; f++)
                        ac[f] += gb[f] * c;
                    continue;
                }
                OMP_SIMD
                for (int f = 0; f < fb; f++) {
                    ac[f] += gb[f] * c;
                    as[f] += gb[f] * s;
                }
            }
        }
        rs_store(Xb, acc, Q, F, f0, fb, accumulate);
    }
}

void OMP_FN(omp_realspace_fwd)(int64_t E, const ecenet_realspace_params *p, ecenet_idx tsrc,
                               ecenet_idx ttgt, const void *X_, void *Y_)
{
    const real *X = X_;
    real *Y = Y_;
    rs_info ri;
    rs_info_init(p, &ri);
    const int64_t XE = 2 * (int64_t)p->Q * p->F;
#pragma omp parallel for schedule(static)
    for (int64_t e = 0; e < E; e++)
        rs_edge_fwd(p, &ri, e, tsrc, ttgt, X + e * XE, Y + e * XE, 0);
}

void OMP_FN(omp_realspace_vjp)(int64_t E, const ecenet_realspace_params *p, ecenet_idx tsrc,
                               ecenet_idx ttgt, const void *X_, const void *Ybar_, void *Xbar_)
{
    const real *X = X_, *Ybar = Ybar_;
    real *Xbar = Xbar_;
    rs_info ri;
    rs_info_init(p, &ri);
    const int64_t XE = 2 * (int64_t)p->Q * p->F;
#pragma omp parallel for schedule(static)
    for (int64_t e = 0; e < E; e++)
        rs_edge_vjp(p, &ri, e, tsrc, ttgt, X + e * XE, Ybar + e * XE, Xbar + e * XE, 1);
}

void OMP_FN(omp_add)(int64_t n, const void *X_, void *Y_)
{
    const real *X = X_;
    real *Y = Y_;
#pragma omp parallel for schedule(static) if (n > 65536)
    for (int64_t k = 0; k < n; k++)
        Y[k] += X[k];
}

/* ---- fused layer ------------------------------------------------------------------ */

void OMP_FN(omp_layer_fwd)(int64_t E, const ecenet_linear_params *lin,
                           const ecenet_realspace_params *rs, ecenet_idx tsrc, ecenet_idx ttgt,
                           void *X_, void *Z_)
{
    real *X = X_, *Z = Z_;
    rs_info ri;
    rs_info_init(rs, &ri);
    const int TE = OMP_FN(omp_tile_edges)(lin->fout);
    const int64_t nti = (E + TE - 1) / TE;
    const int64_t XEi = 2 * (int64_t)lin->Q * lin->fin, XEo = 2 * (int64_t)lin->Q * lin->fout;
#pragma omp parallel if (nti > 1)
    {
        char *buf = OMP_FN(omp_scratch)(OMP_SCR_TILE, lin_scratch_bytes(lin, TE) + 64);
        lin_scratch s;
        lin_scratch_carve(lin, TE, &buf, &s);
#pragma omp for schedule(dynamic, 1)
        for (int64_t t = 0; t < nti; t++) {
            const int64_t e0 = t * TE;
            const int nt = (int)(E - e0 < TE ? E - e0 : TE);
            lin_group(lin, e0, nt, tsrc, ttgt, &s);
            lin_tile_fwd(lin, nt, &s, X + e0 * XEi, Z + e0 * XEo, e0 + nt < E);
            for (int r = 0; r < nt; r++)
                rs_edge_fwd(rs, &ri, e0 + r, tsrc, ttgt, Z + (e0 + r) * XEo, X + (e0 + r) * XEi, 1);
        }
    }
}

void OMP_FN(omp_layer_vjp)(int64_t E, const ecenet_linear_params *lin,
                           const ecenet_realspace_params *rs, ecenet_idx tsrc, ecenet_idx ttgt,
                           const void *Z_, void *Xbar_, void *tmp)
{
    (void)tmp; /* the tile's ∂/∂Z lives in per-thread scratch instead */
    const real *Z = Z_;
    real *Xbar = Xbar_;
    rs_info ri;
    rs_info_init(rs, &ri);
    const int TE = OMP_FN(omp_tile_edges)(lin->fout);
    const int64_t nti = (E + TE - 1) / TE;
    const int64_t XEi = 2 * (int64_t)lin->Q * lin->fin, XEo = 2 * (int64_t)lin->Q * lin->fout;
#pragma omp parallel if (nti > 1)
    {
        const size_t tb = (size_t)TE * XEo * sizeof(real);
        char *buf =
            OMP_FN(omp_scratch)(OMP_SCR_TILE, omp_pad64(tb) + lin_scratch_bytes(lin, TE) + 64);
        real *Tz = omp_carve(&buf, tb);
        lin_scratch s;
        lin_scratch_carve(lin, TE, &buf, &s);
#pragma omp for schedule(dynamic, 1)
        for (int64_t t = 0; t < nti; t++) {
            const int64_t e0 = t * TE;
            const int nt = (int)(E - e0 < TE ? E - e0 : TE);
            for (int r = 0; r < nt; r++) /* reads the tile of X̄ (the layer output's gradient) */
                rs_edge_vjp(rs, &ri, e0 + r, tsrc, ttgt, Z + (e0 + r) * XEo, Xbar + (e0 + r) * XEi,
                            Tz + r * XEo, 0);
            lin_group(lin, e0, nt, tsrc, ttgt, &s);
            /* then accumulates into it; Tz's scratch has more than a row of slack */
            lin_tile_vjp(lin, nt, &s, Tz, XEo, Xbar + e0 * XEi, 1);
        }
    }
}
