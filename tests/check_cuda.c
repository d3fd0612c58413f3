/* CUDA-specific checks. The op-by-op comparison against ref, the golden
 * models and the determinism checks run for cuda (fp64, fp32, fp32+TF32) in
 * check_backends.c, with the same source as every other backend; this file
 * holds only what is particular to CUDA:
 *
 * 1. Device detection: without a CUDA device (or without the backend
 *    compiled in) the program prints the reason and exits 77 (SKIP). The
 *    check runs in a child process, so the Check fork mode keeps working (a
 *    CUDA context does not survive fork()).
 * 2. Memory hooks: an impossible allocation is a NULL, not a recorded CUDA
 *    error; upload/download/zero round trips.
 * 3. The TF32 switch (ecn_cuda_set_tf32 / ecn_cuda_tf32): returns the
 *    previous setting, and switching it back gives the same bits as before.
 * 4. Golden case "golden": one golden model (ECENET_CUDA_GOLDEN, default
 *    diamond) in fp64, fp32 and fp32+TF32, two runs each, bitwise equal and
 *    without a CUDA error. Meant for compute-sanitizer runs:
 *      CK_FORK=no CK_RUN_CASE=golden ECENET_CUDA_GOLDEN=diamond \
 *        compute-sanitizer --tool memcheck tests/check_cuda */
#define _POSIX_C_SOURCE 200809L
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>
#include "backend.h"
#include "model.h"
#include "test_util.h"
#ifdef ECENET_HAVE_CUDA
#include "cuda_backend.h"

typedef struct {
    int prec, tf32;
    const char *label;
} cfg_id;

static const cfg_id CONFIGS[] = {
    {ECENET_F64, 0, "f64"},
    {ECENET_F32, 0, "f32"},
    {ECENET_F32, 1, "f32+tf32"},
};
#define N_CONFIGS ((int)(sizeof CONFIGS / sizeof CONFIGS[0]))

static const ecenet_backend *get_backend(int i)
{
    const ecenet_backend *be = ecn_backend_get("cuda", CONFIGS[i].prec);
    ck_assert_msg(be != NULL, "cuda %s: backend not available", CONFIGS[i].label);
    ecn_cuda_set_tf32(CONFIGS[i].tf32);
    return be;
}

/* a failing CUDA call anywhere in a test fails the test */
static void check_no_cuda_error(const char *where)
{
    char msg[600];
    int code = ecn_cuda_error(msg, sizeof msg);
    ck_assert_msg(code == 0, "%s: %s", where, msg);
}

/* memory hooks: an impossible allocation is a NULL (not a recorded error) */
START_TEST(test_memory)
{
    const ecenet_backend *be = get_backend(_i);
    ck_assert_ptr_null(be->alloc((size_t)1 << 52));
    check_no_cuda_error("alloc of 4 PiB");
    void *p = be->alloc(0);
    ck_assert_ptr_nonnull(p);
    be->release(p);
    double h[5] = {1.5, -2.25, 3.0, 0.0, 1e-3}, g[5];
    void *d = be->alloc(5 * be->real_size);
    be->upload(d, h, 5);
    be->download(g, d, 5);
    for (int k = 0; k < 5; k++)
        ck_assert(fabs(g[k] - h[k]) <= 1e-7 * fabs(h[k]));
    be->zero(d, 5 * be->real_size);
    be->download(g, d, 5);
    for (int k = 0; k < 5; k++)
        ck_assert(g[k] == 0.0);
    be->release(d);
    check_no_cuda_error("memory hooks");
}
END_TEST

/* ---- whole models through the public API --------------------------------------------- */

typedef struct {
    size_t N;
    double *pos, cell[9];
    int *numbers, periodic;
} structure;

static void load_structure(const char *name, structure *s)
{
    s->N = tu_golden_atoms(name);
    s->pos = malloc(3 * s->N * sizeof(double));
    s->numbers = malloc(s->N * sizeof(int));
    ck_assert(s->pos && s->numbers);
    tu_golden_structure(name, s->N, s->pos, s->numbers, s->cell, &s->periodic);
}

static void free_structure(structure *s)
{
    free(s->pos);
    free(s->numbers);
}

typedef struct {
    double energy, stress[6], *forces;
} result;

static void compute(const ecenet_model *m, ecenet_precision prec, const structure *s, result *r)
{
    char err[1024];
    ecenet_ctx *ctx = NULL;
    ck_assert_msg(ecenet_ctx_create(m, "cuda", prec, &ctx, err, sizeof err) == ECENET_OK,
                  "cuda: %s", err);
    r->forces = malloc(3 * s->N * sizeof(double));
    ck_assert_ptr_nonnull(r->forces);
    ecenet_system sys = {s->N, s->pos, s->numbers, s->periodic ? s->cell : NULL,
                         {s->periodic, s->periodic, s->periodic}};
    ecenet_outputs out = {&r->energy, r->forces, 3 * s->N, s->periodic ? r->stress : NULL, 6,
                          NULL, 0, NULL, 0};
    ck_assert_msg(ecenet_compute(ctx, &sys, &out) == ECENET_OK, "cuda: %s",
                  ecenet_ctx_error(ctx));
    ecenet_ctx_free(ctx);
}

static ecenet_model *load_model(const char *name)
{
    char path[4096], err[1024];
    snprintf(path, sizeof path, "%s/golden/%s.model.safetensors", tu_data_dir(), name);
    ecenet_model *m = NULL;
    ck_assert_msg(ecenet_model_load(path, &m, err, sizeof err) == ECENET_OK, "%s: %s", name, err);
    return m;
}

static int same_bits(const result *a, const result *b, const structure *s)
{
    return memcmp(&a->energy, &b->energy, sizeof(double)) == 0 &&
           memcmp(a->forces, b->forces, 3 * s->N * sizeof(double)) == 0 &&
           (!s->periodic || memcmp(a->stress, b->stress, sizeof a->stress) == 0);
}

/* The TF32 switch returns the previous setting, and switching TF32 on and
 * off again leaves the fp32 results bit for bit as they were. */
START_TEST(test_tf32_switch)
{
    const ecenet_backend *be = ecn_backend_get("cuda", ECENET_F32);
    ck_assert_ptr_nonnull(be);
    ecn_cuda_set_tf32(0);
    ck_assert_int_eq(ecn_cuda_tf32(), 0);
    ck_assert_int_eq(ecn_cuda_set_tf32(1), 0);
    ck_assert_int_eq(ecn_cuda_tf32(), 1);
    ck_assert_int_eq(ecn_cuda_set_tf32(0), 1);
    ck_assert_int_eq(ecn_cuda_tf32(), 0);
    ecenet_model *m = load_model("diamond");
    structure s;
    load_structure("diamond", &s);
    result r[3];
    compute(m, ECENET_F32, &s, &r[0]);
    ecn_cuda_set_tf32(1);
    compute(m, ECENET_F32, &s, &r[1]);
    ecn_cuda_set_tf32(0);
    compute(m, ECENET_F32, &s, &r[2]);
    check_no_cuda_error("tf32 switch");
    ck_assert_msg(same_bits(&r[0], &r[2], &s),
                  "fp32 results differ after switching TF32 on and off (energy %.17g vs %.17g)",
                  r[2].energy, r[0].energy);
    printf("cuda tf32 switch: diamond energy fp32 %.17g, tf32 %.17g, fp32 again bitwise equal\n",
           r[0].energy, r[1].energy);
    for (int k = 0; k < 3; k++)
        free(r[k].forces);
    free_structure(&s);
    ecenet_model_free(m);
}
END_TEST

/* One golden case (ECENET_CUDA_GOLDEN, default diamond), two runs, bitwise
 * equal and without a CUDA error: small enough for compute-sanitizer. */
START_TEST(test_golden)
{
    const char *name = getenv("ECENET_CUDA_GOLDEN");
    if (!name || !*name)
        name = "diamond";
    const ecenet_backend *be = get_backend(_i);
    ecenet_model *m = load_model(name);
    structure s;
    load_structure(name, &s);
    result r[2];
    for (int k = 0; k < 2; k++)
        compute(m, (ecenet_precision)be->precision, &s, &r[k]);
    check_no_cuda_error(name);
    ck_assert_msg(isfinite(r[0].energy), "cuda %s %s: energy %g", CONFIGS[_i].label, name,
                  r[0].energy);
    ck_assert_msg(same_bits(&r[0], &r[1], &s), "cuda %s %s: two runs differ (energy %.17g vs %.17g)",
                  CONFIGS[_i].label, name, r[1].energy, r[0].energy);
    printf("cuda %-8s %-14s energy %.17g, bitwise equal in two runs\n", CONFIGS[_i].label, name,
           r[0].energy);
    for (int k = 0; k < 2; k++)
        free(r[k].forces);
    free_structure(&s);
    ecenet_model_free(m);
}
END_TEST
#endif /* ECENET_HAVE_CUDA */

/* 1 if a CUDA device is usable; asked in a child process so that this
 * process never initialises CUDA before Check forks the tests. */
static int cuda_usable(char *why, size_t len)
{
#ifdef ECENET_HAVE_CUDA
    int fd[2];
    if (pipe(fd) != 0) {
        snprintf(why, len, "pipe() failed");
        return 0;
    }
    pid_t pid = fork();
    if (pid < 0) {
        snprintf(why, len, "fork() failed");
        return 0;
    }
    if (pid == 0) {
        char msg[512] = "";
        int ok = ecn_cuda_available(msg, sizeof msg);
        ssize_t w = write(fd[1], msg, strlen(msg) + 1);
        (void)w;
        _exit(ok ? 0 : 1);
    }
    close(fd[1]);
    ssize_t n = read(fd[0], why, len - 1);
    why[n > 0 ? n : 0] = 0;
    close(fd[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    return WIFEXITED(status) && WEXITSTATUS(status) == 0;
#else
    snprintf(why, len, "the cuda backend is not compiled in (configure --with-cuda)");
    return 0;
#endif
}

int main(void)
{
    char why[512] = "";
    setvbuf(stdout, NULL, _IOLBF, 0); /* lines reach the log before a failing check */
    if (!cuda_usable(why, sizeof why)) {
        printf("SKIP: %s\n", why);
        return 77;
    }
#ifdef ECENET_HAVE_CUDA
    Suite *s = suite_create("cuda");
    TCase *mem = tcase_create("memory");
    tcase_add_loop_test(mem, test_memory, 0, N_CONFIGS);
    suite_add_tcase(s, mem);
    TCase *tf = tcase_create("tf32");
    tcase_set_timeout(tf, 600);
    tcase_add_test(tf, test_tf32_switch);
    suite_add_tcase(s, tf);
    TCase *gold = tcase_create("golden");
    tcase_set_timeout(gold, 600);
    tcase_add_loop_test(gold, test_golden, 0, N_CONFIGS);
    suite_add_tcase(s, gold);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int nf = srunner_ntests_failed(sr);
    srunner_free(sr);
    return nf ? EXIT_FAILURE : EXIT_SUCCESS;
#else
    return 77;
#endif
}
