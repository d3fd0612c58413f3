#define _POSIX_C_SOURCE 200809L
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "model_write.h"
#include "test_util.h"

#ifndef TEST_DATA_DIR
#define TEST_DATA_DIR "data"
#endif

const char *tu_data_dir(void)
{
    const char *d = getenv("ECENET_TEST_DATA");
    return d && *d ? d : TEST_DATA_DIR;
}

ecn_safetensors *tu_open_golden(const char *case_name, const char *kind)
{
    char path[4096], err[1024];
    ecn_safetensors *st;
    snprintf(path, sizeof path, "%s/golden/%s.%s.safetensors", tu_data_dir(), case_name, kind);
    st = ecn_st_open(path, err, sizeof err);
    if (!st) ck_abort_msg("cannot open golden file: %s", err);
    return st;
}

static const ecn_tensor *get(const ecn_safetensors *st, const char *name, ecn_dtype dt,
                             const char *dt_name, int64_t expect_numel)
{
    const ecn_tensor *t = ecn_st_find(st, name);
    if (!t) ck_abort_msg("%s: tensor '%s' is missing", st->path, name);
    if (t->dtype != dt) ck_abort_msg("%s: tensor '%s' is not %s", st->path, name, dt_name);
    if (expect_numel >= 0 && t->numel != expect_numel)
        ck_abort_msg("%s: tensor '%s' has %lld elements, expected %lld", st->path, name,
                     (long long)t->numel, (long long)expect_numel);
    return t;
}

const double *tu_f64(const ecn_safetensors *st, const char *name, int64_t expect_numel)
{
    return get(st, name, ECN_DT_F64, "F64", expect_numel)->data;
}

const int64_t *tu_i64(const ecn_safetensors *st, const char *name, int64_t expect_numel)
{
    return get(st, name, ECN_DT_I64, "I64", expect_numel)->data;
}

double tu_rel_l2(const double *a, const double *b, size_t n)
{
    double num = 0.0, den = 0.0;
    size_t i;
    for (i = 0; i < n; i++) {
        num += (a[i] - b[i]) * (a[i] - b[i]);
        den += b[i] * b[i];
    }
    return den > 0.0 ? sqrt(num / den) : sqrt(num);
}

double tu_max_abs_diff(const double *a, const double *b, size_t n)
{
    double m = 0.0;
    size_t i;
    for (i = 0; i < n; i++) {
        double d = fabs(a[i] - b[i]);
        if (d > m || d != d) m = d; /* a NaN difference must not hide */
    }
    return m;
}

double tu_max_abs(const double *a, size_t n)
{
    double m = 0.0;
    size_t i;
    for (i = 0; i < n; i++)
        if (fabs(a[i]) > m || a[i] != a[i]) m = fabs(a[i]);
    return m;
}

static uint64_t rng_s[4];

static uint64_t splitmix64(uint64_t *x)
{
    uint64_t z = (*x += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

void tu_rng_seed(uint64_t seed)
{
    int i;
    for (i = 0; i < 4; i++) rng_s[i] = splitmix64(&seed);
}

uint64_t tu_rng_u64(void)
{
    uint64_t r, t;
    if (!(rng_s[0] | rng_s[1] | rng_s[2] | rng_s[3])) tu_rng_seed(0); /* never seeded */
    r = rotl(rng_s[1] * 5, 7) * 9;
    t = rng_s[1] << 17;
    rng_s[2] ^= rng_s[0];
    rng_s[3] ^= rng_s[1];
    rng_s[1] ^= rng_s[2];
    rng_s[0] ^= rng_s[3];
    rng_s[2] ^= t;
    rng_s[3] = rotl(rng_s[3], 45);
    return r;
}

double tu_uniform(void) { return (double)(tu_rng_u64() >> 11) * 0x1.0p-53; }

double tu_normal(void)
{
    /* Box–Muller; 1 - u keeps the log argument in (0, 1]. */
    double u = 1.0 - tu_uniform(), v = tu_uniform();
    return sqrt(-2.0 * log(u)) * cos(6.283185307179586 * v);
}

int tu_run_suite(Suite *s)
{
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    const int nf = srunner_ntests_failed(sr);
    srunner_free(sr);
    return nf ? EXIT_FAILURE : EXIT_SUCCESS;
}

/* ------------------------------------------------------------------------ */
/* models and contexts                                                       */

ecenet_model *tu_golden_model(const char *name)
{
    char path[4096], err[1024];
    ecenet_model *m = NULL;
    snprintf(path, sizeof path, "%s/golden/%s.model.safetensors", tu_data_dir(), name);
    ck_assert_msg(ecenet_model_load(path, &m, err, sizeof err) == ECENET_OK, "loading %s: %s",
                  path, err);
    return m;
}

ecn_config tu_small_cfg(int n_types)
{
    ecn_config c;
    memset(&c, 0, sizeof c);
    c.variant = ECN_VARIANT_PUBLIC;
    c.n_types = n_types;
    c.l_max = 2;
    c.m_max = 2;
    c.n_max = 3;
    c.embed_dim = 2;
    c.n_layers = 1;
    c.n_mp = 1;
    c.n_dist_basis = 4;
    c.n_grid = 9;
    c.cutoff_type = ECENET_CUTOFF_COSINE;
    c.activation = ECENET_ACT_SILU;
    c.use_nonlinearity = 1;
    c.r_cut_edge = 4.0;
    c.r_cut_neighbor = 3.5;
    c.n_hidden = 1;
    c.hidden[0] = 8;
    return c;
}

ecenet_model *tu_random_model(const ecn_config *cfg, const int *type_z, uint64_t seed,
                              double scale)
{
    const char *tmp = getenv("TMPDIR");
    char path[4096], err[1024];
    ecenet_model *m = NULL;
    ecenet_status st;
    int fd;
    snprintf(path, sizeof path, "%s/ecenet_test_XXXXXX", tmp && *tmp ? tmp : "/tmp");
    fd = mkstemp(path);
    ck_assert_msg(fd >= 0, "mkstemp(%s) failed", path);
    close(fd);
    st = ecn_model_write_random(path, cfg, type_z, seed, scale, err, sizeof err);
    if (st == ECENET_OK)
        st = ecenet_model_load(path, &m, err, sizeof err);
    remove(path);
    ck_assert_msg(st == ECENET_OK, "random model: %s", err);
    ck_assert_str_eq(ecenet_model_variant(m), cfg->variant == ECN_VARIANT_RESEARCH
                                                  ? "thglab-research"
                                                  : "ecenet-public");
    return m;
}

ecenet_ctx *tu_ctx(const ecenet_model *m, const char *backend)
{
    char err[1024];
    ecenet_ctx *ctx = NULL;
    ck_assert_msg(ecenet_ctx_create(m, backend, ECENET_F64, &ctx, err, sizeof err) == ECENET_OK,
                  "%s: %s", backend, err);
    return ctx;
}

/* ------------------------------------------------------------------------ */
/* structures                                                                */

size_t tu_golden_atoms(const char *name)
{
    ecn_safetensors *ref = tu_open_golden(name, "ref");
    const ecn_tensor *tp = ecn_st_find(ref, "input.positions");
    ck_assert_msg(tp != NULL, "%s: tensor 'input.positions' is missing", ref->path);
    const size_t n = (size_t)tp->numel / 3;
    ecn_st_close(ref);
    return n;
}

size_t tu_golden_structure(const char *name, size_t cap, double *pos, int *z, double cell[9],
                           int *periodic)
{
    ecn_safetensors *ref = tu_open_golden(name, "ref");
    const ecn_tensor *tp = ecn_st_find(ref, "input.positions");
    const ecn_tensor *tb = ecn_st_find(ref, "input.pbc");
    size_t i, n;
    const int64_t *zz;
    const unsigned char *pbc;
    ck_assert_msg(tp != NULL, "%s: tensor 'input.positions' is missing", ref->path);
    n = (size_t)tp->numel / 3;
    ck_assert_msg(n <= cap, "%s: %zu atoms, room for %zu", ref->path, n, cap);
    memcpy(pos, tu_f64(ref, "input.positions", (int64_t)(3 * n)), 3 * n * sizeof *pos);
    zz = tu_i64(ref, "input.numbers", (int64_t)n);
    for (i = 0; i < n; i++)
        z[i] = (int)zz[i];
    memcpy(cell, tu_f64(ref, "input.cell", 9), 9 * sizeof *cell);
    ck_assert_msg(tb && (tb->dtype == ECN_DT_U8 || tb->dtype == ECN_DT_BOOL) && tb->numel == 3,
                  "%s: tensor 'input.pbc' is missing or not 3 flags", ref->path);
    pbc = tb->data;
    ck_assert_msg(!pbc[0] == !pbc[1] && !pbc[1] == !pbc[2],
                  "%s: periodic along some cell vectors only", ref->path);
    *periodic = pbc[0] != 0;
    ck_assert_msg(!*periodic || tu_max_abs(cell, 9) > 0.0, "%s: periodic with a zero cell",
                  ref->path);
    ecn_st_close(ref);
    return n;
}

/* Smallest distance of p to the first k rows of pos, through the images
 * -1..1 of every cell vector when cell is not NULL. */
static double min_dist(const double *pos, size_t k, const double *cell, const double *p)
{
    double best = 1e300;
    const int r = cell ? 1 : 0;
    size_t j;
    int a, b, c, x;
    for (j = 0; j < k; j++)
        for (a = -r; a <= r; a++)
            for (b = -r; b <= r; b++)
                for (c = -r; c <= r; c++) {
                    double d2 = 0.0;
                    for (x = 0; x < 3; x++) {
                        double d = pos[3 * j + x] - p[x];
                        if (cell)
                            d += a * cell[x] + b * cell[3 + x] + c * cell[6 + x];
                        d2 += d * d;
                    }
                    if (d2 < best * best)
                        best = sqrt(d2);
                }
    return best;
}

void tu_random_positions(double *pos, size_t n, double box, const double *cell, double dmin)
{
    size_t i;
    int x;
    for (i = 0; i < n; i++) {
        double p[3];
        int tries = 0;
        do {
            double f[3];
            for (x = 0; x < 3; x++)
                f[x] = tu_uniform();
            for (x = 0; x < 3; x++)
                p[x] = cell ? f[0] * cell[x] + f[1] * cell[3 + x] + f[2] * cell[6 + x] : box * f[x];
            ck_assert_msg(++tries < 100000, "cannot place atom %zu", i);
        } while (min_dist(pos, i, cell, p) < dmin);
        memcpy(&pos[3 * i], p, sizeof p);
    }
}

void tu_strain(size_t n, const double *pos0, const double cell0[9], int a, int b, double e,
               double *pos, double cell[9])
{
    size_t i;
    int r;
    memcpy(pos, pos0, 3 * n * sizeof *pos);
    memcpy(cell, cell0, 9 * sizeof *cell);
    for (i = 0; i < n; i++)
        pos[3 * i + b] += e * pos0[3 * i + a];
    for (r = 0; r < 3; r++)
        cell[3 * r + b] += e * cell0[3 * r + a];
}

/* ------------------------------------------------------------------------ */
/* rotations                                                                 */

void tu_random_rotation(double R[9])
{
    double q[4], n = 0.0, w, x, y, z;
    int k;
    for (k = 0; k < 4; k++) {
        q[k] = tu_normal();
        n += q[k] * q[k];
    }
    n = sqrt(n);
    w = q[0] / n;
    x = q[1] / n;
    y = q[2] / n;
    z = q[3] / n;
    R[0] = 1 - 2 * (y * y + z * z); R[1] = 2 * (x * y - w * z);     R[2] = 2 * (x * z + w * y);
    R[3] = 2 * (x * y + w * z);     R[4] = 1 - 2 * (x * x + z * z); R[5] = 2 * (y * z - w * x);
    R[6] = 2 * (x * z - w * y);     R[7] = 2 * (y * z + w * x);     R[8] = 1 - 2 * (x * x + y * y);
}

void tu_rotate_rows(const double R[9], const double *v, double *out, size_t n)
{
    size_t i;
    int a;
    for (i = 0; i < n; i++)
        for (a = 0; a < 3; a++)
            out[3 * i + a] = R[3 * a] * v[3 * i] + R[3 * a + 1] * v[3 * i + 1] +
                             R[3 * a + 2] * v[3 * i + 2];
}

void tu_rotate_tensor(const double R[9], const double M[9], double out[9])
{
    int a, b, c, d;
    for (a = 0; a < 3; a++)
        for (b = 0; b < 3; b++) {
            double s = 0.0;
            for (c = 0; c < 3; c++)
                for (d = 0; d < 3; d++)
                    s += R[3 * a + c] * M[3 * c + d] * R[3 * b + d];
            out[3 * a + b] = s;
        }
}
