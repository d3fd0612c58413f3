/* The workspace of a step (step.c): the shape of the step, every buffer it
 * uses (device memory of the backend, carved from one arena) and the plan
 * that carves them. Internal to step.c and step_ws.c. */
#ifndef ECN_STEP_WS_H
#define ECN_STEP_WS_H

#include <stddef.h>
#include <stdint.h>
#include "engine.h"

/* A pass over the plan: with base NULL it only sizes the arena (off); with
 * base set it hands out the buffers and, with prof, records each one. */
typedef struct {
    char *base;
    size_t off;
    ecn_profile *prof; /* records each buffer on the second (carving) pass */
} ecn_carve;

#define ECN_MAX_LAYERS 256 /* linears (and MP layers) a step can hold */

/* the buffers of a step (backend memory), named as in SPEC.md */
typedef struct {
    int32_t *edge_i, *edge_j, *nb_src, *nb_dst, *types, *tsrc, *ttgt;
    int32_t *csr[8]; /* ptr/idx of e_src, e_dst, p_src, p_dst */
    void *pos, *eshift, *nshift;
    void *dp, *rp, *fp, *dfp, *Y, *dY, *A, *Aemb;
    void *de, *re, *D, *fc, *dfc;
    void *fr_de, *dfr_de, *fr_mp, *dfr_mp, *fr_out, *dfr_out, *fr_film, *dfr_film;
    void *H_film, *gamma;
    void *X0, *X;
    /* per layer: (first) linear output (low memory: per layer of a chunk) */
    void *Z[ECN_MAX_LAYERS];
    void *Sin[ECN_MAX_LAYERS], *Xc; /* low memory: stage inputs, the chunk's features */
    void *Xmp[ECN_MAX_LAYERS], *g[ECN_MAX_LAYERS], *w[ECN_MAX_LAYERS], *Delta[ECN_MAX_LAYERS];
    /* attention MP */
    void *T1[ECN_MAX_LAYERS], *R1[ECN_MAX_LAYERS], *sc[ECN_MAX_LAYERS], *a[ECN_MAX_LAYERS];
    void *attn_tmp;
    void *H, *y, *eps;
    void *tF1, *tF2, *tF3, *tW1, *tW2; /* temporaries at width F and at the narrow width */
    /* backward */
    void *Xbar, *X0bar, *gamma_bar, *Aemb_bar, *Abar, *Dbar, *dbar_e, *rbar_e, *dbar_p;
    void *gbar, *wbar, *Deltabar, *sbar, *fcbar, *ybar;
    void *frbar_out, *frbar_mp, *frbar_de, *frbar_film, *posbar, *virial;
} ecn_ws;

/* the shape of a step: its sizes and which buffers it needs */
typedef struct {
    ecenet_dims dm;
    int K_de, K_mp, K_out, K_film, n_hid, n_hid_film, n_lin, n_mp_layers, attn, grad;
    int Wn; /* narrow feature width: max(bottleneck_dim, mp_dim, 1) */
    int lm;        /* low-memory mode */
    int64_t chunk; /* its edges per chunk */
    int mp_alias;  /* low memory, public MP: its gradients in the dead stage input */
} ecn_shape;

/* Every buffer of a step of shape sh into w, 64-byte aligned, rs bytes a
 * real: the index arrays first and together, then positions and shifts
 * (the step uploads each region in one copy), then the forward's, then,
 * with sh->grad, the backward's. */
void ecn_ws_plan(const ecn_shape *sh, const ecn_config *c, size_t rs, ecn_carve *cv, ecn_ws *w);

#endif
