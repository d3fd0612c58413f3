/* Helpers shared by the Check test programs: golden data access, error
 * norms, a small deterministic RNG, random models and structures, rotations,
 * and the suite runner. */
#ifndef TEST_UTIL_H
#define TEST_UTIL_H

#include <check.h>
#include <stddef.h>
#include <stdint.h>
#include "ecenet.h"
#include "model.h"
#include "safetensors.h"

/* The time limit of a test case (Check's, per test, in seconds): a guard
 * against hangs, not a speed check. Generous because `make -jN check` runs
 * the programs at once, each OpenMP one with a thread per core: a case of
 * 14 s alone on 2 cores ran past a 60 s limit on a 16-core GPU machine
 * (twenty-eighth session). */
#define TU_HANG_GUARD_S 300

/* Runs every test of s (CK_NORMAL) and frees the runner; returns EXIT_SUCCESS
 * when none failed, else EXIT_FAILURE (main's return value). */
int tu_run_suite(Suite *s);

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


/* ------------------------------------------------------------------------ */
/* models and contexts (each aborts the test on failure)                     */

/* <data>/golden/<name>.model.safetensors, loaded. */
ecenet_model *tu_golden_model(const char *name);

/* A small public configuration the random-model tests start from: n_types
 * types, L = M = 2, n_max 3, C = 2, one layer, one MP stage, 4 distance basis
 * functions, n_grid 9, cosine cutoff, SiLU with the nonlinearity on, r_cut
 * 4.0 (edges) / 3.5 (neighbours), one hidden readout layer of 8. */
ecn_config tu_small_cfg(int n_types);

/* ecn_model_write_random(cfg, type_z, seed, scale) to a temporary file
 * ($TMPDIR, else /tmp), loaded and the file removed; the loaded model's
 * variant is checked against cfg->variant. */
ecenet_model *tu_random_model(const ecn_config *cfg, const int *type_z, uint64_t seed,
                              double scale);

/* A float64 context of m on `backend`. */
ecenet_ctx *tu_ctx(const ecenet_model *m, const char *backend);

/* ------------------------------------------------------------------------ */
/* structures                                                                */

/* The input structure of <data>/golden/<name>.ref.safetensors: n atoms
 * (returned; at most cap, else the test aborts), positions into pos (3n),
 * atomic numbers into z (n), the cell into cell (zero for a molecule) and
 * *periodic from input.pbc (the golden structures are periodic along all
 * three cell vectors or none; checked). */
/* Number of atoms of a golden case's structure. */
size_t tu_golden_atoms(const char *name);
size_t tu_golden_structure(const char *name, size_t cap, double *pos, int *z, double cell[9],
                           int *periodic);

/* n random positions into pos (3n), pairwise at least dmin apart: uniform in
 * a cube of side box, or (cell not NULL) uniform in fractional coordinates of
 * the cell, apart through the images -1..1 of every cell vector. Three
 * tu_uniform() draws per try. */
void tu_random_positions(double *pos, size_t n, double box, const double *cell, double dmin);

/* pos, cell = pos0 (n×3), cell0 under the homogeneous strain x -> x + e·x_a
 * along axis b (the rows of the cell strained like positions). */
void tu_strain(size_t n, const double *pos0, const double cell0[9], int a, int b, double e,
               double *pos, double cell[9]);

/* ------------------------------------------------------------------------ */
/* rotations                                                                 */

/* Haar-uniform rotation (row-major 3×3) from a normalised Gaussian quaternion
 * (four tu_normal() draws). */
void tu_random_rotation(double R[9]);

/* Rows v (n×3) -> v·Rᵀ, i.e. each row vector rotated by R. */
void tu_rotate_rows(const double R[9], const double *v, double *out, size_t n);

/* out = R·M·Rᵀ */
void tu_rotate_tensor(const double R[9], const double M[9], double out[9]);

#endif
