/* Model loading: configuration from the safetensors metadata, then every
 * tensor the configuration implies, checked by name, dtype and shape, with
 * nothing missing and nothing left over (SPEC §15). PyTorch loads with
 * strict=False and silently keeps init values for missing keys; this loader
 * refuses instead, so a model either loads exactly or not at all.
 *
 * Two variants share the container (golden README "Research-version cases"):
 * the public release and the research version (THGLab, SPEC §17), marked by
 * metadata "variant": "thglab-research". A file is read as exactly one of
 * them; config keys or tensors of the other variant are refused by name, and
 * every architectural switch of a research file must be in the file, because
 * the research defaults drift between versions (SPEC §18.21). */
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

/* Keys both variants have. */
static const char *const common_keys[] = {
    "n_types", "r_cut_edge", "r_cut_neighbor", "l_max", "n_max", "embed_dim", "n_layers",
    "n_mp", "n_max_d", "m_max", "cutoff_type", "activation", "use_nonlinearity", "n_grid",
    "output_hidden_dims",
};
/* Keys of the public release that the research version removed (SPEC §17.1). */
static const char *const public_only_keys[] = {
    "n_dist_basis", "n_dist_embed", "edge_type_nonlin", "edge_type_linear", "edge_type_output",
};
/* Architectural switches only the research version has (SPEC §17.1); a
 * research file must give every one of them (SPEC §18.21). */
static const char *const research_keys[] = {
    "bottleneck_dim", "mp_type", "mp_dim", "mp_n_heads", "mp_msg_envelope", "mp_l_attention",
    "element_film", "film_embed_dim", "film_n_rbf", "film_hidden", "film_per_m", "film_shift",
};
/* The research version's LES long-range add-on (SPEC §17.1): outside the
 * energy path of the spec. Accepted only with the values that keep it out of
 * the model's state_dict and energy (parse_les). */
static const char *const les_keys[] = {
    "les_readout", "les_charge_scale", "les_dipole", "les_charges",
};
/* Keys that do not change the function the model computes. */
static const char *const harmless_keys[] = {"analytic_ace_basis"};

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

/* A list of positive integers (or null: *n = -1). A single integer is read as
 * a list of one, as the research ElementFiLM does with `hidden`. */
static ecenet_status cfg_int_list(loader *ld, const cJSON *cfg, const char *key, int allow_int,
                                  int *n_out, int *vals)
{
    const cJSON *hid = cJSON_GetObjectItemCaseSensitive(cfg, key), *v;
    int i = 0;
    if (!hid || cJSON_IsNull(hid)) {
        *n_out = -1;
        return ECENET_OK;
    }
    if (allow_int && cJSON_IsNumber(hid)) {
        if (hid->valuedouble != floor(hid->valuedouble) || hid->valuedouble < 1 ||
            hid->valuedouble > LIM_HIDDEN)
            return lfail(ld, ECENET_ERR_FORMAT, "config: %s must be an integer in 1..%d", key,
                         LIM_HIDDEN);
        *n_out = 1;
        vals[0] = (int)hid->valuedouble;
        return ECENET_OK;
    }
    if (!cJSON_IsArray(hid))
        return lfail(ld, ECENET_ERR_FORMAT, "config: key '%s' must be a list of integers%s or null",
                     key, allow_int ? ", an integer" : "");
    if (cJSON_GetArraySize(hid) >= ECN_MAX_MLP)
        return lfail(ld, ECENET_ERR_UNSUPPORTED,
                     "config: %s has %d entries; this build supports at most %d", key,
                     cJSON_GetArraySize(hid), ECN_MAX_MLP - 1);
    cJSON_ArrayForEach(v, hid) {
        if (!cJSON_IsNumber(v) || v->valuedouble != floor(v->valuedouble) ||
            v->valuedouble < 1 || v->valuedouble > LIM_HIDDEN)
            return lfail(ld, ECENET_ERR_FORMAT, "config: %s[%d] must be an integer in 1..%d", key,
                         i, LIM_HIDDEN);
        vals[i++] = (int)v->valuedouble;
    }
    *n_out = i;
    return ECENET_OK;
}

static const char *const cutoff_names[] = {"cosine", "poly"};      /* ECENET_CUTOFF_* order */
static const char *const act_names[] = {"silu", "relu", "tanh", "gelu", "identity"}; /* ECENET_ACT_* */
static const char *const mp_names[] = {"edge", "sum", "softmax"};  /* ECN_MP_* order */

/* A public-only key in a research file: accepted only when it is absent or
 * has its neutral value (0, null or false), i.e. says nothing the research
 * architecture could not honour. */
static ecenet_status research_neutral(loader *ld, const cJSON *cj, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(cj, key);
    char rep[64];
    if (!v || cJSON_IsNull(v) || cJSON_IsFalse(v) || (cJSON_IsNumber(v) && v->valuedouble == 0.0))
        return ECENET_OK;
    json_repr(v, rep, sizeof rep);
    return lfail(ld, ECENET_ERR_FORMAT,
                 "config: key '%s' = %s belongs to the public release (the research version "
                 "removed it, SPEC §17.1); a research-version (thglab-research) file may carry it "
                 "only as 0, null or false",
                 key, rep);
}

/* Fill cfg from the JSON config. Public files: defaults apply to optional
 * switches (n_mp is popped from hparams by the training scripts, so it may be
 * absent); the sizes that define the tensors must be present. Research files:
 * every key of common_keys must be present (SPEC §18.21). */
static ecenet_status parse_config(loader *ld, const cJSON *cj, const char *which, int research,
                                  ecn_config *cfg)
{
    const cJSON *hid;
    ecenet_status s;
    int null_zero = 0, null_neg = -1;
    size_t i;

    memset(cfg, 0, sizeof *cfg);
    cfg->variant = research ? ECN_VARIANT_RESEARCH : ECN_VARIANT_PUBLIC;
    cfg->mp_type = ECN_MP_EDGE;
    if (research)
        for (i = 0; i < sizeof common_keys / sizeof common_keys[0]; i++)
            if (!cJSON_GetObjectItemCaseSensitive(cj, common_keys[i]))
                return lfail(ld, ECENET_ERR_FORMAT,
                             "%s: key '%s' is missing (a research-version file must give every "
                             "architectural switch: the research defaults drift between "
                             "versions, SPEC §18.21)",
                             which, common_keys[i]);
    if ((s = cfg_int(ld, cj, "n_types", 1, 0, NULL, &cfg->n_types)) ||
        (s = cfg_num(ld, cj, "r_cut_edge", &cfg->r_cut_edge)) ||
        (s = cfg_num(ld, cj, "r_cut_neighbor", &cfg->r_cut_neighbor)) ||
        (s = cfg_int(ld, cj, "l_max", 1, 0, NULL, &cfg->l_max)) ||
        (s = cfg_int(ld, cj, "n_max", 1, 0, NULL, &cfg->n_max)) ||
        (s = cfg_int(ld, cj, "embed_dim", 1, 0, NULL, &cfg->embed_dim)) ||
        (s = cfg_int(ld, cj, "n_layers", 1, 0, NULL, &cfg->n_layers)) ||
        (s = cfg_int(ld, cj, "n_mp", 0, 1, NULL, &cfg->n_mp)) ||
        (s = cfg_int(ld, cj, "n_max_d", 0, 0, &null_zero, &cfg->n_max_d)) ||
        (s = cfg_int(ld, cj, "m_max", 0, -1, &null_neg, &cfg->m_max)) ||
        (s = cfg_int(ld, cj, "n_grid", 0, -1, &null_neg, &cfg->n_grid)) ||
        (s = cfg_enum(ld, cj, "cutoff_type", ECENET_CUTOFF_COSINE, cutoff_names, 2,
                      "\"cosine\", \"poly\"", &cfg->cutoff_type)) ||
        (s = cfg_enum(ld, cj, "activation", ECENET_ACT_SILU, act_names, 5,
                      "\"silu\", \"relu\", \"tanh\", \"gelu\", \"identity\"", &cfg->activation)) ||
        (s = cfg_bool(ld, cj, "use_nonlinearity", 1, &cfg->use_nonlinearity)))
        return s;
    if (research) {
        /* the research version has none of these: 0 / false */
        for (i = 0; i < sizeof public_only_keys / sizeof public_only_keys[0]; i++)
            if ((s = research_neutral(ld, cj, public_only_keys[i]))) return s;
    } else if ((s = cfg_int(ld, cj, "n_dist_basis", 0, 8, NULL, &cfg->n_dist_basis)) ||
               (s = cfg_int(ld, cj, "n_dist_embed", 0, 0, &null_zero, &cfg->n_dist_embed)) ||
               (s = cfg_bool(ld, cj, "edge_type_nonlin", 0, &cfg->edge_type_nonlin)) ||
               (s = cfg_bool(ld, cj, "edge_type_linear", 0, &cfg->edge_type_linear)) ||
               (s = cfg_bool(ld, cj, "edge_type_output", 0, &cfg->edge_type_output))) {
        return s;
    }

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
    if (hid && !cJSON_IsNull(hid) && !cJSON_IsArray(hid))
        return lfail(ld, ECENET_ERR_FORMAT,
                     "config: key 'output_hidden_dims' must be a list of integers or null");
    if ((s = cfg_int_list(ld, cj, "output_hidden_dims", 0, &cfg->n_hidden, cfg->hidden)))
        return s;
    /* None means [64]; the research constructor (`output_hidden_dims or [64]`)
     * also reads an empty list as [64]. */
    if (cfg->n_hidden < 0 || (research && cfg->n_hidden == 0)) {
        cfg->n_hidden = 1;
        cfg->hidden[0] = 64;
    }
    return ECENET_OK;
}

/* LES (latent Ewald summation, SPEC §17.1) is a long-range add-on that lies
 * outside the energy path of the spec: the model's energy never includes it
 * (an external wrapper adds E_lr), and only les_readout 'softmax', 'edge' or
 * 'edge_basis' give the model extra charge-head parameters. The values
 * accepted here are the research constructor's defaults, which the golden
 * research files carry ('sum', dipole off, charges on): they add no tensors
 * and no term to the energy this library computes. Anything else would
 * describe a charge head this build cannot evaluate. les_charge_scale only
 * scales the charges of an edge-mode head (ignored with 'sum'); any positive
 * value is accepted. */
static ecenet_status parse_les(loader *ld, const cJSON *cj)
{
    const cJSON *ro = cJSON_GetObjectItemCaseSensitive(cj, "les_readout");
    const cJSON *dip = cJSON_GetObjectItemCaseSensitive(cj, "les_dipole");
    const cJSON *chg = cJSON_GetObjectItemCaseSensitive(cj, "les_charges");
    const cJSON *sc = cJSON_GetObjectItemCaseSensitive(cj, "les_charge_scale");
    char rep[64];
    if (ro && !(cJSON_IsString(ro) && strcmp(ro->valuestring, "sum") == 0)) {
        json_repr(ro, rep, sizeof rep);
        return lfail(ld, ECENET_ERR_UNSUPPORTED,
                     "config: les_readout = %s is not supported: only \"sum\" (no LES charge head) "
                     "is; the LES long-range term is outside this build's energy path",
                     rep);
    }
    if (dip && !cJSON_IsFalse(dip)) {
        json_repr(dip, rep, sizeof rep);
        return lfail(ld, ECENET_ERR_UNSUPPORTED,
                     "config: les_dipole = %s is not supported (LES dipoles are outside this "
                     "build's energy path)",
                     rep);
    }
    if (chg && !cJSON_IsTrue(chg)) {
        json_repr(chg, rep, sizeof rep);
        return lfail(ld, ECENET_ERR_UNSUPPORTED,
                     "config: les_charges = %s is not supported (only the research default "
                     "true, with les_readout \"sum\" and les_dipole false)",
                     rep);
    }
    if (sc && !(cJSON_IsNumber(sc) && isfinite(sc->valuedouble) && sc->valuedouble > 0)) {
        json_repr(sc, rep, sizeof rep);
        return lfail(ld, ECENET_ERR_FORMAT, "config: les_charge_scale must be a positive number, "
                     "found %s", rep);
    }
    return ECENET_OK;
}

/* The research switches (SPEC §17.1, §17.3, §17.4). Every one must be in the
 * config (SPEC §18.21); null is resolved as the research constructor does. */
static ecenet_status parse_research(loader *ld, const cJSON *cj, const char *which,
                                    ecn_config *cfg)
{
    const cJSON *v;
    ecenet_status s;
    char rep[64];
    int null_zero = 0, null_neg = -1, envelope = 0;
    size_t i;
    long long F;

    for (i = 0; i < sizeof research_keys / sizeof research_keys[0]; i++)
        if (!cJSON_GetObjectItemCaseSensitive(cj, research_keys[i]))
            return lfail(ld, ECENET_ERR_FORMAT,
                         "%s: research-version switch '%s' is missing (the research defaults "
                         "drift between versions, so every switch must be in the file; SPEC "
                         "§18.21)",
                         which, research_keys[i]);

    v = cJSON_GetObjectItemCaseSensitive(cj, "mp_type");
    if (!cJSON_IsString(v)) {
        json_repr(v, rep, sizeof rep);
        return lfail(ld, ECENET_ERR_FORMAT, "config: mp_type must be a string, found %s", rep);
    }
    if (strcmp(v->valuestring, "sum") == 0)
        cfg->mp_type = ECN_MP_SUM;
    else if (strcmp(v->valuestring, "softmax") == 0 || strcmp(v->valuestring, "transformer") == 0)
        cfg->mp_type = ECN_MP_SOFTMAX; /* 'transformer' is the former name of 'softmax' */
    else {
        json_repr(v, rep, sizeof rep);
        return lfail(ld, ECENET_ERR_UNSUPPORTED,
                     "config: unknown mp_type %s (this build knows \"sum\", \"softmax\" and its "
                     "alias \"transformer\")",
                     rep);
    }

    if ((s = cfg_int(ld, cj, "bottleneck_dim", 1, 0, &null_zero, &cfg->bottleneck_dim)) ||
        (s = cfg_int(ld, cj, "mp_dim", 1, 0, &null_neg, &cfg->mp_dim)) ||
        (s = cfg_int(ld, cj, "mp_n_heads", 1, 0, NULL, &cfg->mp_n_heads)) ||
        (s = cfg_bool(ld, cj, "mp_msg_envelope", 0, &envelope)) ||
        (s = cfg_bool(ld, cj, "mp_l_attention", 0, &cfg->mp_l_attention)) ||
        (s = cfg_bool(ld, cj, "element_film", 0, &cfg->element_film)) ||
        (s = cfg_int(ld, cj, "film_embed_dim", 1, 0, NULL, &cfg->film_embed_dim)) ||
        (s = cfg_int(ld, cj, "film_n_rbf", 1, 0, &null_zero, &cfg->film_n_rbf)) ||
        (s = cfg_bool(ld, cj, "film_per_m", 0, &cfg->film_per_m)) ||
        (s = cfg_bool(ld, cj, "film_shift", 0, &cfg->film_shift)) ||
        (s = cfg_int_list(ld, cj, "film_hidden", 1, &cfg->film_n_hidden, cfg->film_hidden)) ||
        (s = parse_les(ld, cj)))
        return s;
    if (cfg->bottleneck_dim == 0 && cJSON_IsNumber(cJSON_GetObjectItemCaseSensitive(cj, "bottleneck_dim")))
        return lfail(ld, ECENET_ERR_FORMAT,
                     "config: bottleneck_dim must be null or at least 1, found 0");
    /* mp_msg_envelope as in effect: 'sum' is enveloped by construction
     * (a = s·f_cut) and the reference ignores the flag there. */
    cfg->mp_msg_envelope = envelope && cfg->mp_type == ECN_MP_SOFTMAX;

    /* None resolution; F = 2C(L+1) (ranges are checked by ecn_config_finish,
     * so compute in long long and clamp) */
    F = 2LL * cfg->embed_dim * (cfg->l_max + 1LL);
    if (F > INT_MAX) F = INT_MAX;
    if (F < 0) F = 0;
    if (cfg->mp_dim == -1) cfg->mp_dim = F / 4 > 1 ? (int)(F / 4) : 1;      /* max(F // 4, 1) */
    if (cfg->film_n_hidden < 0) {
        /* ElementFiLM: None -> [max(2F, 32)]; not built without element_film */
        if (cfg->element_film) {
            cfg->film_n_hidden = 1;
            cfg->film_hidden[0] = 2 * F > 32 ? (2 * F > INT_MAX ? INT_MAX : (int)(2 * F)) : 32;
        } else {
            cfg->film_n_hidden = 0;
        }
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
    RANGE(variant, ECN_VARIANT_PUBLIC, ECN_VARIANT_RESEARCH)
    RANGE(n_types, 1, LIM_TYPES)
    RANGE(l_max, 0, LIM_LMAX)
    RANGE(m_max, 0, LIM_MMAX)
    RANGE(n_grid, 1, LIM_GRID)
    RANGE(n_max, 1, LIM_NMAX)
    RANGE(embed_dim, 1, LIM_EMBED)
    RANGE(n_layers, 1, LIM_LAYERS)
    RANGE(n_mp, 1, LIM_STAGES)
    RANGE(n_dist_basis, cfg->n_mp > 1 && cfg->variant == ECN_VARIANT_PUBLIC ? 1 : 0, LIM_BASIS)
    RANGE(n_max_d, 0, LIM_BASIS)
    RANGE(n_dist_embed, 0, LIM_BASIS)
    RANGE(cutoff_type, ECENET_CUTOFF_COSINE, ECENET_CUTOFF_POLY)
    RANGE(activation, ECENET_ACT_SILU, ECENET_ACT_IDENTITY)
    RANGE(use_nonlinearity, 0, 1)
    RANGE(edge_type_nonlin, 0, 1)
    RANGE(edge_type_linear, 0, 1)
    RANGE(edge_type_output, 0, 1)
    RANGE(n_hidden, 0, ECN_MAX_MLP - 1)
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

    if (cfg->variant == ECN_VARIANT_PUBLIC) {
        /* the research switches must keep their "absent" values */
        const struct { const char *name; int value; } rs[] = {
            {"mp_type", cfg->mp_type}, {"bottleneck_dim", cfg->bottleneck_dim},
            {"mp_dim", cfg->mp_dim}, {"mp_n_heads", cfg->mp_n_heads},
            {"mp_msg_envelope", cfg->mp_msg_envelope}, {"mp_l_attention", cfg->mp_l_attention},
            {"element_film", cfg->element_film}, {"film_embed_dim", cfg->film_embed_dim},
            {"film_n_rbf", cfg->film_n_rbf}, {"film_per_m", cfg->film_per_m},
            {"film_shift", cfg->film_shift}, {"film_hidden (count)", cfg->film_n_hidden},
        };
        for (k = 0; k < (int)(sizeof rs / sizeof rs[0]); k++)
            if (rs[k].value != 0)
                return ecn_fail(err, err_len, ECENET_ERR_FORMAT,
                                "config: %s = %d is a research-version switch; a public-release "
                                "model must leave it 0",
                                rs[k].name, rs[k].value);
        cfg->n_scores = 0;
        return ECENET_OK;
    }

    /* research version */
    if (cfg->n_dist_basis || cfg->n_dist_embed || cfg->edge_type_nonlin || cfg->edge_type_linear ||
        cfg->edge_type_output)
        return ecn_fail(err, err_len, ECENET_ERR_FORMAT,
                        "config: n_dist_basis, n_dist_embed and edge_type_* belong to the public "
                        "release; a research-version model must leave them 0");
    RANGE(mp_type, ECN_MP_SUM, ECN_MP_SOFTMAX)
    RANGE(bottleneck_dim, 0, LIM_HIDDEN)
    RANGE(mp_dim, 1, LIM_HIDDEN)
    RANGE(mp_n_heads, 1, LIM_HIDDEN)
    RANGE(mp_msg_envelope, 0, 1)
    RANGE(mp_l_attention, 0, 1)
    RANGE(element_film, 0, 1)
    RANGE(film_per_m, 0, 1)
    RANGE(film_shift, 0, 1)
    RANGE(film_embed_dim, cfg->element_film ? 1 : 0, LIM_HIDDEN)
    RANGE(film_n_rbf, 0, LIM_BASIS)
    RANGE(film_n_hidden, 0, ECN_MAX_MLP - 1)
#undef RANGE
    for (k = 0; k < cfg->film_n_hidden; k++)
        if (cfg->film_hidden[k] < 1 || cfg->film_hidden[k] > LIM_HIDDEN)
            return ecn_fail(err, err_len, ECENET_ERR_FORMAT,
                            "config: film_hidden[%d] = %d is out of range (1..%d)", k,
                            cfg->film_hidden[k], LIM_HIDDEN);
    if (cfg->mp_type == ECN_MP_SUM && cfg->mp_msg_envelope)
        return ecn_fail(err, err_len, ECENET_ERR_FORMAT,
                        "config: mp_msg_envelope has no effect with mp_type 'sum' and must be 0 "
                        "(as in effect)");
    /* The MP layer splits the n_base = 2·embed_dim value channels across the
     * heads; the reference checks this only when it builds MP layers. */
    if (cfg->n_mp > 1 && cfg->B % cfg->mp_n_heads != 0)
        return ecn_fail(err, err_len, ECENET_ERR_FORMAT,
                        "config: mp_n_heads = %d does not divide n_base = 2·embed_dim = %d (each "
                        "head gates an equal slice of the value channels)",
                        cfg->mp_n_heads, cfg->B);
    if (!cfg->use_nonlinearity)
        return ecn_fail(err, err_len, ECENET_ERR_UNSUPPORTED,
                        "config: use_nonlinearity = false in a research-version model is not "
                        "supported (its semantics there, where the MP layers keep their own "
                        "nonlinearities, are not verified by reference data)");
    if (cfg->element_film && cfg->film_per_m)
        return ecn_fail(err, err_len, ECENET_ERR_UNSUPPORTED,
                        "config: film_per_m = true is not supported (the per-(channel, m) FiLM "
                        "gate is not verified by reference data)");
    if (cfg->element_film && cfg->film_shift)
        return ecn_fail(err, err_len, ECENET_ERR_UNSUPPORTED,
                        "config: film_shift = true is not supported (the FiLM shift is not "
                        "verified by reference data)");
    cfg->n_scores = cfg->mp_n_heads * (cfg->mp_l_attention ? cfg->l_max + 1 : 1);
    return ECENET_OK;
}

/* ------------------------------------------------------------------------ */
/* expected tensors                                                          */

/* CHK_DFT_*: the θ-grid matrices of a research file, which must be the exact
 * double-precision DFT matrices (golden README "Model files"). */
enum {
    CHK_FINITE, CHK_COS_IDX, CHK_SIN_IDX, CHK_COS_VALID, CHK_SIN_VALID,
    CHK_DFT_COS_SYNTH, CHK_DFT_SIN_SYNTH, CHK_DFT_COS_ANALYSIS, CHK_DFT_SIN_ANALYSIS
};

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
    int overflow;       /* out of memory while growing */
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
    if (l->overflow) return NULL;
    if (l->n == l->cap) {
        size_t cap = l->cap ? 2 * l->cap : 64;
        exp_tensor *ne = realloc(l->e, cap * sizeof *ne);
        if (!ne) {
            l->overflow = 1;
            return NULL;
        }
        l->e = ne;
        l->cap = cap;
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

static void expect_index_buffers(exp_list *l, int F, int Q)
{
    BUF(ECN_DT_I64, CHK_COS_IDX, "sph_to_angular.cos_idx");
    BUF(ECN_DT_I64, CHK_SIN_IDX, "sph_to_angular.sin_idx");
    BUF(ECN_DT_F64, CHK_COS_VALID, "sph_to_angular.cos_valid");
    BUF(ECN_DT_F64, CHK_SIN_VALID, "sph_to_angular.sin_valid");
}

/* Readout MLP output_net.linears.k (public: optional per-type corrections). */
static void expect_readout(ecenet_model *m, exp_list *l)
{
    const ecn_config *c = &m->cfg;
    const int T = c->n_types, nl = c->n_hidden + 1;
    int k, dims[ECN_MAX_MLP + 1];
    dims[0] = c->F;
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
}

static void layer_prefix(const ecn_config *c, int g, int k, char *p, size_t len)
{
    /* n_mp = 1 keeps the flat ModuleList of the reference (SPEC §12). */
    if (c->n_mp == 1)
        snprintf(p, len, "layers.%d.", k);
    else
        snprintf(p, len, "layers.%d.%d.", g, k);
}

static int build_expected(ecenet_model *m, exp_list *l)
{
    const ecn_config *c = &m->cfg;
    const int T = c->n_types, R = c->n_max, C = c->embed_dim, F = c->F, Q = c->Q, G = c->n_grid;
    int g, k;

    F64P(&m->W, 4, T, T, R, C, "W");
    if (c->n_dist_embed > 0) F64P(&m->V_dist, 2, c->n_dist_embed, F, 0, 0, "V_dist");
    expect_index_buffers(l, F, Q);

    for (g = 0; g < c->n_mp; g++)
        for (k = 0; k < c->n_layers; k++) {
            char p[32];
            ecenet_linear_params *lp = &m->lin[g * c->n_layers + k];
            ecenet_realspace_params *rs = &m->rs[g * c->n_layers + k];
            layer_prefix(c, g, k, p, sizeof p);
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

    expect_readout(m, l);
    F64P(&m->atomic_energy, 1, T, 0, 0, 0, "atomic_energy");
    return !l->overflow;
}

/* Research layers: EquivariantLinear `<p>weights` (Q, fout, fin) + `<p>bias`. */
static void expect_linear(exp_list *l, ecenet_linear_params *lp, int Q, int fin, int fout,
                          const char *p)
{
    F64V(&lp->w, 3, Q, fout, fin, 0, "%sweights", p);
    F64V(&lp->bias, 1, fout, 0, 0, 0, "%sbias", p);
}

/* Research RealSpaceNonlinearity `<p>{cos,sin}_{synth,analysis}`: exact DFT
 * matrices, no pre_scale/pre_shift (SPEC §17.2). */
static void expect_grid(exp_list *l, ecenet_realspace_params *rs, int Q, int G, const char *p)
{
    exp_add(l, ECN_DT_F64, CHK_DFT_COS_SYNTH, &rs->cos_synth, NULL, 2, Q, G, 0, 0,
            "%scos_synth", p);
    exp_add(l, ECN_DT_F64, CHK_DFT_SIN_SYNTH, &rs->sin_synth, NULL, 2, Q, G, 0, 0,
            "%ssin_synth", p);
    exp_add(l, ECN_DT_F64, CHK_DFT_COS_ANALYSIS, &rs->cos_analysis, NULL, 2, G, Q, 0, 0,
            "%scos_analysis", p);
    exp_add(l, ECN_DT_F64, CHK_DFT_SIN_ANALYSIS, &rs->sin_analysis, NULL, 2, G, Q, 0, 0,
            "%ssin_analysis", p);
}

/* The research version's state_dict (SPEC §17.3, §17.4, golden README "Model
 * files"). amp[g].up temporarily points at the whole msg_up (Q, F + K, mp_dim);
 * split_msg_up divides it after the checks. */
static int build_expected_research(ecenet_model *m, exp_list *l)
{
    const ecn_config *c = &m->cfg;
    const int T = c->n_types, R = c->n_max, C = c->embed_dim, F = c->F, Q = c->Q, G = c->n_grid;
    const int r = c->bottleneck_dim, D = c->mp_dim, K = c->n_scores;
    int g, k;
    char p[80];

    F64P(&m->W, 4, T, T, R, C, "W");
    expect_index_buffers(l, F, Q);

    for (g = 0; g < c->n_mp; g++)
        for (k = 0; k < c->n_layers; k++) {
            const int i = g * c->n_layers + k;
            char lp[32];
            layer_prefix(c, g, k, lp, sizeof lp);
            if (r > 0) {
                snprintf(p, sizeof p, "%slinear_down.", lp);
                expect_linear(l, &m->lin[i], Q, F, r, p);
                snprintf(p, sizeof p, "%slinear_up.", lp);
                expect_linear(l, &m->lin_up[i], Q, r, F, p);
            } else {
                snprintf(p, sizeof p, "%slinear.", lp);
                expect_linear(l, &m->lin[i], Q, F, F, p);
            }
            snprintf(p, sizeof p, "%snonlin.", lp);
            if (c->use_nonlinearity) expect_grid(l, &m->rs[i], Q, G, p);
        }

    for (g = 0; g + 1 < c->n_mp; g++) {
        ecn_attn_mp *a = &m->amp[g];
        snprintf(p, sizeof p, "mp_layers.%d.msg_down.", g);
        expect_linear(l, &a->down, Q, F, D, p);
        snprintf(p, sizeof p, "mp_layers.%d.msg_nonlin.", g);
        expect_grid(l, &a->nonlin, Q, G, p);
        snprintf(p, sizeof p, "mp_layers.%d.msg_up.", g);
        expect_linear(l, &a->up, Q, D, F + K, p);
        snprintf(p, sizeof p, "mp_layers.%d.receiver.linear_down.", g);
        expect_linear(l, &a->rdown, Q, F, D, p);
        snprintf(p, sizeof p, "mp_layers.%d.receiver.nonlin.", g);
        expect_grid(l, &a->rnonlin, Q, G, p);
        snprintf(p, sizeof p, "mp_layers.%d.receiver.linear_up.", g);
        expect_linear(l, &a->rup, Q, D, F, p);
    }

    if (c->element_film) {
        /* nn.Embedding a, b; nn.Sequential(Linear, SiLU, Linear, ...): the
         * Linear layers are at the even indices */
        ecenet_mlp_params *fm = &m->film.mlp;
        const int P = c->film_embed_dim, nl = c->film_n_hidden + 1;
        F64P(&m->film.a, 2, T, P, 0, 0, "element_film.a.weight");
        F64P(&m->film.b, 2, T, P, 0, 0, "element_film.b.weight");
        fm->n_layers = nl;
        fm->dims[0] = 2 * P + c->film_n_rbf;
        for (k = 0; k < c->film_n_hidden; k++) fm->dims[k + 1] = c->film_hidden[k];
        fm->dims[nl] = F; /* one scale per channel (film_per_m, film_shift are refused) */
        for (k = 0; k < nl; k++) {
            F64V(&fm->w[k], 2, fm->dims[k + 1], fm->dims[k], 0, 0, "element_film.mlp.%d.weight",
                 2 * k);
            F64V(&fm->b[k], 1, fm->dims[k + 1], 0, 0, 0, "element_film.mlp.%d.bias", 2 * k);
        }
    }

    expect_readout(m, l);
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

/* Entry j of an exact DFT matrix (SPEC §11): synthesis (Q, G) cos(mθ_k),
 * sin(mθ_k); analysis (G, Q) the same times 1/G (m = 0) or 2/G (m > 0);
 * θ_k = 2πk/G. Sets the (row, column) indices for messages. */
static double dft_expect(const ecn_config *c, int check, int64_t j, int *row, int *col)
{
    const double two_pi = 6.283185307179586476925286766559;
    const int G = c->n_grid, Q = c->Q;
    int m, k;
    double w = 1.0, th;
    if (check == CHK_DFT_COS_SYNTH || check == CHK_DFT_SIN_SYNTH) {
        m = (int)(j / G);
        k = (int)(j % G);
        *row = m;
        *col = k;
    } else {
        k = (int)(j / Q);
        m = (int)(j % Q);
        *row = k;
        *col = m;
        w = (m == 0 ? 1.0 : 2.0) / G;
    }
    th = two_pi * k / G;
    if (check == CHK_DFT_COS_SYNTH || check == CHK_DFT_COS_ANALYSIS) return w * cos(m * th);
    return w * sin(m * th);
}

#define DFT_TOL 1e-12

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
        if (e->check == CHK_FINITE || e->check >= CHK_DFT_COS_SYNTH) {
            const double *x = e->t->data;
            for (j = 0; j < n; j++)
                if (!isfinite(x[j]))
                    return lfail(ld, ECENET_ERR_FORMAT, "tensor '%s': entry %lld is %g (not finite)",
                                 e->name, (long long)j, x[j]);
            if (e->check == CHK_FINITE) continue;
            /* The research version computes these in float64 (golden README
             * "Model files"): the file's values are used as they are, but they
             * must be the exact DFT matrices. */
            for (j = 0; j < n; j++) {
                int row, col;
                double want = dft_expect(c, e->check, j, &row, &col);
                if (fabs(x[j] - want) > DFT_TOL)
                    return lfail(ld, ECENET_ERR_FORMAT,
                                 "tensor '%s': entry [%d,%d] is %.17g, expected %.17g (a "
                                 "research-version θ-grid matrix must be the exact DFT matrix "
                                 "for n_grid = %d, m_max = %d, to %g)",
                                 e->name, row, col, x[j], want, c->n_grid, c->m_max, DFT_TOL);
            }
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

/* Research: which of the other variant's tensors, or of the switches' other
 * setting, a file carries. Run before the exact-name check so that the
 * message names the offending tensor rather than the ones it replaced. */
static ecenet_status check_variant_tensors(loader *ld)
{
    const ecn_config *c = &ld->m->cfg;
    size_t i, j;
    static const char *const public_parts[] = {
        "W_msg", ".pack_cos_", ".pack_sin_", "pre_scale", "pre_shift", "weights_src",
        "weights_tgt",
    };
    static const char *const research_parts[] = {
        "linear_down.", "linear_up.", "msg_down.", "msg_up.", "msg_nonlin.", "receiver.",
        "element_film.",
    };
    for (i = 0; i < ld->st->n_tensors; i++) {
        const char *name = ld->st->tensors[i].name;
        int layer = strncmp(name, "layers.", 7) == 0, public_only = strcmp(name, "V_dist") == 0;
        if (c->variant == ECN_VARIANT_PUBLIC) {
            for (j = 0; j < sizeof research_parts / sizeof research_parts[0]; j++)
                if (strstr(name, research_parts[j]))
                    return lfail(ld, ECENET_ERR_FORMAT,
                                 "tensor '%s' belongs to the research (THGLab) version, but the "
                                 "file is a public-release model (metadata 'variant' is not "
                                 "\"thglab-research\"); a file must not mix the variants",
                                 name);
            continue;
        }
        for (j = 0; j < sizeof public_parts / sizeof public_parts[0]; j++)
            if (strstr(name, public_parts[j])) public_only = 1;
        if (public_only)
            return lfail(ld, ECENET_ERR_FORMAT,
                         "tensor '%s' belongs to the public release, but the file is a "
                         "research-version (thglab-research) model; a file must not mix the "
                         "variants",
                         name);
        if (layer && c->bottleneck_dim > 0 && strstr(name, ".linear."))
            return lfail(ld, ECENET_ERR_FORMAT,
                         "tensor '%s' is a full-width layer's, but config bottleneck_dim = %d "
                         "asks for linear_down/linear_up bottleneck layers",
                         name, c->bottleneck_dim);
        if (layer && c->bottleneck_dim == 0 &&
            (strstr(name, ".linear_down.") || strstr(name, ".linear_up.")))
            return lfail(ld, ECENET_ERR_FORMAT,
                         "tensor '%s' is a bottleneck layer's, but config bottleneck_dim is null "
                         "(full-width layers)",
                         name);
        if (!c->element_film && strncmp(name, "element_film.", 13) == 0)
            return lfail(ld, ECENET_ERR_FORMAT,
                         "tensor '%s' belongs to the FiLM gate, but config element_film is false",
                         name);
    }
    return ECENET_OK;
}

/* Split each msg_up (Q, F + K, mp_dim) into the message rows (a contiguous
 * copy in `derived`) and the score rows of the m = 0 slice (model.h). */
static ecenet_status split_msg_up(loader *ld)
{
    ecenet_model *m = ld->m;
    const ecn_config *c = &m->cfg;
    const int Q = c->Q, F = c->F, D = c->mp_dim, K = c->n_scores, n = c->n_mp - 1;
    const size_t per = (size_t)Q * F * D;
    int g, q;

    if (n < 1) return ECENET_OK;
    m->derived = malloc((size_t)n * per * sizeof *m->derived);
    if (!m->derived) return lfail(ld, ECENET_ERR_NOMEM, "out of memory");
    for (g = 0; g < n; g++) {
        ecn_attn_mp *a = &m->amp[g];
        const double *w = a->up.w, *b = a->up.bias;
        double *up = m->derived + (size_t)g * per;
        for (q = 0; q < Q; q++)
            memcpy(up + (size_t)q * F * D, w + (size_t)q * (F + K) * D, (size_t)F * D * sizeof *up);
        a->up.w = up;
        a->up.bias = b;                       /* first F entries */
        a->up.fin = D;
        a->up.fout = F;
        a->score.n_layers = 1;
        a->score.T = c->n_types;
        a->score.act = ECENET_ACT_SILU;       /* unused: one layer */
        a->score.dims[0] = D;
        a->score.dims[1] = K;
        a->score.w[0] = w + (size_t)F * D;    /* m = 0 slice, rows F .. F + K - 1 */
        a->score.b[0] = b + F;
    }
    return ECENET_OK;
}

/* ------------------------------------------------------------------------ */
/* metadata                                                                  */

/* metadata "variant": "thglab-research" -> research; absent or
 * "ecenet-public" -> public; anything else is refused. */
static ecenet_status read_variant(loader *ld, int *research)
{
    const char *variant = ecn_st_meta(ld->st, "variant");
    *research = variant && strcmp(variant, "thglab-research") == 0;
    if (variant && !*research && strcmp(variant, "ecenet-public") != 0)
        return lfail(ld, ECENET_ERR_UNSUPPORTED,
                     "unknown model variant '%s' (this build reads \"ecenet-public\" and "
                     "\"thglab-research\")",
                     variant);
    return ECENET_OK;
}

/* Every config key must be known, and belong to the file's variant. */
static ecenet_status check_config_keys(loader *ld, const cJSON *cfg, const char *which,
                                       int research)
{
    const cJSON *v;
    cJSON_ArrayForEach(v, cfg) {
        const char *k = v->string;
        if (IN_LIST(k, common_keys) || IN_LIST(k, harmless_keys)) continue;
        if (IN_LIST(k, public_only_keys)) continue; /* research: values checked in parse_config */
        if (IN_LIST(k, research_keys) || IN_LIST(k, les_keys)) {
            if (research) continue;
            return lfail(ld, ECENET_ERR_FORMAT,
                         "%s: key '%s' belongs to the research (THGLab) version, but the file is "
                         "a public-release model (metadata 'variant' is not \"thglab-research\"); "
                         "a file must not mix the variants",
                         which, k);
        }
        return lfail(ld, ECENET_ERR_UNSUPPORTED,
                     "%s: unknown key '%s' (it may change the architecture; this build "
                     "cannot evaluate such a model)",
                     which, k);
    }
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

static cJSON *int_array(const int *v, int n)
{
    cJSON *arr = cJSON_CreateArray();
    int k;
    for (k = 0; arr && k < n; k++) {
        cJSON *num = cJSON_CreateNumber(v[k]);
        if (!num) {
            cJSON_Delete(arr);
            return NULL;
        }
        cJSON_AddItemToArray(arr, num);
    }
    return arr;
}

/* The resolved configuration, printed fresh from cfg so that it shows the
 * values in effect (None already resolved), plus element_to_type. Research
 * models list their switches (and the accepted LES keys as given) instead of
 * the public-only keys. */
static char *print_config(const ecenet_model *m, const cJSON *src)
{
    const ecn_config *c = &m->cfg;
    const int research = c->variant == ECN_VARIANT_RESEARCH;
    cJSON *o = cJSON_CreateObject(), *arr = NULL, *e2t = NULL;
    const cJSON *aab = src ? cJSON_GetObjectItemCaseSensitive(src, "analytic_ace_basis") : NULL;
    char *s = NULL;
    size_t i;
    int ok = o != NULL, k;

#define ADD(x) ok = ok && (x) != NULL
    if (research) ADD(cJSON_AddStringToObject(o, "variant", "thglab-research"));
    ADD(cJSON_AddNumberToObject(o, "n_types", c->n_types));
    ADD(cJSON_AddNumberToObject(o, "r_cut_edge", c->r_cut_edge));
    ADD(cJSON_AddNumberToObject(o, "r_cut_neighbor", c->r_cut_neighbor));
    ADD(cJSON_AddNumberToObject(o, "l_max", c->l_max));
    ADD(cJSON_AddNumberToObject(o, "n_max", c->n_max));
    ADD(cJSON_AddNumberToObject(o, "embed_dim", c->embed_dim));
    ADD(cJSON_AddNumberToObject(o, "n_layers", c->n_layers));
    ADD(cJSON_AddNumberToObject(o, "n_mp", c->n_mp));
    if (!research) ADD(cJSON_AddNumberToObject(o, "n_dist_basis", c->n_dist_basis));
    if (c->n_max_d > 0)
        ADD(cJSON_AddNumberToObject(o, "n_max_d", c->n_max_d));
    else
        ADD(cJSON_AddNullToObject(o, "n_max_d"));
    ADD(cJSON_AddStringToObject(o, "cutoff_type", cutoff_names[c->cutoff_type]));
    ADD(cJSON_AddStringToObject(o, "activation", act_names[c->activation]));
    ADD(cJSON_AddBoolToObject(o, "use_nonlinearity", c->use_nonlinearity));
    ADD(cJSON_AddNumberToObject(o, "n_grid", c->n_grid));
    if (ok && cJSON_IsBool(aab)) ADD(cJSON_AddBoolToObject(o, "analytic_ace_basis", cJSON_IsTrue(aab)));
    if (ok) {
        ADD(arr = int_array(c->hidden, c->n_hidden));
        if (arr) cJSON_AddItemToObject(o, "output_hidden_dims", arr);
    }
    if (!research) ADD(cJSON_AddNumberToObject(o, "n_dist_embed", c->n_dist_embed));
    ADD(cJSON_AddNumberToObject(o, "m_max", c->m_max));
    if (!research) {
        ADD(cJSON_AddBoolToObject(o, "edge_type_nonlin", c->edge_type_nonlin));
        ADD(cJSON_AddBoolToObject(o, "edge_type_linear", c->edge_type_linear));
        ADD(cJSON_AddBoolToObject(o, "edge_type_output", c->edge_type_output));
    } else {
        if (c->bottleneck_dim > 0)
            ADD(cJSON_AddNumberToObject(o, "bottleneck_dim", c->bottleneck_dim));
        else
            ADD(cJSON_AddNullToObject(o, "bottleneck_dim"));
        ADD(cJSON_AddStringToObject(o, "mp_type", mp_names[c->mp_type]));
        ADD(cJSON_AddNumberToObject(o, "mp_dim", c->mp_dim));
        ADD(cJSON_AddNumberToObject(o, "mp_n_heads", c->mp_n_heads));
        ADD(cJSON_AddBoolToObject(o, "mp_msg_envelope", c->mp_msg_envelope));
        ADD(cJSON_AddBoolToObject(o, "mp_l_attention", c->mp_l_attention));
        ADD(cJSON_AddBoolToObject(o, "element_film", c->element_film));
        ADD(cJSON_AddNumberToObject(o, "film_embed_dim", c->film_embed_dim));
        ADD(cJSON_AddNumberToObject(o, "film_n_rbf", c->film_n_rbf));
        if (ok && !c->element_film && c->film_n_hidden == 0) {
            ADD(cJSON_AddNullToObject(o, "film_hidden")); /* not built */
        } else if (ok) {
            ADD(arr = int_array(c->film_hidden, c->film_n_hidden));
            if (arr) cJSON_AddItemToObject(o, "film_hidden", arr);
        }
        ADD(cJSON_AddBoolToObject(o, "film_per_m", c->film_per_m));
        ADD(cJSON_AddBoolToObject(o, "film_shift", c->film_shift));
        /* LES: not part of the energy path; shown as the file gives it */
        for (i = 0; ok && src && i < sizeof les_keys / sizeof les_keys[0]; i++) {
            const cJSON *v = cJSON_GetObjectItemCaseSensitive(src, les_keys[i]);
            cJSON *d = v ? cJSON_Duplicate(v, 1) : NULL;
            if (v) ADD(d);
            if (d) cJSON_AddItemToObject(o, les_keys[i], d);
        }
    }
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

/* Layer, MP and FiLM sizes once the pointers are in place. */
static void fill_params(ecenet_model *m)
{
    const ecn_config *c = &m->cfg;
    const int research = c->variant == ECN_VARIANT_RESEARCH;
    const int r = research ? c->bottleneck_dim : 0, D = c->mp_dim;
    int i;

#define RS(rs, width)                                                                           \
    do {                                                                                        \
        (rs)->F = (width);                                                                      \
        (rs)->Q = c->Q;                                                                         \
        (rs)->G = c->n_grid;                                                                    \
        (rs)->T = c->n_types;                                                                   \
        (rs)->act = c->activation;                                                              \
    } while (0)
#define LIN(lp, in, out)                                                                        \
    do {                                                                                        \
        (lp)->fin = (in);                                                                       \
        (lp)->fout = (out);                                                                     \
        (lp)->Q = c->Q;                                                                         \
        (lp)->T = c->n_types;                                                                   \
    } while (0)

    for (i = 0; i < c->n_mp * c->n_layers; i++) {
        /* research: no pre_scale/pre_shift, scale/shift stay NULL (identity) */
        if (r > 0) {
            LIN(&m->lin[i], c->F, r);
            LIN(&m->lin_up[i], r, c->F);
            RS(&m->rs[i], r);
        } else {
            LIN(&m->lin[i], c->F, c->F);
            RS(&m->rs[i], c->F);
        }
    }
    for (i = 0; research && i + 1 < c->n_mp; i++) {
        ecn_attn_mp *a = &m->amp[i];
        LIN(&a->down, c->F, D);
        RS(&a->nonlin, D);
        LIN(&a->up, D, c->F + c->n_scores); /* split_msg_up narrows it to F */
        LIN(&a->rdown, c->F, D);
        RS(&a->rnonlin, D);
        LIN(&a->rup, D, c->F);
    }
#undef RS
#undef LIN
    if (research && c->element_film) {
        m->film.mlp.T = c->n_types;
        m->film.mlp.act = ECENET_ACT_SILU; /* nn.SiLU between the gate's layers */
    }
    m->mlp.n_layers = c->n_hidden + 1;
    m->mlp.T = c->n_types;
    /* The readout maps identity to SiLU (SPEC §14.2, §17.1: "readout MLP keeps
     * SiLU"); both variants use the activation otherwise. */
    m->mlp.act = c->activation == ECENET_ACT_IDENTITY ? ECENET_ACT_SILU : c->activation;
    m->mlp.dims[0] = c->F;
    for (i = 0; i < c->n_hidden; i++) m->mlp.dims[i + 1] = c->hidden[i];
    m->mlp.dims[c->n_hidden + 1] = c->n_max_d > 0 ? c->n_max_d : 1;
}

static ecenet_status load(loader *ld)
{
    ecenet_model *m = ld->m;
    ecn_config *c = &m->cfg;
    const char *fmt, *ver, *cfg_txt, *which = "config_resolved";
    cJSON *cj = NULL;
    exp_list el = {NULL, 0, 0, 0};
    ecenet_status s;
    char msg[512];
    int research, nl;

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
    if ((s = read_variant(ld, &research))) return s;

    cfg_txt = ecn_st_meta(m->file, "config_resolved");
    if (!cfg_txt) {
        cfg_txt = ecn_st_meta(m->file, "config");
        which = "config";
    }
    if (!cfg_txt)
        return lfail(ld, ECENET_ERR_FORMAT, "metadata has neither 'config_resolved' nor 'config'");
    cj = cJSON_Parse(cfg_txt);
    if (!cj || !cJSON_IsObject(cj)) {
        cJSON_Delete(cj);
        return lfail(ld, ECENET_ERR_FORMAT, "metadata '%s' is not a JSON object", which);
    }
    if ((s = check_config_keys(ld, cj, which, research)) ||
        (s = parse_config(ld, cj, which, research, c)) ||
        (research && (s = parse_research(ld, cj, which, c))))
        goto out;
    if ((s = ecn_config_finish(c, msg, sizeof msg))) {
        lfail(ld, s, "%s", msg);
        goto out;
    }
    if ((s = check_variant_tensors(ld))) goto out;

    nl = c->n_mp * c->n_layers;
    m->type_z = xcalloc((size_t)c->n_types, sizeof *m->type_z);
    m->e_ref = xcalloc((size_t)c->n_types, sizeof *m->e_ref);
    m->lin = xcalloc((size_t)nl, sizeof *m->lin);
    m->rs = xcalloc((size_t)nl, sizeof *m->rs);
    if (!m->type_z || !m->e_ref || !m->lin || !m->rs) {
        s = lfail(ld, ECENET_ERR_NOMEM, "out of memory");
        goto out;
    }
    if (c->n_mp > 1) {
        if (research)
            m->amp = xcalloc((size_t)(c->n_mp - 1), sizeof *m->amp);
        else
            m->W_msg = xcalloc((size_t)(c->n_mp - 1), sizeof *m->W_msg);
        if (!m->amp && !m->W_msg) {
            s = lfail(ld, ECENET_ERR_NOMEM, "out of memory");
            goto out;
        }
    }
    if (research && c->bottleneck_dim > 0 && !(m->lin_up = xcalloc((size_t)nl, sizeof *m->lin_up))) {
        s = lfail(ld, ECENET_ERR_NOMEM, "out of memory");
        goto out;
    }
    if ((s = parse_elements(ld)) || (s = parse_energy_meta(ld))) goto out;

    if (!(research ? build_expected_research(m, &el) : build_expected(m, &el))) {
        s = lfail(ld, ECENET_ERR_NOMEM, "out of memory");
        goto out;
    }
    if ((s = check_tensors(ld, &el))) goto out;
    fill_params(m);
    if (research && (s = split_msg_up(ld))) goto out;

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
    free(model->lin_up);
    free(model->rs);
    free(model->amp);
    free(model->derived);
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
    if (!model) return NULL;
    return model->cfg.variant == ECN_VARIANT_RESEARCH ? "thglab-research" : "ecenet-public";
}
