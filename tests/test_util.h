/* Helpers shared by the Check test programs: golden data access, error
 * norms, and a small deterministic RNG. */
#ifndef TEST_UTIL_H
#define TEST_UTIL_H

#include <stddef.h>
#include <stdint.h>
#include "safetensors.h"

/* Test data directory: $ECENET_TEST_DATA, else the build's TEST_DATA_DIR. */
const char *tu_data_dir(void);

/* <data>/golden/<case_name>.<kind>.safetensors, kind "model" or "ref".
 * Aborts the test on failure; close with ecn_st_close. */
ecn_safetensors *tu_open_golden(const char *case_name, const char *kind);

/* Data of tensor `name`, checked for dtype and (if expect_numel >= 0) element
 * count; aborts the test with the name otherwise. */
const double *tu_f64(const ecn_safetensors *st, const char *name, int64_t expect_numel);
const int64_t *tu_i64(const ecn_safetensors *st, const char *name, int64_t expect_numel);

/* |a-b|₂ / |b|₂ (plain |a-b|₂ when b is zero). */
double tu_rel_l2(const double *a, const double *b, size_t n);
double tu_max_abs_diff(const double *a, const double *b, size_t n);
double tu_max_abs(const double *a, size_t n);

/* xoshiro256** seeded through splitmix64; one global stream. */
void tu_rng_seed(uint64_t seed);
uint64_t tu_rng_u64(void);
double tu_uniform(void); /* [0, 1) */
double tu_normal(void);  /* N(0, 1) */

#endif
