/* Random-weight model files for tests and benchmarks. */
#ifndef ECN_MODEL_WRITE_H
#define ECN_MODEL_WRITE_H

#include <stdint.h>
#include "model.h"

/* Write a model file for cfg (None-values already resolved: m_max, n_grid,
 * hidden dims) with random parameters of initialisation-like size times
 * `scale` and exact float64 grid matrices. type_z[t] is the atomic number of
 * type t. Deterministic for a given seed.
 *
 * cfg->variant ECN_VARIANT_RESEARCH writes a research-version file (SPEC §17):
 * the research switches (mp_type, mp_dim, mp_n_heads, ..., film_*) must be
 * set as in effect (mp_dim, film_hidden resolved; at least one readout hidden
 * layer). Parameters the research version starts at zero (msg_up, linear_up,
 * the FiLM gate's last layer) are random too. With n_mp = 1, no FiLM and no
 * bottleneck it holds exactly the parameters of the public file of the same
 * seed. */
ecenet_status ecn_model_write_random(const char *path, const ecn_config *cfg, const int *type_z,
                                     uint64_t seed, double scale, char *err, size_t err_len);

#endif
