/* Model loading: configuration from the safetensors metadata, then every
 * tensor the configuration implies, checked by name, dtype and shape, with
 * nothing missing and nothing left over (SPEC §15). PyTorch loads with
 * strict=False and silently keeps init values for missing keys; this loader
 * refuses instead, so a model either loads exactly or not at all. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cjson/cJSON.h>
#include "error.h"
#include "model.h"

/* ASE's kcal/mol in eV, from the 2018 CODATA values of N_A and e. */
#define ECN_KCAL_PER_MOL_EV (4184.0 / (6.02214076e23 * 1.602176634e-19))

/* Sanity limits. They keep every size product far from overflow and stop a
 * hostile header from making the loader allocate much before it finds that
 * the tensors are not there; real models are orders of magnitude smaller. */
#define LIM_TYPES 118
#define LIM_LMAX 12          /* the Clebsch–Gordan table ends at 12 (SPEC §18.14) */
#define LIM_MMAX 64
#define LIM_GRID 65536
#define LIM_NMAX 1024
#define LIM_EMBED 65536
#define LIM_LAYERS 256
#define LIM_STAGES 256
#define LIM_LAYERS_TOTAL 4096
#define LIM_BASIS 1024
#define LIM_HIDDEN (1 << 20)

/* ------------------------------------------------------------------------ */
/* messages                                                                  */

typedef struct {
    const char *path;
    char *err;
    size_t err_len;
    ecn_safetensors *st;
    ecenet_model *m;
} loader;

static ecenet_status lfail(loader *ld, ecenet_status s, const char *fmt, ...) ECN_PRINTF(3, 4);
static ecenet_status lfail(loader *ld, ecenet_status s, const char *fmt, ...)
{
    if (ld->err && ld->err_len > 0) {
        size_t n;
        va_list ap;
        snprintf(ld->err, ld->err_len, "%s: ", ld->path);
        n = strlen(ld->err);
        va_start(ap, fmt);
        vsnprintf(ld->err + n, ld->err_len - n, fmt, ap);
        va_end(ap);
    }
    return s;
}

/* Append to a message already in err (for lists of names). */
static void lappend(loader *ld, const char *fmt, ...) ECN_PRINTF(2, 3);
static void lappend(loader *ld, const char *fmt, ...)
{
    if (ld->err && ld->err_len > 0) {
        size_t n = strlen(ld->err);
        va_list ap;
        if (n + 1 >= ld->err_len) return;
        va_start(ap, fmt);
        vsnprintf(ld->err + n, ld->err_len - n, fmt, ap);
        va_end(ap);
    }
}

static const char *dtype_name(ecn_dtype dt)
{
    switch (dt) {
    case ECN_DT_F64: return "F64";
    case ECN_DT_F32: return "F32";
    case ECN_DT_I64: return "I64";
    case ECN_DT_I32: return "I32";
    case ECN_DT_U8: return "U8";
    case ECN_DT_BOOL: return "BOOL";
    }
    return "?";
}

static void fmt_shape(char *buf, size_t len, int rank, const int64_t *shape)
{
    size_t n = 0;
    int i;
    n += (size_t)snprintf(buf, len, "(");
    for (i = 0; i < rank && n < len; i++)
        n += (size_t)snprintf(buf + n, len - n, "%s%lld", i ? "," : "", (long long)shape[i]);
    if (n < len) snprintf(buf + n, len - n, ")");
}

static char *dup_str(const char *s)
{
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d) memcpy(d, s, n);
    return d;
}

/* ------------------------------------------------------------------------ */
/* configuration                                                             */

static const char *const config_keys[] = {
    "n_types", "r_cut_edge", "r_cut_neighbor", "l_max", "n_max", "embed_dim", "n_layers",
    "n_mp", "n_dist_basis", "n_max_d", "m_max", "cutoff_type", "activation",
    "use_nonlinearity", "n_grid", "output_hidden_dims", "n_dist_embed", "edge_type_nonlin",
    "edge_type_linear", "edge_type_output",
};
/* Keys that do not change the function the model computes. */
static const char *const harmless_keys[] = {"analytic_ace_basis"};
/* Keys only the research version (SPEC §17.1) has. */
static const char *const research_keys[] = {
    "mp_type", "mp_dim", "mp_n_heads", "mp_msg_envelope", "mp_l_attention", "bottleneck_dim",
    "element_film", "film_embed_dim", "film_n_rbf", "film_hidden", "film_per_m", "film_shift",
    "les_readout", "les_charge_scale", "les_dipole", "les_charges",
};
/* Tensor-name fragments only the research version has (README "Model files"). */
static const char *const research_tensor_parts[] = {
    "linear_down", "linear_up", "msg_down", "msg_up", "msg_nonlin", "receiver.", "element_film",
};

static int in_list(const char *s, const char *const *list, size_t n)
{
    size_t i;
    for (i = 0; i < n; i++)
        if (strcmp(s, list[i]) == 0) return 1;
    return 0;
}
#define IN_LIST(s, arr) in_list((s), (arr), sizeof(arr) / sizeof((arr)[0]))

/* Short printable form of a JSON value, for messages. */
static void json_repr(const cJSON *v, char *buf, size_t len)
{
    char *p = v ? cJSON_PrintUnformatted(v) : NULL;
    snprintf(buf, len, "%s", p ? p : "?");
    if (p && strlen(p) >= len && len > 4) strcpy(buf + len - 4, "...");
    cJSON_free(p);
}

/* Integer key. absent: *out = def (status OK) unless required; null: allowed
 * only if null_val is not NULL, then *out = *null_val. */
static ecenet_status cfg_int(loader *ld, const cJSON *cfg, const char *key, int required,
                             int def, const int *null_val, int *out)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(cfg, key);
    char rep[64];
    if (!v) {
        if (required)
            return lfail(ld, ECENET_ERR_FORMAT, "config: required key '%s' is missing", key);
        *out = def;
        return ECENET_OK;
    }
    if (cJSON_IsNull(v) && null_val) {
        *out = *null_val;
        return ECENET_OK;
    }
    if (cJSON_IsNumber(v) && v->valuedouble == floor(v->valuedouble) &&
        v->valuedouble >= INT_MIN && v->valuedouble <= INT_MAX) {
        *out = (int)v->valuedouble;
        return ECENET_OK;
    }
    json_repr(v, rep, sizeof rep);
    return lfail(ld, ECENET_ERR_FORMAT, "config: key '%s' must be an integer%s, found %s", key,
                 null_val ? " or null" : "", rep);
}

static ecenet_status cfg_num(loader *ld, const cJSON *cfg, const char *key, double *out)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(cfg, key);
    char rep[64];
    if (!v) return lfail(ld, ECENET_ERR_FORMAT, "config: required key '%s' is missing", key);
    if (cJSON_IsNumber(v) && isfinite(v->valuedouble)) {
        *out = v->valuedouble;
        return ECENET_OK;
    }
    json_repr(v, rep, sizeof rep);
    return lfail(ld, ECENET_ERR_FORMAT, "config: key '%s' must be a finite number, found %s", key,
                 rep);
}

static ecenet_status cfg_bool(loader *ld, const cJSON *cfg, const char *key, int def, int *out)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(cfg, key);
    char rep[64];
    if (!v) {
        *out = def;
        return ECENET_OK;
    }
    if (cJSON_IsBool(v)) {
        *out = cJSON_IsTrue(v) ? 1 : 0;
        return ECENET_OK;
    }
    json_repr(v, rep, sizeof rep);
    return lfail(ld, ECENET_ERR_FORMAT, "config: key '%s' must be true or false, found %s", key,
                 rep);
}

/* String key mapped through names[] to its index. */
static ecenet_status cfg_enum(loader *ld, const cJSON *cfg, const char *key, int def,
                              const char *const *names, int n_names, const char *allowed,
                              int *out)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(cfg, key);
    char rep[64];
    int i;
    if (!v) {
        *out = def;
        return ECENET_OK;
    }
    if (cJSON_IsString(v))
        for (i = 0; i < n_names; i++)
            if (strcmp(v->valuestring, names[i]) == 0) {
                *out = i;
                return ECENET_OK;
            }
    json_repr(v, rep, sizeof rep);
    return lfail(ld, ECENET_ERR_FORMAT, "config: unknown %s %s (this build knows %s)", key, rep,
                 allowed);
}

static const char *const cutoff_names[] = {"cosine", "poly"};      /* ECENET_CUTOFF_* order */
static const char *const act_names[] = {"silu", "relu", "tanh", "gelu", "identity"}; /* ECENET_ACT_* */

/* Fill cfg from the JSON config. Public defaults apply to optional switches
 * (n_mp is popped from hparams by the training scripts, so it may be absent);
 * the sizes that define the tensors must be present. */
static ecenet_status parse_config(loader *ld, const cJSON *cj, ecn_config *cfg)
{
    const cJSON *v, *hid;
    ecenet_status s;
    int null_zero = 0, null_neg = -1, i;

    memset(cfg, 0, sizeof *cfg);
    if ((s = cfg_int(ld, cj, "n_types", 1, 0, NULL, &cfg->n_types)) ||
        (s = cfg_num(ld, cj, "r_cut_edge", &cfg->r_cut_edge)) ||
        (s = cfg_num(ld, cj, "r_cut_neighbor", &cfg->r_cut_neighbor)) ||
        (s = cfg_int(ld, cj, "l_max", 1, 0, NULL, &cfg->l_max)) ||
        (s = cfg_int(ld, cj, "n_max", 1, 0, NULL, &cfg->n_max)) ||
        (s = cfg_int(ld, cj, "embed_dim", 1, 0, NULL, &cfg->embed_dim)) ||
        (s = cfg_int(ld, cj, "n_layers", 1, 0, NULL, &cfg->n_layers)) ||
        (s = cfg_int(ld, cj, "n_mp", 0, 1, NULL, &cfg->n_mp)) ||
        (s = cfg_int(ld, cj, "n_dist_basis", 0, 8, NULL, &cfg->n_dist_basis)) ||
        (s = cfg_int(ld, cj, "n_max_d", 0, 0, &null_zero, &cfg->n_max_d)) ||
        (s = cfg_int(ld, cj, "m_max", 0, -1, &null_neg, &cfg->m_max)) ||
        (s = cfg_int(ld, cj, "n_grid", 0, -1, &null_neg, &cfg->n_grid)) ||
        (s = cfg_int(ld, cj, "n_dist_embed", 0, 0, &null_zero, &cfg->n_dist_embed)) ||
        (s = cfg_enum(ld, cj, "cutoff_type", ECENET_CUTOFF_COSINE, cutoff_names, 2,
                      "\"cosine\", \"poly\"", &cfg->cutoff_type)) ||
        (s = cfg_enum(ld, cj, "activation", ECENET_ACT_SILU, act_names, 5,
                      "\"silu\", \"relu\", \"tanh\", \"gelu\", \"identity\"", &cfg->activation)) ||
        (s = cfg_bool(ld, cj, "use_nonlinearity", 1, &cfg->use_nonlinearity)) ||
        (s = cfg_bool(ld, cj, "edge_type_nonlin", 0, &cfg->edge_type_nonlin)) ||
        (s = cfg_bool(ld, cj, "edge_type_linear", 0, &cfg->edge_type_linear)) ||
        (s = cfg_bool(ld, cj, "edge_type_output", 0, &cfg->edge_type_output)))
        return s;

    /* None resolution, as the reference constructor does it. A negative value
     * given explicitly is left for ecn_config_finish to reject. */
    if (!cJSON_GetObjectItemCaseSensitive(cj, "m_max") ||
        cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(cj, "m_max")))
        cfg->m_max = cfg->l_max;
    if (!cJSON_GetObjectItemCaseSensitive(cj, "n_grid") ||
        cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(cj, "n_grid")))
        cfg->n_grid = 4 * cfg->m_max + 1;
    if (cfg->n_max_d == 0 && cJSON_IsNumber(cJSON_GetObjectItemCaseSensitive(cj, "n_max_d")))
        return lfail(ld, ECENET_ERR_FORMAT, "config: n_max_d must be null or at least 1, found 0");

    hid = cJSON_GetObjectItemCaseSensitive(cj, "output_hidden_dims");
    if (!hid || cJSON_IsNull(hid)) {
        cfg->n_hidden = 1;
        cfg->hidden[0] = 64;
    } else if (cJSON_IsArray(hid)) {
        int n = cJSON_GetArraySize(hid);
        if (n >= ECN_MAX_MLP)
            return lfail(ld, ECENET_ERR_UNSUPPORTED,
                         "config: output_hidden_dims has %d entries; this build supports at most %d",
                         n, ECN_MAX_MLP - 1);
        cfg->n_hidden = n;
        i = 0;
        cJSON_ArrayForEach(v, hid) {
            if (!cJSON_IsNumber(v) || v->valuedouble != floor(v->valuedouble) ||
                v->valuedouble < 1 || v->valuedouble > LIM_HIDDEN)
                return lfail(ld, ECENET_ERR_FORMAT,
                             "config: output_hidden_dims[%d] must be an integer in 1..%d", i,
                             LIM_HIDDEN);
            cfg->hidden[i++] = (int)v->valuedouble;
        }
    } else {
        return lfail(ld, ECENET_ERR_FORMAT,
                     "config: key 'output_hidden_dims' must be a list of integers or null");
    }
    return ECENET_OK;
}

ecenet_status ecn_config_finish(ecn_config *cfg, char *err, size_t err_len)
{
#define RANGE(field, lo, hi)                                                                    \
    if (cfg->field < (lo) || cfg->field > (hi))                                                 \
        return ecn_fail(err, err_len, ECENET_ERR_FORMAT, "config: %s = %d is out of range (%d..%d)", \
                        #field, cfg->field, (int)(lo), (int)(hi));
    int k;
    if (!cfg) return ecn_fail(err, err_len, ECENET_ERR_ARGUMENT, "config: NULL");
    RANGE(n_types, 1, LIM_TYPES)
    RANGE(l_max, 0, LIM_LMAX)
    RANGE(m_max, 0, LIM_MMAX)
    RANGE(n_grid, 1, LIM_GRID)
    RANGE(n_max, 1, LIM_NMAX)
    RANGE(embed_dim, 1, LIM_EMBED)
    RANGE(n_layers, 1, LIM_LAYERS)
    RANGE(n_mp, 1, LIM_STAGES)
    RANGE(n_dist_basis, cfg->n_mp > 1 ? 1 : 0, LIM_BASIS)
    RANGE(n_max_d, 0, LIM_BASIS)
    RANGE(n_dist_embed, 0, LIM_BASIS)
    RANGE(cutoff_type, ECENET_CUTOFF_COSINE, ECENET_CUTOFF_POLY)
    RANGE(activation, ECENET_ACT_SILU, ECENET_ACT_IDENTITY)
    RANGE(use_nonlinearity, 0, 1)
    RANGE(edge_type_nonlin, 0, 1)
    RANGE(edge_type_linear, 0, 1)
    RANGE(edge_type_output, 0, 1)
    RANGE(n_hidden, 0, ECN_MAX_MLP - 1)
#undef RANGE
    if (cfg->n_mp * cfg->n_layers > LIM_LAYERS_TOTAL)
        return ecn_fail(err, err_len, ECENET_ERR_FORMAT,
                        "config: n_mp * n_layers = %d exceeds the limit %d",
                        cfg->n_mp * cfg->n_layers, LIM_LAYERS_TOTAL);
    for (k = 0; k < cfg->n_hidden; k++)
        if (cfg->hidden[k] < 1 || cfg->hidden[k] > LIM_HIDDEN)
            return ecn_fail(err, err_len, ECENET_ERR_FORMAT,
                            "config: output_hidden_dims[%d] = %d is out of range (1..%d)", k,
                            cfg->hidden[k], LIM_HIDDEN);
    if (!(cfg->r_cut_edge > 0.0) || !isfinite(cfg->r_cut_edge))
        return ecn_fail(err, err_len, ECENET_ERR_FORMAT,
                        "config: r_cut_edge = %g must be positive and finite", cfg->r_cut_edge);
    if (!(cfg->r_cut_neighbor > 0.0) || !isfinite(cfg->r_cut_neighbor))
        return ecn_fail(err, err_len, ECENET_ERR_FORMAT,
                        "config: r_cut_neighbor = %g must be positive and finite",
                        cfg->r_cut_neighbor);
    cfg->S = (cfg->l_max + 1) * (cfg->l_max + 1);
    cfg->Q = cfg->m_max + 1;
    cfg->B = 2 * cfg->embed_dim;
    cfg->F = cfg->B * (cfg->l_max + 1);
    return ECENET_OK;
}

/* ------------------------------------------------------------------------ */
/* expected tensors                                                          */

enum { CHK_FINITE, CHK_COS_IDX, CHK_SIN_IDX, CHK_COS_VALID, CHK_SIN_VALID };

typedef struct {
    char name[64];
    ecn_dtype dtype;
    int check;
    int rank;
    int64_t shape[4];
    const void **pv;    /* destination of the data pointer (one of pv, pd) */
    const double **pd;
    ecn_tensor *t;
} exp_tensor;

typedef struct {
    exp_tensor *e;
    size_t n, cap;
    int overflow;
} exp_list;

static exp_tensor *exp_add(exp_list *l, ecn_dtype dt, int check, const void **pv,
                           const double **pd, int rank, int64_t d0, int64_t d1, int64_t d2,
                           int64_t d3, const char *fmt, ...) ECN_PRINTF(11, 12);
static exp_tensor *exp_add(exp_list *l, ecn_dtype dt, int check, const void **pv,
                           const double **pd, int rank, int64_t d0, int64_t d1, int64_t d2,
                           int64_t d3, const char *fmt, ...)
{
    exp_tensor *e;
    va_list ap;
    if (l->n == l->cap) { /* capacity is computed exactly in build_expected */
        l->overflow = 1;
        return NULL;
    }
    e = &l->e[l->n++];
    memset(e, 0, sizeof *e);
    va_start(ap, fmt);
    vsnprintf(e->name, sizeof e->name, fmt, ap);
    va_end(ap);
    e->dtype = dt;
    e->check = check;
    e->pv = pv;
    e->pd = pd;
    e->rank = rank;
    e->shape[0] = d0;
    e->shape[1] = d1;
    e->shape[2] = d2;
    e->shape[3] = d3;
    return e;
}

#define F64P(dst, rank, a, b, c, d, ...) \
    exp_add(l, ECN_DT_F64, CHK_FINITE, NULL, (dst), rank, a, b, c, d, __VA_ARGS__)
#define F64V(dst, rank, a, b, c, d, ...) \
    exp_add(l, ECN_DT_F64, CHK_FINITE, (dst), NULL, rank, a, b, c, d, __VA_ARGS__)
#define BUF(dt, chk, ...) exp_add(l, dt, chk, NULL, NULL, 2, F, Q, 0, 0, __VA_ARGS__)

static int build_expected(ecenet_model *m, exp_list *l)
{
    const ecn_config *c = &m->cfg;
    const int T = c->n_types, R = c->n_max, C = c->embed_dim, F = c->F, Q = c->Q, G = c->n_grid;
    int g, k, dims[ECN_MAX_MLP + 1], nl = c->n_hidden + 1;
    size_t per_layer = 2 + (c->edge_type_linear ? 2 : 0) +
                       (c->use_nonlinearity ? 4 + (c->edge_type_nonlin ? 6 : 2) : 0);

    l->cap = 2 + 4 + (c->n_dist_embed > 0) + (size_t)c->n_mp * (size_t)c->n_layers * per_layer +
             (size_t)(c->n_mp - 1) * 5 + (size_t)nl * (c->edge_type_output ? 4 : 2);
    l->n = 0;
    l->overflow = 0;
    l->e = malloc(l->cap * sizeof *l->e);
    if (!l->e) return 0;

    F64P(&m->W, 4, T, T, R, C, "W");
    if (c->n_dist_embed > 0) F64P(&m->V_dist, 2, c->n_dist_embed, F, 0, 0, "V_dist");
    BUF(ECN_DT_I64, CHK_COS_IDX, "sph_to_angular.cos_idx");
    BUF(ECN_DT_I64, CHK_SIN_IDX, "sph_to_angular.sin_idx");
    BUF(ECN_DT_F64, CHK_COS_VALID, "sph_to_angular.cos_valid");
    BUF(ECN_DT_F64, CHK_SIN_VALID, "sph_to_angular.sin_valid");

    for (g = 0; g < c->n_mp; g++)
        for (k = 0; k < c->n_layers; k++) {
            char p[32];
            ecenet_linear_params *lp = &m->lin[g * c->n_layers + k];
            ecenet_realspace_params *rs = &m->rs[g * c->n_layers + k];
            /* n_mp = 1 keeps the flat ModuleList of the reference (SPEC §12). */
            if (c->n_mp == 1)
                snprintf(p, sizeof p, "layers.%d.", k);
            else
                snprintf(p, sizeof p, "layers.%d.%d.", g, k);
            F64V(&lp->w, 3, Q, F, F, 0, "%slinear.weights", p);
            F64V(&lp->bias, 1, F, 0, 0, 0, "%slinear.bias", p);
            if (c->edge_type_linear) {
                F64V(&lp->w_src, 4, T, Q, F, F, "%slinear.weights_src", p);
                F64V(&lp->w_tgt, 4, T, Q, F, F, "%slinear.weights_tgt", p);
            }
            if (!c->use_nonlinearity) continue;
            F64V(&rs->cos_synth, 2, Q, G, 0, 0, "%snonlin.cos_synth", p);
            F64V(&rs->sin_synth, 2, Q, G, 0, 0, "%snonlin.sin_synth", p);
            F64V(&rs->cos_analysis, 2, G, Q, 0, 0, "%snonlin.cos_analysis", p);
            F64V(&rs->sin_analysis, 2, G, Q, 0, 0, "%snonlin.sin_analysis", p);
            if (!c->edge_type_nonlin) {
                F64V(&rs->scale, 2, F, 1, 0, 0, "%snonlin.pre_scale", p);
                F64V(&rs->shift, 2, F, 1, 0, 0, "%snonlin.pre_shift", p);
            } else {
                F64V(&rs->scale, 2, F, 1, 0, 0, "%snonlin.pre_scale_base", p);
                F64V(&rs->shift, 2, F, 1, 0, 0, "%snonlin.pre_shift_base", p);
                F64V(&rs->scale_src, 3, T, F, 1, 0, "%snonlin.pre_scale_src", p);
                F64V(&rs->scale_tgt, 3, T, F, 1, 0, "%snonlin.pre_scale_tgt", p);
                F64V(&rs->shift_src, 3, T, F, 1, 0, "%snonlin.pre_shift_src", p);
                F64V(&rs->shift_tgt, 3, T, F, 1, 0, "%snonlin.pre_shift_tgt", p);
            }
        }

    for (g = 0; g + 1 < c->n_mp; g++) {
        F64P(&m->W_msg[g], 4, T, T, c->n_dist_basis, c->B, "mp_layers.%d.W_msg", g);
        BUF(ECN_DT_I64, CHK_COS_IDX, "mp_layers.%d.pack_cos_idx", g);
        BUF(ECN_DT_I64, CHK_SIN_IDX, "mp_layers.%d.pack_sin_idx", g);
        BUF(ECN_DT_F64, CHK_COS_VALID, "mp_layers.%d.pack_cos_valid_f", g);
        BUF(ECN_DT_F64, CHK_SIN_VALID, "mp_layers.%d.pack_sin_valid_f", g);
    }

    dims[0] = F;
    for (k = 0; k < c->n_hidden; k++) dims[k + 1] = c->hidden[k];
    dims[nl] = c->n_max_d > 0 ? c->n_max_d : 1;
    for (k = 0; k < nl; k++) {
        F64V(&m->mlp.w[k], 2, dims[k + 1], dims[k], 0, 0, "output_net.linears.%d.weight", k);
        F64V(&m->mlp.b[k], 1, dims[k + 1], 0, 0, 0, "output_net.linears.%d.bias", k);
        if (c->edge_type_output) {
            F64V(&m->mlp.w_src[k], 3, T, dims[k + 1], dims[k], 0,
                 "output_net.linears.%d.weights_src", k);
            F64V(&m->mlp.w_tgt[k], 3, T, dims[k + 1], dims[k], 0,
                 "output_net.linears.%d.weights_tgt", k);
        }
    }
    F64P(&m->atomic_energy, 1, T, 0, 0, 0, "atomic_energy");
    return !l->overflow;
}

/* Value the index/mask buffers must hold at (channel f, slot m), SPEC §8.2. */
static double buffer_expect(const ecn_config *c, int check, int f, int m)
{
    int l = f % (c->l_max + 1);
    switch (check) {
    case CHK_COS_IDX: return m <= l ? l * l + l + m : 0;
    case CHK_SIN_IDX: return m >= 1 && m <= l ? l * l + l - m : 0;
    case CHK_COS_VALID: return m <= l ? 1.0 : 0.0;
    case CHK_SIN_VALID: return m >= 1 && m <= l ? 1.0 : 0.0;
    }
    return 0;
}

static ecenet_status check_tensors(loader *ld, exp_list *l)
{
    const ecn_safetensors *st = ld->st;
    const ecn_config *c = &ld->m->cfg;
    size_t i, n_bad = 0;
    char a[96], b[96];

    for (i = 0; i < st->n_tensors; i++) st->tensors[i].used = 0;

    /* 1. everything the configuration needs is there */
    for (i = 0; i < l->n; i++) {
        exp_tensor *e = &l->e[i];
        e->t = ecn_st_find(st, e->name);
        if (e->t)
            e->t->used = 1;
        else
            n_bad++;
    }
    if (n_bad) {
        lfail(ld, ECENET_ERR_FORMAT, "missing tensor%s", n_bad > 1 ? "s" : "");
        for (i = 0, n_bad = 0; i < l->n; i++) {
            if (l->e[i].t) continue;
            fmt_shape(a, sizeof a, l->e[i].rank, l->e[i].shape);
            lappend(ld, "%s '%s' (expected %s %s)", n_bad++ ? "," : "", l->e[i].name,
                    dtype_name(l->e[i].dtype), a);
        }
        return ECENET_ERR_FORMAT;
    }

    /* 2. each has the dtype and shape the configuration implies */
    for (i = 0; i < l->n; i++) {
        const exp_tensor *e = l->e + i;
        int r, same = e->t->rank == e->rank && e->t->dtype == e->dtype;
        for (r = 0; same && r < e->rank; r++) same = e->t->shape[r] == e->shape[r];
        if (same) continue;
        fmt_shape(a, sizeof a, e->rank, e->shape);
        fmt_shape(b, sizeof b, e->t->rank, e->t->shape);
        return lfail(ld, ECENET_ERR_FORMAT, "tensor '%s': expected %s %s, found %s %s", e->name,
                     dtype_name(e->dtype), a, dtype_name(e->t->dtype), b);
    }

    /* 3. nothing else: an extra tensor means the file and the config disagree */
    for (i = 0; i < st->n_tensors; i++) n_bad += !st->tensors[i].used;
    if (n_bad) {
        size_t shown = 0;
        lfail(ld, ECENET_ERR_FORMAT, "unknown tensor%s", n_bad > 1 ? "s" : "");
        for (i = 0; i < st->n_tensors; i++)
            if (!st->tensors[i].used)
                lappend(ld, "%s '%s'", shown++ ? "," : "", st->tensors[i].name);
        lappend(ld, " (not part of the model the configuration describes)");
        return ECENET_ERR_FORMAT;
    }

    /* 4. contents: derived buffers equal their definition, parameters finite */
    for (i = 0; i < l->n; i++) {
        const exp_tensor *e = l->e + i;
        int64_t j, n = e->t->numel;
        if (e->check == CHK_FINITE) {
            const double *x = e->t->data;
            for (j = 0; j < n; j++)
                if (!isfinite(x[j]))
                    return lfail(ld, ECENET_ERR_FORMAT, "tensor '%s': entry %lld is %g (not finite)",
                                 e->name, (long long)j, x[j]);
            continue;
        }
        for (j = 0; j < n; j++) {
            int f = (int)(j / c->Q), m = (int)(j % c->Q);
            double want = buffer_expect(c, e->check, f, m), got;
            if (e->dtype == ECN_DT_I64)
                got = (double)((const int64_t *)e->t->data)[j];
            else
                got = ((const double *)e->t->data)[j];
            if (got != want)
                return lfail(ld, ECENET_ERR_FORMAT,
                             "tensor '%s' does not match the configuration: entry [%d,%d] is %g, "
                             "expected %g (channel %d has l = %d; l_max = %d, m_max = %d)",
                             e->name, f, m, got, want, f, f % (c->l_max + 1), c->l_max, c->m_max);
        }
    }

    /* 5. hand out the pointers */
    for (i = 0; i < l->n; i++) {
        if (l->e[i].pv) *l->e[i].pv = l->e[i].t->data;
        if (l->e[i].pd) *l->e[i].pd = l->e[i].t->data;
    }
    return ECENET_OK;
}

/* ------------------------------------------------------------------------ */
/* metadata                                                                  */

static ecenet_status check_research(loader *ld, const cJSON *cfg)
{
    const char *variant = ecn_st_meta(ld->st, "variant");
    const cJSON *v;
    size_t i, j;
    int research = variant && strcmp(variant, "thglab-research") == 0;

    if (variant && !research && strcmp(variant, "ecenet-public") != 0)
        return lfail(ld, ECENET_ERR_UNSUPPORTED, "unknown model variant '%s'", variant);
    for (i = 0; !research && i < ld->st->n_tensors; i++)
        for (j = 0; j < sizeof research_tensor_parts / sizeof research_tensor_parts[0]; j++)
            if (strstr(ld->st->tensors[i].name, research_tensor_parts[j])) research = 1;
    if (cfg)
        cJSON_ArrayForEach(v, cfg)
            if (IN_LIST(v->string, research_keys)) research = 1;
    if (research)
        return lfail(ld, ECENET_ERR_UNSUPPORTED, "research-version (THGLab) model: not supported yet");
    return ECENET_OK;
}

static ecenet_status check_config_keys(loader *ld, const cJSON *cfg, const char *which)
{
    const cJSON *v;
    cJSON_ArrayForEach(v, cfg)
        if (!IN_LIST(v->string, config_keys) && !IN_LIST(v->string, harmless_keys))
            return lfail(ld, ECENET_ERR_UNSUPPORTED,
                         "%s: unknown key '%s' (it may change the architecture; this build "
                         "cannot evaluate such a model)",
                         which, v->string);
    return ECENET_OK;
}

static ecenet_status parse_elements(loader *ld)
{
    ecenet_model *m = ld->m;
    const char *txt = ecn_st_meta(ld->st, "element_to_type");
    cJSON *j;
    const cJSON *v;
    int t, n = 0;
    ecenet_status s = ECENET_OK;

    if (!txt) return lfail(ld, ECENET_ERR_FORMAT, "metadata key 'element_to_type' is missing");
    j = cJSON_Parse(txt);
    if (!j || !cJSON_IsObject(j)) {
        cJSON_Delete(j);
        return lfail(ld, ECENET_ERR_FORMAT, "metadata 'element_to_type' is not a JSON object");
    }
    for (t = 0; t < m->cfg.n_types; t++) m->type_z[t] = 0;
    cJSON_ArrayForEach(v, j) {
        int z = ecenet_element_number(v->string);
        double d = cJSON_IsNumber(v) ? v->valuedouble : -1.0;
        if (z == 0) {
            s = lfail(ld, ECENET_ERR_FORMAT, "element_to_type: unknown element symbol '%s'",
                      v->string);
            break;
        }
        if (d != floor(d) || d < 0 || d >= m->cfg.n_types) {
            s = lfail(ld, ECENET_ERR_FORMAT,
                      "element_to_type: type of '%s' must be an integer in 0..%d", v->string,
                      m->cfg.n_types - 1);
            break;
        }
        t = (int)d;
        if (m->type_z[t]) {
            s = lfail(ld, ECENET_ERR_FORMAT, "element_to_type: type %d is given to both '%s' and '%s'",
                      t, ecenet_element_symbol(m->type_z[t]), v->string);
            break;
        }
        for (n = 0; n < m->cfg.n_types; n++)
            if (m->type_z[n] == z) break;
        if (n < m->cfg.n_types) {
            s = lfail(ld, ECENET_ERR_FORMAT, "element_to_type: element '%s' is listed twice",
                      v->string);
            break;
        }
        m->type_z[t] = z;
    }
    cJSON_Delete(j);
    if (s) return s;
    for (t = 0; t < m->cfg.n_types; t++)
        if (!m->type_z[t])
            return lfail(ld, ECENET_ERR_FORMAT,
                         "element_to_type: no element has type %d (n_types = %d)", t,
                         m->cfg.n_types);
    return ECENET_OK;
}

static ecenet_status parse_energy_meta(loader *ld)
{
    ecenet_model *m = ld->m;
    const char *units = ecn_st_meta(ld->st, "energy_units");
    const char *mean = ecn_st_meta(ld->st, "energy_mean");
    const char *ref = ecn_st_meta(ld->st, "energy_reference");
    int t;

    if (!units || strcmp(units, "eV") == 0)
        m->unit = 1.0;
    else if (strcmp(units, "kcal/mol") == 0)
        m->unit = ECN_KCAL_PER_MOL_EV;
    else
        return lfail(ld, ECENET_ERR_FORMAT, "energy_units '%s' is not \"eV\" or \"kcal/mol\"",
                     units);

    m->energy_mean = 0.0;
    if (mean) {
        char *end;
        errno = 0;
        m->energy_mean = strtod(mean, &end);
        while (*end == ' ') end++;
        if (end == mean || *end || errno == ERANGE || !isfinite(m->energy_mean))
            return lfail(ld, ECENET_ERR_FORMAT, "energy_mean '%s' is not a finite number", mean);
    }

    for (t = 0; t < m->cfg.n_types; t++) m->e_ref[t] = 0.0;
    if (ref) {
        cJSON *j = cJSON_Parse(ref);
        const cJSON *v;
        ecenet_status s = ECENET_OK;
        if (!j || !cJSON_IsObject(j)) {
            cJSON_Delete(j);
            return lfail(ld, ECENET_ERR_FORMAT, "metadata 'energy_reference' is not a JSON object");
        }
        cJSON_ArrayForEach(v, j) {
            int z = ecenet_element_number(v->string);
            if (!z) {
                s = lfail(ld, ECENET_ERR_FORMAT, "energy_reference: unknown element symbol '%s'",
                          v->string);
                break;
            }
            if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble)) {
                s = lfail(ld, ECENET_ERR_FORMAT,
                          "energy_reference: value for '%s' is not a finite number", v->string);
                break;
            }
            /* Elements the model has no type for cannot occur in a structure. */
            for (t = 0; t < m->cfg.n_types; t++)
                if (m->type_z[t] == z) m->e_ref[t] = v->valuedouble;
        }
        cJSON_Delete(j);
        if (s) return s;
    }
    return ECENET_OK;
}

/* The resolved configuration, printed fresh from cfg so that it shows the
 * values in effect (None already resolved), plus element_to_type. */
static char *print_config(const ecenet_model *m, const cJSON *src)
{
    const ecn_config *c = &m->cfg;
    cJSON *o = cJSON_CreateObject(), *arr = NULL, *e2t = NULL;
    const cJSON *aab = src ? cJSON_GetObjectItemCaseSensitive(src, "analytic_ace_basis") : NULL;
    char *s = NULL;
    int ok = o != NULL, k;

#define ADD(x) ok = ok && (x) != NULL
    ADD(cJSON_AddNumberToObject(o, "n_types", c->n_types));
    ADD(cJSON_AddNumberToObject(o, "r_cut_edge", c->r_cut_edge));
    ADD(cJSON_AddNumberToObject(o, "r_cut_neighbor", c->r_cut_neighbor));
    ADD(cJSON_AddNumberToObject(o, "l_max", c->l_max));
    ADD(cJSON_AddNumberToObject(o, "n_max", c->n_max));
    ADD(cJSON_AddNumberToObject(o, "embed_dim", c->embed_dim));
    ADD(cJSON_AddNumberToObject(o, "n_layers", c->n_layers));
    ADD(cJSON_AddNumberToObject(o, "n_mp", c->n_mp));
    ADD(cJSON_AddNumberToObject(o, "n_dist_basis", c->n_dist_basis));
    if (c->n_max_d > 0)
        ADD(cJSON_AddNumberToObject(o, "n_max_d", c->n_max_d));
    else
        ADD(cJSON_AddNullToObject(o, "n_max_d"));
    ADD(cJSON_AddStringToObject(o, "cutoff_type", cutoff_names[c->cutoff_type]));
    ADD(cJSON_AddStringToObject(o, "activation", act_names[c->activation]));
    ADD(cJSON_AddBoolToObject(o, "use_nonlinearity", c->use_nonlinearity));
    ADD(cJSON_AddNumberToObject(o, "n_grid", c->n_grid));
    if (ok && cJSON_IsBool(aab)) ADD(cJSON_AddBoolToObject(o, "analytic_ace_basis", cJSON_IsTrue(aab)));
    ADD(arr = cJSON_AddArrayToObject(o, "output_hidden_dims"));
    for (k = 0; ok && k < c->n_hidden; k++) {
        cJSON *num = cJSON_CreateNumber(c->hidden[k]);
        ADD(num);
        if (num) cJSON_AddItemToArray(arr, num);
    }
    ADD(cJSON_AddNumberToObject(o, "n_dist_embed", c->n_dist_embed));
    ADD(cJSON_AddNumberToObject(o, "m_max", c->m_max));
    ADD(cJSON_AddBoolToObject(o, "edge_type_nonlin", c->edge_type_nonlin));
    ADD(cJSON_AddBoolToObject(o, "edge_type_linear", c->edge_type_linear));
    ADD(cJSON_AddBoolToObject(o, "edge_type_output", c->edge_type_output));
    ADD(e2t = cJSON_AddObjectToObject(o, "element_to_type"));
    for (k = 0; ok && k < c->n_types; k++)
        ADD(cJSON_AddNumberToObject(e2t, ecenet_element_symbol(m->type_z[k]), k));
#undef ADD
    if (ok) s = cJSON_Print(o);
    cJSON_Delete(o);
    return s;
}

/* ------------------------------------------------------------------------ */
/* public API                                                                */

static void *xcalloc(size_t n, size_t sz) { return calloc(n ? n : 1, sz); }

static ecenet_status load(loader *ld)
{
    ecenet_model *m = ld->m;
    ecn_config *c = &m->cfg;
    const char *fmt, *ver, *cfg_txt, *which = "config_resolved";
    cJSON *cj = NULL;
    exp_list el = {NULL, 0, 0, 0};
    ecenet_status s;
    char msg[512];
    int i;

    m->path = dup_str(ld->path);
    if (!m->path) return lfail(ld, ECENET_ERR_NOMEM, "out of memory");
    errno = 0;
    ld->st = m->file = ecn_st_open(ld->path, ld->err, ld->err_len);
    if (!m->file) {
        /* ecn_st_open names the file itself; errno says what kind of failure */
        if (errno == EINVAL) return ECENET_ERR_FORMAT;
        if (errno == ENOMEM) return ECENET_ERR_NOMEM;
        return ECENET_ERR_IO;
    }

    fmt = ecn_st_meta(m->file, "format");
    if (!fmt || strcmp(fmt, "ecenet") != 0)
        return lfail(ld, ECENET_ERR_FORMAT,
                     "not an ECENet model file (metadata 'format' is %s%s%s, expected \"ecenet\")",
                     fmt ? "\"" : "", fmt ? fmt : "missing", fmt ? "\"" : "");
    ver = ecn_st_meta(m->file, "format_version");
    if (ver && strcmp(ver, "1") != 0)
        return lfail(ld, ECENET_ERR_UNSUPPORTED,
                     "format_version \"%s\" is not supported (this build reads version 1)", ver);

    cfg_txt = ecn_st_meta(m->file, "config_resolved");
    if (!cfg_txt) {
        cfg_txt = ecn_st_meta(m->file, "config");
        which = "config";
    }
    if (cfg_txt) {
        cj = cJSON_Parse(cfg_txt);
        if (!cj || !cJSON_IsObject(cj)) {
            cJSON_Delete(cj);
            /* a research file must still be named as such */
            if ((s = check_research(ld, NULL))) return s;
            return lfail(ld, ECENET_ERR_FORMAT, "metadata '%s' is not a JSON object", which);
        }
    }
    if ((s = check_research(ld, cj))) goto out;
    if (!cj) {
        s = lfail(ld, ECENET_ERR_FORMAT, "metadata has neither 'config_resolved' nor 'config'");
        goto out;
    }
    if ((s = check_config_keys(ld, cj, which))) goto out;
    if ((s = parse_config(ld, cj, c))) goto out;
    if ((s = ecn_config_finish(c, msg, sizeof msg))) {
        lfail(ld, s, "%s", msg);
        goto out;
    }

    m->type_z = xcalloc((size_t)c->n_types, sizeof *m->type_z);
    m->e_ref = xcalloc((size_t)c->n_types, sizeof *m->e_ref);
    m->lin = xcalloc((size_t)(c->n_mp * c->n_layers), sizeof *m->lin);
    m->rs = xcalloc((size_t)(c->n_mp * c->n_layers), sizeof *m->rs);
    if (c->n_mp > 1) m->W_msg = xcalloc((size_t)(c->n_mp - 1), sizeof *m->W_msg);
    if (!m->type_z || !m->e_ref || !m->lin || !m->rs || (c->n_mp > 1 && !m->W_msg)) {
        s = lfail(ld, ECENET_ERR_NOMEM, "out of memory");
        goto out;
    }
    if ((s = parse_elements(ld)) || (s = parse_energy_meta(ld))) goto out;

    if (!build_expected(m, &el)) {
        s = lfail(ld, ECENET_ERR_NOMEM, "out of memory");
        goto out;
    }
    if ((s = check_tensors(ld, &el))) goto out;

    for (i = 0; i < c->n_mp * c->n_layers; i++) {
        ecenet_linear_params *lp = &m->lin[i];
        ecenet_realspace_params *rs = &m->rs[i];
        lp->fin = lp->fout = c->F;
        lp->Q = c->Q;
        lp->T = c->n_types;
        rs->F = c->F;
        rs->Q = c->Q;
        rs->G = c->n_grid;
        rs->T = c->n_types;
        rs->act = c->activation;
    }
    m->mlp.n_layers = c->n_hidden + 1;
    m->mlp.T = c->n_types;
    /* The readout maps identity (and anything unknown) to SiLU (SPEC §14.2, §17.1). */
    m->mlp.act = c->activation == ECENET_ACT_IDENTITY ? ECENET_ACT_SILU : c->activation;
    m->mlp.dims[0] = c->F;
    for (i = 0; i < c->n_hidden; i++) m->mlp.dims[i + 1] = c->hidden[i];
    m->mlp.dims[c->n_hidden + 1] = c->n_max_d > 0 ? c->n_max_d : 1;

    m->config_json = print_config(m, cj);
    if (!m->config_json) s = lfail(ld, ECENET_ERR_NOMEM, "out of memory");

out:
    free(el.e);
    cJSON_Delete(cj);
    return s;
}

ecenet_status ecenet_model_load(const char *path, ecenet_model **model, char *err, size_t err_len)
{
    loader ld;
    ecenet_status s;

    if (err && err_len) err[0] = '\0';
    if (model) *model = NULL;
    if (!path || !model)
        return ecn_fail(err, err_len, ECENET_ERR_ARGUMENT, "ecenet_model_load: %s is NULL",
                        !path ? "path" : "model");
    ld.path = path;
    ld.err = err;
    ld.err_len = err_len;
    ld.st = NULL;
    ld.m = calloc(1, sizeof *ld.m);
    if (!ld.m) return ecn_fail(err, err_len, ECENET_ERR_NOMEM, "%s: out of memory", path);
    s = load(&ld);
    if (s != ECENET_OK) {
        ecenet_model_free(ld.m);
        return s;
    }
    *model = ld.m;
    return ECENET_OK;
}

void ecenet_model_free(ecenet_model *model)
{
    if (!model) return;
    ecn_st_close(model->file);
    free(model->path);
    cJSON_free(model->config_json); /* allocated by cJSON_Print */
    free(model->type_z);
    free(model->e_ref);
    free(model->lin);
    free(model->rs);
    free(model->W_msg);
    free(model);
}

int ecenet_model_n_types(const ecenet_model *model) { return model ? model->cfg.n_types : 0; }

int ecenet_model_type_number(const ecenet_model *model, int t)
{
    if (!model || t < 0 || t >= model->cfg.n_types) return -1;
    return model->type_z[t];
}

int ecenet_model_type_of(const ecenet_model *model, int z)
{
    int t;
    if (!model || z <= 0) return -1;
    for (t = 0; t < model->cfg.n_types; t++)
        if (model->type_z[t] == z) return t;
    return -1;
}

double ecenet_model_cutoff_edge(const ecenet_model *model)
{
    return model ? model->cfg.r_cut_edge : 0.0;
}

double ecenet_model_cutoff_neighbor(const ecenet_model *model)
{
    return model ? model->cfg.r_cut_neighbor : 0.0;
}

const char *ecenet_model_config_json(const ecenet_model *model)
{
    return model ? model->config_json : NULL;
}

const char *ecenet_model_variant(const ecenet_model *model)
{
    /* The research variant is refused at load time (for now). */
    return model ? "ecenet-public" : NULL;
}
