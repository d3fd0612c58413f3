/* The golden models of the public release (ethanol, diamond, options) load with
 * the right configuration, and the model's pointers go to the right tensors. */
#include "harness.h"

START_TEST(test_ethanol)
{
    ecenet_model *m = load_ok("ethanol");
    const ecn_config *c = &m->cfg;
    ecn_safetensors *st = tu_open_golden("ethanol", "model");
    int i;

    ck_assert_int_eq(ecenet_model_n_types(m), 3);
    ck_assert_int_eq(ecenet_model_type_number(m, 0), 1);
    ck_assert_int_eq(ecenet_model_type_number(m, 1), 6);
    ck_assert_int_eq(ecenet_model_type_number(m, 2), 8);
    ck_assert_int_eq(ecenet_model_type_number(m, 3), -1);
    ck_assert_int_eq(ecenet_model_type_number(m, -1), -1);
    ck_assert_int_eq(ecenet_model_type_of(m, 1), 0);
    ck_assert_int_eq(ecenet_model_type_of(m, 6), 1);
    ck_assert_int_eq(ecenet_model_type_of(m, 8), 2);
    ck_assert_int_eq(ecenet_model_type_of(m, 7), -1);
    ck_assert_int_eq(ecenet_model_type_of(m, 0), -1);
    ck_assert_double_eq(ecenet_model_cutoff_edge(m), 5.0);
    ck_assert_double_eq(ecenet_model_cutoff_neighbor(m), 4.0);
    ck_assert_str_eq(ecenet_model_variant(m), "ecenet-public");

    ck_assert_int_eq(c->l_max, 3);
    ck_assert_int_eq(c->m_max, 3);
    ck_assert_int_eq(c->n_max, 4);
    ck_assert_int_eq(c->embed_dim, 8);
    ck_assert_int_eq(c->n_layers, 2);
    ck_assert_int_eq(c->n_mp, 2);
    ck_assert_int_eq(c->n_dist_basis, 8);
    ck_assert_int_eq(c->n_max_d, 0);
    ck_assert_int_eq(c->n_grid, 13);
    ck_assert_int_eq(c->n_dist_embed, 0);
    ck_assert_int_eq(c->cutoff_type, ECENET_CUTOFF_COSINE);
    ck_assert_int_eq(c->activation, ECENET_ACT_SILU);
    ck_assert_int_eq(c->use_nonlinearity, 1);
    ck_assert_int_eq(c->edge_type_linear + c->edge_type_nonlin + c->edge_type_output, 0);
    ck_assert_int_eq(c->n_hidden, 1);
    ck_assert_int_eq(c->hidden[0], 64);
    ck_assert_int_eq(c->S, 16);
    ck_assert_int_eq(c->Q, 4);
    ck_assert_int_eq(c->B, 16);
    ck_assert_int_eq(c->F, 64);
    ck_assert_double_eq(m->unit, 1.0);
    ck_assert_double_eq(m->energy_mean, 0.0);
    for (i = 0; i < 3; i++) ck_assert_double_eq(m->e_ref[i], 0.0);

    /* pointers go to the right tensors (compare with an independent read) */
    ck_assert_mem_eq(m->W, tu_f64(st, "W", 3 * 3 * 4 * 8), 3 * 3 * 4 * 8 * sizeof(double));
    ck_assert_mem_eq(m->atomic_energy, tu_f64(st, "atomic_energy", 3), 3 * sizeof(double));
    ck_assert_ptr_null(m->V_dist);
    ck_assert_mem_eq(m->lin[3].w, tu_f64(st, "layers.1.1.linear.weights", 4 * 64 * 64),
                     4 * 64 * 64 * sizeof(double));
    ck_assert_mem_eq(m->lin[1].bias, tu_f64(st, "layers.0.1.linear.bias", 64), 64 * sizeof(double));
    for (i = 0; i < 4; i++) {
        ck_assert_int_eq(m->lin[i].fin, 64);
        ck_assert_int_eq(m->lin[i].fout, 64);
        ck_assert_int_eq(m->lin[i].Q, 4);
        ck_assert_int_eq(m->lin[i].T, 3);
        ck_assert_ptr_null(m->lin[i].w_src);
        ck_assert_ptr_null(m->lin[i].w_tgt);
        ck_assert_int_eq(m->rs[i].F, 64);
        ck_assert_int_eq(m->rs[i].Q, 4);
        ck_assert_int_eq(m->rs[i].G, 13);
        ck_assert_int_eq(m->rs[i].act, ECENET_ACT_SILU);
        ck_assert_ptr_nonnull(m->rs[i].scale);
        ck_assert_ptr_nonnull(m->rs[i].shift);
        ck_assert_ptr_null(m->rs[i].scale_src);
        ck_assert_ptr_null(m->rs[i].shift_tgt);
    }
    ck_assert_mem_eq(m->rs[2].cos_synth, tu_f64(st, "layers.1.0.nonlin.cos_synth", 4 * 13),
                     4 * 13 * sizeof(double));
    ck_assert_mem_eq(m->rs[2].sin_analysis, tu_f64(st, "layers.1.0.nonlin.sin_analysis", 13 * 4),
                     13 * 4 * sizeof(double));
    ck_assert_mem_eq(m->rs[0].shift, tu_f64(st, "layers.0.0.nonlin.pre_shift", 64),
                     64 * sizeof(double));
    ck_assert_mem_eq(m->W_msg[0], tu_f64(st, "mp_layers.0.W_msg", 3 * 3 * 8 * 16),
                     3 * 3 * 8 * 16 * sizeof(double));
    ck_assert_int_eq(m->mlp.n_layers, 2);
    ck_assert_int_eq(m->mlp.dims[0], 64);
    ck_assert_int_eq(m->mlp.dims[1], 64);
    ck_assert_int_eq(m->mlp.dims[2], 1);
    ck_assert_int_eq(m->mlp.act, ECENET_ACT_SILU);
    ck_assert_int_eq(m->mlp.T, 3);
    ck_assert_mem_eq(m->mlp.w[1], tu_f64(st, "output_net.linears.1.weight", 64), 64 * sizeof(double));
    ck_assert_mem_eq(m->mlp.b[1], tu_f64(st, "output_net.linears.1.bias", 1), sizeof(double));
    ck_assert_ptr_null(m->mlp.w_src[0]);
    ck_assert_ptr_null(m->mlp.w_tgt[1]);

    ck_assert(contains(ecenet_model_config_json(m), "\"element_to_type\""));
    ck_assert(contains(ecenet_model_config_json(m), "\"O\":"));
    ck_assert(contains(ecenet_model_config_json(m), "\"n_grid\":\t13"));
    ecn_st_close(st);
    ecenet_model_free(m);
}
END_TEST

START_TEST(test_diamond)
{
    ecenet_model *m = load_ok("diamond");
    ecn_safetensors *st = tu_open_golden("diamond", "model");
    ck_assert_int_eq(ecenet_model_n_types(m), 1);
    ck_assert_int_eq(ecenet_model_type_number(m, 0), 6);
    ck_assert_int_eq(ecenet_model_type_of(m, 6), 0);
    ck_assert_int_eq(ecenet_model_type_of(m, 14), -1);
    ck_assert_int_eq(m->cfg.embed_dim, 4);
    ck_assert_int_eq(m->cfg.n_layers, 1);
    ck_assert_int_eq(m->cfg.n_mp, 2);
    ck_assert_int_eq(m->cfg.F, 32);
    ck_assert_int_eq(m->cfg.B, 8);
    /* n_mp = 2, n_layers = 1: lin[g] is layers.g.0 */
    ck_assert_mem_eq(m->lin[1].w, tu_f64(st, "layers.1.0.linear.weights", 4 * 32 * 32),
                     4 * 32 * 32 * sizeof(double));
    ck_assert_ptr_eq(m->W_msg[0], ecn_st_find(m->file, "mp_layers.0.W_msg")->data);
    ck_assert_ptr_eq(m->lin[0].w, ecn_st_find(m->file, "layers.0.0.linear.weights")->data);
    ck_assert_int_eq(m->mlp.dims[0], 32);
    ck_assert_int_eq(m->mlp.dims[1], 64);
    ck_assert_int_eq(m->mlp.dims[2], 1);
    ecn_st_close(st);
    ecenet_model_free(m);
}
END_TEST

START_TEST(test_options)
{
    ecenet_model *m = load_ok("options");
    const ecn_config *c = &m->cfg;
    ecn_safetensors *st = tu_open_golden("options", "model");
    int g;
    ck_assert_int_eq(ecenet_model_n_types(m), 2);
    ck_assert_int_eq(ecenet_model_type_number(m, 0), 11);
    ck_assert_int_eq(ecenet_model_type_number(m, 1), 17);
    ck_assert_int_eq(ecenet_model_type_of(m, 17), 1);
    ck_assert_double_eq(ecenet_model_cutoff_edge(m), 4.5);
    ck_assert_double_eq(ecenet_model_cutoff_neighbor(m), 3.5);
    ck_assert_int_eq(c->l_max, 4);
    ck_assert_int_eq(c->m_max, 2);
    ck_assert_int_eq(c->n_grid, 11);
    ck_assert_int_eq(c->n_max, 3);
    ck_assert_int_eq(c->n_mp, 3);
    ck_assert_int_eq(c->n_dist_basis, 6);
    ck_assert_int_eq(c->n_max_d, 3);
    ck_assert_int_eq(c->n_dist_embed, 5);
    ck_assert_int_eq(c->cutoff_type, ECENET_CUTOFF_POLY);
    ck_assert_int_eq(c->activation, ECENET_ACT_TANH);
    ck_assert_int_eq(c->edge_type_linear, 1);
    ck_assert_int_eq(c->edge_type_nonlin, 1);
    ck_assert_int_eq(c->edge_type_output, 1);
    ck_assert_int_eq(c->n_hidden, 2);
    ck_assert_int_eq(c->S, 25);
    ck_assert_int_eq(c->Q, 3);
    ck_assert_int_eq(c->F, 40);
    ck_assert_mem_eq(m->V_dist, tu_f64(st, "V_dist", 5 * 40), 5 * 40 * sizeof(double));
    for (g = 0; g < 3; g++) {
        char name[64];
        snprintf(name, sizeof name, "layers.%d.0.linear.weights_tgt", g);
        ck_assert_mem_eq(m->lin[g].w_tgt, tu_f64(st, name, 2 * 3 * 40 * 40),
                         2 * 3 * 40 * 40 * sizeof(double));
        ck_assert_ptr_nonnull(m->lin[g].w_src);
        snprintf(name, sizeof name, "layers.%d.0.nonlin.pre_scale_base", g);
        ck_assert_mem_eq(m->rs[g].scale, tu_f64(st, name, 40), 40 * sizeof(double));
        snprintf(name, sizeof name, "layers.%d.0.nonlin.pre_shift_src", g);
        ck_assert_mem_eq(m->rs[g].shift_src, tu_f64(st, name, 80), 80 * sizeof(double));
        ck_assert_ptr_nonnull(m->rs[g].scale_src);
        ck_assert_ptr_nonnull(m->rs[g].scale_tgt);
        ck_assert_ptr_nonnull(m->rs[g].shift_tgt);
        ck_assert_int_eq(m->rs[g].act, ECENET_ACT_TANH);
        ck_assert_int_eq(m->rs[g].G, 11);
        ck_assert_int_eq(m->rs[g].Q, 3);
    }
    ck_assert_mem_eq(m->W_msg[1], tu_f64(st, "mp_layers.1.W_msg", 2 * 2 * 6 * 8),
                     2 * 2 * 6 * 8 * sizeof(double));
    ck_assert_int_eq(m->mlp.n_layers, 3);
    ck_assert_int_eq(m->mlp.dims[0], 40);
    ck_assert_int_eq(m->mlp.dims[1], 16);
    ck_assert_int_eq(m->mlp.dims[2], 8);
    ck_assert_int_eq(m->mlp.dims[3], 3);
    ck_assert_int_eq(m->mlp.act, ECENET_ACT_TANH);
    ck_assert_mem_eq(m->mlp.w_src[2], tu_f64(st, "output_net.linears.2.weights_src", 2 * 3 * 8),
                     2 * 3 * 8 * sizeof(double));
    ck_assert_ptr_nonnull(m->mlp.w_tgt[0]);
    ck_assert(contains(ecenet_model_config_json(m), "\"poly\""));
    ck_assert(contains(ecenet_model_config_json(m), "\"Cl\":\t1"));
    ecn_st_close(st);
    ecenet_model_free(m);
}
END_TEST

void golden_tests(TCase *tc)
{
    tcase_add_test(tc, test_ethanol);
    tcase_add_test(tc, test_diamond);
    tcase_add_test(tc, test_options);
}
