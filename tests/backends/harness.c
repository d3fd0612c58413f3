/* The harness of the backend op tests (harness.h): the backends under test,
 * tensors on the host (ref) and on the backend, the shapes and their setups. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "backend.h"
#include "ref.h"
#include "test_util.h"
#include "harness.h"
#ifdef ECENET_HAVE_CUDA
#include "cuda_backend.h"
#endif

/* ---- the backends under test ------------------------------------------------ */

/* TF32 rounds every GEMM input to 11 significant bits. thglab_softmax's
 * forces (max|F| 1.5e4, from a sharp per-receiver softmax) are badly
 * conditioned: already in fp32 their error is ~1.4e-5 of max|F| (10x the
 * other cases), and TF32 scales that by ~2^13 input precision, so its forces
 * get a TF32-specific 2e-2 bound (energy stays 3e-3). */
const bk_id BACKENDS[] = {
    /* name   prec        tf32 label       tol_f  tol_v  tol_e  tol_F  tol_F_sharp */
    {"omp", ECENET_F64, 0, "f64", 1e-12, 1e-12, 1e-12, 1e-10, 1e-10},
    {"omp", ECENET_F32, 0, "f32", 1e-5, 1e-4, 1e-5, 1e-4, 1e-4},
    {"cuda", ECENET_F64, 0, "f64", 1e-11, 1e-11, 1e-12, 1e-10, 1e-10},
    {"cuda", ECENET_F32, 0, "f32", 1e-5, 1e-4, 1e-5, 1e-4, 1e-4},
    {"cuda", ECENET_F32, 1, "f32+tf32", 3e-3, 3e-3, 3e-3, 3e-3, 2e-2},
};
const int N_BACKENDS = (int)(sizeof BACKENDS / sizeof BACKENDS[0]);

/* Called inside the forked test process only: a CUDA context does not
 * survive fork(), so main() never touches a backend. */
const ecenet_backend *get_backend(int i)
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
void check_backend_error(const ecenet_backend *be, const char *where)
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

static void *own(tctx *c, void *p)
{
    ck_assert_ptr_nonnull(p);
    ck_assert_int_lt(c->n_owned, 4096);
    c->owned[c->n_owned++] = p;
    return p;
}

/* backend buffers are released through the backend */
typedef struct {
    const ecenet_backend *be;
    void *p[4096];
    int n;
} dev_pool;
static dev_pool DP;

void *dalloc(tctx *c, size_t bytes)
{
    void *p = c->be->alloc(bytes ? bytes : 1);
    ck_assert_ptr_nonnull(p);
    ck_assert_int_lt(DP.n, 4096);
    DP.be = c->be;
    DP.p[DP.n++] = p;
    return p;
}

t_mark_t t_mark(const tctx *c)
{
    t_mark_t m = {c->n_owned, DP.n};
    return m;
}

void t_release(tctx *c, t_mark_t m)
{
    ck_assert(m.host <= c->n_owned && m.dev <= DP.n);
    while (c->n_owned > m.host)
        free(c->owned[--c->n_owned]);
    while (DP.n > m.dev)
        DP.be->release(DP.p[--DP.n]);
}

double *hbuf(tctx *c, size_t n) { return own(c, malloc((n ? n : 1) * sizeof(double))); }

/* an input: host values rounded to the backend's precision */
tens t_from(tctx *c, const double *src, size_t n)
{
    tens t = {hbuf(c, n), dalloc(c, n * c->be->real_size), NULL, n};
    if (n) {
        c->be->upload(t.d, src, n);
        c->be->download(t.h, t.d, n);
    }
    return t;
}

tens t_rand(tctx *c, size_t n, double scale)
{
    double *s = hbuf(c, n);
    for (size_t k = 0; k < n; k++)
        s[k] = scale * tu_normal();
    return t_from(c, s, n);
}

/* a forward output: NaN on both sides */
tens t_out(tctx *c, size_t n)
{
    tens t = {hbuf(c, n), dalloc(c, n * c->be->real_size), NULL, n};
    for (size_t k = 0; k < n; k++)
        t.h[k] = NAN;
    if (n)
        c->be->upload(t.d, t.h, n);
    return t;
}

/* a VJP output: random initial values on both sides */
tens t_acc(tctx *c, size_t n)
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
void t_check_mask(tctx *c, const tens *t, const char *op, const char *what, int vjp,
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

void t_check(tctx *c, const tens *t, const char *op, const char *what, int vjp)
{
    t_check_mask(c, t, op, what, vjp, NULL);
}

/* a second VJP output with the initial values of t (for a rerun of its op) */
tens t_acc_like(tctx *c, const tens *t)
{
    tens r = t_from(c, t->init, t->n);
    r.init = t->init;
    return r;
}

void t_reset(tctx *c, const tens *t)
{
    if (!t->n)
        return;
    if (t->init) {
        c->be->upload(t->d, t->init, t->n);
        return;
    }
    double *nan_ = hbuf(c, t->n);
    for (size_t k = 0; k < t->n; k++)
        nan_[k] = NAN;
    c->be->upload(t->d, nan_, t->n);
}

/* cuda's kernel choices (enum cuda_choice, harness.h) */
int choice_set(int is_cuda, enum cuda_choice w, int v)
{
#ifdef ECENET_HAVE_CUDA
    if (is_cuda)
        switch (w) {
        case CHOICE_FRAME_ASYNC: return ecn_cuda_set_frame_async(v);
        case CHOICE_FRAME_ATOM_RB: return ecn_cuda_set_frame_atom_rb(v);
        case CHOICE_LAYER_TC: return ecn_cuda_set_layer_tc(v);
        }
#endif
    (void)is_cuda;
    (void)w;
    (void)v;
    return 0;
}
unsigned long long choice_runs(int is_cuda, enum cuda_choice w)
{
#ifdef ECENET_HAVE_CUDA
    if (is_cuda)
        switch (w) {
        case CHOICE_FRAME_ASYNC: return ecn_cuda_frame_async_launches();
        case CHOICE_FRAME_ATOM_RB: return ecn_cuda_frame_atom_rb_launches();
        case CHOICE_LAYER_TC: return ecn_cuda_layer_tc_launches();
        }
#endif
    (void)is_cuda;
    (void)w;
    return 0;
}
static int on_cuda(const tctx *c) { return !strcmp(c->be->name, "cuda"); }
int fa_set(const tctx *c, int on) { return choice_set(on_cuda(c), CHOICE_FRAME_ASYNC, on); }
unsigned long long fa_runs(const tctx *c)
{
    return choice_runs(on_cuda(c), CHOICE_FRAME_ASYNC);
}
int far_set(const tctx *c, int on)
{
    return choice_set(on_cuda(c), CHOICE_FRAME_ATOM_RB, on);
}
unsigned long long far_runs(const tctx *c)
{
    return choice_runs(on_cuda(c), CHOICE_FRAME_ATOM_RB);
}

/* the op since r0 ran the register-blocked per-atom kernel once where it
 * applies (cuda, with edges, l_max <= 4), else not at all */
void far_expect(const tctx *c, unsigned long long r0, size_t E, int L, const char *what)
{
    const unsigned long long ran = far_runs(c) - r0, want = on_cuda(c) && E && L <= 4 ? 1 : 0;
    ck_assert_msg(ran == want, "%s: %llu register-blocked launches, expected %llu", what, ran, want);
}

/* the ops since r0 staged with cp.async in n launches (none without edges) */
void fa_expect(const tctx *c, unsigned long long r0, unsigned long long n, size_t E,
               const char *what)
{
    const unsigned long long ran = fa_runs(c) - r0;
    ck_assert_msg(E == 0 || ran == n, "%s: %llu cp.async launches, expected %llu", what, ran, n);
}

/* two backend results of the same length, bit for bit (in the backend's precision) */
void t_same_bits(tctx *c, const tens *a, const tens *b, const char *op, const char *what)
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

const shape SHAPES[] = {
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
const int N_SHAPES = (int)(sizeof SHAPES / sizeof SHAPES[0]);

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

void make_setup(tctx *c, const shape *s, setup *u)
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
void edge_vectors(tctx *c, int64_t n, tens *d, tens *r)
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

/* X with the sin m = 0 slot zero (as in a model) or random everywhere */
tens features(tctx *c, int64_t E, int Q, int F, int sin0_zero)
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
