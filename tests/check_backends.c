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
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#ifdef _OPENMP
#include <omp.h>
#endif
#include "backend.h"
#include "cg.h"
#include "model.h"
#include "ref.h"
#include "test_util.h"
#ifdef ECENET_HAVE_CUDA
#include "cuda_backend.h"
#endif

/* ---- the backends under test ------------------------------------------------ */

typedef struct {
    const char *name;
    int prec, tf32;        /* tf32: cuda fp32 GEMMs on TF32 tensor cores */
    const char *label;
    double tol_f, tol_v;   /* ops: relative L2, forward / VJP */
    double tol_e, tol_F;   /* golden: energy (relative), forces/stress (of the max) */
    double tol_F_sharp;    /* golden forces/stress of thglab_softmax */
} bk_id;

/* TF32 rounds every GEMM input to 11 significant bits. thglab_softmax's
 * forces (max|F| 1.5e4, from a sharp per-receiver softmax) are badly
 * conditioned: already in fp32 their error is ~1.4e-5 of max|F| (10x the
 * other cases), and TF32 scales that by ~2^13 input precision, so its forces
 * get a TF32-specific 2e-2 bound (energy stays 3e-3). */
static const bk_id BACKENDS[] = {
    /* name   prec        tf32 label       tol_f  tol_v  tol_e  tol_F  tol_F_sharp */
    {"omp", ECENET_F64, 0, "f64", 1e-12, 1e-12, 1e-12, 1e-10, 1e-10},
    {"omp", ECENET_F32, 0, "f32", 1e-5, 1e-4, 1e-5, 1e-4, 1e-4},
    {"cuda", ECENET_F64, 0, "f64", 1e-11, 1e-11, 1e-12, 1e-10, 1e-10},
    {"cuda", ECENET_F32, 0, "f32", 1e-5, 1e-4, 1e-5, 1e-4, 1e-4},
    {"cuda", ECENET_F32, 1, "f32+tf32", 3e-3, 3e-3, 3e-3, 3e-3, 2e-2},
};
#define N_BACKENDS ((int)(sizeof BACKENDS / sizeof BACKENDS[0]))

/* Called inside the forked test process only: a CUDA context does not
 * survive fork(), so main() never touches a backend. */
static const ecenet_backend *get_backend(int i)
{
    const bk_id *b = &BACKENDS[i];
    /* ECENET_TEST_BACKEND=NAME runs only that backend's rows (GPU runs),
     * NAME:LABEL (e.g. cuda:f32) only that row */
    const char *only = getenv("ECENET_TEST_BACKEND");
    char row[64];
    snprintf(row, sizeof row, "%s:%s", b->name, b->label);
    if (only && *only && strcmp(only, strchr(only, ':') ? row : b->name)) {
        printf("skip: backend %s %s: ECENET_TEST_BACKEND=%s\n", b->name, b->label, only);
        return NULL;
    }
    const ecenet_backend *be = ecn_backend_get(b->name, b->prec);
    if (!be) {
        char why[512] = "not compiled in";
#ifdef ECENET_HAVE_CUDA
        if (!strcmp(b->name, "cuda") && !ecn_cuda_available(why, sizeof why) && !why[0])
            snprintf(why, sizeof why, "no usable CUDA device");
#endif
        printf("skip: backend %s %s: %s\n", b->name, b->label, why);
        return NULL;
    }
#ifdef ECENET_HAVE_CUDA
    if (!strcmp(b->name, "cuda"))
        ecn_cuda_set_tf32(b->tf32);
#endif
    return be;
}

/* a failing CUDA call anywhere in a test fails the test */
static void check_backend_error(const ecenet_backend *be, const char *where)
{
#ifdef ECENET_HAVE_CUDA
    if (!strcmp(be->name, "cuda")) {
        char msg[600];
        int code = ecn_cuda_error(msg, sizeof msg);
        ck_assert_msg(code == 0, "cuda: %s: %s", where, msg);
    }
#else
    (void)be;
    (void)where;
#endif
}

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

static void *own(tctx *c, void *p)
{
    ck_assert_ptr_nonnull(p);
    ck_assert_int_lt(c->n_owned, 4096);
    c->owned[c->n_owned++] = p;
    return p;
}

static void release_all(tctx *c)
{
    for (int k = 0; k < c->n_owned; k++)
        free(c->owned[k]);
    c->n_owned = 0;
}

/* backend buffers are released through the backend */
typedef struct {
    const ecenet_backend *be;
    void *p[4096];
    int n;
} dev_pool;
static dev_pool DP;

static void *dalloc(tctx *c, size_t bytes)
{
    void *p = c->be->alloc(bytes ? bytes : 1);
    ck_assert_ptr_nonnull(p);
    ck_assert_int_lt(DP.n, 4096);
    DP.be = c->be;
    DP.p[DP.n++] = p;
    return p;
}

static void dev_release_all(void)
{
    for (int k = 0; k < DP.n; k++)
        DP.be->release(DP.p[k]);
    DP.n = 0;
}

static double *hbuf(tctx *c, size_t n) { return own(c, malloc((n ? n : 1) * sizeof(double))); }

/* an input: host values rounded to the backend's precision */
static tens t_from(tctx *c, const double *src, size_t n)
{
    tens t = {hbuf(c, n), dalloc(c, n * c->be->real_size), NULL, n};
    if (n) {
        c->be->upload(t.d, src, n);
        c->be->download(t.h, t.d, n);
    }
    return t;
}

static tens t_rand(tctx *c, size_t n, double scale)
{
    double *s = hbuf(c, n);
    for (size_t k = 0; k < n; k++)
        s[k] = scale * tu_normal();
    return t_from(c, s, n);
}

/* a forward output: NaN on both sides */
static tens t_out(tctx *c, size_t n)
{
    tens t = {hbuf(c, n), dalloc(c, n * c->be->real_size), NULL, n};
    for (size_t k = 0; k < n; k++)
        t.h[k] = NAN;
    if (n)
        c->be->upload(t.d, t.h, n);
    return t;
}

/* a VJP output: random initial values on both sides */
static tens t_acc(tctx *c, size_t n)
{
    tens t = t_rand(c, n, 1.0);
    t.init = hbuf(c, n);
    if (n)
        memcpy(t.init, t.h, n * sizeof(double));
    return t;
}

static int32_t *ibuf(tctx *c, const int32_t *src, size_t n)
{
    int32_t *d = dalloc(c, (n ? n : 1) * sizeof(int32_t));
    if (n)
        c->be->upload_idx(d, src, n);
    return d;
}

/* compare the backend's result with the ref's; VJP outputs by their increments */
/* mask (NULL: all): compare only the entries where mask[k] != 0 */
static void t_check_mask(tctx *c, const tens *t, const char *op, const char *what, int vjp,
                         const unsigned char *mask)
{
    const size_t n = t->n;
    double *got = hbuf(c, n), *want = hbuf(c, n);
    if (n)
        c->be->download(got, t->d, n);
    if (mask)
        for (size_t k = 0; k < n; k++)
            if (!mask[k])
                got[k] = t->h[k];
    double floor = 0.0;
    if (t->init) {
        /* an accumulation into the backend's buffer rounds at the scale of the
         * buffer's value: the increments cannot be resolved below that */
        const double u = c->be->precision == ECENET_F64 ? 0x1p-53 : 0x1p-24;
        double ni = 0.0, no = 0.0;
        for (size_t k = 0; k < n; k++) {
            ni += t->init[k] * t->init[k];
            no += t->h[k] * t->h[k];
        }
        floor = 2.0 * u * (sqrt(ni) + sqrt(no));
    }
    for (size_t k = 0; k < n; k++) {
        want[k] = t->h[k];
        if (t->init) {
            got[k] -= t->init[k];
            want[k] -= t->init[k];
        }
    }
    double err = tu_rel_l2(got, want, n);
    if (floor > 0.0 && err == err) {
        double nw = 0.0;
        for (size_t k = 0; k < n; k++)
            nw += want[k] * want[k];
        nw = sqrt(nw);
        const double diff = nw > 0.0 ? err * nw : err;
        err = diff <= floor ? 0.0 : (diff - floor) / (nw > 0.0 ? nw : 1.0);
    }
    const double tol = vjp ? c->tol_v : c->tol_f;
    if (vjp && err > c->worst_v)
        c->worst_v = err;
    if (!vjp && err > c->worst_f)
        c->worst_f = err;
    ck_assert_msg(err <= tol, "%s %s %s [%s]: %s relative L2 error %.3e > %.1e (n = %zu)",
                  c->be->name, c->be->precision == ECENET_F64 ? "f64" : "f32", op, c->shape, what,
                  err, tol, n);
}

static void t_check(tctx *c, const tens *t, const char *op, const char *what, int vjp)
{
    t_check_mask(c, t, op, what, vjp, NULL);
}

/* a second VJP output with the initial values of t (for a rerun of its op) */
static tens t_acc_like(tctx *c, const tens *t)
{
    tens r = t_from(c, t->init, t->n);
    r.init = t->init;
    return r;
}

/* cuda's kernel choices (cuda_backend.h) that the tests switch: set one
 * (returns the old setting; 0, and nothing done, on other backends) and
 * count the launches that took it */
enum cuda_choice {
    CHOICE_FRAME_ASYNC,   /* cp.async staging of the bond-frame kernels */
    CHOICE_FRAME_ATOM_RB, /* the register-blocked per-atom frame kernel */
    CHOICE_FRAME_PIPE,    /* the two-buffer pipelined per-edge frame kernels */
    CHOICE_LAYER_TC       /* the tensor-core layer kernels (a mode) */
};
static int choice_set(int is_cuda, enum cuda_choice w, int v)
{
#ifdef ECENET_HAVE_CUDA
    if (is_cuda)
        switch (w) {
        case CHOICE_FRAME_ASYNC: return ecn_cuda_set_frame_async(v);
        case CHOICE_FRAME_ATOM_RB: return ecn_cuda_set_frame_atom_rb(v);
        case CHOICE_FRAME_PIPE: return ecn_cuda_set_frame_pipe(v);
        case CHOICE_LAYER_TC: return ecn_cuda_set_layer_tc(v);
        }
#endif
    (void)is_cuda;
    (void)w;
    (void)v;
    return 0;
}
static unsigned long long choice_runs(int is_cuda, enum cuda_choice w)
{
#ifdef ECENET_HAVE_CUDA
    if (is_cuda)
        switch (w) {
        case CHOICE_FRAME_ASYNC: return ecn_cuda_frame_async_launches();
        case CHOICE_FRAME_ATOM_RB: return ecn_cuda_frame_atom_rb_launches();
        case CHOICE_FRAME_PIPE: return ecn_cuda_frame_pipe_launches();
        case CHOICE_LAYER_TC: return ecn_cuda_layer_tc_launches();
        }
#endif
    (void)is_cuda;
    (void)w;
    return 0;
}
static int on_cuda(const tctx *c) { return !strcmp(c->be->name, "cuda"); }
static int fa_set(const tctx *c, int on) { return choice_set(on_cuda(c), CHOICE_FRAME_ASYNC, on); }
static unsigned long long fa_runs(const tctx *c)
{
    return choice_runs(on_cuda(c), CHOICE_FRAME_ASYNC);
}
static int far_set(const tctx *c, int on)
{
    return choice_set(on_cuda(c), CHOICE_FRAME_ATOM_RB, on);
}
static unsigned long long far_runs(const tctx *c)
{
    return choice_runs(on_cuda(c), CHOICE_FRAME_ATOM_RB);
}

static int fp_set(const tctx *c, int on) { return choice_set(on_cuda(c), CHOICE_FRAME_PIPE, on); }
static unsigned long long fp_runs(const tctx *c)
{
    return choice_runs(on_cuda(c), CHOICE_FRAME_PIPE);
}

/* The pipelined per-edge frame kernels on (with cp.async staging) on a grid
 * of 7 blocks, so that each block loops over several edges through both
 * shared buffers; pipe_end restores the settings and checks that the ops
 * in between made n pipelined launches where cuda runs them. */
typedef struct {
    unsigned long long r0;
    int blocks_old;
} pipe_run;
static pipe_run pipe_begin(const tctx *c)
{
    pipe_run p = {0, 0};
    fa_set(c, 1);
    fp_set(c, 1);
#ifdef ECENET_HAVE_CUDA
    if (on_cuda(c))
        p.blocks_old = ecn_cuda_set_frame_pipe_blocks(7);
#endif
    p.r0 = fp_runs(c);
    return p;
}
static void pipe_end(const tctx *c, const pipe_run *p, unsigned long long n, size_t E,
                     const char *what)
{
    unsigned long long want = 0;
#ifdef ECENET_HAVE_CUDA
    if (on_cuda(c)) {
        ecn_cuda_set_frame_pipe_blocks(p->blocks_old);
        want = E && ecn_cuda_frame_pipe_available() ? n : 0;
    }
#endif
    fp_set(c, 0);
    fa_set(c, 0);
    const unsigned long long ran = fp_runs(c) - p->r0;
    ck_assert_msg(ran == want, "%s: %llu pipelined launches, expected %llu", what, ran, want);
    (void)E;
}

/* the op since r0 ran the register-blocked per-atom kernel once where it
 * applies (cuda, with edges, l_max <= 4), else not at all */
static void far_expect(const tctx *c, unsigned long long r0, size_t E, int L, const char *what)
{
    const unsigned long long ran = far_runs(c) - r0, want = on_cuda(c) && E && L <= 4 ? 1 : 0;
    ck_assert_msg(ran == want, "%s: %llu register-blocked launches, expected %llu", what, ran, want);
}

/* the ops since r0 staged with cp.async in n launches (none without edges) */
static void fa_expect(const tctx *c, unsigned long long r0, unsigned long long n, size_t E,
                      const char *what)
{
    const unsigned long long ran = fa_runs(c) - r0;
    ck_assert_msg(E == 0 || ran == n, "%s: %llu cp.async launches, expected %llu", what, ran, n);
}

/* two backend results of the same length, bit for bit (in the backend's precision) */
static void t_same_bits(tctx *c, const tens *a, const tens *b, const char *op, const char *what)
{
    const size_t n = a->n;
    ck_assert_uint_eq(n, b->n);
    double *h = hbuf(c, 2 * n);
    if (n) { /* through fp64: exact for fp32 and fp64 values */
        c->be->download(h, a->d, n);
        c->be->download(h + n, b->d, n);
    }
    size_t nd = 0;
    for (size_t k = 0; k < n; k++)
        nd += memcmp(&h[k], &h[n + k], sizeof(double)) != 0;
    ck_assert_msg(nd == 0, "%s %s [%s]: %s: %zu of %zu elements differ", c->be->name, op,
                  c->shape, what, nd, n);
}

/* ---- shapes ----------------------------------------------------------------------- */

typedef struct {
    int L, M, C, G, T, R, act, corr;
    int64_t N, E, P;
} shape;

static const shape SHAPES[] = {
    /* L  M  C   G  T  R  act                  corr   N    E    P */
    {3, 3, 2, 13, 2, 3, ECENET_ACT_SILU, 1, 7, 37, 40},       /* F = 16, two tiles */
    {2, 1, 3, 5, 1, 2, ECENET_ACT_RELU, 0, 5, 1, 3},          /* F = 18, m_max < l_max, E = 1 */
    {1, 1, 1, 3, 3, 2, ECENET_ACT_TANH, 1, 4, 0, 0},          /* E = 0, P = 0 */
    {3, 2, 5, 9, 3, 4, ECENET_ACT_GELU, 1, 11, 70, 90},       /* F = 40, odd grid, M < L */
    {0, 0, 2, 1, 1, 2, ECENET_ACT_IDENTITY, 0, 3, 5, 6},      /* l_max = 0 */
    {3, 3, 32, 13, 2, 4, ECENET_ACT_SILU, 1, 9, 150, 120},    /* the bench widths, F = 256 */
    {4, 2, 3, 7, 2, 3, ECENET_ACT_SILU, 0, 6, 97, 50},        /* F = 30, m_max < l_max */
    /* Q = 6 (padded register tiles), Q = 9 (the widest tiles), many blocks and
     * long per-atom CSR lists */
    {5, 5, 2, 21, 2, 3, ECENET_ACT_SILU, 1, 13, 400, 300},    /* F = 24, Q = 6 */
    {8, 8, 1, 33, 1, 2, ECENET_ACT_TANH, 0, 5, 20, 10},       /* F = 18, Q = 9, l_max = 8 */
    {2, 2, 8, 9, 2, 4, ECENET_ACT_SILU, 1, 60, 5000, 4000},   /* F = 48, E = 5000 */
    /* the CUDA tensor-core layer's cluster sizes 2 and 1 (F = 128, 64), a
     * partial and an exact 64-edge tile, a non-SiLU epilogue (appended: the
     * shapes above keep their random streams) */
    {3, 3, 16, 13, 1, 2, ECENET_ACT_SILU, 0, 5, 300, 100},    /* F = 128 */
    {3, 3, 8, 13, 1, 2, ECENET_ACT_GELU, 0, 4, 64, 30},       /* F = 64, E = 64 */
};
#define N_SHAPES ((int)(sizeof SHAPES / sizeof SHAPES[0]))

/* everything a test of one shape needs, host and backend side */
typedef struct {
    shape s;
    ecenet_dims dh, dd;                 /* host / backend index pointers */
    int32_t *edge_i, *edge_j, *nb_src, *nb_dst, *types, *tsrc, *ttgt;   /* host */
    int32_t *d_edge_i, *d_edge_j, *d_nb_src, *d_nb_dst, *d_types, *d_tsrc, *d_ttgt;
    ecenet_csr csr_h[4];
} setup;

static void csr_build(int64_t N, int64_t n, const int32_t *atom, int32_t *ptr, int32_t *idx)
{
    for (int64_t a = 0; a <= N; a++)
        ptr[a] = 0;
    for (int64_t k = 0; k < n; k++)
        ptr[atom[k] + 1]++;
    for (int64_t a = 0; a < N; a++)
        ptr[a + 1] += ptr[a];
    int32_t *cur = malloc((size_t)(N + 1) * sizeof *cur);
    ck_assert_ptr_nonnull(cur);
    memcpy(cur, ptr, (size_t)(N + 1) * sizeof *cur);
    for (int64_t k = 0; k < n; k++)
        idx[cur[atom[k]]++] = (int32_t)k;
    free(cur);
}

static void make_setup(tctx *c, const shape *s, setup *u)
{
    memset(u, 0, sizeof *u);
    u->s = *s;
    ecenet_dims *d = &u->dh;
    d->N = s->N;
    d->E = s->E;
    d->P = s->P;
    d->T = s->T;
    d->R = s->R;
    d->L = s->L;
    d->M = s->M;
    d->C = s->C;
    d->B = 2 * s->C;
    d->F = d->B * (s->L + 1);
    d->S = (s->L + 1) * (s->L + 1);
    d->Q = s->M + 1;
    d->G = s->G;
    d->ND = ref_dblock_offset(s->L + 1);
    snprintf(c->shape, sizeof c->shape,
             "L=%d M=%d C=%d F=%d G=%d T=%d N=%lld E=%lld P=%lld act=%d corr=%d", s->L, s->M,
             s->C, d->F, s->G, s->T, (long long)s->N, (long long)s->E, (long long)s->P, s->act,
             s->corr);
    const size_t E = (size_t)s->E, P = (size_t)s->P, N = (size_t)s->N;
    u->edge_i = own(c, malloc((E + 1) * sizeof(int32_t)));
    u->edge_j = own(c, malloc((E + 1) * sizeof(int32_t)));
    u->tsrc = own(c, malloc((E + 1) * sizeof(int32_t)));
    u->ttgt = own(c, malloc((E + 1) * sizeof(int32_t)));
    u->nb_src = own(c, malloc((P + 1) * sizeof(int32_t)));
    u->nb_dst = own(c, malloc((P + 1) * sizeof(int32_t)));
    u->types = own(c, malloc((N + 1) * sizeof(int32_t)));
    for (size_t i = 0; i < N; i++)
        u->types[i] = (int32_t)(tu_rng_u64() % (uint64_t)s->T);
    /* the last atom gets no entries (an isolated atom) when N > 2 */
    const uint64_t na = N > 2 ? N - 1 : N;
    for (size_t e = 0; e < E; e++) {
        u->edge_i[e] = (int32_t)(tu_rng_u64() % na);
        u->edge_j[e] = (int32_t)(tu_rng_u64() % na);
        u->tsrc[e] = u->types[u->edge_i[e]];
        u->ttgt[e] = u->types[u->edge_j[e]];
    }
    /* edges sorted by source, as the graph builds them, except for a few swaps */
    for (size_t e = 1; e < E; e++)
        for (size_t q = e; q > 0 && u->edge_i[q - 1] > u->edge_i[q] && (q % 7); q--) {
            int32_t t = u->edge_i[q]; u->edge_i[q] = u->edge_i[q - 1]; u->edge_i[q - 1] = t;
            t = u->edge_j[q]; u->edge_j[q] = u->edge_j[q - 1]; u->edge_j[q - 1] = t;
            t = u->tsrc[q]; u->tsrc[q] = u->tsrc[q - 1]; u->tsrc[q - 1] = t;
            t = u->ttgt[q]; u->ttgt[q] = u->ttgt[q - 1]; u->ttgt[q - 1] = t;
        }
    for (size_t p = 0; p < P; p++) {
        u->nb_src[p] = (int32_t)(tu_rng_u64() % na);
        u->nb_dst[p] = (int32_t)(tu_rng_u64() % na);
    }
    const int32_t *keys[4] = {u->edge_i, u->edge_j, u->nb_src, u->nb_dst};
    const size_t cnt[4] = {E, E, P, P};
    ecenet_csr *hc[4] = {&d->e_src, &d->e_dst, &d->p_src, &d->p_dst};
    u->dd = u->dh;
    ecenet_csr *dc[4] = {&u->dd.e_src, &u->dd.e_dst, &u->dd.p_src, &u->dd.p_dst};
    for (int k = 0; k < 4; k++) {
        int32_t *ptr = own(c, malloc((N + 1) * sizeof(int32_t)));
        int32_t *idx = own(c, malloc((cnt[k] + 1) * sizeof(int32_t)));
        csr_build((int64_t)N, (int64_t)cnt[k], keys[k], ptr, idx);
        hc[k]->ptr = ptr;
        hc[k]->idx = idx;
        dc[k]->ptr = ibuf(c, ptr, N + 1);
        dc[k]->idx = ibuf(c, idx, cnt[k]);
    }
    u->d_edge_i = ibuf(c, u->edge_i, E);
    u->d_edge_j = ibuf(c, u->edge_j, E);
    u->d_tsrc = ibuf(c, u->tsrc, E);
    u->d_ttgt = ibuf(c, u->ttgt, E);
    u->d_nb_src = ibuf(c, u->nb_src, P);
    u->d_nb_dst = ibuf(c, u->nb_dst, P);
    u->d_types = ibuf(c, u->types, N);
}

/* edge vectors: random directions (both Wigner charts) and lengths in [0.5, 3) */
static void edge_vectors(tctx *c, int64_t n, tens *d, tens *r)
{
    double *v = hbuf(c, 3 * (size_t)n), *rr = hbuf(c, (size_t)n);
    for (int64_t k = 0; k < n; k++) {
        double x[3], l2;
        do {
            for (int a = 0; a < 3; a++)
                x[a] = 2.0 * tu_uniform() - 1.0;
            if (k % 5 == 0) /* |r̂x| >= 0.9: the second chart */
                x[0] = (k % 10 ? 1.0 : -1.0) * (0.95 + 0.05 * tu_uniform());
            l2 = x[0] * x[0] + x[1] * x[1] + x[2] * x[2];
        } while (l2 < 0.01);
        double len = 0.5 + 2.5 * tu_uniform(), nn = sqrt(l2);
        if (k % 5 == 0) { /* keep the direction's x component dominant */
            x[1] *= 0.2;
            x[2] *= 0.2;
            nn = sqrt(x[0] * x[0] + x[1] * x[1] + x[2] * x[2]);
        }
        for (int a = 0; a < 3; a++)
            v[3 * k + a] = x[a] / nn * len;
    }
    *d = t_from(c, v, 3 * (size_t)n);
    for (int64_t k = 0; k < n; k++) {
        const double *q = d->h + 3 * k;
        rr[k] = sqrt(q[0] * q[0] + q[1] * q[1] + q[2] * q[2] + 1e-30);
    }
    *r = t_from(c, rr, (size_t)n);
}

/* ---- op tests ---------------------------------------------------------------------- */

static void test_geometry(tctx *c, setup *u)
{
    const ecenet_backend *be = c->be;
    const int64_t E = u->s.E, N = u->s.N;
    tens pos = t_rand(c, 3 * (size_t)N, 3.0), shift = t_rand(c, 3 * (size_t)E, 1.0);
    tens d = t_out(c, 3 * (size_t)E), r = t_out(c, (size_t)E);
    ref_pair_geom_fwd(E, u->edge_i, u->edge_j, shift.h, pos.h, d.h, r.h);
    be->pair_geom_fwd(E, u->d_edge_i, u->d_edge_j, shift.d, pos.d, d.d, r.d);
    t_check(c, &d, "pair_geom_fwd", "d", 0);
    t_check(c, &r, "pair_geom_fwd", "r", 0);

    tens dv, rv;
    edge_vectors(c, E, &dv, &rv);
    tens dbar = t_rand(c, 3 * (size_t)E, 1.0);
    tens pb = t_acc(c, 3 * (size_t)N), vir = t_acc(c, 9);
    ref_pair_geom_vjp(E, u->edge_i, u->edge_j, &u->dh.e_src, &u->dh.e_dst, dv.h, dbar.h, pb.h,
                      vir.h);
    be->pair_geom_vjp(E, u->d_edge_i, u->d_edge_j, &u->dd.e_src, &u->dd.e_dst, dv.d, dbar.d,
                      pb.d, vir.d);
    t_check(c, &pb, "pair_geom_vjp", "pos_bar", 1);
    t_check(c, &vir, "pair_geom_vjp", "virial", 1);
    tens pb2 = t_acc(c, 3 * (size_t)N);
    ref_pair_geom_vjp(E, u->edge_i, u->edge_j, NULL, NULL, dv.h, dbar.h, pb2.h, NULL);
    be->pair_geom_vjp(E, u->d_edge_i, u->d_edge_j, &u->dd.e_src, &u->dd.e_dst, dv.d, dbar.d,
                      pb2.d, NULL);
    t_check(c, &pb2, "pair_geom_vjp", "pos_bar (no virial)", 1);

    tens rbar = t_rand(c, (size_t)E, 1.0), db = t_acc(c, 3 * (size_t)E);
    ref_dist_vjp(E, dv.h, rv.h, rbar.h, db.h);
    be->dist_vjp(E, dv.d, rv.d, rbar.d, db.d);
    t_check(c, &db, "dist_vjp", "dbar", 1);

    /* radial: distances around both cutoffs */
    double *rr = hbuf(c, (size_t)E);
    for (int64_t k = 0; k < E; k++)
        rr[k] = 0.05 + 4.4 * tu_uniform();
    tens rad = t_from(c, rr, (size_t)E);
    const int Ks[2] = {0, 5};
    for (int ct = 0; ct < 2; ct++)
        for (int q = 0; q < 2; q++) {
            const int K = Ks[q], cols = K ? K : 1;
            tens f = t_out(c, (size_t)E * cols), df = t_out(c, (size_t)E * cols);
            ref_radial_fwd(E, rad.h, 4.0, K, ct, f.h, df.h);
            be->radial_fwd(E, rad.d, 4.0, K, ct, f.d, df.d);
            t_check(c, &f, "radial_fwd", "f", 0);
            t_check(c, &df, "radial_fwd", "df", 0);
            tens f2 = t_out(c, (size_t)E * cols);
            ref_radial_fwd(E, rad.h, 4.0, K, ct, f2.h, NULL);
            be->radial_fwd(E, rad.d, 4.0, K, ct, f2.d, NULL);
            t_check(c, &f2, "radial_fwd", "f (no df)", 0);
            tens fbar = t_rand(c, (size_t)E * cols, 1.0), rb = t_acc(c, (size_t)E);
            ref_radial_vjp(E, K, df.h, fbar.h, rb.h);
            be->radial_vjp(E, K, df.d, fbar.d, rb.d);
            t_check(c, &rb, "radial_vjp", "rbar", 1);
        }

    const int L = u->s.L, S = (L + 1) * (L + 1);
    tens Y = t_out(c, (size_t)E * S), dY = t_out(c, (size_t)E * S * 3);
    ref_sph_fwd(E, L, dv.h, Y.h, dY.h);
    be->sph_fwd(E, L, dv.d, Y.d, dY.d);
    t_check(c, &Y, "sph_fwd", "Y", 0);
    t_check(c, &dY, "sph_fwd", "dY", 0);
    tens Y2 = t_out(c, (size_t)E * S);
    ref_sph_fwd(E, L, dv.h, Y2.h, NULL);
    be->sph_fwd(E, L, dv.d, Y2.d, NULL);
    t_check(c, &Y2, "sph_fwd", "Y (no dY)", 0);
}

static void test_ace(tctx *c, setup *u)
{
    const ecenet_backend *be = c->be;
    const ecenet_dims *dm = &u->dh;
    const size_t P = (size_t)dm->P, N = (size_t)dm->N, R = (size_t)dm->R, S = (size_t)dm->S;
    const size_t T = (size_t)dm->T, C = (size_t)dm->C;
    tens d, r;
    edge_vectors(c, dm->P, &d, &r);
    tens f = t_rand(c, P * R, 1.0), df = t_rand(c, P * R, 1.0);
    tens Y = t_rand(c, P * S, 1.0), dY = t_rand(c, P * S * 3, 1.0);
    tens A = t_out(c, N * T * R * S);
    ref_ace_fwd(dm, u->nb_src, u->nb_dst, u->types, f.h, Y.h, A.h);
    be->ace_fwd(&u->dd, u->d_nb_src, u->d_nb_dst, u->d_types, f.d, Y.d, A.d);
    t_check(c, &A, "ace_fwd", "A", 0);
    tens Abar = t_rand(c, N * T * R * S, 1.0), dbar = t_acc(c, 3 * P);
    ref_ace_vjp(dm, u->nb_src, u->nb_dst, u->types, f.h, df.h, Y.h, dY.h, d.h, r.h, Abar.h,
                dbar.h);
    be->ace_vjp(&u->dd, u->d_nb_src, u->d_nb_dst, u->d_types, f.d, df.d, Y.d, dY.d, d.d, r.d,
                Abar.d, dbar.d);
    t_check(c, &dbar, "ace_vjp", "dbar", 1);

    tens W = t_rand(c, T * T * R * C, 0.5), Ain = t_rand(c, N * T * R * S, 1.0);
    tens Ae = t_out(c, N * C * S);
    ref_embed_fwd(dm, u->types, W.h, Ain.h, Ae.h);
    be->embed_fwd(&u->dd, u->d_types, W.d, Ain.d, Ae.d);
    t_check(c, &Ae, "embed_fwd", "A_emb", 0);
    tens Eb = t_rand(c, N * C * S, 1.0), Ab = t_acc(c, N * T * R * S);
    ref_embed_vjp(dm, u->types, W.h, Eb.h, Ab.h);
    be->embed_vjp(&u->dd, u->d_types, W.d, Eb.d, Ab.d);
    t_check(c, &Ab, "embed_vjp", "Abar", 1);
}

static void test_wigner(tctx *c, setup *u)
{
    const ecenet_backend *be = c->be;
    const int L = u->s.L;
    const int64_t E = u->s.E;
    const size_t ND = (size_t)ref_dblock_offset(L + 1);
    double *cgh = hbuf(c, ecn_cg_size(L) + 1);
    ecn_cg_build(L, cgh);
    tens cg = t_from(c, cgh, ecn_cg_size(L) + 1);
    tens d, r;
    edge_vectors(c, E, &d, &r);
    tens D = t_out(c, (size_t)E * ND);
    ref_wigner_fwd(E, L, cg.h, d.h, r.h, D.h);
    be->wigner_fwd(E, L, cg.d, d.d, r.d, D.d);
    t_check(c, &D, "wigner_fwd", "D", 0);
    tens Dbar = t_rand(c, (size_t)E * ND, 1.0), dbar = t_acc(c, 3 * (size_t)E);
    ref_wigner_vjp(E, L, cg.h, d.h, r.h, D.h, Dbar.h, dbar.h);
    be->wigner_vjp(E, L, cg.d, d.d, r.d, D.d, Dbar.d, dbar.d);
    t_check(c, &dbar, "wigner_vjp", "dbar", 1);
}

static void test_edge_frame(tctx *c, setup *u)
{
    const ecenet_backend *be = c->be;
    const ecenet_dims *dm = &u->dh;
    const size_t E = (size_t)dm->E, N = (size_t)dm->N, CS = (size_t)dm->C * dm->S;
    const size_t XE = (size_t)dm->Q * 2 * dm->F, ND = (size_t)dm->ND, F = (size_t)dm->F;
    const int fa_old = fa_set(c, 0); /* cuda: staging through registers first */
    const int far_old = far_set(c, 1), fp_old = fp_set(c, 0);
    tens Ae = t_rand(c, N * CS, 1.0), D = t_rand(c, E * ND, 0.5);
    tens X = t_out(c, E * XE);
    ref_edge_frame_fwd(dm, u->edge_i, u->edge_j, Ae.h, D.h, X.h);
    be->edge_frame_fwd(&u->dd, u->d_edge_i, u->d_edge_j, Ae.d, D.d, X.d);
    t_check(c, &X, "edge_frame_fwd", "X", 0);
    tens Xbar = t_rand(c, E * XE, 1.0), Aeb = t_acc(c, N * CS), Db = t_acc(c, E * ND);
    ref_edge_frame_vjp(dm, u->edge_i, u->edge_j, Ae.h, D.h, Xbar.h, Aeb.h, Db.h);
    const unsigned long long rb0 = far_runs(c);
    be->edge_frame_vjp(&u->dd, u->d_edge_i, u->d_edge_j, Ae.d, D.d, Xbar.d, Aeb.d, Db.d);
    t_check(c, &Aeb, "edge_frame_vjp", "A_emb_bar", 1);
    t_check(c, &Db, "edge_frame_vjp", "Dbar", 1);
    if (!strcmp(be->name, "cuda")) { /* the general per-atom kernel: the same sums, the same bits */
        far_expect(c, rb0, E, dm->L, "edge_frame_vjp");
        far_set(c, 0);
        tens Aeb3 = t_acc_like(c, &Aeb), Db3 = t_acc_like(c, &Db);
        be->edge_frame_vjp(&u->dd, u->d_edge_i, u->d_edge_j, Ae.d, D.d, Xbar.d, Aeb3.d, Db3.d);
        far_set(c, 1);
        t_same_bits(c, &Aeb3, &Aeb, "edge_frame_vjp", "A_emb_bar, general frame_atom kernel");
    }
    if (!strcmp(be->name, "cuda")) { /* staged with cp.async: the same values, the same bits */
        fa_set(c, 1);
        const unsigned long long r0 = fa_runs(c);
        tens X2 = t_out(c, X.n), Aeb2 = t_acc_like(c, &Aeb), Db2 = t_acc_like(c, &Db);
        be->edge_frame_fwd(&u->dd, u->d_edge_i, u->d_edge_j, Ae.d, D.d, X2.d);
        be->edge_frame_vjp(&u->dd, u->d_edge_i, u->d_edge_j, Ae.d, D.d, Xbar.d, Aeb2.d, Db2.d);
        fa_set(c, 0);
        fa_expect(c, r0, 3, E, "edge frame");
        t_same_bits(c, &X2, &X, "edge_frame_fwd", "X, cp.async staging");
        t_same_bits(c, &Aeb2, &Aeb, "edge_frame_vjp", "A_emb_bar, cp.async staging");
        t_same_bits(c, &Db2, &Db, "edge_frame_vjp", "Dbar, cp.async staging");
        /* the pipelined D̄ kernel (frame_dbar_pk) */
        const pipe_run pr = pipe_begin(c);
        tens Aeb4 = t_acc_like(c, &Aeb), Db4 = t_acc_like(c, &Db);
        be->edge_frame_vjp(&u->dd, u->d_edge_i, u->d_edge_j, Ae.d, D.d, Xbar.d, Aeb4.d, Db4.d);
        pipe_end(c, &pr, 1, E, "edge frame");
        t_same_bits(c, &Db4, &Db, "edge_frame_vjp", "Dbar, pipelined kernel");
        t_same_bits(c, &Aeb4, &Aeb, "edge_frame_vjp", "A_emb_bar, with the pipelined D̄ kernel");
    }
    fa_set(c, fa_old);
    far_set(c, far_old);
    fp_set(c, fp_old);

    const int K = 3;
    tens fr = t_rand(c, E * K, 0.5), V = t_rand(c, K * F, 0.5), Xin = t_rand(c, E * XE, 1.0);
    tens Y = t_out(c, E * XE);
    ref_dist_embed_fwd(dm, K, fr.h, V.h, Xin.h, Y.h);
    be->dist_embed_fwd(&u->dd, K, fr.d, V.d, Xin.d, Y.d);
    t_check(c, &Y, "dist_embed_fwd", "Y", 0);
    tens Yb = t_rand(c, E * XE, 1.0), Xb = t_acc(c, E * XE), frb = t_acc(c, E * K);
    ref_dist_embed_vjp(dm, K, fr.h, V.h, Xin.h, Yb.h, Xb.h, frb.h);
    be->dist_embed_vjp(&u->dd, K, fr.d, V.d, Xin.d, Yb.d, Xb.d, frb.d);
    t_check(c, &Xb, "dist_embed_vjp", "Xbar", 1);
    t_check(c, &frb, "dist_embed_vjp", "frbar", 1);
}

/* linear parameters, host and backend */
typedef struct {
    ecenet_linear_params h, d;
} lin_pair;

static lin_pair make_linear(tctx *c, int fin, int fout, int Q, int T, int bias, int corr)
{
    lin_pair p;
    memset(&p, 0, sizeof p);
    p.h.fin = p.d.fin = fin;
    p.h.fout = p.d.fout = fout;
    p.h.Q = p.d.Q = Q;
    p.h.T = p.d.T = T;
    const size_t n = (size_t)Q * fout * fin;
    const double sc = 1.0 / sqrt((double)fin);
    tens w = t_rand(c, n, sc);
    p.h.w = w.h;
    p.d.w = w.d;
    if (c->be->linear_w_t) { /* as the engine uploads it: w transposed per m */
        double *t = hbuf(c, n);
        ecn_linear_transpose(Q, fout, fin, w.h, t);
        p.d.w_t = t_from(c, t, n).d;
    }
    if (c->be->linear_split && !c->be->linear_split(0, NULL, NULL)) {
        /* as the engine makes them (where the backend's GEMMs read them) */
        void *ws = dalloc(c, 2 * n * c->be->real_size);
        c->be->linear_split(n, p.d.w, ws);
        p.d.w_split = ws;
        if (p.d.w_t) {
            void *wts = dalloc(c, 2 * n * c->be->real_size);
            c->be->linear_split(n, p.d.w_t, wts);
            p.d.w_t_split = wts;
        }
    }
    if (bias) {
        tens b = t_rand(c, (size_t)fout, 0.5);
        p.h.bias = b.h;
        p.d.bias = b.d;
    }
    if (corr) {
        tens ws = t_rand(c, (size_t)T * n, 0.3 * sc), wt = t_rand(c, (size_t)T * n, 0.3 * sc);
        p.h.w_src = ws.h;
        p.d.w_src = ws.d;
        p.h.w_tgt = wt.h;
        p.d.w_tgt = wt.d;
    }
    return p;
}

typedef struct {
    ecenet_realspace_params h, d;
} rs_pair;

/* grid tables from θ_k = 2πk/G (random ones if `random_tables`) */
static rs_pair make_rs(tctx *c, int F, int Q, int G, int T, int act, int affine, int corr,
                       int random_tables)
{
    rs_pair p;
    memset(&p, 0, sizeof p);
    p.h.F = p.d.F = F;
    p.h.Q = p.d.Q = Q;
    p.h.G = p.d.G = G;
    p.h.T = p.d.T = T;
    p.h.act = p.d.act = act;
    double *cs = hbuf(c, (size_t)Q * G), *ss = hbuf(c, (size_t)Q * G);
    double *ca = hbuf(c, (size_t)Q * G), *sa = hbuf(c, (size_t)Q * G);
    for (int m = 0; m < Q; m++)
        for (int k = 0; k < G; k++) {
            const double th = 2.0 * M_PI * k / G, w = m ? 2.0 / G : 1.0 / G;
            cs[m * G + k] = random_tables ? tu_normal() : cos(m * th);
            ss[m * G + k] = random_tables ? tu_normal() : sin(m * th);
            ca[k * Q + m] = random_tables ? tu_normal() / G : w * cos(m * th);
            sa[k * Q + m] = random_tables ? tu_normal() / G : w * sin(m * th);
        }
    tens tcs = t_from(c, cs, (size_t)Q * G), tss = t_from(c, ss, (size_t)Q * G);
    tens tca = t_from(c, ca, (size_t)Q * G), tsa = t_from(c, sa, (size_t)Q * G);
    p.h.cos_synth = tcs.h; p.d.cos_synth = tcs.d;
    p.h.sin_synth = tss.h; p.d.sin_synth = tss.d;
    p.h.cos_analysis = tca.h; p.d.cos_analysis = tca.d;
    p.h.sin_analysis = tsa.h; p.d.sin_analysis = tsa.d;
    if (affine) {
        double *s1 = hbuf(c, (size_t)F);
        for (int f = 0; f < F; f++)
            s1[f] = 1.0 + 0.2 * tu_normal();
        tens sc = t_from(c, s1, (size_t)F), sh = t_rand(c, (size_t)F, 0.2);
        p.h.scale = sc.h; p.d.scale = sc.d;
        p.h.shift = sh.h; p.d.shift = sh.d;
    }
    if (corr) {
        tens a = t_rand(c, (size_t)T * F, 0.1), b = t_rand(c, (size_t)T * F, 0.1);
        tens e = t_rand(c, (size_t)T * F, 0.1), g = t_rand(c, (size_t)T * F, 0.1);
        p.h.scale_src = a.h; p.d.scale_src = a.d;
        p.h.scale_tgt = b.h; p.d.scale_tgt = b.d;
        p.h.shift_src = e.h; p.d.shift_src = e.d;
        p.h.shift_tgt = g.h; p.d.shift_tgt = g.d;
    }
    return p;
}

/* The table flags of test mode 0..3 (none, sin0_zero, both, grid_sym
 * alone) on p (the same on host and device); returns sin0_zero. grid: p has
 * make_rs's DFT tables, whose flags ecn_rs_table_flags must find (grid_sym
 * where G is odd, G >= 3; modes 2 and 3 set it only there); tables
 * built as the public release builds them (θ and cos/sin in float32, ~1e-6
 * off the mirror symmetry) keep sin0_zero and must lose grid_sym. */
static int rs_mode(rs_pair *p, int mode, int grid)
{
    ecenet_realspace_params f = p->h;
    ecn_rs_table_flags(&f);
    /* a mirror-symmetric grid needs G odd, G >= 3 */
    const int sym_ok = grid && f.G >= 3 && f.G % 2;
    ck_assert_int_eq(f.sin0_zero, grid);
    ck_assert_int_eq(f.grid_sym, sym_ok);
    if (sym_ok && f.Q >= 2) { /* Q = 1: cos(0) = 1, sin(0) = 0 exact in float32 too */
        const int Q = f.Q, G = f.G;
        double *t = malloc((size_t)4 * Q * G * sizeof(double));
        ck_assert_ptr_nonnull(t);
        double *cs = t, *ss = t + Q * G, *ca = t + 2 * Q * G, *sa = t + 3 * Q * G;
        for (int m = 0; m < Q; m++)
            for (int k = 0; k < G; k++) {
                const float th = (float)(2.0 * M_PI * k / G), w = m ? 2.0f / G : 1.0f / G;
                cs[m * G + k] = cosf((float)m * th);
                ss[m * G + k] = sinf((float)m * th);
                ca[k * Q + m] = w * cosf((float)m * th);
                sa[k * Q + m] = w * sinf((float)m * th);
            }
        ecenet_realspace_params r = f;
        r.cos_synth = cs;
        r.sin_synth = ss;
        r.cos_analysis = ca;
        r.sin_analysis = sa;
        ecn_rs_table_flags(&r);
        ck_assert_int_eq(r.sin0_zero, 1);
        ck_assert_int_eq(r.grid_sym, 0);
        free(t);
    }
    const int s0z = mode == 1 || mode == 2, sym = mode >= 2 && sym_ok;
    p->h.sin0_zero = p->d.sin0_zero = s0z;
    p->h.grid_sym = p->d.grid_sym = sym;
    return s0z;
}

/* X with the sin m = 0 slot zero (as in a model) or random everywhere */
static tens features(tctx *c, int64_t E, int Q, int F, int sin0_zero)
{
    const size_t n = (size_t)E * Q * 2 * F;
    double *x = hbuf(c, n);
    for (size_t k = 0; k < n; k++)
        x[k] = tu_normal();
    if (sin0_zero)
        for (int64_t e = 0; e < E; e++)
            for (int f = 0; f < F; f++)
                x[((size_t)e * Q * 2 + 1) * F + f] = 0.0;
    return t_from(c, x, n);
}

/* ReLU's derivative jumps at 0: where a pre-activation lies within rounding
 * of the kink, an fp32 VJP and the fp64 reference legitimately take
 * different sides (seen on the H200: 4.9e-4 rel L2 against the 1e-4 bound on
 * the E = 5000 shape under another random stream, from a few such rows).
 * Rows (edge, feature) with a pre-activation within 1e-5 of the size of its
 * terms (20x the fp32 rounding of that sum) get a zero upstream gradient,
 * so the VJP is compared where it is defined; at most 1% of the rows may be
 * masked (measured: at most 0.1% per shape). Returns how many were. */
static size_t relu_kink_mask(const ecenet_realspace_params *p, const int32_t *ts,
                             const int32_t *tt, int64_t E, const double *X, double *Yb)
{
    const int F = p->F, Q = p->Q, G = p->G;
    const double *cs = p->cos_synth, *ss = p->sin_synth;
    const double *sc = p->scale, *sh = p->shift;
    size_t masked = 0;
    for (int64_t e = 0; e < E; e++)
        for (int f = 0; f < F; f++) {
            double scale = sc ? sc[f] : 1.0, shift = sh ? sh[f] : 0.0;
            const double *a_s = p->scale_src, *a_t = p->scale_tgt, *b_s = p->shift_src,
                         *b_t = p->shift_tgt;
            scale += (a_s ? a_s[(size_t)ts[e] * F + f] : 0.0) + (a_t ? a_t[(size_t)tt[e] * F + f] : 0.0);
            shift += (b_s ? b_s[(size_t)ts[e] * F + f] : 0.0) + (b_t ? b_t[(size_t)tt[e] * F + f] : 0.0);
            const double *xe = X + (size_t)e * Q * 2 * F + f;
            int near = 0;
            for (int k = 0; k < G && !near; k++) {
                double v = 0.0, size = 0.0;
                for (int m = 0; m < Q; m++) {
                    const double tc = xe[(2 * m) * F] * cs[m * G + k];
                    const double ts_ = xe[(2 * m + 1) * F] * ss[m * G + k];
                    v += tc + ts_;
                    size += fabs(tc) + fabs(ts_);
                }
                near = fabs(scale * v + shift) <= 1e-5 * (fabs(scale) * size + fabs(shift));
            }
            if (near) {
                double *ye = Yb + (size_t)e * Q * 2 * F + f;
                for (int j = 0; j < 2 * Q; j++)
                    ye[j * F] = 0.0;
                masked++;
            }
        }
    ck_assert_msg(masked <= (size_t)(E * F) / 100 + 1, "relu_kink_mask: %zu of %lld rows masked",
                  masked, (long long)(E * F));
    return masked;
}

/* cuda tensor-core kernels: set the mode (returns the old one), count launches */
static int tc_set(int is_cuda, int mode) { return choice_set(is_cuda, CHOICE_LAYER_TC, mode); }
static unsigned long long tc_runs(int is_cuda) { return choice_runs(is_cuda, CHOICE_LAYER_TC); }
/* the op launched the tensor-core kernel once if it applies, else not at all */
static void tc_expect(int is_cuda, unsigned long long before, int applies, const char *op,
                      const char *what)
{
    if (!is_cuda)
        return;
    const unsigned long long ran = tc_runs(is_cuda) - before;
    ck_assert_msg(ran == (unsigned long long)(applies != 0),
                  "%s %s: tensor-core kernel ran %llu times, expected %d", op, what, ran,
                  applies != 0);
}

/* The fused layer entries against ref: layer_fwd (X += RealSpace(Linear(X)),
 * Z kept) from X, and layer_vjp on random Z (zero sin m = 0 slot if zero_z);
 * the tensor-core kernel must run once in each where tc_fwd / tc_vjp say */
static void layer_check(tctx *c, setup *u, lin_pair *lp, rs_pair *rp, const tens *X, int zero_z,
                        const char *op, int is_cuda, int tc_fwd, int tc_vjp)
{
    const ecenet_backend *be = c->be;
    const ecenet_dims *dm = &u->dh;
    const int64_t E = dm->E;
    const size_t XE = (size_t)dm->Q * 2 * dm->F;
    if (be->layer_fwd) {
        tens Xio = t_acc(c, (size_t)E * XE);
        /* X in/out starts from X: copy X into both */
        memcpy(Xio.h, X->h, (size_t)E * XE * sizeof(double));
        memcpy(Xio.init, X->h, (size_t)E * XE * sizeof(double));
        if (E)
            be->upload(Xio.d, X->h, (size_t)E * XE);
        tens Z = t_out(c, (size_t)E * XE);
        double *tmp = hbuf(c, (size_t)E * XE);
        ref_linear_fwd(E, &lp->h, u->tsrc, u->ttgt, X->h, Z.h);
        ref_realspace_fwd(E, &rp->h, u->tsrc, u->ttgt, Z.h, tmp);
        ref_add((int64_t)(E * XE), tmp, Xio.h);
        const unsigned long long n0 = tc_runs(is_cuda);
        be->layer_fwd(E, &lp->d, &rp->d, u->d_tsrc, u->d_ttgt, Xio.d, Z.d);
        t_check(c, &Z, op, "fwd Z", 0);
        t_check(c, &Xio, op, "fwd X += RealSpace(Z)", 0);
        tc_expect(is_cuda, n0, tc_fwd, op, "fwd");
    }
    if (be->layer_vjp) {
        tens Z = features(c, E, dm->Q, dm->F, zero_z);
        tens Xb = t_acc(c, (size_t)E * XE);
        double *tmp = hbuf(c, (size_t)E * XE);
        for (size_t k = 0; k < (size_t)E * XE; k++)
            tmp[k] = 0.0;
        ref_realspace_vjp(E, &rp->h, u->tsrc, u->ttgt, Z.h, Xb.h, tmp);
        ref_linear_vjp(E, &lp->h, u->tsrc, u->ttgt, tmp, Xb.h);
        void *dtmp = dalloc(c, (size_t)E * XE * be->real_size);
        const unsigned long long n0 = tc_runs(is_cuda);
        be->layer_vjp(E, &lp->d, &rp->d, u->d_tsrc, u->d_ttgt, Z.d, Xb.d, dtmp);
        t_check(c, &Xb, op, "vjp Xbar", 1);
        tc_expect(is_cuda, n0, tc_vjp, op, "vjp");
    }
}

static void test_layers(tctx *c, setup *u)
{
    const ecenet_backend *be = c->be;
    const ecenet_dims *dm = &u->dh;
    const int F = dm->F, Q = dm->Q, G = dm->G, T = dm->T;
    const int64_t E = dm->E;
    const size_t XE = (size_t)Q * 2 * F;
    char op[96];
    /* cuda: the tensor-core kernels (cuda_layer_tc.cu) are tested with them off
     * (tc = 0), on (tc = 2: mma.sync, split TF32 for strict fp32) and with
     * the wgmma forward (tc = 3), and must really run where they apply */
#ifdef ECENET_HAVE_CUDA
    const int is_cuda = !strcmp(be->name, "cuda");
    const int split = is_cuda && be->real_size == 4 && !ecn_cuda_tf32(); /* split TF32 */
#else
    const int is_cuda = 0, split = 0;
#endif
    /* linear: square and bottleneck widths, with and without bias/corrections */
    const int widths[3][2] = {{F, F}, {F, F / 2 + 1}, {3, F}};
    for (int tc = 0; tc <= (is_cuda ? 2 : 0); tc += 2)
    for (int wi = 0; wi < 3; wi++)
        for (int variant = 0; variant < 2; variant++) {
            const int fin = widths[wi][0], fout = widths[wi][1];
            const int corr = variant ? u->s.corr : 0;
            lin_pair lp = make_linear(c, fin, fout, Q, T, variant == 0, corr);
            snprintf(op, sizeof op, "linear %d->%d bias=%d corr=%d tc=%d", fin, fout, variant == 0,
                     corr, tc);
            const int tc_old = tc_set(is_cuda, tc);
            for (int z = 0; z < 2; z++) {
                tens X = features(c, E, Q, fin, z);
                tens Y = t_out(c, (size_t)E * Q * 2 * fout);
                ref_linear_fwd(E, &lp.h, u->tsrc, u->ttgt, X.h, Y.h);
                be->linear_fwd(E, &lp.d, u->d_tsrc, u->d_ttgt, X.d, Y.d);
                t_check(c, &Y, op, "fwd Y", 0);
                /* with the transposed weights (the engine's case, where the
                 * backend asks for them) and without */
                for (int wt = !!lp.d.w_t; wt >= 0; wt--) {
                    tens Yb = features(c, E, Q, fout, z), Xb = t_acc(c, (size_t)E * Q * 2 * fin);
                    ref_linear_vjp(E, &lp.h, u->tsrc, u->ttgt, Yb.h, Xb.h);
                    ecenet_linear_params pd = lp.d;
                    if (!wt)
                        pd.w_t = NULL;
                    const unsigned long long n0 = tc_runs(is_cuda);
                    be->linear_vjp(E, &pd, u->d_tsrc, u->d_ttgt, Yb.d, Xb.d);
                    t_check(c, &Xb, op, wt ? "vjp Xbar (w_t)" : "vjp Xbar", 1);
                    tc_expect(is_cuda, n0,
                              tc && split && Q == 4 && fin % 64 == 0 && fout % 16 == 0 && E > 0,
                              op, "vjp");
                }
            }
            tc_set(is_cuda, tc_old);
        }
    /* cuda strict fp32: the linears' split-TF32 GEMM kernel (cuda_linear_x3.cuh)
     * on and off, on widths that take it (K % 4 == 0, N even; several 64-wide
     * output tiles and a partial one) and widths that fall back to cuBLAS;
     * it must run exactly where it applies (one launch per cos / sin batch),
     * on the weights split beforehand (w_split, w_t_split, as the engine
     * gives them) where it has them, and give the same bits without them */
#ifdef ECENET_HAVE_CUDA
    if (is_cuda && be->real_size == 4 && !ecn_cuda_tf32()) {
        const int xw[5][2] = {{F, F}, {F + 4, F - 2}, {12, 2 * F + 6}, {2 * F + 8, 20}, {F, F + 1}};
        for (int x3 = 1; x3 >= 0; x3--)
            for (int wi = 0; wi < 5; wi++)
                for (int variant = 0; variant < 2; variant++) {
                    const int fin = xw[wi][0], fout = xw[wi][1];
                    if (fout < 1)
                        continue;
                    const int corr = variant ? u->s.corr : 0;
                    const int old = ecn_cuda_set_fp32_gemm(x3);
                    /* with the split weights where the kernel runs (x3), as the engine */
                    lin_pair lp = make_linear(c, fin, fout, Q, T, variant == 0, corr);
                    snprintf(op, sizeof op, "linear %d->%d bias=%d corr=%d fp32_gemm=%s", fin,
                             fout, variant == 0, corr, x3 ? "x3" : "sgemm");
                    ck_assert_msg(!x3 == !lp.d.w_split, "%s: split weights %s", op,
                                  x3 ? "not made" : "made for cuBLAS");
                    const unsigned per = Q > 1 ? 2u : 1u; /* cos batch, sin batch */
                    tens X = features(c, E, Q, fin, 0);
                    tens Y = t_out(c, (size_t)E * Q * 2 * fout);
                    ref_linear_fwd(E, &lp.h, u->tsrc, u->ttgt, X.h, Y.h);
                    unsigned long long r0 = ecn_cuda_fp32_gemm_x3_runs(),
                                       p0 = ecn_cuda_fp32_gemm_x3_pre_runs();
                    be->linear_fwd(E, &lp.d, u->d_tsrc, u->d_ttgt, X.d, Y.d);
                    unsigned long long ran = ecn_cuda_fp32_gemm_x3_runs() - r0,
                                       pre = ecn_cuda_fp32_gemm_x3_pre_runs() - p0;
                    t_check(c, &Y, op, "fwd Y", 0);
                    int applies = x3 && E > 0 && fin % 4 == 0 && fout % 2 == 0;
                    ck_assert_msg(ran == (applies ? per : 0u),
                                  "%s fwd: split-TF32 kernel ran %llu times, expected %u", op,
                                  ran, applies ? per : 0u);
                    ck_assert_msg(pre == ran, "%s fwd: %llu of %llu runs on the split weights", op,
                                  pre, ran);
                    if (applies) { /* the kernel splitting W itself: the same bits */
                        ecenet_linear_params pd = lp.d;
                        pd.w_split = NULL;
                        tens Y2 = t_out(c, Y.n);
                        p0 = ecn_cuda_fp32_gemm_x3_pre_runs();
                        be->linear_fwd(E, &pd, u->d_tsrc, u->d_ttgt, X.d, Y2.d);
                        ck_assert_msg(ecn_cuda_fp32_gemm_x3_pre_runs() == p0,
                                      "%s fwd: ran on split weights it was not given", op);
                        t_same_bits(c, &Y, &Y2, op, "fwd Y, w_split vs none");
                    }
                    if (!lp.d.w_t) { /* the kernel takes the VJP on the transposed weights only */
                        ecn_cuda_set_fp32_gemm(old);
                        continue;
                    }
                    tens Yb = features(c, E, Q, fout, 0), Xb = t_acc(c, (size_t)E * Q * 2 * fin);
                    ref_linear_vjp(E, &lp.h, u->tsrc, u->ttgt, Yb.h, Xb.h);
                    tens Xb2 = t_acc(c, Xb.n); /* the same initial values as Xb */
                    if (Xb.n)
                        be->copy(Xb2.d, Xb.d, Xb.n * be->real_size);
                    r0 = ecn_cuda_fp32_gemm_x3_runs();
                    p0 = ecn_cuda_fp32_gemm_x3_pre_runs();
                    be->linear_vjp(E, &lp.d, u->d_tsrc, u->d_ttgt, Yb.d, Xb.d);
                    ran = ecn_cuda_fp32_gemm_x3_runs() - r0;
                    pre = ecn_cuda_fp32_gemm_x3_pre_runs() - p0;
                    t_check(c, &Xb, op, "vjp Xbar (w_t)", 1);
                    const int tcm = ecn_cuda_set_layer_tc(0); /* (the tc VJP goes first) */
                    ecn_cuda_set_layer_tc(tcm);
                    applies = x3 && E > 0 && fout % 4 == 0 && fin % 2 == 0 && tcm != 2;
                    ck_assert_msg(ran == (applies ? per : 0u),
                                  "%s vjp: split-TF32 kernel ran %llu times, expected %u", op,
                                  ran, applies ? per : 0u);
                    ck_assert_msg(pre == ran && !x3 == !lp.d.w_t_split,
                                  "%s vjp: %llu of %llu runs on the split weights", op, pre, ran);
                    if (applies) {
                        ecenet_linear_params pd = lp.d;
                        pd.w_t_split = NULL;
                        be->linear_vjp(E, &pd, u->d_tsrc, u->d_ttgt, Yb.d, Xb2.d);
                        t_same_bits(c, &Xb, &Xb2, op, "vjp Xbar, w_t_split vs none");
                    }
                    ecn_cuda_set_fp32_gemm(old);
                }
    }
#endif
    /* the first layer's linear (frame_nl): X with the edge frame's zeros
     * (channel b·(L+1) + l of slot m zero where l < m, the sin m = 0 slot
     * zero); the VJP is compared at the valid positions, the only ones it
     * must update. cuda runs its packed path here (except with TF32), and
     * must really run it */
    if (dm->Q <= dm->L + 1)
        for (int variant = 0; variant < 2; variant++) {
            const int nl = dm->L + 1, corr = variant ? u->s.corr : 0;
            lin_pair lp = make_linear(c, F, F, Q, T, 1, corr);
            lp.h.frame_nl = lp.d.frame_nl = nl;
            snprintf(op, sizeof op, "linear %d->%d frame_nl=%d corr=%d", F, F, nl, corr);
            const size_t n = (size_t)E * XE;
            double *x = hbuf(c, n);
            unsigned char *valid = (unsigned char *)hbuf(c, n);
            for (size_t k = 0; k < n; k++) {
                const int f = (int)(k % (size_t)F), slot = (int)(k / F % (2 * Q)), m = slot / 2;
                valid[k] = f % nl >= m && slot != 1;
                x[k] = valid[k] ? tu_normal() : 0.0;
            }
            tens X = t_from(c, x, n), Y = t_out(c, n);
#ifdef ECENET_HAVE_CUDA
            const unsigned long long r0 = is_cuda ? ecn_cuda_frame_pack_runs() : 0;
#endif
            ref_linear_fwd(E, &lp.h, u->tsrc, u->ttgt, X.h, Y.h);
            be->linear_fwd(E, &lp.d, u->d_tsrc, u->d_ttgt, X.d, Y.d);
            t_check(c, &Y, op, "fwd Y", 0);
            tens Yb = t_rand(c, n, 1.0), Xb = t_acc(c, n);
            ref_linear_vjp(E, &lp.h, u->tsrc, u->ttgt, Yb.h, Xb.h);
            be->linear_vjp(E, &lp.d, u->d_tsrc, u->d_ttgt, Yb.d, Xb.d);
            t_check_mask(c, &Xb, op, "vjp Xbar (valid positions)", 1, valid);
#ifdef ECENET_HAVE_CUDA
            if (is_cuda) {
                /* Q = 1: only the cos m = 0 slot, which has no zeros to skip */
                const int applies = E > 0 && Q >= 2 && !(be->real_size == 4 && ecn_cuda_tf32());
                const unsigned long long ran = ecn_cuda_frame_pack_runs() - r0;
                ck_assert_msg(ran == (applies ? 2u : 0u),
                              "%s: the packed path ran %llu times, expected %d", op, ran,
                              applies ? 2 : 0);
            }
#endif
        }
    /* RealSpace: every activation (the shape's first), model tables and random ones,
     * with and without the affine; on cuda the grid tables also with the
     * table flags (rs_mode): sin0_zero (which lets it skip that slot, here
     * with a random, nonzero sin m = 0 input slot, which meets only zero
     * table entries either way) and grid_sym (the folded grid) */
#ifdef ECENET_HAVE_CUDA
    const unsigned long long sym0 = is_cuda ? ecn_cuda_rs_sym_runs() : 0;
#endif
    for (int act = 0; act <= ECENET_ACT_IDENTITY; act++)
        for (int variant = 0; variant < 3; variant++)
        for (int mode = 0; mode < (variant != 1 ? 4 : 1); mode++) {
            const int a = (act + u->s.act) % (ECENET_ACT_IDENTITY + 1);
            const int affine = variant >= 1, corr = variant == 2 && u->s.corr;
            rs_pair rp = make_rs(c, F, Q, G, T, a, affine, corr, variant == 1);
            const int s0z = rs_mode(&rp, mode, variant != 1);
            snprintf(op, sizeof op, "realspace act=%d affine=%d corr=%d tables=%s%s%s", a, affine,
                     corr, variant == 1 ? "random" : "grid", s0z ? " (sin0_zero)" : "",
                     rp.d.grid_sym ? " (grid_sym)" : "");
            tens X = features(c, E, Q, F, variant != 1 && !s0z);
            tens Y = t_out(c, (size_t)E * XE);
            ref_realspace_fwd(E, &rp.h, u->tsrc, u->ttgt, X.h, Y.h);
            be->realspace_fwd(E, &rp.d, u->d_tsrc, u->d_ttgt, X.d, Y.d);
            t_check(c, &Y, op, "fwd Y", 0);
            tens Yb = t_rand(c, (size_t)E * XE, 1.0), Xb = t_acc(c, (size_t)E * XE);
            if (a == ECENET_ACT_RELU && relu_kink_mask(&rp.h, u->tsrc, u->ttgt, E, X.h, Yb.h))
                be->upload(Yb.d, Yb.h, (size_t)E * XE);
            ref_realspace_vjp(E, &rp.h, u->tsrc, u->ttgt, X.h, Yb.h, Xb.h);
            be->realspace_vjp(E, &rp.d, u->d_tsrc, u->d_ttgt, X.d, Yb.d, Xb.d);
            t_check(c, &Xb, op, "vjp Xbar", 1);
        }
#ifdef ECENET_HAVE_CUDA
    if (is_cuda) {
        /* the folded kernels, the default on grid_sym layers, must really
         * run: rs_mode's modes 2 and 3 make the grid tables grid_sym (G odd),
         * and where the vector kernels apply (Q = 4, whole 16-byte rows of
         * channels) those cases launch them, unless the environment turns
         * the fold (ECENET_RS_SYM=0) or the vector kernels
         * (ECENET_RS_VECTOR=0) off; elsewhere nothing may run them */
        const int on = ecn_cuda_rs_sym_on() && ecn_cuda_set_rs_vector(-1) > 0;
        const int fits = Q == 4 && F % (int)(16 / be->real_size) == 0 && E > 0 && G >= 3 &&
                         G % 2 == 1;
        const unsigned long long ran = ecn_cuda_rs_sym_runs() - sym0;
        if (on && fits)
            ck_assert_msg(ran > 0, "realspace (F %d, Q %d, G %d): the folded kernels never ran",
                          F, Q, G);
        else
            ck_assert_msg(ran == 0, "realspace (F %d, Q %d, G %d): the folded kernels ran %llu "
                          "times where they do not apply", F, Q, G, ran);
    }
#endif
    /* add */
    {
        tens X = t_rand(c, (size_t)E * XE, 1.0), Y = t_acc(c, (size_t)E * XE);
        ref_add((int64_t)(E * XE), X.h, Y.h);
        be->add((int64_t)(E * XE), X.d, Y.d);
        t_check(c, &Y, "add", "Y", 0);
    }
    /* fused layer (optional entries) against the ref composition; variant 2:
     * a nonzero sin m = 0 slot (never in a model, but the product stays exact).
     * The tensor-core forward applies for fp32, Q = 4, F % 64 == 0, no per-type
     * weights or affine; its VJP GEMM in split TF32 only */
    /* the table flags (rs_mode): sin0_zero (the model's case: tables with
     * sin(0·θ) = 0 and a zero sin m = 0 input slot), which lets cuda skip
     * that slot, and grid_sym, which lets omp and cuda fold the grid */
    if (be->layer_fwd || be->layer_vjp)
        for (int tc = 0; tc <= (is_cuda ? 3 : 0); tc += tc ? 1 : 2)
        for (int variant = 0; variant < 3; variant++)
        for (int mode = 0; mode < 4; mode++) {
            if (variant == 2 && (mode == 1 || mode == 2))
                continue; /* a nonzero sin m = 0 slot: not sin0_zero */
            const int corr = variant == 1 ? u->s.corr : 0;
            lin_pair lp = make_linear(c, F, F, Q, T, 1, corr);
            rs_pair rp = make_rs(c, F, Q, G, T, u->s.act, variant == 1, corr, 0);
            const int s0z = rs_mode(&rp, mode, 1);
            snprintf(op, sizeof op, "layer corr=%d affine=%d sin0=%s%s%s tc=%d", corr,
                     variant == 1, variant == 2 ? "random" : "zero", s0z ? " (sin0_zero)" : "",
                     rp.d.grid_sym ? " (grid_sym)" : "", tc);
            tens X = features(c, E, Q, F, variant != 2);
            const int tc_old = tc_set(is_cuda, tc);
            int tc_fits = tc && be->real_size == 4 && Q == 4 && F % 64 == 0 && E > 0;
#ifdef ECENET_HAVE_CUDA
            if (tc == 3) /* wgmma: TF32 on sin0_zero layers, where built and on sm_90;
                          * one CTA per m and 128 features, clusters of 4·F/128 <= 8 */
                tc_fits = tc_fits && !split && s0z && ecn_cuda_layer_wg_available() &&
                          F % 128 == 0 && F <= 256;
#endif
            layer_check(c, u, &lp, &rp, &X, variant == 0, op, is_cuda, tc_fits && !corr,
                        tc == 2 && tc_fits && split);
            tc_set(is_cuda, tc_old);
        }
#ifdef ECENET_HAVE_CUDA
    /* cuda: the cuBLAS layer path chunk by chunk (ecn_cuda_set_layer_chunk),
     * 5 edges a chunk (and a shorter last one where 5 does not divide E),
     * in every table mode */
    if (is_cuda && be->layer_fwd && be->layer_vjp && E > 5)
        for (int mode = 0; mode < 4; mode++) {
            lin_pair lp = make_linear(c, F, F, Q, T, 1, u->s.corr);
            rs_pair rp = make_rs(c, F, Q, G, T, u->s.act, 1, u->s.corr, 0);
            const int s0z = rs_mode(&rp, mode, 1);
            snprintf(op, sizeof op, "layer in chunks of 5 edges corr=%d%s%s", u->s.corr,
                     s0z ? " (sin0_zero)" : "", rp.d.grid_sym ? " (grid_sym)" : "");
            tens X = features(c, E, Q, F, 1);
            const int tc_old = tc_set(is_cuda, 0);
            const long long ch_old = ecn_cuda_set_layer_chunk(5);
            const unsigned long long r0 = ecn_cuda_layer_chunk_runs();
            layer_check(c, u, &lp, &rp, &X, 1, op, is_cuda, 0, 0);
            const unsigned long long ran = ecn_cuda_layer_chunk_runs() - r0;
            ecn_cuda_set_layer_chunk(ch_old);
            tc_set(is_cuda, tc_old);
            ck_assert_msg(ran == 2, "%s: %llu chunked layer calls, expected 2", op, ran);
        }
#endif
    /* the fused layer on the first layer's linear (frame_nl), as the engine
     * runs it (sin0_zero where cuda honours it); the VJP at the valid positions */
    if (be->layer_fwd && be->layer_vjp && Q <= dm->L + 1) {
        const int nl = dm->L + 1;
        lin_pair lp = make_linear(c, F, F, Q, T, 1, 0);
        lp.h.frame_nl = lp.d.frame_nl = nl;
        rs_pair rp = make_rs(c, F, Q, G, T, u->s.act, 0, 0, 0);
        rp.h.sin0_zero = rp.d.sin0_zero = is_cuda;
        snprintf(op, sizeof op, "layer frame_nl=%d sin0_zero=%d", nl, is_cuda);
        const size_t n = (size_t)E * XE;
        tens Xio = t_acc(c, n), Z = t_out(c, n);
        unsigned char *valid = (unsigned char *)hbuf(c, n);
        for (size_t k = 0; k < n; k++) {
            const int f = (int)(k % (size_t)F), slot = (int)(k / F % (2 * Q)), m = slot / 2;
            valid[k] = f % nl >= m && slot != 1;
            Xio.h[k] = Xio.init[k] = valid[k] ? tu_normal() : 0.0;
        }
        if (E) {
            be->upload(Xio.d, Xio.h, n);
            be->download(Xio.h, Xio.d, n); /* rounded to the backend's precision */
            memcpy(Xio.init, Xio.h, n * sizeof(double));
        }
        double *tmp = hbuf(c, n);
        ref_linear_fwd(E, &lp.h, u->tsrc, u->ttgt, Xio.h, Z.h);
        ref_realspace_fwd(E, &rp.h, u->tsrc, u->ttgt, Z.h, tmp);
        ref_add((int64_t)n, tmp, Xio.h);
        be->layer_fwd(E, &lp.d, &rp.d, u->d_tsrc, u->d_ttgt, Xio.d, Z.d);
        t_check(c, &Z, op, "fwd Z", 0);
        t_check(c, &Xio, op, "fwd X += RealSpace(Z)", 0);
        tens Zb = features(c, E, Q, F, 1), Xb = t_acc(c, n);
        for (size_t k = 0; k < n; k++)
            tmp[k] = 0.0;
        ref_realspace_vjp(E, &rp.h, u->tsrc, u->ttgt, Zb.h, Xb.h, tmp);
        ref_linear_vjp(E, &lp.h, u->tsrc, u->ttgt, tmp, Xb.h);
        be->layer_vjp(E, &lp.d, &rp.d, u->d_tsrc, u->d_ttgt, Zb.d, Xb.d,
                      dalloc(c, n * be->real_size));
        t_check_mask(c, &Xb, op, "vjp Xbar (valid positions)", 1, valid);
    }
}

static void test_mp(tctx *c, setup *u)
{
    const ecenet_backend *be = c->be;
    const ecenet_dims *dm = &u->dh;
    const size_t E = (size_t)dm->E, N = (size_t)dm->N, BS = (size_t)dm->B * dm->S;
    const size_t XE = (size_t)dm->Q * 2 * dm->F, ND = (size_t)dm->ND, F = (size_t)dm->F;
    const int T = dm->T, B = dm->B;
    const int fa_old = fa_set(c, 0); /* cuda: staging through registers first */
    const int far_old = far_set(c, 1), fp_old = fp_set(c, 0);
    tens X = features(c, dm->E, dm->Q, dm->F, 1), D = t_rand(c, E * ND, 0.5);
    tens g = t_out(c, E * BS);
    ref_mp_pack_unrotate_fwd(dm, X.h, D.h, g.h, NULL);
    be->mp_pack_unrotate_fwd(&u->dd, X.d, D.d, g.d, NULL);
    t_check(c, &g, "mp_pack_unrotate_fwd", "g", 0);
    /* again, keeping the input for the backward as the engine does */
    tens g2 = t_out(c, E * BS), Xs = t_out(c, E * XE);
    ref_mp_pack_unrotate_fwd(dm, X.h, D.h, g2.h, Xs.h);
    be->mp_pack_unrotate_fwd(&u->dd, X.d, D.d, g2.d, Xs.d);
    t_check(c, &g2, "mp_pack_unrotate_fwd (saving X)", "g", 0);
    t_check(c, &Xs, "mp_pack_unrotate_fwd (saving X)", "copy of X", 0);
    t_same_bits(c, &Xs, &X, "mp_pack_unrotate_fwd (saving X)", "copy of X, bit for bit");
    tens gbar = t_rand(c, E * BS, 1.0), Xb = t_acc(c, E * XE), Db = t_acc(c, E * ND);
    ref_mp_pack_unrotate_vjp(dm, X.h, D.h, gbar.h, Xb.h, Db.h);
    be->mp_pack_unrotate_vjp(&u->dd, X.d, D.d, gbar.d, Xb.d, Db.d);
    t_check(c, &Xb, "mp_pack_unrotate_vjp", "Xbar", 1);
    t_check(c, &Db, "mp_pack_unrotate_vjp", "Dbar", 1);

    const int K = 4;
    tens fr = t_rand(c, E * K, 1.0), Wm = t_rand(c, (size_t)T * T * K * B, 0.5);
    tens w = t_out(c, E * F);
    ref_mp_weight_fwd(dm, K, u->tsrc, u->ttgt, fr.h, Wm.h, w.h);
    be->mp_weight_fwd(&u->dd, K, u->d_tsrc, u->d_ttgt, fr.d, Wm.d, w.d);
    t_check(c, &w, "mp_weight_fwd", "w", 0);
    tens wbar = t_rand(c, E * F, 1.0), frb = t_acc(c, E * K);
    ref_mp_weight_vjp(dm, K, u->tsrc, u->ttgt, Wm.h, wbar.h, frb.h);
    be->mp_weight_vjp(&u->dd, K, u->d_tsrc, u->d_ttgt, Wm.d, wbar.d, frb.d);
    t_check(c, &frb, "mp_weight_vjp", "frbar", 1);

    tens gin = t_rand(c, E * BS, 1.0), win = t_rand(c, E * F, 1.0);
    tens Delta = t_out(c, N * BS);
    ref_mp_scatter_fwd(dm, u->edge_j, gin.h, win.h, Delta.h);
    be->mp_scatter_fwd(&u->dd, u->d_edge_j, gin.d, win.d, Delta.d);
    t_check(c, &Delta, "mp_scatter_fwd", "Delta", 0);
    tens Dlb = t_rand(c, N * BS, 1.0), gb = t_acc(c, E * BS), wb = t_acc(c, E * F);
    ref_mp_scatter_vjp(dm, u->edge_j, gin.h, win.h, Dlb.h, gb.h, wb.h);
    be->mp_scatter_vjp(&u->dd, u->d_edge_j, gin.d, win.d, Dlb.d, gb.d, wb.d);
    t_check(c, &gb, "mp_scatter_vjp", "gbar", 1);
    t_check(c, &wb, "mp_scatter_vjp", "wbar", 1);

    tens Dl = t_rand(c, N * BS, 1.0), Xio = t_acc(c, E * XE);
    ref_mp_rotate_unpack_fwd(dm, u->edge_i, Dl.h, D.h, Xio.h);
    be->mp_rotate_unpack_fwd(&u->dd, u->d_edge_i, Dl.d, D.d, Xio.d);
    t_check(c, &Xio, "mp_rotate_unpack_fwd", "X += unpack", 0);
    tens Xbar = t_rand(c, E * XE, 1.0), Dlbar = t_acc(c, N * BS), Db2 = t_acc(c, E * ND);
    ref_mp_rotate_unpack_vjp(dm, u->edge_i, Dl.h, D.h, Xbar.h, Dlbar.h, Db2.h);
    const unsigned long long rb0 = far_runs(c);
    be->mp_rotate_unpack_vjp(&u->dd, u->d_edge_i, Dl.d, D.d, Xbar.d, Dlbar.d, Db2.d);
    t_check(c, &Dlbar, "mp_rotate_unpack_vjp", "Delta_bar", 1);
    t_check(c, &Db2, "mp_rotate_unpack_vjp", "Dbar", 1);
    if (!strcmp(be->name, "cuda")) { /* the general per-atom kernel: the same sums, the same bits */
        far_expect(c, rb0, E, dm->L, "mp_rotate_unpack_vjp");
        far_set(c, 0);
        tens Dlb3 = t_acc_like(c, &Dlbar), Db3 = t_acc_like(c, &Db2);
        be->mp_rotate_unpack_vjp(&u->dd, u->d_edge_i, Dl.d, D.d, Xbar.d, Dlb3.d, Db3.d);
        far_set(c, 1);
        t_same_bits(c, &Dlb3, &Dlbar, "mp_rotate_unpack_vjp",
                    "Delta_bar, general frame_atom kernel");
    }
    if (!strcmp(be->name, "cuda")) { /* staged with cp.async: the same values, the same bits */
        fa_set(c, 1);
        const unsigned long long r0 = fa_runs(c);
        tens ga = t_out(c, g2.n), Xsa = t_out(c, Xs.n), Xba = t_acc_like(c, &Xb);
        tens Dba = t_acc_like(c, &Db), Xioa = t_acc_like(c, &Xio), Dlba = t_acc_like(c, &Dlbar);
        tens Db2a = t_acc_like(c, &Db2);
        be->mp_pack_unrotate_fwd(&u->dd, X.d, D.d, ga.d, Xsa.d);
        be->mp_pack_unrotate_vjp(&u->dd, X.d, D.d, gbar.d, Xba.d, Dba.d);
        be->mp_rotate_unpack_fwd(&u->dd, u->d_edge_i, Dl.d, D.d, Xioa.d);
        be->mp_rotate_unpack_vjp(&u->dd, u->d_edge_i, Dl.d, D.d, Xbar.d, Dlba.d, Db2a.d);
        fa_set(c, 0);
        fa_expect(c, r0, 5, E, "message passing");
        t_same_bits(c, &ga, &g2, "mp_pack_unrotate_fwd", "g, cp.async staging");
        t_same_bits(c, &Xsa, &Xs, "mp_pack_unrotate_fwd", "copy of X, cp.async staging");
        t_same_bits(c, &Xba, &Xb, "mp_pack_unrotate_vjp", "Xbar, cp.async staging");
        t_same_bits(c, &Dba, &Db, "mp_pack_unrotate_vjp", "Dbar, cp.async staging");
        t_same_bits(c, &Xioa, &Xio, "mp_rotate_unpack_fwd", "X += unpack, cp.async staging");
        t_same_bits(c, &Dlba, &Dlbar, "mp_rotate_unpack_vjp", "Delta_bar, cp.async staging");
        t_same_bits(c, &Db2a, &Db2, "mp_rotate_unpack_vjp", "Dbar, cp.async staging");
        /* the pipelined per-edge kernels: frame_out_pk, pu_vjp_pk, frame_dbar_pk */
        const pipe_run pr = pipe_begin(c);
        tens gp = t_out(c, g2.n), Xsp = t_out(c, Xs.n), Xbp = t_acc_like(c, &Xb);
        tens Dbp = t_acc_like(c, &Db), Dlbp = t_acc_like(c, &Dlbar), Db2p = t_acc_like(c, &Db2);
        be->mp_pack_unrotate_fwd(&u->dd, X.d, D.d, gp.d, Xsp.d);
        be->mp_pack_unrotate_vjp(&u->dd, X.d, D.d, gbar.d, Xbp.d, Dbp.d);
        be->mp_rotate_unpack_vjp(&u->dd, u->d_edge_i, Dl.d, D.d, Xbar.d, Dlbp.d, Db2p.d);
        pipe_end(c, &pr, 3, E, "message passing");
        t_same_bits(c, &gp, &g2, "mp_pack_unrotate_fwd", "g, pipelined kernel");
        t_same_bits(c, &Xsp, &Xs, "mp_pack_unrotate_fwd", "copy of X, pipelined kernel");
        t_same_bits(c, &Xbp, &Xb, "mp_pack_unrotate_vjp", "Xbar, pipelined kernel");
        t_same_bits(c, &Dbp, &Db, "mp_pack_unrotate_vjp", "Dbar, pipelined kernel");
        t_same_bits(c, &Dlbp, &Dlbar, "mp_rotate_unpack_vjp", "Delta_bar, pipelined D̄ kernel");
        t_same_bits(c, &Db2p, &Db2, "mp_rotate_unpack_vjp", "Dbar, pipelined kernel");
    }
    fa_set(c, fa_old);
    far_set(c, far_old);
    fp_set(c, fp_old);
}

static void test_attention(tctx *c, setup *u)
{
    const ecenet_backend *be = c->be;
    const ecenet_dims *dm = &u->dh;
    const size_t E = (size_t)dm->E, N = (size_t)dm->N, F = (size_t)dm->F;
    char op[96];
    for (int mode = ECENET_ATTN_SUM; mode <= ECENET_ATTN_SOFTMAX; mode++)
        for (int variant = 0; variant < 4; variant++) {
            const int heads = (variant & 1) && dm->B % 2 == 0 ? 2 : 1;
            const int l_att = (variant >> 1) & 1, env = variant & 1;
            const int K = heads * (l_att ? dm->L + 1 : 1);
            snprintf(op, sizeof op, "mp_attn_weight mode=%d heads=%d l_att=%d env=%d", mode, heads,
                     l_att, env);
            double *sc = hbuf(c, E * K), *fch = hbuf(c, E);
            for (size_t q = 0; q < E * K; q++)
                sc[q] = tu_normal();
            /* ties (exact and 1e-14 apart) at the maximum of every other receiver */
            for (int64_t j = 0; j < dm->N; j += 2) {
                const int32_t p0 = dm->e_dst.ptr[j], p1 = dm->e_dst.ptr[j + 1];
                if (p1 - p0 < 2)
                    continue;
                const int32_t e0 = dm->e_dst.idx[p0], e1 = dm->e_dst.idx[p1 - 1];
                for (int k = 0; k < K; k++) {
                    sc[(size_t)e0 * K + k] = 3.0;
                    sc[(size_t)e1 * K + k] = k % 2 ? 3.0 : 3.0 * (1.0 + 1e-14);
                }
            }
            for (size_t e = 0; e < E; e++)
                fch[e] = tu_uniform();
            tens s = t_from(c, sc, E * K), fc = t_from(c, fch, E);
            tens a = t_out(c, E * K), w = t_out(c, E * F);
            double *tmp_h = hbuf(c, 4 * N * K + 1);
            void *tmp_d = dalloc(c, (4 * N * K + 1) * be->real_size);
            ref_mp_attn_weight_fwd(dm, heads, l_att, mode, env, u->edge_j, s.h, fc.h, a.h, w.h,
                                   tmp_h);
            be->mp_attn_weight_fwd(&u->dd, heads, l_att, mode, env, u->d_edge_j, s.d, fc.d, a.d,
                                   w.d, tmp_d);
            t_check(c, &a, op, "fwd a", 0);
            t_check(c, &w, op, "fwd w", 0);
            tens wbar = t_rand(c, E * F, 1.0), sb = t_acc(c, E * K), fb = t_acc(c, E);
            ref_mp_attn_weight_vjp(dm, heads, l_att, mode, env, u->edge_j, s.h, fc.h, a.h, wbar.h,
                                   tmp_h, sb.h, fb.h);
            be->mp_attn_weight_vjp(&u->dd, heads, l_att, mode, env, u->d_edge_j, s.d, fc.d, a.d,
                                   wbar.d, tmp_d, sb.d, fb.d);
            t_check(c, &sb, op, "vjp sbar", 1);
            t_check(c, &fb, op, "vjp fcbar", 1);
        }
}

typedef struct {
    ecenet_mlp_params h, d;
} mlp_pair;

static mlp_pair make_mlp(tctx *c, int n_layers, const int *dims, int T, int act, int corr)
{
    mlp_pair p;
    memset(&p, 0, sizeof p);
    p.h.n_layers = p.d.n_layers = n_layers;
    p.h.T = p.d.T = T;
    p.h.act = p.d.act = act;
    for (int k = 0; k <= n_layers; k++)
        p.h.dims[k] = p.d.dims[k] = dims[k];
    for (int k = 0; k < n_layers; k++) {
        const size_t n = (size_t)dims[k + 1] * dims[k];
        const double sc = 1.0 / sqrt((double)dims[k]);
        tens w = t_rand(c, n, sc), b = t_rand(c, (size_t)dims[k + 1], 0.3);
        p.h.w[k] = w.h; p.d.w[k] = w.d;
        p.h.b[k] = b.h; p.d.b[k] = b.d;
        if (corr && k != 1) {
            tens ws = t_rand(c, (size_t)T * n, 0.3 * sc), wt = t_rand(c, (size_t)T * n, 0.3 * sc);
            p.h.w_src[k] = ws.h; p.d.w_src[k] = ws.d;
            if (k != 2) {
                p.h.w_tgt[k] = wt.h;
                p.d.w_tgt[k] = wt.d;
            }
        }
    }
    return p;
}

static void test_readout(tctx *c, setup *u)
{
    const ecenet_backend *be = c->be;
    const ecenet_dims *dm = &u->dh;
    const int64_t E = dm->E;
    const size_t XE = (size_t)dm->Q * 2 * dm->F;
    char op[96];
    /* readout MLPs: F -> hidden... -> out; the one-layer score MLP with H = NULL;
     * a wide first layer (cuda: its VJP goes through the 8 MiB scratch in 2-3
     * row chunks at E = 5000) */
    const int cfgs[5][5] = {{2, 7, 3, 0, 0}, {3, 9, 5, 4, 0}, {1, 3, 0, 0, 0}, {4, 6, 5, 4, 1},
                            {2, 520, 3, 0, 0}};
    for (int ci = 0; ci < 5; ci++)
        for (int corr = 0; corr < 2; corr++) {
            if (corr && !u->s.corr)
                continue;
            const int nl = cfgs[ci][0];
            int dims[ECENET_MLP_MAX + 1];
            dims[0] = dm->F;
            for (int k = 1; k <= nl; k++)
                dims[k] = cfgs[ci][k];
            const int act = (u->s.act + ci) % (ECENET_ACT_IDENTITY + 1);
            mlp_pair mp = make_mlp(c, nl, dims, dm->T, act, corr);
            snprintf(op, sizeof op, "mlp layers=%d act=%d corr=%d", nl, act, corr);
            int nh = 0;
            for (int k = 0; k + 1 < nl; k++)
                nh += dims[k + 1];
            const int dout = dims[nl];
            tens X = t_rand(c, (size_t)E * XE, 1.0);
            tens H = t_out(c, (size_t)E * nh), y = t_out(c, (size_t)E * dout);
            ref_mlp_fwd(dm, &mp.h, u->tsrc, u->ttgt, X.h, nl > 1 ? H.h : NULL, y.h);
            be->mlp_fwd(&u->dd, &mp.d, u->d_tsrc, u->d_ttgt, X.d, nl > 1 ? H.d : NULL, y.d);
            t_check(c, &y, op, "fwd y", 0);
            if (nl > 1)
                t_check(c, &H, op, "fwd H", 0);
            tens yb = t_rand(c, (size_t)E * dout, 1.0), Xb = t_acc(c, (size_t)E * XE);
            ref_mlp_vjp(dm, &mp.h, u->tsrc, u->ttgt, nl > 1 ? H.h : NULL, yb.h, Xb.h);
            be->mlp_vjp(&u->dd, &mp.d, u->d_tsrc, u->d_ttgt, nl > 1 ? H.d : NULL, yb.d, Xb.d);
            t_check(c, &Xb, op, "vjp Xbar", 1);
        }
    const int K = 3;
    tens y = t_rand(c, (size_t)E * K, 1.0), fr = t_rand(c, (size_t)E * K, 1.0);
    tens eps = t_out(c, (size_t)E);
    ref_energy_fwd(E, K, y.h, fr.h, eps.h);
    be->energy_fwd(E, K, y.d, fr.d, eps.d);
    t_check(c, &eps, "energy_fwd", "eps", 0);
    tens yb = t_acc(c, (size_t)E * K), frb = t_acc(c, (size_t)E * K);
    ref_energy_vjp(E, K, y.h, fr.h, yb.h, frb.h);
    be->energy_vjp(E, K, y.d, fr.d, yb.d, frb.d);
    t_check(c, &yb, "energy_vjp", "ybar", 1);
    t_check(c, &frb, "energy_vjp", "frbar", 1);
    const size_t ns = (size_t)E * K;
    double s_ref = ref_sum((int64_t)ns, y.h), s_be = be->sum((int64_t)ns, y.d);
    double scale = 0.0;
    for (size_t k = 0; k < ns; k++)
        scale += fabs(y.h[k]);
    ck_assert_msg(fabs(s_ref - s_be) <= c->tol_f * (scale > 0 ? scale : 1.0),
                  "%s sum [%s]: %.17g vs ref %.17g", be->name, c->shape, s_be, s_ref);
}

static void test_film(tctx *c, setup *u)
{
    const ecenet_backend *be = c->be;
    const ecenet_dims *dm = &u->dh;
    const int64_t E = dm->E;
    const int F = dm->F, T = dm->T, P = 3;
    const size_t XE = (size_t)dm->Q * 2 * F;
    char op[96];
    for (int n_rbf = 0; n_rbf <= 4; n_rbf += 4) {
        const int dims[3] = {2 * P + n_rbf, 11, F};
        mlp_pair mp = make_mlp(c, 2, dims, T, ECENET_ACT_SILU, 0);
        tens ea = t_rand(c, (size_t)T * P, 1.0), eb = t_rand(c, (size_t)T * P, 1.0);
        tens fr = t_rand(c, (size_t)E * n_rbf, 1.0);
        tens H = t_out(c, (size_t)E * 11), gamma = t_out(c, (size_t)E * F);
        snprintf(op, sizeof op, "film n_rbf=%d", n_rbf);
        ref_film_fwd(dm, &mp.h, ea.h, eb.h, P, n_rbf, u->tsrc, u->ttgt, fr.h, H.h, gamma.h);
        be->film_fwd(&u->dd, &mp.d, ea.d, eb.d, P, n_rbf, u->d_tsrc, u->d_ttgt, fr.d, H.d,
                     gamma.d);
        t_check(c, &gamma, op, "fwd gamma", 0);
        t_check(c, &H, op, "fwd H", 0);
        tens gb = t_rand(c, (size_t)E * F, 1.0), frb = t_acc(c, (size_t)E * n_rbf);
        ref_film_vjp(dm, &mp.h, P, n_rbf, u->tsrc, u->ttgt, H.h, gb.h, frb.h);
        be->film_vjp(&u->dd, &mp.d, P, n_rbf, u->d_tsrc, u->d_ttgt, H.d, gb.d, frb.d);
        t_check(c, &frb, op, "vjp frbar", 1);
    }
    const int Fw = F / 2 + 1, Q = dm->Q;
    tens s = t_rand(c, (size_t)E * Fw, 1.0), X = t_rand(c, (size_t)E * 2 * Q * Fw, 1.0);
    tens Y = t_out(c, (size_t)E * 2 * Q * Fw);
    ref_chan_scale_fwd(E, Q, Fw, s.h, X.h, Y.h);
    be->chan_scale_fwd(E, Q, Fw, s.d, X.d, Y.d);
    t_check(c, &Y, "chan_scale_fwd", "Y", 0);
    tens Yb = t_rand(c, (size_t)E * 2 * Q * Fw, 1.0), Xb = t_acc(c, (size_t)E * 2 * Q * Fw);
    tens sb = t_acc(c, (size_t)E * Fw);
    ref_chan_scale_vjp(E, Q, Fw, s.h, X.h, Yb.h, Xb.h, sb.h);
    be->chan_scale_vjp(E, Q, Fw, s.d, X.d, Yb.d, Xb.d, sb.d);
    t_check(c, &Xb, "chan_scale_vjp", "Xbar", 1);
    t_check(c, &sb, "chan_scale_vjp", "sbar", 1);
    tens Xb2 = t_acc(c, (size_t)E * 2 * Q * Fw);
    ref_chan_scale_vjp(E, Q, Fw, s.h, X.h, Yb.h, Xb2.h, NULL);
    be->chan_scale_vjp(E, Q, Fw, s.d, X.d, Yb.d, Xb2.d, NULL);
    t_check(c, &Xb2, "chan_scale_vjp", "Xbar (no sbar)", 1);
    (void)XE;
}

typedef void (*op_test)(tctx *, setup *);

static void run_op_test(int bi, op_test fn, const char *family)
{
    const ecenet_backend *be = get_backend(bi);
    if (!be)
        return;
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
        release_all(&c);
        dev_release_all();
        check_backend_error(be, family);
    }
    printf("%-5s %-8s %-11s: %d shapes, worst rel L2 fwd %.2e, vjp %.2e\n", be->name,
           BACKENDS[bi].label, family, N_SHAPES, c.worst_f, c.worst_v);
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
