/* Bad input: statuses, messages, untouched output buffers; the context
 * still works afterwards; bad backends and precisions at creation. */
#define _POSIX_C_SOURCE 200809L /* setenv, strdup: the backend named by ECENET_BACKEND */
#include "harness.h"

#define SENTINEL 12345.678
#define NB 4 /* atoms in the bad-input structure */

typedef struct {
    double E, F[3 * NB + 2], S[8], G[10], AE[NB + 2];
} out_bufs;

static void fill_sentinel(out_bufs *b)
{
    double *p = (double *)b;
    for (size_t k = 0; k < sizeof *b / sizeof(double); k++)
        p[k] = SENTINEL;
}

static int untouched(const out_bufs *b)
{
    const double *p = (const double *)b;
    for (size_t k = 0; k < sizeof *b / sizeof(double); k++)
        if (p[k] != SENTINEL)
            return 0;
    return 1;
}

/* Expect ecenet_compute to fail with status st (or st2) and a message that
 * contains every one of the given pieces, leaving the buffers untouched. */
static void expect_fail(ecenet_ctx *ctx, const ecenet_system *sys, const ecenet_outputs *o,
                        const out_bufs *b, ecenet_status st, ecenet_status st2, const char *what,
                        const char *const *pieces)
{
    ecenet_status got = ecenet_compute(ctx, sys, o);
    const char *msg = ecenet_ctx_error(ctx);
    printf("bad input %-26s -> %s: \"%s\"\n", what, ecenet_status_string(got), msg);
    ck_assert_msg(got == st || got == st2, "%s: status %d (%s), expected %d", what, (int)got,
                  ecenet_status_string(got), (int)st);
    for (int k = 0; pieces && pieces[k]; k++)
        ck_assert_msg(strstr(msg, pieces[k]) != NULL, "%s: message \"%s\" lacks \"%s\"", what, msg,
                      pieces[k]);
    ck_assert_msg(untouched(b), "%s: an output buffer was written on failure", what);
}

START_TEST(test_bad_input)
{
    ecn_config c = tu_small_cfg(3);
    ecenet_model *m = tu_random_model(&c, Z_HCO, 8001, 1.0);
    ecenet_ctx *ctx = tu_ctx(m, "ref"), *ctx2 = NULL;
    char err[1024];
    double pos[3 * NB] = {0.0, 0.0, 0.0, 1.2, 0.1, 0.0, -0.3, 1.4, 0.2, 0.5, -0.6, 1.3};
    int z[NB] = {6, 1, 8, 1};
    const double cell[9] = {9.0, 0.0, 0.0, 0.0, 9.0, 0.0, 0.0, 0.0, 9.0};
    out_bufs b;
    ecenet_system sys = {NB, pos, z, NULL, {0, 0, 0}};
    ecenet_outputs o = {&b.E, b.F, 3 * NB, NULL, 6, b.G, 9, b.AE, NB};
    ecenet_status st;

    /* the valid structure works */
    fill_sentinel(&b);
    ck_assert_msg(ecenet_compute(ctx, &sys, &o) == ECENET_OK, "%s", ecenet_ctx_error(ctx));
    ck_assert(isfinite(b.E) && b.E != SENTINEL);
    ck_assert_str_eq(ecenet_ctx_error(ctx), "");

    fill_sentinel(&b);
    {
        static const char *const p[] = {"0 atoms", NULL};
        sys.n_atoms = 0;
        o.forces_len = 0;
        o.atom_energies_len = 0;
        expect_fail(ctx, &sys, &o, &b, ECENET_ERR_INPUT, ECENET_ERR_INPUT, "empty structure", p);
        sys.n_atoms = NB;
        o.forces_len = 3 * NB;
        o.atom_energies_len = NB;
    }
    {
        static const char *const p[] = {"atom 2", "U", "92", NULL};
        z[2] = 92; /* uranium: not in the model */
        expect_fail(ctx, &sys, &o, &b, ECENET_ERR_INPUT, ECENET_ERR_INPUT, "unknown element", p);
        z[2] = 8;
    }
    {
        static const char *const p[] = {"atoms 1 and 3", "coincide", NULL};
        double keep[3];
        memcpy(keep, &pos[9], sizeof keep);
        memcpy(&pos[9], &pos[3], sizeof keep);
        expect_fail(ctx, &sys, &o, &b, ECENET_ERR_INPUT, ECENET_ERR_INPUT, "coincident atoms", p);
        /* through a periodic image: atom 3 = atom 1 + a (+ 1e-12 Å) */
        pos[9] = pos[3] + 9.0 + 1e-12;
        sys.cell = cell;
        sys.pbc[0] = sys.pbc[1] = sys.pbc[2] = 1;
        expect_fail(ctx, &sys, &o, &b, ECENET_ERR_INPUT, ECENET_ERR_INPUT,
                    "coincident through image", p);
        sys.cell = NULL;
        memcpy(&pos[9], keep, sizeof keep);
    }
    {
        static const char *const p[] = {"atom 2", "position", NULL};
        pos[7] = NAN;
        expect_fail(ctx, &sys, &o, &b, ECENET_ERR_INPUT, ECENET_ERR_INPUT, "NaN position", p);
        pos[7] = INFINITY;
        expect_fail(ctx, &sys, &o, &b, ECENET_ERR_INPUT, ECENET_ERR_INPUT, "infinite position", p);
        pos[7] = 1.4;
    }
    {
        static const char *const pf[] = {"forces", "11", "12", NULL};
        static const char *const ps[] = {"stress", "5", NULL};
        static const char *const pg[] = {"dE_dstrain", "8", NULL};
        static const char *const pa[] = {"atom_energies", "5", NULL};
        o.forces_len = 3 * NB - 1;
        expect_fail(ctx, &sys, &o, &b, ECENET_ERR_ARGUMENT, ECENET_ERR_ARGUMENT, "forces length", pf);
        o.forces_len = 3 * NB;
        sys.cell = cell;
        o.stress = b.S;
        o.stress_len = 5;
        expect_fail(ctx, &sys, &o, &b, ECENET_ERR_ARGUMENT, ECENET_ERR_ARGUMENT, "stress length", ps);
        o.stress_len = 6;
        o.dE_dstrain_len = 8;
        expect_fail(ctx, &sys, &o, &b, ECENET_ERR_ARGUMENT, ECENET_ERR_ARGUMENT, "dE_dstrain length",
                    pg);
        o.dE_dstrain_len = 9;
        o.atom_energies_len = NB + 1;
        expect_fail(ctx, &sys, &o, &b, ECENET_ERR_ARGUMENT, ECENET_ERR_ARGUMENT,
                    "atom_energies length", pa);
        o.atom_energies_len = NB;
    }
    {
        /* stress needs a cell: an invalid structure or argument, either is defensible */
        static const char *const p[] = {"stress", "cell", NULL};
        sys.cell = NULL;
        expect_fail(ctx, &sys, &o, &b, ECENET_ERR_INPUT, ECENET_ERR_ARGUMENT, "stress without cell",
                    p);
        o.stress = NULL;
    }
    {
        static const char *const p[] = {"NULL", NULL};
        expect_fail(ctx, NULL, &o, &b, ECENET_ERR_ARGUMENT, ECENET_ERR_ARGUMENT, "NULL system", p);
        expect_fail(ctx, &sys, NULL, &b, ECENET_ERR_ARGUMENT, ECENET_ERR_ARGUMENT, "NULL outputs", p);
        static const char *const pz[] = {"numbers", "NULL", NULL};
        static const char *const pp[] = {"positions", "NULL", NULL};
        sys.numbers = NULL;
        expect_fail(ctx, &sys, &o, &b, ECENET_ERR_ARGUMENT, ECENET_ERR_ARGUMENT, "NULL numbers", pz);
        sys.numbers = z;
        sys.positions = NULL;
        expect_fail(ctx, &sys, &o, &b, ECENET_ERR_ARGUMENT, ECENET_ERR_ARGUMENT, "NULL positions",
                    pp);
        sys.positions = pos;
    }
    {
        /* a count whose buffer sizes would wrap is refused before anything is
         * allocated (it was "out of memory", after a malloc of a wrapped size) */
        static const char *const p[] = {"too many atoms", NULL};
        sys.n_atoms = SIZE_MAX / 3 + 1;
        expect_fail(ctx, &sys, &o, &b, ECENET_ERR_UNSUPPORTED, ECENET_ERR_UNSUPPORTED,
                    "n_atoms = SIZE_MAX/3 + 1", p);
        sys.n_atoms = NB;
    }
    {
        /* a model whose weights overflow the readout: the energy comes out
         * infinite or NaN, which must fail rather than reach the caller */
        static const char *const p[] = {"not finite", "no output written", NULL};
        ecenet_model *mbig = tu_random_model(&c, Z_HCO, 8002, 1e200);
        ecenet_ctx *cbig = tu_ctx(mbig, "ref");
        expect_fail(cbig, &sys, &o, &b, ECENET_ERR_NONFINITE, ECENET_ERR_NONFINITE,
                    "overflowing model", p);
        ecenet_ctx_free(cbig);
        ecenet_model_free(mbig);
    }
    /* the context still works after failures, and the message is cleared */
    ck_assert_msg(ecenet_compute(ctx, &sys, &o) == ECENET_OK, "%s", ecenet_ctx_error(ctx));
    ck_assert(isfinite(b.E) && b.E != SENTINEL);
    ck_assert_str_eq(ecenet_ctx_error(ctx), "");

    /* context creation */
    err[0] = '\0';
    ctx2 = (ecenet_ctx *)&b; /* must be reset to NULL */
    st = ecenet_ctx_create(m, "nosuch", ECENET_F64, &ctx2, err, sizeof err);
    printf("bad input %-26s -> %s: \"%s\"\n", "unknown backend", ecenet_status_string(st), err);
    ck_assert_msg(st == ECENET_ERR_BACKEND || st == ECENET_ERR_ARGUMENT, "status %d", (int)st);
    ck_assert(ctx2 == NULL);
    ck_assert_msg(strstr(err, "nosuch") != NULL, "message \"%s\" does not name the backend", err);
    err[0] = '\0';
    ctx2 = (ecenet_ctx *)&b;
    st = ecenet_ctx_create(m, "ref", ECENET_F32, &ctx2, err, sizeof err);
    printf("bad input %-26s -> %s: \"%s\"\n", "f32 on ref", ecenet_status_string(st), err);
    ck_assert_msg(st == ECENET_ERR_BACKEND || st == ECENET_ERR_UNSUPPORTED, "status %d", (int)st);
    ck_assert(ctx2 == NULL);
    ck_assert_msg(strstr(err, "ref") != NULL && strstr(err, "32") != NULL,
                  "message \"%s\" does not name the backend and precision", err);
    /* a backend from the environment is named with the variable */
    {
        const char *old = getenv("ECENET_BACKEND");
        char *keep = old ? strdup(old) : NULL;
        setenv("ECENET_BACKEND", "nosuch", 1);
        st = ecenet_ctx_create(m, NULL, ECENET_F64, &ctx2, err, sizeof err);
        printf("bad input %-26s -> %s: \"%s\"\n", "ECENET_BACKEND=nosuch", ecenet_status_string(st),
               err);
        if (keep)
            setenv("ECENET_BACKEND", keep, 1);
        else
            unsetenv("ECENET_BACKEND");
        free(keep);
        ck_assert(st != ECENET_OK && ctx2 == NULL);
        ck_assert_msg(strstr(err, "nosuch") && strstr(err, "ECENET_BACKEND"),
                      "message \"%s\" does not name the variable", err);
    }
    /* a success leaves no earlier failure's message in err */
    st = ecenet_ctx_create(m, "ref", ECENET_F64, &ctx2, err, sizeof err);
    ck_assert_msg(st == ECENET_OK, "%s", err);
    ck_assert_str_eq(err, "");
    ecenet_ctx_free(ctx2);

    ecenet_ctx_free(ctx);
    ecenet_model_free(m);
}
END_TEST

void bad_input_tests(TCase *tc)
{
    tcase_add_test(tc, test_bad_input);
}
