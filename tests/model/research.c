/* Research-version models (golden README "Research-version cases"): the two
 * golden models load with the right configuration and pointers; accepted
 * variations of their config; files that mix the variants, bad research
 * configurations and tensors. */
#include "harness.h"

/* m->lin etc. point into the file; compare with the reader's pointer. */
static const double *file_ptr(const ecenet_model *m, const char *name)
{
    const ecn_tensor *t = ecn_st_find(m->file, name);
    ck_assert_msg(t != NULL, "no tensor '%s'", name);
    return (const double *)t->data;
}

/* The θ-grid matrices in the file are the exact DFT matrices. */
static void check_dft(const ecenet_realspace_params *rs, int Q, int G)
{
    const double *cs = rs->cos_synth, *ss = rs->sin_synth, *ca = rs->cos_analysis,
                 *sa = rs->sin_analysis;
    int m, k;
    for (m = 0; m < Q; m++)
        for (k = 0; k < G; k++) {
            double th = 2.0 * 3.14159265358979323846 * k / G, w = (m ? 2.0 : 1.0) / G;
            ck_assert_double_eq_tol(cs[m * G + k], cos(m * th), 1e-14);
            ck_assert_double_eq_tol(ss[m * G + k], sin(m * th), 1e-14);
            ck_assert_double_eq_tol(ca[k * Q + m], w * cos(m * th), 1e-14);
            ck_assert_double_eq_tol(sa[k * Q + m], w * sin(m * th), 1e-14);
        }
}

/* amp[g].up is a contiguous copy of the message rows of msg_up; score points
 * at the score rows of its m = 0 slice. */
static void check_msg_up(const ecenet_model *m, int g)
{
    const ecn_config *c = &m->cfg;
    const ecn_attn_mp *a = &m->amp[g];
    const int Q = c->Q, F = c->F, D = c->mp_dim, K = c->n_scores;
    char name[64];
    const double *w, *b, *up = a->up.w;
    int q, o, i;
    snprintf(name, sizeof name, "mp_layers.%d.msg_up.weights", g);
    w = file_ptr(m, name);
    snprintf(name, sizeof name, "mp_layers.%d.msg_up.bias", g);
    b = file_ptr(m, name);
    ck_assert_int_eq(ecn_st_find(m->file, name)->numel, F + K);
    ck_assert_int_eq(a->up.fin, D);
    ck_assert_int_eq(a->up.fout, F);
    ck_assert_int_eq(a->up.Q, Q);
    ck_assert_int_eq(a->up.T, c->n_types);
    ck_assert_ptr_null(a->up.w_src);
    ck_assert_ptr_null(a->up.w_tgt);
    /* a copy in the model's one derived allocation, not the file's data */
    ck_assert(up >= m->derived && up + (size_t)Q * F * D <= m->derived + (size_t)(c->n_mp - 1) * Q * F * D);
    ck_assert(up == m->derived + (size_t)g * Q * F * D);
    for (q = 0; q < Q; q++)
        for (o = 0; o < F; o++)
            for (i = 0; i < D; i++)
                ck_assert(up[((size_t)q * F + o) * D + i] == w[((size_t)q * (F + K) + o) * D + i]);
    ck_assert_ptr_eq(a->up.bias, b);
    ck_assert_int_eq(a->score.n_layers, 1);
    ck_assert_int_eq(a->score.dims[0], D);
    ck_assert_int_eq(a->score.dims[1], K);
    ck_assert_int_eq(a->score.T, c->n_types);
    ck_assert_int_eq(a->score.act, ECENET_ACT_SILU);
    ck_assert_ptr_eq(a->score.w[0], w + (size_t)F * D);
    ck_assert_ptr_eq(a->score.b[0], b + F);
    ck_assert_ptr_null(a->score.w_src[0]);
    ck_assert_ptr_null(a->score.w_tgt[0]);
    /* score row k, input i = msg_up.weights[0, F + k, i] */
    for (o = 0; o < K; o++)
        for (i = 0; i < D; i++)
            ck_assert(((const double *)a->score.w[0])[o * D + i] == w[(size_t)(F + o) * D + i]);
}

/* Common shape checks of one attention MP layer. */
static void check_amp(const ecenet_model *m, int g)
{
    const ecn_config *c = &m->cfg;
    const ecn_attn_mp *a = &m->amp[g];
    char name[80];
    ck_assert_int_eq(a->down.fin, c->F);
    ck_assert_int_eq(a->down.fout, c->mp_dim);
    ck_assert_int_eq(a->rdown.fin, c->F);
    ck_assert_int_eq(a->rdown.fout, c->mp_dim);
    ck_assert_int_eq(a->rup.fin, c->mp_dim);
    ck_assert_int_eq(a->rup.fout, c->F);
    ck_assert_int_eq(a->down.Q, c->Q);
    ck_assert_int_eq(a->rup.T, c->n_types);
    ck_assert_int_eq(a->nonlin.F, c->mp_dim);
    ck_assert_int_eq(a->rnonlin.F, c->mp_dim);
    ck_assert_int_eq(a->nonlin.G, c->n_grid);
    ck_assert_int_eq(a->rnonlin.Q, c->Q);
    ck_assert_int_eq(a->nonlin.act, c->activation);
    ck_assert_ptr_null(a->nonlin.scale);
    ck_assert_ptr_null(a->rnonlin.shift);
    snprintf(name, sizeof name, "mp_layers.%d.msg_down.weights", g);
    ck_assert_ptr_eq(a->down.w, file_ptr(m, name));
    snprintf(name, sizeof name, "mp_layers.%d.msg_down.bias", g);
    ck_assert_ptr_eq(a->down.bias, file_ptr(m, name));
    snprintf(name, sizeof name, "mp_layers.%d.msg_nonlin.sin_analysis", g);
    ck_assert_ptr_eq(a->nonlin.sin_analysis, file_ptr(m, name));
    snprintf(name, sizeof name, "mp_layers.%d.receiver.linear_down.weights", g);
    ck_assert_ptr_eq(a->rdown.w, file_ptr(m, name));
    snprintf(name, sizeof name, "mp_layers.%d.receiver.linear_up.bias", g);
    ck_assert_ptr_eq(a->rup.bias, file_ptr(m, name));
    snprintf(name, sizeof name, "mp_layers.%d.receiver.nonlin.cos_synth", g);
    ck_assert_ptr_eq(a->rnonlin.cos_synth, file_ptr(m, name));
    check_dft(&a->nonlin, c->Q, c->n_grid);
    check_dft(&a->rnonlin, c->Q, c->n_grid);
    check_msg_up(m, g);
}

START_TEST(test_thglab_softmax)
{
    ecenet_model *m = load_ok("thglab_softmax");
    const ecn_config *c = &m->cfg;
    const char *js;
    int i, g, k;

    ck_assert_str_eq(ecenet_model_variant(m), "thglab-research");
    ck_assert_int_eq(c->variant, ECN_VARIANT_RESEARCH);
    ck_assert_int_eq(ecenet_model_n_types(m), 3);
    ck_assert_int_eq(ecenet_model_type_number(m, 0), 1);
    ck_assert_int_eq(ecenet_model_type_number(m, 1), 6);
    ck_assert_int_eq(ecenet_model_type_number(m, 2), 8);
    ck_assert_double_eq(ecenet_model_cutoff_edge(m), 5.0);
    ck_assert_double_eq(ecenet_model_cutoff_neighbor(m), 4.0);
    /* README: l_max=3, m_max=2, n_max=4, embed_dim=8, n_layers=2, n_mp=3,
     * mp_type='softmax', mp_n_heads=2, bottleneck_dim=16, element_film=True,
     * silu, cosine; defaults in effect: n_grid=9, mp_dim=16,
     * mp_msg_envelope=True, mp_l_attention=False, film_embed_dim=16,
     * film_n_rbf=0, film_hidden=[128], film_per_m=False, film_shift=False,
     * output_hidden_dims=[64], n_max_d=None */
    ck_assert_int_eq(c->l_max, 3);
    ck_assert_int_eq(c->m_max, 2);
    ck_assert_int_eq(c->n_max, 4);
    ck_assert_int_eq(c->embed_dim, 8);
    ck_assert_int_eq(c->n_layers, 2);
    ck_assert_int_eq(c->n_mp, 3);
    ck_assert_int_eq(c->n_grid, 9);
    ck_assert_int_eq(c->n_max_d, 0);
    ck_assert_int_eq(c->activation, ECENET_ACT_SILU);
    ck_assert_int_eq(c->cutoff_type, ECENET_CUTOFF_COSINE);
    ck_assert_int_eq(c->use_nonlinearity, 1);
    ck_assert_int_eq(c->n_hidden, 1);
    ck_assert_int_eq(c->hidden[0], 64);
    ck_assert_int_eq(c->mp_type, ECN_MP_SOFTMAX);
    ck_assert_int_eq(c->mp_dim, 16);
    ck_assert_int_eq(c->mp_n_heads, 2);
    ck_assert_int_eq(c->mp_msg_envelope, 1);
    ck_assert_int_eq(c->mp_l_attention, 0);
    ck_assert_int_eq(c->bottleneck_dim, 16);
    ck_assert_int_eq(c->element_film, 1);
    ck_assert_int_eq(c->film_embed_dim, 16);
    ck_assert_int_eq(c->film_n_rbf, 0);
    ck_assert_int_eq(c->film_n_hidden, 1);
    ck_assert_int_eq(c->film_hidden[0], 128);
    ck_assert_int_eq(c->film_per_m, 0);
    ck_assert_int_eq(c->film_shift, 0);
    ck_assert_int_eq(c->n_dist_basis + c->n_dist_embed, 0);
    ck_assert_int_eq(c->edge_type_linear + c->edge_type_nonlin + c->edge_type_output, 0);
    ck_assert_int_eq(c->S, 16);
    ck_assert_int_eq(c->Q, 3);
    ck_assert_int_eq(c->B, 16);
    ck_assert_int_eq(c->F, 64);
    ck_assert_int_eq(c->n_scores, 2);

    ck_assert_ptr_eq(m->W, file_ptr(m, "W"));
    ck_assert_ptr_eq(m->atomic_energy, file_ptr(m, "atomic_energy"));
    ck_assert_ptr_null(m->V_dist);
    ck_assert_ptr_null(m->W_msg);
    ck_assert_ptr_nonnull(m->lin_up);
    ck_assert_ptr_nonnull(m->amp);
    ck_assert_ptr_nonnull(m->derived);
    for (g = 0; g < 3; g++)
        for (k = 0; k < 2; k++) {
            char name[64];
            i = g * 2 + k;
            ck_assert_int_eq(m->lin[i].fin, 64);
            ck_assert_int_eq(m->lin[i].fout, 16);
            ck_assert_int_eq(m->lin[i].Q, 3);
            ck_assert_int_eq(m->lin[i].T, 3);
            ck_assert_ptr_null(m->lin[i].w_src);
            ck_assert_ptr_null(m->lin[i].w_tgt);
            ck_assert_int_eq(m->lin_up[i].fin, 16);
            ck_assert_int_eq(m->lin_up[i].fout, 64);
            ck_assert_int_eq(m->lin_up[i].Q, 3);
            ck_assert_int_eq(m->lin_up[i].T, 3);
            ck_assert_int_eq(m->rs[i].F, 16);
            ck_assert_int_eq(m->rs[i].Q, 3);
            ck_assert_int_eq(m->rs[i].G, 9);
            ck_assert_int_eq(m->rs[i].T, 3);
            ck_assert_int_eq(m->rs[i].act, ECENET_ACT_SILU);
            ck_assert_ptr_null(m->rs[i].scale);
            ck_assert_ptr_null(m->rs[i].shift);
            ck_assert_ptr_null(m->rs[i].scale_src);
            ck_assert_ptr_null(m->rs[i].shift_tgt);
            snprintf(name, sizeof name, "layers.%d.%d.linear_down.weights", g, k);
            ck_assert_ptr_eq(m->lin[i].w, file_ptr(m, name));
            snprintf(name, sizeof name, "layers.%d.%d.linear_down.bias", g, k);
            ck_assert_ptr_eq(m->lin[i].bias, file_ptr(m, name));
            snprintf(name, sizeof name, "layers.%d.%d.linear_up.weights", g, k);
            ck_assert_ptr_eq(m->lin_up[i].w, file_ptr(m, name));
            snprintf(name, sizeof name, "layers.%d.%d.linear_up.bias", g, k);
            ck_assert_ptr_eq(m->lin_up[i].bias, file_ptr(m, name));
            snprintf(name, sizeof name, "layers.%d.%d.nonlin.cos_synth", g, k);
            ck_assert_ptr_eq(m->rs[i].cos_synth, file_ptr(m, name));
            snprintf(name, sizeof name, "layers.%d.%d.nonlin.sin_analysis", g, k);
            ck_assert_ptr_eq(m->rs[i].sin_analysis, file_ptr(m, name));
            check_dft(&m->rs[i], 3, 9);
        }
    for (g = 0; g < 2; g++) check_amp(m, g);

    /* FiLM: dims [2P + n_rbf, hidden, F] = [32, 128, 64]; Sequential indices 0, 2 */
    ck_assert_ptr_eq(m->film.a, file_ptr(m, "element_film.a.weight"));
    ck_assert_ptr_eq(m->film.b, file_ptr(m, "element_film.b.weight"));
    ck_assert_int_eq(m->film.mlp.n_layers, 2);
    ck_assert_int_eq(m->film.mlp.dims[0], 32);
    ck_assert_int_eq(m->film.mlp.dims[1], 128);
    ck_assert_int_eq(m->film.mlp.dims[2], 64);
    ck_assert_int_eq(m->film.mlp.act, ECENET_ACT_SILU);
    ck_assert_int_eq(m->film.mlp.T, 3);
    ck_assert_ptr_eq(m->film.mlp.w[0], file_ptr(m, "element_film.mlp.0.weight"));
    ck_assert_ptr_eq(m->film.mlp.b[0], file_ptr(m, "element_film.mlp.0.bias"));
    ck_assert_ptr_eq(m->film.mlp.w[1], file_ptr(m, "element_film.mlp.2.weight"));
    ck_assert_ptr_eq(m->film.mlp.b[1], file_ptr(m, "element_film.mlp.2.bias"));
    ck_assert_ptr_null(m->film.mlp.w_src[0]);

    /* plain readout [64, 64, 1] */
    ck_assert_int_eq(m->mlp.n_layers, 2);
    ck_assert_int_eq(m->mlp.dims[0], 64);
    ck_assert_int_eq(m->mlp.dims[1], 64);
    ck_assert_int_eq(m->mlp.dims[2], 1);
    ck_assert_int_eq(m->mlp.act, ECENET_ACT_SILU);
    ck_assert_ptr_eq(m->mlp.w[1], file_ptr(m, "output_net.linears.1.weight"));
    ck_assert_ptr_null(m->mlp.w_src[0]);
    ck_assert_ptr_null(m->mlp.w_tgt[1]);

    js = ecenet_model_config_json(m);
    ck_assert(contains(js, "\"variant\":\t\"thglab-research\""));
    ck_assert(contains(js, "\"mp_type\":\t\"softmax\""));
    ck_assert(contains(js, "\"mp_dim\":\t16"));
    ck_assert(contains(js, "\"mp_n_heads\":\t2"));
    ck_assert(contains(js, "\"bottleneck_dim\":\t16"));
    ck_assert(contains(js, "\"element_film\":\ttrue"));
    ck_assert(contains(js, "\"mp_msg_envelope\":\ttrue"));
    ck_assert(contains(js, "\"film_hidden\":\t[128]"));
    ck_assert(contains(js, "\"n_grid\":\t9"));
    ck_assert(contains(js, "\"les_readout\":\t\"sum\""));
    ck_assert(!contains(js, "n_dist_basis"));
    ck_assert(!contains(js, "edge_type"));
    ecenet_model_free(m);
}
END_TEST

START_TEST(test_thglab_sum_pbc)
{
    ecenet_model *m = load_ok("thglab_sum_pbc");
    const ecn_config *c = &m->cfg;
    const char *js;
    /* README: l_max=3, n_max=4, embed_dim=4, n_layers=1, n_mp=2, mp_type='sum',
     * bottleneck_dim=None, element_film=False; defaults in effect: m_max=3,
     * n_grid=13, mp_dim=8, mp_n_heads=1, cosine cutoff, silu */
    ck_assert_str_eq(ecenet_model_variant(m), "thglab-research");
    ck_assert_int_eq(ecenet_model_type_number(m, 0), 14);
    ck_assert_int_eq(ecenet_model_type_number(m, 1), 6);
    ck_assert_int_eq(c->l_max, 3);
    ck_assert_int_eq(c->m_max, 3);
    ck_assert_int_eq(c->n_max, 4);
    ck_assert_int_eq(c->embed_dim, 4);
    ck_assert_int_eq(c->n_layers, 1);
    ck_assert_int_eq(c->n_mp, 2);
    ck_assert_int_eq(c->n_grid, 13);
    ck_assert_int_eq(c->cutoff_type, ECENET_CUTOFF_COSINE);
    ck_assert_int_eq(c->activation, ECENET_ACT_SILU);
    ck_assert_int_eq(c->mp_type, ECN_MP_SUM);
    ck_assert_int_eq(c->mp_dim, 8);
    ck_assert_int_eq(c->mp_n_heads, 1);
    ck_assert_int_eq(c->mp_l_attention, 0);
    /* the file says true; 'sum' is enveloped by construction, so not in effect */
    ck_assert_int_eq(c->mp_msg_envelope, 0);
    ck_assert_int_eq(c->bottleneck_dim, 0);
    ck_assert_int_eq(c->element_film, 0);
    ck_assert_int_eq(c->film_n_hidden, 0);
    ck_assert_int_eq(c->n_hidden, 1);
    ck_assert_int_eq(c->hidden[0], 64);
    ck_assert_int_eq(c->Q, 4);
    ck_assert_int_eq(c->F, 32);
    ck_assert_int_eq(c->n_scores, 1);

    ck_assert_ptr_null(m->lin_up);
    ck_assert_ptr_null(m->W_msg);
    ck_assert_ptr_null(m->film.a);
    ck_assert_ptr_null(m->film.b);
    ck_assert_int_eq(m->film.mlp.n_layers, 0);
    ck_assert_int_eq(m->lin[1].fin, 32);
    ck_assert_int_eq(m->lin[1].fout, 32);
    ck_assert_ptr_eq(m->lin[0].w, file_ptr(m, "layers.0.0.linear.weights"));
    ck_assert_ptr_eq(m->lin[1].bias, file_ptr(m, "layers.1.0.linear.bias"));
    ck_assert_int_eq(m->rs[1].F, 32);
    ck_assert_int_eq(m->rs[1].G, 13);
    ck_assert_int_eq(m->rs[1].Q, 4);
    ck_assert_ptr_null(m->rs[1].scale);
    ck_assert_ptr_eq(m->rs[1].cos_analysis, file_ptr(m, "layers.1.0.nonlin.cos_analysis"));
    check_dft(&m->rs[0], 4, 13);
    check_amp(m, 0);
    ck_assert_int_eq(m->amp[0].score.dims[1], 1);
    ck_assert_int_eq(m->mlp.dims[0], 32);
    ck_assert_int_eq(m->mlp.dims[1], 64);
    ck_assert_int_eq(m->mlp.dims[2], 1);

    js = ecenet_model_config_json(m);
    ck_assert(contains(js, "\"mp_type\":\t\"sum\""));
    ck_assert(contains(js, "\"bottleneck_dim\":\tnull"));
    ck_assert(contains(js, "\"film_hidden\":\tnull"));
    ck_assert(contains(js, "\"element_film\":\tfalse"));
    ck_assert(contains(js, "\"Si\":\t0"));
    ecenet_model_free(m);
}
END_TEST

/* Loads `path` (must succeed), removes the file; caller frees the model. */
static ecenet_model *load_tmp(char *path)
{
    char err[2048];
    ecenet_model *m = NULL;
    ecenet_status s = ecenet_model_load(path, &m, err, sizeof err);
    ck_assert_msg(s == ECENET_OK, "loading failed (%d): %s", (int)s, err);
    unlink(path);
    free(path);
    return m;
}

/* Accepted variations of the research config. */
START_TEST(test_research_variations)
{
    ecenet_model *m;
    raw_file r;
    char *a, *end;

    /* 'transformer' is the former name of 'softmax' */
    m = load_tmp(golden_edit("thglab_softmax", "\\\"mp_type\\\": \\\"softmax\\\"",
                             "\\\"mp_type\\\": \\\"transformer\\\""));
    ck_assert_int_eq(m->cfg.mp_type, ECN_MP_SOFTMAX);
    ck_assert(contains(ecenet_model_config_json(m), "\"mp_type\":\t\"softmax\""));
    ecenet_model_free(m);

    /* film_hidden as a plain integer (ElementFiLM accepts int) */
    m = load_tmp(golden_edit("thglab_softmax", "\\\"film_hidden\\\": [128]",
                             "\\\"film_hidden\\\": 128"));
    ck_assert_int_eq(m->cfg.film_n_hidden, 1);
    ck_assert_int_eq(m->cfg.film_hidden[0], 128);
    ecenet_model_free(m);

    /* output_hidden_dims [] means [64] in the research constructor */
    m = load_tmp(golden_edit("thglab_softmax", "\\\"output_hidden_dims\\\": [64]",
                             "\\\"output_hidden_dims\\\": []"));
    ck_assert_int_eq(m->cfg.n_hidden, 1);
    ck_assert_int_eq(m->cfg.hidden[0], 64);
    ecenet_model_free(m);

    /* public-only keys with their neutral values */
    m = load_tmp(golden_edit("thglab_softmax", "\\\"n_types\\\": 3, ",
                             "\\\"n_types\\\": 3, \\\"n_dist_basis\\\": 0, \\\"n_dist_embed\\\": "
                             "null, \\\"edge_type_linear\\\": false, "));
    ck_assert_int_eq(m->cfg.n_dist_basis, 0);
    ecenet_model_free(m);

    /* film switches are inert without element_film */
    m = load_tmp(golden_edit("thglab_sum_pbc", "\\\"film_per_m\\\": false",
                             "\\\"film_per_m\\\": true"));
    ck_assert_int_eq(m->cfg.element_film, 0);
    ecenet_model_free(m);

    /* the grid matrices are taken from the file (within 1e-12 of the DFT) */
    {
        double v = golden_value("thglab_softmax", "layers.1.0.nonlin.cos_analysis", 4) + 1e-13;
        m = load_tmp(golden_poke("thglab_softmax",
                                 golden_offset("thglab_softmax", "layers.1.0.nonlin.cos_analysis", 4),
                                 &v));
        ck_assert(((const double *)m->rs[2].cos_analysis)[4] == v);
        ecenet_model_free(m);
    }

    /* only `config` (None not resolved): the same resolution */
    raw_read("thglab_softmax", &r);
    a = strstr(r.json, "\"config_resolved\":\"");
    end = strstr(r.json, "\"element_to_type\":");
    ck_assert(a && end && end > a);
    memmove(a, end, strlen(end) + 1);
    m = load_tmp(write_st(r.json, r.data, r.data_len));
    raw_free(&r);
    ck_assert_int_eq(m->cfg.n_grid, 9);
    ck_assert_int_eq(m->cfg.mp_dim, 16);
    ck_assert_int_eq(m->cfg.film_n_hidden, 1);
    ck_assert_int_eq(m->cfg.film_hidden[0], 128);
    ck_assert_int_eq(m->cfg.n_hidden, 1);
    ck_assert_int_eq(m->cfg.hidden[0], 64);
    ck_assert_int_eq(m->cfg.bottleneck_dim, 16);
    ecenet_model_free(m);
}
END_TEST

/* Files that mix the variants. */
START_TEST(test_research_mixed)
{
    /* a public tensor in a research file */
    expect_fail(golden_edit("thglab_softmax", "\"W\":{",
                            "\"mp_layers.0.W_msg\":{\"dtype\":\"F64\",\"shape\":[0],"
                            "\"data_offsets\":[0,0]},\"W\":{"),
                ECENET_ERR_FORMAT, "tensor 'mp_layers.0.W_msg'", "public release");
    expect_fail(golden_edit("thglab_sum_pbc", "\"W\":{",
                            "\"layers.0.0.nonlin.pre_scale\":{\"dtype\":\"F64\",\"shape\":[0],"
                            "\"data_offsets\":[0,0]},\"W\":{"),
                ECENET_ERR_FORMAT, "tensor 'layers.0.0.nonlin.pre_scale'", "public release");
    expect_fail(golden_edit("thglab_sum_pbc", "\"W\":{",
                            "\"V_dist\":{\"dtype\":\"F64\",\"shape\":[0],"
                            "\"data_offsets\":[0,0]},\"W\":{"),
                ECENET_ERR_FORMAT, "tensor 'V_dist'", "public release");
    /* full-width layers with bottleneck_dim, bottleneck layers without it */
    expect_fail(golden_edit("thglab_sum_pbc", "\\\"bottleneck_dim\\\": null",
                            "\\\"bottleneck_dim\\\": 8"),
                ECENET_ERR_FORMAT, "tensor 'layers.0.0.linear.bias'", "bottleneck_dim = 8");
    expect_fail(golden_edit("thglab_softmax", "\\\"bottleneck_dim\\\": 16",
                            "\\\"bottleneck_dim\\\": null"),
                ECENET_ERR_FORMAT, "tensor 'layers.0.0.linear_down.bias'", "bottleneck_dim is null");
    /* FiLM tensors with element_film off */
    expect_fail(golden_edit("thglab_softmax", "\\\"element_film\\\": true",
                            "\\\"element_film\\\": false"),
                ECENET_ERR_FORMAT, "tensor 'element_film.a.weight'", "element_film is false");
    /* public-only config keys with non-neutral values */
    expect_fail(golden_edit("thglab_softmax", "\\\"n_types\\\": 3, ",
                            "\\\"n_types\\\": 3, \\\"n_dist_basis\\\": 8, "),
                ECENET_ERR_FORMAT, "'n_dist_basis' = 8", "public release");
    expect_fail(golden_edit("thglab_softmax", "\\\"n_types\\\": 3, ",
                            "\\\"n_types\\\": 3, \\\"edge_type_output\\\": true, "),
                ECENET_ERR_FORMAT, "'edge_type_output' = true", NULL);
    /* research keys without the research variant marker */
    expect_fail(golden_edit("thglab_softmax", "\"variant\":\"thglab-research\",", ""),
                ECENET_ERR_FORMAT, "key 'bottleneck_dim' belongs to the research", "mix");
    expect_fail(diamond_edit("\\\"n_types\\\": 1,", "\\\"n_types\\\": 1, \\\"mp_type\\\": \\\"sum\\\","),
                ECENET_ERR_FORMAT, "key 'mp_type' belongs to the research", NULL);
    expect_fail(diamond_edit("\\\"n_types\\\": 1,", "\\\"n_types\\\": 1, \\\"les_dipole\\\": false,"),
                ECENET_ERR_FORMAT, "key 'les_dipole' belongs to the research", NULL);
    /* a research tensor in a public file */
    expect_fail(diamond_edit("\"W\":{", "\"element_film.a.weight\":{\"dtype\":\"F64\",\"shape\":[0],"
                                        "\"data_offsets\":[0,0]},\"W\":{"),
                ECENET_ERR_FORMAT, "tensor 'element_film.a.weight' belongs to the research", NULL);
    /* a public file marked research: its switches are missing */
    expect_fail(diamond_edit("\"format_version\":\"1\"",
                             "\"format_version\":\"1\",\"variant\":\"thglab-research\""),
                ECENET_ERR_FORMAT, "research", NULL);
    expect_fail(diamond_edit("\"format_version\":\"1\"", "\"format_version\":\"1\",\"variant\":\"x\""),
                ECENET_ERR_UNSUPPORTED, "unknown model variant 'x'", NULL);
}
END_TEST

/* Bad research configurations. */
START_TEST(test_research_bad_config)
{
    /* every switch must be there (SPEC §18.21) */
    expect_fail(golden_edit("thglab_softmax", "\\\"mp_dim\\\": 16, ", ""), ECENET_ERR_FORMAT,
                "config_resolved: research-version switch 'mp_dim' is missing", NULL);
    expect_fail(golden_edit("thglab_softmax", "\\\"film_shift\\\": false, ", ""),
                ECENET_ERR_FORMAT, "'film_shift' is missing", NULL);
    expect_fail(golden_edit("thglab_softmax", "\\\"n_grid\\\": 9, ", ""), ECENET_ERR_FORMAT,
                "key 'n_grid' is missing", "SPEC §18.21");
    expect_fail(golden_edit("thglab_sum_pbc", "\\\"n_mp\\\": 2, ", ""), ECENET_ERR_FORMAT,
                "key 'n_mp' is missing", NULL);
    /* switch values */
    expect_fail(golden_edit("thglab_softmax", "\\\"mp_type\\\": \\\"softmax\\\"",
                            "\\\"mp_type\\\": \\\"edge\\\""),
                ECENET_ERR_UNSUPPORTED, "unknown mp_type \"edge\"", NULL);
    expect_fail(golden_edit("thglab_softmax", "\\\"mp_type\\\": \\\"softmax\\\"",
                            "\\\"mp_type\\\": 2"),
                ECENET_ERR_FORMAT, "mp_type must be a string", NULL);
    expect_fail(golden_edit("thglab_softmax", "\\\"film_per_m\\\": false",
                            "\\\"film_per_m\\\": true"),
                ECENET_ERR_UNSUPPORTED, "film_per_m", "not supported");
    expect_fail(golden_edit("thglab_softmax", "\\\"film_shift\\\": false",
                            "\\\"film_shift\\\": true"),
                ECENET_ERR_UNSUPPORTED, "film_shift", "not supported");
    expect_fail(golden_edit("thglab_softmax", "\\\"use_nonlinearity\\\": true",
                            "\\\"use_nonlinearity\\\": false"),
                ECENET_ERR_UNSUPPORTED, "use_nonlinearity", "not supported");
    expect_fail(golden_edit("thglab_softmax", "\\\"mp_n_heads\\\": 2", "\\\"mp_n_heads\\\": 3"),
                ECENET_ERR_FORMAT, "mp_n_heads = 3 does not divide", "= 16");
    expect_fail(golden_edit("thglab_softmax", "\\\"mp_dim\\\": 16", "\\\"mp_dim\\\": 0"),
                ECENET_ERR_FORMAT, "mp_dim = 0", "out of range");
    expect_fail(golden_edit("thglab_softmax", "\\\"bottleneck_dim\\\": 16",
                            "\\\"bottleneck_dim\\\": 0"),
                ECENET_ERR_FORMAT, "bottleneck_dim must be null or at least 1", NULL);
    expect_fail(golden_edit("thglab_softmax", "\\\"element_film\\\": true",
                            "\\\"element_film\\\": 1"),
                ECENET_ERR_FORMAT, "element_film", "true or false");
    expect_fail(golden_edit("thglab_softmax", "\\\"film_hidden\\\": [128]",
                            "\\\"film_hidden\\\": [0]"),
                ECENET_ERR_FORMAT, "film_hidden[0]", NULL);
    expect_fail(golden_edit("thglab_softmax", "\\\"les_readout\\\": \\\"sum\\\"",
                            "\\\"les_readout\\\": \\\"edge\\\""),
                ECENET_ERR_UNSUPPORTED, "les_readout", "LES");
    expect_fail(golden_edit("thglab_softmax", "\\\"les_dipole\\\": false",
                            "\\\"les_dipole\\\": true"),
                ECENET_ERR_UNSUPPORTED, "les_dipole", NULL);
    expect_fail(golden_edit("thglab_softmax", "\\\"les_charge_scale\\\": 1.0",
                            "\\\"les_charge_scale\\\": -1.0"),
                ECENET_ERR_FORMAT, "les_charge_scale", NULL);
    expect_fail(golden_edit("thglab_softmax", "\\\"n_types\\\": 3, ",
                            "\\\"n_types\\\": 3, \\\"mp_gate\\\": true, "),
                ECENET_ERR_UNSUPPORTED, "unknown key 'mp_gate'", NULL);
    /* consistent config changes that the tensors do not follow */
    expect_fail(golden_edit("thglab_softmax", "\\\"mp_l_attention\\\": false",
                            "\\\"mp_l_attention\\\": true"),
                ECENET_ERR_FORMAT, "tensor 'mp_layers.0.msg_up.weights'",
                "expected F64 (3,72,16), found F64 (3,66,16)");
    expect_fail(golden_edit("thglab_softmax", "\\\"film_hidden\\\": [128]",
                            "\\\"film_hidden\\\": [64]"),
                ECENET_ERR_FORMAT, "tensor 'element_film.mlp.0.weight'", "expected F64 (64,32)");
    expect_fail(golden_edit("thglab_softmax", "\\\"film_n_rbf\\\": 0",
                            "\\\"film_n_rbf\\\": 4"),
                ECENET_ERR_FORMAT, "tensor 'element_film.mlp.0.weight'", "expected F64 (128,36)");
    expect_fail(golden_edit("thglab_sum_pbc", "\\\"mp_dim\\\": 8", "\\\"mp_dim\\\": 4"),
                ECENET_ERR_FORMAT, "tensor 'mp_layers.0.msg_down.weights'", "(4,4,32)");
}
END_TEST

/* Bad research tensors. */
START_TEST(test_research_bad_tensors)
{
    double v, nan_v = NAN;
    expect_fail(golden_edit("thglab_softmax", "\"mp_layers.1.msg_up.bias\":",
                            "\"mp_layers.1.msg_up.biasX\":"),
                ECENET_ERR_FORMAT, "missing tensor 'mp_layers.1.msg_up.bias' (expected F64 (66))",
                NULL);
    expect_fail(golden_edit("thglab_softmax", "\"element_film.mlp.2.bias\":",
                            "\"element_film.mlp.1.bias\":"),
                ECENET_ERR_FORMAT, "missing tensor 'element_film.mlp.2.bias' (expected F64 (64))",
                NULL);
    expect_fail(golden_edit("thglab_softmax",
                            "\"mp_layers.0.msg_up.weights\":{\"dtype\":\"F64\",\"shape\":[3,66,16]",
                            "\"mp_layers.0.msg_up.weights\":{\"dtype\":\"F64\",\"shape\":[3,16,66]"),
                ECENET_ERR_FORMAT, "tensor 'mp_layers.0.msg_up.weights'",
                "expected F64 (3,66,16), found F64 (3,16,66)");
    expect_fail(golden_edit("thglab_sum_pbc", "\"W\":{",
                            "\"mp_layers.0.l_of_s\":{\"dtype\":\"I64\",\"shape\":[0],"
                            "\"data_offsets\":[0,0]},\"W\":{"),
                ECENET_ERR_FORMAT, "unknown tensor 'mp_layers.0.l_of_s'", NULL);
    expect_fail(golden_poke("thglab_softmax",
                            golden_offset("thglab_softmax", "element_film.mlp.2.weight", 7), &nan_v),
                ECENET_ERR_FORMAT, "tensor 'element_film.mlp.2.weight'", "not finite");
    expect_fail(golden_poke("thglab_sum_pbc",
                            golden_offset("thglab_sum_pbc", "mp_layers.0.msg_nonlin.sin_synth", 3),
                            &nan_v),
                ECENET_ERR_FORMAT, "tensor 'mp_layers.0.msg_nonlin.sin_synth'", "not finite");
    /* grid matrices must be the exact DFT matrices: 1e-6 off is refused */
    v = golden_value("thglab_softmax", "layers.1.0.nonlin.cos_analysis", 4) + 1e-6;
    expect_fail(golden_poke("thglab_softmax",
                            golden_offset("thglab_softmax", "layers.1.0.nonlin.cos_analysis", 4), &v),
                ECENET_ERR_FORMAT, "tensor 'layers.1.0.nonlin.cos_analysis': entry [1,1]",
                "exact DFT matrix");
    v = golden_value("thglab_softmax", "mp_layers.1.receiver.nonlin.sin_synth", 11) - 1e-6;
    expect_fail(golden_poke("thglab_softmax",
                            golden_offset("thglab_softmax", "mp_layers.1.receiver.nonlin.sin_synth",
                                          11), &v),
                ECENET_ERR_FORMAT, "tensor 'mp_layers.1.receiver.nonlin.sin_synth': entry [1,2]",
                "n_grid = 9");
    v = golden_value("thglab_sum_pbc", "mp_layers.0.msg_nonlin.cos_synth", 0) + 1e-6;
    expect_fail(golden_poke("thglab_sum_pbc",
                            golden_offset("thglab_sum_pbc", "mp_layers.0.msg_nonlin.cos_synth", 0),
                            &v),
                ECENET_ERR_FORMAT, "tensor 'mp_layers.0.msg_nonlin.cos_synth': entry [0,0]", NULL);
    /* the index buffers are checked as in public files */
    {
        int64_t seven = 7;
        expect_fail(golden_poke("thglab_softmax",
                                golden_offset("thglab_softmax", "sph_to_angular.cos_idx", 5 * 3 + 1),
                                &seven),
                    ECENET_ERR_FORMAT, "tensor 'sph_to_angular.cos_idx'", "entry [5,1] is 7");
    }
}
END_TEST

/* the golden models: tcase "golden" */
void research_load_tests(TCase *tc)
{
    tcase_add_test(tc, test_thglab_softmax);
    tcase_add_test(tc, test_thglab_sum_pbc);
}

/* edited and damaged files: tcase "bad_files" */
void research_bad_tests(TCase *tc)
{
    tcase_add_test(tc, test_research_variations);
    tcase_add_test(tc, test_research_mixed);
    tcase_add_test(tc, test_research_bad_config);
    tcase_add_test(tc, test_research_bad_tensors);
}
