/* The shared helpers of check_graph (tests/graph/harness.c): what the topic
 * files (tests/graph/<topic>.c) use to make positions and to compare the
 * library's lists with the brute-force reference.
 *
 * The reference loops over every ordered pair (i, j) and every integer image
 * n in a generous range (from the fractional coordinates and the
 * perpendicular widths), in the order i, j, n_a, n_b, n_c, which is exactly
 * the order ecn_graph_build promises. It computes shifts and distances with
 * the same floating-point expressions as the library, so the lists must be
 * identical. */
#ifndef ECN_TESTS_GRAPH_HARNESS_H
#define ECN_TESTS_GRAPH_HARNESS_H

#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ecenet.h"
#include "graph.h"
#include "safetensors.h"
#include "test_util.h"

/* ---- small helpers --------------------------------------------------------- */

#define rng_seed tu_rng_seed

extern const int PBC_ALL[3];
extern const int PBC_NONE[3];

double rng_range(double a, double b);
void inv3(const double m[9], double inv[9]);
/* Random positions: fractional coordinates in [lo, hi) along each axis times
 * the cell (or Cartesian in [lo, hi)·box when cell is NULL); malloc'd. */
double *random_positions(size_t n, const double *cell, double box, double lo, double hi);

/* ---- comparisons with the reference ----------------------------------------- */

void assert_lists_equal(const ecn_pairlist *a, const ecn_pairlist *b, const char *what,
                        double tol);
/* The list's src/dst groupings equal a plain serial counting sort (as step.c's
 * csr_build makes them); src_idx is the identity. */
void assert_csr(const ecn_pairlist *l, size_t N, const char *what);
int64_t count_self_images(const ecn_pairlist *l);
/* Build with the library and with brute force; compare exactly. Returns the
 * library's graph (caller frees) when keep != NULL. */
void check_case(const char *name, size_t n, const double *pos, const double *cell,
                const int pbc[3], double rce, double rcn, ecn_graph *keep);

/* ---- the topics (tests/graph/<topic>.c): each adds its tests to a tcase ------ */

void nonperiodic_tests(TCase *tc); /* nonperiodic.c: "brute force" */
void cell_tests(TCase *tc);        /* cells.c: "brute force" */
void periodic_tests(TCase *tc);    /* periodic.c: "brute force" */
void search_tests(TCase *tc);      /* search.c: "brute force" */
void grouping_tests(TCase *tc);    /* groupings.c: "brute force" */
void thread_tests(TCase *tc);      /* threads.c: "threads" */
void error_tests(TCase *tc);       /* errors.c: "errors" */
void golden_tests(TCase *tc);      /* golden.c: "golden" */

#endif
