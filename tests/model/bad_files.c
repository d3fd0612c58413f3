/* Bad public model files (edits of the golden diamond model): each gives the
 * right status and a message that names the file and the culprit; a file with
 * only `config` still loads; truncations and random header damage (fuzz). */
#define _POSIX_C_SOURCE 200809L
#include "harness.h"

static char *diamond_poke(size_t offset, const void *value8)
{
    return golden_poke("diamond", offset, value8);
}

static size_t diamond_offset(const char *name, int64_t index)
{
    return golden_offset("diamond", name, index);
}

START_TEST(test_bad_nonexistent)
{
    expect_fail(strdup("/nonexistent-dir/none.model.safetensors"), ECENET_ERR_IO,
                "No such file", NULL);
    /* a directory (a device read as 0 bytes: 'too short') */
    char dir[] = "/tmp/ecenet_check_model_dirXXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(dir));
    expect_fail(strdup(dir), ECENET_ERR_FORMAT, "not a regular file (a directory)", NULL);
    rmdir(dir);
}
END_TEST

START_TEST(test_bad_empty)
{
    expect_fail(write_tmp(NULL, 0, NULL, 0), ECENET_ERR_FORMAT, "0 bytes", "too short");
}
END_TEST

START_TEST(test_bad_truncated)
{
    raw_file r;
    size_t hlen;
    raw_read("diamond", &r);
    hlen = r.raw_len - 8 - r.data_len;
    /* inside the length field */
    expect_fail(write_tmp(r.raw, 5, NULL, 0), ECENET_ERR_FORMAT, "too short", NULL);
    /* inside the header */
    expect_fail(write_tmp(r.raw, 8 + 100, NULL, 0), ECENET_ERR_FORMAT, "header length",
                "truncated");
    expect_fail(write_tmp(r.raw, 8 + hlen - 1, NULL, 0), ECENET_ERR_FORMAT, "header length",
                "truncated");
    /* header complete, no data at all */
    expect_fail(write_tmp(r.raw, 8 + hlen, NULL, 0), ECENET_ERR_FORMAT, "tensor 'W'",
                "exceed the data section (0 bytes)");
    /* inside the data section: the first tensor reaching past the end is named */
    expect_fail(write_tmp(r.raw, 8 + hlen + 1000, NULL, 0), ECENET_ERR_FORMAT,
                "tensor 'layers.0.0.linear.weights'", "exceed the data section (1000 bytes)");
    expect_fail(write_tmp(r.raw, r.raw_len - 1, NULL, 0), ECENET_ERR_FORMAT,
                "tensor 'sph_to_angular.sin_valid'", "exceed the data section");
    raw_free(&r);
}
END_TEST

START_TEST(test_bad_header_length)
{
    raw_file r;
    unsigned char save[8];
    raw_read("diamond", &r);
    memcpy(save, r.raw, 8);
    /* 1 MB more than the file holds */
    r.raw[2] = (unsigned char)(r.raw[2] + 0x10);
    expect_fail(write_tmp(r.raw, r.raw_len, NULL, 0), ECENET_ERR_FORMAT, "exceeds the file", NULL);
    /* absurd: 2^63 */
    memset(r.raw, 0, 8);
    r.raw[7] = 0x80;
    expect_fail(write_tmp(r.raw, r.raw_len, NULL, 0), ECENET_ERR_FORMAT, "not plausible", NULL);
    /* shorter than the JSON: the header is cut mid-text */
    memcpy(r.raw, save, 8);
    r.raw[0] = (unsigned char)(r.raw[0] - 16);
    expect_fail(write_tmp(r.raw, r.raw_len, NULL, 0), ECENET_ERR_FORMAT, "not valid JSON", NULL);
    raw_free(&r);
}
END_TEST

START_TEST(test_bad_json)
{
    expect_fail(diamond_edit("\"W\":{", "\"W\":{{"), ECENET_ERR_FORMAT, "not valid JSON", NULL);
    expect_fail(diamond_edit("\"element_to_type\":\"{", "\"element_to_type\":\"{{"),
                ECENET_ERR_FORMAT, "element_to_type", NULL);
}
END_TEST

START_TEST(test_bad_shape)
{
    /* same byte count: passes the reader, fails the model check */
    expect_fail(diamond_edit("\"layers.0.0.linear.weights\":{\"dtype\":\"F64\",\"shape\":[4,32,32]",
                             "\"layers.0.0.linear.weights\":{\"dtype\":\"F64\",\"shape\":[4,16,64]"),
                ECENET_ERR_FORMAT, "tensor 'layers.0.0.linear.weights'",
                "expected F64 (4,32,32), found F64 (4,16,64)");
    /* different byte count: caught by the reader */
    expect_fail(diamond_edit("\"layers.0.0.linear.weights\":{\"dtype\":\"F64\",\"shape\":[4,32,32]",
                             "\"layers.0.0.linear.weights\":{\"dtype\":\"F64\",\"shape\":[4,32,31]"),
                ECENET_ERR_FORMAT, "tensor 'layers.0.0.linear.weights'", "need 31744");
    expect_fail(diamond_edit("\"atomic_energy\":{\"dtype\":\"F64\",\"shape\":[1]",
                             "\"atomic_energy\":{\"dtype\":\"F64\",\"shape\":[1,1]"),
                ECENET_ERR_FORMAT, "tensor 'atomic_energy'", "expected F64 (1), found F64 (1,1)");
}
END_TEST

START_TEST(test_bad_missing)
{
    /* a header entry removed leaves its bytes to no tensor: a corrupt file */
    expect_fail(diamond_edit("\"atomic_energy\":{\"dtype\":\"F64\",\"shape\":[1],\"data_offsets\":[128,136]},", ""),
                ECENET_ERR_FORMAT, "leave bytes [128, 136) of the data section to no tensor", NULL);
    expect_fail(diamond_edit("\"atomic_energy\":{\"dtype\":\"F64\",\"shape\":[1],\"data_offsets\":[128,136]},",
                             "\"atomic_energyX\":{\"dtype\":\"F64\",\"shape\":[1],\"data_offsets\":[128,136]},"),
                ECENET_ERR_FORMAT, "missing tensor 'atomic_energy'", "(1)");
    expect_fail(diamond_edit("\"mp_layers.0.W_msg\":", "\"mp_layers.0.W_msgX\":"),
                ECENET_ERR_FORMAT, "missing tensor 'mp_layers.0.W_msg'", "(1,1,8,8)");
    /* a renamed tensor is reported as missing (before it is reported as unknown) */
    expect_fail(diamond_edit("\"atomic_energy\":", "\"atomic_energyX\":"), ECENET_ERR_FORMAT,
                "missing tensor 'atomic_energy'", NULL);
    {
        raw_file r;
        char *j1, *j2;
        raw_read("diamond", &r);
        j1 = replace(r.json, "\"W\":", "\"W0\":");
        j2 = replace(j1, "\"layers.1.0.linear.bias\":", "\"layers.1.0.linear.biasX\":");
        expect_fail(write_st(j2, r.data, r.data_len), ECENET_ERR_FORMAT,
                    "missing tensors 'W' (expected F64 (1,1,4,4)), "
                    "'layers.1.0.linear.bias' (expected F64 (32))", NULL);
        free(j1);
        free(j2);
        raw_free(&r);
    }
}
END_TEST

START_TEST(test_bad_unknown_tensor)
{
    expect_fail(diamond_edit("\"W\":{", "\"foo\":{\"dtype\":\"F64\",\"shape\":[0],\"data_offsets\":[0,0]},\"W\":{"),
                ECENET_ERR_FORMAT, "unknown tensor 'foo'", NULL);
    expect_fail(diamond_edit("\"W\":{", "\"foo\":{\"dtype\":\"F64\",\"shape\":[0],\"data_offsets\":[0,0]},"
                                        "\"bar\":{\"dtype\":\"U8\",\"shape\":[0],\"data_offsets\":[0,0]},\"W\":{"),
                ECENET_ERR_FORMAT, "unknown tensors 'bar', 'foo'", NULL);
}
END_TEST

START_TEST(test_bad_dtype)
{
    expect_fail(diamond_edit("\"W\":{\"dtype\":\"F64\"", "\"W\":{\"dtype\":\"I64\""),
                ECENET_ERR_FORMAT, "tensor 'W'", "expected F64 (1,1,4,4), found I64 (1,1,4,4)");
    expect_fail(diamond_edit("\"sph_to_angular.cos_idx\":{\"dtype\":\"I64\"",
                             "\"sph_to_angular.cos_idx\":{\"dtype\":\"F64\""),
                ECENET_ERR_FORMAT, "tensor 'sph_to_angular.cos_idx'", "expected I64");
    expect_fail(diamond_edit("\"W\":{\"dtype\":\"F64\"", "\"W\":{\"dtype\":\"BF16\""),
                ECENET_ERR_FORMAT, "tensor 'W'", "unsupported dtype");
}
END_TEST

START_TEST(test_bad_nonfinite)
{
    double nan_v = NAN, inf_v = -INFINITY;
    expect_fail(diamond_poke(diamond_offset("layers.0.0.linear.weights", 5), &nan_v),
                ECENET_ERR_FORMAT, "tensor 'layers.0.0.linear.weights'", "entry 5");
    expect_fail(diamond_poke(diamond_offset("output_net.linears.1.bias", 0), &inf_v),
                ECENET_ERR_FORMAT, "tensor 'output_net.linears.1.bias'", "not finite");
    expect_fail(diamond_poke(diamond_offset("layers.1.0.nonlin.cos_synth", 3), &nan_v),
                ECENET_ERR_FORMAT, "tensor 'layers.1.0.nonlin.cos_synth'", "not finite");
}
END_TEST

START_TEST(test_bad_buffers)
{
    int64_t seven = 7;
    double half = 0.5, one = 1.0;
    /* channel 5 has l = 1; slot m = 1 must hold 1 + 1 + 1 = 3 */
    expect_fail(diamond_poke(diamond_offset("sph_to_angular.cos_idx", 5 * 4 + 1), &seven),
                ECENET_ERR_FORMAT, "tensor 'sph_to_angular.cos_idx'", "entry [5,1] is 7, expected 3");
    expect_fail(diamond_poke(diamond_offset("sph_to_angular.sin_valid", 0), &half),
                ECENET_ERR_FORMAT, "tensor 'sph_to_angular.sin_valid'", "does not match");
    /* channel 0 has l = 0: no sine slot at m = 1 */
    expect_fail(diamond_poke(diamond_offset("mp_layers.0.pack_sin_valid_f", 1), &one),
                ECENET_ERR_FORMAT, "tensor 'mp_layers.0.pack_sin_valid_f'", "does not match");
    expect_fail(diamond_poke(diamond_offset("mp_layers.0.pack_sin_idx", 31 * 4 + 3), &seven),
                ECENET_ERR_FORMAT, "tensor 'mp_layers.0.pack_sin_idx'", "expected 9");
}
END_TEST

START_TEST(test_bad_elements)
{
    expect_fail(diamond_edit("\"element_to_type\":\"{\\\"C\\\": 0}\"",
                             "\"element_to_type\":\"{\\\"Xx\\\": 0}\""),
                ECENET_ERR_FORMAT, "unknown element symbol 'Xx'", NULL);
    expect_fail(diamond_edit("\"element_to_type\":\"{\\\"C\\\": 0}\"",
                             "\"element_to_type\":\"{\\\"c\\\": 0}\""),
                ECENET_ERR_FORMAT, "unknown element symbol 'c'", NULL);
    expect_fail(diamond_edit("\"element_to_type\":\"{\\\"C\\\": 0}\"",
                             "\"element_to_type\":\"{\\\"C\\\": 1}\""),
                ECENET_ERR_FORMAT, "element_to_type", "'C'");
    expect_fail(diamond_edit("\"element_to_type\":\"{\\\"C\\\": 0}\"",
                             "\"element_to_type\":\"{\\\"C\\\": 0, \\\"Si\\\": 0}\""),
                ECENET_ERR_FORMAT, "type 0 is given to both 'C' and 'Si'", NULL);
    expect_fail(diamond_edit("\"element_to_type\":\"{\\\"C\\\": 0}\"",
                             "\"element_to_type\":\"{}\""),
                ECENET_ERR_FORMAT, "no element has type 0", NULL);
    expect_fail(diamond_edit("\"element_to_type\":", "\"element_to_typo\":"),
                ECENET_ERR_FORMAT, "'element_to_type' is missing", NULL);
    expect_fail(diamond_edit("\"energy_reference\":\"{\\\"C\\\": 0.0}\"",
                             "\"energy_reference\":\"{\\\"Q\\\": 0.0}\""),
                ECENET_ERR_FORMAT, "energy_reference", "'Q'");
}
END_TEST

START_TEST(test_bad_config)
{
    expect_fail(diamond_edit("\\\"activation\\\": \\\"silu\\\"", "\\\"activation\\\": \\\"swish\\\""),
                ECENET_ERR_FORMAT, "activation", "swish");
    expect_fail(diamond_edit("\\\"cutoff_type\\\": \\\"cosine\\\"", "\\\"cutoff_type\\\": \\\"bump\\\""),
                ECENET_ERR_FORMAT, "cutoff_type", "bump");
    expect_fail(diamond_edit("\\\"l_max\\\": 3", "\\\"l_max\\\": 13"), ECENET_ERR_FORMAT,
                "l_max = 13", "out of range");
    expect_fail(diamond_edit("\\\"n_layers\\\": 1", "\\\"n_layers\\\": 0"), ECENET_ERR_FORMAT,
                "n_layers", NULL);
    expect_fail(diamond_edit("\\\"r_cut_edge\\\": 5.0", "\\\"r_cut_edge\\\": -5.0"),
                ECENET_ERR_FORMAT, "r_cut_edge", NULL);
    expect_fail(diamond_edit("\\\"embed_dim\\\": 4", "\\\"embed_dim\\\": \\\"4\\\""),
                ECENET_ERR_FORMAT, "embed_dim", "integer");
    expect_fail(diamond_edit("\\\"n_types\\\": 1, ", ""), ECENET_ERR_FORMAT, "'n_types'",
                "missing");
    expect_fail(diamond_edit("\\\"use_nonlinearity\\\": true", "\\\"use_nonlinearity\\\": 1"),
                ECENET_ERR_FORMAT, "use_nonlinearity", NULL);
    /* a consistent config change that the tensors do not follow */
    expect_fail(diamond_edit("\\\"embed_dim\\\": 4", "\\\"embed_dim\\\": 5"), ECENET_ERR_FORMAT,
                "tensor 'W'", "expected F64 (1,1,4,5), found F64 (1,1,4,4)");
    expect_fail(diamond_edit("\\\"use_nonlinearity\\\": true", "\\\"use_nonlinearity\\\": false"),
                ECENET_ERR_FORMAT, "unknown tensor", "nonlin.cos_synth");
    /* unknown keys may change the architecture */
    expect_fail(diamond_edit("\\\"n_types\\\": 1,", "\\\"n_types\\\": 1, \\\"new_switch\\\": true,"),
                ECENET_ERR_UNSUPPORTED, "unknown key 'new_switch'", NULL);
    /* variant mixing: test_research_mixed */
    expect_fail(diamond_edit("\"format\":\"ecenet\"", "\"format\":\"other\""), ECENET_ERR_FORMAT,
                "format", "\"other\"");
    expect_fail(diamond_edit("\"format_version\":\"1\"", "\"format_version\":\"2\""),
                ECENET_ERR_UNSUPPORTED, "format_version", NULL);
    expect_fail(diamond_edit("\"energy_units\":\"eV\"", "\"energy_units\":\"hartree\""),
                ECENET_ERR_FORMAT, "energy_units", "hartree");
    expect_fail(diamond_edit("\"energy_mean\":\"0.0\"", "\"energy_mean\":\"zero\""),
                ECENET_ERR_FORMAT, "energy_mean", NULL);
    /* strtod alone would read 16 eV */
    expect_fail(diamond_edit("\"energy_mean\":\"0.0\"", "\"energy_mean\":\"0x10\""),
                ECENET_ERR_FORMAT, "energy_mean '0x10' is not a finite decimal number", NULL);
    expect_fail(diamond_edit("\"energy_reference\":\"{\\\"C\\\": 0.0}\"",
                             "\"energy_reference\":\"{\\\"C\\\": 0.0, \\\"C\\\": 1.0}\""),
                ECENET_ERR_FORMAT, "energy_reference: 'C' given twice", NULL);
    /* ... and in the configuration (its lookups would see only the first) */
    expect_fail(diamond_edit("\\\"n_types\\\": 1,", "\\\"n_types\\\": 1, \\\"n_types\\\": 2,"),
                ECENET_ERR_FORMAT, "config_resolved: 'n_types' given twice", NULL);
    expect_fail(diamond_edit("\\\"analytic_ace_basis\\\": true", "\\\"analytic_ace_basis\\\": \\\"x\\\""),
                ECENET_ERR_FORMAT, "key 'analytic_ace_basis' is \"x\", not true or false", NULL);
    /* ... also inside a metadata value's own JSON ({"C\u0000x": 0} read as {"C": 0}) */
    expect_fail(diamond_edit("\"element_to_type\":\"{\\\"C\\\": 0}\"",
                             "\"element_to_type\":\"{\\\"C\\\\u0000x\\\": 0}\""),
                ECENET_ERR_FORMAT, "metadata 'element_to_type': a \\u0000 escape (NUL)", NULL);
    /* cJSON would end the string at the NUL: "ecenet" */
    expect_fail(diamond_edit("\"format\":\"ecenet\"", "\"format\":\"ecenet\\u0000junk\""),
                ECENET_ERR_FORMAT, "\\u0000 escape (NUL)", NULL);
}
END_TEST

/* Only `config` (None not resolved) plus other metadata: still loads, with
 * m_max = l_max, n_grid = 4 m_max + 1, output_hidden_dims = [64]. */
START_TEST(test_config_fallback_and_units)
{
    raw_file r;
    char *a, *b, *end, err[1024], *path;
    ecenet_model *m = NULL;
    ecenet_status s;
    raw_read("diamond", &r);
    a = strstr(r.json, "\"config_resolved\":\"");
    end = strstr(r.json, "\"element_to_type\":");
    ck_assert(a && end && end > a);
    memmove(a, end, strlen(end) + 1);
    b = replace(r.json, "\"energy_units\":\"eV\",\"energy_mean\":\"0.0\",\"energy_reference\":\"{\\\"C\\\": 0.0}\"",
                "\"energy_units\":\"kcal/mol\",\"energy_mean\":\"-12.5\",\"energy_reference\":\"{\\\"C\\\": -3.25, \\\"Si\\\": 1.0}\"");
    path = write_st(b, r.data, r.data_len);
    s = ecenet_model_load(path, &m, err, sizeof err);
    ck_assert_msg(s == ECENET_OK, "%s", err);
    ck_assert_int_eq(m->cfg.m_max, 3);
    ck_assert_int_eq(m->cfg.n_grid, 13);
    ck_assert_int_eq(m->cfg.n_hidden, 1);
    ck_assert_int_eq(m->cfg.hidden[0], 64);
    ck_assert_double_eq_tol(m->unit, 0.043364104241800934, 1e-17);
    ck_assert_double_eq(m->energy_mean, -12.5);
    ck_assert_double_eq(m->e_ref[0], -3.25);
    ck_assert(contains(ecenet_model_config_json(m), "\"n_grid\":\t13"));
    ecenet_model_free(m);
    unlink(path);
    free(path);
    free(b);
    raw_free(&r);
}
END_TEST

/* Every truncation and random header damage: an error with a message (or,
 * rarely, a still-valid file), never a crash or an out-of-bounds read
 * (run under valgrind), for a public and a research model. */
static const char *const fuzz_cases[] = {"diamond", "thglab_sum_pbc"};

START_TEST(test_fuzz)
{
    raw_file r;
    size_t len, hlen, k;
    raw_read(fuzz_cases[_i], &r);
    hlen = r.raw_len - 8 - r.data_len;
    for (len = 0; len < r.raw_len; len += len < 8 + hlen + 16 ? 97 : 4999) {
        char *path = write_tmp(r.raw, len, NULL, 0);
        ecenet_model *m = NULL;
        char err[512];
        ck_assert_int_ne(ecenet_model_load(path, &m, err, sizeof err), ECENET_OK);
        ck_assert_ptr_null(m);
        ck_assert_msg(strncmp(err, path, strlen(path)) == 0, "%s", err);
        unlink(path);
        free(path);
    }
    tu_rng_seed(12345);
    for (k = 0; k < 200; k++) {
        unsigned char *copy = malloc(r.raw_len);
        size_t pos = 8 + (size_t)(tu_uniform() * (double)hlen);
        char *path, err[512];
        ecenet_model *m = NULL;
        ecenet_status s;
        memcpy(copy, r.raw, r.raw_len);
        copy[pos] = (unsigned char)(tu_rng_u64() & 0xff);
        path = write_tmp(copy, r.raw_len, NULL, 0);
        s = ecenet_model_load(path, &m, err, sizeof err);
        if (s == ECENET_OK)
            ecenet_model_free(m);
        else
            ck_assert_msg(strncmp(err, path, strlen(path)) == 0 && strlen(err) > strlen(path) + 2,
                          "%s", err);
        unlink(path);
        free(path);
        free(copy);
    }
    raw_free(&r);
}
END_TEST

void bad_file_tests(TCase *tc)
{
    tcase_add_test(tc, test_bad_nonexistent);
    tcase_add_test(tc, test_bad_empty);
    tcase_add_test(tc, test_bad_truncated);
    tcase_add_test(tc, test_bad_header_length);
    tcase_add_test(tc, test_bad_json);
    tcase_add_test(tc, test_bad_shape);
    tcase_add_test(tc, test_bad_missing);
    tcase_add_test(tc, test_bad_unknown_tensor);
    tcase_add_test(tc, test_bad_dtype);
    tcase_add_test(tc, test_bad_nonfinite);
    tcase_add_test(tc, test_bad_buffers);
    tcase_add_test(tc, test_bad_elements);
    tcase_add_test(tc, test_bad_config);
    tcase_add_test(tc, test_config_fallback_and_units);
}

void fuzz_tests(TCase *tc)
{
    tcase_add_loop_test(tc, test_fuzz, 0, (int)(sizeof fuzz_cases / sizeof fuzz_cases[0]));
}
