/* The lattice of a neighbour search (graph_cell.c), internal to graph.c.
 * A cell is 3 row vectors (row-major 3×3, Å); per[k] says whether axis k is
 * periodic. */
#ifndef ECN_GRAPH_CELL_H
#define ECN_GRAPH_CELL_H

#include <stddef.h>
#include <stdint.h>
#include "ecenet.h"

/* per[k]: whether axis k is periodic (none without a cell; all three with a
 * cell and pbc NULL); returns whether any is */
int ecn_cell_periodic(const double *cell, const int pbc[3], int per[3]);

/* The search frame of a cell with periodic axes per: the cell with its zero
 * non-periodic rows replaced by unit vectors completing a basis, checked to
 * be finite and not degenerate (the error names the entry, or the
 * determinant and the lattice vector lengths), and its inverse. */
ecenet_status ecn_cell_frame(const double *cell, const int per[3], double frame[9],
                             double inv[9], char *err, size_t err_len);

/* component k of x·inv: a fractional coordinate (x a position, inv a
 * frame's inverse) */
static inline double ecn_cell_frac(const double x[3], const double inv[9], int k)
{
    return x[0] * inv[k] + x[1] * inv[3 + k] + x[2] * inv[6 + k];
}

/* |b_k|, the norm of column k of the inverse = 1 / perpendicular width k */
double ecn_cell_recip_norm(const double inv[9], int k);

/* A skewed cell's reduced basis R = U·frame (U unimodular, periodic rows
 * only): 1, with U, frame = R and inv its inverse, where searching R visits
 * at least 8 times fewer images within r than frame; else 0, frame and inv
 * untouched. */
int ecn_cell_reduce(double frame[9], double inv[9], const int per[3], double r,
                    int64_t U[9]);
/* rows i of R = Σ_j U[i][j]·m[j] */
void ecn_cell_apply_u(const int64_t U[9], const double m[9], double R[9]);

/* ECENET_ERR_INPUT, naming the density, where n atoms and their periodic
 * images in frame would give an atom more than 5 atoms/Å^3 within rmax (a
 * lattice in nm or bohr taken for Å, a nearly degenerate cell) */
ecenet_status ecn_cell_check_density(size_t n, const double frame[9], const int per[3],
                                     double rmax, char *err, size_t err_len);

#endif
