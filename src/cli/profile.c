/* `ecenet profile`: where the time of a step goes, section by section and op
 * by op, timed with the backend's own timer hook (every op is bracketed by
 * the backend's sync, so GPU times are not smeared across ops).
 *
 * Every line is a median over --n-time runs after --n-warmup. A fused op gets
 * its own line; the unfused chain it replaces is timed in separate runs with
 * the fused entries switched off and printed as "(unfused ref)", outside the
 * sums, with the max difference between the two paths' outputs. The lines
 * that make up the forward are summed next to the measured forward. */
#define _POSIX_C_SOURCE 200809L
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "commands.h"
#include "extxyz.h"
#include "graph.h"
#include "model.h"
#include "profile.h"
#include "step.h"
#include "synth.h"

const char ecn_profile_usage[] =
    "usage: ecenet profile (--model FILE | --config bench|small)\n"
    "                      [--diamond N | INPUT.extxyz] [--backend B] [--precision f64|f32]\n"
    "                      [--tf32] [--low-memory] [--device-nlist] [--n-warmup K] [--n-time K]\n"
    "                      [--op-profile]\n"
    "                      [--profile-rows N] [--json FILE] [--seed S]\n"
    "\n"
    "Per-section forward timings (fused ops on their own line, the unfused\n"
    "chain they replace as \"(unfused ref)\"), totals of the forward and of the\n"
    "joint energy+forces step; with --op-profile also per-op tables of one\n"
    "instrumented forward and one joint step (self time, and workspace memory\n"
    "per producing op). Medians of --n-time runs (default 10) after --n-warmup\n"
    "(default 3). The structure is the first frame of INPUT or a rattled\n"
    "diamond box (--diamond N, default 3). --json writes the same numbers.\n"
    "--tf32: TF32 GEMMs (cuda f32 only); --low-memory: the low-memory mode\n"
    "(layers recomputed in edge chunks in the backward); --device-nlist: every\n"
    "step searches the lists on the device (cuda; ops nlist_count/nlist_fill)\n"
    "instead of uploading the host's.\n";

#define MAX_RUNS 64
#define MAX_LINES 1024

typedef struct {
    char section[48];
    char op[32];
    int vjp;
    int n;
    double t[MAX_RUNS];
} line_t;

typedef struct {
    line_t *l;
    int n;
} lines_t;

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(const double *v, int n)
{
    double s[MAX_RUNS];
    if (n <= 0)
        return 0.0;
    memcpy(s, v, (size_t)n * sizeof *s);
    qsort(s, (size_t)n, sizeof *s, cmp_double);
    return n % 2 ? s[n / 2] : 0.5 * (s[n / 2 - 1] + s[n / 2]);
}

/* Add one run's events (summed per (section, op, vjp)) to the lines. */
static void add_run(lines_t *L, const ecn_profile *p, int run)
{
    for (size_t k = 0; k < p->n_ev; k++) {
        const ecn_prof_event *e = &p->ev[k];
        line_t *ln = NULL;
        for (int q = 0; q < L->n; q++)
            if (L->l[q].vjp == e->vjp && !strcmp(L->l[q].section, e->section) &&
                !strcmp(L->l[q].op, e->op))
                ln = &L->l[q];
        if (!ln) {
            if (L->n == MAX_LINES)
                continue;
            ln = &L->l[L->n++];
            memset(ln, 0, sizeof *ln);
            snprintf(ln->section, sizeof ln->section, "%s", e->section);
            snprintf(ln->op, sizeof ln->op, "%s", e->op);
            ln->vjp = e->vjp;
        }
        while (ln->n <= run)
            ln->t[ln->n++] = 0.0;
        ln->t[run] += e->seconds;
    }
}

static const char *op_label(const char *op)
{
    static const char *map[][2] = {
        {"linear_fwd", "equivariant linear"},
        {"realspace_fwd", "RealSpace"},
        {"add", "residual add"},
        {"layer_fwd", "linear+RealSpace+residual (fused)"},
        {"mp_pack_unrotate_fwd", "pack + unrotate"},
        {"mp_weight_fwd", "weights"},
        {"mp_attn_weight_fwd", "attention weights"},
        {"mp_scatter_fwd", "scatter to atoms"},
        {"mp_rotate_unpack_fwd", "gather + rotate back + unpack"},
        {"mlp_fwd", "MLP"},
        {"energy_fwd", "per-edge energy"},
        {"pair_geom_fwd", "pair vectors"},
        {"radial_fwd", "radial basis"},
        {"sph_fwd", "spherical harmonics"},
        {"ace_fwd", "ACE basis"},
        {"embed_fwd", "embedding"},
        {"wigner_fwd", "Wigner-D"},
        {"edge_frame_fwd", "gather + rotate + select"},
        {"dist_embed_fwd", "distance embedding"},
        {"film_fwd", "FiLM gate"},
        {"chan_scale_fwd", "FiLM scale"},
        {"copy", "copy"},
    };
    for (size_t k = 0; k < sizeof map / sizeof map[0]; k++)
        if (!strcmp(map[k][0], op))
            return map[k][1];
    return op;
}

/* Trace capture for the fused/unfused comparison: copies of layer outputs. */
typedef struct {
    char name[48][64];
    double *data[64];
    size_t count[64];
    int n;
} capture_t;

static void on_trace(void *user, const char *name, const double *data, size_t count)
{
    capture_t *c = user;
    if (strncmp(name, "stage", 5) != 0 || strchr(name + 5, '.') == NULL ||
        strstr(name, ".linear") || c->n == 64)
        return;
    snprintf(c->name[c->n], sizeof c->name[c->n], "%s", name);
    c->data[c->n] = malloc((count ? count : 1) * sizeof(double));
    if (!c->data[c->n])
        return;
    memcpy(c->data[c->n], data, count * sizeof(double));
    c->count[c->n++] = count;
}

static void capture_free(capture_t *c)
{
    for (int k = 0; k < c->n; k++)
        free(c->data[k]);
    c->n = 0;
}

typedef struct {
    const char *model_name, *input, *backend, *json;
    ecenet_precision prec;
    int tf32, lowmem, dev_nl, n_warmup, n_time, op_profile, rows, ndia, seed;
} opts_t;

static void print_table(const char *title, ecn_prof_row *rows, size_t n, int limit,
                        double step_seconds, int show_vjp, cJSON *jarr)
{
    printf("\n%s\n", title);
    printf("  %-34s %6s %12s %12s %8s\n", "op", "calls", "total [ms]", "mean [ms]", "% step");
    double rest = 0.0, sum = 0.0;
    int rest_n = 0, rest_calls = 0;
    for (size_t k = 0; k < n; k++) {
        const ecn_prof_row *r = &rows[k];
        char key[80];
        snprintf(key, sizeof key, "%s%s", r->key, show_vjp ? (r->vjp ? " [bwd]" : " [fwd]") : "");
        sum += r->seconds;
        if (jarr) {
            cJSON *o = cJSON_CreateObject();
            cJSON_AddStringToObject(o, "op", r->key);
            cJSON_AddBoolToObject(o, "backward", r->vjp);
            cJSON_AddNumberToObject(o, "calls", r->calls);
            cJSON_AddNumberToObject(o, "seconds", r->seconds);
            cJSON_AddItemToArray(jarr, o);
        }
        if ((int)k < limit) {
            printf("  %-34s %6d %12.3f %12.4f %7.1f%%\n", key, r->calls, 1e3 * r->seconds,
                   1e3 * r->seconds / r->calls, 100.0 * r->seconds / step_seconds);
        } else {
            rest += r->seconds;
            rest_n++;
            rest_calls += r->calls;
        }
    }
    if (rest_n)
        printf("  %-34s %6d %12.3f %12s %7.1f%%\n", "(other ops)", rest_calls, 1e3 * rest, "",
               100.0 * rest / step_seconds);
    printf("  %-34s %6s %12.3f %12s %7.1f%%   (measured step %.3f ms)\n", "sum of self times", "",
           1e3 * sum, "", 100.0 * sum / step_seconds, 1e3 * step_seconds);
}

static void print_memory(ecn_prof_row *rows, size_t n, int limit, size_t ws, cJSON *jarr)
{
    printf("\nJoint step by memory (workspace arena, per producing op)\n");
    printf("  %-34s %7s %12s %12s %8s\n", "op", "buffers", "bytes [MB]", "saved [MB]", "% ws");
    size_t rest = 0, rest_saved = 0, sum = 0;
    int rest_n = 0;
    for (size_t k = 0; k < n; k++) {
        const ecn_prof_row *r = &rows[k];
        sum += r->bytes;
        if (jarr) {
            cJSON *o = cJSON_CreateObject();
            cJSON_AddStringToObject(o, "op", r->key);
            cJSON_AddNumberToObject(o, "buffers", r->calls);
            cJSON_AddNumberToObject(o, "bytes", (double)r->bytes);
            cJSON_AddNumberToObject(o, "saved_bytes", (double)r->saved_bytes);
            cJSON_AddItemToArray(jarr, o);
        }
        if ((int)k < limit)
            printf("  %-34s %7d %12.3f %12.3f %7.1f%%\n", r->key, r->calls, r->bytes / 1e6,
                   r->saved_bytes / 1e6, 100.0 * (double)r->bytes / (double)ws);
        else {
            rest += r->bytes;
            rest_saved += r->saved_bytes;
            rest_n++;
        }
    }
    if (rest_n)
        printf("  %-34s %7d %12.3f %12.3f %7.1f%%\n", "(other ops)", rest_n, rest / 1e6,
               rest_saved / 1e6, 100.0 * (double)rest / (double)ws);
    printf("  %-34s %7s %12.3f %12s   (workspace %zu bytes; rows sum to %zu)\n", "total", "",
           sum / 1e6, "", ws, sum);
}

static int profile(const opts_t *o, const ecenet_model *m, size_t n, const double *pos,
                   const int *numbers, const double *cell, const int *pbc)
{
    char err[1024];
    const ecenet_backend *be = ecn_backend_get(o->backend, o->prec);
    if (!be) {
        ecn_backend_why(o->backend, err, sizeof err);
        fprintf(stderr, "ecenet profile: backend '%s' (%s) %s\n", o->backend,
                o->prec == ECENET_F64 ? "f64" : "f32", err);
        return 1;
    }
    int32_t *types = malloc((n ? n : 1) * sizeof *types);
    double *grad = malloc((3 * n + 1) * sizeof *grad);
    line_t *store = calloc(3 * MAX_LINES, sizeof *store);
    ecn_graph g, gd; /* gd: the device search's set-up (--device-nlist) */
    ecenet_nlist setup;
    memset(&g, 0, sizeof g);
    memset(&gd, 0, sizeof gd);
    ecn_engine *eng = NULL;
    ecn_profile prof;
    memset(&prof, 0, sizeof prof);
    cJSON *json = o->json ? cJSON_CreateObject() : NULL;
    capture_t cap_f, cap_u;
    memset(&cap_f, 0, sizeof cap_f);
    memset(&cap_u, 0, sizeof cap_u);
    int rc = 1;
    if (!types || !grad || !store) {
        fprintf(stderr, "ecenet profile: out of memory\n");
        goto done;
    }
    for (size_t i = 0; i < n; i++) {
        types[i] = ecenet_model_type_of(m, numbers[i]);
        if (types[i] < 0) {
            fprintf(stderr, "ecenet profile: atom %zu: element Z = %d is not in the model\n", i,
                    numbers[i]);
            goto done;
        }
    }
    /* neighbour list */
    double tnl[MAX_RUNS];
    for (int it = 0; it < o->n_time; it++) {
        ecn_graph_free(&g);
        double t0 = ecn_synth_now();
        if (ecn_graph_build(n, pos, cell, pbc, m->cfg.r_cut_edge, m->cfg.r_cut_neighbor, &g, err,
                            sizeof err) != ECENET_OK) {
            fprintf(stderr, "ecenet profile: %s\n", err);
            goto done;
        }
        tnl[it] = ecn_synth_now() - t0;
    }
    if (ecn_engine_create(m, be, &eng, err, sizeof err) != ECENET_OK) {
        fprintf(stderr, "ecenet profile: %s\n", err);
        goto done;
    }
    if (o->tf32 && ecn_engine_set_tf32(eng, 1) != 0) {
        fprintf(stderr, "ecenet profile: --tf32: backend %s %s has no TF32 mode (cuda f32 only)\n",
                be->name, o->prec == ECENET_F64 ? "f64" : "f32");
        goto done;
    }
    ecn_engine_set_low_memory(eng, o->lowmem, 0);
    ecn_step_in in = {n, pos, types, &g, NULL};
    /* --device-nlist: the host's part (the set-up) timed like the search */
    double tsu[MAX_RUNS];
    int dev_nl = o->dev_nl;
    if (dev_nl) {
        if (!ecn_backend_has_nlist(be) || n == 0) {
            fprintf(stderr, "ecenet profile: --device-nlist: backend %s has no device neighbour "
                            "search (cuda only)\n", be->name);
            goto done;
        }
        for (int it = 0; it < o->n_time; it++) {
            double t0 = ecn_synth_now();
            if (ecn_graph_setup(n, pos, cell, pbc, m->cfg.r_cut_edge, m->cfg.r_cut_neighbor,
                                &gd, &setup, err, sizeof err) != ECENET_OK) {
                fprintf(stderr, "ecenet profile: %s\n", err);
                goto done;
            }
            tsu[it] = ecn_synth_now() - t0;
        }
        if (setup.n < 0) { /* graph.h: a skewed cell is the host's */
            fprintf(stderr, "ecenet profile: --device-nlist: the cell is skewed, so the host "
                            "searches it (in a reduced basis); profiling with the host's lists\n");
            dev_nl = 0;
        } else {
            in.graph = NULL;
            in.nlist = &setup;
        }
    }
    lines_t fwd = {store, 0}, unf = {store + MAX_LINES, 0}, jnt = {store + 2 * MAX_LINES, 0};
    double tf[MAX_RUNS], tj[MAX_RUNS], tu[MAX_RUNS];
    const int fused = be->layer_fwd != NULL;
    /* forward runs (fused as the backend has them), unfused runs, joint runs */
    for (int pass = 0; pass < 3; pass++) {
        if (pass == 1 && !fused)
            continue;
        ecn_engine_set_fused(eng, pass != 1);
        for (int it = 0; it < o->n_warmup + o->n_time; it++) {
            ecn_step_out out;
            memset(&out, 0, sizeof out);
            out.prof = &prof;
            out.grad = pass == 2 ? grad : NULL;
            if (ecn_step(eng, &in, &out, err, sizeof err) != ECENET_OK) {
                fprintf(stderr, "ecenet profile: %s\n", err);
                goto done;
            }
            if (it < o->n_warmup)
                continue;
            const int run = it - o->n_warmup;
            add_run(pass == 0 ? &fwd : pass == 1 ? &unf : &jnt, &prof, run);
            (pass == 0 ? tf : pass == 1 ? tu : tj)[run] = prof.total_seconds;
        }
    }
    /* fused vs unfused: the same numbers? (one traced forward each) */
    if (fused) {
        for (int pass = 0; pass < 2; pass++) {
            ecn_engine_set_fused(eng, pass == 0);
            ecn_step_out out;
            memset(&out, 0, sizeof out);
            out.trace = on_trace;
            out.trace_user = pass == 0 ? &cap_f : &cap_u;
            if (ecn_step(eng, &in, &out, err, sizeof err) != ECENET_OK) {
                fprintf(stderr, "ecenet profile: %s\n", err);
                goto done;
            }
        }
        ecn_engine_set_fused(eng, 1);
    }

    const ecn_config *c = &m->cfg;
    printf("ecenet profile: backend %s %s%s%s; model %s (l_max %d, m_max %d, embed_dim %d, F %d, "
           "%d x %d layers)\n",
           be->name, o->prec == ECENET_F64 ? "f64" : "f32", o->tf32 ? " with TF32 GEMMs" : "",
           o->lowmem ? ", low-memory mode" : "",
           o->model_name, c->l_max, c->m_max, c->embed_dim, c->F, c->n_mp, c->n_layers);
    printf("  %zu atoms, %lld edges, %lld neighbour pairs; medians of %d runs after %d warm-up;"
           " ops timed with the backend timer, synchronised per op\n",
           n, (long long)g.edges.n, (long long)g.nb.n, o->n_time, o->n_warmup);
    ecn_cli_run_info(&be, 1);
    printf("\n%-58s %12s\n", "section / op", "median [ms]");
    printf("%-58s %12.3f%s\n", "neighbour list (host, cell list)", 1e3 * median(tnl, o->n_time),
           dev_nl ? "  [not used: --device-nlist]" : "");
    if (dev_nl)
        printf("%-58s %12.3f\n", "neighbour search set-up (host, for the device search)",
               1e3 * median(tsu, o->n_time));
    double sum_fwd = 0.0;
    cJSON *jsec = json ? cJSON_AddArrayToObject(json, "forward_lines") : NULL;
    const char *last_group = "";
    for (int q = 0; q < fwd.n; q++) {
        const line_t *ln = &fwd.l[q];
        if (ln->vjp)
            continue;
        const char *group = !strncmp(ln->section, "stage", 5) ? "layer stages"
                            : !strncmp(ln->section, "mp", 2)  ? "message passing"
                            : !strcmp(ln->section, "readout") ? "readout"
                            : !strcmp(ln->section, "inputs")  ? "inputs (host prep, upload)"
                                                              : "forward sub-components";
        if (strcmp(group, last_group)) {
            printf("%s\n", group);
            last_group = group;
        }
        /* a section header line when the section changes */
        if (q == 0 || strcmp(fwd.l[q - 1].section, ln->section)) {
            double st = 0.0;
            for (int r = q; r < fwd.n && !strcmp(fwd.l[r].section, ln->section); r++)
                st += median(fwd.l[r].t, fwd.l[r].n);
            printf("  %-56s %12.3f\n", ln->section, 1e3 * st);
        }
        const double t = median(ln->t, ln->n);
        sum_fwd += t;
        char lab[96];
        snprintf(lab, sizeof lab, "%s (%s)", op_label(ln->op), ln->op);
        printf("      %-52s %12.3f\n", lab, 1e3 * t);
        if (jsec) {
            cJSON *jo = cJSON_CreateObject();
            cJSON_AddStringToObject(jo, "section", ln->section);
            cJSON_AddStringToObject(jo, "op", ln->op);
            cJSON_AddNumberToObject(jo, "median_seconds", t);
            cJSON_AddItemToArray(jsec, jo);
        }
        /* after the last line of a fused layer section: its unfused reference */
        const int end = q + 1 == fwd.n || strcmp(fwd.l[q + 1].section, ln->section);
        int has_fused = 0;
        for (int r = 0; r < fwd.n; r++)
            has_fused |= !strcmp(fwd.l[r].section, ln->section) && !strcmp(fwd.l[r].op, "layer_fwd");
        if (fused && end && has_fused) {
            for (int r = 0; r < unf.n; r++)
                if (!strcmp(unf.l[r].section, ln->section) && !unf.l[r].vjp) {
                    snprintf(lab, sizeof lab, "%s (%s) (unfused ref)", op_label(unf.l[r].op),
                             unf.l[r].op);
                    printf("      %-52s %12.3f  [not summed]\n", lab,
                           1e3 * median(unf.l[r].t, unf.l[r].n));
                }
            for (int k = 0; k < cap_f.n && k < cap_u.n; k++)
                if (!strcmp(cap_f.name[k], ln->section) && cap_f.count[k] == cap_u.count[k]) {
                    double md = 0.0, mx = 0.0;
                    for (size_t i = 0; i < cap_f.count[k]; i++) {
                        md = fmax(md, fabs(cap_f.data[k][i] - cap_u.data[k][i]));
                        mx = fmax(mx, fabs(cap_u.data[k][i]));
                    }
                    printf("      %-52s %12.2e  (max |value| %.3g)\n",
                           "fused vs unfused output: max |diff|", md, mx);
                }
        }
    }
    const double mf = median(tf, o->n_time), mj = median(tj, o->n_time);
    printf("totals\n");
    printf("  %-56s %12.3f\n", "sum of the forward lines above", 1e3 * sum_fwd);
    printf("  %-56s %12.3f   (gap %.3f ms, %.1f%%)\n", "forward (measured)", 1e3 * mf,
           1e3 * (mf - sum_fwd), 100.0 * (mf - sum_fwd) / mf);
    if (fused)
        printf("  %-56s %12.3f   [not summed]\n", "forward, fused entries off (unfused ref)",
               1e3 * median(tu, o->n_time));
    printf("  %-56s %12.3f\n", "joint energy + forces (measured)", 1e3 * mj);
    printf("  %-56s %12.3f\n", "  of which backward (joint - forward)", 1e3 * (mj - mf));
    if (json) {
        cJSON_AddStringToObject(json, "libecenet", ecenet_version());
        cJSON_AddStringToObject(json, "backend", be->name);
        if (be->device)
            cJSON_AddStringToObject(json, "device", be->device());
        cJSON_AddStringToObject(json, "precision", o->prec == ECENET_F64 ? "f64" : "f32");
        cJSON_AddNumberToObject(json, "n_atoms", (double)n);
        cJSON_AddNumberToObject(json, "n_edges", (double)g.edges.n);
        cJSON_AddNumberToObject(json, "neighbour_list_seconds", median(tnl, o->n_time));
        cJSON_AddNumberToObject(json, "forward_sum_seconds", sum_fwd);
        cJSON_AddNumberToObject(json, "forward_seconds", mf);
        cJSON_AddNumberToObject(json, "joint_seconds", mj);
    }

    if (o->op_profile) {
        ecn_prof_row *rows = NULL;
        size_t nr;
        ecn_step_out out;
        /* one instrumented forward */
        memset(&out, 0, sizeof out);
        out.prof = &prof;
        if (ecn_step(eng, &in, &out, err, sizeof err) != ECENET_OK)
            goto done;
        nr = ecn_prof_by_op(&prof, 0, 0, &rows);
        if (nr == (size_t)-1)
            goto done;
        print_table("Forward by self time (one instrumented forward)", rows, nr, o->rows,
                    prof.total_seconds, 0,
                    json ? cJSON_AddArrayToObject(json, "forward_by_self_time") : NULL);
        free(rows);
        /* one instrumented joint step */
        memset(&out, 0, sizeof out);
        out.prof = &prof;
        out.grad = grad;
        if (ecn_step(eng, &in, &out, err, sizeof err) != ECENET_OK)
            goto done;
        nr = ecn_prof_by_op(&prof, 1, 1, &rows);
        if (nr == (size_t)-1)
            goto done;
        print_table("Joint energy+forces step by self time ([bwd] rows are the backward)", rows,
                    nr, o->rows, prof.total_seconds, 1,
                    json ? cJSON_AddArrayToObject(json, "joint_by_self_time") : NULL);
        free(rows);
        nr = ecn_prof_by_memory(&prof, &rows);
        if (nr == (size_t)-1)
            goto done;
        print_memory(rows, nr, o->rows, prof.workspace_bytes,
                     json ? cJSON_AddArrayToObject(json, "joint_by_memory") : NULL);
        if (json)
            cJSON_AddNumberToObject(json, "workspace_bytes", (double)prof.workspace_bytes);
        free(rows);
    }
    if (json) {
        char *text = cJSON_Print(json);
        FILE *f = text ? fopen(o->json, "w") : NULL;
        int ok = f && fputs(text, f) >= 0;
        ok = (f && fclose(f) == 0) && ok;
        free(text);
        if (!ok) {
            fprintf(stderr, "ecenet profile: %s: cannot write the JSON file\n", o->json);
            goto done;
        }
    }
    rc = 0;
done:
    if (rc && err[0] == '\0')
        fprintf(stderr, "ecenet profile: out of memory\n");
    capture_free(&cap_f);
    capture_free(&cap_u);
    ecn_profile_free(&prof);
    ecn_engine_free(eng);
    ecn_graph_free(&g);
    ecn_graph_free(&gd);
    cJSON_Delete(json);
    free(store);
    free(types);
    free(grad);
    return rc;
}

int ecn_cmd_profile(int argc, char **argv)
{
    opts_t o;
    memset(&o, 0, sizeof o);
    o.backend = getenv("ECENET_BACKEND") ? getenv("ECENET_BACKEND") : "ref";
    o.n_warmup = 3;
    o.n_time = 10;
    o.rows = 25;
    o.ndia = 3;
    o.seed = 1;
    const char *config = NULL, *model_path = NULL;
    for (int k = 1; k < argc; k++) {
        const char *a = argv[k], *v = k + 1 < argc ? argv[k + 1] : NULL;
        static const char *const valued[] = {"--model", "--config", "--backend", "--precision",
                                             "--json", "--diamond", "--n-warmup", "--n-time",
                                             "--profile-rows", "--seed", NULL};
        const char *why = NULL;
        char buf[64];
        int takes = 1;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            fputs(ecn_profile_usage, stdout);
            return 0;
        } else if (!strcmp(a, "--tf32")) {
            o.tf32 = 1, takes = 0;
        } else if (!strcmp(a, "--low-memory")) {
            o.lowmem = 1, takes = 0;
        } else if (!strcmp(a, "--device-nlist")) {
            o.dev_nl = 1, takes = 0;
        } else if (!strcmp(a, "--op-profile")) {
            o.op_profile = 1, takes = 0;
        } else if (a[0] != '-') {
            o.input = a, takes = 0;
        } else if (ecn_cli_check_valued("profile", a, v, valued, ecn_profile_usage)) {
            return 2;
        } else if (!strcmp(a, "--model")) {
            model_path = v;
        } else if (!strcmp(a, "--config")) {
            config = v;
        } else if (!strcmp(a, "--backend")) {
            o.backend = v;
        } else if (!strcmp(a, "--precision")) {
            why = ecn_cli_precision_why(v, &o.prec);
        } else if (!strcmp(a, "--json")) {
            o.json = v;
        } else if (!strcmp(a, "--diamond")) {
            why = ecn_cli_int_why(v, 1, 100, &o.ndia, buf, sizeof buf);
        } else if (!strcmp(a, "--n-warmup")) {
            why = ecn_cli_int_why(v, 0, 1000, &o.n_warmup, buf, sizeof buf);
        } else if (!strcmp(a, "--n-time")) {
            why = ecn_cli_int_why(v, 1, MAX_RUNS, &o.n_time, buf, sizeof buf);
        } else if (!strcmp(a, "--profile-rows")) {
            why = ecn_cli_int_why(v, 1, 10000, &o.rows, buf, sizeof buf);
        } else {
            why = ecn_cli_int_why(v, 0, 1 << 30, &o.seed, buf, sizeof buf); /* --seed */
        }
        if (why)
            return ecn_cli_opt_error("profile", a, v, why, ecn_profile_usage);
        k += takes;
    }
    if (!!config == !!model_path) {
        fprintf(stderr, "ecenet profile: give exactly one of --model FILE and --config NAME\n%s",
                ecn_profile_usage);
        return 2;
    }
    char err[1024];
    ecenet_model *m = NULL;
    if (model_path) {
        if (ecenet_model_load(model_path, &m, err, sizeof err) != ECENET_OK) {
            fprintf(stderr, "ecenet profile: %s\n", err);
            return 1;
        }
        o.model_name = model_path;
    } else {
        ecn_config cfg;
        if (ecn_synth_config(config, &cfg) != 0) {
            fprintf(stderr, "ecenet profile: unknown config '%s' (bench, small)\n", config);
            return 2;
        }
        if (ecn_synth_model(&cfg, (uint64_t)o.seed, &m, err, sizeof err) != ECENET_OK) {
            fprintf(stderr, "ecenet profile: %s\n", err);
            return 1;
        }
        o.model_name = config;
    }
    int rc;
    if (o.input) {
        exyz_file xf;
        if (exyz_read(o.input, &xf, err, sizeof err) != 0) {
            fprintf(stderr, "ecenet profile: %s\n", err);
            ecenet_model_free(m);
            return 1;
        }
        if (xf.n_frames == 0) {
            fprintf(stderr, "ecenet profile: %s: no frames\n", o.input);
            exyz_free(&xf);
            ecenet_model_free(m);
            return 1;
        }
        const exyz_frame *f = &xf.frames[0];
        rc = profile(&o, m, f->n_atoms, f->positions, f->numbers, f->has_cell ? f->cell : NULL,
                     f->pbc);
        exyz_free(&xf);
    } else {
        size_t n = 0;
        double *pos = NULL, cell[9];
        int *numbers = NULL;
        const int pbc[3] = {1, 1, 1};
        if (ecn_synth_diamond(o.ndia, 0.05, (uint64_t)o.seed, &n, &pos, &numbers, cell) != 0) {
            fprintf(stderr, "ecenet profile: cannot build the diamond box\n");
            ecenet_model_free(m);
            return 1;
        }
        rc = profile(&o, m, n, pos, numbers, cell, pbc);
        free(pos);
        free(numbers);
    }
    ecenet_model_free(m);
    return rc;
}
