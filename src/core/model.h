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
    /* research version (SPEC §17); public models: variant = ECN_VARIANT_PUBLIC,
     * mp_type = ECN_MP_EDGE and the rest 0 */
    int variant;                  /* ECN_VARIANT_* */
    int bottleneck_dim;           /* 0 = plain layers */
    int mp_type;                  /* ECN_MP_* */
    int mp_dim, mp_n_heads, mp_msg_envelope, mp_l_attention;
    int element_film, film_embed_dim, film_n_rbf, film_per_m, film_shift;
    int film_n_hidden;
    int film_hidden[ECN_MAX_MLP];
    /* derived */
    int S, Q, B, F;               /* (L+1)², M+1, 2C, B(L+1) */
    int n_scores;                 /* research MP: mp_n_heads · (l_attention ? L+1 : 1) */
} ecn_config;

enum { ECN_VARIANT_PUBLIC = 0, ECN_VARIANT_RESEARCH = 1 };
/* ECN_MP_EDGE: public W_msg layer (§13); SUM / SOFTMAX: research attention layer (§17.3) */
enum { ECN_MP_EDGE = 0, ECN_MP_SUM = 1, ECN_MP_SOFTMAX = 2 };

/* Research attention message-passing layer (SPEC §17.3). msg_up's F + K
 * outputs are split at load time: the F message rows become `up` (a
 * contiguous (Q, F, mp_dim) copy), the K score rows of the m = 0 slice
 * become the one-layer MLP `score` (K, mp_dim) + bias, which reads the m = 0
 * cos slot. */
typedef struct {
    ecenet_linear_params down;        /* msg_down: F -> mp_dim */
    ecenet_realspace_params nonlin;   /* msg_nonlin at width mp_dim */
    ecenet_linear_params up;          /* message rows of msg_up: mp_dim -> F */
    ecenet_mlp_params score;          /* score rows of msg_up (m = 0): mp_dim -> K, act unused */
    ecenet_linear_params rdown;       /* receiver.linear_down: F -> mp_dim */
    ecenet_realspace_params rnonlin;  /* receiver.nonlin at width mp_dim */
    ecenet_linear_params rup;         /* receiver.linear_up: mp_dim -> F */
} ecn_attn_mp;

/* Element FiLM (SPEC §17.4): γ = 1 + MLP([a[t_i] ‖ b[t_j] ‖ f(r; r_cut_edge, n_rbf)]). */
typedef struct {
    const double *a, *b;              /* (T, film_embed_dim) */
    ecenet_mlp_params mlp;            /* dims [2P + n_rbf, hidden..., F], act SiLU */
} ecn_film;

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
    ecenet_linear_params *lin;    /* n_mp*n_layers, index g*n_layers + k; bottleneck: linear_down */
    ecenet_linear_params *lin_up; /* bottleneck layers: linear_up (r -> F), else NULL */
    ecenet_realspace_params *rs;  /* n_mp*n_layers (unused if !use_nonlinearity); width r if bottleneck */
    ecn_attn_mp *amp;             /* research: n_mp-1 attention MP layers, else NULL */
    ecn_film film;                /* research with element_film */
    double *derived;              /* arrays derived at load time (owned) */
    const double **W_msg;         /* n_mp-1 entries, each (T, T, n_dist_basis, B) */
    ecenet_mlp_params mlp;        /* readout */
    const double *atomic_energy;  /* (T) */
};

/* Validate cfg and fill in the derived sizes; message on failure. */
ecenet_status ecn_config_finish(ecn_config *cfg, char *err, size_t err_len);

#endif
