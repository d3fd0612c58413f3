/* The shared helpers of check_physics (tests/physics/harness.c): what the
 * topic files (tests/physics/<topic>.c) use to build structures and models
 * and to evaluate them through the public API (reference backend, float64). */
#ifndef ECN_TESTS_PHYSICS_HARNESS_H
#define ECN_TESTS_PHYSICS_HARNESS_H

#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ecenet.h"
#include "model.h"
#include "safetensors.h"
#include "test_util.h"

#define MAXN 256 /* largest structure used here (diamond: 216 atoms; supercells of
                    larger than MAXN/2 atoms are skipped) */

extern const int VOIGT[6]; /* xx yy zz yz xz xy in the 3×3 matrix */
extern const int Z_HCO[3]; /* H, C, O: the elements of the random models */

double dmax(double a, double b);
double det3(const double *a);

/* ---- structures ------------------------------------------------------------ */

typedef struct {
    size_t n;
    double pos[3 * MAXN];
    int z[MAXN];
    double cell[9];
    int periodic;
    int pbc[3]; /* periodic directions when periodic (a slab has pbc[2] = 0) */
} structure;

/* Energy (returned), forces F (3n or NULL), dE/dε (9 or NULL) and Voigt stress
 * (6 or NULL; periodic only) of s with positions pos and cell (NULL = s's). */
double calc(ecenet_ctx *ctx, const structure *s, const double *pos, const double *cell,
            double *F, double *dE, double *stress);
/* n atoms in a cube of side `box`, pairwise ≥ dmin apart, elements cycled. */
void make_cluster(structure *s, size_t n, double box, double dmin, const int *elems, int ne);
/* n atoms at random fractional positions in a (possibly triclinic) cell,
 * ≥ dmin apart through images. */
void make_crystal(structure *s, size_t n, const double *cell, double dmin, const int *elems,
                  int ne);
void load_golden_structure(const char *name, structure *s);
/* A random cluster and triclinic crystal (14 atoms each). */
void rot_structures(structure *cl, structure *cr, uint64_t seed);
/* A tiny triclinic cell (2 atoms, cell 3.1-3.6 Å < r_cut: several images of
 * every pair and self-image edges) and a slab periodic in a and b only. */
void extra_structures(structure *tiny, structure *slab, uint64_t seed);

/* ---- models ---------------------------------------------------------------- */

/* Exact-case configurations k = 0..3: identity activation, RealSpace op on. */
ecn_config exact_cfg(int k);

/* ---- the topics (tests/physics/<topic>.c): each adds its tests to a tcase ---- */

void rotation_tests(TCase *tc);     /* rotation.c: "rotation" */
void invariance_tests(TCase *tc);   /* invariance.c: "invariance" */
void fd_tests(TCase *tc);           /* finite_differences.c: "finite_differences" */
void conservation_tests(TCase *tc); /* conservation.c: "conservation" */
void zero_edge_tests(TCase *tc);    /* zero_edges.c: "zero_edges" */
void bad_input_tests(TCase *tc);    /* bad_input.c: "bad_input" */

#endif
