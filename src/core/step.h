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
 * Names: nb_radial, nb_Y, ace_A, A_emb, D, edge_frame, film.gamma, film,
 * stage{g}.layer{k}.linear (not with a fused layer), .linear_down, .linear_up,
 * stage{g}.layer{k}, mp{g}.trunk, .scores, .weights, .Delta, .receiver_in,
 * .receiver, mp{g}, per_edge_energy. */
typedef void (*ecn_trace_fn)(void *user, const char *name, const double *data, size_t count);

typedef struct {
    size_t n_atoms;
    const double *pos;        /* (N,3) host */
    const int32_t *types;     /* (N) host, validated type indices */
    const ecn_graph *graph;   /* explicit edge and neighbour lists, or NULL with: */
    const ecenet_nlist *nlist; /* the search's set-up (ecn_graph_setup), for a backend
                                  with nlist_count/fill: the lists are found on the
                                  device (ignored by other backends: graph is used) */
} ecn_step_in;

/* Profiling (ecenet profile): with `prof` set, every vtable call of the step
 * is bracketed by the backend's sync + timer hook and recorded, and every
 * workspace buffer is attributed to the op that produces it. */
typedef struct {
    char section[48];         /* "edge frame", "stage0.layer1", "mp0", "readout", ... */
    const char *op;           /* vtable entry, e.g. "linear_fwd", "realspace_vjp" */
    int vjp;                  /* 0 forward, 1 backward */
    double seconds;
} ecn_prof_event;

typedef struct {
    const char *op;           /* producing op (or "inputs", "backward scratch") */
    size_t bytes;
    int saved;                /* kept from the forward for the backward */
} ecn_prof_buffer;

typedef struct {
    ecn_prof_event *ev;
    size_t n_ev, cap_ev;
    ecn_prof_buffer *buf;
    size_t n_buf, cap_buf;
    size_t workspace_bytes;   /* the arena size of this step (Σ buf bytes + alignment) */
    double fwd_seconds, total_seconds;
    int oom;
} ecn_profile;

void ecn_profile_reset(ecn_profile *p);   /* clear events and buffers, keep capacity */
void ecn_profile_free(ecn_profile *p);

/* Bytes of backend memory held for parameters / for the step workspace. */
size_t ecn_engine_param_bytes(const ecn_engine *eng);
size_t ecn_engine_workspace_bytes(const ecn_engine *eng);

/* Use the backend's fused entries when it has them (default on). */
void ecn_engine_set_fused(ecn_engine *eng, int on);
/* TF32 GEMMs of this engine (0/1; -1: the backend's process default, which
 * is also what a new engine starts with). Applied for the duration of each
 * step, so engines do not affect each other. Returns 0, or -1 if the backend
 * has no TF32 mode. */
int ecn_engine_set_tf32(ecn_engine *eng, int on);
/* Low-memory mode (recompute the layers in edge chunks in the backward);
 * chunk_edges 0 = automatic. */
void ecn_engine_set_low_memory(ecn_engine *eng, int on, int64_t chunk_edges);
/* The backend's split of every linear's weights for its split-TF32 GEMM
 * (ops.h linear_split; 2× the weights' memory), made once, before the
 * engine's first strict-fp32 step (ecn_step calls it; TF32 steps never use
 * them). A linear left without them where memory ran out is computed the
 * same way, only slower (the GEMM splits them itself). */
void ecn_engine_split(ecn_engine *eng);

typedef struct {
    double energy;            /* model units: Σ per-edge energies + Σ atomic_energy */
    double *per_edge;         /* (E) host, or NULL */
    double *grad;             /* (N,3) dE/dpos host, or NULL */
    double *virial;           /* (9) dE/dε host, or NULL */
    ecn_trace_fn trace;       /* or NULL */
    void *trace_user;
    ecn_profile *prof;        /* or NULL */
    int nlist_fallback;       /* set: the device search cannot build these lists
                                 (coincident atoms, too many pairs); build them on
                                 the host (which gives the error) and step again */
} ecn_step_out;

ecenet_status ecn_step(ecn_engine *eng, const ecn_step_in *in, ecn_step_out *out, char *err,
                       size_t err_len);

#endif
