/* The readout against ref: the per-edge MLPs, energy and sum (SPEC §14), and
 * the element FiLM with the per-channel scale (§17.4). */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include "ref.h"
#include "harness.h"

typedef struct {
    ecenet_mlp_params h, d;
} mlp_pair;

static mlp_pair make_mlp(tctx *c, int n_layers, const int *dims, int T, int act, int corr)
{
    mlp_pair p;
    memset(&p, 0, sizeof p);
    p.h.n_layers = p.d.n_layers = n_layers;
    p.h.T = p.d.T = T;
    p.h.act = p.d.act = act;
    for (int k = 0; k <= n_layers; k++)
        p.h.dims[k] = p.d.dims[k] = dims[k];
    for (int k = 0; k < n_layers; k++) {
        const size_t n = (size_t)dims[k + 1] * dims[k];
        const double sc = 1.0 / sqrt((double)dims[k]);
        tens w = t_rand(c, n, sc), b = t_rand(c, (size_t)dims[k + 1], 0.3);
        p.h.w[k] = w.h; p.d.w[k] = w.d;
        p.h.b[k] = b.h; p.d.b[k] = b.d;
        if (corr && k != 1) {
            tens ws = t_rand(c, (size_t)T * n, 0.3 * sc), wt = t_rand(c, (size_t)T * n, 0.3 * sc);
            p.h.w_src[k] = ws.h; p.d.w_src[k] = ws.d;
            if (k != 2) {
                p.h.w_tgt[k] = wt.h;
                p.d.w_tgt[k] = wt.d;
            }
        }
    }
    return p;
}

void test_readout(tctx *c, setup *u)
{
    const ecenet_backend *be = c->be;
    const ecenet_dims *dm = &u->dh;
    const int64_t E = dm->E;
    const size_t XE = (size_t)dm->Q * 2 * dm->F;
    char op[96];
    /* readout MLPs: F -> hidden... -> out; the one-layer score MLP with H = NULL;
     * a wide first layer (cuda: its VJP goes through the 8 MiB scratch in 2-3
     * row chunks at E = 5000) */
    const int cfgs[5][5] = {{2, 7, 3, 0, 0}, {3, 9, 5, 4, 0}, {1, 3, 0, 0, 0}, {4, 6, 5, 4, 1},
                            {2, 520, 3, 0, 0}};
    for (int ci = 0; ci < 5; ci++)
        for (int corr = 0; corr < 2; corr++) {
            if (corr && !u->s.corr)
                continue;
            const int nl = cfgs[ci][0];
            int dims[ECENET_MLP_MAX + 1];
            dims[0] = dm->F;
            for (int k = 1; k <= nl; k++)
                dims[k] = cfgs[ci][k];
            const int act = (u->s.act + ci) % (ECENET_ACT_IDENTITY + 1);
            mlp_pair mp = make_mlp(c, nl, dims, dm->T, act, corr);
            snprintf(op, sizeof op, "mlp layers=%d act=%d corr=%d", nl, act, corr);
            int nh = 0;
            for (int k = 0; k + 1 < nl; k++)
                nh += dims[k + 1];
            const int dout = dims[nl];
            tens X = t_rand(c, (size_t)E * XE, 1.0);
            tens H = t_out(c, (size_t)E * nh), y = t_out(c, (size_t)E * dout);
            ref_mlp_fwd(dm, &mp.h, u->tsrc, u->ttgt, X.h, nl > 1 ? H.h : NULL, y.h);
            be->mlp_fwd(&u->dd, &mp.d, u->d_tsrc, u->d_ttgt, X.d, nl > 1 ? H.d : NULL, y.d);
            t_check(c, &y, op, "fwd y", 0);
            if (nl > 1)
                t_check(c, &H, op, "fwd H", 0);
            tens yb = t_rand(c, (size_t)E * dout, 1.0), Xb = t_acc(c, (size_t)E * XE);
            ref_mlp_vjp(dm, &mp.h, u->tsrc, u->ttgt, nl > 1 ? H.h : NULL, yb.h, Xb.h);
            be->mlp_vjp(&u->dd, &mp.d, u->d_tsrc, u->d_ttgt, nl > 1 ? H.d : NULL, yb.d, Xb.d);
            t_check(c, &Xb, op, "vjp Xbar", 1);
        }
    const int K = 3;
    tens y = t_rand(c, (size_t)E * K, 1.0), fr = t_rand(c, (size_t)E * K, 1.0);
    tens eps = t_out(c, (size_t)E);
    ref_energy_fwd(E, K, y.h, fr.h, eps.h);
    be->energy_fwd(E, K, y.d, fr.d, eps.d);
    t_check(c, &eps, "energy_fwd", "eps", 0);
    tens yb = t_acc(c, (size_t)E * K), frb = t_acc(c, (size_t)E * K);
    ref_energy_vjp(E, K, y.h, fr.h, yb.h, frb.h);
    be->energy_vjp(E, K, y.d, fr.d, yb.d, frb.d);
    t_check(c, &yb, "energy_vjp", "ybar", 1);
    t_check(c, &frb, "energy_vjp", "frbar", 1);
    const size_t ns = (size_t)E * K;
    double s_ref = ref_sum((int64_t)ns, y.h), s_be = be->sum((int64_t)ns, y.d);
    double scale = 0.0;
    for (size_t k = 0; k < ns; k++)
        scale += fabs(y.h[k]);
    ck_assert_msg(fabs(s_ref - s_be) <= c->tol_f * (scale > 0 ? scale : 1.0),
                  "%s sum [%s]: %.17g vs ref %.17g", be->name, c->shape, s_be, s_ref);
}

void test_film(tctx *c, setup *u)
{
    const ecenet_backend *be = c->be;
    const ecenet_dims *dm = &u->dh;
    const int64_t E = dm->E;
    const int F = dm->F, T = dm->T, P = 3;
    const size_t XE = (size_t)dm->Q * 2 * F;
    char op[96];
    for (int n_rbf = 0; n_rbf <= 4; n_rbf += 4) {
        const int dims[3] = {2 * P + n_rbf, 11, F};
        mlp_pair mp = make_mlp(c, 2, dims, T, ECENET_ACT_SILU, 0);
        tens ea = t_rand(c, (size_t)T * P, 1.0), eb = t_rand(c, (size_t)T * P, 1.0);
        tens fr = t_rand(c, (size_t)E * n_rbf, 1.0);
        tens H = t_out(c, (size_t)E * 11), gamma = t_out(c, (size_t)E * F);
        snprintf(op, sizeof op, "film n_rbf=%d", n_rbf);
        ref_film_fwd(dm, &mp.h, ea.h, eb.h, P, n_rbf, u->tsrc, u->ttgt, fr.h, H.h, gamma.h);
        be->film_fwd(&u->dd, &mp.d, ea.d, eb.d, P, n_rbf, u->d_tsrc, u->d_ttgt, fr.d, H.d,
                     gamma.d);
        t_check(c, &gamma, op, "fwd gamma", 0);
        t_check(c, &H, op, "fwd H", 0);
        tens gb = t_rand(c, (size_t)E * F, 1.0), frb = t_acc(c, (size_t)E * n_rbf);
        ref_film_vjp(dm, &mp.h, P, n_rbf, u->tsrc, u->ttgt, H.h, gb.h, frb.h);
        be->film_vjp(&u->dd, &mp.d, P, n_rbf, u->d_tsrc, u->d_ttgt, H.d, gb.d, frb.d);
        t_check(c, &frb, op, "vjp frbar", 1);
    }
    const int Fw = F / 2 + 1, Q = dm->Q;
    tens s = t_rand(c, (size_t)E * Fw, 1.0), X = t_rand(c, (size_t)E * 2 * Q * Fw, 1.0);
    tens Y = t_out(c, (size_t)E * 2 * Q * Fw);
    ref_chan_scale_fwd(E, Q, Fw, s.h, X.h, Y.h);
    be->chan_scale_fwd(E, Q, Fw, s.d, X.d, Y.d);
    t_check(c, &Y, "chan_scale_fwd", "Y", 0);
    tens Yb = t_rand(c, (size_t)E * 2 * Q * Fw, 1.0), Xb = t_acc(c, (size_t)E * 2 * Q * Fw);
    tens sb = t_acc(c, (size_t)E * Fw);
    ref_chan_scale_vjp(E, Q, Fw, s.h, X.h, Yb.h, Xb.h, sb.h);
    be->chan_scale_vjp(E, Q, Fw, s.d, X.d, Yb.d, Xb.d, sb.d);
    t_check(c, &Xb, "chan_scale_vjp", "Xbar", 1);
    t_check(c, &sb, "chan_scale_vjp", "sbar", 1);
    tens Xb2 = t_acc(c, (size_t)E * 2 * Q * Fw);
    ref_chan_scale_vjp(E, Q, Fw, s.h, X.h, Yb.h, Xb2.h, NULL);
    be->chan_scale_vjp(E, Q, Fw, s.d, X.d, Yb.d, Xb2.d, NULL);
    t_check(c, &Xb2, "chan_scale_vjp", "Xbar (no sbar)", 1);
    (void)XE;
}
