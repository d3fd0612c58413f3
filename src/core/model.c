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
 * the research defaults drift between versions (SPEC §18.21).
 *
 * This file has the container, the tensors and the model object;
 * model_config.c reads the metadata (variant, configuration, elements,
 * energy metadata). */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cjson/cJSON.h>
#include "error.h"
#include "model.h"
#include "model_loader.h"

/* ------------------------------------------------------------------------ */
/* messages                                                                  */

ecenet_status ecn_ld_fail(ecn_loader *ld, ecenet_status s, const char *fmt, ...)
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
static void lappend(ecn_loader *ld, const char *fmt, ...) ECN_PRINTF(2, 3);
static void lappend(ecn_loader *ld, const char *fmt, ...)
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

static ecenet_status check_tensors(ecn_loader *ld, exp_list *l)
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
        ecn_ld_fail(ld, ECENET_ERR_FORMAT, "missing tensor%s", n_bad > 1 ? "s" : "");
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
        return ecn_ld_fail(ld, ECENET_ERR_FORMAT, "tensor '%s': expected %s %s, found %s %s",
                           e->name, dtype_name(e->dtype), a, dtype_name(e->t->dtype), b);
    }

    /* 3. nothing else: an extra tensor means the file and the config disagree */
    for (i = 0; i < st->n_tensors; i++) n_bad += !st->tensors[i].used;
    if (n_bad) {
        size_t shown = 0;
        ecn_ld_fail(ld, ECENET_ERR_FORMAT, "unknown tensor%s", n_bad > 1 ? "s" : "");
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
                    return ecn_ld_fail(ld, ECENET_ERR_FORMAT,
                                       "tensor '%s': entry %lld is %g (not finite)", e->name,
                                       (long long)j, x[j]);
            if (e->check == CHK_FINITE) continue;
            /* The research version computes these in float64 (golden README
             * "Model files"): the file's values are used as they are, but they
             * must be the exact DFT matrices. */
            for (j = 0; j < n; j++) {
                int row, col;
                double want = dft_expect(c, e->check, j, &row, &col);
                if (fabs(x[j] - want) > DFT_TOL)
                    return ecn_ld_fail(
                        ld, ECENET_ERR_FORMAT,
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
                return ecn_ld_fail(
                    ld, ECENET_ERR_FORMAT,
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
static ecenet_status check_variant_tensors(ecn_loader *ld)
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
                    return ecn_ld_fail(
                        ld, ECENET_ERR_FORMAT,
                        "tensor '%s' belongs to the research (THGLab) version, but the "
                        "file is a public-release model (metadata 'variant' is not "
                        "\"thglab-research\"); a file must not mix the variants",
                        name);
            continue;
        }
        for (j = 0; j < sizeof public_parts / sizeof public_parts[0]; j++)
            if (strstr(name, public_parts[j])) public_only = 1;
        if (public_only)
            return ecn_ld_fail(ld, ECENET_ERR_FORMAT,
                               "tensor '%s' belongs to the public release, but the file is a "
                               "research-version (thglab-research) model; a file must not mix the "
                               "variants",
                               name);
        if (layer && c->bottleneck_dim > 0 && strstr(name, ".linear."))
            return ecn_ld_fail(
                ld, ECENET_ERR_FORMAT,
                "tensor '%s' is a full-width layer's, but config bottleneck_dim = %d "
                "asks for linear_down/linear_up bottleneck layers",
                name, c->bottleneck_dim);
        if (layer && c->bottleneck_dim == 0 &&
            (strstr(name, ".linear_down.") || strstr(name, ".linear_up.")))
            return ecn_ld_fail(
                ld, ECENET_ERR_FORMAT,
                "tensor '%s' is a bottleneck layer's, but config bottleneck_dim is null "
                "(full-width layers)",
                name);
        if (!c->element_film && strncmp(name, "element_film.", 13) == 0)
            return ecn_ld_fail(
                ld, ECENET_ERR_FORMAT,
                "tensor '%s' belongs to the FiLM gate, but config element_film is false", name);
    }
    return ECENET_OK;
}

/* Split each msg_up (Q, F + K, mp_dim) into the message rows (a contiguous
 * copy in `derived`) and the score rows of the m = 0 slice (model.h). */
static ecenet_status split_msg_up(ecn_loader *ld)
{
    ecenet_model *m = ld->m;
    const ecn_config *c = &m->cfg;
    const int Q = c->Q, F = c->F, D = c->mp_dim, K = c->n_scores, n = c->n_mp - 1;
    const size_t per = (size_t)Q * F * D;
    int g, q;

    if (n < 1) return ECENET_OK;
    m->derived = malloc((size_t)n * per * sizeof *m->derived);
    if (!m->derived)
        return ecn_ld_fail(ld, ECENET_ERR_NOMEM, "out of memory");
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

static ecenet_status load(ecn_loader *ld)
{
    ecenet_model *m = ld->m;
    ecn_config *c = &m->cfg;
    const char *fmt, *ver;
    cJSON *cj = NULL;
    exp_list el = {NULL, 0, 0, 0};
    ecenet_status s;
    int research, nl;

    m->path = dup_str(ld->path);
    if (!m->path)
        return ecn_ld_fail(ld, ECENET_ERR_NOMEM, "out of memory");
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
        return ecn_ld_fail(
            ld, ECENET_ERR_FORMAT,
            "not an ECENet model file (metadata 'format' is %s%s%s, expected \"ecenet\")",
            fmt ? "\"" : "", fmt ? fmt : "missing", fmt ? "\"" : "");
    ver = ecn_st_meta(m->file, "format_version");
    if (ver && strcmp(ver, "1") != 0)
        return ecn_ld_fail(ld, ECENET_ERR_UNSUPPORTED,
                           "format_version \"%s\" is not supported (this build reads version 1)",
                           ver);
    if ((s = ecn_ld_config(ld, &research, &cj))) return s;
    if ((s = check_variant_tensors(ld))) goto out;

    nl = c->n_mp * c->n_layers;
    m->type_z = xcalloc((size_t)c->n_types, sizeof *m->type_z);
    m->e_ref = xcalloc((size_t)c->n_types, sizeof *m->e_ref);
    m->lin = xcalloc((size_t)nl, sizeof *m->lin);
    m->rs = xcalloc((size_t)nl, sizeof *m->rs);
    if (!m->type_z || !m->e_ref || !m->lin || !m->rs) {
        s = ecn_ld_fail(ld, ECENET_ERR_NOMEM, "out of memory");
        goto out;
    }
    if (c->n_mp > 1) {
        if (research)
            m->amp = xcalloc((size_t)(c->n_mp - 1), sizeof *m->amp);
        else
            m->W_msg = xcalloc((size_t)(c->n_mp - 1), sizeof *m->W_msg);
        if (!m->amp && !m->W_msg) {
            s = ecn_ld_fail(ld, ECENET_ERR_NOMEM, "out of memory");
            goto out;
        }
    }
    if (research && c->bottleneck_dim > 0 &&
        !(m->lin_up = xcalloc((size_t)nl, sizeof *m->lin_up))) {
        s = ecn_ld_fail(ld, ECENET_ERR_NOMEM, "out of memory");
        goto out;
    }
    if ((s = ecn_ld_metadata(ld))) goto out;

    if (!(research ? build_expected_research(m, &el) : build_expected(m, &el))) {
        s = ecn_ld_fail(ld, ECENET_ERR_NOMEM, "out of memory");
        goto out;
    }
    if ((s = check_tensors(ld, &el))) goto out;
    fill_params(m);
    if (research && (s = split_msg_up(ld))) goto out;

    m->config_json = ecn_ld_print_config(m, cj);
    if (!m->config_json)
        s = ecn_ld_fail(ld, ECENET_ERR_NOMEM, "out of memory");

out:
    free(el.e);
    cJSON_Delete(cj);
    return s;
}

ecenet_status ecenet_model_load(const char *path, ecenet_model **model, char *err, size_t err_len)
{
    ecn_loader ld;
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
