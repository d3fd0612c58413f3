/*
 * libecenet — evaluate the ECENet machine-learned interatomic potential
 * (energy, forces, stress) in C, on CPUs and GPUs.
 *
 * Conventions (see doc/design.md):
 *   units      Å, eV, eV/Å, eV/Å³
 *   positions  row-major (n_atoms, 3)
 *   cell       row-major (3, 3), rows are the lattice vectors a, b, c
 *   stress     Voigt order xx yy zz yz xz xy, stress = (1/V) dE/dε (ASE sign),
 *              taken from the upper triangle of the unsymmetrised dE/dε
 *   dE/dε      row-major (3, 3), positions transformed as x -> x + x·ε
 *
 * Every function that can fail returns an ecenet_status. Functions with a
 * context record a message naming what was wrong (ecenet_ctx_error); loading
 * a model takes a caller buffer for the message. Outputs are caller-allocated,
 * every buffer is passed with its length, and a NULL output is skipped. On
 * failure no caller buffer is written.
 */
#ifndef ECENET_H
#define ECENET_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define ECENET_VERSION_MAJOR 0
#define ECENET_VERSION_MINOR 2
#define ECENET_VERSION_PATCH 0
/* Bumped whenever a struct layout or a function signature below changes. */
#define ECENET_ABI_VERSION 1

typedef enum {
    ECENET_OK = 0,
    ECENET_ERR_IO = 1,          /* a file could not be opened or read */
    ECENET_ERR_FORMAT = 2,      /* a model file is malformed or inconsistent */
    ECENET_ERR_ARGUMENT = 3,    /* a NULL pointer, a wrong buffer length, an unknown name */
    ECENET_ERR_INPUT = 4,       /* the structure is invalid (unknown element, coincident atoms, ...) */
    ECENET_ERR_NOMEM = 5,       /* an allocation failed */
    ECENET_ERR_BACKEND = 6,     /* the backend is not compiled in or failed */
    ECENET_ERR_UNSUPPORTED = 7, /* a valid request this build cannot serve */
    ECENET_ERR_NONFINITE = 8    /* the energy, a force or the stress came out NaN
                                   or infinite (atoms closer than the precision
                                   resolves, extreme parameters); nothing written */
} ecenet_status;

typedef enum { ECENET_F64 = 0, ECENET_F32 = 1 } ecenet_precision;

typedef struct ecenet_model ecenet_model;
typedef struct ecenet_ctx ecenet_ctx;

/* Library version and ABI as compiled (compare with the macros above). */
const char *ecenet_version(void);
int ecenet_abi_version(void);
const char *ecenet_status_string(ecenet_status s);

/* Atomic number of an element symbol ("C", "Na": exact case, no spaces),
 * or 0 if unknown. */
int ecenet_element_number(const char *symbol);
/* Symbol of atomic number z (1..118), or NULL. */
const char *ecenet_element_symbol(int z);

/* ---- model ------------------------------------------------------------- */

/* Load and validate a model file (safetensors, doc/file-format.md).
 * On failure *model is NULL and err (if not NULL) holds a message naming the
 * file and the tensor or key that was wrong. */
ecenet_status ecenet_model_load(const char *path, ecenet_model **model,
                                char *err, size_t err_len);
void ecenet_model_free(ecenet_model *model);

int ecenet_model_n_types(const ecenet_model *model);
/* Atomic number of type t, or -1 if t is out of range. */
int ecenet_model_type_number(const ecenet_model *model, int t);
/* Type index of atomic number z, or -1 if the model does not know it. */
int ecenet_model_type_of(const ecenet_model *model, int z);
double ecenet_model_cutoff_edge(const ecenet_model *model);
double ecenet_model_cutoff_neighbor(const ecenet_model *model);
/* The resolved configuration as a JSON object (owned by the model). */
const char *ecenet_model_config_json(const ecenet_model *model);
/* "ecenet-public" or "thglab-research". */
const char *ecenet_model_variant(const ecenet_model *model);

/* ---- compute context ---------------------------------------------------- */

/* Backends compiled into this build, comma separated ("ref,omp,cuda"). */
const char *ecenet_backends(void);

/* backend: "ref", "omp", "cuda", or NULL for the environment variable
 * ECENET_BACKEND (default "ref"). The model must outlive the context.
 * Threads: a context is used by one thread at a time; cuda contexts share
 * the process's device scratch, so at most one cuda computation may run at
 * a time in a process. */
ecenet_status ecenet_ctx_create(const ecenet_model *model, const char *backend,
                                ecenet_precision precision, ecenet_ctx **ctx,
                                char *err, size_t err_len);
void ecenet_ctx_free(ecenet_ctx *ctx);
/* Message of the last call on this context that failed ("" when the last
 * call succeeded: each ecenet_compute and ecenet_ctx_set_option clears it). */
const char *ecenet_ctx_error(const ecenet_ctx *ctx);
const char *ecenet_ctx_backend(const ecenet_ctx *ctx);

/* Per-context options (ecenet_ctx_set_option). Each is applied at the start
 * of every ecenet_compute on that context.
 *  ECENET_OPT_TF32        1: the cuda backend's fp32 equivariant-linear GEMMs
 *                         run on TF32 tensor cores (about 3x faster GEMMs,
 *                         ~1e-3 relative error in energies); 0: strict fp32.
 *                         Default: 1 if the environment variable ECENET_TF32=1
 *                         when the backend was first used, else 0. Only cuda
 *                         f32 accepts 1 (ECENET_ERR_UNSUPPORTED otherwise);
 *                         0 is what every other backend does and is accepted
 *                         everywhere; contexts do not affect each other.
 *  ECENET_OPT_LOW_MEMORY  1: keep no per-layer activations for the backward;
 *                         the layers of each stage are recomputed in edge
 *                         chunks during the backward. Same results (to the
 *                         last bits on ref/omp), a fraction of the memory, and
 *                         about one more forward pass of the layers in time.
 *                         0 (default): keep them. Every backend.
 *  ECENET_OPT_CHUNK_EDGES edges per chunk of the low-memory mode (0 = automatic:
 *                         chunks of about 256 MiB of layer activations).
 *  ECENET_OPT_DEVICE_NLIST 1 (default): on a backend with a device neighbour
 *                         search (cuda), the edge and neighbour lists are found
 *                         on the device; only positions, cell and types go up.
 *                         The lists are the host search's, entry for entry and
 *                         bit for bit, so results do not change. 0: the host
 *                         search and an upload of the lists. Computes that ask
 *                         for atom_energies use the host search (the lists are
 *                         needed on the host). Other backends accept 0 and 1
 *                         and always search on the host. */
typedef enum {
    ECENET_OPT_TF32 = 1,
    ECENET_OPT_LOW_MEMORY = 2,
    ECENET_OPT_CHUNK_EDGES = 3,
    ECENET_OPT_DEVICE_NLIST = 4
} ecenet_option;

ecenet_status ecenet_ctx_set_option(ecenet_ctx *ctx, ecenet_option option, long value);

/* n_atoms >= 1 (0 atoms: ECENET_ERR_INPUT). Positions may lie anywhere:
 * the step works on them translated by their centroid and, along periodic
 * axes, moved by whole lattice vectors next to the origin, which changes
 * no result, so fp32 keeps its precision for unwrapped coordinates or a
 * box far from the origin. */
typedef struct {
    size_t n_atoms;
    const double *positions;  /* 3*n_atoms, Å */
    const int *numbers;       /* n_atoms atomic numbers */
    const double *cell;       /* 9, rows = lattice vectors; NULL if not periodic */
    int pbc[3];               /* periodic flags (nonzero: periodic); ignored
                                 when cell is NULL */
} ecenet_system;

typedef struct {
    double *energy;             /* 1 value, eV */
    double *forces;             /* 3*n_atoms, eV/Å */
    size_t forces_len;
    double *stress;             /* 6 Voigt values, eV/Å³; needs a cell (its
                                   volume, whatever pbc says) */
    size_t stress_len;
    double *dE_dstrain;         /* 9 values, eV, unsymmetrised */
    size_t dE_dstrain_len;
    double *atom_energies;      /* n_atoms; atomic energy + half of each
                                   directed edge energy at both ends */
    size_t atom_energies_len;
} ecenet_outputs;

/* Energy and the requested outputs for one structure. Buffer lengths must
 * match exactly (3N forces, 6 stress, 9 dE/dε, N atom energies). The context
 * keeps its neighbour-list and workspace memory for the next call (an MD loop
 * allocates nothing once the sizes settle); ecenet_ctx_free releases it. */
ecenet_status ecenet_compute(ecenet_ctx *ctx, const ecenet_system *system,
                             const ecenet_outputs *outputs);

#ifdef __cplusplus
}
#endif
#endif
