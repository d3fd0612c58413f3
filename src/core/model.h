/* Model: resolved configuration and parameters, as loaded from a model file.
 * Parameters stay fp64 here; a backend converts them when a context is made. */
#ifndef ECN_MODEL_H
#define ECN_MODEL_H

#include <stddef.h>
#include <stdint.h>
#include "ecenet.h"
#include "ecenet/ops.h"
#include "safetensors.h"

#define ECN_MAX_MLP 8          /* readout layers (hidden + last) */

typedef struct {
    int n_types;        /* T */
    int l_max;          /* L */
    int m_max;          /* M */
    int n_max;          /* R: ACE radial functions */
    int embed_dim;      /* C */
    int n_layers;       /* layers per stage */
    int n_mp;           /* stages; n_mp - 1 message-passing layers */
    int n_dist_basis;   /* MP distance weight basis */
    int n_max_d;        /* 0 = None: readout emits one number times fc(r) */
    int n_grid;         /* G */
    int n_dist_embed;   /* 0 = no V_dist */
    int cutoff_type;    /* ECENET_CUTOFF_* */
    int activation;     /* ECENET_ACT_* (RealSpace and readout MLP) */
    int use_nonlinearity;
    int edge_type_nonlin, edge_type_linear, edge_type_output;
    double r_cut_edge, r_cut_neighbor;
    int n_hidden;                 /* len(output_hidden_dims) */
    int hidden[ECN_MAX_MLP];      /* output_hidden_dims */
    /* derived */
    int S, Q, B, F;               /* (L+1)², M+1, 2C, B(L+1) */
} ecn_config;

struct ecenet_model {
    ecn_config cfg;
    ecn_safetensors *file;        /* owns the tensor data */
    char *path;
    char *config_json;            /* resolved config, printed by `ecenet info` */
    int *type_z;                  /* (T) atomic number of each type */
    double *e_ref;                /* (T) energy_reference per type, eV */
    double unit;                  /* energy unit factor to eV */
    double energy_mean;           /* model units, added once per structure */

    const double *W;              /* (T, T, R, C) embedding */
    const double *V_dist;         /* (n_dist_embed, F) or NULL */
    ecenet_linear_params *lin;    /* n_mp*n_layers, index g*n_layers + k */
    ecenet_realspace_params *rs;  /* n_mp*n_layers (unused if !use_nonlinearity) */
    const double **W_msg;         /* n_mp-1 entries, each (T, T, n_dist_basis, B) */
    ecenet_mlp_params mlp;        /* readout */
    const double *atomic_energy;  /* (T) */
};

/* Validate cfg and fill in the derived sizes; message on failure. */
ecenet_status ecn_config_finish(ecn_config *cfg, char *err, size_t err_len);

#endif
