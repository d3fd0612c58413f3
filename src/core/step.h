/* One evaluation step: forward through every op, then the backward for
 * dE/dpositions and dE/dε, all through the backend vtable. */
#ifndef ECN_STEP_H
#define ECN_STEP_H

#include <stddef.h>
#include <stdint.h>
#include "ecenet.h"
#include "ecenet/ops.h"
#include "graph.h"

typedef struct ecn_engine ecn_engine;

/* Parameters uploaded to the backend (converted to its precision). */
ecenet_status ecn_engine_create(const ecenet_model *model, const ecenet_backend *be,
                                ecn_engine **out, char *err, size_t err_len);
void ecn_engine_free(ecn_engine *eng);
const ecenet_backend *ecn_engine_backend(const ecn_engine *eng);

/* Called after each op with a host fp64 copy of its output (tests, debugging).
 * Names: nb_radial, nb_Y, ace_A, A_emb, D, edge_frame, stage{g}.layer{k}.linear,
 * stage{g}.layer{k}, mp{g}, per_edge_energy. */
typedef void (*ecn_trace_fn)(void *user, const char *name, const double *data, size_t count);

typedef struct {
    size_t n_atoms;
    const double *pos;        /* (N,3) host */
    const int32_t *types;     /* (N) host, validated type indices */
    const ecn_graph *graph;   /* explicit edge and neighbour lists */
} ecn_step_in;

typedef struct {
    double energy;            /* model units: Σ per-edge energies + Σ atomic_energy */
    double *per_edge;         /* (E) host, or NULL */
    double *grad;             /* (N,3) dE/dpos host, or NULL */
    double *virial;           /* (9) dE/dε host, or NULL */
    ecn_trace_fn trace;       /* or NULL */
    void *trace_user;
} ecn_step_out;

ecenet_status ecn_step(ecn_engine *eng, const ecn_step_in *in, ecn_step_out *out, char *err,
                       size_t err_len);

#endif
