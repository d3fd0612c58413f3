/* The shared helpers of check_physics (declared in harness.h): structures,
 * their evaluation, and the model configurations the topics share. */
#include "harness.h"

const int VOIGT[6] = {0, 4, 8, 5, 2, 1};
const int Z_HCO[3] = {1, 6, 8};

double dmax(double a, double b) { return a > b ? a : b; }

double det3(const double *a)
{
    return a[0] * (a[4] * a[8] - a[5] * a[7]) - a[1] * (a[3] * a[8] - a[5] * a[6]) +
           a[2] * (a[3] * a[7] - a[4] * a[6]);
}

/* ---- structures ------------------------------------------------------------ */

/* Energy (returned), forces F (3n or NULL), dE/dε (9 or NULL) and Voigt stress
 * (6 or NULL; periodic only) of s with positions pos and cell (NULL = s's). */
double calc(ecenet_ctx *ctx, const structure *s, const double *pos, const double *cell,
            double *F, double *dE, double *stress)
{
    double E = NAN;
    ecenet_system sys = {s->n, pos ? pos : s->pos, s->z,
                         s->periodic ? (cell ? cell : s->cell) : NULL,
                         {s->pbc[0], s->pbc[1], s->pbc[2]}};
    ecenet_outputs out = {&E, F, 3 * s->n, stress, 6, dE, 9, NULL, 0};
    ecenet_status st = ecenet_compute(ctx, &sys, &out);
    ck_assert_msg(st == ECENET_OK, "ecenet_compute: %s (%s)", ecenet_status_string(st),
                  ecenet_ctx_error(ctx));
    return E;
}

/* n atoms in a cube of side `box`, pairwise ≥ dmin apart, elements cycled. */
void make_cluster(structure *s, size_t n, double box, double dmin, const int *elems, int ne)
{
    memset(s, 0, sizeof *s);
    s->n = n;
    tu_random_positions(s->pos, n, box, NULL, dmin);
    for (size_t i = 0; i < n; i++)
        s->z[i] = elems[i % (size_t)ne];
}

/* n atoms at random fractional positions in a (possibly triclinic) cell,
 * ≥ dmin apart through images. */
void make_crystal(structure *s, size_t n, const double *cell, double dmin, const int *elems,
                  int ne)
{
    memset(s, 0, sizeof *s);
    s->n = n;
    s->periodic = 1;
    s->pbc[0] = s->pbc[1] = s->pbc[2] = 1;
    memcpy(s->cell, cell, sizeof s->cell);
    tu_random_positions(s->pos, n, 0.0, cell, dmin);
    for (size_t i = 0; i < n; i++)
        s->z[i] = elems[i % (size_t)ne];
}

void load_golden_structure(const char *name, structure *s)
{
    memset(s, 0, sizeof *s);
    s->n = tu_golden_structure(name, MAXN, s->pos, s->z, s->cell, &s->periodic);
    s->pbc[0] = s->pbc[1] = s->pbc[2] = s->periodic;
}

/* A random cluster and triclinic crystal (14 atoms each); most topics use them. */
void rot_structures(structure *cl, structure *cr, uint64_t seed)
{
    /* triclinic cell, 7–9 Å */
    static const double cell[9] = {8.2, 0.0, 0.0, 1.3, 7.6, 0.0, -0.9, 1.1, 8.7};
    tu_rng_seed(seed);
    make_cluster(cl, 14, 5.0, 1.0, Z_HCO, 3);
    make_crystal(cr, 14, cell, 1.0, Z_HCO, 3);
}

/* A tiny triclinic cell (2 atoms, cell 3.1-3.6 Å < r_cut: several images of
 * every pair and self-image edges) and a slab periodic in a and b only. */
void extra_structures(structure *tiny, structure *slab, uint64_t seed)
{
    static const double tcell[9] = {3.1, 0.0, 0.0, 0.9, 3.3, 0.0, -0.4, 0.7, 3.6};
    static const double scell[9] = {7.8, 0.0, 0.0, 1.7, 8.3, 0.0, 0.5, -0.3, 6.0};
    tu_rng_seed(seed);
    make_crystal(tiny, 2, tcell, 1.2, Z_HCO + 1, 2);   /* C and O */
    make_crystal(slab, 10, scell, 1.0, Z_HCO, 3);
    slab->pbc[2] = 0;
}

/* ---- models ---------------------------------------------------------------- */

/* Exact-case configurations: identity activation, RealSpace op on. */
ecn_config exact_cfg(int k)
{
    ecn_config c = tu_small_cfg(3);
    c.activation = ECENET_ACT_IDENTITY;
    switch (k) {
    case 0: /* defaults: L = M = 2, n_mp = 1, cosine, n_max_d None */
        break;
    case 1: /* m_max < l_max, MP (n_mp = 2), every edge-type option, V_dist, n_max_d, poly */
        c.l_max = 3;
        c.m_max = 1;
        c.n_grid = 5;
        c.n_mp = 2;
        c.edge_type_linear = c.edge_type_nonlin = c.edge_type_output = 1;
        c.n_dist_embed = 3;
        c.n_max_d = 4;
        c.cutoff_type = ECENET_CUTOFF_POLY;
        break;
    case 2: /* n_mp = 3, n_max_d set, r_cut_neighbor > r_cut_edge, C = 3 */
        c.n_mp = 3;
        c.n_max_d = 3;
        c.embed_dim = 3;
        c.r_cut_neighbor = 4.3;
        c.n_hidden = 2;
        c.hidden[0] = 8;
        c.hidden[1] = 4;
        break;
    default: /* L = 3, M = 2, n_mp = 2, two layers per stage, poly, nonlin types, V_dist */
        c.l_max = 3;
        c.m_max = 2;
        c.n_grid = 9;
        c.n_mp = 2;
        c.n_layers = 2;
        c.edge_type_nonlin = 1;
        c.n_dist_embed = 2;
        c.cutoff_type = ECENET_CUTOFF_POLY;
        break;
    }
    return c;
}
