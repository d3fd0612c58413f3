/* The shared harness of check_ops (tests/ops/harness.c): what the op-family
 * files (tests/ops/<family>.c) and the driver (tests/check_ops.c) use. The
 * method is described at the top of check_ops.c. */
#ifndef ECN_TESTS_OPS_HARNESS_H
#define ECN_TESTS_OPS_HARNESS_H

#include <check.h>
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ecenet.h"
#include "ecenet/ops.h"
#include "backend.h"
#include "cg.h"
#include "test_util.h"

#ifndef M_PI
#define M_PI 3.14159265358979323846
#endif

/* ---- backends under test (the table, BACKENDS, is in check_ops.c) ---------------- */

typedef struct {
    const char *name;
    int precision;
    double fd_tol;  /* relative FD agreement */
    double acc_tol; /* accumulation: |2 calls − (g0 + 2J)| / (max|g0| + 2 max|J|) */
} backend_entry;

typedef struct {
    const ecenet_backend *be;
    const backend_entry *ent;
    int quick;
} env;

int n_iter(const env *ev);
/* ECN_CHECK_SEED shifts every seed (for sweeps); default 0 */
uint64_t seed_base(void);

/* ---- host memory: a pool freed after each iteration ------------------------------ */

double *hnew(size_t n);
void pool_free(void);

/* ---- random data (tu_rng stream) ------------------------------------------------- */

int irand(int lo, int hi);
double urand(double lo, double hi);
double *hnormal(size_t n, double sd);
double *huniform(size_t n, double lo, double hi);
/* n indices in [0, hi) */
int32_t *hindex(size_t n, int64_t hi);
double norm2(const double *a, size_t n);

/* ---- device buffers of one backend call, released by a_free ---------------------- */

#define ARENA_MAX 64
typedef struct {
    const ecenet_backend *be;
    void *dev[ARENA_MAX];
    void *host[ARENA_MAX];
    int nd, nh;
} arena;

arena arena_of(const ecenet_backend *be);
void *a_raw(arena *a, size_t n);
/* upload n reals; NULL stays NULL (optional parameters) */
void *a_put(arena *a, const void *h, size_t n);
ecenet_idx a_idx(arena *a, const int32_t *h, size_t n);
void a_get(arena *a, double *h, const void *p, size_t n);
double *a_host(arena *a, size_t n);
void a_free(arena *a);

/* ---- worst errors per (op, input), printed per family by the driver -------------- */

extern int g_verbose; /* ECN_CHECK_VERBOSE: name the worst case */
extern int g_nstats;
/* errR < 0: no fallback was needed */
void stats_add(const char *op, const char *in, double err, double errR, const char *where);
void stats_print(const char *family, const char *backend);

/* ---- sizes ----------------------------------------------------------------------- */

typedef struct {
    int64_t N, E, P;
    int T, R, L, M, C, G, K;
} shape;

/* the shape of iteration it; the first iterations force the corner cases */
shape shape_for(int it);
int nd_of(int L);
int dblk(int l); /* offset of block l */
ecenet_dims dims_of(const shape *s);
size_t xsize(const ecenet_dims *d);
/* Slot (m, part) of channel f carries a rotated SH component (SPEC §8.2). */
int slot_valid(const ecenet_dims *d, int m, int part, int f);

/* ---- the generic VJP-vs-FD check ------------------------------------------------- */

#define MAX_IN 3

typedef struct op_case op_case;
typedef void (*fwd_fn)(const op_case *c, double *out);
typedef void (*vjp_fn)(const op_case *c, const double *ybar, double *const *grad);

/* Everything an op's callbacks need besides the inputs (fields named per op). */
typedef struct {
    ecenet_dims dm;
    int64_t n;
    int K, L, ctype;
    int heads, lattn, mode, env, pdim; /* attention weights, FiLM */
    double cut;
    const int32_t *i0, *i1, *i2;     /* op-specific (types, tsrc/ttgt, src/dst) */
    const int32_t *ei, *ej, *ps, *pd; /* edge_i, edge_j, nb_src, nb_dst: dims' CSR groupings */
    const double *w0, *w1;
    ecenet_linear_params lin;
    ecenet_realspace_params rs;
    ecenet_mlp_params mlp;
} opx;

struct op_case {
    const env *ev;
    const ecenet_backend *be;
    const char *op;
    char desc[200];
    const opx *x;
    /* fwd: upload out's current content as the output buffer, run, download.
     * vjp: run what the VJP needs, accumulate into grad[k] (uploaded first). */
    fwd_fn fwd;
    vjp_fn vjp;
    size_t n_out;
    int n_in;
    double *in[MAX_IN];
    size_t in_n[MAX_IN];
    const char *in_name[MAX_IN];
    const double *out_init; /* accumulating forward: prior output; NULL: overwrites */
    int ybar_ones;          /* cotangent fixed at 1 */
    int empty;              /* nothing to sum: an overwriting forward gives 0 */
    double h;
};

/* The n entries grouped by atom (ops.h ecenet_csr), built on the host and
 * uploaded: ptr (N+1), idx in increasing order within each atom. */
ecenet_csr csr_dev(arena *a, const int32_t *atom, size_t n, int64_t N);
/* x->dm with the groupings of the index arrays the case knows */
ecenet_dims dims_dev(arena *a, const opx *x);
op_case new_case(const env *ev, const char *op, const opx *x, fwd_fn f, vjp_fn v, size_t n_out);
void add_in(op_case *c, const char *name, double *x, size_t n);
/* out poisoned with NaN (or set to out_init), then c->fwd */
void eval_fwd(const op_case *c, double *out);
/* forward, accumulation and VJP-vs-FD checks of one case */
void run_case(const op_case *c);

/* ---- edge vectors ---------------------------------------------------------------- */

/* the near-0.9 directions edge_vectors uses first (after the 6 axes) */
extern const double NEAR09[6];
#define N_SPECIAL_DIRS (6 + (int)(sizeof NEAR09 / sizeof NEAR09[0]))

/* Radii kept this far from a cutoff: there the envelope goes like (c-r)^3
 * (poly) or (c-r)^2 (cosine), and the central difference's truncation error
 * relative to the derivative is ~h²/(3(c-r)²) (3e-6 at a 1e-3 margin). */
#define CUT_MARGIN 0.02

/* n vectors with lengths in [lo, hi), none within CUT_MARGIN of `avoid` (> 0). */
double *edge_vectors(size_t n, double lo, double hi, double avoid, int special);
/* r = sqrt(|d|² + 1e-30), the definition of ops.h */
double *host_r(arena *a, const double *d, size_t n);

/* ---- helpers of more than one family --------------------------------------------- */

/* sph: Y(d) on the backend (dY optional) */
void run_sph(const ecenet_backend *be, size_t n, int L, const double *d, double *Y, double *dY);
size_t dsize(const ecenet_dims *d); /* D (E, ND) */
extern const char *ACT_NAME[];      /* indexed by ECENET_ACT_* */
size_t mlp_hidden(const ecenet_mlp_params *p);
ecenet_mlp_params mlp_dev(arena *a, const ecenet_mlp_params *h);

/* ---- the op families (tests/ops/<family>.c), run by the driver ------------------- */

void fam_geometry(const env *ev);   /* geometry.c */
void fam_ace(const env *ev);        /* ace.c */
void fam_wigner(const env *ev);     /* wigner.c */
void wigner_properties(const env *ev);
void wigner_appendix_b(const env *ev);
void fam_edge_frame(const env *ev); /* edge_frame.c */
void fam_layers(const env *ev);     /* layers.c */
void fam_mp(const env *ev);         /* mp.c */
void fam_readout(const env *ev);    /* readout.c */
void fam_film(const env *ev);       /* film.c */

#endif
