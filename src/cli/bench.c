/* `ecenet bench`: forward and joint energy+forces step timings of several
 * backends/precisions side by side, in one process, on a synthetic rattled
 * diamond box with a random-weight model of a named configuration (or a
 * model file). Medians over --n-time runs after --n-warmup. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "backend.h"
#include "commands.h"
#include "graph.h"
#include "model.h"
#include "step.h"
#include "synth.h"

const char ecn_bench_usage[] =
    "usage: ecenet bench [--config bench|small | --model FILE] [--diamond N]\n"
    "                    [--backend LIST] [--n-warmup K] [--n-time K] [--seed S]\n"
    "                    [--chunk-edges N]\n"
    "\n"
    "Times the forward (energy) and the joint energy+forces step of each\n"
    "backend in LIST (comma separated NAME[:f64|f32|tf32][+lowmem][+nlist|+hostnl],\n"
    "default: every compiled backend in every precision it has; tf32 = f32 with\n"
    "TF32 GEMMs, +lowmem = the low-memory mode; by default the neighbour list is\n"
    "built once, outside the timing; +nlist = each timed step searches it again,\n"
    "on the device where the backend can (cuda), else on the host; +hostnl = each\n"
    "timed step searches on the host and uploads the lists) on a rattled N×N×N\n"
    "cubic diamond box\n"
    "(a = 3.567 A, sigma = 0.05 A, seeded), side by side in one process. Prints\n"
    "medians, ns per edge, parameter and workspace memory (work: the joint step's;\n"
    "fwd work: what the forward alone needs), and ratios against the first\n"
    "backend. Threads: OMP_NUM_THREADS. No model file or data needed.\n"
    "\n"
    "  --config NAME    bench: l_max 3, m_max 3, n_max 4, embed_dim 32, n_layers 5,\n"
    "                   n_mp 2, r_cut 5.0/4.0, silu (default); small: a quick one\n"
    "  --model FILE     a model file instead (its elements must include C)\n"
    "  --diamond N      box of N^3 cubic cells (default 3: 216 atoms)\n"
    "  --n-warmup K     untimed runs per backend (default 1)\n"
    "  --n-time K       timed runs per backend (default 3)\n"
    "  --seed S         seed of the weights and the rattle (default 1)\n"
    "  --chunk-edges N  edges per chunk of the +lowmem rows (default 0: automatic)\n";

#define MAX_RUNS 64

typedef struct {
    char name[32];
    int prec, tf32, lowmem, nl; /* nl: 0 graph built once, 1 +nlist, 2 +hostnl */
    double fwd, joint, energy, fmax_diff;
    size_t params, ws, ws_fwd; /* ws_fwd: the workspace after the forward steps alone */
    int ok;
    char err[512];
} bench_row;

/* What the numbers depend on beyond the table: the library, when, the
 * ECENET_* settings in the environment (they select kernels), and the device
 * of each backend that names one, so that a pasted log says where it ran
 * (commands.h; bench and profile print it). */
void ecn_cli_run_info(const struct ecenet_backend *const *bes, int n)
{
    extern char **environ;
    char when[64] = "(unknown time)";
    const time_t t = time(NULL);
    struct tm tm;
    if (gmtime_r(&t, &tm))
        strftime(when, sizeof when, "%Y-%m-%d %H:%M UTC", &tm);
    printf("  libecenet %s, %s; environment:", ecenet_version(), when);
    int any = 0;
    for (char **e = environ; e && *e; e++)
        if (!strncmp(*e, "ECENET_", 7)) {
            printf(" %s", *e);
            any = 1;
        }
    printf("%s\n", any ? "" : " no ECENET_* variables");
    for (int k = 0; k < n; k++) {
        int seen = !bes[k] || !bes[k]->device;
        for (int j = 0; j < k && !seen; j++)
            seen = bes[j] && !strcmp(bes[j]->name, bes[k]->name);
        if (!seen)
            printf("  %s device: %s\n", bes[k]->name, bes[k]->device());
    }
    /* a backend's own stage chunk changes how the step runs (step.c):
     * say so where the environment does not set it */
    const char *sc = getenv("ECENET_STAGE_CHUNK");
    for (int k = 0; k < n && !(sc && *sc); k++) {
        int seen = !bes[k] || bes[k]->stage_chunk <= 0;
        for (int j = 0; j < k && !seen; j++)
            seen = bes[j] == bes[k];
        if (!seen)
            printf("  %s %s: in the default mode a stage's layers run %lld edges at a time (the "
                   "backend's default; ECENET_STAGE_CHUNK=0: all edges at once)\n",
                   bes[k]->name, bes[k]->precision == ECENET_F64 ? "f64" : "f32",
                   (long long)bes[k]->stage_chunk);
    }
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* commands.h */
int ecn_cli_parse_int(const char *s, int lo, int hi, int *out)
{
    char *end;
    long v = strtol(s, &end, 10);
    if (!*s || *end || v < lo || v > hi)
        return -1;
    *out = (int)v;
    return 0;
}

int ecn_cli_is_one_of(const char *s, const char *const *names)
{
    for (; *names; names++)
        if (!strcmp(s, *names))
            return 1;
    return 0;
}

int ecn_cli_check_valued(const char *cmd, const char *a, const char *v,
                         const char *const *valued, const char *usage)
{
    if (!ecn_cli_is_one_of(a, valued))
        return ecn_cli_opt_error(cmd, a, NULL, "is not an option", usage);
    return v ? 0 : ecn_cli_opt_error(cmd, a, NULL, "needs a value", usage);
}

const char *ecn_cli_precision_why(const char *s, ecenet_precision *p)
{
    if (!strcmp(s, "f64") || !strcmp(s, "fp64") || !strcmp(s, "double"))
        *p = ECENET_F64;
    else if (!strcmp(s, "f32") || !strcmp(s, "fp32") || !strcmp(s, "float"))
        *p = ECENET_F32;
    else
        return "is neither f64 nor f32";
    return NULL;
}

const char *ecn_cli_int_why(const char *s, int lo, int hi, int *out, char *buf, size_t len)
{
    if (ecn_cli_parse_int(s, lo, hi, out) == 0)
        return NULL;
    snprintf(buf, len, "is not an integer in [%d, %d]", lo, hi);
    return buf;
}

int ecn_cli_opt_error(const char *cmd, const char *opt, const char *val, const char *why,
                      const char *usage)
{
    if (val)
        fprintf(stderr, "ecenet %s: %s '%s' %s\n%s", cmd, opt, val, why, usage);
    else
        fprintf(stderr, "ecenet %s: %s %s\n%s", cmd, opt, why, usage);
    return 2;
}

/* One backend: median forward and joint times; forces kept for comparison. */
static void run_one(bench_row *row, const ecenet_model *m, const ecn_graph *g, size_t n,
                    const double *pos, const double *cell, const int32_t *types, int n_warmup,
                    int n_time, int chunk, double *forces)
{
    const ecenet_backend *be = ecn_backend_get(row->name, row->prec);
    if (!be) {
        char why[256];
        ecn_backend_why(row->name, why, sizeof why);
        snprintf(row->err, sizeof row->err, "backend '%.31s' (%s) %s", row->name,
                 row->prec == ECENET_F64 ? "f64" : "f32", why);
        return;
    }
    ecn_engine *eng = NULL;
    if (ecn_engine_create(m, be, &eng, row->err, sizeof row->err) != ECENET_OK)
        return;
    if (row->tf32 && ecn_engine_set_tf32(eng, 1) != 0) {
        snprintf(row->err, sizeof row->err, "backend '%.31s' (f32) has no TF32 mode", row->name);
        ecn_engine_free(eng);
        return;
    }
    ecn_engine_set_low_memory(eng, row->lowmem, chunk);
    double tf[MAX_RUNS], tj[MAX_RUNS];
    ecn_step_in in = {n, pos, types, g, NULL};
    /* +nlist / +hostnl: the search inside every timed step, on a graph of
     * this row's own (memory reused from step to step, as in an MD loop) */
    const int pbc[3] = {1, 1, 1};
    const double rce = m->cfg.r_cut_edge, rcn = m->cfg.r_cut_neighbor;
    const int dev = row->nl == 1 && ecn_backend_has_nlist(be);
    ecn_graph own;
    ecenet_nlist setup;
    memset(&own, 0, sizeof own);
    for (int joint = 0; joint < 2; joint++) {
        for (int it = 0; it < n_warmup + n_time; it++) {
            ecn_step_out out;
            memset(&out, 0, sizeof out);
            out.grad = joint ? forces : NULL;
            double t0 = ecn_synth_now();
            ecenet_status st = ECENET_OK;
            if (dev) { /* a skewed cell: own holds the host's lists (graph.h) */
                st = ecn_graph_setup(n, pos, cell, pbc, rce, rcn, &own, &setup, row->err,
                                     sizeof row->err);
                in.graph = setup.n < 0 ? &own : NULL;
                in.nlist = setup.n < 0 ? NULL : &setup;
            } else if (row->nl) { /* +hostnl */
                st = ecn_graph_rebuild(n, pos, cell, pbc, rce, rcn, &own, row->err,
                                       sizeof row->err);
                in.graph = &own;
            }
            if (st == ECENET_OK)
                st = ecn_step(eng, &in, &out, row->err, sizeof row->err);
            if (st != ECENET_OK) {
                ecn_graph_free(&own);
                ecn_engine_free(eng);
                return;
            }
            double t = ecn_synth_now() - t0;
            if (it >= n_warmup)
                (joint ? tj : tf)[it - n_warmup] = t;
            row->energy = out.energy;
        }
        if (!joint) /* the arena only grows: what an energy-only run needs */
            row->ws_fwd = ecn_engine_workspace_bytes(eng);
    }
    row->fwd = median(tf, n_time);
    row->joint = median(tj, n_time);
    row->params = ecn_engine_param_bytes(eng);
    row->ws = ecn_engine_workspace_bytes(eng);
    row->ok = 1;
    ecn_graph_free(&own);
    ecn_engine_free(eng);
}

int ecn_cmd_bench(int argc, char **argv)
{
    const char *config = "bench", *model_path = NULL, *list = NULL;
    int ndia = 3, n_warmup = 1, n_time = 3, seed = 1, chunk = 0;
    static const char *const valued[] = {"--config", "--model",  "--backend", "--diamond",
                                         "--n-warmup", "--n-time", "--seed", "--chunk-edges",
                                         NULL};
    for (int k = 1; k < argc; k++) {
        const char *a = argv[k], *v = k + 1 < argc ? argv[k + 1] : NULL;
        const char *why = NULL;
        char buf[64];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            fputs(ecn_bench_usage, stdout);
            return 0;
        } else if (ecn_cli_check_valued("bench", a, v, valued, ecn_bench_usage)) {
            return 2;
        } else if (!strcmp(a, "--config")) {
            config = v;
        } else if (!strcmp(a, "--model")) {
            model_path = v;
        } else if (!strcmp(a, "--backend")) {
            list = v;
        } else if (!strcmp(a, "--diamond")) {
            why = ecn_cli_int_why(v, 1, 100, &ndia, buf, sizeof buf);
        } else if (!strcmp(a, "--n-warmup")) {
            why = ecn_cli_int_why(v, 0, 1000, &n_warmup, buf, sizeof buf);
        } else if (!strcmp(a, "--n-time")) {
            why = ecn_cli_int_why(v, 1, MAX_RUNS, &n_time, buf, sizeof buf);
        } else if (!strcmp(a, "--seed")) {
            why = ecn_cli_int_why(v, 0, 1 << 30, &seed, buf, sizeof buf);
        } else {
            why = ecn_cli_int_why(v, 0, 1 << 30, &chunk, buf, sizeof buf); /* --chunk-edges */
        }
        if (why)
            return ecn_cli_opt_error("bench", a, v, why, ecn_bench_usage);
        k++;
    }

    char err[1024];
    ecenet_model *m = NULL;
    ecn_config cfg;
    if (model_path) {
        if (ecenet_model_load(model_path, &m, err, sizeof err) != ECENET_OK) {
            fprintf(stderr, "ecenet bench: %s\n", err);
            return 1;
        }
        config = model_path;
    } else {
        if (ecn_synth_config(config, &cfg) != 0) {
            fprintf(stderr, "ecenet bench: unknown config '%s' (bench, small)\n", config);
            return 2;
        }
        if (ecn_synth_model(&cfg, (uint64_t)seed, &m, err, sizeof err) != ECENET_OK) {
            fprintf(stderr, "ecenet bench: %s\n", err);
            return 1;
        }
    }
    const int carbon = ecenet_model_type_of(m, 6);
    if (carbon < 0) {
        fprintf(stderr, "ecenet bench: model %s has no carbon type\n", config);
        ecenet_model_free(m);
        return 1;
    }

    size_t n = 0;
    double *pos = NULL, cell[9];
    int *numbers = NULL;
    if (ecn_synth_diamond(ndia, 0.05, (uint64_t)seed, &n, &pos, &numbers, cell) != 0) {
        fprintf(stderr, "ecenet bench: cannot build the diamond box\n");
        ecenet_model_free(m);
        return 1;
    }
    int32_t *types = malloc(n * sizeof *types);
    double *forces = malloc(3 * n * sizeof *forces), *f0 = malloc(3 * n * sizeof *f0);
    ecn_graph g;
    memset(&g, 0, sizeof g);
    const int pbc[3] = {1, 1, 1};
    int rc = 1;
    if (!types || !forces || !f0)
        goto done;
    for (size_t i = 0; i < n; i++)
        types[i] = carbon;
    double t0 = ecn_synth_now();
    if (ecn_graph_build(n, pos, cell, pbc, m->cfg.r_cut_edge, m->cfg.r_cut_neighbor, &g, err,
                        sizeof err) != ECENET_OK) {
        fprintf(stderr, "ecenet bench: %s\n", err);
        goto done;
    }
    double t_graph = ecn_synth_now() - t0;

    /* backends */
    bench_row rows[16];
    int nrows = 0;
    char buf[512];
    snprintf(buf, sizeof buf, "%s", list ? list : "");
    if (!list) { /* every compiled backend and precision */
        const char *names = ecn_backend_names();
        snprintf(buf, sizeof buf, "%s", names);
    }
    if (list && strlen(list) >= sizeof buf) {
        fprintf(stderr, "ecenet bench: --backend list longer than %zu characters\n",
                sizeof buf - 1);
        rc = 2;
        goto done;
    }
    for (char *tok = strtok(buf, ","); tok; tok = strtok(NULL, ",")) {
        char *plus = strchr(tok, '+'), *mode = plus ? plus + 1 : NULL;
        int lowmem = 0, tf32 = 0, nl = 0;
        if (plus)
            *plus = '\0';
        while (mode) {
            char *next = strchr(mode, '+');
            if (next)
                *next++ = '\0';
            if (!strcmp(mode, "lowmem")) {
                lowmem = 1;
            } else if (!strcmp(mode, "nlist") && !nl) {
                nl = 1;
            } else if (!strcmp(mode, "hostnl") && !nl) {
                nl = 2;
            } else {
                fprintf(stderr, "ecenet bench: bad mode '+%s' (+lowmem, +nlist or +hostnl)\n",
                        mode);
                rc = 2;
                goto done;
            }
            mode = next;
        }
        char *colon = strchr(tok, ':');
        int precs[2] = {ECENET_F64, ECENET_F32}, np = 2;
        if (colon) {
            *colon = '\0';
            if (!strcmp(colon + 1, "f64"))
                np = 1;
            else if (!strcmp(colon + 1, "f32"))
                precs[0] = ECENET_F32, np = 1;
            else if (!strcmp(colon + 1, "tf32"))
                precs[0] = ECENET_F32, np = 1, tf32 = 1;
            else {
                fprintf(stderr, "ecenet bench: bad precision '%s' (f64, f32, tf32)\n", colon + 1);
                rc = 2;
                goto done;
            }
        } else if (list) {
            np = 1; /* a named backend without precision: f64 */
        }
        for (int q = 0; q < np; q++) {
            if (!list && !ecn_backend_get(tok, precs[q]))
                continue;
            if (nrows == (int)(sizeof rows / sizeof rows[0])) {
                fprintf(stderr, "ecenet bench: --backend names more than %d rows\n", nrows);
                rc = 2;
                goto done;
            }
            memset(&rows[nrows], 0, sizeof rows[nrows]);
            snprintf(rows[nrows].name, sizeof rows[nrows].name, "%s", tok);
            rows[nrows].prec = precs[q];
            rows[nrows].tf32 = tf32;
            rows[nrows].lowmem = lowmem;
            rows[nrows].nl = nl;
            nrows++;
        }
    }

    if (nrows == 0) {
        fprintf(stderr, "ecenet bench: --backend '%s' names no backend\n", list ? list : "");
        rc = 2;
        goto done;
    }
    const ecn_config *c = &m->cfg;
    printf("ecenet bench: model %s (l_max %d, m_max %d, embed_dim %d, F %d, n_layers %d, "
           "n_mp %d)\n",
           config, c->l_max, c->m_max, c->embed_dim, c->F, c->n_layers, c->n_mp);
    printf("  structure: diamond %d^3 (%zu atoms, %lld edges, %lld neighbour pairs); "
           "neighbour list %.3f s\n",
           ndia, n, (long long)g.edges.n, (long long)g.nb.n, t_graph);
    const char *omp = getenv("OMP_NUM_THREADS");
    printf("  medians of %d runs after %d warm-up; OMP_NUM_THREADS=%s\n", n_time, n_warmup,
           omp ? omp : "(unset)");
    const ecenet_backend *bes[sizeof rows / sizeof rows[0]];
    for (int k = 0; k < nrows; k++)
        bes[k] = ecn_backend_get(rows[k].name, rows[k].prec);
    ecn_cli_run_info(bes, nrows);
    printf("\n");
    printf("%-8s %-11s %12s %12s %10s %10s %10s %12s %8s %8s %11s %11s\n", "backend", "prec",
           "forward[s]", "joint[s]", "ns/edge", "params[MB]", "work[MB]", "fwd work[MB]", "x fwd",
           "x joint", "dE/E 1st", "dF/Fmax 1st");
    int failed = 0;
    for (int k = 0; k < nrows; k++) {
        bench_row *r = &rows[k];
        run_one(r, m, &g, n, pos, cell, types, n_warmup, n_time, chunk, k == 0 ? f0 : forces);
        char pn[32];
        snprintf(pn, sizeof pn, "%s%s%s", r->prec == ECENET_F64 ? "f64" : r->tf32 ? "tf32" : "f32",
                 r->lowmem ? "+lowmem" : "", r->nl == 1 ? "+nlist" : r->nl == 2 ? "+hostnl" : "");
        if (!r->ok) {
            printf("%-8s %-11s  failed: %s\n", r->name, pn, r->err);
            failed++;
            continue;
        }
        /* agreement with the first row: a sanity check of every timed result */
        double e_rel = NAN, f_rel = NAN;
        if (rows[0].ok) {
            double fm = 0.0, fd = 0.0;
            for (size_t q = 0; q < 3 * n; q++) {
                fm = fmax(fm, fabs(f0[q]));
                fd = fmax(fd, fabs((k ? forces[q] : f0[q]) - f0[q]));
            }
            e_rel = fabs(r->energy - rows[0].energy) / fmax(fabs(rows[0].energy), 1e-300);
            f_rel = fd / fmax(fm, 1e-300);
        }
        printf("%-8s %-11s %12.4f %12.4f %10.1f %10.1f %10.1f %12.1f %8.2f %8.2f %11.2e %11.2e\n",
               r->name, pn, r->fwd, r->joint, 1e9 * r->joint / (double)(g.edges.n ? g.edges.n : 1),
               r->params / 1e6, r->ws / 1e6, r->ws_fwd / 1e6, rows[0].ok ? rows[0].fwd / r->fwd : NAN,
               rows[0].ok ? rows[0].joint / r->joint : NAN, e_rel, f_rel);
    }
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) == 0)
        printf("\npeak resident memory of the process: %.1f MiB\n", ru.ru_maxrss / 1024.0);
    printf("x = speed-up relative to the first row (higher is faster)\n");
    rc = 0;
    if (failed) { /* the table is complete; the status says it is not all there */
        fprintf(stderr, "ecenet bench: %d of %d rows failed\n", failed, nrows);
        rc = 1;
    }
done:
    ecn_graph_free(&g);
    free(types);
    free(forces);
    free(f0);
    free(pos);
    free(numbers);
    ecenet_model_free(m);
    return rc;
}
