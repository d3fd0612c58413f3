/* Public API: compute contexts and ecenet_compute (include/ecenet.h). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "backend.h"
#include "engine.h"
#include "error.h"
#include "graph.h"
#include "model.h"
#include "step.h"

#define ERR_LEN 1024

struct ecenet_ctx {
    const ecenet_model *model;
    ecn_engine *engine;
    ecn_graph graph; /* kept between computes: the rebuild reuses its memory */
    int device_nlist; /* ECENET_OPT_DEVICE_NLIST */
    /* per-atom scratch of ecenet_compute, kept so that an MD loop allocates
     * nothing once n_atoms settles: types, dE/dpositions, and the positions
     * the search and the step see (ecn_graph_recentre); room for cap atoms */
    int32_t *types;
    double *grad, *pos;
    size_t cap;
    char err[ERR_LEN];
};

/* room for n atoms in ctx's scratch (n <= INT32_MAX / 4: no size wraps) */
static int ctx_reserve(ecenet_ctx *ctx, size_t n)
{
    if (n <= ctx->cap && ctx->types)
        return 0;
    int32_t *t = realloc(ctx->types, (n + 1) * sizeof *t);
    if (t)
        ctx->types = t;
    double *g = realloc(ctx->grad, (3 * n + 1) * sizeof *g);
    if (g)
        ctx->grad = g;
    double *p = realloc(ctx->pos, (3 * n + 1) * sizeof *p);
    if (p)
        ctx->pos = p;
    if (!t || !g || !p)
        return -1;
    ctx->cap = n;
    return 0;
}

#define ECN_STR2(x) #x
#define ECN_STR(x) ECN_STR2(x)
const char *ecenet_version(void)
{
    return ECN_STR(ECENET_VERSION_MAJOR) "." ECN_STR(ECENET_VERSION_MINOR) "." ECN_STR(
        ECENET_VERSION_PATCH);
}
int ecenet_abi_version(void) { return ECENET_ABI_VERSION; }

const char *ecenet_status_string(ecenet_status s)
{
    switch (s) {
    case ECENET_OK: return "ok";
    case ECENET_ERR_IO: return "I/O error";
    case ECENET_ERR_FORMAT: return "malformed model file";
    case ECENET_ERR_ARGUMENT: return "invalid argument";
    case ECENET_ERR_INPUT: return "invalid structure";
    case ECENET_ERR_NOMEM: return "out of memory";
    case ECENET_ERR_BACKEND: return "backend error";
    case ECENET_ERR_UNSUPPORTED: return "unsupported";
    case ECENET_ERR_NONFINITE: return "non-finite result";
    }
    return "unknown status";
}

ecenet_status ecenet_ctx_create(const ecenet_model *model, const char *backend,
                                ecenet_precision precision, ecenet_ctx **ctx, char *err,
                                size_t err_len)
{
    if (err && err_len) /* no earlier failure's text after a success */
        err[0] = '\0';
    if (!ctx)
        return ecn_fail(err, err_len, ECENET_ERR_ARGUMENT, "ecenet_ctx_create: ctx is NULL");
    *ctx = NULL;
    if (!model)
        return ecn_fail(err, err_len, ECENET_ERR_ARGUMENT, "ecenet_ctx_create: model is NULL");
    const char *from = "";
    if (!backend) {
        backend = getenv("ECENET_BACKEND");
        from = " (from ECENET_BACKEND)";
    }
    if (!backend || !*backend)
        backend = "ref";
    if (precision != ECENET_F64 && precision != ECENET_F32)
        return ecn_fail(err, err_len, ECENET_ERR_ARGUMENT, "unknown precision %d", (int)precision);
    const ecenet_backend *be = ecn_backend_get(backend, (int)precision);
    if (!be) {
        char why[512];
        ecn_backend_why(backend, why, sizeof why);
        return ecn_fail(err, err_len, ECENET_ERR_BACKEND, "backend '%s'%s with precision %s %s",
                        backend, from, precision == ECENET_F64 ? "f64" : "f32", why);
    }
    for (int k = 0; k <= model->mlp.n_layers; k++)
        if (model->mlp.dims[k] > 4096)
            return ecn_fail(err, err_len, ECENET_ERR_UNSUPPORTED,
                            "the model's readout layer width %d (output_hidden_dims) exceeds "
                            "this build's limit of 4096",
                            model->mlp.dims[k]);
    ecenet_ctx *c = calloc(1, sizeof *c);
    if (!c)
        return ecn_fail(err, err_len, ECENET_ERR_NOMEM, "out of memory");
    c->model = model;
    c->device_nlist = 1;
    ecenet_status st = ecn_engine_create(model, be, &c->engine, err, err_len);
    if (st != ECENET_OK) {
        free(c);
        return st;
    }
    *ctx = c;
    return ECENET_OK;
}

void ecenet_ctx_free(ecenet_ctx *ctx)
{
    if (!ctx)
        return;
    ecn_engine_free(ctx->engine);
    ecn_graph_free(&ctx->graph);
    free(ctx->types);
    free(ctx->grad);
    free(ctx->pos);
    free(ctx);
}

const char *ecenet_ctx_error(const ecenet_ctx *ctx) { return ctx ? ctx->err : "ctx is NULL"; }

const char *ecenet_ctx_backend(const ecenet_ctx *ctx)
{
    return ctx ? ecn_engine_backend(ctx->engine)->name : NULL;
}

ecenet_status ecenet_ctx_set_option(ecenet_ctx *ctx, ecenet_option option, long value)
{
    if (!ctx)
        return ECENET_ERR_ARGUMENT;
    ctx->err[0] = '\0';
    const ecenet_backend *be = ecn_engine_backend(ctx->engine);
    switch (option) {
    case ECENET_OPT_TF32:
        if (value != 0 && value != 1)
            return ecn_fail(ctx->err, ERR_LEN, ECENET_ERR_ARGUMENT,
                            "ECENET_OPT_TF32: value %ld, expected 0 or 1", value);
        /* 0 where there is no TF32 mode: what the backend does anyway */
        if (ecn_engine_set_tf32(ctx->engine, (int)value) != 0 && value)
            return ecn_fail(ctx->err, ERR_LEN, ECENET_ERR_UNSUPPORTED,
                            "ECENET_OPT_TF32: backend '%s' %s has no TF32 mode (cuda f32 only)",
                            be->name, be->precision == ECENET_F64 ? "f64" : "f32");
        return ECENET_OK;
    case ECENET_OPT_LOW_MEMORY:
        if (value != 0 && value != 1)
            return ecn_fail(ctx->err, ERR_LEN, ECENET_ERR_ARGUMENT,
                            "ECENET_OPT_LOW_MEMORY: value %ld, expected 0 or 1", value);
        ecn_engine_set_low_memory(ctx->engine, (int)value, ctx->engine->chunk_edges);
        return ECENET_OK;
    case ECENET_OPT_DEVICE_NLIST:
        if (value != 0 && value != 1)
            return ecn_fail(ctx->err, ERR_LEN, ECENET_ERR_ARGUMENT,
                            "ECENET_OPT_DEVICE_NLIST: value %ld, expected 0 or 1", value);
        ctx->device_nlist = (int)value;
        return ECENET_OK;
    case ECENET_OPT_CHUNK_EDGES:
        if (value < 0 || value > INT32_MAX)
            return ecn_fail(ctx->err, ERR_LEN, ECENET_ERR_ARGUMENT,
                            "ECENET_OPT_CHUNK_EDGES: value %ld, expected 0 (automatic) .. %d",
                            value, (int)INT32_MAX);
        ecn_engine_set_low_memory(ctx->engine, ctx->engine->low_memory, (int64_t)value);
        return ECENET_OK;
    }
    return ecn_fail(ctx->err, ERR_LEN, ECENET_ERR_ARGUMENT, "unknown option %d", (int)option);
}

static double det3(const double *a)
{
    return a[0] * (a[4] * a[8] - a[5] * a[7]) - a[1] * (a[3] * a[8] - a[5] * a[6]) +
           a[2] * (a[3] * a[7] - a[4] * a[6]);
}

/* Validate the system and the output buffers before touching anything. */
static ecenet_status check_args(ecenet_ctx *ctx, const ecenet_system *s, const ecenet_outputs *o,
                                int32_t *types)
{
    char *err = ctx->err;
    const size_t n = s->n_atoms;
    if (n == 0)
        return ecn_fail(err, ERR_LEN, ECENET_ERR_INPUT, "empty structure (0 atoms)");
    if (!s->positions || !s->numbers)
        return ecn_fail(err, ERR_LEN, ECENET_ERR_ARGUMENT, "system->%s is NULL",
                        s->positions ? "numbers" : "positions");
    for (size_t i = 0; i < n; i++) {
        int t = ecenet_model_type_of(ctx->model, s->numbers[i]);
        if (t < 0) {
            const char *sym = ecenet_element_symbol(s->numbers[i]);
            return ecn_fail(err, ERR_LEN, ECENET_ERR_INPUT,
                            "atom %zu: element %s (Z = %d) is not in the model", i,
                            sym ? sym : "?", s->numbers[i]);
        }
        types[i] = t;
        for (int a = 0; a < 3; a++)
            if (!isfinite(s->positions[3 * i + a]))
                return ecn_fail(err, ERR_LEN, ECENET_ERR_INPUT,
                                "atom %zu has a non-finite position", i);
    }
    if (s->cell)
        for (int k = 0; k < 9; k++)
            if (!isfinite(s->cell[k]))
                return ecn_fail(err, ERR_LEN, ECENET_ERR_INPUT, "the cell has a non-finite entry");
    if (o->forces && o->forces_len != 3 * n)
        return ecn_fail(err, ERR_LEN, ECENET_ERR_ARGUMENT,
                        "forces buffer has length %zu, expected 3*n_atoms = %zu", o->forces_len,
                        3 * n);
    if (o->atom_energies && o->atom_energies_len != n)
        return ecn_fail(err, ERR_LEN, ECENET_ERR_ARGUMENT,
                        "atom_energies buffer has length %zu, expected n_atoms = %zu",
                        o->atom_energies_len, n);
    if (o->dE_dstrain && o->dE_dstrain_len != 9)
        return ecn_fail(err, ERR_LEN, ECENET_ERR_ARGUMENT,
                        "dE_dstrain buffer has length %zu, expected 9", o->dE_dstrain_len);
    if (o->stress) {
        if (o->stress_len != 6)
            return ecn_fail(err, ERR_LEN, ECENET_ERR_ARGUMENT,
                            "stress buffer has length %zu, expected 6", o->stress_len);
        if (!s->cell)
            return ecn_fail(err, ERR_LEN, ECENET_ERR_INPUT,
                            "stress requested but the system has no cell");
        const double vol = fabs(det3(s->cell));
        if (!(vol >= 1e-12))
            return ecn_fail(err, ERR_LEN, ECENET_ERR_INPUT,
                            "stress requested but the cell's volume is %g Å^3 (below 1e-12 Å^3: "
                            "a degenerate or zero lattice)",
                            vol);
    }
    return ECENET_OK;
}

/* A NaN or an infinity fails the compute before any output is written,
 * naming the first one: an MD code would otherwise integrate it. (fp32
 * cannot tell apart atoms closer than its resolution at their coordinates,
 * though the fp64 coincidence check passed; a model with extreme parameters
 * overflows.) The energy is checked even when not asked for: forces of a
 * non-finite energy mean nothing. */
static ecenet_status check_finite(ecenet_ctx *ctx, const ecenet_system *s, const double *pos,
                                  double energy, const double *grad, const double *virial,
                                  const double *per_edge, const ecn_graph *g)
{
    static const char *const dir = "xyz";
    if (!isfinite(energy)) {
        /* the closest pair of the edge list (host searches only): fp32
         * cannot resolve atoms that the fp64 coincidence check lets through */
        char near[160] = "";
        int64_t best = -1;
        double rmin = INFINITY;
        for (int64_t e = 0; e < g->edges.n; e++) {
            const double *a = &pos[3 * (size_t)g->edges.src[e]],
                         *b = &pos[3 * (size_t)g->edges.dst[e]], *t = &g->edges.shift[3 * e];
            double r2 = 0.0;
            for (int c = 0; c < 3; c++)
                r2 += (b[c] - a[c] + t[c]) * (b[c] - a[c] + t[c]);
            if (r2 < rmin) {
                rmin = r2;
                best = e;
            }
        }
        if (best >= 0)
            snprintf(near, sizeof near, "; the closest atoms, %d and %d, are %.3g Å apart",
                     (int)g->edges.src[best], (int)g->edges.dst[best], sqrt(rmin));
        return ecn_fail(ctx->err, ERR_LEN, ECENET_ERR_NONFINITE,
                        "the energy is not finite (%g)%s; no output written", energy, near);
    }
    if (grad)
        for (size_t k = 0; k < 3 * s->n_atoms; k++)
            if (!isfinite(grad[k])) {
                const char *sym = ecenet_element_symbol(s->numbers[k / 3]);
                return ecn_fail(ctx->err, ERR_LEN, ECENET_ERR_NONFINITE,
                                "the force on atom %zu (%s), component %c, is not finite (%g); no "
                                "output written",
                                k / 3, sym ? sym : "?", dir[k % 3], -grad[k]);
            }
    if (virial)
        for (int k = 0; k < 9; k++)
            if (!isfinite(virial[k]))
                return ecn_fail(
                    ctx->err, ERR_LEN, ECENET_ERR_NONFINITE,
                    "the stress (dE/dstrain %c%c) is not finite (%g); no output written",
                    dir[k / 3], dir[k % 3], virial[k]);
    if (per_edge)
        for (int64_t e = 0; e < g->edges.n; e++)
            if (!isfinite(per_edge[e]))
                return ecn_fail(
                    ctx->err, ERR_LEN, ECENET_ERR_NONFINITE,
                    "the energy of the edge from atom %d to atom %d is not finite (%g); "
                    "no output written",
                    (int)g->edges.src[e], (int)g->edges.dst[e], per_edge[e]);
    return ECENET_OK;
}

ecenet_status ecenet_compute(ecenet_ctx *ctx, const ecenet_system *s, const ecenet_outputs *o)
{
    if (!ctx)
        return ECENET_ERR_ARGUMENT;
    ctx->err[0] = '\0';
    if (!s || !o)
        return ecn_fail(ctx->err, ERR_LEN, ECENET_ERR_ARGUMENT, "system or outputs is NULL");
    const ecenet_model *m = ctx->model;
    const size_t n = s->n_atoms;
    /* before any buffer of n is sized: (3n + 1) doubles must not wrap */
    if (n > (size_t)INT32_MAX / 4)
        return ecn_fail(ctx->err, ERR_LEN, ECENET_ERR_UNSUPPORTED,
                        "too many atoms (%zu; this build's limit is %d)", n, INT32_MAX / 4);
    if (ctx_reserve(ctx, n) != 0)
        return ecn_fail(ctx->err, ERR_LEN, ECENET_ERR_NOMEM, "out of memory");
    int32_t *types = ctx->types;
    double *grad = ctx->grad, *pos = ctx->pos;
    double virial[9];
    ecn_graph *g = &ctx->graph;
    double *per_edge = NULL;
    ecenet_status st = check_args(ctx, s, o, types);
    const ecenet_backend *be = ecn_engine_backend(ctx->engine);
    const int nopbc[3] = {0, 0, 0};
    const int *pbc = s && s->cell ? s->pbc : nopbc;
    if (st == ECENET_OK)
        ecn_graph_recentre(n, s->positions, s->cell, pbc, pos);
    /* the device search where the backend has one (ops.h), else the host's */
    ecenet_nlist setup;
    int dev = st == ECENET_OK && ctx->device_nlist && ecn_backend_has_nlist(be) &&
              !o->atom_energies && n > 0;
    if (st == ECENET_OK && dev) {
        st = ecn_graph_setup(n, pos, s->cell, pbc, m->cfg.r_cut_edge,
                             m->cfg.r_cut_neighbor, g, &setup, ctx->err, ERR_LEN);
        dev = setup.n >= 0; /* a skewed cell: g holds the host's lists (graph.h) */
    } else if (st == ECENET_OK)
        st = ecn_graph_rebuild(n, pos, s->cell, pbc, m->cfg.r_cut_edge,
                               m->cfg.r_cut_neighbor, g, ctx->err, ERR_LEN);
    if (st == ECENET_OK && o->atom_energies) {
        per_edge = malloc((size_t)(g->edges.n + 1) * sizeof *per_edge);
        if (!per_edge)
            st = ecn_fail(ctx->err, ERR_LEN, ECENET_ERR_NOMEM, "out of memory");
    }
    ecn_step_out so;
    memset(&so, 0, sizeof so);
    if (st == ECENET_OK) {
        ecn_step_in si = {n, pos, types, dev ? NULL : g, dev ? &setup : NULL};
        so.per_edge = per_edge;
        so.grad = (o->forces) ? grad : NULL;
        so.virial = (o->stress || o->dE_dstrain) ? virial : NULL;
        st = ecn_step(ctx->engine, &si, &so, ctx->err, ERR_LEN);
        if (st != ECENET_OK && so.nlist_fallback) {
            /* the host search names the coincident atoms (or the overflow);
             * should it find nothing wrong, the step runs on its lists */
            ctx->err[0] = '\0';
            st = ecn_graph_rebuild(n, pos, s->cell, pbc, m->cfg.r_cut_edge,
                                   m->cfg.r_cut_neighbor, g, ctx->err, ERR_LEN);
            if (st == ECENET_OK) {
                si.graph = g;
                si.nlist = NULL;
                st = ecn_step(ctx->engine, &si, &so, ctx->err, ERR_LEN);
            }
        }
    }
    /* model units -> eV (SPEC §14.3) */
    const double u = m->unit;
    double energy = 0.0;
    if (st == ECENET_OK) {
        double eref = 0.0;
        for (size_t i = 0; i < n; i++)
            eref += m->e_ref[types[i]];
        energy = u * so.energy + u * m->energy_mean + eref;
        st = check_finite(ctx, s, pos, energy, so.grad, so.virial, per_edge, g);
    }
    if (st == ECENET_OK) {
        if (o->energy)
            *o->energy = energy;
        if (o->forces)
            for (size_t k = 0; k < 3 * n; k++)
                o->forces[k] = -u * grad[k];
        if (o->dE_dstrain)
            for (int k = 0; k < 9; k++)
                o->dE_dstrain[k] = u * virial[k];
        if (o->stress) {
            /* Voigt xx yy zz yz xz xy from the upper triangle (ECENet's calculator) */
            const double V = fabs(det3(s->cell));
            static const int vi[6] = {0, 4, 8, 5, 2, 1};
            for (int k = 0; k < 6; k++)
                o->stress[k] = u * virial[vi[k]] / V;
        }
        if (o->atom_energies) {
            for (size_t i = 0; i < n; i++)
                o->atom_energies[i] = u * (m->atomic_energy[types[i]] + m->energy_mean / (double)n) +
                                      m->e_ref[types[i]];
            for (int64_t e = 0; e < g->edges.n; e++) {
                o->atom_energies[g->edges.src[e]] += 0.5 * u * per_edge[e];
                o->atom_energies[g->edges.dst[e]] += 0.5 * u * per_edge[e];
            }
        }
    }
    free(per_edge);
    return st;
}
