/* The layer ops against ref: the equivariant linear (SPEC §10), the RealSpace
 * nonlinearity (§11), the residual add and the fused layer entries (§12),
 * with cuda's kernel variants (tensor cores, split TF32, packed frame, chunks). */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "backend.h"
#include "ref.h"
#include "test_util.h"
#include "harness.h"
#ifdef ECENET_HAVE_CUDA
#include "cuda_backend.h"
#endif

/* linear parameters, host and backend */
typedef struct {
    ecenet_linear_params h, d;
} lin_pair;

static lin_pair make_linear(tctx *c, int fin, int fout, int Q, int T, int bias, int corr)
{
    lin_pair p;
    memset(&p, 0, sizeof p);
    p.h.fin = p.d.fin = fin;
    p.h.fout = p.d.fout = fout;
    p.h.Q = p.d.Q = Q;
    p.h.T = p.d.T = T;
    const size_t n = (size_t)Q * fout * fin;
    const double sc = 1.0 / sqrt((double)fin);
    tens w = t_rand(c, n, sc);
    p.h.w = w.h;
    p.d.w = w.d;
    if (c->be->linear_w_t) { /* as the engine uploads it: w transposed per m */
        double *t = hbuf(c, n);
        ecn_linear_transpose(Q, fout, fin, w.h, t);
        p.d.w_t = t_from(c, t, n).d;
    }
    if (c->be->linear_split && !c->be->linear_split(0, NULL, NULL)) {
        /* as the engine makes them (where the backend's GEMMs read them) */
        void *ws = dalloc(c, 2 * n * c->be->real_size);
        c->be->linear_split(n, p.d.w, ws);
        p.d.w_split = ws;
        if (p.d.w_t) {
            void *wts = dalloc(c, 2 * n * c->be->real_size);
            c->be->linear_split(n, p.d.w_t, wts);
            p.d.w_t_split = wts;
        }
    }
    if (bias) {
        tens b = t_rand(c, (size_t)fout, 0.5);
        p.h.bias = b.h;
        p.d.bias = b.d;
    }
    if (corr) {
        tens ws = t_rand(c, (size_t)T * n, 0.3 * sc), wt = t_rand(c, (size_t)T * n, 0.3 * sc);
        p.h.w_src = ws.h;
        p.d.w_src = ws.d;
        p.h.w_tgt = wt.h;
        p.d.w_tgt = wt.d;
    }
    return p;
}

typedef struct {
    ecenet_realspace_params h, d;
} rs_pair;

/* grid tables from θ_k = 2πk/G (random ones if `random_tables`) */
static rs_pair make_rs(tctx *c, int F, int Q, int G, int T, int act, int affine, int corr,
                       int random_tables)
{
    rs_pair p;
    memset(&p, 0, sizeof p);
    p.h.F = p.d.F = F;
    p.h.Q = p.d.Q = Q;
    p.h.G = p.d.G = G;
    p.h.T = p.d.T = T;
    p.h.act = p.d.act = act;
    double *cs = hbuf(c, (size_t)Q * G), *ss = hbuf(c, (size_t)Q * G);
    double *ca = hbuf(c, (size_t)Q * G), *sa = hbuf(c, (size_t)Q * G);
    for (int m = 0; m < Q; m++)
        for (int k = 0; k < G; k++) {
            const double th = 2.0 * M_PI * k / G, w = m ? 2.0 / G : 1.0 / G;
            cs[m * G + k] = random_tables ? tu_normal() : cos(m * th);
            ss[m * G + k] = random_tables ? tu_normal() : sin(m * th);
            ca[k * Q + m] = random_tables ? tu_normal() / G : w * cos(m * th);
            sa[k * Q + m] = random_tables ? tu_normal() / G : w * sin(m * th);
        }
    tens tcs = t_from(c, cs, (size_t)Q * G), tss = t_from(c, ss, (size_t)Q * G);
    tens tca = t_from(c, ca, (size_t)Q * G), tsa = t_from(c, sa, (size_t)Q * G);
    p.h.cos_synth = tcs.h; p.d.cos_synth = tcs.d;
    p.h.sin_synth = tss.h; p.d.sin_synth = tss.d;
    p.h.cos_analysis = tca.h; p.d.cos_analysis = tca.d;
    p.h.sin_analysis = tsa.h; p.d.sin_analysis = tsa.d;
    if (affine) {
        double *s1 = hbuf(c, (size_t)F);
        for (int f = 0; f < F; f++)
            s1[f] = 1.0 + 0.2 * tu_normal();
        tens sc = t_from(c, s1, (size_t)F), sh = t_rand(c, (size_t)F, 0.2);
        p.h.scale = sc.h; p.d.scale = sc.d;
        p.h.shift = sh.h; p.d.shift = sh.d;
    }
    if (corr) {
        tens a = t_rand(c, (size_t)T * F, 0.1), b = t_rand(c, (size_t)T * F, 0.1);
        tens e = t_rand(c, (size_t)T * F, 0.1), g = t_rand(c, (size_t)T * F, 0.1);
        p.h.scale_src = a.h; p.d.scale_src = a.d;
        p.h.scale_tgt = b.h; p.d.scale_tgt = b.d;
        p.h.shift_src = e.h; p.d.shift_src = e.d;
        p.h.shift_tgt = g.h; p.d.shift_tgt = g.d;
    }
    return p;
}

/* The table flags of test mode 0..3 (none, sin0_zero, both, grid_sym
 * alone) on p (the same on host and device); returns sin0_zero. grid: p has
 * make_rs's DFT tables, whose flags ecn_rs_table_flags must find (grid_sym
 * where G is odd, G >= 3; modes 2 and 3 set it only there); tables
 * built as the public release builds them (θ and cos/sin in float32, ~1e-6
 * off the mirror symmetry) keep sin0_zero and must lose grid_sym. */
static int rs_mode(rs_pair *p, int mode, int grid)
{
    ecenet_realspace_params f = p->h;
    ecn_rs_table_flags(&f);
    /* a mirror-symmetric grid needs G odd, G >= 3 */
    const int sym_ok = grid && f.G >= 3 && f.G % 2;
    ck_assert_int_eq(f.sin0_zero, grid);
    ck_assert_int_eq(f.grid_sym, sym_ok);
    if (sym_ok && f.Q >= 2) { /* Q = 1: cos(0) = 1, sin(0) = 0 exact in float32 too */
        const int Q = f.Q, G = f.G;
        double *t = malloc((size_t)4 * Q * G * sizeof(double));
        ck_assert_ptr_nonnull(t);
        double *cs = t, *ss = t + Q * G, *ca = t + 2 * Q * G, *sa = t + 3 * Q * G;
        for (int m = 0; m < Q; m++)
            for (int k = 0; k < G; k++) {
                const float th = (float)(2.0 * M_PI * k / G), w = m ? 2.0f / G : 1.0f / G;
                cs[m * G + k] = cosf((float)m * th);
                ss[m * G + k] = sinf((float)m * th);
                ca[k * Q + m] = w * cosf((float)m * th);
                sa[k * Q + m] = w * sinf((float)m * th);
            }
        ecenet_realspace_params r = f;
        r.cos_synth = cs;
        r.sin_synth = ss;
        r.cos_analysis = ca;
        r.sin_analysis = sa;
        ecn_rs_table_flags(&r);
        ck_assert_int_eq(r.sin0_zero, 1);
        ck_assert_int_eq(r.grid_sym, 0);
        free(t);
    }
    const int s0z = mode == 1 || mode == 2, sym = mode >= 2 && sym_ok;
    p->h.sin0_zero = p->d.sin0_zero = s0z;
    p->h.grid_sym = p->d.grid_sym = sym;
    return s0z;
}

/* ReLU's derivative jumps at 0: where a pre-activation lies within rounding
 * of the kink, an fp32 VJP and the fp64 reference legitimately take
 * different sides (seen on the H200: 4.9e-4 rel L2 against the 1e-4 bound on
 * the E = 5000 shape under another random stream, from a few such rows).
 * Rows (edge, feature) with a pre-activation within 1e-5 of the size of its
 * terms (20x the fp32 rounding of that sum) get a zero upstream gradient,
 * so the VJP is compared where it is defined; at most 1% of the rows may be
 * masked (measured: at most 0.1% per shape). Returns how many were. */
static size_t relu_kink_mask(const ecenet_realspace_params *p, const int32_t *ts,
                             const int32_t *tt, int64_t E, const double *X, double *Yb)
{
    const int F = p->F, Q = p->Q, G = p->G;
    const double *cs = p->cos_synth, *ss = p->sin_synth;
    const double *sc = p->scale, *sh = p->shift;
    size_t masked = 0;
    for (int64_t e = 0; e < E; e++)
        for (int f = 0; f < F; f++) {
            double scale = sc ? sc[f] : 1.0, shift = sh ? sh[f] : 0.0;
            const double *a_s = p->scale_src, *a_t = p->scale_tgt, *b_s = p->shift_src,
                         *b_t = p->shift_tgt;
            scale += (a_s ? a_s[(size_t)ts[e] * F + f] : 0.0) + (a_t ? a_t[(size_t)tt[e] * F + f] : 0.0);
            shift += (b_s ? b_s[(size_t)ts[e] * F + f] : 0.0) + (b_t ? b_t[(size_t)tt[e] * F + f] : 0.0);
            const double *xe = X + (size_t)e * Q * 2 * F + f;
            int near = 0;
            for (int k = 0; k < G && !near; k++) {
                double v = 0.0, size = 0.0;
                for (int m = 0; m < Q; m++) {
                    const double tc = xe[(2 * m) * F] * cs[m * G + k];
                    const double ts_ = xe[(2 * m + 1) * F] * ss[m * G + k];
                    v += tc + ts_;
                    size += fabs(tc) + fabs(ts_);
                }
                near = fabs(scale * v + shift) <= 1e-5 * (fabs(scale) * size + fabs(shift));
            }
            if (near) {
                double *ye = Yb + (size_t)e * Q * 2 * F + f;
                for (int j = 0; j < 2 * Q; j++)
                    ye[j * F] = 0.0;
                masked++;
            }
        }
    ck_assert_msg(masked <= (size_t)(E * F) / 100 + 1, "relu_kink_mask: %zu of %lld rows masked",
                  masked, (long long)(E * F));
    return masked;
}

/* cuda tensor-core kernels: set the mode (returns the old one), count launches */
static int tc_set(int is_cuda, int mode) { return choice_set(is_cuda, CHOICE_LAYER_TC, mode); }
static unsigned long long tc_runs(int is_cuda) { return choice_runs(is_cuda, CHOICE_LAYER_TC); }
/* the op launched the tensor-core kernel once if it applies, else not at all */
static void tc_expect(int is_cuda, unsigned long long before, int applies, const char *op,
                      const char *what)
{
    if (!is_cuda)
        return;
    const unsigned long long ran = tc_runs(is_cuda) - before;
    ck_assert_msg(ran == (unsigned long long)(applies != 0),
                  "%s %s: tensor-core kernel ran %llu times, expected %d", op, what, ran,
                  applies != 0);
}

/* Whether the tensor-core layer kernel of mode tc runs in the fused layer
 * forward (*fwd) and VJP (*vjp) on these parameters: mma.sync (tc = 2) and
 * the off mode's paths take fp32, Q = 4, F % 64 == 0, no per-type weights
 * or affine (a per-feature affine is fine), mode 2's VJP only in split TF32;
 * the wgmma kernels (tc = 3 the forward, 4 the VJP on the transposed
 * weights) TF32 on sin0_zero layers, where built and on sm_90, one CTA per
 * m and 128 features, clusters of 4·F/128 <= 8, no per-type terms */
static void layer_tc_applies(const tctx *c, const lin_pair *lp, int tc, int has_edges, int Q,
                             int F, int corr, int split, int s0z, int *fwd, int *vjp)
{
    const int fits = tc && c->be->real_size == 4 && Q == 4 && F % 64 == 0 && has_edges;
    *fwd = tc <= 2 && fits && !corr;
    *vjp = tc == 2 && fits && split;
#ifdef ECENET_HAVE_CUDA
    if (tc >= 3) {
        const int wg = fits && !corr && !split && s0z && ecn_cuda_layer_wg_available() &&
                       F % 128 == 0 && F <= 256;
        *fwd = tc == 3 && wg;
        *vjp = tc == 4 && wg && lp->d.w_t != NULL;
    }
#else
    (void)lp;
    (void)s0z;
#endif
}

/* The fused layer entries against ref: layer_fwd (X += RealSpace(Linear(X)),
 * Z kept) from X, and layer_vjp on random Z (zero sin m = 0 slot if zero_z).
 * The ref results are made once and check every tensor-core mode of cuda
 * (tc = 0, 2, 3, 4; one run, tc = 0, elsewhere): the kernel of the mode must
 * run once in each entry where layer_tc_applies says, else not at all */
static void layer_check(tctx *c, setup *u, lin_pair *lp, rs_pair *rp, const tens *X, int zero_z,
                        const char *what, int is_cuda, int split, int s0z, int corr)
{
    const ecenet_backend *be = c->be;
    const ecenet_dims *dm = &u->dh;
    const int64_t E = dm->E;
    const size_t n = (size_t)E * dm->Q * 2 * dm->F;
    tens Xio = {0}, Z = {0}, Zb = {0}, Xb = {0};
    void *dtmp = NULL;
    double *tmp = hbuf(c, n);
    if (be->layer_fwd) {
        /* X in/out starts from X */
        Xio = t_acc(c, n);
        memcpy(Xio.h, X->h, n * sizeof(double));
        memcpy(Xio.init, X->h, n * sizeof(double));
        Z = t_out(c, n);
        ref_linear_fwd(E, &lp->h, u->tsrc, u->ttgt, X->h, Z.h);
        ref_realspace_fwd(E, &rp->h, u->tsrc, u->ttgt, Z.h, tmp);
        ref_add((int64_t)n, tmp, Xio.h);
    }
    if (be->layer_vjp) {
        Zb = features(c, E, dm->Q, dm->F, zero_z); /* the Z the VJP recomputes from */
        Xb = t_acc(c, n);
        for (size_t k = 0; k < n; k++)
            tmp[k] = 0.0;
        ref_realspace_vjp(E, &rp->h, u->tsrc, u->ttgt, Zb.h, Xb.h, tmp);
        ref_linear_vjp(E, &lp->h, u->tsrc, u->ttgt, tmp, Xb.h);
        dtmp = dalloc(c, n * be->real_size);
    }
    char op[128];
    for (int tc = 0; tc <= (is_cuda ? 4 : 0); tc += tc ? 1 : 2) {
        int tc_fwd, tc_vjp;
        layer_tc_applies(c, lp, tc, E > 0, dm->Q, dm->F, corr, split, s0z, &tc_fwd, &tc_vjp);
        snprintf(op, sizeof op, "%s tc=%d", what, tc);
        const int tc_old = tc_set(is_cuda, tc);
        if (be->layer_fwd) {
            t_reset(c, &Xio);
            t_reset(c, &Z);
            const unsigned long long n0 = tc_runs(is_cuda);
            be->layer_fwd(E, &lp->d, &rp->d, u->d_tsrc, u->d_ttgt, Xio.d, Z.d);
            t_check(c, &Z, op, "fwd Z", 0);
            t_check(c, &Xio, op, "fwd X += RealSpace(Z)", 0);
            tc_expect(is_cuda, n0, tc_fwd, op, "fwd");
        }
        if (be->layer_vjp) {
            t_reset(c, &Xb);
            const unsigned long long n0 = tc_runs(is_cuda);
            be->layer_vjp(E, &lp->d, &rp->d, u->d_tsrc, u->d_ttgt, Zb.d, Xb.d, dtmp);
            t_check(c, &Xb, op, "vjp Xbar", 1);
            tc_expect(is_cuda, n0, tc_vjp, op, "vjp");
        }
        tc_set(is_cuda, tc_old);
    }
}

void test_layers(tctx *c, setup *u)
{
    const ecenet_backend *be = c->be;
    const ecenet_dims *dm = &u->dh;
    const int F = dm->F, Q = dm->Q, G = dm->G, T = dm->T;
    const int64_t E = dm->E;
    const size_t XE = (size_t)Q * 2 * F;
    char op[96];
    /* cuda: the tensor-core kernels (cuda_layer_tc.cu) are tested with them off
     * (tc = 0), on (tc = 2: mma.sync, split TF32 for strict fp32), with the
     * wgmma forward (tc = 3) and the wgmma layer VJP (tc = 4), and must
     * really run where they apply */
#ifdef ECENET_HAVE_CUDA
    const int is_cuda = !strcmp(be->name, "cuda");
    const int split = is_cuda && be->real_size == 4 && !ecn_cuda_tf32(); /* split TF32 */
#else
    const int is_cuda = 0, split = 0;
#endif
    /* linear: square and bottleneck widths, with and without bias/corrections */
    const int widths[3][2] = {{F, F}, {F, F / 2 + 1}, {3, F}};
    for (int wi = 0; wi < 3; wi++)
        for (int variant = 0; variant < 2; variant++) {
            const t_mark_t m0 = t_mark(c);
            const int fin = widths[wi][0], fout = widths[wi][1];
            const int corr = variant ? u->s.corr : 0;
            lin_pair lp = make_linear(c, fin, fout, Q, T, variant == 0, corr);
            for (int z = 0; z < 2; z++) {
                tens X = features(c, E, Q, fin, z);
                tens Y = t_out(c, (size_t)E * Q * 2 * fout);
                ref_linear_fwd(E, &lp.h, u->tsrc, u->ttgt, X.h, Y.h);
                tens Yb = features(c, E, Q, fout, z), Xb = t_acc(c, (size_t)E * Q * 2 * fin);
                ref_linear_vjp(E, &lp.h, u->tsrc, u->ttgt, Yb.h, Xb.h);
                /* the same ref results for cuda's tensor-core modes */
                for (int tc = 0; tc <= (is_cuda ? 2 : 0); tc += 2) {
                    snprintf(op, sizeof op, "linear %d->%d bias=%d corr=%d tc=%d", fin, fout,
                             variant == 0, corr, tc);
                    const int tc_old = tc_set(is_cuda, tc);
                    t_reset(c, &Y);
                    be->linear_fwd(E, &lp.d, u->d_tsrc, u->d_ttgt, X.d, Y.d);
                    t_check(c, &Y, op, "fwd Y", 0);
                    /* with the transposed weights (the engine's case, where the
                     * backend asks for them) and without */
                    for (int wt = !!lp.d.w_t; wt >= 0; wt--) {
                        ecenet_linear_params pd = lp.d;
                        if (!wt)
                            pd.w_t = NULL;
                        t_reset(c, &Xb);
                        const unsigned long long n0 = tc_runs(is_cuda);
                        be->linear_vjp(E, &pd, u->d_tsrc, u->d_ttgt, Yb.d, Xb.d);
                        t_check(c, &Xb, op, wt ? "vjp Xbar (w_t)" : "vjp Xbar", 1);
                        tc_expect(is_cuda, n0,
                                  tc && split && Q == 4 && fin % 64 == 0 && fout % 16 == 0 &&
                                      E > 0,
                                  op, "vjp");
                    }
                    tc_set(is_cuda, tc_old);
                }
            }
            t_release(c, m0);
        }
    /* cuda strict fp32: the linears' split-TF32 GEMM kernel (cuda_linear_x3.cuh)
     * on and off, on widths that take it (K % 4 == 0, N even; several 64-wide
     * output tiles and a partial one) and widths that fall back to cuBLAS;
     * it must run exactly where it applies (one launch per cos / sin batch),
     * on the weights split beforehand (w_split, w_t_split, as the engine
     * gives them) where it has them, and give the same bits without them */
#ifdef ECENET_HAVE_CUDA
    if (is_cuda && be->real_size == 4 && !ecn_cuda_tf32()) {
        const int xw[5][2] = {{F, F}, {F + 4, F - 2}, {12, 2 * F + 6}, {2 * F + 8, 20}, {F, F + 1}};
        for (int wi = 0; wi < 5; wi++)
            for (int variant = 0; variant < 2; variant++) {
                const int fin = xw[wi][0], fout = xw[wi][1];
                if (fout < 1)
                    continue;
                const t_mark_t m0 = t_mark(c);
                const int corr = variant ? u->s.corr : 0;
                /* the weights and the ref results once, for both kernel
                 * choices; with the split weights, as the engine makes them
                 * where the kernel runs */
                int old = ecn_cuda_set_fp32_gemm(1);
                lin_pair lp = make_linear(c, fin, fout, Q, T, variant == 0, corr);
                ecn_cuda_set_fp32_gemm(old);
                const unsigned per = Q > 1 ? 2u : 1u; /* cos batch, sin batch */
                tens X = features(c, E, Q, fin, 0);
                tens Y = t_out(c, (size_t)E * Q * 2 * fout);
                ref_linear_fwd(E, &lp.h, u->tsrc, u->ttgt, X.h, Y.h);
                tens Yb = {0}, Xb = {0}, Xb2 = {0};
                if (lp.d.w_t) { /* the kernel takes the VJP on the transposed weights only */
                    Yb = features(c, E, Q, fout, 0);
                    Xb = t_acc(c, (size_t)E * Q * 2 * fin);
                    ref_linear_vjp(E, &lp.h, u->tsrc, u->ttgt, Yb.h, Xb.h);
                    Xb2 = t_acc_like(c, &Xb); /* the same initial values */
                }
                for (int x3 = 1; x3 >= 0; x3--) {
                    old = ecn_cuda_set_fp32_gemm(x3);
                    snprintf(op, sizeof op, "linear %d->%d bias=%d corr=%d fp32_gemm=%s", fin,
                             fout, variant == 0, corr, x3 ? "x3" : "sgemm");
                    /* the backend asks for split weights exactly where the kernel runs */
                    ck_assert_msg(!x3 == !!be->linear_split(0, NULL, NULL),
                                  "%s: the backend %s split weights", op,
                                  x3 ? "does not ask for" : "asks for");
                    ck_assert_msg(!x3 || lp.d.w_split, "%s: split weights not made", op);
                    ecenet_linear_params pdx = lp.d;
                    if (!x3)
                        pdx.w_split = pdx.w_t_split = NULL;
                    t_reset(c, &Y);
                    unsigned long long r0 = ecn_cuda_fp32_gemm_x3_runs(),
                                       p0 = ecn_cuda_fp32_gemm_x3_pre_runs();
                    be->linear_fwd(E, &pdx, u->d_tsrc, u->d_ttgt, X.d, Y.d);
                    unsigned long long ran = ecn_cuda_fp32_gemm_x3_runs() - r0,
                                       pre = ecn_cuda_fp32_gemm_x3_pre_runs() - p0;
                    t_check(c, &Y, op, "fwd Y", 0);
                    int applies = x3 && E > 0 && fin % 4 == 0 && fout % 2 == 0;
                    ck_assert_msg(ran == (applies ? per : 0u),
                                  "%s fwd: split-TF32 kernel ran %llu times, expected %u", op,
                                  ran, applies ? per : 0u);
                    ck_assert_msg(pre == ran, "%s fwd: %llu of %llu runs on the split weights", op,
                                  pre, ran);
                    if (applies) { /* the kernel splitting W itself: the same bits */
                        ecenet_linear_params pd = pdx;
                        pd.w_split = NULL;
                        tens Y2 = t_out(c, Y.n);
                        p0 = ecn_cuda_fp32_gemm_x3_pre_runs();
                        be->linear_fwd(E, &pd, u->d_tsrc, u->d_ttgt, X.d, Y2.d);
                        ck_assert_msg(ecn_cuda_fp32_gemm_x3_pre_runs() == p0,
                                      "%s fwd: ran on split weights it was not given", op);
                        t_same_bits(c, &Y, &Y2, op, "fwd Y, w_split vs none");
                    }
                    if (!lp.d.w_t) {
                        ecn_cuda_set_fp32_gemm(old);
                        continue;
                    }
                    t_reset(c, &Xb);
                    t_reset(c, &Xb2);
                    r0 = ecn_cuda_fp32_gemm_x3_runs();
                    p0 = ecn_cuda_fp32_gemm_x3_pre_runs();
                    be->linear_vjp(E, &pdx, u->d_tsrc, u->d_ttgt, Yb.d, Xb.d);
                    ran = ecn_cuda_fp32_gemm_x3_runs() - r0;
                    pre = ecn_cuda_fp32_gemm_x3_pre_runs() - p0;
                    t_check(c, &Xb, op, "vjp Xbar (w_t)", 1);
                    /* mode 2's split-TF32 VJP kernel goes first where it applies
                     * (as in the linear cases above) */
                    const int tcm = ecn_cuda_set_layer_tc(0);
                    ecn_cuda_set_layer_tc(tcm);
                    const int tc_vjp = tcm == 2 && Q == 4 && fin % 64 == 0 && fout % 16 == 0;
                    applies = x3 && E > 0 && fout % 4 == 0 && fin % 2 == 0 && !tc_vjp;
                    ck_assert_msg(ran == (applies ? per : 0u),
                                  "%s vjp: split-TF32 kernel ran %llu times, expected %u", op,
                                  ran, applies ? per : 0u);
                    ck_assert_msg(pre == ran && (!x3 || pdx.w_t_split),
                                  "%s vjp: %llu of %llu runs on the split weights", op, pre, ran);
                    if (applies) {
                        ecenet_linear_params pd = pdx;
                        pd.w_t_split = NULL;
                        be->linear_vjp(E, &pd, u->d_tsrc, u->d_ttgt, Yb.d, Xb2.d);
                        t_same_bits(c, &Xb, &Xb2, op, "vjp Xbar, w_t_split vs none");
                    }
                    ecn_cuda_set_fp32_gemm(old);
                }
                t_release(c, m0);
            }
    }
#endif
    /* the first layer's linear (frame_nl): X with the edge frame's zeros
     * (channel b·(L+1) + l of slot m zero where l < m, the sin m = 0 slot
     * zero); the VJP is compared at the valid positions, the only ones it
     * must update. cuda runs its packed path here (except with TF32), and
     * must really run it */
    if (dm->Q <= dm->L + 1)
        for (int variant = 0; variant < 2; variant++) {
            const int nl = dm->L + 1, corr = variant ? u->s.corr : 0;
            lin_pair lp = make_linear(c, F, F, Q, T, 1, corr);
            lp.h.frame_nl = lp.d.frame_nl = nl;
            snprintf(op, sizeof op, "linear %d->%d frame_nl=%d corr=%d", F, F, nl, corr);
            const size_t n = (size_t)E * XE;
            double *x = hbuf(c, n);
            unsigned char *valid = (unsigned char *)hbuf(c, n);
            for (size_t k = 0; k < n; k++) {
                const int f = (int)(k % (size_t)F), slot = (int)(k / F % (2 * Q)), m = slot / 2;
                valid[k] = f % nl >= m && slot != 1;
                x[k] = valid[k] ? tu_normal() : 0.0;
            }
            tens X = t_from(c, x, n), Y = t_out(c, n);
#ifdef ECENET_HAVE_CUDA
            const unsigned long long r0 = is_cuda ? ecn_cuda_frame_pack_runs() : 0;
#endif
            ref_linear_fwd(E, &lp.h, u->tsrc, u->ttgt, X.h, Y.h);
            be->linear_fwd(E, &lp.d, u->d_tsrc, u->d_ttgt, X.d, Y.d);
            t_check(c, &Y, op, "fwd Y", 0);
            tens Yb = t_rand(c, n, 1.0), Xb = t_acc(c, n);
            ref_linear_vjp(E, &lp.h, u->tsrc, u->ttgt, Yb.h, Xb.h);
            be->linear_vjp(E, &lp.d, u->d_tsrc, u->d_ttgt, Yb.d, Xb.d);
            t_check_mask(c, &Xb, op, "vjp Xbar (valid positions)", 1, valid);
#ifdef ECENET_HAVE_CUDA
            if (is_cuda) {
                /* Q = 1: only the cos m = 0 slot, which has no zeros to skip */
                const int applies = E > 0 && Q >= 2 && !(be->real_size == 4 && ecn_cuda_tf32());
                const unsigned long long ran = ecn_cuda_frame_pack_runs() - r0;
                ck_assert_msg(ran == (applies ? 2u : 0u),
                              "%s: the packed path ran %llu times, expected %d", op, ran,
                              applies ? 2 : 0);
            }
#endif
        }
    /* RealSpace: every activation (the shape's first), model tables and random ones,
     * with and without the affine; on cuda the grid tables also with the
     * table flags (rs_mode): sin0_zero (which lets it skip that slot, here
     * with a random, nonzero sin m = 0 input slot, which meets only zero
     * table entries either way) and grid_sym (the folded grid) */
#ifdef ECENET_HAVE_CUDA
    const unsigned long long sym0 = is_cuda ? ecn_cuda_rs_sym_runs() : 0;
#endif
    for (int act = 0; act <= ECENET_ACT_IDENTITY; act++)
        for (int variant = 0; variant < 3; variant++)
        for (int mode = 0; mode < (variant != 1 ? 4 : 1); mode++) {
            const t_mark_t m0 = t_mark(c);
            const int a = (act + u->s.act) % (ECENET_ACT_IDENTITY + 1);
            const int affine = variant >= 1, corr = variant == 2 && u->s.corr;
            rs_pair rp = make_rs(c, F, Q, G, T, a, affine, corr, variant == 1);
            const int s0z = rs_mode(&rp, mode, variant != 1);
            snprintf(op, sizeof op, "realspace act=%d affine=%d corr=%d tables=%s%s%s", a, affine,
                     corr, variant == 1 ? "random" : "grid", s0z ? " (sin0_zero)" : "",
                     rp.d.grid_sym ? " (grid_sym)" : "");
            tens X = features(c, E, Q, F, variant != 1 && !s0z);
            tens Y = t_out(c, (size_t)E * XE);
            ref_realspace_fwd(E, &rp.h, u->tsrc, u->ttgt, X.h, Y.h);
            be->realspace_fwd(E, &rp.d, u->d_tsrc, u->d_ttgt, X.d, Y.d);
            t_check(c, &Y, op, "fwd Y", 0);
            tens Yb = t_rand(c, (size_t)E * XE, 1.0), Xb = t_acc(c, (size_t)E * XE);
            if (a == ECENET_ACT_RELU && relu_kink_mask(&rp.h, u->tsrc, u->ttgt, E, X.h, Yb.h))
                be->upload(Yb.d, Yb.h, (size_t)E * XE);
            ref_realspace_vjp(E, &rp.h, u->tsrc, u->ttgt, X.h, Yb.h, Xb.h);
            be->realspace_vjp(E, &rp.d, u->d_tsrc, u->d_ttgt, X.d, Yb.d, Xb.d);
            t_check(c, &Xb, op, "vjp Xbar", 1);
            t_release(c, m0);
        }
#ifdef ECENET_HAVE_CUDA
    if (is_cuda) {
        /* the folded kernels, the default on grid_sym layers, must really
         * run: rs_mode's modes 2 and 3 make the grid tables grid_sym (G odd),
         * and where the vector kernels apply (Q = 4, whole 16-byte rows of
         * channels) those cases launch them, unless the environment turns
         * the fold (ECENET_RS_SYM=0) or the vector kernels
         * (ECENET_RS_VECTOR=0) off; elsewhere nothing may run them */
        const int on = ecn_cuda_rs_sym_on() && ecn_cuda_set_rs_vector(-1) > 0;
        const int fits = Q == 4 && F % (int)(16 / be->real_size) == 0 && E > 0 && G >= 3 &&
                         G % 2 == 1;
        const unsigned long long ran = ecn_cuda_rs_sym_runs() - sym0;
        if (on && fits)
            ck_assert_msg(ran > 0, "realspace (F %d, Q %d, G %d): the folded kernels never ran",
                          F, Q, G);
        else
            ck_assert_msg(ran == 0, "realspace (F %d, Q %d, G %d): the folded kernels ran %llu "
                          "times where they do not apply", F, Q, G, ran);
    }
#endif
    /* add */
    {
        tens X = t_rand(c, (size_t)E * XE, 1.0), Y = t_acc(c, (size_t)E * XE);
        ref_add((int64_t)(E * XE), X.h, Y.h);
        be->add((int64_t)(E * XE), X.d, Y.d);
        t_check(c, &Y, "add", "Y", 0);
    }
    /* fused layer (optional entries) against the ref composition, through
     * every tensor-core mode (layer_check); variant 2: a nonzero sin m = 0
     * slot (never in a model, but the product stays exact) */
    /* the table flags (rs_mode): sin0_zero (the model's case: tables with
     * sin(0·θ) = 0 and a zero sin m = 0 input slot), which lets cuda skip
     * that slot, and grid_sym, which lets omp and cuda fold the grid */
    if (be->layer_fwd || be->layer_vjp)
        for (int variant = 0; variant < 3; variant++)
        for (int mode = 0; mode < 4; mode++) {
            if (variant == 2 && (mode == 1 || mode == 2))
                continue; /* a nonzero sin m = 0 slot: not sin0_zero */
            const t_mark_t m0 = t_mark(c);
            const int corr = variant == 1 ? u->s.corr : 0;
            lin_pair lp = make_linear(c, F, F, Q, T, 1, corr);
            rs_pair rp = make_rs(c, F, Q, G, T, u->s.act, variant == 1, corr, 0);
            const int s0z = rs_mode(&rp, mode, 1);
            snprintf(op, sizeof op, "layer corr=%d affine=%d sin0=%s%s%s", corr, variant == 1,
                     variant == 2 ? "random" : "zero", s0z ? " (sin0_zero)" : "",
                     rp.d.grid_sym ? " (grid_sym)" : "");
            tens X = features(c, E, Q, F, variant != 2);
            layer_check(c, u, &lp, &rp, &X, variant == 0, op, is_cuda, split, s0z, corr);
            t_release(c, m0);
        }
    /* the fused layer on the first layer's linear (frame_nl), as the engine
     * runs it (sin0_zero where cuda honours it); the VJP at the valid positions */
    if (be->layer_fwd && be->layer_vjp && Q <= dm->L + 1) {
        const int nl = dm->L + 1;
        lin_pair lp = make_linear(c, F, F, Q, T, 1, 0);
        lp.h.frame_nl = lp.d.frame_nl = nl;
        rs_pair rp = make_rs(c, F, Q, G, T, u->s.act, 0, 0, 0);
        rp.h.sin0_zero = rp.d.sin0_zero = is_cuda;
        snprintf(op, sizeof op, "layer frame_nl=%d sin0_zero=%d", nl, is_cuda);
        const size_t n = (size_t)E * XE;
        tens Xio = t_acc(c, n), Z = t_out(c, n);
        unsigned char *valid = (unsigned char *)hbuf(c, n);
        for (size_t k = 0; k < n; k++) {
            const int f = (int)(k % (size_t)F), slot = (int)(k / F % (2 * Q)), m = slot / 2;
            valid[k] = f % nl >= m && slot != 1;
            Xio.h[k] = Xio.init[k] = valid[k] ? tu_normal() : 0.0;
        }
        if (E) {
            be->upload(Xio.d, Xio.h, n);
            be->download(Xio.h, Xio.d, n); /* rounded to the backend's precision */
            memcpy(Xio.init, Xio.h, n * sizeof(double));
        }
        double *tmp = hbuf(c, n);
        ref_linear_fwd(E, &lp.h, u->tsrc, u->ttgt, Xio.h, Z.h);
        ref_realspace_fwd(E, &rp.h, u->tsrc, u->ttgt, Z.h, tmp);
        ref_add((int64_t)n, tmp, Xio.h);
        be->layer_fwd(E, &lp.d, &rp.d, u->d_tsrc, u->d_ttgt, Xio.d, Z.d);
        t_check(c, &Z, op, "fwd Z", 0);
        t_check(c, &Xio, op, "fwd X += RealSpace(Z)", 0);
        tens Zb = features(c, E, Q, F, 1), Xb = t_acc(c, n);
        for (size_t k = 0; k < n; k++)
            tmp[k] = 0.0;
        ref_realspace_vjp(E, &rp.h, u->tsrc, u->ttgt, Zb.h, Xb.h, tmp);
        ref_linear_vjp(E, &lp.h, u->tsrc, u->ttgt, tmp, Xb.h);
        be->layer_vjp(E, &lp.d, &rp.d, u->d_tsrc, u->d_ttgt, Zb.d, Xb.d,
                      dalloc(c, n * be->real_size));
        t_check_mask(c, &Xb, op, "vjp Xbar (valid positions)", 1, valid);
    }
}
