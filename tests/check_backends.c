/* Every compiled backend other than ref, op by op against ref, and whole
 * models through the public API. The same tests run for every entry of
 * BACKENDS (omp fp64/fp32, cuda fp64/fp32/fp32+TF32); the per-backend
 * tolerances are data in that table. An entry whose backend is not compiled
 * in (or, for cuda, has no device) is skipped with a printed reason.
 *
 * 1. Ops: each vtable entry (forward and VJP, the fused layer entries too)
 *    on random inputs of several shapes (F not a multiple of 8 or 32, E = 0
 *    and 1, several tiles, odd n_grid, m_max < l_max, l_max = 0, Q = 6 and
 *    9, E = 5000, edge-type corrections on/off, every activation). Inputs
 *    are rounded to the backend's precision first, so only the op's own
 *    arithmetic is measured. Forward outputs are poisoned with NaN
 *    (unwritten elements fail); VJP outputs start from random values and the
 *    increments are compared. Relative L2 error bounds (forward / VJP): omp
 *    fp64 1e-12, cuda fp64 1e-11, fp32 1e-5 / 1e-4, TF32 3e-3.
 *    The op tests are in backends/, one file per op family over harness.c.
 * 2. Golden models (tests/data/golden) through ecenet_compute: energy
 *    against the golden energy and the ref backend's, forces and stress
 *    against the ref backend's and (except for thglab_softmax, where the
 *    library ships the exact gradient of a detached maximum) forces against
 *    the golden out.forces. fp64: energy 1e-12 relative, forces/stress 1e-10
 *    of the largest value; fp32: 1e-5 / 1e-4; TF32: 3e-3 / 3e-3 (forces of
 *    thglab_softmax 2e-2, see BACKENDS).
 * 3. Determinism: 1 and 2 threads, and two runs, give bitwise equal energy,
 *    forces and stress.
 * 4. Guard pages (host-memory backends): the dense ops' operands end near an
 *    unmapped page, so reading past an operand crashes.
 * CUDA-only checks (device detection, memory hooks, the TF32 switch, a
 * single-case mode for compute-sanitizer) are in check_cuda.c. */
#define _DEFAULT_SOURCE /* mmap MAP_ANONYMOUS, for the guard-page test */
#include <check.h>
#include <math.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>
#ifdef _OPENMP
#include <omp.h>
#endif
#include "backend.h"
#include "model.h"
#include "test_util.h"
#include "backends/harness.h"

/* ---- op tests ---------------------------------------------------------------------- */

typedef void (*op_test)(tctx *, setup *);

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void run_op_test(int bi, op_test fn, const char *family)
{
    const ecenet_backend *be = get_backend(bi);
    if (!be)
        return;
    const double t0 = now_s();
    tctx c;
    memset(&c, 0, sizeof c);
    c.be = be;
    c.tol_f = BACKENDS[bi].tol_f;
    c.tol_v = BACKENDS[bi].tol_v;
    for (int si = 0; si < N_SHAPES; si++) {
        tu_rng_seed(1000 + 17 * (uint64_t)si);
        setup u;
        make_setup(&c, &SHAPES[si], &u);
        fn(&c, &u);
        t_release(&c, T_ALL);
        check_backend_error(be, family);
    }
    /* the wall time says where a long run of the suite goes (a GPU
     * machine's make check), not a check */
    printf("%-5s %-8s %-11s: %d shapes, worst rel L2 fwd %.2e, vjp %.2e (%.1f s)\n", be->name,
           BACKENDS[bi].label, family, N_SHAPES, c.worst_f, c.worst_v, now_s() - t0);
}

START_TEST(test_op_geometry) { run_op_test(_i, test_geometry, "geometry"); }
END_TEST
START_TEST(test_op_ace) { run_op_test(_i, test_ace, "ace/embed"); }
END_TEST
START_TEST(test_op_wigner) { run_op_test(_i, test_wigner, "wigner"); }
END_TEST
START_TEST(test_op_edge_frame) { run_op_test(_i, test_edge_frame, "edge_frame"); }
END_TEST
START_TEST(test_op_layers) { run_op_test(_i, test_layers, "layers"); }
END_TEST
START_TEST(test_op_mp) { run_op_test(_i, test_mp, "mp"); }
END_TEST
START_TEST(test_op_attention) { run_op_test(_i, test_attention, "attention"); }
END_TEST
START_TEST(test_op_readout) { run_op_test(_i, test_readout, "readout"); }
END_TEST
START_TEST(test_op_film) { run_op_test(_i, test_film, "film"); }
END_TEST

/* ---- whole models through the public API --------------------------------------------- */

typedef struct {
    size_t N;
    double *pos, cell[9];
    int *numbers, periodic;
} structure;

static int load_structure(const char *name, structure *s)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/golden/%s.ref.safetensors", tu_data_dir(), name);
    FILE *fp = fopen(path, "rb");
    if (!fp)
        return 0;
    fclose(fp);
    s->N = tu_golden_atoms(name);
    s->pos = malloc(3 * s->N * sizeof(double));
    s->numbers = malloc(s->N * sizeof(int));
    ck_assert(s->pos && s->numbers);
    tu_golden_structure(name, s->N, s->pos, s->numbers, s->cell, &s->periodic);
    return 1;
}

static void free_structure(structure *s)
{
    free(s->pos);
    free(s->numbers);
}

typedef struct {
    double energy, stress[6], *forces;
} result;

static ecenet_status compute(const ecenet_model *m, const char *backend, ecenet_precision prec,
                             const structure *s, result *r, char *err, size_t err_len)
{
    ecenet_ctx *ctx = NULL;
    ecenet_status st = ecenet_ctx_create(m, backend, prec, &ctx, err, err_len);
    if (st != ECENET_OK)
        return st;
    r->forces = malloc(3 * s->N * sizeof(double));
    ck_assert_ptr_nonnull(r->forces);
    ecenet_system sys = {s->N, s->pos, s->numbers, s->periodic ? s->cell : NULL,
                         {s->periodic, s->periodic, s->periodic}};
    ecenet_outputs out = {&r->energy, r->forces, 3 * s->N, s->periodic ? r->stress : NULL, 6,
                          NULL, 0, NULL, 0};
    st = ecenet_compute(ctx, &sys, &out);
    if (st != ECENET_OK)
        snprintf(err, err_len, "%s", ecenet_ctx_error(ctx));
    ecenet_ctx_free(ctx);
    return st;
}

static const char *GOLDEN[] = {"ethanol", "diamond", "options", "thglab_sum_pbc",
                               "thglab_softmax"};
#define N_GOLDEN ((int)(sizeof GOLDEN / sizeof GOLDEN[0]))

/* The golden case's model and structure; 0 (with a skip line) if either is
 * not available in this build. */
static int load_case(const char *name, ecenet_model **m, structure *s)
{
    char path[4096], err[1024];
    snprintf(path, sizeof path, "%s/golden/%s.model.safetensors", tu_data_dir(), name);
    *m = NULL;
    if (ecenet_model_load(path, m, err, sizeof err) != ECENET_OK) {
        printf("skip: %s: the model does not load in this build (%s)\n", name, err);
        return 0;
    }
    if (!load_structure(name, s)) {
        printf("skip: %s: no golden structure\n", name);
        ecenet_model_free(*m);
        *m = NULL;
        return 0;
    }
    return 1;
}

static void run_golden(int bi, const char *name)
{
    const ecenet_backend *be = get_backend(bi);
    if (!be)
        return;
    ecenet_model *m = NULL;
    structure s;
    if (!load_case(name, &m, &s))
        return;
    char err[1024];
    /* the golden out.forces: the reference's, except where the library ships the
     * exact gradient of a detached maximum (thglab_softmax) */
    const int exact_grad = !strcmp(name, "thglab_softmax");
    const bk_id *b = &BACKENDS[bi];
    const double tol_e = b->tol_e, tol_f = exact_grad ? b->tol_F_sharp : b->tol_F;
    result ref, got;
    ck_assert_msg(compute(m, "ref", ECENET_F64, &s, &ref, err, sizeof err) == ECENET_OK,
                  "%s: ref: %s", name, err);
    ck_assert_msg(compute(m, be->name, (ecenet_precision)be->precision, &s, &got, err,
                          sizeof err) == ECENET_OK,
                  "%s: %s: %s", name, be->name, err);
    check_backend_error(be, name);
    ecn_safetensors *gold = tu_open_golden(name, "ref");
    const double e_gold = tu_f64(gold, "out.energy", 1)[0];
    double fdg = 0.0, fmaxg = 1.0;
    if (!exact_grad) {
        const double *fg = tu_f64(gold, "out.forces", (int64_t)(3 * s.N));
        fmaxg = tu_max_abs(fg, 3 * s.N);
        fdg = tu_max_abs_diff(got.forces, fg, 3 * s.N);
    }
    ecn_st_close(gold);
    const double erel_gold = fabs(got.energy - e_gold) / fabs(e_gold);
    const double erel_ref = fabs(got.energy - ref.energy) / fabs(ref.energy);
    const double fmax = tu_max_abs(ref.forces, 3 * s.N);
    const double fd = tu_max_abs_diff(got.forces, ref.forces, 3 * s.N);
    printf("%-5s %-8s %-14s N=%3zu energy rel err %.2e (vs golden %.2e); forces max err %.2e "
           "of max|F| %.3g",
           be->name, b->label, name, s.N, erel_ref, erel_gold, fd, fmax);
    if (!exact_grad)
        printf(" (vs golden %.2e)", fdg);
    fflush(stdout);
    /* the golden energy is the reference's to ~1e-14, plus fp32 rounding for f32 */
    ck_assert_msg(erel_gold <= tol_e, "%s: energy %.17g vs golden %.17g (rel %.3e)", name,
                  got.energy, e_gold, erel_gold);
    ck_assert_msg(erel_ref <= tol_e, "%s: energy %.17g vs ref %.17g (rel %.3e)", name, got.energy,
                  ref.energy, erel_ref);
    ck_assert_msg(fd <= tol_f * fmax, "%s: forces max err %.3e > %.1e x %.3e", name, fd, tol_f,
                  fmax);
    if (!exact_grad)
        ck_assert_msg(fdg <= tol_f * fmaxg, "%s: forces vs golden max err %.3e > %.1e x %.3e",
                      name, fdg, tol_f, fmaxg);
    if (s.periodic) {
        const double smax = tu_max_abs(ref.stress, 6);
        const double sd = tu_max_abs_diff(got.stress, ref.stress, 6);
        printf("; stress max err %.2e of %.3g", sd, smax);
        ck_assert_msg(sd <= tol_f * smax, "%s: stress max err %.3e > %.1e x %.3e", name, sd, tol_f,
                      smax);
    }
    printf("\n");
    free(ref.forces);
    free(got.forces);
    free_structure(&s);
    ecenet_model_free(m);
}

START_TEST(test_golden)
{
    /* _i enumerates (backend, case) */
    run_golden(_i / N_GOLDEN, GOLDEN[_i % N_GOLDEN]);
}
END_TEST

/* Same bits for 1 and 2 threads, and for two runs. */
static void run_determinism(int bi, const char *name)
{
    const ecenet_backend *be = get_backend(bi);
    if (!be)
        return;
    ecenet_model *m = NULL;
    structure s;
    if (!load_case(name, &m, &s))
        return;
    char err[1024];
    result r[3];
#ifdef _OPENMP
    const int nthreads[3] = {1, 2, 2};
#endif
    for (int k = 0; k < 3; k++) {
#ifdef _OPENMP
        omp_set_num_threads(nthreads[k]);
#endif
        ck_assert_msg(compute(m, be->name, (ecenet_precision)be->precision, &s, &r[k], err,
                              sizeof err) == ECENET_OK,
                      "%s: %s", name, err);
        check_backend_error(be, name);
    }
    for (int k = 1; k < 3; k++) {
        ck_assert_msg(memcmp(&r[k].energy, &r[0].energy, sizeof(double)) == 0,
                      "%s %s: energy %.17g (run %d) != %.17g (1 thread)", be->name, name,
                      r[k].energy, k, r[0].energy);
        ck_assert_msg(memcmp(r[k].forces, r[0].forces, 3 * s.N * sizeof(double)) == 0,
                      "%s %s: forces differ between run %d and the 1-thread run", be->name, name,
                      k);
        if (s.periodic)
            ck_assert_msg(memcmp(r[k].stress, r[0].stress, sizeof r[0].stress) == 0,
                          "%s %s: stress differs between run %d and the 1-thread run", be->name,
                          name, k);
    }
    printf("%-5s %-8s %-14s bitwise equal for 1 thread, 2 threads and a second run\n",
           be->name, BACKENDS[bi].label, name);
    for (int k = 0; k < 3; k++)
        free(r[k].forces);
    free_structure(&s);
    ecenet_model_free(m);
}

/* periodic, edge-type corrections, softmax attention MP */
static const char *DETERMINISM[] = {"diamond", "options", "thglab_softmax"};
#define N_DETERMINISM ((int)(sizeof DETERMINISM / sizeof DETERMINISM[0]))

START_TEST(test_determinism)
{
    run_determinism(_i / N_DETERMINISM, DETERMINISM[_i % N_DETERMINISM]);
}
END_TEST

/* ---- buffers that end near an unmapped page (host-memory backends) -----------
 * Every input and output of the dense ops ends GUARD_SLACK bytes before a
 * PROT_NONE page (the omp backend pads each allocation by that much, for the
 * vector loads of BLIS's kernels at a row's end), so a read further past the
 * end of an operand is a crash here instead of a silent read of a
 * neighbouring buffer: BLIS's small-matrix kernels read up to one row stride
 * past A, which omp_gemm allows only on interior tiles. */
#define GUARD_SLACK 256

typedef struct {
    void *base[256];
    size_t len[256];
    int n;
} guard_pool;

static void *guarded(guard_pool *g, const ecenet_backend *be, size_t count)
{
    const size_t pg = (size_t)sysconf(_SC_PAGESIZE);
    const size_t bytes = count * be->real_size + GUARD_SLACK;
    const size_t tot = ((bytes + pg - 1) / pg + 1) * pg;
    char *p = mmap(NULL, tot, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    ck_assert(p != MAP_FAILED);
    ck_assert_int_eq(mprotect(p + tot - pg, pg, PROT_NONE), 0);
    ck_assert_int_lt(g->n, 256);
    g->base[g->n] = p;
    g->len[g->n++] = tot;
    double *h = malloc((count + 1) * sizeof *h);
    ck_assert_ptr_nonnull(h);
    for (size_t k = 0; k < count; k++)
        h[k] = 0.5 * tu_normal();
    char *d = p + tot - pg - bytes;
    memset(d + count * be->real_size, 0, GUARD_SLACK);
    if (count)
        be->upload(d, h, count);
    free(h);
    return d;
}

static void guard_release(guard_pool *g)
{
    for (int k = 0; k < g->n; k++)
        munmap(g->base[k], g->len[k]);
    g->n = 0;
}

START_TEST(test_guard_pages)
{
    const ecenet_backend *be = get_backend(_i);
    if (!be || strcmp(be->name, "omp") != 0) /* device memory cannot be guarded this way */
        return;
    tu_rng_seed(77);
    static const int widths[] = {3, 4, 18, 30, 64};
    static const int64_t edges[] = {1, 5, 33, 70};
    const int nw = (int)(sizeof widths / sizeof widths[0]);
    guard_pool g;
    memset(&g, 0, sizeof g);
    int calls = 0;
    for (int a = 0; a < nw; a++)
        for (int b = 0; b < nw; b++)
            for (int q = 0; q < 4; q++) {
                const int fin = widths[a], fout = widths[b], Q = 2, T = 2;
                const int64_t E = edges[q];
                const size_t XI = (size_t)E * Q * 2 * fin, XO = (size_t)E * Q * 2 * fout;
                int32_t *types = malloc((size_t)E * sizeof *types);
                for (int64_t e = 0; e < E; e++)
                    types[e] = (int32_t)(e % T);
                int32_t *ty = be->alloc((size_t)E * sizeof *ty);
                be->upload_idx(ty, types, (size_t)E);
                const size_t nwt = (size_t)Q * fout * fin;
                ecenet_linear_params lp = {fin, fout, Q, T, guarded(&g, be, nwt),
                                           guarded(&g, be, (size_t)fout), guarded(&g, be, T * nwt),
                                           guarded(&g, be, T * nwt), NULL, 0, NULL, NULL};
                void *X = guarded(&g, be, XI), *Y = guarded(&g, be, XO);
                be->linear_fwd(E, &lp, ty, ty, X, Y);
                be->linear_vjp(E, &lp, ty, ty, Y, X);
                ecenet_dims dm;
                memset(&dm, 0, sizeof dm);
                dm.E = E;
                dm.Q = Q;
                dm.F = fin;
                ecenet_mlp_params mp;
                memset(&mp, 0, sizeof mp);
                mp.n_layers = 2;
                mp.T = T;
                mp.dims[0] = fin;
                mp.dims[1] = fout;
                mp.dims[2] = 3;
                mp.w[0] = guarded(&g, be, (size_t)fout * fin);
                mp.b[0] = guarded(&g, be, (size_t)fout);
                mp.w_src[0] = guarded(&g, be, (size_t)T * fout * fin);
                mp.w[1] = guarded(&g, be, (size_t)3 * fout);
                mp.b[1] = guarded(&g, be, 3);
                void *H = guarded(&g, be, (size_t)E * fout), *y = guarded(&g, be, (size_t)E * 3);
                be->mlp_fwd(&dm, &mp, ty, ty, X, H, y);
                be->mlp_vjp(&dm, &mp, ty, ty, H, y, X);
                if (fin == fout && be->layer_fwd) {
                    ecenet_realspace_params rp;
                    memset(&rp, 0, sizeof rp);
                    rp.F = fin;
                    rp.Q = Q;
                    rp.G = 5;
                    rp.T = T;
                    rp.cos_synth = guarded(&g, be, (size_t)Q * 5);
                    rp.sin_synth = guarded(&g, be, (size_t)Q * 5);
                    rp.cos_analysis = guarded(&g, be, (size_t)Q * 5);
                    rp.sin_analysis = guarded(&g, be, (size_t)Q * 5);
                    void *Z = guarded(&g, be, XO), *tmp = guarded(&g, be, XO);
                    be->layer_fwd(E, &lp, &rp, ty, ty, X, Z);
                    be->layer_vjp(E, &lp, &rp, ty, ty, Z, X, tmp);
                }
                be->release(ty);
                free(types);
                guard_release(&g);
                calls++;
            }
    printf("%-5s %-8s guard pages: %d shapes of linear, MLP and fused layer ops, no read "
           "beyond an operand's slack\n", be->name, BACKENDS[_i].label, calls);
}
END_TEST

int main(void)
{
    setvbuf(stdout, NULL, _IOLBF, 0); /* lines reach the log before a failing check */
#ifdef __GLIBC__
    /* every case frees its tensors before the next allocates the same sizes
     * (t_release): keep that memory in the heap instead of glibc's mmap and
     * trim, whose fresh pages cost a page fault each on every case */
    mallopt(M_MMAP_THRESHOLD, 1 << 30);
    mallopt(M_TRIM_THRESHOLD, 1 << 30);
#endif
    Suite *s = suite_create("backends");
    TCase *ops = tcase_create("ops");
    tcase_set_timeout(ops, 600);
    tcase_add_loop_test(ops, test_op_geometry, 0, N_BACKENDS);
    tcase_add_loop_test(ops, test_op_ace, 0, N_BACKENDS);
    tcase_add_loop_test(ops, test_op_wigner, 0, N_BACKENDS);
    tcase_add_loop_test(ops, test_op_edge_frame, 0, N_BACKENDS);
    tcase_add_loop_test(ops, test_op_layers, 0, N_BACKENDS);
    tcase_add_loop_test(ops, test_op_mp, 0, N_BACKENDS);
    tcase_add_loop_test(ops, test_op_attention, 0, N_BACKENDS);
    tcase_add_loop_test(ops, test_op_readout, 0, N_BACKENDS);
    tcase_add_loop_test(ops, test_op_film, 0, N_BACKENDS);
    suite_add_tcase(s, ops);
    TCase *gold = tcase_create("golden");
    tcase_set_timeout(gold, 600);
    tcase_add_loop_test(gold, test_golden, 0, N_BACKENDS * N_GOLDEN);
    suite_add_tcase(s, gold);
    TCase *guard = tcase_create("guard");
    tcase_set_timeout(guard, 600);
    tcase_add_loop_test(guard, test_guard_pages, 0, N_BACKENDS);
    suite_add_tcase(s, guard);
    TCase *det = tcase_create("determinism");
    tcase_set_timeout(det, 600);
    tcase_add_loop_test(det, test_determinism, 0, N_BACKENDS * N_DETERMINISM);
    suite_add_tcase(s, det);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int nf = srunner_ntests_failed(sr);
    srunner_free(sr);
    return nf ? EXIT_FAILURE : EXIT_SUCCESS;
}
