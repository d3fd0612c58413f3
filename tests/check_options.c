/* Per-context options (ecenet_ctx_set_option):
 *  - low-memory mode: the layers recomputed in edge chunks in the backward
 *    give the default mode's energy, forces, stress and atom energies, on
 *    every golden case (public, distance embedding, research attention MP with
 *    FiLM and bottlenecks), every backend compiled in, several chunk sizes;
 *    and its workspace is smaller;
 *  - the TF32 switch is refused with a message where it cannot apply, bad
 *    values and unknown options are refused, and nothing changes on failure. */
#define _POSIX_C_SOURCE 200809L
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "ecenet.h"
#include "engine.h"
#include "graph.h"
#include "step.h"
#include "test_util.h"

#define MAXN 512

typedef struct {
    size_t n;
    double pos[3 * MAXN], cell[9];
    int z[MAXN];
    int periodic;
} structure;

typedef struct {
    double e, f[3 * MAXN], s[6], ae[MAXN];
} result;

static void golden_structure(const char *name, structure *s)
{
    memset(s, 0, sizeof *s);
    s->n = tu_golden_structure(name, MAXN, s->pos, s->z, s->cell, &s->periodic);
}

static void compute(ecenet_ctx *ctx, const structure *s, result *r)
{
    ecenet_system sys = {s->n, s->pos, s->z, s->periodic ? s->cell : NULL, {1, 1, 1}};
    ecenet_outputs o;
    memset(&o, 0, sizeof o);
    o.energy = &r->e;
    o.forces = r->f;
    o.forces_len = 3 * s->n;
    o.atom_energies = r->ae;
    o.atom_energies_len = s->n;
    if (s->periodic) {
        o.stress = r->s;
        o.stress_len = 6;
    }
    ck_assert_msg(ecenet_compute(ctx, &sys, &o) == ECENET_OK, "%s", ecenet_ctx_error(ctx));
}

/* the energy alone (a step without a backward) */
static double energy_only(ecenet_ctx *ctx, const structure *s)
{
    ecenet_system sys = {s->n, s->pos, s->z, s->periodic ? s->cell : NULL, {1, 1, 1}};
    ecenet_outputs o;
    double e = 0.0;
    memset(&o, 0, sizeof o);
    o.energy = &e;
    ck_assert_msg(ecenet_compute(ctx, &sys, &o) == ECENET_OK, "%s", ecenet_ctx_error(ctx));
    return e;
}

/* max |a - b| over everything, relative to the largest |b| of each output */
static double worst_rel(const result *a, const result *b, const structure *s)
{
    double w = fabs(a->e - b->e) / fmax(fabs(b->e), 1e-300);
    w = fmax(w, tu_max_abs_diff(a->f, b->f, 3 * s->n) / fmax(tu_max_abs(b->f, 3 * s->n), 1e-300));
    w = fmax(w, tu_max_abs_diff(a->ae, b->ae, s->n) / fmax(tu_max_abs(b->ae, s->n), 1e-300));
    if (s->periodic)
        w = fmax(w, tu_max_abs_diff(a->s, b->s, 6) / fmax(tu_max_abs(b->s, 6), 1e-300));
    return w;
}

static const char *CASES[] = {"diamond", "options", "ethanol", "thglab_softmax", "thglab_sum_pbc"};
static const struct {
    const char *name;
    ecenet_precision prec;
    double tol; /* low memory vs default, worst relative difference */
} BACKENDS[] = {
    /* Same ops on the same numbers in another grouping of the edges. ref gives
     * the same bits (measured 0 on every case); omp's BLIS kernels block the
     * rows differently for other row counts, which moves the last bits. */
    {"ref", ECENET_F64, 0.0},
    {"omp", ECENET_F64, 1e-13},
    {"omp", ECENET_F32, 1e-5},
    /* cuBLAS may pick another kernel for another number of rows */
    {"cuda", ECENET_F64, 1e-12},
    {"cuda", ECENET_F32, 1e-5},
};
static const long CHUNKS[] = {1, 7, 64, 0};

START_TEST(test_low_memory_same_results)
{
    const int c = _i;
    ecenet_model *m = tu_golden_model(CASES[c]);
    structure s;
    golden_structure(CASES[c], &s);
    for (size_t b = 0; b < sizeof BACKENDS / sizeof BACKENDS[0]; b++) {
        char err[1024];
        ecenet_ctx *ctx = NULL;
        if (ecenet_ctx_create(m, BACKENDS[b].name, BACKENDS[b].prec, &ctx, err, sizeof err) !=
            ECENET_OK) {
            printf("skip: %s %s: %s\n", BACKENDS[b].name,
                   BACKENDS[b].prec == ECENET_F64 ? "f64" : "f32", err);
            continue;
        }
        result r0, r1;
        compute(ctx, &s, &r0);
        ck_assert_int_eq(ecenet_ctx_set_option(ctx, ECENET_OPT_LOW_MEMORY, 1), ECENET_OK);
        for (size_t k = 0; k < sizeof CHUNKS / sizeof CHUNKS[0]; k++) {
            ck_assert_int_eq(ecenet_ctx_set_option(ctx, ECENET_OPT_CHUNK_EDGES, CHUNKS[k]),
                             ECENET_OK);
            compute(ctx, &s, &r1);
            const double d = worst_rel(&r1, &r0, &s);
            printf("%s %s %s chunk %ld: low memory vs default worst rel diff %.3g\n", CASES[c],
                   BACKENDS[b].name, BACKENDS[b].prec == ECENET_F64 ? "f64" : "f32", CHUNKS[k],
                   d);
            ck_assert_msg(d <= BACKENDS[b].tol, "%s %s chunk %ld: %.3g > %.3g", CASES[c],
                          BACKENDS[b].name, CHUNKS[k], d, BACKENDS[b].tol);
        }
        /* and back: the default mode again gives the first result bit for bit */
        ck_assert_int_eq(ecenet_ctx_set_option(ctx, ECENET_OPT_LOW_MEMORY, 0), ECENET_OK);
        compute(ctx, &s, &r1);
        ck_assert_msg(worst_rel(&r1, &r0, &s) == 0.0, "%s %s: default mode changed", CASES[c],
                      BACKENDS[b].name);
        ecenet_ctx_free(ctx);
    }
    ecenet_model_free(m);
}
END_TEST

/* The user's ECENET_STAGE_CHUNK, kept while the tests set their own (a
 * copy: setenv may free the string getenv returned) and put back after */
static char *env_save(const char *name)
{
    const char *v = getenv(name);
    return v ? strdup(v) : NULL;
}
static void env_restore(const char *name, char *saved)
{
    if (saved)
        ck_assert_int_eq(setenv(name, saved, 1), 0);
    else
        unsetenv(name);
    free(saved);
}

/* ECENET_STAGE_CHUNK (read when a context is created, step.c stage_fwd): the
 * default mode runs each stage's layers chunk by chunk of edges; the same
 * ops on the same edges, so the same results as all edges at once (=0),
 * within the tolerances of the low-memory mode (the same regrouping of the
 * rows). Unset, the backend's own default (cuda fp64: 8192 edges, which
 * chunks the diamond case's 19,220 edges) is checked the same way. */
START_TEST(test_stage_chunk_same_results)
{
    const int c = _i;
    ecenet_model *m = tu_golden_model(CASES[c]);
    structure s;
    golden_structure(CASES[c], &s);
    /* below every case's edge count (72 to 19,220); NULL: the backend's default */
    static const char *SC[] = {"7", "37", NULL};
    char *user = env_save("ECENET_STAGE_CHUNK");
    for (size_t b = 0; b < sizeof BACKENDS / sizeof BACKENDS[0]; b++) {
        char err[1024];
        ecenet_ctx *ctx = NULL;
        ck_assert_int_eq(setenv("ECENET_STAGE_CHUNK", "0", 1), 0);
        const ecenet_status st =
            ecenet_ctx_create(m, BACKENDS[b].name, BACKENDS[b].prec, &ctx, err, sizeof err);
        unsetenv("ECENET_STAGE_CHUNK");
        if (st != ECENET_OK)
            continue; /* not compiled in (test_low_memory_same_results says so) */
        result r0, r1;
        compute(ctx, &s, &r0);
        ecenet_ctx_free(ctx);
        for (size_t k = 0; k < sizeof SC / sizeof SC[0]; k++) {
            if (SC[k])
                ck_assert_int_eq(setenv("ECENET_STAGE_CHUNK", SC[k], 1), 0);
            ctx = NULL;
            ck_assert_int_eq(
                ecenet_ctx_create(m, BACKENDS[b].name, BACKENDS[b].prec, &ctx, err, sizeof err),
                ECENET_OK);
            unsetenv("ECENET_STAGE_CHUNK");
            compute(ctx, &s, &r1);
            const double e1 = energy_only(ctx, &s); /* its forward reuses one Z buffer */
            ecenet_ctx_free(ctx);
            const double de = fabs(e1 - r0.e) / fmax(fabs(r0.e), 1e-300);
            const char *sck = SC[k] ? SC[k] : "default";
            ck_assert_msg(de <= BACKENDS[b].tol, "%s %s stage chunk %s, energy alone: %.3g > %.3g",
                          CASES[c], BACKENDS[b].name, sck, de, BACKENDS[b].tol);
            const double d = worst_rel(&r1, &r0, &s);
            printf("%s %s %s stage chunk %s: vs all edges at once worst rel diff %.3g\n",
                   CASES[c], BACKENDS[b].name, BACKENDS[b].prec == ECENET_F64 ? "f64" : "f32",
                   sck, d);
            ck_assert_msg(d <= BACKENDS[b].tol, "%s %s stage chunk %s: %.3g > %.3g", CASES[c],
                          BACKENDS[b].name, sck, d, BACKENDS[b].tol);
        }
    }
    env_restore("ECENET_STAGE_CHUNK", user);
    ecenet_model_free(m);
}
END_TEST

/* Where the stage chunk comes from: the backend's stage_chunk, unless
 * ECENET_STAGE_CHUNK says otherwise (=0: all edges at once); a value that
 * is not a whole number of edges refuses the context with a message naming
 * it. Only the cuda fp64 backend has a default chunk, so a ref backend
 * with one stands in for it here. The chunked results themselves are
 * test_stage_chunk_same_results'. */
START_TEST(test_stage_chunk_source)
{
    ecenet_model *m = tu_golden_model("ethanol");
    char *user = env_save("ECENET_STAGE_CHUNK");
    ecenet_backend be = ecn_ref_backend;
    be.stage_chunk = 7;
    static const struct {
        const char *env; /* NULL: unset */
        int64_t want;
    } OK[] = {{NULL, 7}, {"", 7}, {"0", 0}, {"37", 37}};
    char err[512];
    for (size_t k = 0; k < sizeof OK / sizeof OK[0]; k++) {
        if (OK[k].env)
            ck_assert_int_eq(setenv("ECENET_STAGE_CHUNK", OK[k].env, 1), 0);
        else
            unsetenv("ECENET_STAGE_CHUNK");
        ecn_engine *eng = NULL;
        ck_assert_msg(ecn_engine_create(m, &be, &eng, err, sizeof err) == ECENET_OK, "%s", err);
        ck_assert_msg(eng->stage_chunk == OK[k].want, "ECENET_STAGE_CHUNK=%s: chunk %lld, want %lld",
                      OK[k].env ? OK[k].env : "(unset)", (long long)eng->stage_chunk,
                      (long long)OK[k].want);
        ecn_engine_free(eng);
    }
    static const char *BAD[] = {"8k", "-1", "abc", "1e4", " 12", "99999999999999999999"};
    for (size_t k = 0; k < sizeof BAD / sizeof BAD[0]; k++) {
        ck_assert_int_eq(setenv("ECENET_STAGE_CHUNK", BAD[k], 1), 0);
        ecenet_ctx *ctx = NULL;
        err[0] = 0;
        ck_assert_int_eq(ecenet_ctx_create(m, "ref", ECENET_F64, &ctx, err, sizeof err),
                         ECENET_ERR_ARGUMENT);
        ck_assert_ptr_null(ctx);
        char want[64];
        snprintf(want, sizeof want, "ECENET_STAGE_CHUNK='%s'", BAD[k]);
        ck_assert_msg(strstr(err, want), "'%s': message \"%s\" does not name it", BAD[k], err);
    }
    env_restore("ECENET_STAGE_CHUNK", user);
    ecenet_model_free(m);
}
END_TEST

/* The point of the mode: the workspace no longer holds every layer's output.
 * A public model with 2 stages of 4 layers (8 layer outputs kept by default)
 * on the golden diamond box, through the engine to read the workspace size. */
static size_t workspace_of(const ecenet_model *m, const structure *s, int low_memory)
{
    char err[1024];
    int32_t types[MAXN];
    for (size_t i = 0; i < s->n; i++)
        types[i] = ecenet_model_type_of(m, s->z[i]);
    ecn_graph g;
    const int pbc[3] = {1, 1, 1};
    ck_assert_msg(ecn_graph_build(s->n, s->pos, s->cell, pbc, ecenet_model_cutoff_edge(m),
                                  ecenet_model_cutoff_neighbor(m), &g, err, sizeof err) == ECENET_OK,
                  "%s", err);
    ecn_engine *eng = NULL;
    ck_assert_msg(ecn_engine_create(m, ecn_backend_get("ref", ECENET_F64), &eng, err, sizeof err) ==
                      ECENET_OK,
                  "%s", err);
    ecn_engine_set_low_memory(eng, low_memory, 16);
    double grad[3 * MAXN];
    ecn_step_in in = {s->n, s->pos, types, &g, NULL};
    ecn_step_out out;
    memset(&out, 0, sizeof out);
    out.grad = grad;
    ck_assert_msg(ecn_step(eng, &in, &out, err, sizeof err) == ECENET_OK, "%s", err);
    const size_t ws = ecn_engine_workspace_bytes(eng);
    ecn_engine_free(eng);
    ecn_graph_free(&g);
    return ws;
}

START_TEST(test_low_memory_smaller)
{
    ecenet_model *m = tu_golden_model("diamond");
    structure s;
    golden_structure("diamond", &s);
    const size_t w0 = workspace_of(m, &s, 0), w1 = workspace_of(m, &s, 1);
    printf("diamond workspace: default %zu bytes, low memory (16-edge chunks) %zu bytes\n", w0, w1);
    ck_assert_msg(w1 < w0, "low memory workspace %zu >= default %zu", w1, w0);
    ecenet_model_free(m);
}
END_TEST

START_TEST(test_option_errors)
{
    ecenet_model *m = tu_golden_model("ethanol");
    ecenet_ctx *ctx = NULL;
    char err[1024];
    ck_assert_msg(ecenet_ctx_create(m, "ref", ECENET_F64, &ctx, err, sizeof err) == ECENET_OK, "%s",
                  err);
    ck_assert_int_eq(ecenet_ctx_set_option(NULL, ECENET_OPT_TF32, 1), ECENET_ERR_ARGUMENT);
    ck_assert_int_eq(ecenet_ctx_set_option(ctx, ECENET_OPT_TF32, 1), ECENET_ERR_UNSUPPORTED);
    ck_assert_msg(strstr(ecenet_ctx_error(ctx), "'ref'") &&
                      strstr(ecenet_ctx_error(ctx), "TF32"),
                  "message: %s", ecenet_ctx_error(ctx));
    /* 0 is what ref does: accepted, so that a caller may always set it */
    ck_assert_int_eq(ecenet_ctx_set_option(ctx, ECENET_OPT_TF32, 0), ECENET_OK);
    ck_assert_int_eq(ecenet_ctx_set_option(ctx, ECENET_OPT_LOW_MEMORY, 2), ECENET_ERR_ARGUMENT);
    ck_assert_msg(strstr(ecenet_ctx_error(ctx), "ECENET_OPT_LOW_MEMORY"), "message: %s",
                  ecenet_ctx_error(ctx));
    ck_assert_int_eq(ecenet_ctx_set_option(ctx, ECENET_OPT_CHUNK_EDGES, -1), ECENET_ERR_ARGUMENT);
    /* the device search: 0/1 on every backend (ref always searches on the host) */
    ck_assert_int_eq(ecenet_ctx_set_option(ctx, ECENET_OPT_DEVICE_NLIST, 0), ECENET_OK);
    ck_assert_int_eq(ecenet_ctx_set_option(ctx, ECENET_OPT_DEVICE_NLIST, 1), ECENET_OK);
    ck_assert_int_eq(ecenet_ctx_set_option(ctx, ECENET_OPT_DEVICE_NLIST, 2), ECENET_ERR_ARGUMENT);
    ck_assert_msg(strstr(ecenet_ctx_error(ctx), "ECENET_OPT_DEVICE_NLIST"), "message: %s",
                  ecenet_ctx_error(ctx));
    ck_assert_int_eq(ecenet_ctx_set_option(ctx, (ecenet_option)99, 1), ECENET_ERR_ARGUMENT);
    ck_assert_msg(strstr(ecenet_ctx_error(ctx), "unknown option 99"), "message: %s",
                  ecenet_ctx_error(ctx));
    /* a success clears the message */
    ck_assert_int_eq(ecenet_ctx_set_option(ctx, ECENET_OPT_LOW_MEMORY, 1), ECENET_OK);
    ck_assert_str_eq(ecenet_ctx_error(ctx), "");
    ecenet_ctx_free(ctx);
    ecenet_model_free(m);
}
END_TEST

/* TF32 is a per-context setting although the backend's switch is
 * process-wide: a TF32 context between two computations of a strict-fp32
 * context changes nothing in the latter's bits. Needs a GPU. */
START_TEST(test_tf32_per_context)
{
    ecenet_model *m = tu_golden_model("diamond");
    structure s;
    golden_structure("diamond", &s);
    char err[1024];
    ecenet_ctx *strict = NULL, *tf32 = NULL;
    if (ecenet_ctx_create(m, "cuda", ECENET_F32, &strict, err, sizeof err) != ECENET_OK) {
        printf("skip: TF32 per context: %s\n", err);
        ecenet_model_free(m);
        return;
    }
    ck_assert_msg(ecenet_ctx_create(m, "cuda", ECENET_F32, &tf32, err, sizeof err) == ECENET_OK,
                  "%s", err);
    ck_assert_int_eq(ecenet_ctx_set_option(strict, ECENET_OPT_TF32, 0), ECENET_OK);
    ck_assert_int_eq(ecenet_ctx_set_option(tf32, ECENET_OPT_TF32, 1), ECENET_OK);
    result a, b, c;
    compute(strict, &s, &a);
    compute(tf32, &s, &b);
    compute(strict, &s, &c);
    printf("TF32 vs strict fp32 (diamond): worst rel diff %.3g\n", worst_rel(&b, &a, &s));
    ck_assert_msg(worst_rel(&c, &a, &s) == 0.0, "strict context changed after a TF32 context");
    ck_assert_msg(worst_rel(&b, &a, &s) > 0.0, "TF32 gave the strict fp32 bits: not applied");
    /* TF32 error bound of the cuda issue: 3e-3 */
    ck_assert_msg(worst_rel(&b, &a, &s) < 3e-3, "TF32 vs fp32 %.3g", worst_rel(&b, &a, &s));
    ecenet_ctx_free(strict);
    ecenet_ctx_free(tf32);
    ecenet_model_free(m);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("options");
    TCase *tc = tcase_create("options");
    tcase_set_timeout(tc, TU_HANG_GUARD_S);
    tcase_add_loop_test(tc, test_low_memory_same_results, 0,
                        (int)(sizeof CASES / sizeof CASES[0]));
    tcase_add_loop_test(tc, test_stage_chunk_same_results, 0,
                        (int)(sizeof CASES / sizeof CASES[0]));
    tcase_add_test(tc, test_stage_chunk_source);
    tcase_add_test(tc, test_low_memory_smaller);
    tcase_add_test(tc, test_option_errors);
    tcase_add_test(tc, test_tf32_per_context);
    suite_add_tcase(s, tc);
    return tu_run_suite(s);
}
