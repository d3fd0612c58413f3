/* The profiler's accounting (issue 3): on every CPU backend compiled in, the
 * per-op self times of an instrumented step sum to the measured step, the
 * memory rows sum exactly to the workspace arena, and where a backend has
 * fused entries the fused and unfused paths compute the same numbers. */
#define _POSIX_C_SOURCE 200809L
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "graph.h"
#include "model.h"
#include "profile.h"
#include "step.h"
#include "test_util.h"

/* A small public model with message passing, and a rattled 2x2x2 diamond box. */
static ecenet_model *small_model(void)
{
    ecn_config c = tu_small_cfg(1);
    c.embed_dim = 4;
    c.n_layers = 2;
    c.n_mp = 2;
    c.hidden[0] = 16;
    const int z[1] = {6};
    return tu_random_model(&c, z, 5, 1.0);
}

typedef struct {
    size_t n;
    double pos[3 * 64], cell[9];
    int32_t types[64];
} box;

static void diamond2(box *b)
{
    static const double f[8][3] = {{0, 0, 0},       {0, .5, .5},      {.5, 0, .5},
                                   {.5, .5, 0},     {.25, .25, .25},  {.25, .75, .75},
                                   {.75, .25, .75}, {.75, .75, .25}};
    const double a = 3.567;
    tu_rng_seed(11);
    b->n = 0;
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 2; j++)
            for (int k = 0; k < 2; k++)
                for (int q = 0; q < 8; q++, b->n++) {
                    b->pos[3 * b->n + 0] = a * (i + f[q][0]) + 0.05 * tu_normal();
                    b->pos[3 * b->n + 1] = a * (j + f[q][1]) + 0.05 * tu_normal();
                    b->pos[3 * b->n + 2] = a * (k + f[q][2]) + 0.05 * tu_normal();
                    b->types[b->n] = 0;
                }
    memset(b->cell, 0, sizeof b->cell);
    b->cell[0] = b->cell[4] = b->cell[8] = 2 * a;
}

static const char *backends[] = {"ref", "omp"};
static const int precs[] = {ECENET_F64, ECENET_F32};

START_TEST(test_accounting)
{
    ecenet_model *m = small_model();
    box b;
    diamond2(&b);
    ecn_graph g;
    char err[512];
    const int pbc[3] = {1, 1, 1};
    ck_assert_int_eq(ecn_graph_build(b.n, b.pos, b.cell, pbc, m->cfg.r_cut_edge,
                                     m->cfg.r_cut_neighbor, &g, err, sizeof err),
                     ECENET_OK);
    int n_run = 0;
    for (size_t k = 0; k < sizeof backends / sizeof *backends; k++)
        for (size_t q = 0; q < 2; q++) {
            const ecenet_backend *be = ecn_backend_get(backends[k], precs[q]);
            if (!be)
                continue;
            ecn_engine *eng = NULL;
            ck_assert_int_eq(ecn_engine_create(m, be, &eng, err, sizeof err), ECENET_OK);
            ecn_profile prof;
            memset(&prof, 0, sizeof prof);
            double grad[3 * 64];
            for (int joint = 0; joint < 2; joint++) {
                ecn_step_in in = {b.n, b.pos, b.types, &g, NULL};
                ecn_step_out out;
                memset(&out, 0, sizeof out);
                out.prof = &prof;
                out.grad = joint ? grad : NULL;
                /* self times vs the measured step: the gap is the planning of
                 * the arena and the bracketing itself (measured < 1% on ref and
                 * omp alone). Under `make -j2 check` another test shares the two
                 * cores and one 34 ms omp step once showed a 12% gap from
                 * descheduling between ops, so the best of 3 steps is used. */
                double sum = 0.0, tot = 1.0;
                for (int rep = 0; rep < 3; rep++) {
                    ck_assert_int_eq(ecn_step(eng, &in, &out, err, sizeof err), ECENET_OK);
                    sum = ecn_prof_sum(&prof);
                    tot = prof.total_seconds;
                    if (fabs(sum - tot) <= 0.10 * tot)
                        break;
                }
                ck_assert_msg(fabs(sum - tot) <= 0.10 * tot,
                              "%s: self times %.6f s vs step %.6f s", be->name, sum, tot);
                /* per-op and per-section tables cover every event */
                ecn_prof_row *rows = NULL;
                size_t nr = ecn_prof_by_op(&prof, 1, 1, &rows);
                ck_assert(nr != (size_t)-1 && nr > 5);
                double s2 = 0.0;
                for (size_t r = 0; r < nr; r++)
                    s2 += rows[r].seconds;
                free(rows);
                ck_assert(fabs(s2 - sum) <= 1e-12 * sum);
                /* memory rows sum exactly to the workspace accounting */
                nr = ecn_prof_by_memory(&prof, &rows);
                ck_assert(nr != (size_t)-1 && nr > 3);
                size_t bytes = 0, saved = 0;
                for (size_t r = 0; r < nr; r++) {
                    bytes += rows[r].bytes;
                    saved += rows[r].saved_bytes;
                }
                /* the layers' linear outputs: one per layer for the backward, one
                 * buffer shared by every layer in a step without one */
                const size_t zb = (size_t)g.edges.n * m->cfg.Q * 2 * m->cfg.F * be->real_size;
                const size_t n_lin = (size_t)m->cfg.n_mp * m->cfg.n_layers;
                size_t lin_bytes = 0;
                for (size_t r = 0; r < nr; r++)
                    if (!strcmp(rows[r].key, "linear_fwd"))
                        lin_bytes = rows[r].bytes;
                if (joint)
                    ck_assert_msg(lin_bytes >= n_lin * zb, "%s: Z %zu bytes", be->name, lin_bytes);
                else
                    ck_assert_msg(lin_bytes >= zb && lin_bytes < zb + 64, "%s: Z %zu bytes (%zu)",
                                  be->name, lin_bytes, zb);
                free(rows);
                ck_assert_msg(bytes == prof.workspace_bytes, "%s: memory rows %zu != workspace %zu",
                              be->name, bytes, prof.workspace_bytes);
                ck_assert(saved > 0 && saved < bytes);
                ck_assert(prof.workspace_bytes <= ecn_engine_workspace_bytes(eng));
                /* the backward appears in the joint step only */
                nr = ecn_prof_by_section(&prof, 1, &rows);
                ck_assert(nr != (size_t)-1);
                ck_assert_msg(joint ? nr > 0 : nr == 0, "backward sections: %zu", nr);
                free(rows);
            }
            ecn_profile_free(&prof);
            ecn_engine_free(eng);
            n_run++;
        }
    ck_assert_int_ge(n_run, 1);
    ecn_graph_free(&g);
    ecenet_model_free(m);
}
END_TEST

typedef struct {
    double *data[32];
    size_t count[32];
    int n;
} capture;

static void on_trace(void *user, const char *name, const double *data, size_t count)
{
    capture *c = user;
    /* layer outputs: "stage{g}.layer{k}" exactly */
    if (strncmp(name, "stage", 5) || strstr(name, ".linear") || c->n == 32)
        return;
    c->data[c->n] = malloc(count * sizeof(double));
    memcpy(c->data[c->n], data, count * sizeof(double));
    c->count[c->n++] = count;
}

/* Fused and unfused paths compute the same layer outputs (fp64: to 1e-12 of
 * the largest value; fp32: 1e-5). Backends without fused entries are
 * skipped (ref has none). */
START_TEST(test_fused_matches_unfused)
{
    ecenet_model *m = small_model();
    box b;
    diamond2(&b);
    ecn_graph g;
    char err[512];
    const int pbc[3] = {1, 1, 1};
    ck_assert_int_eq(ecn_graph_build(b.n, b.pos, b.cell, pbc, m->cfg.r_cut_edge,
                                     m->cfg.r_cut_neighbor, &g, err, sizeof err),
                     ECENET_OK);
    int tested = 0;
    for (size_t k = 0; k < sizeof backends / sizeof *backends; k++)
        for (size_t q = 0; q < 2; q++) {
            const ecenet_backend *be = ecn_backend_get(backends[k], precs[q]);
            if (!be || !be->layer_fwd)
                continue;
            ecn_engine *eng = NULL;
            ck_assert_int_eq(ecn_engine_create(m, be, &eng, err, sizeof err), ECENET_OK);
            capture cap[2];
            memset(cap, 0, sizeof cap);
            for (int fused = 0; fused < 2; fused++) {
                ecn_engine_set_fused(eng, fused);
                ecn_step_in in = {b.n, b.pos, b.types, &g, NULL};
                ecn_step_out out;
                memset(&out, 0, sizeof out);
                out.trace = on_trace;
                out.trace_user = &cap[fused];
                ck_assert_int_eq(ecn_step(eng, &in, &out, err, sizeof err), ECENET_OK);
            }
            ck_assert_int_eq(cap[0].n, cap[1].n);
            ck_assert_int_ge(cap[0].n, 4);
            const double tol = precs[q] == ECENET_F64 ? 1e-12 : 1e-5;
            for (int s = 0; s < cap[0].n; s++) {
                double md = tu_max_abs_diff(cap[0].data[s], cap[1].data[s], cap[0].count[s]);
                double mx = tu_max_abs(cap[0].data[s], cap[0].count[s]);
                ck_assert_msg(md <= tol * mx, "%s: layer %d fused vs unfused %.3e of %.3e",
                              be->name, s, md, mx);
                free(cap[0].data[s]);
                free(cap[1].data[s]);
            }
            ecn_engine_free(eng);
            tested++;
        }
    if (!tested)
        printf("fused vs unfused: no compiled backend has fused entries (ref has none)\n");
    ecn_graph_free(&g);
    ecenet_model_free(m);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("profile");
    TCase *tc = tcase_create("accounting");
    tcase_set_timeout(tc, TU_HANG_GUARD_S);
    tcase_add_test(tc, test_accounting);
    tcase_add_test(tc, test_fused_matches_unfused);
    suite_add_tcase(s, tc);
    return tu_run_suite(s);
}
