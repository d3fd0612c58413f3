/* The shared harness of check_ops (declared in harness.h): iterations and seeds,
 * host pool, random data, device buffers, worst-error stats, sizes, the generic
 * VJP-vs-FD check (run_case), edge vectors; see check_ops.c for the method. */
#include "harness.h"

/* ---- iterations and seeds of a backend run (the backends: check_ops.c) -------- */

int n_iter(const env *ev) { return ev->quick ? 6 : 30; }

/* ECN_CHECK_SEED shifts every seed (for sweeps); default 0 */
uint64_t seed_base(void)
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
double *hnew(size_t n) { return pool_add(calloc(n ? n : 1, sizeof(double))); }
static int32_t *inew(size_t n) { return pool_add(calloc(n ? n : 1, sizeof(int32_t))); }
void pool_free(void)
{
    while (g_npool)
        free(g_pool[--g_npool]);
}

/* ---- random data ------------------------------------------------------------- */

int irand(int lo, int hi) { return lo + (int)(tu_rng_u64() % (uint64_t)(hi - lo + 1)); }
double urand(double lo, double hi) { return lo + (hi - lo) * tu_uniform(); }

double *hnormal(size_t n, double sd)
{
    double *x = hnew(n);
    for (size_t i = 0; i < n; i++)
        x[i] = sd * tu_normal();
    return x;
}

double *huniform(size_t n, double lo, double hi)
{
    double *x = hnew(n);
    for (size_t i = 0; i < n; i++)
        x[i] = urand(lo, hi);
    return x;
}

/* n indices in [0, hi) */
int32_t *hindex(size_t n, int64_t hi)
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

double norm2(const double *a, size_t n) { return sqrt(dot(a, a, n)); }

/* ---- device buffers of one backend call ------------------------------------------ */

arena arena_of(const ecenet_backend *be)
{
    arena a;
    memset(&a, 0, sizeof a);
    a.be = be;
    return a;
}

void *a_raw(arena *a, size_t n)
{
    void *p;
    ck_assert_int_lt(a->nd, ARENA_MAX);
    p = a->be->alloc((n ? n : 1) * a->be->real_size);
    ck_assert_ptr_nonnull(p);
    a->dev[a->nd++] = p;
    return p;
}

/* upload n reals; NULL stays NULL (optional parameters) */
void *a_put(arena *a, const void *h, size_t n)
{
    void *p;
    if (!h)
        return NULL;
    p = a_raw(a, n);
    if (n)
        a->be->upload(p, h, n);
    return p;
}

ecenet_idx a_idx(arena *a, const int32_t *h, size_t n)
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

void a_get(arena *a, double *h, const void *p, size_t n)
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

double *a_host(arena *a, size_t n)
{
    double *p = calloc(n ? n : 1, sizeof *p);
    ck_assert_ptr_nonnull(p);
    ck_assert_int_lt(a->nh, ARENA_MAX);
    a->host[a->nh++] = p;
    return p;
}

void a_free(arena *a)
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
int g_verbose; /* ECN_CHECK_VERBOSE: name the worst case */
int g_nstats;

/* errR < 0: no fallback was needed */
void stats_add(const char *op, const char *in, double err, double errR, const char *where)
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

void stats_print(const char *family, const char *backend)
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

shape shape_for(int it)
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

int nd_of(int L)
{
    int s = 0;
    for (int l = 0; l <= L; l++)
        s += (2 * l + 1) * (2 * l + 1);
    return s;
}

int dblk(int l) { return nd_of(l - 1); } /* offset of block l */

ecenet_dims dims_of(const shape *s)
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

size_t xsize(const ecenet_dims *d) { return (size_t)d->E * d->Q * 2 * d->F; }

/* Slot (m, part) of channel f carries a rotated SH component (SPEC §8.2). */
int slot_valid(const ecenet_dims *d, int m, int part, int f)
{
    int l = f % (d->L + 1), ml = l < d->M ? l : d->M;
    return m <= ml && (part == 0 || m >= 1);
}

/* ---- the generic VJP-vs-FD check ------------------------------------------------ */

#define N_DIR 3

/* The n entries grouped by atom (ops.h ecenet_csr), built on the host and
 * uploaded: ptr (N+1), idx in increasing order within each atom. */
ecenet_csr csr_dev(arena *a, const int32_t *atom, size_t n, int64_t N)
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
ecenet_dims dims_dev(arena *a, const opx *x)
{
    ecenet_dims d = x->dm;
    const size_t E = (size_t)d.E, P = (size_t)d.P;
    if (x->ei) d.e_src = csr_dev(a, x->ei, E, d.N);
    if (x->ej) d.e_dst = csr_dev(a, x->ej, E, d.N);
    if (x->ps) d.p_src = csr_dev(a, x->ps, P, d.N);
    if (x->pd) d.p_dst = csr_dev(a, x->pd, P, d.N);
    return d;
}

op_case new_case(const env *ev, const char *op, const opx *x, fwd_fn f, vjp_fn v, size_t n_out)
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

void add_in(op_case *c, const char *name, double *x, size_t n)
{
    ck_assert_int_lt(c->n_in, MAX_IN);
    c->in[c->n_in] = x;
    c->in_n[c->n_in] = n;
    c->in_name[c->n_in] = name;
    c->n_in++;
}

void eval_fwd(const op_case *c, double *out)
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

void run_case(const op_case *c)
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
const double NEAR09[] = {0.9002, 0.8998, -0.9002, -0.8998, 0.903, -0.897};

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

/* n vectors with lengths in [lo, hi), none within CUT_MARGIN of `avoid` (> 0). */
double *edge_vectors(size_t n, double lo, double hi, double avoid, int special)
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
double *host_r(arena *a, const double *d, size_t n)
{
    double *r = a_host(a, n);
    for (size_t k = 0; k < n; k++)
        r[k] = sqrt(d[3 * k] * d[3 * k] + d[3 * k + 1] * d[3 * k + 1] + d[3 * k + 2] * d[3 * k + 2] +
                    1e-30);
    return r;
}

/* ---- helpers of more than one family ------------------------------------------ */

/* geometry, wigner */
/* sph: Y(d) on the backend (dY optional) */
void run_sph(const ecenet_backend *be, size_t n, int L, const double *d, double *Y, double *dY)
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

/* edge_frame, mp */
size_t dsize(const ecenet_dims *d) { return (size_t)d->E * d->ND; }

/* layers, readout, film */
const char *ACT_NAME[] = {"silu", "relu", "tanh", "gelu", "identity"};

/* readout, film */
size_t mlp_hidden(const ecenet_mlp_params *p)
{
    size_t h = 0;
    for (int k = 0; k + 1 < p->n_layers; k++)
        h += (size_t)p->dims[k + 1];
    return h;
}

ecenet_mlp_params mlp_dev(arena *a, const ecenet_mlp_params *h)
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
