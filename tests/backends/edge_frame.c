/* The edge frame (SPEC §8) and the distance embedding (§9) against ref; on
 * cuda, its kernel variants (cp.async staging, the general per-atom
 * kernel) bit for bit against the default ones. */
#include <string.h>
#include "ref.h"
#include "harness.h"

void test_edge_frame(tctx *c, setup *u)
{
    const ecenet_backend *be = c->be;
    const ecenet_dims *dm = &u->dh;
    const size_t E = (size_t)dm->E, N = (size_t)dm->N, CS = (size_t)dm->C * dm->S;
    const size_t XE = (size_t)dm->Q * 2 * dm->F, ND = (size_t)dm->ND, F = (size_t)dm->F;
    const int fa_old = fa_set(c, 0); /* cuda: staging through registers first */
    const int far_old = far_set(c, 1);
    tens Ae = t_rand(c, N * CS, 1.0), D = t_rand(c, E * ND, 0.5);
    tens X = t_out(c, E * XE);
    ref_edge_frame_fwd(dm, u->edge_i, u->edge_j, Ae.h, D.h, X.h);
    be->edge_frame_fwd(&u->dd, u->d_edge_i, u->d_edge_j, Ae.d, D.d, X.d);
    t_check(c, &X, "edge_frame_fwd", "X", 0);
    tens Xbar = t_rand(c, E * XE, 1.0), Aeb = t_acc(c, N * CS), Db = t_acc(c, E * ND);
    ref_edge_frame_vjp(dm, u->edge_i, u->edge_j, Ae.h, D.h, Xbar.h, Aeb.h, Db.h);
    const unsigned long long rb0 = far_runs(c);
    be->edge_frame_vjp(&u->dd, u->d_edge_i, u->d_edge_j, Ae.d, D.d, Xbar.d, Aeb.d, Db.d);
    t_check(c, &Aeb, "edge_frame_vjp", "A_emb_bar", 1);
    t_check(c, &Db, "edge_frame_vjp", "Dbar", 1);
    if (!strcmp(be->name, "cuda")) { /* the general per-atom kernel: the same sums, the same bits */
        far_expect(c, rb0, E, dm->L, "edge_frame_vjp");
        far_set(c, 0);
        tens Aeb3 = t_acc_like(c, &Aeb), Db3 = t_acc_like(c, &Db);
        be->edge_frame_vjp(&u->dd, u->d_edge_i, u->d_edge_j, Ae.d, D.d, Xbar.d, Aeb3.d, Db3.d);
        far_set(c, 1);
        t_same_bits(c, &Aeb3, &Aeb, "edge_frame_vjp", "A_emb_bar, general frame_atom kernel");
    }
    if (!strcmp(be->name, "cuda")) { /* staged with cp.async: the same values, the same bits */
        fa_set(c, 1);
        const unsigned long long r0 = fa_runs(c);
        tens X2 = t_out(c, X.n), Aeb2 = t_acc_like(c, &Aeb), Db2 = t_acc_like(c, &Db);
        be->edge_frame_fwd(&u->dd, u->d_edge_i, u->d_edge_j, Ae.d, D.d, X2.d);
        be->edge_frame_vjp(&u->dd, u->d_edge_i, u->d_edge_j, Ae.d, D.d, Xbar.d, Aeb2.d, Db2.d);
        fa_set(c, 0);
        fa_expect(c, r0, 3, E, "edge frame");
        t_same_bits(c, &X2, &X, "edge_frame_fwd", "X, cp.async staging");
        t_same_bits(c, &Aeb2, &Aeb, "edge_frame_vjp", "A_emb_bar, cp.async staging");
        t_same_bits(c, &Db2, &Db, "edge_frame_vjp", "Dbar, cp.async staging");
    }
    fa_set(c, fa_old);
    far_set(c, far_old);

    const int K = 3;
    tens fr = t_rand(c, E * K, 0.5), V = t_rand(c, K * F, 0.5), Xin = t_rand(c, E * XE, 1.0);
    tens Y = t_out(c, E * XE);
    ref_dist_embed_fwd(dm, K, fr.h, V.h, Xin.h, Y.h);
    be->dist_embed_fwd(&u->dd, K, fr.d, V.d, Xin.d, Y.d);
    t_check(c, &Y, "dist_embed_fwd", "Y", 0);
    tens Yb = t_rand(c, E * XE, 1.0), Xb = t_acc(c, E * XE), frb = t_acc(c, E * K);
    ref_dist_embed_vjp(dm, K, fr.h, V.h, Xin.h, Yb.h, Xb.h, frb.h);
    be->dist_embed_vjp(&u->dd, K, fr.d, V.d, Xin.d, Yb.d, Xb.d, frb.d);
    t_check(c, &Xb, "dist_embed_vjp", "Xbar", 1);
    t_check(c, &frb, "dist_embed_vjp", "frbar", 1);
}
