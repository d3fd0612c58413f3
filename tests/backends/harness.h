/* The harness shared by the op tests of tests/backends/ (one file per op
 * family, run by check_backends.c for every backend and shape): the backends
 * under test, tensors on the host (ref) and on the backend, the shapes. */
#ifndef TESTS_BACKENDS_HARNESS_H
#define TESTS_BACKENDS_HARNESS_H

#include <stddef.h>
#include <stdint.h>
#include "backend.h"

/* ---- the backends under test ------------------------------------------------ */

typedef struct {
    const char *name;
    int prec, tf32;        /* tf32: cuda fp32 GEMMs on TF32 tensor cores */
    const char *label;
    double tol_f, tol_v;   /* ops: relative L2, forward / VJP */
    double tol_e, tol_F;   /* golden: energy (relative), forces/stress (of the max) */
    double tol_F_sharp;    /* golden forces/stress of thglab_softmax */
} bk_id;

/* the rows that every test runs for, with their tolerances */
extern const bk_id BACKENDS[];
extern const int N_BACKENDS;
/* row i's backend, NULL (with a printed skip line) where it is not available;
 * in the forked test process only */
const ecenet_backend *get_backend(int i);
/* a failing CUDA call anywhere in a test fails the test */
void check_backend_error(const ecenet_backend *be, const char *where);

/* ---- tensors living on the host (ref) and on the backend --------------------- */

typedef struct {
    const ecenet_backend *be;
    double tol_f, tol_v;
    char shape[160];
    void *owned[4096];
    int n_owned;
    double worst_f, worst_v;
} tctx;

typedef struct {
    double *h;      /* host fp64: the ref's buffer */
    void *d;        /* backend buffer */
    double *init;   /* accumulators: the initial values */
    size_t n;
} tens;

/* host and backend buffers, owned by pools. A mark is a point in both;
 * t_release frees what was allocated after it: every buffer after each
 * shape (T_ALL), and a case's buffers before the next case of a loop, so
 * that the loop reuses its memory (fresh pages for every case were a third
 * of check_backends' time) */
typedef struct {
    int host, dev;
} t_mark_t;
#define T_ALL ((t_mark_t){0, 0})
t_mark_t t_mark(const tctx *c);
void t_release(tctx *c, t_mark_t m);
void *dalloc(tctx *c, size_t bytes);
double *hbuf(tctx *c, size_t n);
/* inputs (rounded to the backend's precision), forward outputs (NaN) and
 * VJP outputs (random initial values; t_acc_like: those of t) */
tens t_from(tctx *c, const double *src, size_t n);
tens t_rand(tctx *c, size_t n, double scale);
tens t_out(tctx *c, size_t n);
tens t_acc(tctx *c, size_t n);
tens t_acc_like(tctx *c, const tens *t);
/* t's backend buffer as before its op ran (NaN for a forward output, the
 * initial values of a VJP output), so that one ref result checks several
 * runs of the op (cuda's kernel modes) */
void t_reset(tctx *c, const tens *t);
/* the backend's result against the ref's (mask: only where nonzero), and two
 * backend results bit for bit */
void t_check_mask(tctx *c, const tens *t, const char *op, const char *what, int vjp,
                  const unsigned char *mask);
void t_check(tctx *c, const tens *t, const char *op, const char *what, int vjp);
void t_same_bits(tctx *c, const tens *a, const tens *b, const char *op, const char *what);

/* cuda's kernel choices (cuda_backend.h) that the tests switch: set one
 * (returns the old setting; 0, and nothing done, on other backends) and
 * count the launches that took it */
enum cuda_choice {
    CHOICE_FRAME_ASYNC,   /* cp.async staging of the bond-frame kernels */
    CHOICE_FRAME_ATOM_RB, /* the register-blocked per-atom frame kernel */
    CHOICE_LAYER_TC       /* the tensor-core layer kernels (a mode) */
};
int choice_set(int is_cuda, enum cuda_choice w, int v);
unsigned long long choice_runs(int is_cuda, enum cuda_choice w);
/* the same on c's backend: cp.async staging (fa), the register-blocked
 * per-atom kernel (far) */
int fa_set(const tctx *c, int on);
unsigned long long fa_runs(const tctx *c);
int far_set(const tctx *c, int on);
unsigned long long far_runs(const tctx *c);

/* the launches since r0 of the register-blocked per-atom kernel (far) and
 * with cp.async staging (fa) are those expected */
void far_expect(const tctx *c, unsigned long long r0, size_t E, int L, const char *what);
void fa_expect(const tctx *c, unsigned long long r0, unsigned long long n, size_t E,
               const char *what);

/* ---- shapes ----------------------------------------------------------------------- */

typedef struct {
    int L, M, C, G, T, R, act, corr;
    int64_t N, E, P;
} shape;

/* the shapes that every op test runs on */
extern const shape SHAPES[];
extern const int N_SHAPES;

/* everything a test of one shape needs, host and backend side */
typedef struct {
    shape s;
    ecenet_dims dh, dd;                 /* host / backend index pointers */
    int32_t *edge_i, *edge_j, *nb_src, *nb_dst, *types, *tsrc, *ttgt;   /* host */
    int32_t *d_edge_i, *d_edge_j, *d_nb_src, *d_nb_dst, *d_types, *d_tsrc, *d_ttgt;
} setup;

/* a shape's setup (random types, edges and pairs; their CSR lists) */
void make_setup(tctx *c, const shape *s, setup *u);

/* inputs used by several families: edge vectors (random directions in both
 * Wigner charts, lengths in [0.5, 3)) and their lengths; edge features X
 * (the sin m = 0 slot zero, as in a model, or random everywhere) */
void edge_vectors(tctx *c, int64_t n, tens *d, tens *r);
tens features(tctx *c, int64_t E, int Q, int F, int sin0_zero);

/* ---- the op families, each over every shape (run_op_test) --------------------------- */

/* geometry.c */
void test_geometry(tctx *c, setup *u);
void test_ace(tctx *c, setup *u);
void test_wigner(tctx *c, setup *u);
/* edge_frame.c */
void test_edge_frame(tctx *c, setup *u);
/* layers.c */
void test_layers(tctx *c, setup *u);
/* mp.c */
void test_mp(tctx *c, setup *u);
void test_attention(tctx *c, setup *u);
/* readout.c */
void test_readout(tctx *c, setup *u);
void test_film(tctx *c, setup *u);

#endif
