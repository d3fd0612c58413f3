/* Engine: a model's parameters uploaded to one backend (in its precision),
 * plus the step workspace. Private to src/core (step.c, engine.c). */
#ifndef ECN_ENGINE_H
#define ECN_ENGINE_H

#include "model.h"
#include "step.h"

#define ECN_MAX_OWNED 8192

struct ecn_engine {
    const ecenet_backend *be;
    const ecenet_model *model;
    const void *cg, *W, *V_dist;
    ecenet_linear_params *lin, *lin_up;  /* lin_up: bottleneck layers only */
    ecenet_realspace_params *rs;
    const void **W_msg;                  /* public MP */
    ecn_attn_mp *amp;                    /* research MP */
    const void *film_a, *film_b;
    ecenet_mlp_params film_mlp;
    ecenet_mlp_params mlp;               /* readout */
    void *owned[ECN_MAX_OWNED];          /* parameter buffers in backend memory */
    int n_owned;
    size_t param_bytes;
    int failed;                          /* an upload failed */
    int no_fused;                        /* ignore the backend's fused entries */
    int tf32;                            /* -1: backend default, else set every step */
    int low_memory;                      /* recompute layer activations in the backward */
    int split_done;                      /* ecn_engine_split ran */
    int64_t chunk_edges;                 /* low-memory chunk (0 = automatic) */
    int64_t stage_chunk;                 /* default mode: a stage's layers chunk by
                                          * chunk of this many edges (0 = all at once;
                                          * env ECENET_STAGE_CHUNK, else the backend's
                                          * stage_chunk) */
    void *ws;                            /* step workspace arena, grown on demand */
    size_t ws_bytes;
    void *host_in;                       /* host images of the step's inputs (step.c), */
    size_t host_in_bytes;                /* reused: no page faults per step */
};

#endif
