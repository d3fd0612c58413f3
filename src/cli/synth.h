/* Synthetic inputs for `ecenet bench` and `ecenet profile`: named model
 * configurations with random weights and rattled diamond boxes. */
#ifndef ECN_CLI_SYNTH_H
#define ECN_CLI_SYNTH_H

#include <stddef.h>
#include <stdint.h>
#include "model.h"

/* Resolved configuration of a named benchmark model ("bench", "small");
 * returns 0, or -1 for an unknown name. */
int ecn_synth_config(const char *name, ecn_config *cfg);

/* Write a random-weight carbon model of `cfg` to a temporary file and load
 * it; the file is removed again. */
ecenet_status ecn_synth_model(const ecn_config *cfg, uint64_t seed, ecenet_model **model,
                              char *err, size_t err_len);

/* n×n×n cubic diamond cells (a = 3.567 Å, 8 atoms each), every atom displaced
 * by N(0, sigma²) per component (seeded). Caller frees *pos and *numbers. */
int ecn_synth_diamond(int n, double sigma, uint64_t seed, size_t *n_atoms, double **pos,
                      int **numbers, double cell[9]);

/* The next N(0, 1) value of a seeded stream (splitmix64, Box-Muller): the
 * same numbers on every platform. *state is the seed, then the state. */
double ecn_synth_normal(uint64_t *state);

/* Monotonic wall clock in seconds. */
double ecn_synth_now(void);

#endif
