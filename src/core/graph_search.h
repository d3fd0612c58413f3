/* The cell-list search behind ecn_graph_build (internal to graph.c).
 *
 * graph.c validates the input, wraps the positions into the cell and sizes
 * the bins; this part sorts the atoms into bins and, for a run of atoms of
 * one bin at a time, finds every candidate pair (any image) within the
 * cutoffs, tested exactly, as one sorted run of packed 64-bit keys per source
 * atom. graph.c runs it over all atoms in parallel and turns the keys into
 * the lists (ecn_search_emit). */
#ifndef ECN_GRAPH_SEARCH_H
#define ECN_GRAPH_SEARCH_H

#include <stddef.h>
#include <stdint.h>
#include "ecenet.h"
#include "graph.h"

/* Flags of a candidate key: an edge, a neighbour pair (graph_search.c has
 * the whole layout). */
#define ECN_KEY_EDGE UINT64_C(1)
#define ECN_KEY_NB UINT64_C(2)

typedef struct {
    /* Set by the caller: */
    size_t n;                   /* atoms, 1 .. INT32_MAX */
    const double *pos;          /* (n, 3) original positions */
    const double *C;            /* lattice rows of the shifts (zeros if none) */
    const int64_t *U;           /* C = U·cell for a reduced cell (graph.c), else NULL:
                                 * messages name images n_R·U, as in the cell given */
    const double *frac;         /* (n, 3) wrapped fractional coordinates */
    const int64_t *off;         /* (n, 3) integer wrap offsets */
    int per[3];                 /* periodic axes */
    int64_t nbin[3], span[3];   /* bins per axis; bins visited on each side */
    double fmin[3], binw[3];    /* fractional origin and width of the bins */
    double rsearch;             /* search radius (inflated max cutoff) */
    double r_edge, r_nb;        /* the cutoffs */
    int par;                    /* set-up loops in parallel (OpenMP) */

    /* Set by ecn_search_init; the bins are read by graph.c too: */
    int32_t n_bins;             /* occupied bins */
    int32_t *bin_start;         /* (n_bins + 1) atoms of bin b: bin_atoms[bin_start[b] ..] */
    int32_t *bin_atoms;         /* (n) atoms in bin order, ascending within a bin */
    int32_t *atom_bin;          /* (n) bin of each atom */
    int64_t (*bin_coord)[3];    /* (n_bins) integer bin coordinates */
    double *wbin;               /* (n, 3) wrapped Cartesian positions, bin order */
    int64_t width[3], visits;   /* stencil: 2 span + 1 cells per axis, their product */
    int no_off;                 /* all wrap offsets are 0 */
    double rs2;                 /* prefilter radius², wrapped positions */
    double q_max, q_edge, q_nb; /* exact: r < cutoff <=> d·d < q */
    double q_coin;              /* exact: r <= 1e-10 <=> d·d <= q_coin */
    int64_t mlo[3];             /* key layout (graph_search.c) */
    uint64_t mmask[3];
    int mshift[3], dshift;
    int use_mtab;               /* shifts by the m fields of a key in mtab */
    double *mtab;
    uint64_t mtab_mask;
    uint64_t hash_mask;         /* occupied bins: key + 1 (0 = empty) -> id */
    uint64_t *hash_keys;
    int32_t *hash_ids;
    uint64_t *bkey;             /* scratch: bin key of each atom */
    int32_t *fill;              /* scratch: counting sort */
    size_t atoms_cap;           /* capacity of the per-atom arrays, */
    uint64_t hash_cap, mtab_cap; /* of the hash and of mtab */
} ecn_search;

/* Bins, thresholds and key layout. The arrays are kept by x and reused by the
 * next ecn_search_init of the same x while large enough (x all zeros at
 * first); ecn_search_free releases them (also after a failure).
 * ECENET_OK, or ECENET_ERR_NOMEM / ECENET_ERR_INPUT (a key range that cannot
 * hold the search; not reachable in practice) with a message. */
ecenet_status ecn_search_init(ecn_search *x, char *err, size_t err_len);
void ecn_search_free(ecn_search *x);

/* Per-thread scratch: *ws (NULL at first) made fit for searches of x, kept
 * for later ones. 0, or -1 when out of memory. */
typedef struct ecn_search_ws ecn_search_ws;
int ecn_search_ws_fit(ecn_search_ws **ws, const ecn_search *x);
void ecn_search_ws_free(ecn_search_ws *ws);

/* Candidate keys of several atoms (one run per atom), and the first
 * coincident pair met. */
typedef struct {
    uint64_t *keys;
    int64_t n, cap;
    int32_t coin_atom;   /* lowest atom with a coincident candidate, or -1 */
    uint64_t coin_key;   /* its first such candidate */
} ecn_search_out;

/* Searches the atoms bin_atoms[q0 .. q1), all of one bin. For each atom a
 * of them, its candidates within the larger cutoff (and any coincident ones),
 * sorted by (dst, image), are appended to out as keys: out->keys[key_off[a]
 * .. + key_n[a]); cnt_e[a] / cnt_n[a] count the edges / neighbour pairs among
 * them. 0, or -1 when out of memory. */
int ecn_search_atoms(const ecn_search *x, ecn_search_ws *ws, int64_t q0, int64_t q1,
                     ecn_search_out *out, int64_t *key_off, int64_t *key_n, int64_t *cnt_e,
                     int64_t *cnt_n);

/* Atom i's keys (nk) into the edge list from entry pe on and into the
 * neighbour list from pn on: dst and shift (src is i). */
void ecn_search_emit(const ecn_search *x, int32_t i, const uint64_t *keys, int64_t nk,
                     ecn_pairlist *el, int64_t pe, ecn_pairlist *nl, int64_t pn);

/* Shift vector n·C, with the expression the search uses (graph.c recomputes
 * the shifts of a reduced cell's lists with it) */
void ecn_image_shift(const int64_t n[3], const double *C, double sh[3]);
/* n (an image in a reduced basis R = U·cell) -> n·U, its image in the cell
 * as given; wrap-around arithmetic: terms may exceed int64, the result not */
void ecn_image_unreduce(const int64_t U[9], int64_t n[3]);

/* The error for the coincident candidate `key` of atom i. */
ecenet_status ecn_search_coincide_error(const ecn_search *x, int32_t i, uint64_t key, char *err,
                                        size_t err_len);

#endif
