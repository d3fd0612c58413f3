/* Tests of the op vtable (include/ecenet/ops.h): every VJP against central
 * finite differences of its forward, for every backend in BACKENDS.
 *
 * Method (run_case, check_fd): for random inputs x, a random output
 * cotangent ȳ and a random direction v ~ N(0, I),
 *     analytic  an = <VJP(ȳ), v>
 *     numeric   fd = (<ȳ, fwd(x + hv)> − <ȳ, fwd(x − hv)>) / 2h,  h = 1e-6
 * judged by |fd − an| / max(|fd|, |an|, floor) <= 1e-6, where the floor is
 * the larger of 5 % of the typical size of <VJP(ȳ), v> (its standard
 * deviation over v is ‖VJP(ȳ)‖; a v nearly orthogonal to the gradient cannot
 * blow the ratio up) and atol/rtol, atol = 100·ε·Σ|ȳ·y|/h the rounding level
 * of the quotient (a true gradient ~1e-16 of the outputs, e.g. a softmax over
 * a single edge, is judged absolutely). Three directions per differentiable
 * input. Ops whose forward is several backend calls (ACE: radial + sph + ace;
 * geometry: strain + pair_geom) are composed inside the test; geometry inputs
 * (positions, strain, d, r), features (X, A, A_emb, Δ, g, w), D, scores, fc
 * and radial values fr are differentiated, parameters are not.
 *
 * Noise-limited fallback: where the forward is ill-conditioned, its own
 * rounding divided by h swamps the quotient (the poly envelope
 * 1 − 10y³ + 15y⁴ − 6y⁵ is ~1e-6 near r = c but made of O(10) terms, so a
 * lone ACE pair there gives an output ~1e-7 with relative noise ~1e-9). Only
 * when the plain quotient disagrees, a Richardson-extrapolated central
 * difference (4·D(100h) − D(200h))/3 (O(h⁴) truncation, 100x less noise)
 * decides; a wrong VJP fails both. Over 300 seed sweeps this happened only for
 * ace (37 of ~50 000 checks, Richardson agreement <= 6e-7 there).
 *
 * Every case also checks (run_case):
 *  - forward entries write their whole output (outputs are poisoned with NaN
 *    before each call; an accumulating forward starts from a random X0);
 *  - VJPs ACCUMULATE: starting from random g0, two calls give g0 + 2·J
 *    (J = one call into zeros), and elements J does not touch (J == 0
 *    exactly, e.g. invalid feature slots) are poisoned with NaN and must stay
 *    NaN — a VJP never overwrites;
 *  - E = 0 / P = 0: the ops run, gradient buffers stay untouched (all NaN),
 *    and overwriting forwards over atoms (ace_fwd, mp_scatter_fwd) give 0.
 * Extra value checks: pair_geom d and r, virial = NULL, radial values against
 * SPEC §3 (and df = NULL), sph against the explicit l <= 2 formulas of SPEC §4
 * (and dY = NULL) and its full Jacobian dY against FD, Wigner-D orthogonality,
 * det D¹ = +1, column m = 0 against sqrt(4π/(2l+1)) Y_l(r̂), Y_l(v)·D^l =
 * Y_l(v_loc) (SPEC §7.3) and the Appendix B matrices, edge_frame zeros in
 * invalid slots, mp_rotate_unpack leaving invalid slots alone, attention
 * weights a and w against §17.3 evaluated here, add.
 *
 * Measured worst relative errors of the plain central difference (h = 1e-6,
 * ref backend, gcc -O2, x86-64), default seeds / worst over 300 seed sweeps
 * (ECN_CHECK_SEED=0..300):
 *   pair_geom+dist pos 7e-9 / 8e-9        strain 2e-9 / 9e-9
 *   dist_vjp d 3e-9 / 1e-8                radial r 2e-8 / 4e-7 (*)
 *   sph dY (dot) 2e-9 / 1e-8              sph dY full Jacobian (l2) 3e-9 / 4e-9
 *   ace d 5e-9 / 1e-6 (*, + fallback)     embed A 6e-9 / 1e-8
 *   wigner d (L <= 6) 3e-9 / 1e-8         Wigner-D properties 6e-15 (abs)
 *   edge_frame A_emb 3e-9 / 1e-8, D 4e-9 / 1e-8
 *   dist_embed X 9e-9 / 1e-8, fr 5e-9 / 2e-8
 *   linear X 5e-9 / 1e-8                  realspace X 5e-9 / 2e-8
 *   mp_pack_unrotate X 4e-9 / 1e-8, D 2e-9 / 1e-8
 *   mp_weight fr 4e-9 / 1e-8              mp_scatter g 5e-9 / 1e-8, w 3e-9 / 1e-8
 *   mp_rotate_unpack Delta 3e-9 / 1e-8, D 5e-9 / 1e-8
 *   mp_attn_weight scores 8e-9 / 2e-8, fc 5e-9 / 1e-8
 *   mlp X 6e-9 / 2e-8                     energy y 2e-9 / 1e-8, fr 2e-9 / 8e-9
 *   film fr 4e-9 / 9e-9                   chan_scale X 5e-9 / 1e-8, s 5e-9 / 1e-8
 * (*) radii close to a cutoff, the ill-conditioning described above. Each
 * run prints its own numbers (the "worst" lines; ECN_CHECK_VERBOSE=1 names
 * the case). With h = 1e-5 truncation reaches 2e-7 (ace, sph at L = 6,
 * radial at K = 7), with h = 1e-4 it exceeds 1e-6; at h = 1e-6 the ~1e-8
 * level is rounding. Scaling one VJP by 1 + 1e-5 (linear, wigner, sph dY,
 * virial, mlp, film) fails the check at 1e-5, dropping the softmax
 * max-term (an ε = 1e-6 effect) fails it at 1.9e-6.
 *
 * relu (realspace, readout MLP) has a kink at 0: it is piecewise linear, so
 * FD is exact except for rounding unless a pre-activation crosses 0 within
 * ±h·δ. Those cases use h = 1e-7 and redraw X until every pre-activation is
 * at least 1e-4 (realspace) / 1e-3 (MLP hidden) away from 0, far more than
 * the ~1e-6 a step can move it. Radii stay CUT_MARGIN = 0.02 away from a
 * cutoff (some lie beyond it, where everything is 0).
 *
 * Optional entries (layer_fwd/vjp) are checked when the backend has them.
 * Environment: ECN_CHECK_QUICK=1 fewer seeds; ECN_CHECK_SEED=k shifts every
 * seed; ECN_CHECK_H overrides h; ECN_CHECK_VERBOSE=1 names the worst cases.
 * Whole run: ~0.4 s at -O2; ~40 s under valgrind with CK_FORK=no. */
#define _POSIX_C_SOURCE 200809L

#include <check.h>
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ecenet.h"
#include "ecenet/ops.h"
#include "backend.h"
#include "cg.h"
#include "test_util.h"

#ifndef M_PI
#define M_PI 3.14159265358979323846
#endif

/* ---- backends under test ----------------------------------------------------- */

typedef struct {
    const char *name;
    int precision;
    double fd_tol;  /* relative FD agreement */
    double acc_tol; /* accumulation: |2 calls − (g0 + 2J)| / (max|g0| + 2 max|J|) */
} backend_entry;

static const backend_entry BACKENDS[] = {
    {"ref", ECENET_F64, 1e-6, 1e-12},
};
#define N_BACKENDS (sizeof BACKENDS / sizeof BACKENDS[0])

typedef struct {
    const ecenet_backend *be;
    const backend_entry *ent;
    int quick;
} env;

static int n_iter(const env *ev) { return ev->quick ? 6 : 30; }

/* ECN_CHECK_SEED shifts every seed (for sweeps); default 0 */
static uint64_t seed_base(void)
{
    const char *s = getenv("ECN_CHECK_SEED");
    return s ? 100000u * (uint64_t)strtoul(s, NULL, 10) : 0u;
}

/* ---- host memory: a pool freed after each iteration ---------------------------- */

#define POOL_MAX 2048
static void *g_pool[POOL_MAX];
static int g_npool;

static void *pool_add(void *p)
{
    ck_assert_ptr_nonnull(p);
    ck_assert_int_lt(g_npool, POOL_MAX);
    g_pool[g_npool++] = p;
    return p;
}
static double *hnew(size_t n) { return pool_add(calloc(n ? n : 1, sizeof(double))); }
static int32_t *inew(size_t n) { return pool_add(calloc(n ? n : 1, sizeof(int32_t))); }
static void pool_free(void)
{
    while (g_npool)
        free(g_pool[--g_npool]);
}

/* ---- random data ------------------------------------------------------------- */

static int irand(int lo, int hi) { return lo + (int)(tu_rng_u64() % (uint64_t)(hi - lo + 1)); }
static double urand(double lo, double hi) { return lo + (hi - lo) * tu_uniform(); }

static double *hnormal(size_t n, double sd)
{
    double *x = hnew(n);
    for (size_t i = 0; i < n; i++)
        x[i] = sd * tu_normal();
    return x;
}

static double *huniform(size_t n, double lo, double hi)
{
    double *x = hnew(n);
    for (size_t i = 0; i < n; i++)
        x[i] = urand(lo, hi);
    return x;
}

/* n indices in [0, hi) */
static int32_t *hindex(size_t n, int64_t hi)
{
    int32_t *x = inew(n);
    ck_assert(n == 0 || hi > 0);
    for (size_t i = 0; i < n; i++)
        x[i] = (int32_t)irand(0, (int)hi - 1);
    return x;
}

static double *hcopy(const double *x, size_t n)
{
    double *y = hnew(n);
    if (n)
        memcpy(y, x, n * sizeof *y);
    return y;
}

static double dot(const double *a, const double *b, size_t n)
{
    double s = 0.0;
    for (size_t i = 0; i < n; i++)
        s += a[i] * b[i];
    return s;
}

static double norm2(const double *a, size_t n) { return sqrt(dot(a, a, n)); }

/* ---- device buffers of one backend call ------------------------------------------ */

#define ARENA_MAX 64
typedef struct {
    const ecenet_backend *be;
    void *dev[ARENA_MAX];
    void *host[ARENA_MAX];
    int nd, nh;
} arena;

static arena arena_of(const ecenet_backend *be)
{
    arena a;
    memset(&a, 0, sizeof a);
    a.be = be;
    return a;
}

static void *a_raw(arena *a, size_t n)
{
    void *p;
    ck_assert_int_lt(a->nd, ARENA_MAX);
    p = a->be->alloc((n ? n : 1) * a->be->real_size);
    ck_assert_ptr_nonnull(p);
    a->dev[a->nd++] = p;
    return p;
}

/* upload n reals; NULL stays NULL (optional parameters) */
static void *a_put(arena *a, const void *h, size_t n)
{
    void *p;
    if (!h)
        return NULL;
    p = a_raw(a, n);
    if (n)
        a->be->upload(p, h, n);
    return p;
}

static ecenet_idx a_idx(arena *a, const int32_t *h, size_t n)
{
    int32_t *p;
    ck_assert_int_lt(a->nd, ARENA_MAX);
    p = a->be->alloc((n ? n : 1) * sizeof *p);
    ck_assert_ptr_nonnull(p);
    a->dev[a->nd++] = p;
    if (n)
        a->be->upload_idx(p, h, n);
    return p;
}

static void a_get(arena *a, double *h, const void *p, size_t n)
{
    a->be->sync();
    if (n)
        a->be->download(h, p, n);
}

static void *a_hostb(arena *a, size_t bytes)
{
    void *p = calloc(bytes ? bytes : 1, 1);
    ck_assert_ptr_nonnull(p);
    ck_assert_int_lt(a->nh, ARENA_MAX);
    a->host[a->nh++] = p;
    return p;
}

static double *a_host(arena *a, size_t n)
{
    double *p = calloc(n ? n : 1, sizeof *p);
    ck_assert_ptr_nonnull(p);
    ck_assert_int_lt(a->nh, ARENA_MAX);
    a->host[a->nh++] = p;
    return p;
}

static void a_free(arena *a)
{
    while (a->nd)
        a->be->release(a->dev[--a->nd]);
    while (a->nh)
        free(a->host[--a->nh]);
}

/* ---- worst errors per (op, input) ---------------------------------------------- */

typedef struct {
    char key[64];
    double worst;     /* worst relative error of the plain central difference */
    double worst_fb;  /* worst error of the Richardson fallback, where it was needed */
    long n, n_fb;
    char where[200]; /* the case that gave the worst error */
} stat_t;
static stat_t g_stats[96];
static int g_verbose; /* ECN_CHECK_VERBOSE: name the worst case */
static int g_nstats;

/* errR < 0: no fallback was needed */
static void stats_add(const char *op, const char *in, double err, double errR, const char *where)
{
    char key[64];
    int i;
    snprintf(key, sizeof key, "%s / %s", op, in);
    for (i = 0; i < g_nstats; i++)
        if (strcmp(g_stats[i].key, key) == 0)
            break;
    if (i == g_nstats) {
        ck_assert_int_lt(g_nstats, 96);
        memset(&g_stats[i], 0, sizeof g_stats[i]);
        strcpy(g_stats[i].key, key);
        g_nstats++;
    }
    if (errR >= 0.0) {
        g_stats[i].n_fb++;
        g_stats[i].worst_fb = fmax(g_stats[i].worst_fb, errR);
        err = 0.0; /* judged by the fallback; the plain worst below excludes it */
    }
    if (err > g_stats[i].worst || err != err) {
        g_stats[i].worst = err;
        snprintf(g_stats[i].where, sizeof g_stats[i].where, "%s", where);
    }
    g_stats[i].n++;
}

static void stats_print(const char *family, const char *backend)
{
    for (int i = 0; i < g_nstats; i++)
    {
        char fb[96] = "";
        if (g_stats[i].n_fb)
            snprintf(fb, sizeof fb, "; %ld noise-limited, Richardson worst %.1e", g_stats[i].n_fb,
                     g_stats[i].worst_fb);
        printf("[%s] %-10s worst %-34s %.2e (%ld checks%s)%s%s\n", backend, family,
               g_stats[i].key, g_stats[i].worst, g_stats[i].n, fb, g_verbose ? "  at " : "",
               g_verbose ? g_stats[i].where : "");
    }
    fflush(stdout);
    g_nstats = 0;
}

/* ---- sizes --------------------------------------------------------------------- */

typedef struct {
    int64_t N, E, P;
    int T, R, L, M, C, G, K;
} shape;

/* The first iterations force the corner cases; -1 = random. */
static const int SPECIAL[][7] = {
    /* E   N   P   T   L   M   G */
    {  0, -1,  0, -1, -1, -1, -1}, /* E = 0, P = 0: run, touch nothing */
    {  1,  1,  1, -1, -1, -1, -1}, /* one (self-)edge on one atom */
    { -1, -1,  0,  1,  0,  0,  1}, /* l_max = 0 (S = 1), G = 1, P = 0, T = 1 */
    { -1, -1, -1,  2,  1,  0,  2}, /* m_max < l_max, even G */
    { -1, -1, -1,  3,  1,  1,  3}, /* m_max = l_max, G = 2M+1 */
    { -1, -1, -1, -1,  1,  3, -1}, /* m_max > l_max */
    { -1, -1, -1, -1,  3,  2,  6}, /* m_max < l_max, even G */
    { -1, -1, -1, -1,  3,  3, 13}, /* target config, G = 4M+1 */
    { -1, -1, -1, -1,  3,  5, 22}, /* m_max > l_max, even G */
    { -1, -1, -1, -1,  4,  4,  9}, /* l_max = 4 */
    { -1,  1, -1, -1,  2,  1, -1}, /* N = 1, several edges */
};
#define N_SPECIAL ((int)(sizeof SPECIAL / sizeof SPECIAL[0]))

static shape shape_for(int it)
{
    shape s;
    s.E = irand(2, 10);
    s.N = irand(1, 5);
    s.P = irand(1, 14);
    s.T = irand(1, 3);
    s.L = irand(0, 4);
    s.M = irand(0, 5);
    s.C = irand(1, 3);
    s.R = irand(1, 4);
    s.K = irand(1, 5);
    s.G = -1;
    if (it < N_SPECIAL) {
        const int *sp = SPECIAL[it];
        if (sp[0] >= 0) s.E = sp[0];
        if (sp[1] >= 0) s.N = sp[1];
        if (sp[2] >= 0) s.P = sp[2];
        if (sp[3] >= 0) s.T = sp[3];
        if (sp[4] >= 0) s.L = sp[4];
        if (sp[5] >= 0) s.M = sp[5];
        if (sp[6] >= 0) s.G = sp[6];
    }
    if (s.G < 0)
        s.G = irand(1, 4 * s.M + 4);
    return s;
}

static int nd_of(int L)
{
    int s = 0;
    for (int l = 0; l <= L; l++)
        s += (2 * l + 1) * (2 * l + 1);
    return s;
}

static int dblk(int l) { return nd_of(l - 1); } /* offset of block l */

static ecenet_dims dims_of(const shape *s)
{
    ecenet_dims d;
    memset(&d, 0, sizeof d);
    d.N = s->N;
    d.E = s->E;
    d.P = s->P;
    d.T = s->T;
    d.R = s->R;
    d.L = s->L;
    d.M = s->M;
    d.C = s->C;
    d.B = 2 * s->C;
    d.F = d.B * (s->L + 1);
    d.S = (s->L + 1) * (s->L + 1);
    d.Q = s->M + 1;
    d.G = s->G;
    d.ND = nd_of(s->L);
    return d;
}

static size_t xsize(const ecenet_dims *d) { return (size_t)d->E * d->Q * 2 * d->F; }

/* Slot (m, part) of channel f carries a rotated SH component (SPEC §8.2). */
static int slot_valid(const ecenet_dims *d, int m, int part, int f)
{
    int l = f % (d->L + 1), ml = l < d->M ? l : d->M;
    return m <= ml && (part == 0 || m >= 1);
}

/* ---- the generic VJP-vs-FD check ------------------------------------------------ */

#define MAX_IN 3
#define N_DIR 3

typedef struct op_case op_case;
typedef void (*fwd_fn)(const op_case *c, double *out);
typedef void (*vjp_fn)(const op_case *c, const double *ybar, double *const *grad);

/* Everything an op's callbacks need besides the inputs (fields named per op). */
typedef struct {
    ecenet_dims dm;
    int64_t n;
    int K, L, ctype;
    int heads, lattn, mode, env, pdim; /* attention weights, FiLM */
    double cut;
    const int32_t *i0, *i1, *i2;     /* op-specific (types, tsrc/ttgt, src/dst) */
    const int32_t *ei, *ej, *ps, *pd; /* edge_i, edge_j, nb_src, nb_dst: dims' CSR groupings */
    const double *w0, *w1;
    ecenet_linear_params lin;
    ecenet_realspace_params rs;
    ecenet_mlp_params mlp;
} opx;

/* The n entries grouped by atom (ops.h ecenet_csr), built on the host and
 * uploaded: ptr (N+1), idx in increasing order within each atom. */
static ecenet_csr csr_dev(arena *a, const int32_t *atom, size_t n, int64_t N)
{
    int32_t *ptr = a_hostb(a, ((size_t)N + 1) * sizeof *ptr), *idx = a_hostb(a, n * sizeof *idx);
    int32_t *fill = a_hostb(a, ((size_t)N + 1) * sizeof *fill);
    ecenet_csr c;
    for (size_t k = 0; k < n; k++)
        ptr[atom[k] + 1]++;
    for (int64_t i = 0; i < N; i++)
        ptr[i + 1] += ptr[i];
    memcpy(fill, ptr, ((size_t)N + 1) * sizeof *fill);
    for (size_t k = 0; k < n; k++)
        idx[fill[atom[k]]++] = (int32_t)k;
    c.ptr = a_idx(a, ptr, (size_t)N + 1);
    c.idx = a_idx(a, idx, n);
    return c;
}

/* x->dm with the groupings of the index arrays the case knows */
static ecenet_dims dims_dev(arena *a, const opx *x)
{
    ecenet_dims d = x->dm;
    const size_t E = (size_t)d.E, P = (size_t)d.P;
    if (x->ei) d.e_src = csr_dev(a, x->ei, E, d.N);
    if (x->ej) d.e_dst = csr_dev(a, x->ej, E, d.N);
    if (x->ps) d.p_src = csr_dev(a, x->ps, P, d.N);
    if (x->pd) d.p_dst = csr_dev(a, x->pd, P, d.N);
    return d;
}

struct op_case {
    const env *ev;
    const ecenet_backend *be;
    const char *op;
    char desc[200];
    const opx *x;
    /* fwd: upload out's current content as the output buffer, run, download.
     * vjp: run what the VJP needs, accumulate into grad[k] (uploaded first). */
    fwd_fn fwd;
    vjp_fn vjp;
    size_t n_out;
    int n_in;
    double *in[MAX_IN];
    size_t in_n[MAX_IN];
    const char *in_name[MAX_IN];
    const double *out_init; /* accumulating forward: prior output; NULL: overwrites */
    int ybar_ones;          /* cotangent fixed at 1 */
    int empty;              /* nothing to sum: an overwriting forward gives 0 */
    double h;
};

static op_case new_case(const env *ev, const char *op, const opx *x, fwd_fn f, vjp_fn v,
                        size_t n_out)
{
    op_case c;
    memset(&c, 0, sizeof c);
    c.ev = ev;
    c.be = ev->be;
    c.op = op;
    c.x = x;
    c.fwd = f;
    c.vjp = v;
    c.n_out = n_out;
    c.h = getenv("ECN_CHECK_H") ? atof(getenv("ECN_CHECK_H")) : 1e-6; /* for measuring */
    return c;
}

static void add_in(op_case *c, const char *name, double *x, size_t n)
{
    ck_assert_int_lt(c->n_in, MAX_IN);
    c->in[c->n_in] = x;
    c->in_n[c->n_in] = n;
    c->in_name[c->n_in] = name;
    c->n_in++;
}

static void eval_fwd(const op_case *c, double *out)
{
    if (c->out_init)
        memcpy(out, c->out_init, c->n_out * sizeof *out);
    else
        for (size_t i = 0; i < c->n_out; i++)
            out[i] = NAN;
    c->fwd(c, out);
}

static void check_forward(const op_case *c, double *out)
{
    eval_fwd(c, out);
    for (size_t i = 0; i < c->n_out; i++) {
        ck_assert_msg(isfinite(out[i]), "%s (%s): forward output %zu not written or not finite",
                      c->op, c->desc, i);
        if (c->empty)
            ck_assert_msg(out[i] == (c->out_init ? c->out_init[i] : 0.0),
                          "%s (%s): empty sum, output %zu = %g", c->op, c->desc, i, out[i]);
    }
}

/* g0 + 2J after two calls; NaN stays NaN where J is exactly 0. */
static void check_accumulate(const op_case *c, const double *ybar, double *const *J)
{
    double *g[MAX_IN], *g0[MAX_IN];
    int k;
    for (k = 0; k < c->n_in; k++) {
        g0[k] = hnormal(c->in_n[k], 1.0);
        g[k] = hnew(c->in_n[k]);
        for (size_t i = 0; i < c->in_n[k]; i++)
            g[k][i] = J[k][i] == 0.0 ? NAN : g0[k][i];
    }
    c->vjp(c, ybar, g);
    c->vjp(c, ybar, g);
    for (k = 0; k < c->n_in; k++) {
        size_t n = c->in_n[k];
        double scale = tu_max_abs(g0[k], n) + 2.0 * tu_max_abs(J[k], n);
        for (size_t i = 0; i < n; i++) {
            if (J[k][i] == 0.0) {
                ck_assert_msg(isnan(g[k][i]),
                              "%s (%s): VJP overwrote %s_bar[%zu], which it does not feed",
                              c->op, c->desc, c->in_name[k], i);
                continue;
            }
            ck_assert_msg(fabs(g[k][i] - (g0[k][i] + 2.0 * J[k][i])) <=
                              c->ev->ent->acc_tol * scale,
                          "%s (%s): VJP does not accumulate into %s_bar[%zu]: %.17g vs %.17g",
                          c->op, c->desc, c->in_name[k], i, g[k][i], g0[k][i] + 2.0 * J[k][i]);
        }
    }
}

/* (<ȳ, fwd(x0 + t·v)> − <ȳ, fwd(x0 − t·v)>) / 2t; *scale += Σ|ȳ·y| */
static double fd_quot(const op_case *c, int k, const double *x0, const double *v, double t,
                      const double *ybar, double *out, double *scale)
{
    double *x = c->in[k], sp, sm;
    const size_t n = c->in_n[k];
    size_t i;
    for (i = 0; i < n; i++)
        x[i] = x0[i] + t * v[i];
    eval_fwd(c, out);
    sp = dot(ybar, out, c->n_out);
    for (i = 0; i < c->n_out; i++)
        *scale += fabs(ybar[i] * out[i]);
    for (i = 0; i < n; i++)
        x[i] = x0[i] - t * v[i];
    eval_fwd(c, out);
    sm = dot(ybar, out, c->n_out);
    memcpy(x, x0, n * sizeof *x);
    return (sp - sm) / (2.0 * t);
}

static void check_fd(const op_case *c, int k, const double *J, const double *ybar, double *out)
{
    const size_t n = c->in_n[k];
    const double tol = c->ev->ent->fd_tol;
    double *x0, *v;
    if (!n)
        return;
    x0 = hcopy(c->in[k], n);
    v = hnew(n);
    for (int dir = 0; dir < N_DIR; dir++) {
        double an, fd, floor, scale = 0.0, den, err, errR = -1.0;
        for (size_t i = 0; i < n; i++)
            v[i] = tu_normal();
        an = dot(J, v, n);
        fd = fd_quot(c, k, x0, v, c->h, ybar, out, &scale);
        /* rtol + atol: floor = 5 % of the typical |<J, v>|, or atol/rtol with
         * atol = 100 x the rounding level ε·Σ|ȳ·y|/h of the difference
         * quotient, so a derivative far below the outputs' size (e.g. the
         * 1e-6 regulariser of a softmax over one edge, or an exactly-zero
         * gradient computed with cancellation) is judged absolutely */
        floor = fmax(0.05 * norm2(J, n) * norm2(v, n) / sqrt((double)n),
                     100.0 * DBL_EPSILON * scale / c->h / tol);
        den = fmax(fmax(fabs(fd), fabs(an)), floor);
        err = den > 0.0 ? fabs(fd - an) / den : (fd == an ? 0.0 : 1.0);
        if (err > tol) {
            /* Noise-limited fallback: where the forward is ill-conditioned
             * (an output ~1e-7 left by cancelling O(10) terms, e.g. the poly
             * envelope 1 - 10y³ + 15y⁴ - 6y⁵ near r = c) its rounding, /h,
             * swamps D(h). Richardson's (4 D(H) - D(2H)) / 3 at H = 100 h has
             * O(H⁴) truncation and 100x less noise; a wrong VJP fails both. */
            const double H = 100.0 * c->h;
            double s2 = 0.0, fdR = (4.0 * fd_quot(c, k, x0, v, H, ybar, out, &s2) -
                                    fd_quot(c, k, x0, v, 2.0 * H, ybar, out, &s2)) / 3.0;
            errR = fabs(fdR - an) / fmax(den, fabs(fdR));
        }
        stats_add(c->op, c->in_name[k], err, errR, c->desc);
        ck_assert_msg(err <= tol || errR <= tol,
                      "%s (%s): d/d%s: FD %.15g vs VJP %.15g, rel err %.3g > %.1g (Richardson "
                      "at 100h: %.3g)", c->op, c->desc, c->in_name[k], fd, an, err, tol, errR);
    }
}

static void run_case(const op_case *c)
{
    double *out = hnew(c->n_out), *ybar = hnew(c->n_out), *J[MAX_IN];
    int k;
    check_forward(c, out);
    for (size_t i = 0; i < c->n_out; i++)
        ybar[i] = c->ybar_ones ? 1.0 : tu_normal();
    for (k = 0; k < c->n_in; k++)
        J[k] = hnew(c->in_n[k]);
    c->vjp(c, ybar, J);
    for (k = 0; k < c->n_in; k++)
        for (size_t i = 0; i < c->in_n[k]; i++)
            ck_assert_msg(isfinite(J[k][i]), "%s (%s): %s_bar[%zu] not finite", c->op, c->desc,
                          c->in_name[k], i);
    check_accumulate(c, ybar, J);
    for (k = 0; k < c->n_in; k++)
        check_fd(c, k, J[k], ybar, out);
}

/* ---- edge vectors ------------------------------------------------------------- */

/* Directions exactly along the axes and with |r̂x| close to (not within 1e-4
 * of) the chart switch 0.9 (SPEC §7.1, §18.5), used first when `special`. */
static const double AXES[6][3] = {{1, 0, 0}, {-1, 0, 0}, {0, 1, 0}, {0, -1, 0}, {0, 0, 1}, {0, 0, -1}};
static const double NEAR09[] = {0.9002, 0.8998, -0.9002, -0.8998, 0.903, -0.897};
#define N_SPECIAL_DIRS (6 + (int)(sizeof NEAR09 / sizeof NEAR09[0]))

static void special_dir(int k, double u[3])
{
    if (k < 6) {
        memcpy(u, AXES[k], sizeof AXES[k]);
    } else {
        double rx = NEAR09[k - 6], t = sqrt(1.0 - rx * rx), phi = urand(0.0, 2.0 * M_PI);
        u[0] = rx;
        u[1] = t * cos(phi);
        u[2] = t * sin(phi);
    }
}

static void random_dir(double u[3])
{
    double nn;
    do {
        u[0] = tu_normal();
        u[1] = tu_normal();
        u[2] = tu_normal();
        nn = norm2(u, 3);
    } while (nn < 1e-3 || fabs(fabs(u[0] / nn) - 0.9) < 1e-4);
    u[0] /= nn;
    u[1] /= nn;
    u[2] /= nn;
}

/* Radii kept this far from a cutoff: there the envelope goes like (c-r)^3
 * (poly) or (c-r)^2 (cosine), and the central difference's truncation error
 * relative to the derivative is ~h²/(3(c-r)²) (3e-6 at a 1e-3 margin). */
#define CUT_MARGIN 0.02

/* n vectors with lengths in [lo, hi), none within CUT_MARGIN of `avoid` (> 0). */
static double *edge_vectors(size_t n, double lo, double hi, double avoid, int special)
{
    double *d = hnew(3 * n);
    for (size_t k = 0; k < n; k++) {
        double u[3], len;
        if (special && (int)k < N_SPECIAL_DIRS)
            special_dir((int)k, u);
        else
            random_dir(u);
        do
            len = urand(lo, hi);
        while (avoid > 0 && fabs(len - avoid) < CUT_MARGIN);
        for (int a = 0; a < 3; a++)
            d[3 * k + a] = len * u[a];
    }
    return d;
}

/* r = sqrt(|d|² + 1e-30), the definition of ops.h */
static double *host_r(arena *a, const double *d, size_t n)
{
    double *r = a_host(a, n);
    for (size_t k = 0; k < n; k++)
        r[k] = sqrt(d[3 * k] * d[3 * k] + d[3 * k + 1] * d[3 * k + 1] + d[3 * k + 2] * d[3 * k + 2] +
                    1e-30);
    return r;
}

/* ================================================================================
 * geometry: pair_geom, dist_vjp, radial, sph
 * ================================================================================ */

/* pos' = pos + pos·ε, shift' = shift + shift·ε */
static void strain(const double *x, const double *eps, size_t n, double *y)
{
    for (size_t i = 0; i < n; i++)
        for (int a = 0; a < 3; a++) {
            double v = x[3 * i + a];
            for (int b = 0; b < 3; b++)
                v += x[3 * i + b] * eps[3 * b + a];
            y[3 * i + a] = v;
        }
}

/* inputs: pos (N,3), ε (3,3); output (d (n,3), r (n)) */
static void pg_run(const op_case *c, arena *a, void **d, void **r, double *out)
{
    const opx *x = c->x;
    const size_t n = (size_t)x->n, N = (size_t)x->dm.N;
    double *ps = a_host(a, 3 * N), *ss = a_host(a, 3 * n);
    strain(c->in[0], c->in[1], N, ps);
    strain(x->w0, c->in[1], n, ss);
    *d = out ? a_put(a, out, 3 * n) : a_raw(a, 3 * n);
    *r = out ? a_put(a, out + 3 * n, n) : a_raw(a, n);
    c->be->pair_geom_fwd(x->n, a_idx(a, x->i0, n), a_idx(a, x->i1, n), a_put(a, ss, 3 * n),
                         a_put(a, ps, 3 * N), *d, *r);
}

static void pg_fwd(const op_case *c, double *out)
{
    arena a = arena_of(c->be);
    void *d, *r;
    const size_t n = (size_t)c->x->n;
    pg_run(c, &a, &d, &r, out);
    a_get(&a, out, d, 3 * n);
    a_get(&a, out + 3 * n, r, n);
    a_free(&a);
}

/* d̄ = ȳ_d + dist_vjp(ȳ_r); pair_geom_vjp -> pos̄, virial (= ∂/∂ε at ε = 0) */
static void pg_vjp(const op_case *c, const double *ybar, double *const *g)
{
    arena a = arena_of(c->be);
    const opx *x = c->x;
    const size_t n = (size_t)x->n, N = (size_t)x->dm.N;
    void *d, *r, *dbar, *pb, *vir;
    ecenet_csr by_src, by_dst;
    for (int q = 0; q < 9; q++)
        ck_assert(c->in[1][q] == 0.0); /* the VJP is taken at ε = 0 */
    pg_run(c, &a, &d, &r, NULL);
    dbar = a_put(&a, ybar, 3 * n);
    c->be->dist_vjp(x->n, d, r, a_put(&a, ybar + 3 * n, n), dbar);
    pb = a_put(&a, g[0], 3 * N);
    vir = a_put(&a, g[1], 9);
    by_src = csr_dev(&a, x->i0, n, x->dm.N);
    by_dst = csr_dev(&a, x->i1, n, x->dm.N);
    c->be->pair_geom_vjp(x->n, a_idx(&a, x->i0, n), a_idx(&a, x->i1, n), &by_src, &by_dst, d, dbar,
                         pb, vir);
    a_get(&a, g[0], pb, 3 * N);
    a_get(&a, g[1], vir, 9);
    a_free(&a);
}

static void pg_values(const op_case *c)
{
    const opx *x = c->x;
    const size_t n = (size_t)x->n;
    double *out = hnew(4 * n);
    eval_fwd(c, out);
    for (size_t k = 0; k < n; k++) {
        double dd[3], rr;
        for (int a = 0; a < 3; a++) {
            dd[a] = c->in[0][3 * x->i1[k] + a] - c->in[0][3 * x->i0[k] + a] + x->w0[3 * k + a];
            ck_assert_msg(fabs(out[3 * k + a] - dd[a]) <= 1e-14 * (1.0 + fabs(dd[a])),
                          "pair_geom_fwd (%s): d[%zu][%d] = %.17g, expected %.17g", c->desc, k,
                          a, out[3 * k + a], dd[a]);
        }
        rr = sqrt(dd[0] * dd[0] + dd[1] * dd[1] + dd[2] * dd[2] + 1e-30);
        ck_assert_msg(fabs(out[3 * n + k] - rr) <= 1e-14 * rr,
                      "pair_geom_fwd (%s): r[%zu] = %.17g, expected %.17g", c->desc, k,
                      out[3 * n + k], rr);
    }
}

/* virial = NULL (allowed by ops.h) gives the same pos_bar */
static void pg_virial_null(const op_case *c)
{
    arena a = arena_of(c->be);
    const opx *x = c->x;
    const size_t n = (size_t)x->n, N = (size_t)x->dm.N;
    double *dbar = hnormal(3 * n, 1.0), *p1 = hnew(3 * N), *p2 = hnew(3 * N), vir[9] = {0};
    void *d, *r, *b1 = a_put(&a, p1, 3 * N), *b2 = a_put(&a, p2, 3 * N), *dd;
    ecenet_csr by_src = csr_dev(&a, x->i0, n, x->dm.N), by_dst = csr_dev(&a, x->i1, n, x->dm.N);
    ecenet_idx src = a_idx(&a, x->i0, n), dst = a_idx(&a, x->i1, n);
    pg_run(c, &a, &d, &r, NULL);
    dd = a_put(&a, dbar, 3 * n);
    c->be->pair_geom_vjp(x->n, src, dst, &by_src, &by_dst, d, dd, b1, a_put(&a, vir, 9));
    c->be->pair_geom_vjp(x->n, src, dst, &by_src, &by_dst, d, dd, b2, NULL);
    a_get(&a, p1, b1, 3 * N);
    a_get(&a, p2, b2, 3 * N);
    a_free(&a);
    ck_assert_msg(memcmp(p1, p2, 3 * N * sizeof *p1) == 0,
                  "pair_geom_vjp (%s): pos_bar differs with virial = NULL", c->desc);
}

static void case_pair_geom(const env *ev, const shape *s, int it)
{
    opx x;
    op_case c;
    const size_t n = (size_t)s->E;
    double *pos = huniform(3 * (size_t)s->N, -2.0, 2.0), *shift = hnew(3 * n);
    memset(&x, 0, sizeof x);
    x.dm.N = s->N;
    x.n = s->E;
    x.i0 = hindex(n, s->N);
    x.i1 = hindex(n, s->N);
    for (size_t k = 0; k < n; k++) { /* |d| >= 0.3: r is smooth there */
        double dd[3];
        do {
            int zero = tu_uniform() < 0.3;
            for (int a = 0; a < 3; a++) {
                shift[3 * k + a] = zero ? 0.0 : 2.0 * tu_normal();
                dd[a] = pos[3 * x.i1[k] + a] - pos[3 * x.i0[k] + a] + shift[3 * k + a];
            }
        } while (norm2(dd, 3) < 0.3);
    }
    x.w0 = shift;
    c = new_case(ev, "pair_geom+dist", &x, pg_fwd, pg_vjp, 4 * n);
    snprintf(c.desc, sizeof c.desc, "it=%d N=%lld n=%zu", it, (long long)s->N, n);
    add_in(&c, "pos", pos, 3 * (size_t)s->N);
    add_in(&c, "strain", hnew(9), 9);
    run_case(&c);
    pg_values(&c);
    pg_virial_null(&c);
}

/* dist alone: r(d) through pair_geom_fwd with pos = 0 and shift = d */
static void dist_fwd(const op_case *c, double *out)
{
    arena a = arena_of(c->be);
    const size_t n = (size_t)c->x->n;
    double zero[3] = {0, 0, 0};
    int32_t *z = (int32_t *)a_host(&a, n); /* zeros: src = dst = atom 0 */
    void *r = a_put(&a, out, n);
    c->be->pair_geom_fwd(c->x->n, a_idx(&a, z, n), a_idx(&a, z, n), a_put(&a, c->in[0], 3 * n),
                         a_put(&a, zero, 3), a_raw(&a, 3 * n), r);
    a_get(&a, out, r, n);
    a_free(&a);
}

static void dist_vjp_cb(const op_case *c, const double *ybar, double *const *g)
{
    arena a = arena_of(c->be);
    const size_t n = (size_t)c->x->n;
    void *d = a_put(&a, c->in[0], 3 * n), *dbar = a_put(&a, g[0], 3 * n);
    c->be->dist_vjp(c->x->n, d, a_put(&a, host_r(&a, c->in[0], n), n), a_put(&a, ybar, n), dbar);
    a_get(&a, g[0], dbar, 3 * n);
    a_free(&a);
}

static void case_dist(const env *ev, const shape *s, int it)
{
    opx x;
    op_case c;
    const size_t n = (size_t)s->E;
    memset(&x, 0, sizeof x);
    x.n = s->E;
    c = new_case(ev, "dist_vjp", &x, dist_fwd, dist_vjp_cb, n);
    snprintf(c.desc, sizeof c.desc, "it=%d n=%zu", it, n);
    add_in(&c, "d", edge_vectors(n, 0.3, 4.0, 0.0, 1), 3 * n);
    run_case(&c);
}

/* radial: r (n) -> f (n, max(K,1)) */
static void radial_fwd_cb(const op_case *c, double *out)
{
    arena a = arena_of(c->be);
    const opx *x = c->x;
    const size_t n = (size_t)x->n, cols = x->K ? (size_t)x->K : 1;
    void *f = a_put(&a, out, n * cols);
    c->be->radial_fwd(x->n, a_put(&a, c->in[0], n), x->cut, x->K, x->ctype, f,
                      a_raw(&a, n * cols));
    a_get(&a, out, f, n * cols);
    a_free(&a);
}

static void radial_vjp_cb(const op_case *c, const double *ybar, double *const *g)
{
    arena a = arena_of(c->be);
    const opx *x = c->x;
    const size_t n = (size_t)x->n, cols = x->K ? (size_t)x->K : 1;
    void *df = a_raw(&a, n * cols), *rbar = a_put(&a, g[0], n);
    c->be->radial_fwd(x->n, a_put(&a, c->in[0], n), x->cut, x->K, x->ctype, a_raw(&a, n * cols),
                      df);
    c->be->radial_vjp(x->n, x->K, df, a_put(&a, ybar, n * cols), rbar);
    a_get(&a, g[0], rbar, n);
    a_free(&a);
}

/* SPEC §3, written independently */
static double h_radial(double r, double c, int q, int type)
{
    double fc, x, sinc;
    if (!(r < c))
        return 0.0;
    if (type == ECENET_CUTOFF_POLY) {
        double y = r / c;
        fc = 1.0 - 10.0 * pow(y, 3) + 15.0 * pow(y, 4) - 6.0 * pow(y, 5);
    } else {
        fc = 0.5 * (1.0 + cos(M_PI * r / c));
    }
    if (q == 0)
        return fc;
    x = q * M_PI * r / c;
    sinc = fabs(x) < 1e-8 ? 1.0 : sin(x) / x;
    return sqrt(2.0 / c) * sinc * fc;
}

static void radial_values(const op_case *c)
{
    const opx *x = c->x;
    const size_t n = (size_t)x->n, cols = x->K ? (size_t)x->K : 1;
    arena a = arena_of(c->be);
    double *out = hnew(n * cols), *out2 = hnew(n * cols);
    void *f;
    eval_fwd(c, out);
    f = a_raw(&a, n * cols); /* df = NULL gives the same f */
    c->be->radial_fwd(x->n, a_put(&a, c->in[0], n), x->cut, x->K, x->ctype, f, NULL);
    a_get(&a, out2, f, n * cols);
    a_free(&a);
    for (size_t k = 0; k < n; k++)
        for (size_t q = 0; q < cols; q++) {
            double want = h_radial(c->in[0][k], x->cut, x->K ? (int)q + 1 : 0, x->ctype);
            double got = out[k * cols + q];
            ck_assert_msg(fabs(got - want) <= 1e-13 * (1.0 + fabs(want)),
                          "radial_fwd (%s): f[%zu][%zu] at r = %.17g: %.17g, expected %.17g",
                          c->desc, k, q, c->in[0][k], got, want);
            ck_assert_msg(out2[k * cols + q] == got, "radial_fwd (%s): f differs with df = NULL",
                          c->desc);
        }
}

static void case_radial(const env *ev, size_t n, int K, int type, int it)
{
    opx x;
    op_case c;
    double *r = hnew(n);
    memset(&x, 0, sizeof x);
    x.n = (int64_t)n;
    x.K = K;
    x.ctype = type;
    x.cut = urand(2.0, 6.0);
    for (size_t k = 0; k < n; k++) /* inside and beyond the cutoff, not too close to it */
        do
            r[k] = k == 0 ? 1e-3 : urand(0.05, 1.3 * x.cut);
        while (fabs(r[k] - x.cut) < CUT_MARGIN);
    c = new_case(ev, "radial", &x, radial_fwd_cb, radial_vjp_cb, n * (K ? (size_t)K : 1));
    snprintf(c.desc, sizeof c.desc, "it=%d n=%zu K=%d %s c=%g", it, n, K,
             type == ECENET_CUTOFF_POLY ? "poly" : "cosine", x.cut);
    add_in(&c, "r", r, n);
    run_case(&c);
    radial_values(&c);
}

/* sph: Y(d) on the backend (dY optional) */
static void run_sph(const ecenet_backend *be, size_t n, int L, const double *d, double *Y,
                    double *dY)
{
    arena a = arena_of(be);
    const size_t S = (size_t)(L + 1) * (L + 1);
    void *y = a_raw(&a, n * S), *dy = dY ? a_raw(&a, n * S * 3) : NULL;
    be->sph_fwd((int64_t)n, L, a_put(&a, d, 3 * n), y, dy);
    a_get(&a, Y, y, n * S);
    if (dY)
        a_get(&a, dY, dy, n * S * 3);
    a_free(&a);
}

static void sph_fwd_cb(const op_case *c, double *out)
{
    arena a = arena_of(c->be);
    const size_t n = (size_t)c->x->n, S = (size_t)(c->x->L + 1) * (c->x->L + 1);
    void *y = a_put(&a, out, n * S), *dy = a_raw(&a, n * S * 3);
    c->be->sph_fwd(c->x->n, c->x->L, a_put(&a, c->in[0], 3 * n), y, dy);
    a_get(&a, out, y, n * S);
    a_free(&a);
}

/* the "VJP" of Y through its Jacobian: d̄[p,a] += Σ_s ȳ[p,s] dY[p,s,a] */
static void sph_vjp_cb(const op_case *c, const double *ybar, double *const *g)
{
    const size_t n = (size_t)c->x->n, S = (size_t)(c->x->L + 1) * (c->x->L + 1);
    double *Y = hnew(n * S), *dY = hnew(n * S * 3);
    run_sph(c->be, n, c->x->L, c->in[0], Y, dY);
    for (size_t p = 0; p < n; p++)
        for (size_t s = 0; s < S; s++)
            for (int a = 0; a < 3; a++)
                g[0][3 * p + a] += ybar[p * S + s] * dY[(p * S + s) * 3 + a];
}

/* full Jacobian: one central difference per Cartesian component */
static void sph_jacobian(const op_case *c)
{
    const size_t n = (size_t)c->x->n, S = (size_t)(c->x->L + 1) * (c->x->L + 1);
    const double h = 1e-5;
    double *Y = hnew(n * S), *dY = hnew(n * S * 3), *fd = hnew(n * S * 3);
    double *Yp = hnew(n * S), *Ym = hnew(n * S), *dp = hnew(3 * n);
    double err;
    run_sph(c->be, n, c->x->L, c->in[0], Y, dY);
    run_sph(c->be, n, c->x->L, c->in[0], Yp, NULL);
    ck_assert_msg(n == 0 || memcmp(Y, Yp, n * S * sizeof *Y) == 0,
                  "sph_fwd (%s): Y differs with dY = NULL", c->desc);
    for (int a = 0; a < 3; a++) {
        memcpy(dp, c->in[0], 3 * n * sizeof *dp);
        for (size_t p = 0; p < n; p++)
            dp[3 * p + a] += h;
        run_sph(c->be, n, c->x->L, dp, Yp, NULL);
        for (size_t p = 0; p < n; p++)
            dp[3 * p + a] -= 2.0 * h;
        run_sph(c->be, n, c->x->L, dp, Ym, NULL);
        for (size_t q = 0; q < n * S; q++)
            fd[q * 3 + a] = (Yp[q] - Ym[q]) / (2.0 * h);
    }
    err = tu_rel_l2(fd, dY, n * S * 3);
    stats_add("sph_fwd.dY", "jacobian (l2)", err, -1.0, c->desc);
    ck_assert_msg(err <= c->ev->ent->fd_tol, "sph_fwd (%s): dY vs FD Jacobian, rel l2 %.3g",
                  c->desc, err);
}

/* SPEC §4, l <= 2, written out */
static void sph_explicit(const op_case *c)
{
    const int L = c->x->L;
    const size_t n = (size_t)c->x->n, S = (size_t)(L + 1) * (L + 1);
    double *Y = hnew(n * S);
    run_sph(c->be, n, L, c->in[0], Y, NULL);
    for (size_t p = 0; p < n; p++) {
        const double *v = c->in[0] + 3 * p;
        double rr = norm2(v, 3), x = v[0] / rr, y = v[1] / rr, z = v[2] / rr, want[9];
        const double c1 = sqrt(3.0 / (4 * M_PI)), c2 = sqrt(15.0 / (4 * M_PI));
        want[0] = 1.0 / sqrt(4 * M_PI);
        want[1] = c1 * y;
        want[2] = c1 * z;
        want[3] = c1 * x;
        want[4] = c2 * x * y;
        want[5] = c2 * y * z;
        want[6] = sqrt(5.0 / (16 * M_PI)) * (3 * z * z - 1.0);
        want[7] = c2 * x * z;
        want[8] = sqrt(15.0 / (16 * M_PI)) * (x * x - y * y);
        for (size_t s = 0; s < S && s < 9; s++)
            ck_assert_msg(fabs(Y[p * S + s] - want[s]) <= 1e-14,
                          "sph_fwd (%s): Y[%zu][%zu] = %.17g, SPEC §4 gives %.17g", c->desc, p,
                          s, Y[p * S + s], want[s]);
    }
}

static void case_sph(const env *ev, size_t n, int L, int it)
{
    opx x;
    op_case c;
    const size_t S = (size_t)(L + 1) * (L + 1);
    memset(&x, 0, sizeof x);
    x.n = (int64_t)n;
    x.L = L;
    c = new_case(ev, "sph_fwd.dY", &x, sph_fwd_cb, sph_vjp_cb, n * S);
    snprintf(c.desc, sizeof c.desc, "it=%d n=%zu L=%d", it, n, L);
    add_in(&c, "d", edge_vectors(n, 0.3, 3.0, 0.0, 1), 3 * n);
    run_case(&c);
    sph_jacobian(&c);
    sph_explicit(&c);
}

static void fam_geometry(const env *ev)
{
    for (int it = 0; it < n_iter(ev); it++) {
        shape s;
        size_t n;
        tu_rng_seed(seed_base() + 1000 + (uint64_t)it);
        s = shape_for(it);
        n = (size_t)s.E * 3;
        case_pair_geom(ev, &s, it);
        case_dist(ev, &s, it);
        for (int type = 0; type < 2; type++) {
            case_radial(ev, n, 0, type, it);
            case_radial(ev, n, s.K + 2 * (it % 3), type, it);
        }
        case_sph(ev, s.E ? (size_t)s.E + N_SPECIAL_DIRS : 0, it % 7, it);
        pool_free();
    }
}

/* ================================================================================
 * atom environment: ACE (d -> A through radial, sph, ace_fwd), embed
 * ================================================================================ */

typedef struct {
    void *d, *r, *f, *df, *Y, *dY;
} ace_chain;

static ace_chain ace_run_chain(const op_case *c, arena *a)
{
    const opx *x = c->x;
    const size_t P = (size_t)x->dm.P, R = (size_t)x->dm.R, S = (size_t)x->dm.S;
    ace_chain ch;
    ch.d = a_put(a, c->in[0], 3 * P);
    ch.r = a_put(a, host_r(a, c->in[0], P), P);
    ch.f = a_raw(a, P * R);
    ch.df = a_raw(a, P * R);
    ch.Y = a_raw(a, P * S);
    ch.dY = a_raw(a, P * S * 3);
    c->be->radial_fwd(x->dm.P, ch.r, x->cut, x->dm.R, x->ctype, ch.f, ch.df);
    c->be->sph_fwd(x->dm.P, x->dm.L, ch.d, ch.Y, ch.dY);
    return ch;
}

static size_t a_size(const ecenet_dims *d) { return (size_t)d->N * d->T * d->R * d->S; }

/* x: i0 = nb_src, i1 = nb_dst, i2 = types */
static void ace_fwd_cb(const op_case *c, double *out)
{
    arena a = arena_of(c->be);
    const opx *x = c->x;
    const size_t P = (size_t)x->dm.P;
    ace_chain ch = ace_run_chain(c, &a);
    ecenet_dims dd = dims_dev(&a, x);
    void *A = a_put(&a, out, a_size(&x->dm));
    c->be->ace_fwd(&dd, a_idx(&a, x->ps, P), a_idx(&a, x->pd, P),
                   a_idx(&a, x->i2, (size_t)x->dm.N), ch.f, ch.Y, A);
    a_get(&a, out, A, a_size(&x->dm));
    a_free(&a);
}

static void ace_vjp_cb(const op_case *c, const double *ybar, double *const *g)
{
    arena a = arena_of(c->be);
    const opx *x = c->x;
    const size_t P = (size_t)x->dm.P;
    ace_chain ch = ace_run_chain(c, &a);
    void *dbar = a_put(&a, g[0], 3 * P);
    ecenet_dims dd = dims_dev(&a, x);
    c->be->ace_vjp(&dd, a_idx(&a, x->ps, P), a_idx(&a, x->pd, P),
                   a_idx(&a, x->i2, (size_t)x->dm.N), ch.f, ch.df, ch.Y, ch.dY, ch.d, ch.r,
                   a_put(&a, ybar, a_size(&x->dm)), dbar);
    a_get(&a, g[0], dbar, 3 * P);
    a_free(&a);
}

static void case_ace(const env *ev, const shape *s, int type, int it)
{
    opx x;
    op_case c;
    shape t = *s;
    size_t P;
    if (t.L > 4)
        t.L = 4;
    memset(&x, 0, sizeof x);
    x.dm = dims_of(&t);
    P = (size_t)x.dm.P;
    x.ctype = type;
    x.cut = urand(2.0, 5.0);
    x.ps = hindex(P, t.N);
    x.pd = hindex(P, t.N);
    x.i2 = hindex((size_t)t.N, t.T);
    c = new_case(ev, "ace", &x, ace_fwd_cb, ace_vjp_cb, a_size(&x.dm));
    c.empty = P == 0;
    snprintf(c.desc, sizeof c.desc, "it=%d N=%lld P=%zu T=%d R=%d L=%d %s c=%g", it,
             (long long)t.N, P, t.T, t.R, t.L, type ? "poly" : "cosine", x.cut);
    add_in(&c, "d", edge_vectors(P, 0.3, 1.3 * x.cut, x.cut, 1), 3 * P);
    run_case(&c);
}

/* embed: A (N,T,R,S) -> A_emb (N,C,S); x: i2 = types, w0 = W */
static void embed_fwd_cb(const op_case *c, double *out)
{
    arena a = arena_of(c->be);
    const ecenet_dims *d = &c->x->dm;
    const size_t ne = (size_t)d->N * d->C * d->S;
    void *E = a_put(&a, out, ne);
    c->be->embed_fwd(d, a_idx(&a, c->x->i2, (size_t)d->N),
                     a_put(&a, c->x->w0, (size_t)d->T * d->T * d->R * d->C),
                     a_put(&a, c->in[0], a_size(d)), E);
    a_get(&a, out, E, ne);
    a_free(&a);
}

static void embed_vjp_cb(const op_case *c, const double *ybar, double *const *g)
{
    arena a = arena_of(c->be);
    const ecenet_dims *d = &c->x->dm;
    void *Abar = a_put(&a, g[0], a_size(d));
    c->be->embed_vjp(d, a_idx(&a, c->x->i2, (size_t)d->N),
                     a_put(&a, c->x->w0, (size_t)d->T * d->T * d->R * d->C),
                     a_put(&a, ybar, (size_t)d->N * d->C * d->S), Abar);
    a_get(&a, g[0], Abar, a_size(d));
    a_free(&a);
}

static void case_embed(const env *ev, const shape *s, int it)
{
    opx x;
    op_case c;
    memset(&x, 0, sizeof x);
    x.dm = dims_of(s);
    x.i2 = hindex((size_t)s->N, s->T);
    x.w0 = hnormal((size_t)s->T * s->T * s->R * s->C, 1.0);
    c = new_case(ev, "embed", &x, embed_fwd_cb, embed_vjp_cb,
                 (size_t)s->N * s->C * x.dm.S);
    snprintf(c.desc, sizeof c.desc, "it=%d N=%lld T=%d R=%d L=%d C=%d", it, (long long)s->N,
             s->T, s->R, s->L, s->C);
    add_in(&c, "A", hnormal(a_size(&x.dm), 1.0), a_size(&x.dm));
    run_case(&c);
}

static void fam_ace(const env *ev)
{
    for (int it = 0; it < n_iter(ev); it++) {
        shape s;
        tu_rng_seed(seed_base() + 2000 + (uint64_t)it);
        s = shape_for(it);
        case_ace(ev, &s, ECENET_CUTOFF_COSINE, it);
        case_ace(ev, &s, ECENET_CUTOFF_POLY, it);
        case_embed(ev, &s, it);
        pool_free();
    }
}

/* ================================================================================
 * Wigner-D
 * ================================================================================ */

static double *cg_table(int L)
{
    double *cg = hnew(ecn_cg_size(L));
    ecn_cg_build(L, cg);
    return cg;
}

/* D (E, ND) from d on the backend */
static void run_wigner(const ecenet_backend *be, size_t E, int L, const double *cg,
                       const double *d, double *D)
{
    arena a = arena_of(be);
    const size_t ND = (size_t)nd_of(L);
    void *Dd = a_put(&a, D, E * ND);
    be->wigner_fwd((int64_t)E, L, a_put(&a, cg, ecn_cg_size(L)), a_put(&a, d, 3 * E),
                   a_put(&a, host_r(&a, d, E), E), Dd);
    a_get(&a, D, Dd, E * ND);
    a_free(&a);
}

/* x: n = E, L, w0 = cg */
static void wigner_fwd_cb(const op_case *c, double *out)
{
    run_wigner(c->be, (size_t)c->x->n, c->x->L, c->x->w0, c->in[0], out);
}

static void wigner_vjp_cb(const op_case *c, const double *ybar, double *const *g)
{
    arena a = arena_of(c->be);
    const size_t E = (size_t)c->x->n, ND = (size_t)nd_of(c->x->L);
    void *cg = a_put(&a, c->x->w0, ecn_cg_size(c->x->L)), *d = a_put(&a, c->in[0], 3 * E);
    void *r = a_put(&a, host_r(&a, c->in[0], E), E), *D = a_raw(&a, E * ND);
    void *dbar = a_put(&a, g[0], 3 * E);
    c->be->wigner_fwd(c->x->n, c->x->L, cg, d, r, D);
    c->be->wigner_vjp(c->x->n, c->x->L, cg, d, r, D, a_put(&a, ybar, E * ND), dbar);
    a_get(&a, g[0], dbar, 3 * E);
    a_free(&a);
}

static void case_wigner(const env *ev, size_t E, int L, int it)
{
    opx x;
    op_case c;
    memset(&x, 0, sizeof x);
    x.n = (int64_t)E;
    x.L = L;
    x.w0 = cg_table(L);
    c = new_case(ev, "wigner", &x, wigner_fwd_cb, wigner_vjp_cb, E * (size_t)nd_of(L));
    snprintf(c.desc, sizeof c.desc, "it=%d E=%zu L=%d", it, E, L);
    add_in(&c, "d", edge_vectors(E, 0.5, 3.0, 0.0, 1), 3 * E);
    run_case(&c);
}

static void fam_wigner(const env *ev)
{
    for (int it = 0; it < n_iter(ev); it++) {
        shape s;
        tu_rng_seed(seed_base() + 3000 + (uint64_t)it);
        s = shape_for(it);
        /* every E > 0 case holds the axis and near-0.9 edges */
        case_wigner(ev, s.E ? (size_t)s.E + N_SPECIAL_DIRS : 0, it % 7, it);
        pool_free();
    }
}

/* Properties of D (SPEC §7.3) for L = 6 on random, axis and near-0.9 directions. */
static void wigner_properties(const env *ev)
{
    const int L = 6, S = 49, ND = nd_of(L);
    const size_t n = 40 + N_SPECIAL_DIRS;
    double *cg, *u, *D, *Y, *v, *vl, *Yv, *Yvl, worst = 0.0;
    tu_rng_seed(seed_base() + 77);
    cg = cg_table(L);
    u = edge_vectors(n, 1.0, 1.0, 0.0, 1);
    D = hnew(n * ND);
    Y = hnew(n * S);
    v = edge_vectors(n, 0.5, 2.0, 0.0, 0);
    vl = hnew(3 * n);
    Yv = hnew(n * S);
    Yvl = hnew(n * S);
    run_wigner(ev->be, n, L, cg, u, D);
    run_sph(ev->be, n, L, u, Y, NULL);
    for (size_t e = 0; e < n; e++) { /* v_loc in (x,y,z) from v·D¹ in (y,z,x) order */
        const double *D1 = D + e * ND + 1, vy[3] = {v[3 * e + 1], v[3 * e + 2], v[3 * e]};
        double w[3];
        for (int k = 0; k < 3; k++)
            w[k] = vy[0] * D1[k] + vy[1] * D1[3 + k] + vy[2] * D1[6 + k];
        vl[3 * e] = w[2];
        vl[3 * e + 1] = w[0];
        vl[3 * e + 2] = w[1];
    }
    run_sph(ev->be, n, L, v, Yv, NULL);
    run_sph(ev->be, n, L, vl, Yvl, NULL);
    for (size_t e = 0; e < n; e++) {
        const double *De = D + e * ND, *D1 = De + 1;
        double det = D1[0] * (D1[4] * D1[8] - D1[5] * D1[7]) -
                     D1[1] * (D1[3] * D1[8] - D1[5] * D1[6]) +
                     D1[2] * (D1[3] * D1[7] - D1[4] * D1[6]);
        ck_assert_msg(fabs(det - 1.0) < 1e-13, "wigner: det D¹ = %.17g for edge %zu", det, e);
        for (int l = 0; l <= L; l++) {
            const int m = 2 * l + 1;
            const double *Dl = De + dblk(l), cnorm = sqrt(4 * M_PI / m);
            for (int i = 0; i < m; i++) {
                double yd = 0.0;
                for (int j = 0; j < m; j++) { /* (DᵀD)[i][j] = δ */
                    double s = 0.0;
                    for (int k = 0; k < m; k++)
                        s += Dl[k * m + i] * Dl[k * m + j];
                    worst = fmax(worst, fabs(s - (i == j)));
                    yd += Yv[e * S + l * l + j] * Dl[j * m + i];
                }
                worst = fmax(worst, fabs(yd - Yvl[e * S + l * l + i]));
                worst = fmax(worst, fabs(Dl[i * m + l] - cnorm * Y[e * S + l * l + i]));
            }
        }
    }
    stats_add("wigner", "properties (max abs)", worst, -1.0, "L = 6");
    ck_assert_msg(worst < 1e-12, "wigner: orthogonality / column m=0 / Y(v)·D = Y(v_loc) off by %g",
                  worst);
}

/* SPEC Appendix B (6 decimals) */
static const double APPB_R[2][3] = {{0.36, -0.48, 0.80}, {0.96, 0.28, 0.00}};
static const double APPB_D[2][84] = {
    {1,
     0.857493, -0.480000, 0.185218, 0.514496, 0.800000, -0.308697, 0.000000, 0.360000, 0.932952,
     0.800000, 0.308697, -0.299298, -0.381138, 0.172800,
     -0.169412, 0.439036, -0.665108, 0.296350, -0.498353,
     -0.275090, 0.712906, 0.460000, -0.427744, -0.146715,
     0.480000, 0.185218, 0.498831, 0.635231, -0.288000,
     -0.158824, 0.411597, -0.087295, 0.424768, 0.785694,
     0.695336, 0.446095, -0.083691, -0.060109, -0.330267, -0.385703, 0.221465,
     -0.193575, 0.348612, 0.249904, -0.535401, -0.397764, 0.097073, -0.569432,
     -0.197622, -0.093752, -0.022295, -0.646665, 0.398220, -0.566085, 0.233349,
     0.008613, -0.492097, 0.693139, 0.080000, -0.415883, -0.262452, 0.170546,
     -0.286939, 0.516753, 0.370437, 0.484999, 0.290862, -0.412510, -0.153034,
     0.555134, -0.035576, 0.479633, -0.156159, 0.561893, 0.285666, -0.196973,
     -0.222262, 0.400275, 0.286939, -0.159834, -0.029077, 0.448004, 0.693502},
    {1,
     0, 0.28, 0.96, 1, 0, 0, 0, 0.96, -0.28,
     0, 0, 0.465575, 0.8432, -0.2688,
     0.96, 0.28, 0, 0, 0,
     0, 0, -0.5, 0, -0.866025,
     -0.28, 0.96, 0, 0, 0,
     0, 0, 0.730233, -0.5376, -0.4216,
     0, 0, 0, 0.59466, 0.63802, -0.460622, -0.164736,
     -0.329211, 0.8432, 0.42501, 0, 0, 0, 0,
     0, 0, 0, -0.171464, -0.24, -0.221359, -0.929516,
     -0.790569, 0, -0.612372, 0, 0, 0, 0,
     0, 0, 0, -0.587878, 0.07, -0.758947, 0.271109,
     -0.516352, -0.5376, 0.666608, 0, 0, 0, 0,
     0, 0, 0, 0.520941, -0.728307, -0.403519, 0.188048}};

static void wigner_appendix_b(const env *ev)
{
    double *cg = cg_table(3), D[2 * 84];
    run_wigner(ev->be, 2, 3, cg, &APPB_R[0][0], D);
    for (int e = 0; e < 2; e++)
        for (int q = 0; q < 84; q++)
            ck_assert_msg(fabs(D[e * 84 + q] - APPB_D[e][q]) < 1.5e-6,
                          "wigner: Appendix B vector %d entry %d: %.7f vs %.6f", e, q,
                          D[e * 84 + q], APPB_D[e][q]);
}

/* ================================================================================
 * edge frame, distance embedding
 * ================================================================================ */

static size_t emb_size(const ecenet_dims *d) { return (size_t)d->N * d->C * d->S; }
static size_t dsize(const ecenet_dims *d) { return (size_t)d->E * d->ND; }

/* x: i0 = edge_i, i1 = edge_j; inputs A_emb, D */
static void ef_fwd_cb(const op_case *c, double *out)
{
    arena a = arena_of(c->be);
    const ecenet_dims *d = &c->x->dm;
    ecenet_dims dd = dims_dev(&a, c->x);
    void *X = a_put(&a, out, xsize(d));
    c->be->edge_frame_fwd(&dd, a_idx(&a, c->x->ei, (size_t)d->E), a_idx(&a, c->x->ej, (size_t)d->E),
                          a_put(&a, c->in[0], emb_size(d)), a_put(&a, c->in[1], dsize(d)), X);
    a_get(&a, out, X, xsize(d));
    a_free(&a);
}

static void ef_vjp_cb(const op_case *c, const double *ybar, double *const *g)
{
    arena a = arena_of(c->be);
    const ecenet_dims *d = &c->x->dm;
    ecenet_dims dd = dims_dev(&a, c->x);
    void *Eb = a_put(&a, g[0], emb_size(d)), *Db = a_put(&a, g[1], dsize(d));
    c->be->edge_frame_vjp(&dd, a_idx(&a, c->x->ei, (size_t)d->E), a_idx(&a, c->x->ej, (size_t)d->E),
                          a_put(&a, c->in[0], emb_size(d)), a_put(&a, c->in[1], dsize(d)),
                          a_put(&a, ybar, xsize(d)), Eb, Db);
    a_get(&a, g[0], Eb, emb_size(d));
    a_get(&a, g[1], Db, dsize(d));
    a_free(&a);
}

/* SPEC §8.2: slots without an SH component are 0 */
static void ef_invalid_zero(const op_case *c)
{
    const ecenet_dims *d = &c->x->dm;
    double *X = hnew(xsize(d));
    eval_fwd(c, X);
    for (int64_t e = 0; e < d->E; e++)
        for (int m = 0; m < d->Q; m++)
            for (int p = 0; p < 2; p++)
                for (int f = 0; f < d->F; f++)
                    if (!slot_valid(d, m, p, f))
                        ck_assert_msg(X[((e * d->Q + m) * 2 + p) * d->F + f] == 0.0,
                                      "edge_frame_fwd (%s): invalid slot e=%lld m=%d p=%d f=%d "
                                      "not 0", c->desc, (long long)e, m, p, f);
}

static void case_edge_frame(const env *ev, const shape *s, int it)
{
    opx x;
    op_case c;
    memset(&x, 0, sizeof x);
    x.dm = dims_of(s);
    x.ei = hindex((size_t)s->E, s->N);
    x.ej = hindex((size_t)s->E, s->N);
    c = new_case(ev, "edge_frame", &x, ef_fwd_cb, ef_vjp_cb, xsize(&x.dm));
    snprintf(c.desc, sizeof c.desc, "it=%d N=%lld E=%lld L=%d M=%d C=%d", it, (long long)s->N,
             (long long)s->E, s->L, s->M, s->C);
    add_in(&c, "A_emb", hnormal(emb_size(&x.dm), 1.0), emb_size(&x.dm));
    add_in(&c, "D", hnormal(dsize(&x.dm), 1.0), dsize(&x.dm)); /* D is a free input here */
    run_case(&c);
    ef_invalid_zero(&c);
}

/* x: K, w0 = V (K,F); inputs X, fr */
static void de_fwd_cb(const op_case *c, double *out)
{
    arena a = arena_of(c->be);
    const ecenet_dims *d = &c->x->dm;
    const size_t K = (size_t)c->x->K;
    void *Y = a_put(&a, out, xsize(d));
    c->be->dist_embed_fwd(d, c->x->K, a_put(&a, c->in[1], (size_t)d->E * K),
                          a_put(&a, c->x->w0, K * d->F), a_put(&a, c->in[0], xsize(d)), Y);
    a_get(&a, out, Y, xsize(d));
    a_free(&a);
}

static void de_vjp_cb(const op_case *c, const double *ybar, double *const *g)
{
    arena a = arena_of(c->be);
    const ecenet_dims *d = &c->x->dm;
    const size_t K = (size_t)c->x->K;
    void *Xb = a_put(&a, g[0], xsize(d)), *fb = a_put(&a, g[1], (size_t)d->E * K);
    c->be->dist_embed_vjp(d, c->x->K, a_put(&a, c->in[1], (size_t)d->E * K),
                          a_put(&a, c->x->w0, K * d->F), a_put(&a, c->in[0], xsize(d)),
                          a_put(&a, ybar, xsize(d)), Xb, fb);
    a_get(&a, g[0], Xb, xsize(d));
    a_get(&a, g[1], fb, (size_t)d->E * K);
    a_free(&a);
}

static void case_dist_embed(const env *ev, const shape *s, int it)
{
    opx x;
    op_case c;
    const size_t E = (size_t)s->E;
    memset(&x, 0, sizeof x);
    x.dm = dims_of(s);
    x.K = s->K;
    x.w0 = hnormal((size_t)s->K * x.dm.F, 0.5);
    c = new_case(ev, "dist_embed", &x, de_fwd_cb, de_vjp_cb, xsize(&x.dm));
    snprintf(c.desc, sizeof c.desc, "it=%d E=%zu F=%d Q=%d K=%d", it, E, x.dm.F, x.dm.Q, s->K);
    add_in(&c, "X", hnormal(xsize(&x.dm), 1.0), xsize(&x.dm));
    add_in(&c, "fr", hnormal(E * s->K, 1.0), E * s->K);
    run_case(&c);
}

static void fam_edge_frame(const env *ev)
{
    for (int it = 0; it < n_iter(ev); it++) {
        shape s;
        tu_rng_seed(seed_base() + 4000 + (uint64_t)it);
        s = shape_for(it);
        case_edge_frame(ev, &s, it);
        case_dist_embed(ev, &s, it);
        pool_free();
    }
}

/* ================================================================================
 * layers: linear, realspace, add
 * ================================================================================ */

static size_t feat(const opx *x, int f) { return (size_t)x->dm.E * x->dm.Q * 2 * f; }

static ecenet_linear_params lin_dev(arena *a, const ecenet_linear_params *h)
{
    ecenet_linear_params p = *h;
    const size_t w = (size_t)h->Q * h->fout * h->fin;
    p.w = a_put(a, h->w, w);
    p.bias = a_put(a, h->bias, (size_t)h->fout);
    p.w_src = a_put(a, h->w_src, (size_t)h->T * w);
    p.w_tgt = a_put(a, h->w_tgt, (size_t)h->T * w);
    return p;
}

/* x: lin, i0 = tsrc, i1 = ttgt; input X */
static void lin_fwd_cb(const op_case *c, double *out)
{
    arena a = arena_of(c->be);
    const opx *x = c->x;
    ecenet_linear_params p = lin_dev(&a, &x->lin);
    void *Y = a_put(&a, out, feat(x, p.fout));
    c->be->linear_fwd(x->dm.E, &p, a_idx(&a, x->i0, (size_t)x->dm.E),
                      a_idx(&a, x->i1, (size_t)x->dm.E), a_put(&a, c->in[0], feat(x, p.fin)), Y);
    a_get(&a, out, Y, feat(x, p.fout));
    a_free(&a);
}

static void lin_vjp_cb(const op_case *c, const double *ybar, double *const *g)
{
    arena a = arena_of(c->be);
    const opx *x = c->x;
    ecenet_linear_params p = lin_dev(&a, &x->lin);
    void *Xb = a_put(&a, g[0], feat(x, p.fin));
    c->be->linear_vjp(x->dm.E, &p, a_idx(&a, x->i0, (size_t)x->dm.E),
                      a_idx(&a, x->i1, (size_t)x->dm.E), a_put(&a, ybar, feat(x, p.fout)), Xb);
    a_get(&a, g[0], Xb, feat(x, p.fin));
    a_free(&a);
}

/* variant bits: 1 bias, 2 w_src, 4 w_tgt */
static void case_linear(const env *ev, const shape *s, int variant, int it)
{
    opx x;
    op_case c;
    ecenet_linear_params *p = &x.lin;
    size_t w;
    memset(&x, 0, sizeof x);
    x.dm = dims_of(s);
    p->fin = irand(1, 11);
    p->fout = irand(1, 11);
    p->Q = x.dm.Q;
    p->T = s->T;
    w = (size_t)p->Q * p->fout * p->fin;
    p->w = hnormal(w, 1.0 / sqrt(p->fin));
    p->bias = variant & 1 ? hnormal((size_t)p->fout, 1.0) : NULL;
    p->w_src = variant & 2 ? hnormal((size_t)s->T * w, 0.3) : NULL;
    p->w_tgt = variant & 4 ? hnormal((size_t)s->T * w, 0.3) : NULL;
    x.i0 = hindex((size_t)s->E, s->T);
    x.i1 = hindex((size_t)s->E, s->T);
    c = new_case(ev, "linear", &x, lin_fwd_cb, lin_vjp_cb, feat(&x, p->fout));
    snprintf(c.desc, sizeof c.desc, "it=%d E=%lld Q=%d T=%d fin=%d fout=%d bias=%d src=%d tgt=%d",
             it, (long long)s->E, p->Q, p->T, p->fin, p->fout, variant & 1, !!(variant & 2),
             !!(variant & 4));
    add_in(&c, "X", hnormal(feat(&x, p->fin), 1.0), feat(&x, p->fin));
    run_case(&c);
}

static ecenet_realspace_params rs_dev(arena *a, const ecenet_realspace_params *h)
{
    ecenet_realspace_params p = *h;
    const size_t qg = (size_t)h->Q * h->G, tf = (size_t)h->T * h->F;
    p.cos_synth = a_put(a, h->cos_synth, qg);
    p.sin_synth = a_put(a, h->sin_synth, qg);
    p.cos_analysis = a_put(a, h->cos_analysis, qg);
    p.sin_analysis = a_put(a, h->sin_analysis, qg);
    p.scale = a_put(a, h->scale, (size_t)h->F);
    p.shift = a_put(a, h->shift, (size_t)h->F);
    p.scale_src = a_put(a, h->scale_src, tf);
    p.scale_tgt = a_put(a, h->scale_tgt, tf);
    p.shift_src = a_put(a, h->shift_src, tf);
    p.shift_tgt = a_put(a, h->shift_tgt, tf);
    return p;
}

/* x: rs, i0 = tsrc, i1 = ttgt; input X */
static void rs_fwd_cb(const op_case *c, double *out)
{
    arena a = arena_of(c->be);
    const opx *x = c->x;
    ecenet_realspace_params p = rs_dev(&a, &x->rs);
    void *Y = a_put(&a, out, feat(x, p.F));
    c->be->realspace_fwd(x->dm.E, &p, a_idx(&a, x->i0, (size_t)x->dm.E),
                         a_idx(&a, x->i1, (size_t)x->dm.E), a_put(&a, c->in[0], feat(x, p.F)), Y);
    a_get(&a, out, Y, feat(x, p.F));
    a_free(&a);
}

static void rs_vjp_cb(const op_case *c, const double *ybar, double *const *g)
{
    arena a = arena_of(c->be);
    const opx *x = c->x;
    ecenet_realspace_params p = rs_dev(&a, &x->rs);
    void *Xb = a_put(&a, g[0], feat(x, p.F));
    c->be->realspace_vjp(x->dm.E, &p, a_idx(&a, x->i0, (size_t)x->dm.E),
                         a_idx(&a, x->i1, (size_t)x->dm.E), a_put(&a, c->in[0], feat(x, p.F)),
                         a_put(&a, ybar, feat(x, p.F)), Xb);
    a_get(&a, g[0], Xb, feat(x, p.F));
    a_free(&a);
}

/* SPEC §11 grid matrices */
static void rs_grids(ecenet_realspace_params *p)
{
    const int Q = p->Q, G = p->G;
    double *cs = hnew((size_t)Q * G), *ss = hnew((size_t)Q * G);
    double *ca = hnew((size_t)Q * G), *sa = hnew((size_t)Q * G);
    for (int m = 0; m < Q; m++)
        for (int k = 0; k < G; k++) {
            double th = 2.0 * M_PI * k / G, w = m ? 2.0 / G : 1.0 / G;
            cs[m * G + k] = cos(m * th);
            ss[m * G + k] = sin(m * th);
            ca[k * Q + m] = w * cos(m * th);
            sa[k * Q + m] = w * sin(m * th);
        }
    p->cos_synth = cs;
    p->sin_synth = ss;
    p->cos_analysis = ca;
    p->sin_analysis = sa;
}

static double opt(const void *a, size_t i, double dflt) { return a ? ((const double *)a)[i] : dflt; }

/* smallest |pre-activation| over the grid (host evaluation of SPEC §11) */
static double rs_min_pre(const opx *x, const double *X)
{
    const ecenet_realspace_params *p = &x->rs;
    const double *cs = p->cos_synth, *ss = p->sin_synth;
    double mn = INFINITY;
    for (int64_t e = 0; e < x->dm.E; e++)
        for (int f = 0; f < p->F; f++) {
            size_t ts = (size_t)x->i0[e] * p->F + f, tt = (size_t)x->i1[e] * p->F + f;
            double sc = opt(p->scale, f, 1.0) + opt(p->scale_src, ts, 0.0) + opt(p->scale_tgt, tt, 0.0);
            double sh = opt(p->shift, f, 0.0) + opt(p->shift_src, ts, 0.0) + opt(p->shift_tgt, tt, 0.0);
            for (int k = 0; k < p->G; k++) {
                double v = 0.0;
                for (int m = 0; m < p->Q; m++)
                    v += X[((e * p->Q + m) * 2) * p->F + f] * cs[m * p->G + k] +
                         X[((e * p->Q + m) * 2 + 1) * p->F + f] * ss[m * p->G + k];
                mn = fmin(mn, fabs(sc * v + sh));
            }
        }
    return mn;
}

static const char *ACT_NAME[] = {"silu", "relu", "tanh", "gelu", "identity"};

/* variant bits: 1 scale/shift, 2 *_src, 4 *_tgt */
static void case_realspace(const env *ev, const shape *s, int act, int variant, int it)
{
    opx x;
    op_case c;
    ecenet_realspace_params *p = &x.rs;
    double *X;
    size_t tf;
    int tries = 0;
    memset(&x, 0, sizeof x);
    x.dm = dims_of(s);
    p->F = x.dm.F = irand(1, 9);
    p->Q = x.dm.Q;
    p->G = s->G;
    p->T = s->T;
    p->act = act;
    rs_grids(p);
    tf = (size_t)p->T * p->F;
    if (variant & 1) {
        p->scale = huniform((size_t)p->F, 0.5, 1.5);
        p->shift = hnormal((size_t)p->F, 0.3);
    }
    if (variant & 2) {
        p->scale_src = hnormal(tf, 0.2);
        p->shift_src = hnormal(tf, 0.2);
    }
    if (variant & 4) {
        p->scale_tgt = hnormal(tf, 0.2);
        p->shift_tgt = hnormal(tf, 0.2);
    }
    x.i0 = hindex((size_t)s->E, s->T);
    x.i1 = hindex((size_t)s->E, s->T);
    do { /* relu: keep every grid value away from the kink */
        X = hnormal(feat(&x, p->F), 1.0);
        ck_assert_int_lt(tries++, 200);
    } while (act == ECENET_ACT_RELU && rs_min_pre(&x, X) < 1e-4);
    c = new_case(ev, "realspace", &x, rs_fwd_cb, rs_vjp_cb, feat(&x, p->F));
    if (act == ECENET_ACT_RELU)
        c.h = 1e-7;
    snprintf(c.desc, sizeof c.desc, "it=%d E=%lld F=%d Q=%d G=%d T=%d %s affine=%d src=%d tgt=%d",
             it, (long long)s->E, p->F, p->Q, p->G, p->T, ACT_NAME[act], variant & 1,
             !!(variant & 2), !!(variant & 4));
    add_in(&c, "X", X, feat(&x, p->F));
    run_case(&c);
}

/* Optional fused layer: X -> X + RealSpace(Linear(X)) with Z = Linear(X) saved;
 * layer_vjp turns the cotangent in place into Xbar + Linearᵀ(RealSpace_vjp(Z, Xbar)). */
/* x: lin, rs, i0 = tsrc, i1 = ttgt; input X */
static void ly_run(const op_case *c, arena *a, void *X, void **Z)
{
    const opx *x = c->x;
    ecenet_linear_params lp = lin_dev(a, &x->lin);
    ecenet_realspace_params rp = rs_dev(a, &x->rs);
    *Z = a_raw(a, feat(x, x->rs.F));
    c->be->layer_fwd(x->dm.E, &lp, &rp, a_idx(a, x->i0, (size_t)x->dm.E),
                     a_idx(a, x->i1, (size_t)x->dm.E), X, *Z);
}

static void ly_fwd_cb(const op_case *c, double *out)
{
    arena a = arena_of(c->be);
    const size_t n = feat(c->x, c->x->rs.F);
    void *X = a_put(&a, c->in[0], n), *Z;
    ly_run(c, &a, X, &Z);
    a_get(&a, out, X, n);
    a_free(&a);
}

static void ly_vjp_cb(const op_case *c, const double *ybar, double *const *g)
{
    arena a = arena_of(c->be);
    const opx *x = c->x;
    const size_t n = feat(x, x->rs.F);
    ecenet_linear_params lp = lin_dev(&a, &x->lin);
    ecenet_realspace_params rp = rs_dev(&a, &x->rs);
    double *r = a_host(&a, n);
    void *Z, *Xb = a_put(&a, ybar, n);
    ly_run(c, &a, a_put(&a, c->in[0], n), &Z);
    c->be->layer_vjp(x->dm.E, &lp, &rp, a_idx(&a, x->i0, (size_t)x->dm.E),
                     a_idx(&a, x->i1, (size_t)x->dm.E), Z, Xb, a_raw(&a, n));
    a_get(&a, r, Xb, n);
    for (size_t i = 0; i < n; i++) /* the op works in place on the cotangent */
        g[0][i] += r[i];
    a_free(&a);
}

static void case_layer(const env *ev, const shape *s, int act, int it)
{
    opx x;
    op_case c;
    size_t w;
    if (!ev->be->layer_fwd || !ev->be->layer_vjp) {
        ck_assert_msg(!ev->be->layer_fwd && !ev->be->layer_vjp,
                      "layer_fwd and layer_vjp must be provided together");
        return; /* optional: the orchestration composes linear, realspace and add */
    }
    memset(&x, 0, sizeof x);
    x.dm = dims_of(s);
    x.dm.F = irand(1, 9);
    x.lin.fin = x.lin.fout = x.rs.F = x.dm.F;
    x.lin.Q = x.rs.Q = x.dm.Q;
    x.lin.T = x.rs.T = s->T;
    w = (size_t)x.dm.Q * x.dm.F * x.dm.F;
    x.lin.w = hnormal(w, 1.0 / sqrt(x.dm.F));
    x.lin.bias = hnormal((size_t)x.dm.F, 0.5);
    x.lin.w_src = it % 2 ? hnormal((size_t)s->T * w, 0.3) : NULL;
    x.rs.G = s->G;
    x.rs.act = act;
    rs_grids(&x.rs);
    x.i0 = hindex((size_t)s->E, s->T);
    x.i1 = hindex((size_t)s->E, s->T);
    c = new_case(ev, "layer (fused)", &x, ly_fwd_cb, ly_vjp_cb, feat(&x, x.dm.F));
    snprintf(c.desc, sizeof c.desc, "it=%d E=%lld F=%d Q=%d G=%d %s", it, (long long)s->E,
             x.dm.F, x.dm.Q, x.rs.G, ACT_NAME[act]);
    add_in(&c, "X", hnormal(feat(&x, x.dm.F), 1.0), feat(&x, x.dm.F));
    run_case(&c);
}

static void check_add(const env *ev, size_t n)
{
    arena a = arena_of(ev->be);
    double *X = hnormal(n + 1, 1.0), *Y = hnormal(n + 1, 1.0), *out = hnew(n + 1);
    void *Yd = a_put(&a, Y, n + 1);
    ev->be->add((int64_t)n, a_put(&a, X, n + 1), Yd); /* element n must stay */
    a_get(&a, out, Yd, n + 1);
    a_free(&a);
    for (size_t i = 0; i <= n; i++)
        ck_assert_msg(out[i] == (i < n ? Y[i] + X[i] : Y[i]), "add (n=%zu): Y[%zu] = %.17g", n, i,
                      out[i]);
}

static void fam_layers(const env *ev)
{
    if (!ev->be->layer_fwd)
        printf("[%s] layer_fwd/layer_vjp not provided (optional): fused-layer check skipped\n",
               ev->ent->name);
    for (int it = 0; it < n_iter(ev); it++) {
        shape s;
        tu_rng_seed(seed_base() + 5000 + (uint64_t)it);
        s = shape_for(it);
        case_linear(ev, &s, it % 8, it);
        case_linear(ev, &s, (it + 3) % 8, it);
        case_realspace(ev, &s, it % 5, it % 8, it);
        case_realspace(ev, &s, (it + 1) % 5, (it / 2 + 5) % 8, it);
        check_add(ev, (size_t)s.E * 7);
        case_layer(ev, &s, it % 2 ? ECENET_ACT_TANH : ECENET_ACT_SILU, it);
        pool_free();
    }
}

/* ================================================================================
 * message passing
 * ================================================================================ */

static size_t gsize(const ecenet_dims *d) { return (size_t)d->E * d->B * d->S; }
static size_t delta_size(const ecenet_dims *d) { return (size_t)d->N * d->B * d->S; }

/* inputs X, D -> g */
static void pk_fwd_cb(const op_case *c, double *out)
{
    arena a = arena_of(c->be);
    const ecenet_dims *d = &c->x->dm;
    void *g = a_put(&a, out, gsize(d));
    c->be->mp_pack_unrotate_fwd(d, a_put(&a, c->in[0], xsize(d)), a_put(&a, c->in[1], dsize(d)), g,
                                NULL);
    a_get(&a, out, g, gsize(d));
    a_free(&a);
}

static void pk_vjp_cb(const op_case *c, const double *ybar, double *const *g)
{
    arena a = arena_of(c->be);
    const ecenet_dims *d = &c->x->dm;
    void *Xb = a_put(&a, g[0], xsize(d)), *Db = a_put(&a, g[1], dsize(d));
    c->be->mp_pack_unrotate_vjp(d, a_put(&a, c->in[0], xsize(d)), a_put(&a, c->in[1], dsize(d)),
                                a_put(&a, ybar, gsize(d)), Xb, Db);
    a_get(&a, g[0], Xb, xsize(d));
    a_get(&a, g[1], Db, dsize(d));
    a_free(&a);
}

/* x: K, i0 = tsrc, i1 = ttgt, w0 = W_msg (T,T,K,B); input fr -> w (E,F), the same for every l */
static void wt_fwd_cb(const op_case *c, double *out)
{
    arena a = arena_of(c->be);
    const ecenet_dims *d = &c->x->dm;
    const size_t E = (size_t)d->E, K = (size_t)c->x->K;
    void *w = a_put(&a, out, E * d->F);
    c->be->mp_weight_fwd(d, c->x->K, a_idx(&a, c->x->i0, E), a_idx(&a, c->x->i1, E),
                         a_put(&a, c->in[0], E * K),
                         a_put(&a, c->x->w0, (size_t)d->T * d->T * K * d->B), w);
    a_get(&a, out, w, E * d->F);
    a_free(&a);
}

static void wt_vjp_cb(const op_case *c, const double *ybar, double *const *g)
{
    arena a = arena_of(c->be);
    const ecenet_dims *d = &c->x->dm;
    const size_t E = (size_t)d->E, K = (size_t)c->x->K;
    void *fb = a_put(&a, g[0], E * K);
    c->be->mp_weight_vjp(d, c->x->K, a_idx(&a, c->x->i0, E), a_idx(&a, c->x->i1, E),
                         a_put(&a, c->x->w0, (size_t)d->T * d->T * K * d->B),
                         a_put(&a, ybar, E * d->F), fb);
    a_get(&a, g[0], fb, E * K);
    a_free(&a);
}

/* x: ej = edge_j; inputs g (E,B,S), w (E,F) -> Delta */
static void sc_fwd_cb(const op_case *c, double *out)
{
    arena a = arena_of(c->be);
    const ecenet_dims *d = &c->x->dm;
    ecenet_dims dd = dims_dev(&a, c->x);
    void *D = a_put(&a, out, delta_size(d));
    c->be->mp_scatter_fwd(&dd, a_idx(&a, c->x->ej, (size_t)d->E), a_put(&a, c->in[0], gsize(d)),
                          a_put(&a, c->in[1], (size_t)d->E * d->F), D);
    a_get(&a, out, D, delta_size(d));
    a_free(&a);
}

static void sc_vjp_cb(const op_case *c, const double *ybar, double *const *g)
{
    arena a = arena_of(c->be);
    const ecenet_dims *d = &c->x->dm;
    void *gb = a_put(&a, g[0], gsize(d)), *wb = a_put(&a, g[1], (size_t)d->E * d->F);
    ecenet_dims dd = dims_dev(&a, c->x);
    c->be->mp_scatter_vjp(&dd, a_idx(&a, c->x->ej, (size_t)d->E), a_put(&a, c->in[0], gsize(d)),
                          a_put(&a, c->in[1], (size_t)d->E * d->F),
                          a_put(&a, ybar, delta_size(d)), gb, wb);
    a_get(&a, g[0], gb, gsize(d));
    a_get(&a, g[1], wb, (size_t)d->E * d->F);
    a_free(&a);
}

/* x: ei = edge_i; inputs Delta, D; X += unpack(Delta[edge_i]·D) */
static void ru_fwd_cb(const op_case *c, double *out)
{
    arena a = arena_of(c->be);
    const ecenet_dims *d = &c->x->dm;
    ecenet_dims dd = dims_dev(&a, c->x);
    void *X = a_put(&a, out, xsize(d));
    c->be->mp_rotate_unpack_fwd(&dd, a_idx(&a, c->x->ei, (size_t)d->E),
                                a_put(&a, c->in[0], delta_size(d)), a_put(&a, c->in[1], dsize(d)),
                                X);
    a_get(&a, out, X, xsize(d));
    a_free(&a);
}

static void ru_vjp_cb(const op_case *c, const double *ybar, double *const *g)
{
    arena a = arena_of(c->be);
    const ecenet_dims *d = &c->x->dm;
    void *Deb = a_put(&a, g[0], delta_size(d)), *Db = a_put(&a, g[1], dsize(d));
    ecenet_dims dd = dims_dev(&a, c->x);
    c->be->mp_rotate_unpack_vjp(&dd, a_idx(&a, c->x->ei, (size_t)d->E),
                                a_put(&a, c->in[0], delta_size(d)), a_put(&a, c->in[1], dsize(d)),
                                a_put(&a, ybar, xsize(d)), Deb, Db);
    a_get(&a, g[0], Deb, delta_size(d));
    a_get(&a, g[1], Db, dsize(d));
    a_free(&a);
}

/* the unpack adds 0 to slots without an SH component: they keep X0 exactly */
static void ru_invalid_kept(const op_case *c)
{
    const ecenet_dims *d = &c->x->dm;
    double *X = hnew(xsize(d));
    eval_fwd(c, X);
    for (int64_t e = 0; e < d->E; e++)
        for (int m = 0; m < d->Q; m++)
            for (int p = 0; p < 2; p++)
                for (int f = 0; f < d->F; f++) {
                    size_t q = (size_t)(((e * d->Q + m) * 2 + p) * d->F + f);
                    if (!slot_valid(d, m, p, f))
                        ck_assert_msg(X[q] == c->out_init[q],
                                      "mp_rotate_unpack_fwd (%s): invalid slot e=%lld m=%d p=%d "
                                      "f=%d changed", c->desc, (long long)e, m, p, f);
                }
}

static void case_mp(const env *ev, const shape *s, int it)
{
    opx x;
    op_case c;
    const size_t E = (size_t)s->E;
    char desc[160];
    memset(&x, 0, sizeof x);
    x.dm = dims_of(s);
    x.K = s->K;
    x.ei = hindex(E, s->N);
    x.ej = hindex(E, s->N);
    snprintf(desc, sizeof desc, "it=%d N=%lld E=%zu T=%d L=%d M=%d C=%d K=%d", it,
             (long long)s->N, E, s->T, s->L, s->M, s->C, s->K);

    c = new_case(ev, "mp_pack_unrotate", &x, pk_fwd_cb, pk_vjp_cb, gsize(&x.dm));
    strcpy(c.desc, desc);
    add_in(&c, "X", hnormal(xsize(&x.dm), 1.0), xsize(&x.dm));
    add_in(&c, "D", hnormal(dsize(&x.dm), 1.0), dsize(&x.dm));
    run_case(&c);

    c = new_case(ev, "mp_scatter", &x, sc_fwd_cb, sc_vjp_cb, delta_size(&x.dm));
    strcpy(c.desc, desc);
    c.empty = E == 0;
    add_in(&c, "g", hnormal(gsize(&x.dm), 1.0), gsize(&x.dm));
    add_in(&c, "w", hnormal(E * x.dm.F, 1.0), E * x.dm.F);
    run_case(&c);

    c = new_case(ev, "mp_rotate_unpack", &x, ru_fwd_cb, ru_vjp_cb, xsize(&x.dm));
    strcpy(c.desc, desc);
    c.out_init = hnormal(xsize(&x.dm), 1.0);
    c.empty = E == 0;
    add_in(&c, "Delta", hnormal(delta_size(&x.dm), 1.0), delta_size(&x.dm));
    add_in(&c, "D", hnormal(dsize(&x.dm), 1.0), dsize(&x.dm));
    run_case(&c);
    ru_invalid_kept(&c);
}

static void case_mp_weight(const env *ev, const shape *s, int it)
{
    opx x;
    op_case c;
    const size_t E = (size_t)s->E;
    memset(&x, 0, sizeof x);
    x.dm = dims_of(s);
    x.K = s->K;
    x.i0 = hindex(E, s->T);
    x.i1 = hindex(E, s->T);
    x.w0 = hnormal((size_t)s->T * s->T * s->K * x.dm.B, 1.0);
    c = new_case(ev, "mp_weight", &x, wt_fwd_cb, wt_vjp_cb, E * x.dm.F);
    snprintf(c.desc, sizeof c.desc, "it=%d E=%zu T=%d B=%d K=%d", it, E, s->T, x.dm.B, s->K);
    add_in(&c, "fr", hnormal(E * s->K, 1.0), E * s->K);
    run_case(&c);
}

/* ---- research attention weights (SPEC §17.3 steps 4-5) ---- */

static int attn_slots(const opx *x) { return x->heads * (x->lattn ? x->dm.L + 1 : 1); }

/* x: heads, lattn, mode, env, ej = edge_j; inputs scores (E,K), fc (E) -> w (E,F);
 * a (E,K) is written to *a_out when not NULL */
static void at_run(const op_case *c, arena *a, void *w, void **ad, void **tmp)
{
    const opx *x = c->x;
    const size_t E = (size_t)x->dm.E, K = (size_t)attn_slots(x);
    ecenet_dims dd = dims_dev(a, x);
    *ad = a_raw(a, E * K);
    *tmp = a_raw(a, (size_t)x->dm.N * 4 * K); /* ops.h: (N, 4K) scratch */
    c->be->mp_attn_weight_fwd(&dd, x->heads, x->lattn, x->mode, x->env, a_idx(a, x->ej, E),
                              a_put(a, c->in[0], E * K), a_put(a, c->in[1], E), *ad, w, *tmp);
}

static void at_fwd_cb(const op_case *c, double *out)
{
    arena a = arena_of(c->be);
    const size_t nw = (size_t)c->x->dm.E * c->x->dm.F;
    void *w = a_put(&a, out, nw), *ad, *tmp;
    at_run(c, &a, w, &ad, &tmp);
    a_get(&a, out, w, nw);
    a_free(&a);
}

static void at_vjp_cb(const op_case *c, const double *ybar, double *const *g)
{
    arena a = arena_of(c->be);
    const opx *x = c->x;
    const size_t E = (size_t)x->dm.E, K = (size_t)attn_slots(x);
    void *ad, *tmp, *sb = a_put(&a, g[0], E * K), *fb = a_put(&a, g[1], E);
    ecenet_dims dd = dims_dev(&a, x);
    at_run(c, &a, a_raw(&a, E * x->dm.F), &ad, &tmp);
    c->be->mp_attn_weight_vjp(&dd, x->heads, x->lattn, x->mode, x->env, a_idx(&a, x->ej, E),
                              a_put(&a, c->in[0], E * K), a_put(&a, c->in[1], E), ad,
                              a_put(&a, ybar, E * x->dm.F), tmp, sb, fb);
    a_get(&a, g[0], sb, E * K);
    a_get(&a, g[1], fb, E);
    a_free(&a);
}

/* a and w against SPEC §17.3 / ops.h, evaluated on the host */
static void at_values(const op_case *c)
{
    const opx *x = c->x;
    const int K = attn_slots(x), L1 = x->dm.L + 1, hb = x->dm.B / x->heads;
    const size_t E = (size_t)x->dm.E;
    const double *sc = c->in[0], *fc = c->in[1];
    arena a = arena_of(c->be);
    double *w = a_host(&a, E * x->dm.F), *av = a_host(&a, E * K);
    void *wd = a_raw(&a, E * x->dm.F), *ad, *tmp;
    at_run(c, &a, wd, &ad, &tmp);
    a_get(&a, w, wd, E * x->dm.F);
    a_get(&a, av, ad, E * K);
    for (size_t e = 0; e < E; e++)
        for (int k = 0; k < K; k++) {
            double want = sc[e * K + k] * fc[e];
            if (x->mode == ECENET_ATTN_SOFTMAX) {
                double M = -INFINITY, Z = 0.0;
                for (size_t q = 0; q < E; q++)
                    if (x->ej[q] == x->ej[e])
                        M = fmax(M, sc[q * K + k]);
                for (size_t q = 0; q < E; q++)
                    if (x->ej[q] == x->ej[e])
                        Z += exp(sc[q * K + k] - M) * fc[q];
                want = exp(sc[e * K + k] - M) * fc[e] / (Z + 1e-6) * (x->env ? fc[e] : 1.0);
            }
            ck_assert_msg(fabs(av[e * K + k] - want) <= 1e-13 * (1.0 + fabs(want)),
                          "mp_attn_weight_fwd (%s): a[%zu][%d] = %.17g, expected %.17g", c->desc,
                          e, k, av[e * K + k], want);
        }
    for (size_t e = 0; e < E; e++)
        for (int b = 0; b < x->dm.B; b++)
            for (int l = 0; l < L1; l++) {
                int k = (b / hb) * (x->lattn ? L1 : 1) + (x->lattn ? l : 0);
                ck_assert_msg(w[e * x->dm.F + b * L1 + l] == av[e * K + k],
                              "mp_attn_weight_fwd (%s): w[%zu][b=%d,l=%d] is not a[%d]", c->desc,
                              e, b, l, k);
            }
    a_free(&a);
}

static void case_attn(const env *ev, const shape *s, int it)
{
    opx x;
    op_case c;
    const size_t E = (size_t)s->E;
    int divs[8], nd = 0;
    memset(&x, 0, sizeof x);
    x.dm = dims_of(s);
    for (int h = 1; h <= x.dm.B; h++)
        if (x.dm.B % h == 0)
            divs[nd++] = h;
    x.heads = divs[irand(0, nd - 1)];
    x.lattn = it % 2;
    x.mode = (it / 2) % 2 ? ECENET_ATTN_SOFTMAX : ECENET_ATTN_SUM;
    x.env = (it / 4) % 2;
    x.ej = hindex(E, s->N);
    x.ei = hindex(E, s->N);
    c = new_case(ev, "mp_attn_weight", &x, at_fwd_cb, at_vjp_cb, E * x.dm.F);
    snprintf(c.desc, sizeof c.desc, "it=%d N=%lld E=%zu B=%d L=%d heads=%d l_attn=%d %s env=%d",
             it, (long long)s->N, E, x.dm.B, s->L, x.heads, x.lattn,
             x.mode == ECENET_ATTN_SOFTMAX ? "softmax" : "sum", x.env);
    add_in(&c, "scores", hnormal(E * attn_slots(&x), 1.5), E * attn_slots(&x));
    add_in(&c, "fc", huniform(E, 0.05, 1.0), E); /* an envelope: > 0 keeps Z + 1e-6 away from 0 */
    run_case(&c);
    at_values(&c);
}

static void fam_mp(const env *ev)
{
    for (int it = 0; it < n_iter(ev); it++) {
        shape s;
        tu_rng_seed(seed_base() + 6000 + (uint64_t)it);
        s = shape_for(it);
        case_mp(ev, &s, it);
        case_mp_weight(ev, &s, it);
        case_attn(ev, &s, it);
        pool_free();
    }
}

/* ================================================================================
 * readout: mlp, energy
 * ================================================================================ */

static size_t mlp_hidden(const ecenet_mlp_params *p)
{
    size_t h = 0;
    for (int k = 0; k + 1 < p->n_layers; k++)
        h += (size_t)p->dims[k + 1];
    return h;
}

static ecenet_mlp_params mlp_dev(arena *a, const ecenet_mlp_params *h)
{
    ecenet_mlp_params p = *h;
    for (int k = 0; k < h->n_layers; k++) {
        const size_t w = (size_t)h->dims[k + 1] * h->dims[k];
        p.w[k] = a_put(a, h->w[k], w);
        p.b[k] = a_put(a, h->b[k], (size_t)h->dims[k + 1]);
        p.w_src[k] = a_put(a, h->w_src[k], (size_t)h->T * w);
        p.w_tgt[k] = a_put(a, h->w_tgt[k], (size_t)h->T * w);
    }
    return p;
}

/* x: mlp, i0 = tsrc, i1 = ttgt; input X; H saved into *Hd (device) */
static void mlp_run(const op_case *c, arena *a, const ecenet_mlp_params *p, void *y, void **Hd)
{
    const opx *x = c->x;
    const size_t E = (size_t)x->dm.E;
    *Hd = a_raw(a, E * mlp_hidden(p));
    c->be->mlp_fwd(&x->dm, p, a_idx(a, x->i0, E), a_idx(a, x->i1, E),
                   a_put(a, c->in[0], xsize(&x->dm)), *Hd, y);
}

static void mlp_fwd_cb(const op_case *c, double *out)
{
    arena a = arena_of(c->be);
    ecenet_mlp_params p = mlp_dev(&a, &c->x->mlp);
    const size_t ny = (size_t)c->x->dm.E * p.dims[p.n_layers];
    void *y = a_put(&a, out, ny), *H;
    mlp_run(c, &a, &p, y, &H);
    a_get(&a, out, y, ny);
    a_free(&a);
}

static void mlp_vjp_cb(const op_case *c, const double *ybar, double *const *g)
{
    arena a = arena_of(c->be);
    const opx *x = c->x;
    const size_t E = (size_t)x->dm.E;
    ecenet_mlp_params p = mlp_dev(&a, &x->mlp);
    void *H, *Xb = a_put(&a, g[0], xsize(&x->dm));
    mlp_run(c, &a, &p, a_raw(&a, E * p.dims[p.n_layers]), &H);
    c->be->mlp_vjp(&x->dm, &p, a_idx(&a, x->i0, E), a_idx(&a, x->i1, E), H,
                   a_put(&a, ybar, E * p.dims[p.n_layers]), Xb);
    a_get(&a, g[0], Xb, xsize(&x->dm));
    a_free(&a);
}

/* smallest |saved pre-activation| */
static double mlp_min_h(const op_case *c)
{
    arena a = arena_of(c->be);
    ecenet_mlp_params p = mlp_dev(&a, &c->x->mlp);
    const size_t E = (size_t)c->x->dm.E, nh = E * mlp_hidden(&p);
    double *H = a_host(&a, nh), mn;
    void *Hd;
    mlp_run(c, &a, &p, a_raw(&a, E * p.dims[p.n_layers]), &Hd);
    a_get(&a, H, Hd, nh);
    mn = nh ? fabs(H[0]) : INFINITY;
    for (size_t i = 0; i < nh; i++)
        mn = fmin(mn, fabs(H[i]));
    a_free(&a);
    return mn;
}

/* variant bits: 1 w_src, 2 w_tgt */
static void case_mlp(const env *ev, const shape *s, int n_layers, int act, int variant, int it)
{
    opx x;
    op_case c;
    ecenet_mlp_params *p = &x.mlp;
    int tries = 0;
    memset(&x, 0, sizeof x);
    x.dm = dims_of(s);
    x.dm.F = irand(1, 9); /* the op reads dims[0] = F channels of slot (m=0, cos) */
    p->n_layers = n_layers;
    p->T = s->T;
    p->act = act;
    p->dims[0] = x.dm.F;
    for (int k = 1; k < n_layers; k++)
        p->dims[k] = irand(1, 7);
    p->dims[n_layers] = irand(1, 4);
    for (int k = 0; k < n_layers; k++) {
        const size_t w = (size_t)p->dims[k + 1] * p->dims[k];
        p->w[k] = hnormal(w, 1.0 / sqrt(p->dims[k]));
        p->b[k] = hnormal((size_t)p->dims[k + 1], 0.3);
        p->w_src[k] = variant & 1 ? hnormal((size_t)s->T * w, 0.3) : NULL;
        p->w_tgt[k] = variant & 2 ? hnormal((size_t)s->T * w, 0.3) : NULL;
    }
    x.i0 = hindex((size_t)s->E, s->T);
    x.i1 = hindex((size_t)s->E, s->T);
    c = new_case(ev, "mlp", &x, mlp_fwd_cb, mlp_vjp_cb, (size_t)s->E * p->dims[n_layers]);
    snprintf(c.desc, sizeof c.desc, "it=%d E=%lld F=%d Q=%d layers=%d %s src=%d tgt=%d", it,
             (long long)s->E, x.dm.F, x.dm.Q, n_layers, ACT_NAME[act], variant & 1,
             !!(variant & 2));
    add_in(&c, "X", hnormal(xsize(&x.dm), 1.0), xsize(&x.dm));
    if (act == ECENET_ACT_RELU) { /* keep hidden pre-activations off the kink */
        c.h = 1e-7;
        while (mlp_min_h(&c) < 1e-3) {
            ck_assert_int_lt(tries++, 200);
            for (size_t i = 0; i < c.in_n[0]; i++)
                c.in[0][i] = tu_normal();
        }
    }
    run_case(&c);
}

/* x: n = E, K; inputs y, fr -> eps; energy_vjp is d Σ eps (cotangent 1) */
static void en_fwd_cb(const op_case *c, double *out)
{
    arena a = arena_of(c->be);
    const size_t E = (size_t)c->x->n, K = (size_t)c->x->K;
    void *eps = a_put(&a, out, E);
    c->be->energy_fwd(c->x->n, c->x->K, a_put(&a, c->in[0], E * K), a_put(&a, c->in[1], E * K),
                      eps);
    a_get(&a, out, eps, E);
    a_free(&a);
}

static void en_vjp_cb(const op_case *c, const double *ybar, double *const *g)
{
    arena a = arena_of(c->be);
    const size_t E = (size_t)c->x->n, K = (size_t)c->x->K;
    void *yb = a_put(&a, g[0], E * K), *fb = a_put(&a, g[1], E * K);
    for (size_t e = 0; e < E; e++)
        ck_assert(ybar[e] == 1.0);
    c->be->energy_vjp(c->x->n, c->x->K, a_put(&a, c->in[0], E * K), a_put(&a, c->in[1], E * K),
                      yb, fb);
    a_get(&a, g[0], yb, E * K);
    a_get(&a, g[1], fb, E * K);
    a_free(&a);
}

static void case_energy(const env *ev, const shape *s, int it)
{
    opx x;
    op_case c;
    const size_t E = (size_t)s->E, K = (size_t)s->K;
    memset(&x, 0, sizeof x);
    x.n = s->E;
    x.K = s->K;
    c = new_case(ev, "energy", &x, en_fwd_cb, en_vjp_cb, E);
    c.ybar_ones = 1;
    snprintf(c.desc, sizeof c.desc, "it=%d E=%zu K=%zu", it, E, K);
    add_in(&c, "y", hnormal(E * K, 1.0), E * K);
    add_in(&c, "fr", hnormal(E * K, 1.0), E * K);
    run_case(&c);
}

static void fam_readout(const env *ev)
{
    for (int it = 0; it < n_iter(ev); it++) {
        shape s;
        tu_rng_seed(seed_base() + 7000 + (uint64_t)it);
        s = shape_for(it);
        case_mlp(ev, &s, 1 + it % 3, it % 5, it % 4, it);
        case_mlp(ev, &s, 1 + (it + 1) % 3, (it + 2) % 5, (it + 1) % 4, it);
        case_energy(ev, &s, it);
        pool_free();
    }
}

/* ================================================================================
 * research FiLM gate and channel scale (SPEC §17.4)
 * ================================================================================ */

/* x: mlp (no type corrections), w0 = ea, w1 = eb (T,pdim), K = n_rbf, i0/i1 = tsrc/ttgt;
 * input fr (E, n_rbf) (absent when n_rbf = 0) -> gamma (E, dims[n]) */
static void film_run(const op_case *c, arena *a, const ecenet_mlp_params *p, void *gamma, void **H)
{
    const opx *x = c->x;
    const size_t E = (size_t)x->dm.E, Tp = (size_t)x->dm.T * x->pdim;
    *H = a_raw(a, E * mlp_hidden(p));
    c->be->film_fwd(&x->dm, p, a_put(a, x->w0, Tp), a_put(a, x->w1, Tp), x->pdim, x->K,
                    a_idx(a, x->i0, E), a_idx(a, x->i1, E),
                    x->K ? a_put(a, c->in[0], E * x->K) : NULL, *H, gamma);
}

static void film_fwd_cb(const op_case *c, double *out)
{
    arena a = arena_of(c->be);
    ecenet_mlp_params p = mlp_dev(&a, &c->x->mlp);
    const size_t n = (size_t)c->x->dm.E * p.dims[p.n_layers];
    void *gm = a_put(&a, out, n), *H;
    film_run(c, &a, &p, gm, &H);
    a_get(&a, out, gm, n);
    a_free(&a);
}

static void film_vjp_cb(const op_case *c, const double *ybar, double *const *g)
{
    arena a = arena_of(c->be);
    const opx *x = c->x;
    const size_t E = (size_t)x->dm.E;
    ecenet_mlp_params p = mlp_dev(&a, &x->mlp);
    void *H, *fb = x->K ? a_put(&a, g[0], E * x->K) : a_raw(&a, 0);
    film_run(c, &a, &p, a_raw(&a, E * p.dims[p.n_layers]), &H);
    c->be->film_vjp(&x->dm, &p, x->pdim, x->K, a_idx(&a, x->i0, E), a_idx(&a, x->i1, E), H,
                    a_put(&a, ybar, E * p.dims[p.n_layers]), fb);
    if (x->K)
        a_get(&a, g[0], fb, E * x->K);
    a_free(&a);
}

static void case_film(const env *ev, const shape *s, int n_layers, int act, int n_rbf, int it)
{
    opx x;
    op_case c;
    ecenet_mlp_params *p = &x.mlp;
    const size_t E = (size_t)s->E;
    memset(&x, 0, sizeof x);
    x.dm = dims_of(s);
    x.pdim = irand(1, 4);
    x.K = n_rbf;
    x.w0 = hnormal((size_t)s->T * x.pdim, 1.0);
    x.w1 = hnormal((size_t)s->T * x.pdim, 1.0);
    x.i0 = hindex(E, s->T);
    x.i1 = hindex(E, s->T);
    p->n_layers = n_layers;
    p->T = s->T;
    p->act = act;
    p->dims[0] = 2 * x.pdim + n_rbf;
    for (int k = 1; k < n_layers; k++)
        p->dims[k] = irand(1, 7);
    p->dims[n_layers] = irand(1, 9);
    for (int k = 0; k < n_layers; k++) {
        p->w[k] = hnormal((size_t)p->dims[k + 1] * p->dims[k], 1.0 / sqrt(p->dims[k]));
        p->b[k] = hnormal((size_t)p->dims[k + 1], 0.3);
    }
    c = new_case(ev, "film", &x, film_fwd_cb, film_vjp_cb, E * p->dims[n_layers]);
    snprintf(c.desc, sizeof c.desc, "it=%d E=%zu T=%d P=%d n_rbf=%d layers=%d %s out=%d", it, E,
             s->T, x.pdim, n_rbf, n_layers, ACT_NAME[act], p->dims[n_layers]);
    if (n_rbf)
        add_in(&c, "fr", hnormal(E * n_rbf, 1.0), E * n_rbf);
    run_case(&c);
}

/* x: dm (E, Q, F = Fw), L = 1 if sbar is computed; inputs X, s */
static void cs_fwd_cb(const op_case *c, double *out)
{
    arena a = arena_of(c->be);
    const ecenet_dims *d = &c->x->dm;
    void *Y = a_put(&a, out, xsize(d));
    c->be->chan_scale_fwd(d->E, d->Q, d->F, a_put(&a, c->x->L ? c->in[1] : c->x->w0,
                                                  (size_t)d->E * d->F),
                          a_put(&a, c->in[0], xsize(d)), Y);
    a_get(&a, out, Y, xsize(d));
    a_free(&a);
}

static void cs_vjp_cb(const op_case *c, const double *ybar, double *const *g)
{
    arena a = arena_of(c->be);
    const ecenet_dims *d = &c->x->dm;
    const size_t ns = (size_t)d->E * d->F;
    void *Xb = a_put(&a, g[0], xsize(d)), *sb = c->x->L ? a_put(&a, g[1], ns) : NULL;
    c->be->chan_scale_vjp(d->E, d->Q, d->F, a_put(&a, c->x->L ? c->in[1] : c->x->w0, ns),
                          a_put(&a, c->in[0], xsize(d)), a_put(&a, ybar, xsize(d)), Xb, sb);
    a_get(&a, g[0], Xb, xsize(d));
    if (sb)
        a_get(&a, g[1], sb, ns);
    a_free(&a);
}

static void case_chan_scale(const env *ev, const shape *s, int with_sbar, int it)
{
    opx x;
    op_case c;
    size_t ns;
    memset(&x, 0, sizeof x);
    x.dm = dims_of(s);
    x.dm.F = irand(1, 11); /* Fw */
    x.L = with_sbar;
    ns = (size_t)s->E * x.dm.F;
    x.w0 = hnormal(ns, 1.0); /* s when it is not differentiated */
    c = new_case(ev, "chan_scale", &x, cs_fwd_cb, cs_vjp_cb, xsize(&x.dm));
    snprintf(c.desc, sizeof c.desc, "it=%d E=%lld Q=%d Fw=%d sbar=%s", it, (long long)s->E,
             x.dm.Q, x.dm.F, with_sbar ? "yes" : "NULL");
    add_in(&c, "X", hnormal(xsize(&x.dm), 1.0), xsize(&x.dm));
    if (with_sbar)
        add_in(&c, "s", hnormal(ns, 1.0), ns);
    run_case(&c);
}

static void fam_film(const env *ev)
{
    static const int ACTS[] = {ECENET_ACT_SILU, ECENET_ACT_TANH, ECENET_ACT_GELU,
                               ECENET_ACT_IDENTITY};
    for (int it = 0; it < n_iter(ev); it++) {
        shape s;
        tu_rng_seed(seed_base() + 8000 + (uint64_t)it);
        s = shape_for(it);
        case_film(ev, &s, 1 + it % 3, ACTS[it % 4], it % 3 == 1 ? 0 : irand(1, 5), it);
        case_chan_scale(ev, &s, 1, it);
        case_chan_scale(ev, &s, 0, it);
        pool_free();
    }
}

/* ================================================================================
 * driver
 * ================================================================================ */

typedef void (*family_fn)(const env *ev);

static void for_backends(family_fn fn, const char *family)
{
    for (size_t b = 0; b < N_BACKENDS; b++) {
        env ev;
        ev.ent = &BACKENDS[b];
        ev.be = ecn_backend_get(ev.ent->name, ev.ent->precision);
        ev.quick = getenv("ECN_CHECK_QUICK") && *getenv("ECN_CHECK_QUICK") &&
                   *getenv("ECN_CHECK_QUICK") != '0';
        if (!ev.be) {
            ck_assert_msg(strcmp(ev.ent->name, "ref") != 0, "the ref backend is missing");
            printf("[%s] not compiled in: skipped\n", ev.ent->name);
            continue;
        }
        g_nstats = 0;
        g_verbose = getenv("ECN_CHECK_VERBOSE") != NULL;
        fn(&ev);
        pool_free();
        stats_print(family, ev.ent->name);
    }
}

static void fam_wigner_props(const env *ev)
{
    wigner_properties(ev);
    wigner_appendix_b(ev);
    pool_free();
}

START_TEST(test_geometry) { for_backends(fam_geometry, "geometry"); }
END_TEST
START_TEST(test_ace_embed) { for_backends(fam_ace, "ace"); }
END_TEST
START_TEST(test_wigner) { for_backends(fam_wigner, "wigner"); }
END_TEST
START_TEST(test_wigner_properties) { for_backends(fam_wigner_props, "wigner-D"); }
END_TEST
START_TEST(test_edge_frame) { for_backends(fam_edge_frame, "edgeframe"); }
END_TEST
START_TEST(test_layers) { for_backends(fam_layers, "layers"); }
END_TEST
START_TEST(test_message_passing) { for_backends(fam_mp, "mp"); }
END_TEST
START_TEST(test_readout) { for_backends(fam_readout, "readout"); }
END_TEST
START_TEST(test_film) { for_backends(fam_film, "film"); }
END_TEST

static Suite *ops_suite(void)
{
    Suite *s = suite_create("ops");
    TCase *tc = tcase_create("vjp vs finite differences");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_geometry);
    tcase_add_test(tc, test_ace_embed);
    tcase_add_test(tc, test_wigner);
    tcase_add_test(tc, test_wigner_properties);
    tcase_add_test(tc, test_edge_frame);
    tcase_add_test(tc, test_layers);
    tcase_add_test(tc, test_message_passing);
    tcase_add_test(tc, test_readout);
    tcase_add_test(tc, test_film);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    struct timespec t0, t1;
    SRunner *sr = srunner_create(ops_suite());
    int failed;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    printf("check_ops: %.2f s\n", (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (t1.tv_nsec - t0.tv_nsec));
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
