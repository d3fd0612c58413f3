/* Translation, permutation and periodic-image invariance (origin shifts,
 * wrapped and unwrapped images, a skewed basis, supercells) of random systems
 * and the golden crystals. */
#include "harness.h"

static void inv3(const double *a, double *r)
{
    double d = det3(a);
    r[0] = (a[4] * a[8] - a[5] * a[7]) / d;
    r[1] = (a[2] * a[7] - a[1] * a[8]) / d;
    r[2] = (a[1] * a[5] - a[2] * a[4]) / d;
    r[3] = (a[5] * a[6] - a[3] * a[8]) / d;
    r[4] = (a[0] * a[8] - a[2] * a[6]) / d;
    r[5] = (a[2] * a[3] - a[0] * a[5]) / d;
    r[6] = (a[3] * a[7] - a[4] * a[6]) / d;
    r[7] = (a[1] * a[6] - a[0] * a[7]) / d;
    r[8] = (a[0] * a[4] - a[1] * a[3]) / d;
}

typedef struct {
    double e, f, g; /* worst relative differences: |ΔE|/|E|, max|ΔF|/max|F|, max|ΔG|/max|G| */
} inv_err;

static void wrap_positions(const structure *s, const double *pos, double *out)
{
    double inv[9];
    inv3(s->cell, inv);
    for (size_t i = 0; i < s->n; i++) {
        double f[3];
        for (int a = 0; a < 3; a++) {
            f[a] = pos[3 * i] * inv[a] + pos[3 * i + 1] * inv[3 + a] + pos[3 * i + 2] * inv[6 + a];
            if (s->pbc[a])
                f[a] -= floor(f[a]);
        }
        for (int a = 0; a < 3; a++)
            out[3 * i + a] = f[0] * s->cell[a] + f[1] * s->cell[3 + a] + f[2] * s->cell[6 + a];
    }
}

/* The worst differences of one kind within their bounds: energies relative
 * to |E|, forces to max|F|, dE/dε to max|dE/dε| */
static void expect_within(const inv_err *w, const char *what, double te, double tf, double tg)
{
    ck_assert_msg(w->e <= te, "%s: energy %.3e", what, w->e);
    ck_assert_msg(w->f <= tf, "%s: forces %.3e", what, w->f);
    ck_assert_msg(w->g <= tg, "%s: dE/dε %.3e", what, w->g);
}

/* Compare s2 (atom i of s2 is atom perm[i] of s, perm NULL = identity) with
 * the reference values E0, F0, G0 of s. */
static void compare_to(ecenet_ctx *ctx, const structure *s2, const int *perm, double E0,
                       const double *F0, const double *G0, inv_err *w)
{
    double *F = malloc(3 * MAXN * sizeof *F), *Fp = malloc(3 * MAXN * sizeof *Fp), G[9];
    double E = calc(ctx, s2, NULL, NULL, F, s2->periodic ? G : NULL, NULL);
    for (size_t i = 0; i < s2->n; i++)
        for (int a = 0; a < 3; a++)
            Fp[3 * i + a] = F0[3 * (size_t)(perm ? perm[i] : (int)i) + a];
    w->e = dmax(w->e, fabs(E - E0) / fabs(E0));
    w->f = dmax(w->f, tu_max_abs_diff(F, Fp, 3 * s2->n) / tu_max_abs(Fp, 3 * s2->n));
    if (s2->periodic)
        w->g = dmax(w->g, tu_max_abs_diff(G, G0, 9) / tu_max_abs(G0, 9));
    free(F);
    free(Fp);
}

/* All invariances of one system; returns the worst of each kind. Periodic
 * systems also get 2x1x1 and 1x2x1 supercells (the neighbour list has every
 * image, so the energy is extensive even for cells smaller than the cutoff). */
static void invariances(ecenet_ctx *ctx, const structure *s, const char *label, inv_err *trans,
                        inv_err *perm_err, inv_err *image)
{
    structure *s2 = malloc(sizeof *s2);
    double *F0 = malloc(3 * MAXN * sizeof *F0), G0[9];
    int perm[MAXN];
    const size_t n = s->n;
    double E0 = calc(ctx, s, NULL, NULL, F0, s->periodic ? G0 : NULL, NULL);
    inv_err t = {0, 0, 0}, p = {0, 0, 0}, im = {0, 0, 0};

    /* translation (origin shift; positions not wrapped) */
    for (int k = 0; k < 2; k++) {
        double sh[3];
        *s2 = *s;
        for (int a = 0; a < 3; a++)
            sh[a] = 10.0 * (2.0 * tu_uniform() - 1.0);
        for (size_t i = 0; i < n; i++)
            for (int a = 0; a < 3; a++)
                s2->pos[3 * i + a] += sh[a];
        compare_to(ctx, s2, NULL, E0, F0, G0, &t);
        if (s->periodic) {
            /* the same origin shift, then every atom wrapped back into the cell */
            wrap_positions(s, s2->pos, s2->pos);
            compare_to(ctx, s2, NULL, E0, F0, G0, &im);
        }
    }
    /* permutation (Fisher–Yates) */
    for (size_t i = 0; i < n; i++)
        perm[i] = (int)i;
    for (size_t i = n - 1; i > 0; i--) {
        size_t j = (size_t)(tu_uniform() * (double)(i + 1));
        int x = perm[i];
        perm[i] = perm[j];
        perm[j] = x;
    }
    *s2 = *s;
    for (size_t i = 0; i < n; i++) {
        memcpy(&s2->pos[3 * i], &s->pos[3 * (size_t)perm[i]], 3 * sizeof(double));
        s2->z[i] = s->z[perm[i]];
    }
    compare_to(ctx, s2, perm, E0, F0, G0, &p);
    if (s->periodic) {
        /* every atom moved by its own lattice vector n·cell, n ∈ [-2, 2]³ (unwrapped) */
        *s2 = *s;
        for (size_t i = 0; i < n; i++) {
            int nn[3];
            for (int a = 0; a < 3; a++)
                nn[a] = s->pbc[a] ? (int)(tu_uniform() * 5.0) - 2 : 0;
            for (int a = 0; a < 3; a++)
                s2->pos[3 * i + a] += nn[0] * s->cell[a] + nn[1] * s->cell[3 + a] +
                                      nn[2] * s->cell[6 + a];
        }
        compare_to(ctx, s2, NULL, E0, F0, G0, &im);
        /* ... and wrapped back */
        wrap_positions(s, s2->pos, s2->pos);
        compare_to(ctx, s2, NULL, E0, F0, G0, &im);
        /* the same lattice written in a skewed basis (b += 20a, then c -= 15b,
         * periodic rows only), which the host search reduces (graph.c) */
        *s2 = *s;
        for (int a = 0; a < 3; a++) {
            if (s->pbc[0] && s->pbc[1])
                s2->cell[3 + a] += 20.0 * s2->cell[a];
            if (s->pbc[1] && s->pbc[2])
                s2->cell[6 + a] -= 15.0 * s2->cell[3 + a];
        }
        compare_to(ctx, s2, NULL, E0, F0, G0, &im);
        /* supercells doubled along a, then along b: E, dE/dε double, forces repeat */
        for (int ax = 0; ax < 2 && 2 * n <= MAXN; ax++) {
            double G2[9];
            *s2 = *s;
            s2->n = 2 * n;
            for (size_t i = 0; i < n; i++) {
                perm[i] = perm[n + i] = (int)i;
                s2->z[n + i] = s->z[i];
                for (int a = 0; a < 3; a++)
                    s2->pos[3 * (n + i) + a] = s->pos[3 * i + a] + s->cell[3 * ax + a];
            }
            for (int a = 0; a < 3; a++)
                s2->cell[3 * ax + a] *= 2.0;
            for (int k = 0; k < 9; k++)
                G2[k] = 2.0 * G0[k];
            compare_to(ctx, s2, perm, 2.0 * E0, F0, G2, &im);
        }
    }
    printf("invariance %-16s (E = %.6g): translation dE %.2e dF %.2e dG %.2e | permutation dE "
           "%.2e dF %.2e dG %.2e | images dE %.2e dF %.2e dG %.2e\n",
           label, E0, t.e, t.f, t.g, p.e, p.f, p.g, im.e, im.f, im.g);
    trans->e = dmax(trans->e, t.e); trans->f = dmax(trans->f, t.f); trans->g = dmax(trans->g, t.g);
    perm_err->e = dmax(perm_err->e, p.e); perm_err->f = dmax(perm_err->f, p.f);
    perm_err->g = dmax(perm_err->g, p.g);
    image->e = dmax(image->e, im.e); image->f = dmax(image->f, im.f); image->g = dmax(image->g, im.g);
    free(s2);
    free(F0);
}

START_TEST(test_invariances)
{
    structure *cl = malloc(sizeof *cl), *cr = malloc(sizeof *cr), *gs = malloc(sizeof *gs);
    inv_err t = {0, 0, 0}, p = {0, 0, 0}, im = {0, 0, 0};
    rot_structures(cl, cr, 303);
    {
        ecn_config c = exact_cfg(1);
        c.activation = ECENET_ACT_SILU;
        ecenet_model *m = tu_random_model(&c, Z_HCO, 3001, 1.0);
        ecenet_ctx *ctx = tu_ctx(m, "ref");
        invariances(ctx, cl, "random cluster", &t, &p, &im);
        invariances(ctx, cr, "random crystal", &t, &p, &im);
        extra_structures(cl, cr, 304);
        invariances(ctx, cl, "tiny cell", &t, &p, &im);
        invariances(ctx, cr, "slab", &t, &p, &im);
        ecenet_ctx_free(ctx);
        ecenet_model_free(m);
    }
    for (int k = 0; k < 2; k++) {
        const char *name = k ? "options" : "diamond";
        ecenet_model *m = tu_golden_model(name);
        ecenet_ctx *ctx = tu_ctx(m, "ref");
        load_golden_structure(name, gs);
        ck_assert(gs->periodic);
        invariances(ctx, gs, name, &t, &p, &im);
        ecenet_ctx_free(ctx);
        ecenet_model_free(m);
    }
    printf("invariance worst: translation %.2e %.2e %.2e, permutation %.2e %.2e %.2e, images "
           "%.2e %.2e %.2e\n", t.e, t.f, t.g, p.e, p.f, p.g, im.e, im.f, im.g);
    expect_within(&t, "translation", 1e-12, 1e-11, 1e-11); /* measured 8.4e-15, 1.4e-14, 1.2e-15 */
    expect_within(&p, "permutation", 1e-12, 1e-11, 1e-11); /* measured 2.1e-15, 6.5e-15, 7.7e-15 */
    /* measured 1.7e-13, 9.4e-13, 5.3e-14 (3.2e-13, 8.5e-13, 3.2e-14 before the
     * positions were recentred; 2.5e-14, 6.9e-14, 4.8e-15 before the skewed
     * basis: its shifts n·cell round at the scale of its 20·15× longer
     * vectors) */
    expect_within(&im, "periodic images", 1e-12, 1e-11, 1e-11);
    free(cl);
    free(cr);
    free(gs);
}
END_TEST

/* fp32 wherever the structure sits: the step recentres the positions
 * (ecn_graph_recentre), so an MD code's unwrapped coordinates (atoms 1000
 * cells out of the box), a box far from the origin and a molecule far away
 * get the results of the same structure at the origin. Before, fp32 omp
 * lost 9.2e-2 eV (6e-5 of E) and 1.7e-2 eV/Å (7.6e-3 of max|F|) on the
 * unwrapped diamond; ethanol 1e4 Å away 6.2e-2 eV and 6.8e-2 eV/Å. */
START_TEST(test_far_coordinates_fp32)
{
    structure *gs = malloc(sizeof *gs);
    double *pos = malloc(3 * MAXN * sizeof *pos), *F0 = malloc(3 * MAXN * sizeof *F0);
    inv_err w = {0, 0, 0};
    int cases = 0;
    for (int k = 0; k < 2; k++) {
        const char *name = k ? "ethanol" : "diamond";
        ecenet_model *m = tu_golden_model(name);
        ecenet_ctx *ctx = NULL;
        char err[256];
        if (ecenet_ctx_create(m, "omp", ECENET_F32, &ctx, err, sizeof err) != ECENET_OK) {
            printf("far coordinates, fp32: skipped (%s)\n", err); /* a build without omp */
            ecenet_model_free(m);
            break;
        }
        load_golden_structure(name, gs);
        ck_assert(gs->periodic == !k);
        double G0[9];
        const double E0 = calc(ctx, gs, NULL, NULL, F0, gs->periodic ? G0 : NULL, NULL);
        for (int c = 0; c < (gs->periodic ? 2 : 1); c++) {
            for (size_t i = 0; i < gs->n; i++)
                for (int a = 0; a < 3; a++) {
                    double x = gs->pos[3 * i + a];
                    if (gs->periodic && c == 0) /* unwrapped: +-1000 of one lattice vector */
                        x += (i % 2 ? 1000.0 : -1000.0) * gs->cell[3 * (i % 3) + a];
                    else /* the whole structure 1e4 Å away */
                        x += 1e4 * (a + 1);
                    pos[3 * i + a] = x;
                }
            structure s2 = *gs;
            memcpy(s2.pos, pos, 3 * gs->n * sizeof *pos);
            compare_to(ctx, &s2, NULL, E0, F0, G0, &w);
            cases++;
        }
        ecenet_ctx_free(ctx);
        ecenet_model_free(m);
    }
    printf("far coordinates, fp32 omp (%d cases): energy %.2e, forces %.2e, dE/dε %.2e\n", cases,
           w.e, w.f, w.g);
    /* measured 0, 0, 0: the recentred positions come out the same bits here;
     * the bounds leave room for a centroid that rounds differently */
    expect_within(&w, "far coordinates, fp32", 1e-6, 1e-5, 1e-5);
    free(gs);
    free(pos);
    free(F0);
}
END_TEST

void invariance_tests(TCase *tc)
{
    tcase_add_test(tc, test_invariances);
    tcase_add_test(tc, test_far_coordinates_fp32);
}
