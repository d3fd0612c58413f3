/* Model loading: the golden models of both variants (public release and
 * research version) load with the right configuration and pointers, and every
 * kind of bad file gives the right status and a message that names the file
 * and the culprit. Bad files are made by editing the JSON header (or poking
 * the data) of the golden diamond and research models. */
#define _POSIX_C_SOURCE 200809L
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "ecenet.h"
#include "model.h"
#include "safetensors.h"
#include "test_util.h"

/* ------------------------------------------------------------------------ */
/* helpers                                                                   */

static char *golden_path(const char *case_name)
{
    char buf[4096];
    snprintf(buf, sizeof buf, "%s/golden/%s.model.safetensors", tu_data_dir(), case_name);
    return strdup(buf);
}

static ecenet_model *load_ok(const char *case_name)
{
    char err[1024], *path = golden_path(case_name);
    ecenet_model *m = NULL;
    ecenet_status s = ecenet_model_load(path, &m, err, sizeof err);
    ck_assert_msg(s == ECENET_OK, "loading %s failed (%d): %s", path, (int)s, err);
    ck_assert_ptr_nonnull(m);
    free(path);
    return m;
}

/* A golden model file split into header text and data section. */
typedef struct {
    char *json;          /* NUL-terminated header */
    unsigned char *data; /* data section */
    size_t data_len;
    unsigned char *raw;  /* whole file */
    size_t raw_len;
} raw_file;

static void raw_read(const char *case_name, raw_file *r)
{
    char *path = golden_path(case_name);
    FILE *f = fopen(path, "rb");
    uint64_t n = 0;
    int i;
    ck_assert_msg(f != NULL, "cannot open %s", path);
    fseek(f, 0, SEEK_END);
    r->raw_len = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    r->raw = malloc(r->raw_len);
    ck_assert(fread(r->raw, 1, r->raw_len, f) == r->raw_len);
    fclose(f);
    free(path);
    for (i = 7; i >= 0; i--) n = (n << 8) | r->raw[i];
    r->json = malloc((size_t)n + 1);
    memcpy(r->json, r->raw + 8, (size_t)n);
    r->json[n] = '\0';
    r->data = r->raw + 8 + n;
    r->data_len = r->raw_len - 8 - (size_t)n;
}

static void raw_free(raw_file *r)
{
    free(r->json);
    free(r->raw);
}

/* Writes bytes to a fresh temporary file; returns its malloc'd path. */
static char *write_tmp(const void *a, size_t na, const void *b, size_t nb)
{
    const char *dir = getenv("TMPDIR");
    char tmpl[4096];
    FILE *f;
    int fd;
    snprintf(tmpl, sizeof tmpl, "%s/ecenet_check_model_XXXXXX", dir && *dir ? dir : "/tmp");
    fd = mkstemp(tmpl);
    ck_assert_msg(fd >= 0, "mkstemp failed");
    f = fdopen(fd, "wb");
    ck_assert(f != NULL);
    if (na) ck_assert(fwrite(a, 1, na, f) == na);
    if (nb) ck_assert(fwrite(b, 1, nb, f) == nb);
    ck_assert(fclose(f) == 0);
    return strdup(tmpl);
}

/* A safetensors file with this header text (padded to a multiple of 8, as
 * the format asks) and data section. */
static char *write_st(const char *json, const void *data, size_t data_len)
{
    size_t n = strlen(json), padded = (n + 7) / 8 * 8, i;
    unsigned char *buf = malloc(8 + padded);
    char *path;
    for (i = 0; i < 8; i++) buf[i] = (unsigned char)((uint64_t)padded >> (8 * i));
    memcpy(buf + 8, json, n);
    memset(buf + 8 + n, ' ', padded - n);
    path = write_tmp(buf, 8 + padded, data, data_len);
    free(buf);
    return path;
}

/* s with every `from` replaced by `to` (at least one must occur). */
static char *replace(const char *s, const char *from, const char *to)
{
    size_t nf = strlen(from), nt = strlen(to), count = 0;
    const char *p;
    char *out, *o;
    for (p = strstr(s, from); p; p = strstr(p + nf, from)) count++;
    ck_assert_msg(count > 0, "test setup: '%s' not found in the header", from);
    out = malloc(strlen(s) + count * nt + 1);
    o = out;
    while ((p = strstr(s, from)) != NULL) {
        memcpy(o, s, (size_t)(p - s));
        o += p - s;
        memcpy(o, to, nt);
        o += nt;
        s = p + nf;
    }
    strcpy(o, s);
    return out;
}

/* Golden model with one header edit (every occurrence of `from`). */
static char *golden_edit(const char *case_name, const char *from, const char *to)
{
    raw_file r;
    char *json, *path;
    raw_read(case_name, &r);
    json = replace(r.json, from, to);
    path = write_st(json, r.data, r.data_len);
    free(json);
    raw_free(&r);
    return path;
}

/* Golden model with 8 bytes of the data section overwritten. */
static char *golden_poke(const char *case_name, size_t offset, const void *value8)
{
    raw_file r;
    char *path;
    raw_read(case_name, &r);
    ck_assert(offset + 8 <= r.data_len);
    memcpy(r.data + offset, value8, 8);
    path = write_tmp(r.raw, r.raw_len, NULL, 0);
    raw_free(&r);
    return path;
}

/* Data-section offset of a tensor entry of a golden model (the golden tensors
 * are aligned, so the reader's pointer is buffer + begin). */
static size_t golden_offset(const char *case_name, const char *name, int64_t index)
{
    ecn_safetensors *st = tu_open_golden(case_name, "model");
    const ecn_tensor *t = ecn_st_find(st, name);
    size_t off;
    ck_assert_msg(t != NULL, "test setup: no tensor '%s' in %s", name, case_name);
    off = (size_t)((const char *)t->data - (const char *)st->buffer) + (size_t)index * 8;
    ecn_st_close(st);
    return off;
}

/* Value of a tensor entry of a golden model. */
static double golden_value(const char *case_name, const char *name, int64_t index)
{
    ecn_safetensors *st = tu_open_golden(case_name, "model");
    const ecn_tensor *t = ecn_st_find(st, name);
    double v;
    ck_assert_msg(t != NULL, "test setup: no tensor '%s' in %s", name, case_name);
    ck_assert(index < t->numel);
    v = ((const double *)t->data)[index];
    ecn_st_close(st);
    return v;
}

static char *diamond_edit(const char *from, const char *to) { return golden_edit("diamond", from, to); }

static char *diamond_poke(size_t offset, const void *value8)
{
    return golden_poke("diamond", offset, value8);
}

static size_t diamond_offset(const char *name, int64_t index)
{
    return golden_offset("diamond", name, index);
}

/* Loading `path` fails with `want`; the message starts with the path and
 * contains each of the (up to two) needles. Removes the file. */
static void expect_fail(char *path, ecenet_status want, const char *needle1, const char *needle2)
{
    char err[2048];
    ecenet_model *m = (ecenet_model *)(void *)&m; /* must be reset to NULL */
    ecenet_status s = ecenet_model_load(path, &m, err, sizeof err);
    if (getenv("ECENET_TEST_VERBOSE")) printf("[%d] %s\n", (int)s, err);
    ck_assert_msg(s == want, "status %d, expected %d; message: %s", (int)s, (int)want, err);
    ck_assert_ptr_null(m);
    ck_assert_msg(strncmp(err, path, strlen(path)) == 0, "message does not start with the path: %s",
                  err);
    if (needle1) ck_assert_msg(strstr(err, needle1), "message lacks '%s': %s", needle1, err);
    if (needle2) ck_assert_msg(strstr(err, needle2), "message lacks '%s': %s", needle2, err);
    unlink(path);
    free(path);
}

static int contains(const char *hay, const char *needle) { return strstr(hay, needle) != NULL; }

/* ------------------------------------------------------------------------ */
/* golden models                                                             */

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

/* Research-version models (golden README "Research-version cases"). */

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

START_TEST(test_api_null)
{
    ecenet_model *m = NULL;
    char err[256];
    ck_assert_int_eq(ecenet_model_load(NULL, &m, err, sizeof err), ECENET_ERR_ARGUMENT);
    ck_assert_int_eq(ecenet_model_load("x", NULL, err, sizeof err), ECENET_ERR_ARGUMENT);
    ck_assert_int_eq(ecenet_model_load("/nonexistent/x", &m, NULL, 0), ECENET_ERR_IO);
    ck_assert_int_eq(ecenet_model_load("/nonexistent/x", &m, err, 1), ECENET_ERR_IO);
    ck_assert_str_eq(err, "");
    ecenet_model_free(NULL);
    ck_assert_int_eq(ecenet_model_n_types(NULL), 0);
    ck_assert_int_eq(ecenet_model_type_of(NULL, 6), -1);
    ck_assert_int_eq(ecenet_model_type_number(NULL, 0), -1);
    ck_assert_ptr_null(ecenet_model_config_json(NULL));
}
END_TEST

START_TEST(test_elements)
{
    int z;
    ck_assert_int_eq(ecenet_element_number("H"), 1);
    ck_assert_int_eq(ecenet_element_number("C"), 6);
    ck_assert_int_eq(ecenet_element_number("Na"), 11);
    ck_assert_int_eq(ecenet_element_number("Cl"), 17);
    ck_assert_int_eq(ecenet_element_number("Fe"), 26);
    ck_assert_int_eq(ecenet_element_number("I"), 53);
    ck_assert_int_eq(ecenet_element_number("W"), 74);
    ck_assert_int_eq(ecenet_element_number("U"), 92);
    ck_assert_int_eq(ecenet_element_number("Lr"), 103);
    ck_assert_int_eq(ecenet_element_number("Og"), 118);
    ck_assert_int_eq(ecenet_element_number("c"), 0);
    ck_assert_int_eq(ecenet_element_number("NA"), 0);
    ck_assert_int_eq(ecenet_element_number("Xx"), 0);
    ck_assert_int_eq(ecenet_element_number(""), 0);
    ck_assert_int_eq(ecenet_element_number(NULL), 0);
    ck_assert_str_eq(ecenet_element_symbol(1), "H");
    ck_assert_str_eq(ecenet_element_symbol(79), "Au");
    ck_assert_str_eq(ecenet_element_symbol(118), "Og");
    ck_assert_ptr_null(ecenet_element_symbol(0));
    ck_assert_ptr_null(ecenet_element_symbol(119));
    ck_assert_ptr_null(ecenet_element_symbol(-3));
    for (z = 1; z <= 118; z++) {
        const char *s = ecenet_element_symbol(z);
        ck_assert_ptr_nonnull(s);
        ck_assert_int_eq(ecenet_element_number(s), z);
    }
}
END_TEST

/* ------------------------------------------------------------------------ */
/* safetensors reader                                                        */

START_TEST(test_st_misaligned_and_meta)
{
    /* A U8 tensor first puts the F64 tensor at offset 1: the reader must
     * still hand out an aligned pointer to the right values. */
    const char *json = "{\"__metadata__\":{\"k\":\"v\"},\"b\":{\"dtype\":\"F64\",\"shape\":[2],"
                       "\"data_offsets\":[1,17]},\"a\":{\"dtype\":\"U8\",\"shape\":[1],"
                       "\"data_offsets\":[0,1]},\"s\":{\"dtype\":\"I32\",\"shape\":[],"
                       "\"data_offsets\":[17,21]}}";
    unsigned char data[21];
    double v[2] = {1.5, -2.25}, got[2];
    int32_t i32 = -7;
    char err[512], *path;
    ecn_safetensors *st;
    const ecn_tensor *t;
    data[0] = 42;
    memcpy(data + 1, v, 16);
    memcpy(data + 17, &i32, 4);
    path = write_st(json, data, sizeof data);
    st = ecn_st_open(path, err, sizeof err);
    ck_assert_msg(st != NULL, "%s", err);
    ck_assert_uint_eq(st->n_tensors, 3);
    ck_assert_str_eq(st->tensors[0].name, "a"); /* sorted */
    ck_assert_str_eq(st->tensors[1].name, "b");
    t = ecn_st_find(st, "b");
    ck_assert_ptr_nonnull(t);
    ck_assert_int_eq(t->dtype, ECN_DT_F64);
    ck_assert_int_eq(t->rank, 1);
    ck_assert_int_eq(t->shape[0], 2);
    ck_assert_uint_eq((uintptr_t)t->data % 8, 0);
    memcpy(got, t->data, 16);
    ck_assert_double_eq(got[0], 1.5);
    ck_assert_double_eq(got[1], -2.25);
    ck_assert_int_eq(*(const uint8_t *)ecn_st_find(st, "a")->data, 42);
    t = ecn_st_find(st, "s");
    ck_assert_int_eq(t->rank, 0);
    ck_assert_int_eq(t->numel, 1);
    ck_assert_int_eq(*(const int32_t *)t->data, -7);
    ck_assert_ptr_null(ecn_st_find(st, "zz"));
    ck_assert_str_eq(ecn_st_meta(st, "k"), "v");
    ck_assert_ptr_null(ecn_st_meta(st, "nope"));
    ecn_st_close(st);
    unlink(path);
    free(path);
}
END_TEST

START_TEST(test_st_bad_headers)
{
    static const struct {
        const char *json, *needle;
    } cases[] = {
        {"{\"a\":{\"dtype\":\"F64\",\"shape\":[1],\"data_offsets\":[0,8]},"
         "\"a\":{\"dtype\":\"F64\",\"shape\":[0],\"data_offsets\":[8,8]}}", "'a' appears twice"},
        /* the tensors must tile the data section (8 bytes here) */
        {"{\"a\":{\"dtype\":\"F64\",\"shape\":[1],\"data_offsets\":[0,8]},"
         "\"b\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[4,8]}}",
         "'b': data_offsets [4, 8] overlap tensor 'a' [0, 8]"},
        {"{\"a\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[4,8]}}",
         "'a': data_offsets [4, 8] leave bytes [0, 4) of the data section to no tensor"},
        {"{\"a\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[0,4]}}",
         "ends at byte 4 of the 8-byte data section: 4 trailing bytes"},
        {"{\"a\":{\"dtype\":\"F64\",\"shape\":[1],\"data_offsets\":[0,8]},"
         "\"__metadata__\":{\"k\":1}}", "metadata key 'k'"},
        {"{\"a\":{\"dtype\":\"F16\",\"shape\":[4],\"data_offsets\":[0,8]}}", "'a': unsupported dtype"},
        {"{\"a\":{\"dtype\":\"F64\",\"shape\":[-1],\"data_offsets\":[0,8]}}", "'a': shape entry 0"},
        {"{\"a\":{\"dtype\":\"F64\",\"shape\":[1.5],\"data_offsets\":[0,8]}}", "'a': shape entry 0"},
        {"{\"a\":{\"dtype\":\"F64\",\"shape\":[1,1,1,1,1,1,1,1,1],\"data_offsets\":[0,8]}}", "'a': rank 9"},
        {"{\"a\":{\"dtype\":\"F64\",\"shape\":[1],\"data_offsets\":[8,0]}}", "'a': data_offsets"},
        {"{\"a\":{\"dtype\":\"F64\",\"shape\":[1],\"data_offsets\":[0]}}", "'a': \"data_offsets\""},
        {"{\"a\":{\"dtype\":\"F64\",\"shape\":[1]}}", "'a': \"data_offsets\""},
        {"{\"a\":{\"shape\":[1],\"data_offsets\":[0,8]}}", "'a': missing or non-string \"dtype\""},
        {"{\"a\":{\"dtype\":\"F64\",\"shape\":[1000000000,1000000000,1000000000],"
         "\"data_offsets\":[0,8]}}", "'a': shape is too large"},
        {"{\"a\":{\"dtype\":\"F64\",\"shape\":[2],\"data_offsets\":[0,8]}}", "'a': data_offsets [0, 8] hold 8 bytes"},
        {"{\"a\":{\"dtype\":\"F64\",\"shape\":[2],\"data_offsets\":[0,16]}}", "'a': data_offsets [0, 16] exceed the data section (8 bytes)"},
        {"{\"a\":{\"dtype\":\"F64\",\"shape\":[1],\"data_offsets\":[0,1e300]}}", "'a': \"data_offsets\""},
        {"{\"a\":[1,2]}", "'a': header entry is not a JSON object"},
        {"{\"a\":\"x\"}", "'a': header entry is not a JSON object"},
        {"{\"a\":{\"dtype\":\"F64\",\"shape\":[1],\"data_offsets\":[0,8]},"
         "\"__metadata__\":\"x\"}", "\"__metadata__\" is not a JSON object"},
        {"{\"a\":{\"dtype\":\"F64\",\"shape\":7,\"data_offsets\":[0,8]}}", "'a': missing or non-array \"shape\""},
        {"[1,2]", "not a JSON object"},
        {"{\"a\":", "not valid JSON"},
    };
    size_t i;
    unsigned char data[8] = {0};
    for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char err[512], *path = write_st(cases[i].json, data, sizeof data);
        ecn_safetensors *st = ecn_st_open(path, err, sizeof err);
        ck_assert_msg(st == NULL, "case %zu opened", i);
        ck_assert_msg(strncmp(err, path, strlen(path)) == 0 && contains(err, cases[i].needle),
                      "case %zu: message '%s' lacks '%s'", i, err, cases[i].needle);
        unlink(path);
        free(path);
    }
}
END_TEST

/* ------------------------------------------------------------------------ */
/* bad model files                                                           */

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

static Suite *model_suite(void)
{
    Suite *s = suite_create("model");
    TCase *tc = tcase_create("golden");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_ethanol);
    tcase_add_test(tc, test_diamond);
    tcase_add_test(tc, test_options);
    tcase_add_test(tc, test_thglab_softmax);
    tcase_add_test(tc, test_thglab_sum_pbc);
    tcase_add_test(tc, test_api_null);
    tcase_add_test(tc, test_elements);
    suite_add_tcase(s, tc);

    tc = tcase_create("safetensors");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_st_misaligned_and_meta);
    tcase_add_test(tc, test_st_bad_headers);
    suite_add_tcase(s, tc);

    tc = tcase_create("bad_files");
    tcase_set_timeout(tc, 300); /* slow under valgrind */
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
    tcase_add_test(tc, test_research_variations);
    tcase_add_test(tc, test_research_mixed);
    tcase_add_test(tc, test_research_bad_config);
    tcase_add_test(tc, test_research_bad_tensors);
    tcase_add_loop_test(tc, test_fuzz, 0, (int)(sizeof fuzz_cases / sizeof fuzz_cases[0]));
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(model_suite());
    int failed;
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
