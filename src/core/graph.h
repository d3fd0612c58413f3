/* Neighbour search: directed edges (cutoff r_cut_edge) and ACE neighbour
 * pairs (cutoff r_cut_neighbor), all periodic images, O(N) with a cell list.
 *
 * Order (both lists): sorted by source atom, then destination atom, then the
 * integer image (n_a, n_b, n_c) lexicographically. The vector of entry k is
 * pos[dst[k]] - pos[src[k]] + shift[k], shift = n·cell. */
#ifndef ECN_GRAPH_H
#define ECN_GRAPH_H

#include <stddef.h>
#include <stdint.h>
#include "ecenet.h"

typedef struct {
    int64_t n;              /* entries */
    int32_t *src, *dst;     /* (n) */
    double *shift;          /* (n, 3) Cartesian shift vectors */
} ecn_pairlist;

typedef struct {
    ecn_pairlist edges;     /* r < r_cut_edge */
    ecn_pairlist nb;        /* 1e-10 < r < r_cut_neighbor */
} ecn_graph;

/* Build both lists. cell may be NULL (non-periodic); pbc flags per axis
 * (a non-periodic axis of a given cell is not replicated). Fails with a
 * message naming the atoms for coincident atoms (distance <= 1e-10 Å,
 * any image), non-finite positions, or a singular cell. */
ecenet_status ecn_graph_build(size_t n_atoms, const double *pos, const double *cell,
                              const int pbc[3], double r_cut_edge, double r_cut_nb,
                              ecn_graph *g, char *err, size_t err_len);
void ecn_graph_free(ecn_graph *g);

#endif
