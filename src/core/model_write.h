/* Random-weight model files for tests and benchmarks. */
#ifndef ECN_MODEL_WRITE_H
#define ECN_MODEL_WRITE_H

#include <stdint.h>
#include "model.h"

/* Write a public-release model file for cfg (None-values already resolved:
 * m_max, n_grid, hidden dims) with random parameters of initialisation-like
 * size times `scale` and exact float64 grid matrices. type_z[t] is the atomic
 * number of type t. Deterministic for a given seed. */
ecenet_status ecn_model_write_random(const char *path, const ecn_config *cfg, const int *type_z,
                                     uint64_t seed, double scale, char *err, size_t err_len);

#endif
