/* Golden tests: the reference backend against the original PyTorch ECENet
 * (float64), for the public-release cases ethanol, diamond and options
 * (tests/data/golden/README.md).
 *
 * 1. Op by op: the step runs on the golden edge/neighbour lists and every
 *    intermediate is compared with act.* at act.edge_rows, in op order, so a
 *    failure names the first op that differs.
 * 2. Whole model through the public API (our own neighbour list): energy
 *    within 1e-12 relative, forces within 1e-10 of max|F|, stress within
 *    1e-10 of max|σ| (the targets). */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "backend.h"
#include "graph.h"
#include "model.h"
#include "step.h"
#include "test_util.h"

#define TOL_ACT 1e-12    /* activations, relative to the tensor's max |value| */
#define TOL_ENERGY 1e-12 /* relative */
#define TOL_FORCE 1e-10  /* relative to max |F| (and max |σ|, max |dE/dε|) */

typedef struct {
    const ecn_safetensors *ref;
    const ecenet_model *model;
    const int64_t *rows;
    int64_t K;
    char first_fail[256];
    double worst;           /* largest relative error over all traced tensors */
    int n_compared;
} trace_ctx;

static double fmax2(double a, double b) { return a > b ? a : b; }

static double tensor_max_abs(const ecn_tensor *t)
{
    return tu_max_abs((const double *)t->data, (size_t)t->numel);
}

/* Record the relative error of one comparison; keep the first failing op. */
static void record(trace_ctx *tc, const char *what, double maxdiff, double scale)
{
    double rel = scale > 0 ? maxdiff / scale : maxdiff;
    tc->n_compared++;
    if (rel > tc->worst)
        tc->worst = rel;
    if (!(rel <= TOL_ACT) && !tc->first_fail[0])
        snprintf(tc->first_fail, sizeof tc->first_fail, "%s: relative error %.3e", what, rel);
}

/* Whole (N, ...) or (P, ...) tensors, same layout as ours. */
static void cmp_full(trace_ctx *tc, const char *gname, const double *ours, size_t count)
{
    const ecn_tensor *t = ecn_st_find(tc->ref, gname);
    ck_assert_msg(t != NULL, "golden tensor %s missing", gname);
    ck_assert_msg((size_t)t->numel == count, "%s: %lld values, ours %zu", gname,
                  (long long)t->numel, count);
    record(tc, gname, tu_max_abs_diff(ours, t->data, count), tensor_max_abs(t));
}

/* Edge features: ours X[e][m][part][c] at width `width`; golden (K, gw, n_ang)
 * per part with suffix A_cos/A_sin or u_cos/u_sin; the first `width` golden
 * channels are compared. */
static void cmp_features_w(trace_ctx *tc, const char *prefix, const char *sfx, const double *X,
                           int width)
{
    const ecn_config *c = &tc->model->cfg;
    const int Q = c->Q;
    for (int part = 0; part < 2; part++) {
        char nm[160];
        snprintf(nm, sizeof nm, "act.%s.%s_%s", prefix, sfx, part ? "sin" : "cos");
        const ecn_tensor *t = ecn_st_find(tc->ref, nm);
        ck_assert_msg(t != NULL && t->rank == 3 && t->shape[0] == tc->K && t->shape[2] == Q &&
                          t->shape[1] >= width,
                      "golden tensor %s missing or of unexpected shape", nm);
        const int gw = (int)t->shape[1];
        const double *g = t->data;
        double md = 0.0;
        for (int64_t k = 0; k < tc->K; k++)
            for (int f = 0; f < width; f++)
                for (int m = 0; m < Q; m++) {
                    double a = X[((tc->rows[k] * Q + m) * 2 + part) * width + f];
                    md = fmax2(md, fabs(a - g[(k * gw + f) * Q + m]));
                }
        record(tc, nm, md, tu_max_abs(g, (size_t)t->numel));
    }
}

static void cmp_features(trace_ctx *tc, const char *prefix, const double *X)
{
    cmp_features_w(tc, prefix, "A", X, tc->model->cfg.F);
}

/* Per-edge rows of width n at row stride `stride` against golden (K, n). */
static void cmp_rows_strided(trace_ctx *tc, const char *gname, const double *ours, int n,
                             int64_t stride)
{
    const double *g = tu_f64(tc->ref, gname, tc->K * n);
    double md = 0.0;
    for (int64_t k = 0; k < tc->K; k++)
        for (int q = 0; q < n; q++)
            md = fmax2(md, fabs(ours[tc->rows[k] * stride + q] - g[k * n + q]));
    record(tc, gname, md, tu_max_abs(g, (size_t)(tc->K * n)));
}

/* Per-edge rows (E, n) against golden (K, n). */
static void cmp_rows(trace_ctx *tc, const char *gname, const double *ours, int n)
{
    cmp_rows_strided(tc, gname, ours, n, n);
}

static void on_trace(void *user, const char *name, const double *data, size_t count)
{
    trace_ctx *tc = user;
    const ecn_config *c = &tc->model->cfg;
    if (strcmp(name, "nb_radial") == 0) {
        cmp_full(tc, "act.nb_radial", data, count);
    } else if (strcmp(name, "nb_Y") == 0) {
        cmp_full(tc, "act.nb_Y", data, count);
    } else if (strcmp(name, "ace_A") == 0) {
        cmp_full(tc, "act.ace_A", data, count);
    } else if (strcmp(name, "A_emb") == 0) {
        cmp_full(tc, "act.A_emb", data, count);
    } else if (strcmp(name, "D") == 0) {
        const int S = c->S;
        int ND = 0;
        for (int l = 0; l <= c->l_max; l++)
            ND += (2 * l + 1) * (2 * l + 1);
        const double *g = tu_f64(tc->ref, "act.D_block", tc->K * S * S);
        double md = 0.0;
        for (int64_t k = 0; k < tc->K; k++) {
            const double *De = data + tc->rows[k] * ND;
            for (int l = 0, off = 0; l <= c->l_max; off += (2 * l + 1) * (2 * l + 1), l++)
                for (int a = 0; a < 2 * l + 1; a++)
                    for (int b = 0; b < 2 * l + 1; b++) {
                        double d = fabs(De[off + a * (2 * l + 1) + b] -
                                        g[(k * S + l * l + a) * S + l * l + b]);
                        if (d > md)
                            md = d;
                    }
        }
        record(tc, "act.D_block", md, 1.0);
    } else if (strcmp(name, "per_edge_energy") == 0) {
        cmp_full(tc, "out.per_edge_energy", data, count);
    } else if (strcmp(name, "film.gamma") == 0) {
        cmp_rows(tc, "act.film.gamma", data, c->F);
    } else if (strstr(name, ".scores") || strstr(name, ".weights")) {
        char gname[96];
        snprintf(gname, sizeof gname, "act.%s", name);
        cmp_rows(tc, gname, data, c->n_scores);
    } else if (strstr(name, ".Delta")) {
        char gname[96];
        snprintf(gname, sizeof gname, "act.%s", name);
        cmp_full(tc, gname, data, count);
    } else if (strstr(name, ".trunk")) {
        cmp_features_w(tc, name, "u", data, c->F);
    } else if (strstr(name, ".linear_down")) {
        cmp_features_w(tc, name, "A", data, c->bottleneck_dim);
    } else {
        /* edge_frame, film, stage{g}.layer{k}[.linear|.linear_up], mp{g}[.receiver...] */
        cmp_features(tc, name, data);
        char last[64];
        snprintf(last, sizeof last, "stage%d.layer%d", c->n_mp - 1, c->n_layers - 1);
        if (strcmp(name, last) == 0) /* the readout's invariants: m = 0 cos slot */
            cmp_rows_strided(tc, "act.invariants", data, c->F, c->Q * 2 * c->F);
    }
}

static void to_pairlist(const ecn_safetensors *ref, const char *src, const char *dst,
                        const char *shift, ecn_pairlist *pl)
{
    const ecn_tensor *ts = ecn_st_find(ref, src);
    ck_assert_ptr_nonnull(ts);
    pl->n = ts->numel;
    const int64_t *s = tu_i64(ref, src, pl->n), *d = tu_i64(ref, dst, pl->n);
    const double *sh = tu_f64(ref, shift, 3 * pl->n);
    pl->src = malloc((size_t)(pl->n + 1) * sizeof *pl->src);
    pl->dst = malloc((size_t)(pl->n + 1) * sizeof *pl->dst);
    pl->shift = malloc((size_t)(3 * pl->n + 1) * sizeof *pl->shift);
    ck_assert(pl->src && pl->dst && pl->shift);
    for (int64_t k = 0; k < pl->n; k++) {
        pl->src[k] = (int32_t)s[k];
        pl->dst[k] = (int32_t)d[k];
    }
    memcpy(pl->shift, sh, (size_t)(3 * pl->n) * sizeof(double));
}

static int is_periodic(const ecn_safetensors *ref)
{
    const ecn_tensor *p = ecn_st_find(ref, "input.pbc");
    const uint8_t *f = p->data;
    return f[0] || f[1] || f[2];
}

/* The reference detaches the softmax's per-receiver maximum, so its forces
 * are not exactly -dE/dx (README "Softmax forces": up to 0.106 eV/Å of
 * 1.5e4 over all atoms in thglab_softmax). We ship the exact gradient, and at
 * exact ties of the maximum (ethanol's mirror-image H atoms) the average of
 * the one-sided derivatives. Checked against:
 *  - check.fd.forces_exact_gradient, the reference replay without the detach,
 *    which credits each tie to one edge: README measures 6e-3 between it and
 *    central differences at the ties; measured 6.10e-3 for ours;
 *  - check.fd.forces_fd (central differences, h = 1e-5), which at a kink do
 *    not converge (README); measured 7.38e-3;
 *  - out.forces within the 0.106 detach gap (measured 0.1059).
 * Away from ties the gradient is exact: test_softmax_off_ties. */
#define SOFTMAX_DETACH_GAP 0.11
#define SOFTMAX_TIE_GAP 6.5e-3
#define SOFTMAX_FD_TOL 8e-3

static double check_forces(const char *name, const ecenet_model *m, const ecn_safetensors *ref,
                           const double *forces, int64_t N)
{
    const double *f_ref = tu_f64(ref, "out.forces", 3 * N);
    double fmax = tu_max_abs(f_ref, (size_t)(3 * N));
    double fd = tu_max_abs_diff(forces, f_ref, (size_t)(3 * N));
    if (m->cfg.mp_type != ECN_MP_SOFTMAX) {
        ck_assert_msg(fd <= TOL_FORCE * fmax, "%s: forces max err %.3e, max|F| %.3e", name, fd,
                      fmax);
        return fd;
    }
    ck_assert_msg(fd <= SOFTMAX_DETACH_GAP, "%s: forces differ from the reference's "
                  "(detached-max) forces by %.3e > %.2f", name, fd, SOFTMAX_DETACH_GAP);
    const int64_t *ai = tu_i64(ref, "check.fd.atom_index", 3);
    const double *fx = tu_f64(ref, "check.fd.forces_exact_gradient", 9);
    const double *ff = tu_f64(ref, "check.fd.forces_fd", 9);
    double xd = 0.0, cd = 0.0;
    for (int k = 0; k < 3; k++)
        for (int a = 0; a < 3; a++) {
            xd = fmax2(xd, fabs(forces[3 * ai[k] + a] - fx[3 * k + a]));
            cd = fmax2(cd, fabs(forces[3 * ai[k] + a] - ff[3 * k + a]));
        }
    printf(" [softmax: vs detached-max reference forces %.3e; vs central FD %.2e; vs "
           "tie-to-one-edge exact gradient %.2e]", fd, cd, xd);
    ck_assert_msg(cd <= SOFTMAX_FD_TOL, "%s: forces vs central differences max err %.3e", name,
                  cd);
    ck_assert_msg(xd <= SOFTMAX_TIE_GAP, "%s: forces vs exact gradient max err %.3e", name, xd);
    return cd;
}

/* Part 1: op by op on the golden graph, plus energy/forces/dE/dε from the step. */
static void run_stepwise(const char *name)
{
    ecn_safetensors *ref = tu_open_golden(name, "ref");
    ecenet_model *m = tu_golden_model(name);
    const ecn_tensor *tp = ecn_st_find(ref, "input.positions");
    const int64_t N = tp->numel / 3;
    const double *pos = tu_f64(ref, "input.positions", 3 * N);
    const int64_t *ty = tu_i64(ref, "input.types", N);
    int32_t *types = malloc((size_t)N * sizeof *types);
    for (int64_t i = 0; i < N; i++)
        types[i] = (int32_t)ty[i];
    ecn_graph g;
    memset(&g, 0, sizeof g); /* no CSR groupings: the step builds them */
    to_pairlist(ref, "graph.edge_i", "graph.edge_j", "graph.edge_shift", &g.edges);
    to_pairlist(ref, "graph.nb_src", "graph.nb_dst", "graph.nb_shift", &g.nb);

    trace_ctx tc;
    memset(&tc, 0, sizeof tc);
    tc.ref = ref;
    tc.model = m;
    const ecn_tensor *tr = ecn_st_find(ref, "act.edge_rows");
    tc.K = tr->numel;
    tc.rows = tu_i64(ref, "act.edge_rows", tc.K);

    char err[1024];
    ecn_engine *eng = NULL;
    ck_assert_int_eq(ecn_engine_create(m, &ecn_ref_backend, &eng, err, sizeof err), ECENET_OK);
    double *grad = malloc((size_t)(3 * N) * sizeof *grad), virial[9];
    ecn_step_in in = {(size_t)N, pos, types, &g, NULL};
    ecn_step_out out;
    memset(&out, 0, sizeof out);
    out.grad = grad;
    out.virial = virial;
    out.trace = on_trace;
    out.trace_user = &tc;
    ecenet_status st = ecn_step(eng, &in, &out, err, sizeof err);
    ck_assert_msg(st == ECENET_OK, "%s: %s", name, err);
    ck_assert_msg(!tc.first_fail[0], "%s: first op that differs: %s", name, tc.first_fail);
    ck_assert_int_ge(tc.n_compared, 8);

    const double e_ref = tu_f64(ref, "out.energy", 1)[0];
    double erel = fabs(out.energy - e_ref) / fabs(e_ref);
    for (int64_t k = 0; k < 3 * N; k++)
        grad[k] = -grad[k]; /* forces */
    printf("%-14s stepwise (golden graph): %d tensors, worst activation rel err %.2e; "
           "energy rel err %.2e", name, tc.n_compared, tc.worst, erel);
    ck_assert_msg(erel <= TOL_ENERGY, "%s: energy %.17g vs %.17g (rel %.3e)", name, out.energy,
                  e_ref, erel);
    double fd = check_forces(name, m, ref, grad, N);
    printf("; forces max err %.2e (max|F| %.3g)", fd,
           tu_max_abs(tu_f64(ref, "out.forces", 3 * N), (size_t)(3 * N)));
    if (is_periodic(ref)) {
        const double *v_ref = tu_f64(ref, "out.dE_dstrain", 9);
        double vmax = tu_max_abs(v_ref, 9), vd = tu_max_abs_diff(virial, v_ref, 9);
        printf("; dE/deps max err %.2e (max %.3g)", vd, vmax);
        ck_assert_msg(vd <= TOL_FORCE * vmax, "%s: dE/deps max err %.3e of %.3e", name, vd, vmax);
    }
    printf("\n");
    ecn_engine_free(eng);
    free(grad);
    free(types);
    free(g.edges.src); free(g.edges.dst); free(g.edges.shift);
    free(g.nb.src); free(g.nb.dst); free(g.nb.shift);
    ecenet_model_free(m);
    ecn_st_close(ref);
}

/* Part 2: the public API on the golden structure, with our own neighbour list. */
static void run_api(const char *name)
{
    ecn_safetensors *ref = tu_open_golden(name, "ref");
    ecenet_model *m = tu_golden_model(name);
    const ecn_tensor *tp = ecn_st_find(ref, "input.positions");
    const size_t N = (size_t)tp->numel / 3;
    const double *pos = tu_f64(ref, "input.positions", (int64_t)(3 * N));
    const int64_t *z = tu_i64(ref, "input.numbers", (int64_t)N);
    int *numbers = malloc(N * sizeof *numbers);
    for (size_t i = 0; i < N; i++)
        numbers[i] = (int)z[i];
    const int periodic = is_periodic(ref);
    ecenet_system sys = {N, pos, numbers, periodic ? tu_f64(ref, "input.cell", 9) : NULL,
                         {periodic, periodic, periodic}};
    char err[1024];
    ecenet_ctx *ctx = NULL;
    ck_assert_msg(ecenet_ctx_create(m, "ref", ECENET_F64, &ctx, err, sizeof err) == ECENET_OK,
                  "%s", err);
    double energy = 0.0, *forces = malloc(3 * N * sizeof *forces), stress[6], dedeps[9];
    double *ae = malloc(N * sizeof *ae);
    ecenet_outputs out = {&energy, forces, 3 * N, periodic ? stress : NULL, 6,
                          dedeps, 9, ae, N};
    ecenet_status st = ecenet_compute(ctx, &sys, &out);
    ck_assert_msg(st == ECENET_OK, "%s: %s", name, ecenet_ctx_error(ctx));

    const double e_ref = tu_f64(ref, "out.energy", 1)[0];
    double erel = fabs(energy - e_ref) / fabs(e_ref);
    double esum = 0.0;
    for (size_t i = 0; i < N; i++)
        esum += ae[i];
    printf("%-14s public API (own graph):  energy %.17g rel err %.2e", name, energy, erel);
    ck_assert_msg(erel <= TOL_ENERGY, "%s: energy %.17g vs %.17g (rel %.3e)", name, energy,
                  e_ref, erel);
    double fd = check_forces(name, m, ref, forces, (int64_t)N);
    printf("; forces max err %.2e", fd);
    ck_assert_msg(fabs(esum - energy) <= 1e-10 * fabs(energy), "%s: Σ atom energies %.17g != %.17g",
                  name, esum, energy);
    if (periodic) {
        const double *s_ref = tu_f64(ref, "out.stress", 9);
        static const int vi[6] = {0, 4, 8, 5, 2, 1}; /* upper triangle, Voigt order */
        double smax = tu_max_abs(s_ref, 9), sd = 0.0;
        for (int k = 0; k < 6; k++)
            sd = fmax2(sd, fabs(stress[k] - s_ref[vi[k]]));
        printf("; stress max err %.2e (rel %.2e)", sd, sd / smax);
        ck_assert_msg(sd <= TOL_FORCE * smax, "%s: stress max err %.3e of %.3e", name, sd, smax);
    }
    printf("\n");
    ecenet_ctx_free(ctx);
    free(forces);
    free(ae);
    free(numbers);
    ecenet_model_free(m);
    ecn_st_close(ref);
}

START_TEST(test_ethanol_stepwise) { run_stepwise("ethanol"); }
END_TEST
START_TEST(test_diamond_stepwise) { run_stepwise("diamond"); }
END_TEST
START_TEST(test_options_stepwise) { run_stepwise("options"); }
END_TEST
/* Softmax forces are the exact gradient away from ties: ethanol displaced by
 * up to 5e-4 Å (no mirror ties), every component against central differences
 * of our energy with h = 2.5e-7 Å. Measured: the worst component's error falls
 * as h² from 0.29 (h = 1.6e-5) to 6.4e-5 (h = 2.4e-7) of |F| = 8198, i.e. it is
 * FD truncation; the detached-max gradient is off by 0.12 here. Bound 2e-8 of
 * max|F| (measured about 5e-9). */
START_TEST(test_softmax_off_ties)
{
    ecn_safetensors *ref = tu_open_golden("thglab_softmax", "ref");
    ecenet_model *m = tu_golden_model("thglab_softmax");
    const double *p0 = tu_f64(ref, "input.positions", 27);
    const int64_t *z = tu_i64(ref, "input.numbers", 9);
    double pos[27], F[27], E = 0.0;
    int num[9];
    tu_rng_seed(3);
    for (int k = 0; k < 27; k++)
        pos[k] = p0[k] + 1e-3 * (tu_uniform() - 0.5);
    for (int i = 0; i < 9; i++)
        num[i] = (int)z[i];
    char err[1024];
    ecenet_ctx *ctx = NULL;
    ck_assert_int_eq(ecenet_ctx_create(m, "ref", ECENET_F64, &ctx, err, sizeof err), ECENET_OK);
    ecenet_system sys = {9, pos, num, NULL, {0, 0, 0}};
    ecenet_outputs o = {&E, F, 27, NULL, 0, NULL, 0, NULL, 0};
    ck_assert_int_eq(ecenet_compute(ctx, &sys, &o), ECENET_OK);
    double md = 0.0, fm = tu_max_abs(F, 27);
    for (int k = 0; k < 27; k++) {
        const double h = 2.5e-7, x0 = pos[k];
        double Ep = 0.0, Em = 0.0;
        ecenet_outputs oe = {&Ep, NULL, 0, NULL, 0, NULL, 0, NULL, 0};
        pos[k] = x0 + h;
        ck_assert_int_eq(ecenet_compute(ctx, &sys, &oe), ECENET_OK);
        oe.energy = &Em;
        pos[k] = x0 - h;
        ck_assert_int_eq(ecenet_compute(ctx, &sys, &oe), ECENET_OK);
        pos[k] = x0;
        md = fmax2(md, fabs(-(Ep - Em) / (2 * h) - F[k]));
    }
    printf("thglab_softmax off ties: forces vs central differences max err %.2e (max|F| %.3g)\n",
           md, fm);
    ck_assert_msg(md <= 2e-8 * fm, "softmax forces vs FD off ties: %.3e of %.3e", md, fm);
    ecenet_ctx_free(ctx);
    ecenet_model_free(m);
    ecn_st_close(ref);
}
END_TEST

/* With the RealSpace activations switched to the identity, the research
 * model (element FiLM, bottleneck layers, softmax attention MP all on) is
 * exactly rotation invariant (README: 4.8e-16 for these parameters): the
 * golden thglab_softmax model, activations set to identity in memory, ethanol
 * under 5 random rotations. Bound 1e-12 relative (issue 6). */
START_TEST(test_research_identity_so3)
{
    ecn_safetensors *ref = tu_open_golden("thglab_softmax", "ref");
    ecenet_model *m = tu_golden_model("thglab_softmax");
    const int nl = m->cfg.n_mp * m->cfg.n_layers;
    m->cfg.activation = ECENET_ACT_IDENTITY;
    for (int k = 0; k < nl; k++)
        m->rs[k].act = ECENET_ACT_IDENTITY;
    for (int g = 0; g + 1 < m->cfg.n_mp; g++) {
        m->amp[g].nonlin.act = ECENET_ACT_IDENTITY;
        m->amp[g].rnonlin.act = ECENET_ACT_IDENTITY;
    }
    const double *p0 = tu_f64(ref, "input.positions", 27);
    const int64_t *z = tu_i64(ref, "input.numbers", 9);
    int num[9];
    for (int i = 0; i < 9; i++)
        num[i] = (int)z[i];
    char err[1024];
    ecenet_ctx *ctx = NULL;
    ck_assert_int_eq(ecenet_ctx_create(m, "ref", ECENET_F64, &ctx, err, sizeof err), ECENET_OK);
    double E0 = 0.0, pos[27];
    memcpy(pos, p0, sizeof pos);
    ecenet_system sys = {9, pos, num, NULL, {0, 0, 0}};
    ecenet_outputs o = {&E0, NULL, 0, NULL, 0, NULL, 0, NULL, 0};
    ck_assert_int_eq(ecenet_compute(ctx, &sys, &o), ECENET_OK);
    double worst = 0.0;
    tu_rng_seed(17);
    for (int r = 0; r < 5; r++) {
        /* random rotation from a random unit quaternion */
        double q[4], n = 0.0;
        for (int k = 0; k < 4; k++) {
            q[k] = tu_normal();
            n += q[k] * q[k];
        }
        n = sqrt(n);
        for (int k = 0; k < 4; k++)
            q[k] /= n;
        const double w = q[0], x = q[1], y = q[2], zq = q[3];
        const double R[9] = {1 - 2 * (y * y + zq * zq), 2 * (x * y - zq * w), 2 * (x * zq + y * w),
                             2 * (x * y + zq * w), 1 - 2 * (x * x + zq * zq), 2 * (y * zq - x * w),
                             2 * (x * zq - y * w), 2 * (y * zq + x * w), 1 - 2 * (x * x + y * y)};
        for (int i = 0; i < 9; i++)
            for (int a = 0; a < 3; a++)
                pos[3 * i + a] = R[3 * a] * p0[3 * i] + R[3 * a + 1] * p0[3 * i + 1] +
                                 R[3 * a + 2] * p0[3 * i + 2];
        double E = 0.0;
        o.energy = &E;
        ck_assert_int_eq(ecenet_compute(ctx, &sys, &o), ECENET_OK);
        worst = fmax2(worst, fabs(E - E0) / fabs(E0));
    }
    printf("thglab_softmax, identity activation: rotation energy rel err %.2e\n", worst);
    ck_assert_msg(worst <= 1e-12, "identity-activation research model not invariant: %.3e", worst);
    ecenet_ctx_free(ctx);
    ecenet_model_free(m);
    ecn_st_close(ref);
}
END_TEST

START_TEST(test_softmax_stepwise) { run_stepwise("thglab_softmax"); }
END_TEST
START_TEST(test_sum_pbc_stepwise) { run_stepwise("thglab_sum_pbc"); }
END_TEST
START_TEST(test_softmax_api) { run_api("thglab_softmax"); }
END_TEST
START_TEST(test_sum_pbc_api) { run_api("thglab_sum_pbc"); }
END_TEST
START_TEST(test_ethanol_api) { run_api("ethanol"); }
END_TEST
START_TEST(test_diamond_api) { run_api("diamond"); }
END_TEST
START_TEST(test_options_api) { run_api("options"); }
END_TEST

int main(void)
{
    Suite *s = suite_create("golden");
    TCase *tc = tcase_create("public");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, test_ethanol_stepwise);
    tcase_add_test(tc, test_options_stepwise);
    tcase_add_test(tc, test_diamond_stepwise);
    tcase_add_test(tc, test_ethanol_api);
    tcase_add_test(tc, test_options_api);
    tcase_add_test(tc, test_diamond_api);
    suite_add_tcase(s, tc);
    TCase *tr = tcase_create("research");
    tcase_set_timeout(tr, 600);
    tcase_add_test(tr, test_softmax_stepwise);
    tcase_add_test(tr, test_sum_pbc_stepwise);
    tcase_add_test(tr, test_softmax_api);
    tcase_add_test(tr, test_sum_pbc_api);
    tcase_add_test(tr, test_softmax_off_ties);
    tcase_add_test(tr, test_research_identity_so3);
    suite_add_tcase(s, tr);
    return tu_run_suite(s);
}
