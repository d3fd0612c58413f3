/* Message passing against ref (SPEC §13; on cuda its kernel variants bit for
 * bit against the default ones) and the research attention weights (§17.3). */
#include <stdio.h>
#include <string.h>
#include "ref.h"
#include "test_util.h"
#include "harness.h"

void test_mp(tctx *c, setup *u)
{
    const ecenet_backend *be = c->be;
    const ecenet_dims *dm = &u->dh;
    const size_t E = (size_t)dm->E, N = (size_t)dm->N, BS = (size_t)dm->B * dm->S;
    const size_t XE = (size_t)dm->Q * 2 * dm->F, ND = (size_t)dm->ND, F = (size_t)dm->F;
    const int T = dm->T, B = dm->B;
    const int fa_old = fa_set(c, 0); /* cuda: staging through registers first */
    const int far_old = far_set(c, 1);
    tens X = features(c, dm->E, dm->Q, dm->F, 1), D = t_rand(c, E * ND, 0.5);
    tens g = t_out(c, E * BS);
    ref_mp_pack_unrotate_fwd(dm, X.h, D.h, g.h, NULL);
    be->mp_pack_unrotate_fwd(&u->dd, X.d, D.d, g.d, NULL);
    t_check(c, &g, "mp_pack_unrotate_fwd", "g", 0);
    /* again, keeping the input for the backward as the engine does */
    tens g2 = t_out(c, E * BS), Xs = t_out(c, E * XE);
    ref_mp_pack_unrotate_fwd(dm, X.h, D.h, g2.h, Xs.h);
    be->mp_pack_unrotate_fwd(&u->dd, X.d, D.d, g2.d, Xs.d);
    t_check(c, &g2, "mp_pack_unrotate_fwd (saving X)", "g", 0);
    t_check(c, &Xs, "mp_pack_unrotate_fwd (saving X)", "copy of X", 0);
    t_same_bits(c, &Xs, &X, "mp_pack_unrotate_fwd (saving X)", "copy of X, bit for bit");
    tens gbar = t_rand(c, E * BS, 1.0), Xb = t_acc(c, E * XE), Db = t_acc(c, E * ND);
    ref_mp_pack_unrotate_vjp(dm, X.h, D.h, gbar.h, Xb.h, Db.h);
    be->mp_pack_unrotate_vjp(&u->dd, X.d, D.d, gbar.d, Xb.d, Db.d);
    t_check(c, &Xb, "mp_pack_unrotate_vjp", "Xbar", 1);
    t_check(c, &Db, "mp_pack_unrotate_vjp", "Dbar", 1);

    const int K = 4;
    tens fr = t_rand(c, E * K, 1.0), Wm = t_rand(c, (size_t)T * T * K * B, 0.5);
    tens w = t_out(c, E * F);
    ref_mp_weight_fwd(dm, K, u->tsrc, u->ttgt, fr.h, Wm.h, w.h);
    be->mp_weight_fwd(&u->dd, K, u->d_tsrc, u->d_ttgt, fr.d, Wm.d, w.d);
    t_check(c, &w, "mp_weight_fwd", "w", 0);
    tens wbar = t_rand(c, E * F, 1.0), frb = t_acc(c, E * K);
    ref_mp_weight_vjp(dm, K, u->tsrc, u->ttgt, Wm.h, wbar.h, frb.h);
    be->mp_weight_vjp(&u->dd, K, u->d_tsrc, u->d_ttgt, Wm.d, wbar.d, frb.d);
    t_check(c, &frb, "mp_weight_vjp", "frbar", 1);

    tens gin = t_rand(c, E * BS, 1.0), win = t_rand(c, E * F, 1.0);
    tens Delta = t_out(c, N * BS);
    ref_mp_scatter_fwd(dm, u->edge_j, gin.h, win.h, Delta.h);
    be->mp_scatter_fwd(&u->dd, u->d_edge_j, gin.d, win.d, Delta.d);
    t_check(c, &Delta, "mp_scatter_fwd", "Delta", 0);
    tens Dlb = t_rand(c, N * BS, 1.0), gb = t_acc(c, E * BS), wb = t_acc(c, E * F);
    ref_mp_scatter_vjp(dm, u->edge_j, gin.h, win.h, Dlb.h, gb.h, wb.h);
    be->mp_scatter_vjp(&u->dd, u->d_edge_j, gin.d, win.d, Dlb.d, gb.d, wb.d);
    t_check(c, &gb, "mp_scatter_vjp", "gbar", 1);
    t_check(c, &wb, "mp_scatter_vjp", "wbar", 1);

    tens Dl = t_rand(c, N * BS, 1.0), Xio = t_acc(c, E * XE);
    ref_mp_rotate_unpack_fwd(dm, u->edge_i, Dl.h, D.h, Xio.h);
    be->mp_rotate_unpack_fwd(&u->dd, u->d_edge_i, Dl.d, D.d, Xio.d);
    t_check(c, &Xio, "mp_rotate_unpack_fwd", "X += unpack", 0);
    tens Xbar = t_rand(c, E * XE, 1.0), Dlbar = t_acc(c, N * BS), Db2 = t_acc(c, E * ND);
    ref_mp_rotate_unpack_vjp(dm, u->edge_i, Dl.h, D.h, Xbar.h, Dlbar.h, Db2.h);
    const unsigned long long rb0 = far_runs(c);
    be->mp_rotate_unpack_vjp(&u->dd, u->d_edge_i, Dl.d, D.d, Xbar.d, Dlbar.d, Db2.d);
    t_check(c, &Dlbar, "mp_rotate_unpack_vjp", "Delta_bar", 1);
    t_check(c, &Db2, "mp_rotate_unpack_vjp", "Dbar", 1);
    if (!strcmp(be->name, "cuda")) { /* the general per-atom kernel: the same sums, the same bits */
        far_expect(c, rb0, E, dm->L, "mp_rotate_unpack_vjp");
        far_set(c, 0);
        tens Dlb3 = t_acc_like(c, &Dlbar), Db3 = t_acc_like(c, &Db2);
        be->mp_rotate_unpack_vjp(&u->dd, u->d_edge_i, Dl.d, D.d, Xbar.d, Dlb3.d, Db3.d);
        far_set(c, 1);
        t_same_bits(c, &Dlb3, &Dlbar, "mp_rotate_unpack_vjp",
                    "Delta_bar, general frame_atom kernel");
    }
    if (!strcmp(be->name, "cuda")) { /* staged with cp.async: the same values, the same bits */
        fa_set(c, 1);
        const unsigned long long r0 = fa_runs(c);
        tens ga = t_out(c, g2.n), Xsa = t_out(c, Xs.n), Xba = t_acc_like(c, &Xb);
        tens Dba = t_acc_like(c, &Db), Xioa = t_acc_like(c, &Xio), Dlba = t_acc_like(c, &Dlbar);
        tens Db2a = t_acc_like(c, &Db2);
        be->mp_pack_unrotate_fwd(&u->dd, X.d, D.d, ga.d, Xsa.d);
        be->mp_pack_unrotate_vjp(&u->dd, X.d, D.d, gbar.d, Xba.d, Dba.d);
        be->mp_rotate_unpack_fwd(&u->dd, u->d_edge_i, Dl.d, D.d, Xioa.d);
        be->mp_rotate_unpack_vjp(&u->dd, u->d_edge_i, Dl.d, D.d, Xbar.d, Dlba.d, Db2a.d);
        fa_set(c, 0);
        fa_expect(c, r0, 5, E, "message passing");
        t_same_bits(c, &ga, &g2, "mp_pack_unrotate_fwd", "g, cp.async staging");
        t_same_bits(c, &Xsa, &Xs, "mp_pack_unrotate_fwd", "copy of X, cp.async staging");
        t_same_bits(c, &Xba, &Xb, "mp_pack_unrotate_vjp", "Xbar, cp.async staging");
        t_same_bits(c, &Dba, &Db, "mp_pack_unrotate_vjp", "Dbar, cp.async staging");
        t_same_bits(c, &Xioa, &Xio, "mp_rotate_unpack_fwd", "X += unpack, cp.async staging");
        t_same_bits(c, &Dlba, &Dlbar, "mp_rotate_unpack_vjp", "Delta_bar, cp.async staging");
        t_same_bits(c, &Db2a, &Db2, "mp_rotate_unpack_vjp", "Dbar, cp.async staging");
    }
    fa_set(c, fa_old);
    far_set(c, far_old);
}

void test_attention(tctx *c, setup *u)
{
    const ecenet_backend *be = c->be;
    const ecenet_dims *dm = &u->dh;
    const size_t E = (size_t)dm->E, N = (size_t)dm->N, F = (size_t)dm->F;
    char op[96];
    for (int mode = ECENET_ATTN_SUM; mode <= ECENET_ATTN_SOFTMAX; mode++)
        for (int variant = 0; variant < 4; variant++) {
            const int heads = (variant & 1) && dm->B % 2 == 0 ? 2 : 1;
            const int l_att = (variant >> 1) & 1, env = variant & 1;
            const int K = heads * (l_att ? dm->L + 1 : 1);
            snprintf(op, sizeof op, "mp_attn_weight mode=%d heads=%d l_att=%d env=%d", mode, heads,
                     l_att, env);
            double *sc = hbuf(c, E * K), *fch = hbuf(c, E);
            for (size_t q = 0; q < E * K; q++)
                sc[q] = tu_normal();
            /* ties (exact and 1e-14 apart) at the maximum of every other receiver */
            for (int64_t j = 0; j < dm->N; j += 2) {
                const int32_t p0 = dm->e_dst.ptr[j], p1 = dm->e_dst.ptr[j + 1];
                if (p1 - p0 < 2)
                    continue;
                const int32_t e0 = dm->e_dst.idx[p0], e1 = dm->e_dst.idx[p1 - 1];
                for (int k = 0; k < K; k++) {
                    sc[(size_t)e0 * K + k] = 3.0;
                    sc[(size_t)e1 * K + k] = k % 2 ? 3.0 : 3.0 * (1.0 + 1e-14);
                }
            }
            for (size_t e = 0; e < E; e++)
                fch[e] = tu_uniform();
            tens s = t_from(c, sc, E * K), fc = t_from(c, fch, E);
            tens a = t_out(c, E * K), w = t_out(c, E * F);
            double *tmp_h = hbuf(c, 4 * N * K + 1);
            void *tmp_d = dalloc(c, (4 * N * K + 1) * be->real_size);
            ref_mp_attn_weight_fwd(dm, heads, l_att, mode, env, u->edge_j, s.h, fc.h, a.h, w.h,
                                   tmp_h);
            be->mp_attn_weight_fwd(&u->dd, heads, l_att, mode, env, u->d_edge_j, s.d, fc.d, a.d,
                                   w.d, tmp_d);
            t_check(c, &a, op, "fwd a", 0);
            t_check(c, &w, op, "fwd w", 0);
            tens wbar = t_rand(c, E * F, 1.0), sb = t_acc(c, E * K), fb = t_acc(c, E);
            ref_mp_attn_weight_vjp(dm, heads, l_att, mode, env, u->edge_j, s.h, fc.h, a.h, wbar.h,
                                   tmp_h, sb.h, fb.h);
            be->mp_attn_weight_vjp(&u->dd, heads, l_att, mode, env, u->d_edge_j, s.d, fc.d, a.d,
                                   wbar.d, tmp_d, sb.d, fb.d);
            t_check(c, &sb, op, "vjp sbar", 1);
            t_check(c, &fb, op, "vjp fcbar", 1);
        }
}
