/* Write a model file with random parameters for a given configuration: a
 * public-release file, or a research-version file (SPEC §17, golden README
 * "Research-version cases") when cfg->variant is ECN_VARIANT_RESEARCH. Used by
 * the tests (symmetry, conservation, finite differences) and by `ecenet
 * bench`, which need models of chosen shapes without a checkpoint. The file
 * is an ordinary model file: the loader validates it like any other. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cjson/cJSON.h>
#include "error.h"
#include "model.h"
#include "model_write.h"

#ifndef M_PI
#define M_PI 3.14159265358979323846
#endif

typedef struct {
    char name[96];
    int is_int, rank;
    int64_t shape[4];
    int64_t numel;
    void *data;
} wtensor;

typedef struct {
    wtensor *t;
    int n, cap;
    uint64_t rng;
    int oom;
} writer;

static uint64_t splitmix(uint64_t *s)
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

static double normal(uint64_t *s)
{
    double u1 = ((splitmix(s) >> 11) + 1.0) * 0x1.0p-53, u2 = (splitmix(s) >> 11) * 0x1.0p-53;
    return sqrt(-2.0 * log(u1)) * cos(2.0 * M_PI * u2);
}

static wtensor *add(writer *w, int is_int, int rank, int64_t a, int64_t b, int64_t c, int64_t d,
                    const char *fmt, ...)
{
    if (w->oom)
        return NULL;
    if (w->n == w->cap) {
        int cap = w->cap ? 2 * w->cap : 64;
        wtensor *t = realloc(w->t, (size_t)cap * sizeof *t);
        if (!t) {
            w->oom = 1;
            return NULL;
        }
        w->t = t;
        w->cap = cap;
    }
    wtensor *t = &w->t[w->n];
    memset(t, 0, sizeof *t);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(t->name, sizeof t->name, fmt, ap);
    va_end(ap);
    int64_t dims[4] = {a, b, c, d};
    t->is_int = is_int;
    t->rank = rank;
    t->numel = 1;
    for (int k = 0; k < rank; k++) {
        t->shape[k] = dims[k];
        t->numel *= dims[k];
    }
    t->data = calloc((size_t)(t->numel ? t->numel : 1), 8);
    if (!t->data) {
        w->oom = 1;
        return NULL;
    }
    w->n++;
    return t;
}

/* a parameter ~ N(mean, std²) */
static void param(writer *w, double mean, double std, int rank, int64_t a, int64_t b, int64_t c,
                  int64_t d, const char *name)
{
    wtensor *t = add(w, 0, rank, a, b, c, d, "%s", name);
    if (!t)
        return;
    double *v = t->data;
    for (int64_t k = 0; k < t->numel; k++)
        v[k] = mean + std * normal(&w->rng);
}

/* sph_to_angular / pack buffers (SPEC §8.2): l = c mod (L+1) */
static void index_buffers(writer *w, const ecn_config *c, const char *prefix, const char *cosn,
                          const char *sinn, const char *cosv, const char *sinv)
{
    wtensor *ci = add(w, 1, 2, c->F, c->Q, 0, 0, "%s%s", prefix, cosn);
    wtensor *si = add(w, 1, 2, c->F, c->Q, 0, 0, "%s%s", prefix, sinn);
    wtensor *cv = add(w, 0, 2, c->F, c->Q, 0, 0, "%s%s", prefix, cosv);
    wtensor *sv = add(w, 0, 2, c->F, c->Q, 0, 0, "%s%s", prefix, sinv);
    if (!ci || !si || !cv || !sv)
        return;
    for (int f = 0; f < c->F; f++) {
        int l = f % (c->l_max + 1);
        for (int m = 0; m < c->Q; m++) {
            int k = f * c->Q + m;
            ((int64_t *)ci->data)[k] = m <= l ? l * l + l + m : 0;
            ((int64_t *)si->data)[k] = (m >= 1 && m <= l) ? l * l + l - m : 0;
            ((double *)cv->data)[k] = m <= l;
            ((double *)sv->data)[k] = m >= 1 && m <= l;
        }
    }
}

/* RealSpaceNonlinearity θ-grid matrices `<p>{cos,sin}_{synth,analysis}`: the
 * exact float64 DFT matrices (SPEC §11); no random draws. */
static void grid(writer *w, const ecn_config *c, const char *p)
{
    const int Q = c->Q, G = c->n_grid;
    wtensor *cs = add(w, 0, 2, Q, G, 0, 0, "%scos_synth", p);
    wtensor *ss = add(w, 0, 2, Q, G, 0, 0, "%ssin_synth", p);
    wtensor *ca = add(w, 0, 2, G, Q, 0, 0, "%scos_analysis", p);
    wtensor *sa = add(w, 0, 2, G, Q, 0, 0, "%ssin_analysis", p);
    if (!cs || !ss || !ca || !sa)
        return;
    for (int m = 0; m < Q; m++)
        for (int q = 0; q < G; q++) {
            double th = 2.0 * M_PI * q / G, wm = (m == 0 ? 1.0 : 2.0) / G;
            ((double *)cs->data)[m * G + q] = cos(m * th);
            ((double *)ss->data)[m * G + q] = sin(m * th);
            ((double *)ca->data)[q * Q + m] = wm * cos(m * th);
            ((double *)sa->data)[q * Q + m] = wm * sin(m * th);
        }
}

/* Readout MLP output_net.linears.k (SPEC §14.2; per-type corrections only in
 * public files with edge_type_output). */
static void readout(writer *w, const ecn_config *c, double scale)
{
    const int T = c->n_types;
    char nm[128];
    int dims[ECN_MAX_MLP + 2], nd = 0;
    dims[nd++] = c->F;
    for (int k = 0; k < c->n_hidden; k++)
        dims[nd++] = c->hidden[k];
    dims[nd++] = c->n_max_d > 0 ? c->n_max_d : 1;
    for (int k = 0; k + 1 < nd; k++) {
        double sw = scale * sqrt(2.0 / (dims[k] + dims[k + 1]));
        snprintf(nm, sizeof nm, "output_net.linears.%d.weight", k);
        param(w, 0, sw, 2, dims[k + 1], dims[k], 0, 0, nm);
        snprintf(nm, sizeof nm, "output_net.linears.%d.bias", k);
        param(w, 0, 0.1 * scale, 1, dims[k + 1], 0, 0, 0, nm);
        if (c->edge_type_output) {
            snprintf(nm, sizeof nm, "output_net.linears.%d.weights_src", k);
            param(w, 0, 0.1 * sw, 3, T, dims[k + 1], dims[k], 0, nm);
            snprintf(nm, sizeof nm, "output_net.linears.%d.weights_tgt", k);
            param(w, 0, 0.1 * sw, 3, T, dims[k + 1], dims[k], 0, nm);
        }
    }
}

static void layer_prefix(const ecn_config *c, int g, int k, char *p, size_t len)
{
    /* n_mp = 1 keeps the flat ModuleList of the reference (SPEC §12) */
    if (c->n_mp == 1)
        snprintf(p, len, "layers.%d.", k);
    else
        snprintf(p, len, "layers.%d.%d.", g, k);
}

/* ------------------------------------------------------------------------ */
/* public release (SPEC §15)                                                 */

static void public_params(writer *w, const ecn_config *c, double scale)
{
    const int T = c->n_types, Q = c->Q, F = c->F;
    char p[64], nm[128];

    /* initialisation-like scales (SPEC §6, §10, §14.2), times `scale` */
    param(w, 0, scale / sqrt((double)T * c->n_max), 4, T, T, c->n_max, c->embed_dim, "W");
    if (c->n_dist_embed)
        param(w, 0, 0.1 * scale, 2, c->n_dist_embed, F, 0, 0, "V_dist");
    index_buffers(w, c, "sph_to_angular.", "cos_idx", "sin_idx", "cos_valid", "sin_valid");
    const double sl = scale * sqrt(2.0 / (2.0 * F));
    for (int g = 0; g < c->n_mp; g++)
        for (int k = 0; k < c->n_layers; k++) {
            layer_prefix(c, g, k, p, sizeof p);
#define PN(s) (snprintf(nm, sizeof nm, "%s%s", p, s), nm)
            param(w, 0, sl, 3, Q, F, F, 0, PN("linear.weights"));
            param(w, 0, 0.1 * scale, 1, F, 0, 0, 0, PN("linear.bias"));
            if (c->edge_type_linear) {
                param(w, 0, 0.1 * sl, 4, T, Q, F, F, PN("linear.weights_src"));
                param(w, 0, 0.1 * sl, 4, T, Q, F, F, PN("linear.weights_tgt"));
            }
            if (!c->use_nonlinearity)
                continue;
            grid(w, c, PN("nonlin."));
            if (c->edge_type_nonlin) {
                param(w, 1.0, 0.1 * scale, 2, F, 1, 0, 0, PN("nonlin.pre_scale_base"));
                param(w, 0.0, 0.1 * scale, 2, F, 1, 0, 0, PN("nonlin.pre_shift_base"));
                param(w, 0.0, 0.1 * scale, 3, T, F, 1, 0, PN("nonlin.pre_scale_src"));
                param(w, 0.0, 0.1 * scale, 3, T, F, 1, 0, PN("nonlin.pre_scale_tgt"));
                param(w, 0.0, 0.1 * scale, 3, T, F, 1, 0, PN("nonlin.pre_shift_src"));
                param(w, 0.0, 0.1 * scale, 3, T, F, 1, 0, PN("nonlin.pre_shift_tgt"));
            } else {
                /* identity, but drawn (std 0): research_params skips these
                 * draws to stay in step with this stream */
                param(w, 1.0, 0.0, 2, F, 1, 0, 0, PN("nonlin.pre_scale"));
                param(w, 0.0, 0.0, 2, F, 1, 0, 0, PN("nonlin.pre_shift"));
            }
#undef PN
        }
    for (int g = 0; g + 1 < c->n_mp; g++) {
        snprintf(nm, sizeof nm, "mp_layers.%d.W_msg", g);
        param(w, 0, 0.3 * scale, 4, T, T, c->n_dist_basis, c->B, nm);
        snprintf(p, sizeof p, "mp_layers.%d.", g);
        index_buffers(w, c, p, "pack_cos_idx", "pack_sin_idx", "pack_cos_valid_f",
                      "pack_sin_valid_f");
    }
    readout(w, c, scale);
    param(w, 0, 0.1 * scale, 1, T, 0, 0, 0, "atomic_energy");
}

static cJSON *config_json(const ecn_config *c)
{
    static const char *acts[] = {"silu", "relu", "tanh", "gelu", "identity"};
    cJSON *j = cJSON_CreateObject();
    cJSON_AddNumberToObject(j, "n_types", c->n_types);
    cJSON_AddNumberToObject(j, "r_cut_edge", c->r_cut_edge);
    cJSON_AddNumberToObject(j, "r_cut_neighbor", c->r_cut_neighbor);
    cJSON_AddNumberToObject(j, "l_max", c->l_max);
    cJSON_AddNumberToObject(j, "n_max", c->n_max);
    cJSON_AddNumberToObject(j, "embed_dim", c->embed_dim);
    cJSON_AddNumberToObject(j, "n_layers", c->n_layers);
    cJSON_AddNumberToObject(j, "n_mp", c->n_mp);
    if (c->variant != ECN_VARIANT_RESEARCH) /* the research version removed it */
        cJSON_AddNumberToObject(j, "n_dist_basis", c->n_dist_basis);
    if (c->n_max_d > 0)
        cJSON_AddNumberToObject(j, "n_max_d", c->n_max_d);
    else
        cJSON_AddNullToObject(j, "n_max_d");
    cJSON_AddStringToObject(j, "cutoff_type", c->cutoff_type == ECENET_CUTOFF_POLY ? "poly" : "cosine");
    cJSON_AddStringToObject(j, "activation", acts[c->activation]);
    cJSON_AddBoolToObject(j, "use_nonlinearity", c->use_nonlinearity);
    cJSON_AddNumberToObject(j, "n_grid", c->n_grid);
    cJSON *h = cJSON_AddArrayToObject(j, "output_hidden_dims");
    for (int k = 0; k < c->n_hidden; k++)
        cJSON_AddItemToArray(h, cJSON_CreateNumber(c->hidden[k]));
    if (c->variant != ECN_VARIANT_RESEARCH)
        cJSON_AddNumberToObject(j, "n_dist_embed", c->n_dist_embed);
    cJSON_AddNumberToObject(j, "m_max", c->m_max);
    if (c->variant != ECN_VARIANT_RESEARCH) {
        cJSON_AddBoolToObject(j, "edge_type_nonlin", c->edge_type_nonlin);
        cJSON_AddBoolToObject(j, "edge_type_linear", c->edge_type_linear);
        cJSON_AddBoolToObject(j, "edge_type_output", c->edge_type_output);
    }
    return j;
}

/* ------------------------------------------------------------------------ */
/* research version (SPEC §17, golden README "Model files")                  */

/* EquivariantLinear `<p>weights` (Q, fout, fin), `<p>bias` (fout), Glorot
 * scale. Parameters the reference starts at zero (msg_up, linear_up) get the
 * same random scale: zero there would leave those paths untested. */
static void eq_linear(writer *w, const ecn_config *c, double scale, int fin, int fout,
                      const char *p)
{
    char nm[128];
    snprintf(nm, sizeof nm, "%sweights", p);
    param(w, 0, scale * sqrt(2.0 / ((double)fin + fout)), 3, c->Q, fout, fin, 0, nm);
    snprintf(nm, sizeof nm, "%sbias", p);
    param(w, 0, 0.1 * scale, 1, fout, 0, 0, 0, nm);
}

/* Advance the stream by n draws, as param() would. */
static void skip_draws(writer *w, int64_t n)
{
    for (int64_t k = 0; k < n; k++)
        (void)normal(&w->rng);
}

/* The draws follow the public order (W, layers, MP, readout, atomic_energy),
 * and a full-width layer skips the public file's pre_scale/pre_shift draws:
 * with n_mp = 1, no FiLM and no bottleneck, a research file therefore holds
 * exactly the parameters of the public file of the same seed (check_research
 * compares the two variants with it). */
static void research_params(writer *w, const ecn_config *c, double scale)
{
    const int T = c->n_types, F = c->F, r = c->bottleneck_dim, D = c->mp_dim;
    char p[64], lp[32];

    param(w, 0, scale / sqrt((double)T * c->n_max), 4, T, T, c->n_max, c->embed_dim, "W");
    index_buffers(w, c, "sph_to_angular.", "cos_idx", "sin_idx", "cos_valid", "sin_valid");
    for (int g = 0; g < c->n_mp; g++)
        for (int k = 0; k < c->n_layers; k++) {
            layer_prefix(c, g, k, lp, sizeof lp);
            if (r > 0) {
                snprintf(p, sizeof p, "%slinear_down.", lp);
                eq_linear(w, c, scale, F, r, p);
                snprintf(p, sizeof p, "%slinear_up.", lp);
                eq_linear(w, c, scale, r, F, p);
            } else {
                snprintf(p, sizeof p, "%slinear.", lp);
                eq_linear(w, c, scale, F, F, p);
            }
            snprintf(p, sizeof p, "%snonlin.", lp);
            grid(w, c, p);
            if (r == 0)
                skip_draws(w, 2 * (int64_t)F);
        }
    for (int g = 0; g + 1 < c->n_mp; g++) {
        snprintf(p, sizeof p, "mp_layers.%d.msg_down.", g);
        eq_linear(w, c, scale, F, D, p);
        snprintf(p, sizeof p, "mp_layers.%d.msg_nonlin.", g);
        grid(w, c, p);
        /* F message rows + n_scores score rows (read at m = 0) */
        snprintf(p, sizeof p, "mp_layers.%d.msg_up.", g);
        eq_linear(w, c, scale, D, F + c->n_scores, p);
        snprintf(p, sizeof p, "mp_layers.%d.receiver.linear_down.", g);
        eq_linear(w, c, scale, F, D, p);
        snprintf(p, sizeof p, "mp_layers.%d.receiver.nonlin.", g);
        grid(w, c, p);
        snprintf(p, sizeof p, "mp_layers.%d.receiver.linear_up.", g);
        eq_linear(w, c, scale, D, F, p);
    }
    if (c->element_film) {
        /* nn.Embedding a, b (N(0,1) init, times scale); Linear layers at the
         * even indices of the Sequential, the last (zero-init in the
         * reference) random here too */
        const int P = c->film_embed_dim, nl = c->film_n_hidden + 1;
        int dims[ECN_MAX_MLP + 1];
        char nm[128];
        param(w, 0, scale, 2, T, P, 0, 0, "element_film.a.weight");
        param(w, 0, scale, 2, T, P, 0, 0, "element_film.b.weight");
        dims[0] = 2 * P + c->film_n_rbf;
        for (int k = 0; k < c->film_n_hidden; k++)
            dims[k + 1] = c->film_hidden[k];
        dims[nl] = F;
        for (int k = 0; k < nl; k++) {
            snprintf(nm, sizeof nm, "element_film.mlp.%d.weight", 2 * k);
            param(w, 0, scale * sqrt(2.0 / ((double)dims[k] + dims[k + 1])), 2, dims[k + 1],
                  dims[k], 0, 0, nm);
            snprintf(nm, sizeof nm, "element_film.mlp.%d.bias", 2 * k);
            param(w, 0, 0.1 * scale, 1, dims[k + 1], 0, 0, 0, nm);
        }
    }
    readout(w, c, scale);
    param(w, 0, 0.1 * scale, 1, T, 0, 0, 0, "atomic_energy");
}

/* The research switches, added to the common keys of config_json. Every
 * switch is written (the loader demands them all, SPEC §18.21), with the
 * values in effect; LES with the constructor's defaults, which keep it out of
 * the model (model_config.c parse_les). */
static void research_config_json(cJSON *j, const ecn_config *c)
{
    if (c->bottleneck_dim > 0)
        cJSON_AddNumberToObject(j, "bottleneck_dim", c->bottleneck_dim);
    else
        cJSON_AddNullToObject(j, "bottleneck_dim");
    cJSON_AddStringToObject(j, "mp_type", c->mp_type == ECN_MP_SOFTMAX ? "softmax" : "sum");
    cJSON_AddNumberToObject(j, "mp_dim", c->mp_dim);
    cJSON_AddNumberToObject(j, "mp_n_heads", c->mp_n_heads);
    cJSON_AddBoolToObject(j, "mp_msg_envelope", c->mp_msg_envelope);
    cJSON_AddBoolToObject(j, "mp_l_attention", c->mp_l_attention);
    cJSON_AddBoolToObject(j, "element_film", c->element_film);
    cJSON_AddNumberToObject(j, "film_embed_dim", c->film_embed_dim);
    cJSON_AddNumberToObject(j, "film_n_rbf", c->film_n_rbf);
    if (c->element_film) {
        cJSON *h = cJSON_AddArrayToObject(j, "film_hidden");
        for (int k = 0; k < c->film_n_hidden; k++)
            cJSON_AddItemToArray(h, cJSON_CreateNumber(c->film_hidden[k]));
    } else {
        cJSON_AddNullToObject(j, "film_hidden"); /* not built */
    }
    cJSON_AddBoolToObject(j, "film_per_m", c->film_per_m);
    cJSON_AddBoolToObject(j, "film_shift", c->film_shift);
    cJSON_AddStringToObject(j, "les_readout", "sum");
    cJSON_AddNumberToObject(j, "les_charge_scale", 1.0);
    cJSON_AddBoolToObject(j, "les_dipole", 0);
    cJSON_AddBoolToObject(j, "les_charges", 1);
}

/* ------------------------------------------------------------------------ */
/* file                                                                      */

static void free_writer(writer *w)
{
    for (int k = 0; k < w->n; k++)
        free(w->t[k].data);
    free(w->t);
}

static int by_name(const void *a, const void *b)
{
    return strcmp(((const wtensor *)a)->name, ((const wtensor *)b)->name);
}

/* Metadata and tensor table of the safetensors header, as JSON text. */
static char *header_text(const writer *w, const ecn_config *c, const int *type_z)
{
    const int T = c->n_types;
    cJSON *hdr = cJSON_CreateObject(), *meta = cJSON_AddObjectToObject(hdr, "__metadata__");
    cJSON *cj = config_json(c), *e2t = cJSON_CreateObject(), *eref = cJSON_CreateObject();
    if (c->variant == ECN_VARIANT_RESEARCH)
        research_config_json(cj, c);
    for (int t = 0; t < T; t++) {
        const char *sym = ecenet_element_symbol(type_z[t]);
        cJSON_AddNumberToObject(e2t, sym ? sym : "?", t);
        cJSON_AddNumberToObject(eref, sym ? sym : "?", 0.0);
    }
    char *s_cfg = cJSON_PrintUnformatted(cj), *s_e2t = cJSON_PrintUnformatted(e2t),
         *s_eref = cJSON_PrintUnformatted(eref);
    cJSON_AddStringToObject(meta, "format", "ecenet");
    cJSON_AddStringToObject(meta, "format_version", "1");
    if (c->variant == ECN_VARIANT_RESEARCH)
        cJSON_AddStringToObject(meta, "variant", "thglab-research");
    /* the configuration is written resolved, so config = config_resolved */
    cJSON_AddStringToObject(meta, "config", s_cfg);
    cJSON_AddStringToObject(meta, "config_resolved", s_cfg);
    cJSON_AddStringToObject(meta, "element_to_type", s_e2t);
    cJSON_AddStringToObject(meta, "energy_units", "eV");
    cJSON_AddStringToObject(meta, "energy_mean", "0.0");
    cJSON_AddStringToObject(meta, "energy_reference", s_eref);
    cJSON_AddStringToObject(meta, "parameter_init", "libecenet random model (ecn_model_write_random)");
    free(s_cfg);
    free(s_e2t);
    free(s_eref);
    cJSON_Delete(cj);
    cJSON_Delete(e2t);
    cJSON_Delete(eref);
    int64_t off = 0;
    for (int k = 0; k < w->n; k++) {
        cJSON *e = cJSON_AddObjectToObject(hdr, w->t[k].name);
        cJSON_AddStringToObject(e, "dtype", w->t[k].is_int ? "I64" : "F64");
        cJSON *sh = cJSON_AddArrayToObject(e, "shape");
        for (int q = 0; q < w->t[k].rank; q++)
            cJSON_AddItemToArray(sh, cJSON_CreateNumber((double)w->t[k].shape[q]));
        cJSON *o = cJSON_AddArrayToObject(e, "data_offsets");
        cJSON_AddItemToArray(o, cJSON_CreateNumber((double)off));
        off += 8 * w->t[k].numel;
        cJSON_AddItemToArray(o, cJSON_CreateNumber((double)off));
    }
    char *text = cJSON_PrintUnformatted(hdr);
    cJSON_Delete(hdr);
    return text;
}

ecenet_status ecn_model_write_random(const char *path, const ecn_config *cfg_in,
                                     const int *type_z, uint64_t seed, double scale, char *err,
                                     size_t err_len)
{
    ecn_config cfg = *cfg_in;
    ecenet_status st = ecn_config_finish(&cfg, err, err_len);
    if (st != ECENET_OK)
        return st;
    if (cfg.variant == ECN_VARIANT_RESEARCH && cfg.n_hidden == 0)
        /* the research constructor reads output_hidden_dims [] as [64] */
        return ecn_fail(err, err_len, ECENET_ERR_ARGUMENT,
                        "a research-version readout needs at least one hidden layer "
                        "(output_hidden_dims [] means [64] there)");
    const ecn_config *c = &cfg;
    writer w;
    memset(&w, 0, sizeof w);
    w.rng = seed;

    if (c->variant == ECN_VARIANT_RESEARCH)
        research_params(&w, c, scale);
    else
        public_params(&w, c, scale);
    if (w.oom) {
        free_writer(&w);
        return ecn_fail(err, err_len, ECENET_ERR_NOMEM, "out of memory building a random model");
    }
    qsort(w.t, (size_t)w.n, sizeof *w.t, by_name);

    char *text = header_text(&w, c, type_z);
    if (!text) {
        free_writer(&w);
        return ecn_fail(err, err_len, ECENET_ERR_NOMEM, "out of memory writing a model header");
    }
    size_t hl = strlen(text), padded = (hl + 7) / 8 * 8;
    FILE *f = fopen(path, "wb");
    int ok = f != NULL;
    if (ok) {
        unsigned char len8[8];
        for (int k = 0; k < 8; k++)
            len8[k] = (unsigned char)((uint64_t)padded >> (8 * k));
        ok = fwrite(len8, 1, 8, f) == 8 && fwrite(text, 1, hl, f) == hl;
        for (size_t k = hl; ok && k < padded; k++)
            ok = fputc(' ', f) != EOF;
        for (int k = 0; ok && k < w.n; k++) /* little-endian hosts only (checked by configure) */
            ok = fwrite(w.t[k].data, 8, (size_t)w.t[k].numel, f) == (size_t)w.t[k].numel;
        ok = (fclose(f) == 0) && ok;
    }
    free(text);
    free_writer(&w);
    if (!ok) {
        remove(path);
        return ecn_fail(err, err_len, ECENET_ERR_IO, "%s: cannot write the model file", path);
    }
    return ECENET_OK;
}
