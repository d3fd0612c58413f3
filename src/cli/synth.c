#define _POSIX_C_SOURCE 200809L
#include "synth.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "model_write.h"

#ifndef M_PI
#define M_PI 3.14159265358979323846
#endif

int ecn_synth_config(const char *name, ecn_config *c)
{
    memset(c, 0, sizeof *c);
    c->n_types = 1;
    c->n_max = 4;
    c->n_mp = 2;
    c->n_dist_basis = 8;
    c->r_cut_edge = 5.0;
    c->r_cut_neighbor = 4.0;
    c->cutoff_type = ECENET_CUTOFF_COSINE;
    c->activation = ECENET_ACT_SILU;
    c->use_nonlinearity = 1;
    c->n_hidden = 1;
    if (strcmp(name, "bench") == 0) { /* the benchmark: F = 256, 10 layers */
        c->l_max = 3;
        c->m_max = 3;
        c->embed_dim = 32;
        c->n_layers = 5;
        c->hidden[0] = 64;
    } else if (strcmp(name, "small") == 0) {
        c->l_max = 2;
        c->m_max = 2;
        c->embed_dim = 8;
        c->n_layers = 2;
        c->hidden[0] = 32;
    } else {
        return -1;
    }
    c->n_grid = 4 * c->m_max + 1;
    return 0;
}

ecenet_status ecn_synth_model(const ecn_config *cfg, uint64_t seed, ecenet_model **model,
                              char *err, size_t err_len)
{
    const char *dir = getenv("TMPDIR");
    char path[4096];
    snprintf(path, sizeof path, "%s/ecenet-synth-XXXXXX", dir && *dir ? dir : "/tmp");
    int fd = mkstemp(path);
    if (fd < 0) {
        snprintf(err, err_len, "%s: cannot create a temporary model file", path);
        return ECENET_ERR_IO;
    }
    close(fd);
    const int z[1] = {6};
    ecenet_status st = ecn_model_write_random(path, cfg, z, seed, 1.0, err, err_len);
    if (st == ECENET_OK)
        st = ecenet_model_load(path, model, err, err_len);
    remove(path);
    return st;
}

static uint64_t splitmix(uint64_t *s)
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

double ecn_synth_normal(uint64_t *s)
{
    double u1 = ((splitmix(s) >> 11) + 1.0) * 0x1.0p-53, u2 = (splitmix(s) >> 11) * 0x1.0p-53;
    return sqrt(-2.0 * log(u1)) * cos(2.0 * M_PI * u2);
}

int ecn_synth_diamond(int n, double sigma, uint64_t seed, size_t *n_atoms, double **pos,
                      int **numbers, double cell[9])
{
    static const double basis[8][3] = {{0, 0, 0},          {0, .5, .5},        {.5, 0, .5},
                                       {.5, .5, 0},        {.25, .25, .25},    {.25, .75, .75},
                                       {.75, .25, .75},    {.75, .75, .25}};
    const double a = 3.567;
    if (n < 1 || n > 200)
        return -1;
    const size_t N = (size_t)8 * n * n * n;
    double *p = malloc(3 * N * sizeof *p);
    int *z = malloc(N * sizeof *z);
    if (!p || !z) {
        free(p);
        free(z);
        return -1;
    }
    size_t k = 0;
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++)
            for (int l = 0; l < n; l++)
                for (int b = 0; b < 8; b++, k++) {
                    p[3 * k + 0] = a * (i + basis[b][0]);
                    p[3 * k + 1] = a * (j + basis[b][1]);
                    p[3 * k + 2] = a * (l + basis[b][2]);
                    z[k] = 6;
                }
    for (size_t q = 0; q < 3 * N; q++)
        p[q] += sigma * ecn_synth_normal(&seed);
    memset(cell, 0, 9 * sizeof *cell);
    cell[0] = cell[4] = cell[8] = a * n;
    *n_atoms = N;
    *pos = p;
    *numbers = z;
    return 0;
}

double ecn_synth_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}
