/* Neighbour search: directed edges (cutoff r_cut_edge) and ACE neighbour
 * pairs (cutoff r_cut_neighbor), all periodic images, O(N) with a cell list.
 *
 * Order (both lists): sorted by source atom, then destination atom, then the
 * integer image (n_a, n_b, n_c) lexicographically. The vector of entry k is
 * pos[dst[k]] - pos[src[k]] + shift[k], shift = n·cell.
 *
 * Per-atom groupings (CSR) of each list, for the per-atom reductions of a
 * step: the entries k with src[k] == a are src_idx[src_ptr[a] ..
 * src_ptr[a + 1]), those with dst[k] == a are dst_idx[dst_ptr[a] ..
 * dst_ptr[a + 1]), each in increasing k (stable). As the list is sorted by
 * source, src_idx is the identity (src_ptr[a] is where atom a's entries
 * begin). These are exactly the groupings of a serial counting sort (step.c's
 * csr_build). The ptr arrays have n_atoms + 1 entries and exist whenever
 * n_atoms > 0 (all zero for an empty list); the idx arrays have n entries
 * and are NULL when n == 0, like src, dst and shift (ecn_graph_build). */
#ifndef ECN_GRAPH_H
#define ECN_GRAPH_H

#include <stddef.h>
#include <stdint.h>
#include "ecenet.h"
#include "ecenet/ops.h"

typedef struct {
    int64_t n;              /* entries */
    int32_t *src, *dst;     /* (n) */
    double *shift;          /* (n, 3) Cartesian shift vectors */
    int32_t *src_ptr, *dst_ptr;  /* (n_atoms + 1) CSR offsets by source / destination */
    int32_t *src_idx, *dst_idx;  /* (n) entry indices, grouped by source / destination */
} ecn_pairlist;

typedef struct ecn_graph_mem ecn_graph_mem;

typedef struct {
    ecn_pairlist edges;     /* r < r_cut_edge */
    ecn_pairlist nb;        /* 1e-10 < r < r_cut_neighbor */
    ecn_graph_mem *mem;     /* private: memory kept by ecn_graph_rebuild */
} ecn_graph;

/* Build both lists and their groupings. With OpenMP, in parallel over the
 * atoms on up to min(omp_get_max_threads(), 32) threads (below 64 atoms
 * serially); the result does not depend on the number of threads.
 * cell may be NULL (non-periodic); pbc flags per axis (a non-periodic axis
 * of a given cell is not replicated). Fails with a message naming the atoms
 * for coincident atoms (distance <= 1e-10 Å, any image), non-finite
 * positions, or a singular cell. A skewed cell (b = (1e8, 10, 0) for a 10 Å
 * cube) is searched in a reduced basis of the same lattice, in about the
 * time of the reduced cell, with the same lists. On failure *g is left
 * empty. */
ecenet_status ecn_graph_build(size_t n_atoms, const double *pos, const double *cell,
                              const int pbc[3], double r_cut_edge, double r_cut_nb,
                              ecn_graph *g, char *err, size_t err_len);
/* The same for a g that holds an earlier graph (from ecn_graph_build or
 * ecn_graph_rebuild) or is all zeros, reusing its memory: in a loop over the
 * steps of a simulation no fresh memory is touched once the arrays are large
 * enough (first touches of fresh pages cost about as much as the search).
 * The lists are the same as ecn_graph_build's, but the arrays of an empty
 * list need not be NULL, and g keeps some scratch memory until
 * ecn_graph_free. On failure *g is freed (left empty). */
ecenet_status ecn_graph_rebuild(size_t n_atoms, const double *pos, const double *cell,
                                const int pbc[3], double r_cut_edge, double r_cut_nb,
                                ecn_graph *g, char *err, size_t err_len);
/* Only the set-up of ecn_graph_rebuild's search (validation, frame, wrap,
 * bins, thresholds and key layout; the same errors), for a device search
 * (ops.h nlist_count / nlist_fill): *s points into memory kept by g, valid
 * until g is built, set up or freed again; g's lists are left empty (n = 0).
 * With n_atoms == 0, s->n = 0 and nothing is to be searched. A skewed cell,
 * which ecn_graph_build searches in a reduced basis, is searched here on the
 * host as ecn_graph_rebuild would: s->n = -1 (status OK) and g holds the
 * lists. On failure *g is freed. */
ecenet_status ecn_graph_setup(size_t n_atoms, const double *pos, const double *cell,
                              const int pbc[3], double r_cut_edge, double r_cut_nb,
                              ecn_graph *g, ecenet_nlist *s, char *err, size_t err_len);
/* out = pos translated by the atoms' centroid and, along each periodic
 * axis, moved by whole lattice vectors into [-1/2, 1/2) of the cell in
 * fractional coordinates (out may not alias pos). The energy, each atom's
 * force and the stress are the same for out as for pos (translation and
 * periodic images), and out's coordinates stay within about a cell of the
 * origin, where fp32 resolves them: an MD code's unwrapped coordinates or
 * a box far from the origin otherwise lose fp32's precision in every edge
 * vector (pos[j] - pos[i] + shift). A cell the graph would refuse
 * (singular, not finite) gets the translation alone. */
void ecn_graph_recentre(size_t n_atoms, const double *pos, const double *cell, const int pbc[3],
                        double *out);
/* Frees all arrays of both lists and the kept memory (g may be NULL; safe on
 * an empty graph). */
void ecn_graph_free(ecn_graph *g);

#endif
