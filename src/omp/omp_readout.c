/* Readout (SPEC §14): the per-edge MLP as BLIS GEMMs over tiles of edges
 * (shared with the FiLM gate, omp_film.c), per-edge energy, and the fp64 sum
 * in fixed chunks (independent of the number of threads); mirrors
 * ref_readout.c. */
#include "omp_ops.h"

int OMP_FN(omp_mlp_hidden_size)(const ecenet_mlp_params *p)
{
    int h = 0;
    for (int k = 0; k + 1 < p->n_layers; k++)
        h += p->dims[k + 1];
    return h;
}

static int mlp_dmax(const ecenet_mlp_params *p)
{
    int d = 1;
    for (int k = 0; k <= p->n_layers; k++)
        if (p->dims[k] > d)
            d = p->dims[k];
    return d;
}

static int mlp_has_corr(const ecenet_mlp_params *p)
{
    for (int k = 0; k < p->n_layers; k++)
        if (p->w_src[k] || p->w_tgt[k])
            return 1;
    return 0;
}

size_t OMP_FN(omp_mlp_tile_scratch)(const ecenet_mlp_params *p, int nt)
{
    const size_t row = (size_t)nt * mlp_dmax(p) * sizeof(real);
    size_t b = 3 * omp_pad64(row);
    if (mlp_has_corr(p))
        b += 2 * omp_pad64(row) + 2 * omp_pad64((size_t)nt * sizeof(int32_t)) +
             2 * omp_pad64((size_t)(2 * p->T + 1) * sizeof(int32_t));
    return b;
}

typedef struct {
    real *b0, *b1, *b2, *As, *Cs;
    int32_t *perm_s, *off_s, *perm_t, *off_t;
    int grouped_s, grouped_t;
} mlp_scratch;

static void mlp_scratch_carve(const ecenet_mlp_params *p, int nt, char *buf, mlp_scratch *s)
{
    const size_t row = (size_t)nt * mlp_dmax(p) * sizeof(real);
    memset(s, 0, sizeof *s);
    s->b0 = omp_carve(&buf, row);
    s->b1 = omp_carve(&buf, row);
    s->b2 = omp_carve(&buf, row);
    if (!mlp_has_corr(p))
        return;
    s->As = omp_carve(&buf, row);
    s->Cs = omp_carve(&buf, row);
    s->perm_s = omp_carve(&buf, (size_t)nt * sizeof(int32_t));
    s->perm_t = omp_carve(&buf, (size_t)nt * sizeof(int32_t));
    s->off_s = omp_carve(&buf, (size_t)(2 * p->T + 1) * sizeof(int32_t));
    s->off_t = omp_carve(&buf, (size_t)(2 * p->T + 1) * sizeof(int32_t));
}

/* C (nt x n) += A (nt x k)·op(W_t) for each type group, layer `k` corrections */
static void mlp_corr(const ecenet_mlp_params *p, int layer, int64_t e0, int nt,
                     ecenet_idx tsrc, ecenet_idx ttgt, mlp_scratch *s, int transpose,
                     const real *A, int64_t lda, real *C, int64_t ldc)
{
    const int din = p->dims[layer], dout = p->dims[layer + 1];
    const int64_t ws = (int64_t)din * dout;
    /* forward: B[i][o] = W[o][i] (rs 1, cs din), k = din, n = dout;
     * transposed: B[o][i] = W[o][i] (rs din, cs 1), k = dout, n = din */
    const int64_t rsb = transpose ? din : 1, csb = transpose ? 1 : din;
    const int64_t kk = transpose ? dout : din, nn = transpose ? din : dout;
    if (p->w_src[layer]) {
        if (!s->grouped_s) {
            OMP_FN(omp_group_rows)(e0, nt, tsrc, p->T, s->perm_s, s->off_s);
            s->grouped_s = 1;
        }
        OMP_FN(omp_corr_gemm)(nt, s->perm_s, s->off_s, p->T, p->w_src[layer], ws, rsb, csb, kk,
                              nn, A, lda, C, ldc, s->As, s->Cs);
    }
    if (p->w_tgt[layer]) {
        if (!s->grouped_t) {
            OMP_FN(omp_group_rows)(e0, nt, ttgt, p->T, s->perm_t, s->off_t);
            s->grouped_t = 1;
        }
        OMP_FN(omp_corr_gemm)(nt, s->perm_t, s->off_t, p->T, p->w_tgt[layer], ws, rsb, csb, kk,
                              nn, A, lda, C, ldc, s->As, s->Cs);
    }
}

void OMP_FN(omp_mlp_tile_fwd)(const ecenet_mlp_params *p, int64_t e0, int nt, ecenet_idx tsrc,
                              ecenet_idx ttgt, const real *x, int64_t ldx, real *H, int64_t nh,
                              real *out, int64_t ldo, char *scr, int a_next)
{
    mlp_scratch s;
    mlp_scratch_carve(p, nt, scr, &s);
    const real *in = x;
    int64_t ldin = ldx, hoff = 0;
    for (int k = 0; k < p->n_layers; k++) {
        const int din = p->dims[k], dout = p->dims[k + 1], last = k + 1 == p->n_layers;
        real *z = last ? out : (H ? H + hoff : s.b1);
        const int64_t ldz = last ? ldo : (H ? nh : dout);
        /* later layers read b0, which b1 follows */
        OMP_FN(omp_gemm)(nt, dout, din, in, ldin, 1, p->w[k], 1, din, RL(0.0), z, ldz, 1,
                         k ? 1 : a_next);
        if (p->b[k]) {
            const real *b = p->b[k];
            for (int r = 0; r < nt; r++) {
                real *zr = z + r * ldz;
                OMP_SIMD
                for (int o = 0; o < dout; o++)
                    zr[o] += b[o];
            }
        }
        mlp_corr(p, k, e0, nt, tsrc, ttgt, &s, 0, in, ldin, z, ldz);
        if (last)
            break;
        for (int r = 0; r < nt; r++) { /* the next layer's input: act(z) */
            real *a = s.b0 + (int64_t)r * dout;
            memcpy(a, z + r * ldz, (size_t)dout * sizeof(real));
            omp_act_inplace(p->act, dout, a);
        }
        in = s.b0;
        ldin = dout;
        hoff += dout;
    }
}

void OMP_FN(omp_mlp_tile_vjp)(const ecenet_mlp_params *p, int64_t e0, int nt, ecenet_idx tsrc,
                              ecenet_idx ttgt, const real *H, int64_t nh, const real *outbar,
                              int64_t ldob, real *xb, char *scr, int a_next)
{
    mlp_scratch s;
    mlp_scratch_carve(p, nt, scr, &s);
    int64_t hoff[ECENET_MLP_MAX + 1];
    hoff[0] = 0;
    for (int k = 0; k + 1 < p->n_layers; k++)
        hoff[k + 1] = hoff[k] + p->dims[k + 1];
    const real *zb = outbar;
    int64_t ldzb = ldob;
    for (int k = p->n_layers - 1; k >= 0; k--) {
        const int din = p->dims[k], dout = p->dims[k + 1];
        real *dst = k == 0 ? xb : ((k & 1) ? s.b0 : s.b1);
        /* later layers read b0 or b1, which b1 resp. b2 follows */
        OMP_FN(omp_gemm)(nt, din, dout, zb, ldzb, 1, p->w[k], din, 1, RL(0.0), dst, din, 1,
                         zb == outbar ? a_next : 1);
        mlp_corr(p, k, e0, nt, tsrc, ttgt, &s, 1, zb, ldzb, dst, din);
        if (k == 0)
            break;
        const real *Hk = H + hoff[k - 1]; /* pre-activation feeding layer k */
        for (int r = 0; r < nt; r++)
            omp_act_grad_mul(p->act, din, Hk + r * nh, dst + (int64_t)r * din);
        zb = dst;
        ldzb = din;
    }
}

void OMP_FN(omp_mlp_fwd)(const ecenet_dims *dm, const ecenet_mlp_params *p, ecenet_idx tsrc,
                         ecenet_idx ttgt, const void *X_, void *H_, void *y_)
{
    const real *X = X_;
    real *H = H_, *y = y_;
    const int64_t nh = OMP_FN(omp_mlp_hidden_size)(p), dout = p->dims[p->n_layers];
    const int64_t XE = (int64_t)dm->Q * 2 * dm->F, E = dm->E, TE = OMP_MLP_TILE;
    const int64_t nti = (E + TE - 1) / TE;
#pragma omp parallel if (nti > 1)
    {
        char *scr = OMP_FN(omp_scratch)(OMP_SCR_TILE, OMP_FN(omp_mlp_tile_scratch)(p, (int)TE));
#pragma omp for schedule(dynamic, 1)
        for (int64_t t = 0; t < nti; t++) {
            const int64_t e0 = t * TE;
            const int nt = (int)(E - e0 < TE ? E - e0 : TE);
            OMP_FN(omp_mlp_tile_fwd)(p, e0, nt, tsrc, ttgt, X + e0 * XE, XE, H ? H + e0 * nh : NULL,
                                     nh, y + e0 * dout, dout, scr, e0 + nt < E);
        }
    }
}

void OMP_FN(omp_mlp_vjp)(const ecenet_dims *dm, const ecenet_mlp_params *p, ecenet_idx tsrc,
                         ecenet_idx ttgt, const void *H_, const void *ybar_, void *Xbar_)
{
    const real *H = H_, *ybar = ybar_;
    real *Xbar = Xbar_;
    const int64_t nh = OMP_FN(omp_mlp_hidden_size)(p), dout = p->dims[p->n_layers];
    const int64_t XE = (int64_t)dm->Q * 2 * dm->F, E = dm->E, TE = OMP_MLP_TILE;
    const int64_t nti = (E + TE - 1) / TE;
    const int d0 = p->dims[0];
#pragma omp parallel if (nti > 1)
    {
        const size_t xbb = omp_pad64((size_t)TE * d0 * sizeof(real));
        char *scr = OMP_FN(omp_scratch)(OMP_SCR_TILE,
                                        xbb + OMP_FN(omp_mlp_tile_scratch)(p, (int)TE));
        real *xb = omp_carve(&scr, xbb);
#pragma omp for schedule(dynamic, 1)
        for (int64_t t = 0; t < nti; t++) {
            const int64_t e0 = t * TE;
            const int nt = (int)(E - e0 < TE ? E - e0 : TE);
            OMP_FN(omp_mlp_tile_vjp)(p, e0, nt, tsrc, ttgt, H ? H + e0 * nh : NULL, nh,
                                     ybar + e0 * dout, dout, xb, scr, e0 + nt < E);
            for (int r = 0; r < nt; r++) {
                real *x = Xbar + (e0 + r) * XE;
                const real *b = xb + (int64_t)r * d0;
                OMP_SIMD
                for (int i = 0; i < d0; i++)
                    x[i] += b[i];
            }
        }
    }
}

void OMP_FN(omp_energy_fwd)(int64_t E, int K, const void *y_, const void *fr_, void *eps_)
{
    const real *y = y_, *fr = fr_;
    real *eps = eps_;
#pragma omp parallel for schedule(static) if (E > 4096)
    for (int64_t e = 0; e < E; e++) {
        real acc = RL(0.0);
        for (int k = 0; k < K; k++)
            acc += y[e * K + k] * fr[e * K + k];
        eps[e] = acc;
    }
}

void OMP_FN(omp_energy_vjp)(int64_t E, int K, const void *y_, const void *fr_, void *ybar_,
                            void *frbar_)
{
    const real *y = y_, *fr = fr_;
    real *ybar = ybar_, *frbar = frbar_;
    const int64_t n = E * K;
#pragma omp parallel for schedule(static) if (n > 65536)
    for (int64_t q = 0; q < n; q++) {
        ybar[q] += fr[q];
        frbar[q] += y[q];
    }
}

#define SUM_CHUNK 4096

/* Σ x in fp64: chunk sums in parallel, then the chunks in order. */
double OMP_FN(omp_sum)(int64_t n, const void *x_)
{
    const real *x = x_;
    if (n <= 0)
        return 0.0;
    const int64_t nc = (n + SUM_CHUNK - 1) / SUM_CHUNK;
    double *part = OMP_FN(omp_scratch)(OMP_SCR_SHARED, (size_t)nc * sizeof(double));
#pragma omp parallel for schedule(static) if (nc > 1)
    for (int64_t c = 0; c < nc; c++) {
        const int64_t k1 = (c + 1) * SUM_CHUNK < n ? (c + 1) * SUM_CHUNK : n;
        double acc = 0.0;
        for (int64_t k = c * SUM_CHUNK; k < k1; k++)
            acc += (double)x[k];
        part[c] = acc;
    }
    double acc = 0.0;
    for (int64_t c = 0; c < nc; c++)
        acc += part[c];
    return acc;
}
