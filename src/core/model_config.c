/* Model loading, the metadata half (model.c has the container, the tensors
 * and the model object): the variant, the configuration JSON (every key
 * known and of the file's variant, every value checked and in range), the
 * elements and the energy metadata, and the resolved configuration that a
 * loaded model reports. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cjson/cJSON.h>
#include "error.h"
#include "model.h"
#include "model_loader.h"

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
static ecenet_status cfg_int(ecn_loader *ld, const cJSON *cfg, const char *key, int required,
                             int def, const int *null_val, int *out)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(cfg, key);
    char rep[64];
    if (!v) {
        if (required)
            return ecn_ld_fail(ld, ECENET_ERR_FORMAT, "config: required key '%s' is missing", key);
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
    return ecn_ld_fail(ld, ECENET_ERR_FORMAT, "config: key '%s' must be an integer%s, found %s",
                       key, null_val ? " or null" : "", rep);
}

static ecenet_status cfg_num(ecn_loader *ld, const cJSON *cfg, const char *key, double *out)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(cfg, key);
    char rep[64];
    if (!v)
        return ecn_ld_fail(ld, ECENET_ERR_FORMAT, "config: required key '%s' is missing", key);
    if (cJSON_IsNumber(v) && isfinite(v->valuedouble)) {
        *out = v->valuedouble;
        return ECENET_OK;
    }
    json_repr(v, rep, sizeof rep);
    return ecn_ld_fail(ld, ECENET_ERR_FORMAT, "config: key '%s' must be a finite number, found %s",
                       key, rep);
}

static ecenet_status cfg_bool(ecn_loader *ld, const cJSON *cfg, const char *key, int def, int *out)
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
    return ecn_ld_fail(ld, ECENET_ERR_FORMAT, "config: key '%s' must be true or false, found %s",
                       key, rep);
}

/* String key mapped through names[] to its index. */
static ecenet_status cfg_enum(ecn_loader *ld, const cJSON *cfg, const char *key, int def,
                              const char *const *names, int n_names, const char *allowed, int *out)
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
    return ecn_ld_fail(ld, ECENET_ERR_FORMAT, "config: unknown %s %s (this build knows %s)", key,
                       rep, allowed);
}

/* A list of positive integers (or null: *n = -1). A single integer is read as
 * a list of one, as the research ElementFiLM does with `hidden`. */
static ecenet_status cfg_int_list(ecn_loader *ld, const cJSON *cfg, const char *key, int allow_int,
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
            return ecn_ld_fail(ld, ECENET_ERR_FORMAT, "config: %s must be an integer in 1..%d", key,
                               LIM_HIDDEN);
        *n_out = 1;
        vals[0] = (int)hid->valuedouble;
        return ECENET_OK;
    }
    if (!cJSON_IsArray(hid))
        return ecn_ld_fail(ld, ECENET_ERR_FORMAT,
                           "config: key '%s' must be a list of integers%s or null", key,
                           allow_int ? ", an integer" : "");
    if (cJSON_GetArraySize(hid) >= ECN_MAX_MLP)
        return ecn_ld_fail(ld, ECENET_ERR_UNSUPPORTED,
                           "config: %s has %d entries; this build supports at most %d", key,
                           cJSON_GetArraySize(hid), ECN_MAX_MLP - 1);
    cJSON_ArrayForEach(v, hid) {
        if (!cJSON_IsNumber(v) || v->valuedouble != floor(v->valuedouble) ||
            v->valuedouble < 1 || v->valuedouble > LIM_HIDDEN)
            return ecn_ld_fail(ld, ECENET_ERR_FORMAT, "config: %s[%d] must be an integer in 1..%d",
                               key, i, LIM_HIDDEN);
        vals[i++] = (int)v->valuedouble;
    }
    *n_out = i;
    return ECENET_OK;
}

static const char *const cutoff_names[] = {"cosine", "poly"};      /* ECENET_CUTOFF_* order */
static const char *const act_names[] = {"silu", "relu", "tanh", "gelu",
                                        "identity"};               /* ECENET_ACT_* */
static const char *const mp_names[] = {"edge", "sum", "softmax"};  /* ECN_MP_* order */

/* A public-only key in a research file: accepted only when it is absent or
 * has its neutral value (0, null or false), i.e. says nothing the research
 * architecture could not honour. */
static ecenet_status research_neutral(ecn_loader *ld, const cJSON *cj, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(cj, key);
    char rep[64];
    if (!v || cJSON_IsNull(v) || cJSON_IsFalse(v) || (cJSON_IsNumber(v) && v->valuedouble == 0.0))
        return ECENET_OK;
    json_repr(v, rep, sizeof rep);
    return ecn_ld_fail(
        ld, ECENET_ERR_FORMAT,
        "config: key '%s' = %s belongs to the public release (the research version "
        "removed it, SPEC §17.1); a research-version (thglab-research) file may carry it "
        "only as 0, null or false",
        key, rep);
}

/* Fill cfg from the JSON config. Public files: defaults apply to optional
 * switches (n_mp is popped from hparams by the training scripts, so it may be
 * absent); the sizes that define the tensors must be present. Research files:
 * every key of common_keys must be present (SPEC §18.21). */
static ecenet_status parse_config(ecn_loader *ld, const cJSON *cj, const char *which, int research,
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
                return ecn_ld_fail(
                    ld, ECENET_ERR_FORMAT,
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
        return ecn_ld_fail(ld, ECENET_ERR_FORMAT,
                           "config: n_max_d must be null or at least 1, found 0");

    hid = cJSON_GetObjectItemCaseSensitive(cj, "output_hidden_dims");
    if (hid && !cJSON_IsNull(hid) && !cJSON_IsArray(hid))
        return ecn_ld_fail(ld, ECENET_ERR_FORMAT,
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
static ecenet_status parse_les(ecn_loader *ld, const cJSON *cj)
{
    const cJSON *ro = cJSON_GetObjectItemCaseSensitive(cj, "les_readout");
    const cJSON *dip = cJSON_GetObjectItemCaseSensitive(cj, "les_dipole");
    const cJSON *chg = cJSON_GetObjectItemCaseSensitive(cj, "les_charges");
    const cJSON *sc = cJSON_GetObjectItemCaseSensitive(cj, "les_charge_scale");
    char rep[64];
    if (ro && !(cJSON_IsString(ro) && strcmp(ro->valuestring, "sum") == 0)) {
        json_repr(ro, rep, sizeof rep);
        return ecn_ld_fail(
            ld, ECENET_ERR_UNSUPPORTED,
            "config: les_readout = %s is not supported: only \"sum\" (no LES charge head) "
            "is; the LES long-range term is outside this build's energy path",
            rep);
    }
    if (dip && !cJSON_IsFalse(dip)) {
        json_repr(dip, rep, sizeof rep);
        return ecn_ld_fail(ld, ECENET_ERR_UNSUPPORTED,
                           "config: les_dipole = %s is not supported (LES dipoles are outside this "
                           "build's energy path)",
                           rep);
    }
    if (chg && !cJSON_IsTrue(chg)) {
        json_repr(chg, rep, sizeof rep);
        return ecn_ld_fail(ld, ECENET_ERR_UNSUPPORTED,
                           "config: les_charges = %s is not supported (only the research default "
                           "true, with les_readout \"sum\" and les_dipole false)",
                           rep);
    }
    if (sc && !(cJSON_IsNumber(sc) && isfinite(sc->valuedouble) && sc->valuedouble > 0)) {
        json_repr(sc, rep, sizeof rep);
        return ecn_ld_fail(ld, ECENET_ERR_FORMAT,
                           "config: les_charge_scale must be a positive number, "
                           "found %s",
                           rep);
    }
    return ECENET_OK;
}

/* The research switches (SPEC §17.1, §17.3, §17.4). Every one must be in the
 * config (SPEC §18.21); null is resolved as the research constructor does. */
static ecenet_status parse_research(ecn_loader *ld, const cJSON *cj, const char *which,
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
            return ecn_ld_fail(ld, ECENET_ERR_FORMAT,
                               "%s: research-version switch '%s' is missing (the research defaults "
                               "drift between versions, so every switch must be in the file; SPEC "
                               "§18.21)",
                               which, research_keys[i]);

    v = cJSON_GetObjectItemCaseSensitive(cj, "mp_type");
    if (!cJSON_IsString(v)) {
        json_repr(v, rep, sizeof rep);
        return ecn_ld_fail(ld, ECENET_ERR_FORMAT, "config: mp_type must be a string, found %s",
                           rep);
    }
    if (strcmp(v->valuestring, "sum") == 0)
        cfg->mp_type = ECN_MP_SUM;
    else if (strcmp(v->valuestring, "softmax") == 0 || strcmp(v->valuestring, "transformer") == 0)
        cfg->mp_type = ECN_MP_SOFTMAX; /* 'transformer' is the former name of 'softmax' */
    else {
        json_repr(v, rep, sizeof rep);
        return ecn_ld_fail(
            ld, ECENET_ERR_UNSUPPORTED,
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
    if (cfg->bottleneck_dim == 0 &&
        cJSON_IsNumber(cJSON_GetObjectItemCaseSensitive(cj, "bottleneck_dim")))
        return ecn_ld_fail(ld, ECENET_ERR_FORMAT,
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
#define RANGE(field, lo, hi)                                                                       \
    if (cfg->field < (lo) || cfg->field > (hi))                                                    \
        return ecn_fail(err, err_len, ECENET_ERR_FORMAT,                                           \
                        "config: %s = %d is out of range (%d..%d)", #field, cfg->field, (int)(lo), \
                        (int)(hi));
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
/* metadata                                                                  */

/* metadata "variant": "thglab-research" -> research; absent or
 * "ecenet-public" -> public; anything else is refused. */
static ecenet_status read_variant(ecn_loader *ld, int *research)
{
    const char *variant = ecn_st_meta(ld->st, "variant");
    *research = variant && strcmp(variant, "thglab-research") == 0;
    if (variant && !*research && strcmp(variant, "ecenet-public") != 0)
        return ecn_ld_fail(ld, ECENET_ERR_UNSUPPORTED,
                           "unknown model variant '%s' (this build reads \"ecenet-public\" and "
                           "\"thglab-research\")",
                           variant);
    return ECENET_OK;
}

/* Every config key must be known, and belong to the file's variant. */
static ecenet_status check_config_keys(ecn_loader *ld, const cJSON *cfg, const char *which,
                                       int research)
{
    const cJSON *v;
    cJSON_ArrayForEach(v, cfg) {
        const char *k = v->string;
        if (IN_LIST(k, harmless_keys)) {
            char buf[64];
            if (cJSON_IsBool(v)) continue; /* the only harmless key is a switch */
            json_repr(v, buf, sizeof buf);
            return ecn_ld_fail(ld, ECENET_ERR_FORMAT, "%s: key '%s' is %s, not true or false",
                               which, k, buf);
        }
        if (IN_LIST(k, common_keys)) continue;
        if (IN_LIST(k, public_only_keys)) continue; /* research: values checked in parse_config */
        if (IN_LIST(k, research_keys) || IN_LIST(k, les_keys)) {
            if (research) continue;
            return ecn_ld_fail(
                ld, ECENET_ERR_FORMAT,
                "%s: key '%s' belongs to the research (THGLab) version, but the file is "
                "a public-release model (metadata 'variant' is not \"thglab-research\"); "
                "a file must not mix the variants",
                which, k);
        }
        return ecn_ld_fail(ld, ECENET_ERR_UNSUPPORTED,
                           "%s: unknown key '%s' (it may change the architecture; this build "
                           "cannot evaluate such a model)",
                           which, k);
    }
    return ECENET_OK;
}

/* A metadata value that must be a JSON object, without a \u0000 escape (it
 * would cut a name short) or a key given twice; NULL with *st set (message
 * naming the metadata key) otherwise. */
static cJSON *meta_object(ecn_loader *ld, const char *key, const char *txt, ecenet_status *st)
{
    const long at = ecn_json_nul_escape(txt);
    cJSON *j;
    if (at >= 0) {
        *st = ecn_ld_fail(ld, ECENET_ERR_FORMAT,
                          "metadata '%s': a \\u0000 escape (NUL) at byte %ld of its JSON", key, at);
        return NULL;
    }
    j = cJSON_Parse(txt);
    if (!j || !cJSON_IsObject(j)) {
        cJSON_Delete(j);
        *st = ecn_ld_fail(ld, ECENET_ERR_FORMAT, "metadata '%s' is not a JSON object", key);
        return NULL;
    }
    /* a key given twice: cJSON keeps both and lookups see only the first */
    for (const cJSON *v = j->child; v; v = v->next)
        for (const cJSON *w = j->child; w != v; w = w->next)
            if (strcmp(w->string, v->string) == 0) {
                *st = ecn_ld_fail(ld, ECENET_ERR_FORMAT, "%s: '%s' given twice", key, v->string);
                cJSON_Delete(j);
                return NULL;
            }
    return j;
}

static ecenet_status parse_elements(ecn_loader *ld)
{
    ecenet_model *m = ld->m;
    const char *txt = ecn_st_meta(ld->st, "element_to_type");
    cJSON *j;
    const cJSON *v;
    int t, n = 0;
    ecenet_status s = ECENET_OK;

    if (!txt)
        return ecn_ld_fail(ld, ECENET_ERR_FORMAT, "metadata key 'element_to_type' is missing");
    if (!(j = meta_object(ld, "element_to_type", txt, &s)))
        return s;
    for (t = 0; t < m->cfg.n_types; t++) m->type_z[t] = 0;
    cJSON_ArrayForEach(v, j) {
        int z = ecenet_element_number(v->string);
        double d = cJSON_IsNumber(v) ? v->valuedouble : -1.0;
        if (z == 0) {
            s = ecn_ld_fail(ld, ECENET_ERR_FORMAT, "element_to_type: unknown element symbol '%s'",
                            v->string);
            break;
        }
        if (d != floor(d) || d < 0 || d >= m->cfg.n_types) {
            s = ecn_ld_fail(ld, ECENET_ERR_FORMAT,
                            "element_to_type: type of '%s' must be an integer in 0..%d", v->string,
                            m->cfg.n_types - 1);
            break;
        }
        t = (int)d;
        if (m->type_z[t]) {
            s = ecn_ld_fail(ld, ECENET_ERR_FORMAT,
                            "element_to_type: type %d is given to both '%s' and '%s'", t,
                            ecenet_element_symbol(m->type_z[t]), v->string);
            break;
        }
        for (n = 0; n < m->cfg.n_types; n++)
            if (m->type_z[n] == z) break;
        if (n < m->cfg.n_types) {
            s = ecn_ld_fail(ld, ECENET_ERR_FORMAT, "element_to_type: element '%s' is listed twice",
                            v->string);
            break;
        }
        m->type_z[t] = z;
    }
    cJSON_Delete(j);
    if (s) return s;
    for (t = 0; t < m->cfg.n_types; t++)
        if (!m->type_z[t])
            return ecn_ld_fail(ld, ECENET_ERR_FORMAT,
                               "element_to_type: no element has type %d (n_types = %d)", t,
                               m->cfg.n_types);
    return ECENET_OK;
}

static ecenet_status parse_energy_meta(ecn_loader *ld)
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
        return ecn_ld_fail(ld, ECENET_ERR_FORMAT, "energy_units '%s' is not \"eV\" or \"kcal/mol\"",
                           units);

    m->energy_mean = 0.0;
    if (mean) {
        char *end;
        errno = 0;
        /* decimal only: strtod would also read hexadecimal ("0x10" = 16) */
        if (strspn(mean, " +-.0123456789eE") != strlen(mean))
            return ecn_ld_fail(ld, ECENET_ERR_FORMAT,
                               "energy_mean '%s' is not a finite decimal number", mean);
        m->energy_mean = strtod(mean, &end);
        while (*end == ' ') end++;
        if (end == mean || *end || errno == ERANGE || !isfinite(m->energy_mean))
            return ecn_ld_fail(ld, ECENET_ERR_FORMAT, "energy_mean '%s' is not a finite number",
                               mean);
    }

    for (t = 0; t < m->cfg.n_types; t++) m->e_ref[t] = 0.0;
    if (ref) {
        const cJSON *v;
        ecenet_status s = ECENET_OK;
        cJSON *j = meta_object(ld, "energy_reference", ref, &s);
        if (!j)
            return s;
        cJSON_ArrayForEach(v, j) {
            int z = ecenet_element_number(v->string);
            if (!z) {
                s = ecn_ld_fail(ld, ECENET_ERR_FORMAT,
                                "energy_reference: unknown element symbol '%s'", v->string);
                break;
            }
            if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble)) {
                s = ecn_ld_fail(ld, ECENET_ERR_FORMAT,
                                "energy_reference: value for '%s' is not a finite number",
                                v->string);
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
char *ecn_ld_print_config(const ecenet_model *m, const cJSON *src)
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
    if (ok && cJSON_IsBool(aab))
        ADD(cJSON_AddBoolToObject(o, "analytic_ace_basis", cJSON_IsTrue(aab)));
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
/* the loader's entries (model_loader.h)                                     */

ecenet_status ecn_ld_config(ecn_loader *ld, int *research, cJSON **cjp)
{
    ecn_config *c = &ld->m->cfg;
    const char *cfg_txt, *which = "config_resolved";
    char msg[512];
    ecenet_status s;
    cJSON *cj;

    *cjp = NULL;
    if ((s = read_variant(ld, research))) return s;
    cfg_txt = ecn_st_meta(ld->st, "config_resolved");
    if (!cfg_txt) {
        cfg_txt = ecn_st_meta(ld->st, "config");
        which = "config";
    }
    if (!cfg_txt)
        return ecn_ld_fail(ld, ECENET_ERR_FORMAT,
                           "metadata has neither 'config_resolved' nor 'config'");
    if (!(cj = meta_object(ld, which, cfg_txt, &s)))
        return s;
    if ((s = check_config_keys(ld, cj, which, *research)) ||
        (s = parse_config(ld, cj, which, *research, c)) ||
        (*research && (s = parse_research(ld, cj, which, c)))) {
        cJSON_Delete(cj);
        return s;
    }
    if ((s = ecn_config_finish(c, msg, sizeof msg))) {
        cJSON_Delete(cj);
        return ecn_ld_fail(ld, s, "%s", msg);
    }
    *cjp = cj;
    return ECENET_OK;
}

ecenet_status ecn_ld_metadata(ecn_loader *ld)
{
    ecenet_status s;
    if ((s = parse_elements(ld)) || (s = parse_energy_meta(ld))) return s;
    return ECENET_OK;
}
