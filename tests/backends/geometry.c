/* The geometric ops against ref: pair geometry and the radial basis (SPEC
 * §2.5, §3), spherical harmonics (§4), the ACE basis and embedding (§5, §6)
 * and the Wigner-D blocks (§7). */
#include "cg.h"
#include "ref.h"
#include "test_util.h"
#include "harness.h"

void test_geometry(tctx *c, setup *u)
{
    const ecenet_backend *be = c->be;
    const int64_t E = u->s.E, N = u->s.N;
    tens pos = t_rand(c, 3 * (size_t)N, 3.0), shift = t_rand(c, 3 * (size_t)E, 1.0);
    tens d = t_out(c, 3 * (size_t)E), r = t_out(c, (size_t)E);
    ref_pair_geom_fwd(E, u->edge_i, u->edge_j, shift.h, pos.h, d.h, r.h);
    be->pair_geom_fwd(E, u->d_edge_i, u->d_edge_j, shift.d, pos.d, d.d, r.d);
    t_check(c, &d, "pair_geom_fwd", "d", 0);
    t_check(c, &r, "pair_geom_fwd", "r", 0);

    tens dv, rv;
    edge_vectors(c, E, &dv, &rv);
    tens dbar = t_rand(c, 3 * (size_t)E, 1.0);
    tens pb = t_acc(c, 3 * (size_t)N), vir = t_acc(c, 9);
    ref_pair_geom_vjp(E, u->edge_i, u->edge_j, &u->dh.e_src, &u->dh.e_dst, dv.h, dbar.h, pb.h,
                      vir.h);
    be->pair_geom_vjp(E, u->d_edge_i, u->d_edge_j, &u->dd.e_src, &u->dd.e_dst, dv.d, dbar.d,
                      pb.d, vir.d);
    t_check(c, &pb, "pair_geom_vjp", "pos_bar", 1);
    t_check(c, &vir, "pair_geom_vjp", "virial", 1);
    tens pb2 = t_acc(c, 3 * (size_t)N);
    ref_pair_geom_vjp(E, u->edge_i, u->edge_j, NULL, NULL, dv.h, dbar.h, pb2.h, NULL);
    be->pair_geom_vjp(E, u->d_edge_i, u->d_edge_j, &u->dd.e_src, &u->dd.e_dst, dv.d, dbar.d,
                      pb2.d, NULL);
    t_check(c, &pb2, "pair_geom_vjp", "pos_bar (no virial)", 1);

    tens rbar = t_rand(c, (size_t)E, 1.0), db = t_acc(c, 3 * (size_t)E);
    ref_dist_vjp(E, dv.h, rv.h, rbar.h, db.h);
    be->dist_vjp(E, dv.d, rv.d, rbar.d, db.d);
    t_check(c, &db, "dist_vjp", "dbar", 1);

    /* radial: distances around both cutoffs */
    double *rr = hbuf(c, (size_t)E);
    for (int64_t k = 0; k < E; k++)
        rr[k] = 0.05 + 4.4 * tu_uniform();
    tens rad = t_from(c, rr, (size_t)E);
    const int Ks[2] = {0, 5};
    for (int ct = 0; ct < 2; ct++)
        for (int q = 0; q < 2; q++) {
            const int K = Ks[q], cols = K ? K : 1;
            tens f = t_out(c, (size_t)E * cols), df = t_out(c, (size_t)E * cols);
            ref_radial_fwd(E, rad.h, 4.0, K, ct, f.h, df.h);
            be->radial_fwd(E, rad.d, 4.0, K, ct, f.d, df.d);
            t_check(c, &f, "radial_fwd", "f", 0);
            t_check(c, &df, "radial_fwd", "df", 0);
            tens f2 = t_out(c, (size_t)E * cols);
            ref_radial_fwd(E, rad.h, 4.0, K, ct, f2.h, NULL);
            be->radial_fwd(E, rad.d, 4.0, K, ct, f2.d, NULL);
            t_check(c, &f2, "radial_fwd", "f (no df)", 0);
            tens fbar = t_rand(c, (size_t)E * cols, 1.0), rb = t_acc(c, (size_t)E);
            ref_radial_vjp(E, K, df.h, fbar.h, rb.h);
            be->radial_vjp(E, K, df.d, fbar.d, rb.d);
            t_check(c, &rb, "radial_vjp", "rbar", 1);
        }

    const int L = u->s.L, S = (L + 1) * (L + 1);
    tens Y = t_out(c, (size_t)E * S), dY = t_out(c, (size_t)E * S * 3);
    ref_sph_fwd(E, L, dv.h, Y.h, dY.h);
    be->sph_fwd(E, L, dv.d, Y.d, dY.d);
    t_check(c, &Y, "sph_fwd", "Y", 0);
    t_check(c, &dY, "sph_fwd", "dY", 0);
    tens Y2 = t_out(c, (size_t)E * S);
    ref_sph_fwd(E, L, dv.h, Y2.h, NULL);
    be->sph_fwd(E, L, dv.d, Y2.d, NULL);
    t_check(c, &Y2, "sph_fwd", "Y (no dY)", 0);
}

void test_ace(tctx *c, setup *u)
{
    const ecenet_backend *be = c->be;
    const ecenet_dims *dm = &u->dh;
    const size_t P = (size_t)dm->P, N = (size_t)dm->N, R = (size_t)dm->R, S = (size_t)dm->S;
    const size_t T = (size_t)dm->T, C = (size_t)dm->C;
    tens d, r;
    edge_vectors(c, dm->P, &d, &r);
    tens f = t_rand(c, P * R, 1.0), df = t_rand(c, P * R, 1.0);
    tens Y = t_rand(c, P * S, 1.0), dY = t_rand(c, P * S * 3, 1.0);
    tens A = t_out(c, N * T * R * S);
    ref_ace_fwd(dm, u->nb_src, u->nb_dst, u->types, f.h, Y.h, A.h);
    be->ace_fwd(&u->dd, u->d_nb_src, u->d_nb_dst, u->d_types, f.d, Y.d, A.d);
    t_check(c, &A, "ace_fwd", "A", 0);
    tens Abar = t_rand(c, N * T * R * S, 1.0), dbar = t_acc(c, 3 * P);
    ref_ace_vjp(dm, u->nb_src, u->nb_dst, u->types, f.h, df.h, Y.h, dY.h, d.h, r.h, Abar.h,
                dbar.h);
    be->ace_vjp(&u->dd, u->d_nb_src, u->d_nb_dst, u->d_types, f.d, df.d, Y.d, dY.d, d.d, r.d,
                Abar.d, dbar.d);
    t_check(c, &dbar, "ace_vjp", "dbar", 1);

    tens W = t_rand(c, T * T * R * C, 0.5), Ain = t_rand(c, N * T * R * S, 1.0);
    tens Ae = t_out(c, N * C * S);
    ref_embed_fwd(dm, u->types, W.h, Ain.h, Ae.h);
    be->embed_fwd(&u->dd, u->d_types, W.d, Ain.d, Ae.d);
    t_check(c, &Ae, "embed_fwd", "A_emb", 0);
    tens Eb = t_rand(c, N * C * S, 1.0), Ab = t_acc(c, N * T * R * S);
    ref_embed_vjp(dm, u->types, W.h, Eb.h, Ab.h);
    be->embed_vjp(&u->dd, u->d_types, W.d, Eb.d, Ab.d);
    t_check(c, &Ab, "embed_vjp", "Abar", 1);
}

void test_wigner(tctx *c, setup *u)
{
    const ecenet_backend *be = c->be;
    const int L = u->s.L;
    const int64_t E = u->s.E;
    const size_t ND = (size_t)ref_dblock_offset(L + 1);
    double *cgh = hbuf(c, ecn_cg_size(L) + 1);
    ecn_cg_build(L, cgh);
    tens cg = t_from(c, cgh, ecn_cg_size(L) + 1);
    tens d, r;
    edge_vectors(c, E, &d, &r);
    tens D = t_out(c, (size_t)E * ND);
    ref_wigner_fwd(E, L, cg.h, d.h, r.h, D.h);
    be->wigner_fwd(E, L, cg.d, d.d, r.d, D.d);
    t_check(c, &D, "wigner_fwd", "D", 0);
    tens Dbar = t_rand(c, (size_t)E * ND, 1.0), dbar = t_acc(c, 3 * (size_t)E);
    ref_wigner_vjp(E, L, cg.h, d.h, r.h, D.h, Dbar.h, dbar.h);
    be->wigner_vjp(E, L, cg.d, d.d, r.d, D.d, Dbar.d, dbar.d);
    t_check(c, &dbar, "wigner_vjp", "dbar", 1);
}
