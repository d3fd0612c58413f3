#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
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
