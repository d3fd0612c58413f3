/* `ecenet nve`: a velocity-Verlet NVE run through the public API, to measure
 * how well a model, backend and precision conserve energy at a given time
 * step before a production run (fp32 and TF32 forces carry rounding noise
 * that shows up as energy drift; fp64 shows the integrator's own error).
 *
 * Units: Å, eV, amu; the time unit of these is τ = Å·sqrt(amu/eV) =
 * 10.1805 fs, so a = F/m needs no constants and --dt is converted once.
 * Positions are not wrapped (the neighbour search wraps periodic axes
 * itself), so the trajectory stays continuous. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "commands.h"
#include "ecenet.h"
#include "extxyz.h"
#include "synth.h"

const char ecn_nve_usage[] =
    "usage: ecenet nve (--model FILE | --config bench|small)\n"
    "                  [--diamond N | INPUT.extxyz] [--backend B] [--precision f64|f32]\n"
    "                  [--tf32] [--low-memory] [--dt FS] [--steps N] [--temperature K]\n"
    "                  [--every K] [--seed S] [--mass SYMBOL=AMU]...\n"
    "\n"
    "Energy conservation check: velocity-Verlet NVE dynamics from the first\n"
    "frame of INPUT (or a rattled diamond box, --diamond N, default 3) with\n"
    "the model on one backend and precision. Prints the potential, kinetic and\n"
    "total energy every K steps (default 10), then the drift of the total\n"
    "energy (least-squares slope, meV/atom/ps), its largest excursion and its\n"
    "rms about the fitted line (meV/atom).\n"
    "Velocities come from a momenta:R:3 column of INPUT (amu*A/tau, ASE's\n"
    "units) or are drawn from Maxwell-Boltzmann at --temperature (default 300 K;\n"
    "--seed, default 1, which also seeds --config's weights and the diamond's\n"
    "rattle) with zero total momentum, rescaled to exactly that temperature\n"
    "(3N - 3 degrees of freedom). Masses: a masses:R:1 column, else IUPAC standard\n"
    "atomic weights; --mass C=13.003 sets one element's mass (once each, up to 16).\n"
    "Masses lie in [1e-6, 1e6] amu. Defaults: --dt 0.5 fs (at most 100), --steps\n"
    "100 (at most 1e7), --temperature at most 1e6 K. Writes no trajectory. Stops\n"
    "with an error naming the step if the energy or a force is not finite.\n";

/* Standard atomic weights (IUPAC 2016, abridged; for elements without one,
 * the mass number of a long-lived isotope), the values ASE uses, so that
 * runs agree with ASE-driven ones. */
static const double atomic_mass[119] = {
    0.0,        1.008,      4.002602,   6.94,       9.0121831,  10.81,      12.011,
    14.007,     15.999,     18.998403163, 20.1797,  22.98976928, 24.305,    26.9815385,
    28.085,     30.973761998, 32.06,    35.45,      39.948,     39.0983,    40.078,
    44.955908,  47.867,     50.9415,    51.9961,    54.938044,  55.845,     58.933194,
    58.6934,    63.546,     65.38,      69.723,     72.630,     74.921595,  78.971,
    79.904,     83.798,     85.4678,    87.62,      88.90584,   91.224,     92.90637,
    95.95,      97.90721,   101.07,     102.90550,  106.42,     107.8682,   112.414,
    114.818,    118.710,    121.760,    127.60,     126.90447,  131.293,    132.90545196,
    137.327,    138.90547,  140.116,    140.90766,  144.242,    144.91276,  150.36,
    151.964,    157.25,     158.92535,  162.500,    164.93033,  167.259,    168.93422,
    173.054,    174.9668,   178.49,     180.94788,  183.84,     186.207,    190.23,
    192.217,    195.084,    196.966569, 200.592,    204.38,     207.2,      208.98040,
    208.98243,  209.98715,  222.01758,  223.01974,  226.02541,  227.02775,  232.0377,
    231.03588,  238.02891,  237.04817,  244.06421,  243.06138,  247.07035,  247.07031,
    251.07959,  252.0830,   257.09511,  258.09843,  259.1010,   262.110,    267.122,
    268.126,    271.134,    270.133,    269.1338,   278.156,    281.165,    281.166,
    285.177,    286.182,    289.190,    289.194,    293.204,    293.208,    294.214,
};

#define KB_EV 8.617333262e-5     /* Boltzmann constant, eV/K */
#define FS_PER_TAU 10.1805055     /* Å·sqrt(amu/eV) in fs */
#define MAX_MASS_OPTS 16
#define MAX_STEPS 10000000
#define MASS_MIN 1e-6 /* amu, for --mass and a masses column */
#define MASS_MAX 1e6

typedef struct {
    const char *model_path, *config, *input, *backend;
    ecenet_precision prec;
    int tf32, lowmem, ndia, seed, steps, every;
    double dt_fs, temp;
    int n_mass;
    int mass_z[MAX_MASS_OPTS];
    double mass_v[MAX_MASS_OPTS];
} nve_opts;

/* The system as integrated: positions, velocities and masses per atom. */
typedef struct {
    size_t n;
    double *x, *v, *m, *f;
    int *z;
    int has_cell, pbc[3];
    double cell[9];
    double dof; /* degrees of freedom of the temperature */
} nve_sys;

#if defined(__GNUC__)
__attribute__((format(printf, 1, 2)))
#endif
static int fail(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "ecenet nve: ");
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    return 1;
}

static int usage(const char *what, const char *arg)
{
    fprintf(stderr, "ecenet nve: %s '%s'\n%s", what, arg, ecn_nve_usage);
    return 2;
}

static int parse_double(const char *s, double lo, double hi, double *out)
{
    char *end;
    const double v = strtod(s, &end);
    if (!*s || *end || !(v >= lo && v <= hi))
        return -1;
    *out = v;
    return 0;
}

/* --mass SYMBOL=AMU; NULL, or what is wrong with s */
static const char *parse_mass(const char *s, nve_opts *o)
{
    char sym[8];
    const char *eq = strchr(s, '=');
    if (!eq || eq == s || (size_t)(eq - s) >= sizeof sym)
        return "is not SYMBOL=AMU";
    if (o->n_mass == MAX_MASS_OPTS)
        return "is one --mass too many (at most 16)";
    memcpy(sym, s, (size_t)(eq - s));
    sym[eq - s] = '\0';
    const int z = ecenet_element_number(sym);
    double m;
    if (z <= 0)
        return "does not start with an element symbol (H, He, ..., case-sensitive)";
    for (int k = 0; k < o->n_mass; k++)
        if (o->mass_z[k] == z)
            return "gives an element's mass a second time";
    if (parse_double(eq + 1, MASS_MIN, MASS_MAX, &m) != 0)
        return "has no mass in [1e-06, 1e+06] amu";
    o->mass_z[o->n_mass] = z;
    o->mass_v[o->n_mass++] = m;
    return NULL;
}

static double kinetic(const nve_sys *s)
{
    double ke = 0.0;
    for (size_t q = 0; q < 3 * s->n; q++)
        ke += 0.5 * s->m[q / 3] * s->v[q] * s->v[q];
    return ke;
}

/* Degrees of freedom of the temperature: 3N, less 3 when the total momentum
 * is zero (drawn velocities, or input momenta that sum to zero): then it
 * stays zero and the centre of mass carries no kinetic energy. */
static double dof_of(const nve_sys *s)
{
    double p[3] = {0, 0, 0}, pabs = 0.0;
    for (size_t q = 0; q < 3 * s->n; q++) {
        p[q % 3] += s->m[q / 3] * s->v[q];
        pabs += fabs(s->m[q / 3] * s->v[q]);
    }
    const int fixed = s->n > 1 && fabs(p[0]) + fabs(p[1]) + fabs(p[2]) <= 1e-12 * pabs;
    return 3.0 * (double)s->n - (fixed ? 3.0 : 0.0);
}

/* Maxwell-Boltzmann velocities at T, zero total momentum, rescaled to T
 * with 3N - 3 degrees of freedom (one atom: 3, no momentum removed). */
static void thermalise(nve_sys *s, double T, uint64_t seed)
{
    double p[3] = {0, 0, 0}, mt = 0.0;
    for (size_t i = 0; i < s->n; i++) {
        for (int a = 0; a < 3; a++) {
            s->v[3 * i + a] = sqrt(KB_EV * T / s->m[i]) * ecn_synth_normal(&seed);
            p[a] += s->m[i] * s->v[3 * i + a];
        }
        mt += s->m[i];
    }
    if (s->n > 1)
        for (size_t i = 0; i < s->n; i++)
            for (int a = 0; a < 3; a++)
                s->v[3 * i + a] -= p[a] / mt;
    const double ke = kinetic(s), want = 0.5 * dof_of(s) * KB_EV * T;
    const double k = ke > 0.0 ? sqrt(want / ke) : 0.0;
    for (size_t q = 0; q < 3 * s->n; q++)
        s->v[q] *= k;
}

/* The column NAME:TYPE:COUNT and its token offset; NULL if there is none.
 * A column of that name with another shape is an error (*bad set, message
 * printed), not silently ignored. */
static const exyz_column *find_col(const char *path, const exyz_frame *f, const char *name,
                                   char type, int count, size_t *tok, int *bad)
{
    size_t off = 0;
    for (size_t c = 0; c < f->n_cols; c++) {
        if (!strcmp(f->cols[c].name, name)) {
            if (f->cols[c].type != type || f->cols[c].count != count) {
                fprintf(stderr, "ecenet nve: %s:%ld: column %s:%c:%d, expected %s:%c:%d\n", path,
                        f->line + 1, name, f->cols[c].type, f->cols[c].count, name, type, count);
                *bad = 1;
                return NULL;
            }
            *tok = off;
            return &f->cols[c];
        }
        off += (size_t)f->cols[c].count;
    }
    return NULL;
}

/* Masses and, if the frame has them, momenta from INPUT's columns. Returns
 * 1 if velocities were set, 0 if not, -1 on a bad value (message printed). */
static int read_columns(const char *path, const exyz_frame *f, nve_sys *s)
{
    size_t mt = 0, pt = 0;
    int bad = 0;
    const exyz_column *mc = find_col(path, f, "masses", 'R', 1, &mt, &bad);
    const exyz_column *pc = find_col(path, f, "momenta", 'R', 3, &pt, &bad);
    if (bad)
        return -1;
    for (size_t i = 0; i < s->n; i++) {
        char *end;
        if (mc) {
            const char *t = f->tokens[i * f->n_tokens + mt];
            s->m[i] = strtod(t, &end);
            if (*end || !(s->m[i] >= MASS_MIN && s->m[i] <= MASS_MAX)) {
                fprintf(stderr, "ecenet nve: %s:%ld: mass '%s' is not a number in [1e-06, 1e+06] amu\n",
                        path, exyz_atom_line(f, i), t);
                return -1;
            }
        }
        for (int a = 0; pc && a < 3; a++) {
            const char *t = f->tokens[i * f->n_tokens + pt + (size_t)a];
            const double p = strtod(t, &end);
            if (*end || !isfinite(p)) {
                fprintf(stderr, "ecenet nve: %s:%ld: momentum '%s' is not a number\n", path,
                        exyz_atom_line(f, i), t);
                return -1;
            }
            s->v[3 * i + a] = p; /* divided by the final mass below */
        }
    }
    return pc != NULL;
}

static int run(const nve_opts *o, ecenet_model *model, nve_sys *s, int have_v,
               const char *src_name)
{
    char err[1024] = "";
    ecenet_ctx *ctx = NULL;
    const size_t n = s->n;
    const int n_rec = o->steps + 1;
    double *etot = malloc((size_t)n_rec * sizeof *etot);
    int rc = 1;
    if (!etot) {
        fprintf(stderr, "ecenet nve: out of memory (%d steps)\n", o->steps);
        goto done;
    }
    if (ecenet_ctx_create(model, o->backend, o->prec, &ctx, err, sizeof err) != ECENET_OK) {
        fprintf(stderr, "ecenet nve: %s\n", err[0] ? err : "cannot create the context");
        goto done;
    }
    if ((o->tf32 && ecenet_ctx_set_option(ctx, ECENET_OPT_TF32, 1) != ECENET_OK) ||
        (o->lowmem && ecenet_ctx_set_option(ctx, ECENET_OPT_LOW_MEMORY, 1) != ECENET_OK)) {
        fprintf(stderr, "ecenet nve: %s\n", ecenet_ctx_error(ctx));
        goto done;
    }
    const ecenet_backend *be = ecn_backend_get(ecenet_ctx_backend(ctx), (int)o->prec);
    ecn_cli_run_info(&be, 1);
    if (!have_v) /* a stream of its own: the diamond's rattle draws from the seed itself */
        thermalise(s, o->temp, (uint64_t)o->seed ^ 0xA0761D6478BD642Full);
    s->dof = dof_of(s);
    const double dt = o->dt_fs / FS_PER_TAU;
    printf("ecenet nve: %s, %zu atoms, backend %s %s%s, dt %g fs, %d steps (%g fs), %s\n",
           src_name, n, ecenet_ctx_backend(ctx), o->prec == ECENET_F64 ? "f64" : "f32",
           o->tf32 ? " with TF32 GEMMs" : "", o->dt_fs, o->steps, o->steps * o->dt_fs,
           have_v ? "velocities from the input's momenta" : "Maxwell-Boltzmann velocities");
    printf("%8s %12s %18s %14s %18s %9s %16s\n", "step", "time[fs]", "Epot[eV]", "Ekin[eV]",
           "Etot[eV]", "T[K]", "dEtot[meV/atom]");

    ecenet_system sys = {n, s->x, s->z, s->has_cell ? s->cell : NULL,
                         {s->pbc[0], s->pbc[1], s->pbc[2]}};
    double ep = 0.0;
    ecenet_outputs out = {&ep, s->f, 3 * n, NULL, 0, NULL, 0, NULL, 0};
    double t_wall = 0.0;
    for (int step = 0; step <= o->steps; step++) {
        if (step > 0)
            for (size_t q = 0; q < 3 * n; q++) {
                s->v[q] += 0.5 * dt * s->f[q] / s->m[q / 3];
                s->x[q] += dt * s->v[q];
            }
        const double t0 = ecn_synth_now();
        const ecenet_status st = ecenet_compute(ctx, &sys, &out);
        t_wall += ecn_synth_now() - t0;
        if (st != ECENET_OK) {
            /* a non-finite energy or force fails the compute (ECENET_ERR_NONFINITE) */
            fprintf(stderr, "ecenet nve: step %d (t = %g fs): %s%s\n", step, step * o->dt_fs,
                    ecenet_ctx_error(ctx),
                    st == ECENET_ERR_NONFINITE
                        ? " (the time step may be too large, or atoms too close)"
                        : "");
            goto done;
        }
        if (step > 0)
            for (size_t q = 0; q < 3 * n; q++)
                s->v[q] += 0.5 * dt * s->f[q] / s->m[q / 3];
        const double ek = kinetic(s);
        etot[step] = ep + ek;
        if (step % o->every == 0 || step == o->steps)
            printf("%8d %12.3f %18.10f %14.8f %18.10f %9.2f %16.6f\n", step, step * o->dt_fs,
                   ep, ek, ep + ek, 2.0 * ek / (s->dof * KB_EV), 1e3 * (ep + ek - etot[0]) / n);
    }

    /* least-squares line through Etot(t), the rms about it, the excursion */
#define T_PS(k) ((k) * o->dt_fs * 1e-3) /* time of step k, ps */
    double tm = 0.0, em = 0.0, stt = 0.0, ste = 0.0, emax = 0.0, rms = 0.0;
    for (int k = 0; k < n_rec; k++) {
        tm += T_PS(k) / n_rec;
        em += etot[k] / n_rec;
        emax = fmax(emax, fabs(etot[k] - etot[0]));
    }
    for (int k = 0; k < n_rec; k++) {
        stt += (T_PS(k) - tm) * (T_PS(k) - tm);
        ste += (T_PS(k) - tm) * (etot[k] - em);
    }
    const double slope = stt > 0.0 ? ste / stt : 0.0;
    for (int k = 0; k < n_rec; k++) {
        const double r = etot[k] - em - slope * (T_PS(k) - tm);
        rms += r * r / n_rec;
    }
#undef T_PS
    printf("energy conservation over %d steps (%g fs), %zu atoms:\n", o->steps,
           o->steps * o->dt_fs, n);
    printf("  drift (least-squares slope)   %12.6f meV/atom/ps\n", 1e3 * slope / n);
    printf("  max |Etot - Etot(0)|          %12.6f meV/atom\n", 1e3 * emax / n);
    printf("  rms of Etot about the line    %12.6f meV/atom\n", 1e3 * sqrt(rms) / n);
    printf("  time per force call           %12.3f ms (mean of %d)\n", 1e3 * t_wall / n_rec,
           n_rec);
    rc = 0;
done:
    ecenet_ctx_free(ctx);
    free(etot);
    return rc;
}

int ecn_cmd_nve(int argc, char **argv)
{
    nve_opts o;
    memset(&o, 0, sizeof o);
    o.backend = NULL; /* the context takes $ECENET_BACKEND, else ref */
    o.prec = ECENET_F64;
    o.ndia = 3;
    o.seed = 1;
    o.steps = 100;
    o.every = 10;
    o.dt_fs = 0.5;
    o.temp = 300.0;
    int have_dia = 0;
    for (int k = 1; k < argc; k++) {
        const char *a = argv[k], *v = k + 1 < argc ? argv[k + 1] : NULL;
        static const char *const valued[] = {"--model", "--config", "--backend", "--precision",
                                             "--diamond", "--steps", "--every", "--seed",
                                             "--dt", "--temperature", "--mass", NULL};
        const char *why = NULL;
        char buf[64];
        int takes = 1;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            fputs(ecn_nve_usage, stdout);
            return 0;
        } else if (!strcmp(a, "--tf32")) {
            o.tf32 = 1, takes = 0;
        } else if (!strcmp(a, "--low-memory")) {
            o.lowmem = 1, takes = 0;
        } else if (a[0] != '-' || !strcmp(a, "-")) {
            if (o.input)
                return usage("more than one input file:", a);
            o.input = a, takes = 0;
        } else if (ecn_cli_check_valued("nve", a, v, valued, ecn_nve_usage)) {
            return 2;
        } else if (!strcmp(a, "--model")) {
            o.model_path = v;
        } else if (!strcmp(a, "--config")) {
            o.config = v;
        } else if (!strcmp(a, "--backend")) {
            o.backend = v;
        } else if (!strcmp(a, "--precision")) {
            why = ecn_cli_precision_why(v, &o.prec);
        } else if (!strcmp(a, "--diamond")) {
            why = ecn_cli_int_why(v, 1, 100, &o.ndia, buf, sizeof buf);
            have_dia = 1;
        } else if (!strcmp(a, "--steps")) {
            why = ecn_cli_int_why(v, 1, MAX_STEPS, &o.steps, buf, sizeof buf);
        } else if (!strcmp(a, "--every")) {
            why = ecn_cli_int_why(v, 1, MAX_STEPS, &o.every, buf, sizeof buf);
        } else if (!strcmp(a, "--seed")) {
            why = ecn_cli_int_why(v, 0, 1 << 30, &o.seed, buf, sizeof buf);
        } else if (!strcmp(a, "--dt")) {
            why = parse_double(v, 1e-6, 100.0, &o.dt_fs) ? "is not a time step in [1e-06, 100] fs"
                                                        : NULL;
        } else if (!strcmp(a, "--temperature")) {
            why = parse_double(v, 0.0, 1e6, &o.temp) ? "is not a temperature in [0, 1e+06] K" : NULL;
        } else {
            why = parse_mass(v, &o); /* --mass */
        }
        if (why)
            return ecn_cli_opt_error("nve", a, v, why, ecn_nve_usage);
        k += takes;
    }
    if (have_dia && o.input) {
        fprintf(stderr, "ecenet nve: give either --diamond N or an input file, not both\n%s",
                ecn_nve_usage);
        return 2;
    }
    if (!!o.config == !!o.model_path) {
        fprintf(stderr, "ecenet nve: give exactly one of --model FILE and --config NAME\n%s",
                ecn_nve_usage);
        return 2;
    }

    char err[1024] = "";
    ecenet_model *model = NULL;
    exyz_file xf;
    nve_sys s;
    int rc = 1, have_v = 0;
    char src_name[512];
    memset(&xf, 0, sizeof xf);
    memset(&s, 0, sizeof s);
    if (o.model_path) {
        if (ecenet_model_load(o.model_path, &model, err, sizeof err) != ECENET_OK)
            return err[0] ? fail("%s", err) : fail("%s: cannot load the model", o.model_path);
    } else {
        ecn_config cfg;
        if (ecn_synth_config(o.config, &cfg) != 0) {
            fprintf(stderr, "ecenet nve: unknown config '%s' (bench, small)\n", o.config);
            return 2;
        }
        if (ecn_synth_model(&cfg, (uint64_t)o.seed, &model, err, sizeof err) != ECENET_OK)
            return fail("%s", err);
    }

    const exyz_frame *f = NULL;
    if (o.input) {
        if (exyz_read(o.input, &xf, err, sizeof err) != 0) {
            fail("%s", err);
            goto done;
        }
        if (xf.n_frames == 0) {
            fail("%s: no frames", o.input);
            goto done;
        }
        f = &xf.frames[0];
        s.n = f->n_atoms;
        snprintf(src_name, sizeof src_name, "%s (first frame)", xf.path);
    } else {
        double *pos = NULL;
        int *numbers = NULL;
        if (ecn_synth_diamond(o.ndia, 0.05, (uint64_t)o.seed, &s.n, &pos, &numbers, s.cell) != 0) {
            fail("cannot build the diamond box");
            goto done;
        }
        s.x = pos;
        s.z = numbers;
        s.has_cell = 1;
        s.pbc[0] = s.pbc[1] = s.pbc[2] = 1;
        snprintf(src_name, sizeof src_name, "diamond %dx%dx%d (rattled)", o.ndia, o.ndia, o.ndia);
    }
    if (s.n == 0) {
        fail("%s: the structure has no atoms", o.input ? o.input : "diamond");
        goto done;
    }
    if (f) {
        s.x = malloc(3 * s.n * sizeof *s.x);
        s.z = malloc(s.n * sizeof *s.z);
        if (s.x && s.z) {
            memcpy(s.x, f->positions, 3 * s.n * sizeof *s.x);
            memcpy(s.z, f->numbers, s.n * sizeof *s.z);
        }
        s.has_cell = exyz_is_periodic(f);
        memcpy(s.cell, f->cell, sizeof s.cell);
        memcpy(s.pbc, f->pbc, sizeof s.pbc);
    }
    s.v = calloc(3 * s.n, sizeof *s.v);
    s.f = calloc(3 * s.n, sizeof *s.f);
    s.m = calloc(s.n, sizeof *s.m);
    if (!s.x || !s.z || !s.v || !s.f || !s.m) {
        fail("out of memory (%zu atoms)", s.n);
        goto done;
    }
    for (size_t i = 0; i < s.n; i++) {
        const int z = s.z[i];
        if (ecenet_model_type_of(model, z) < 0) {
            const char *sym = ecenet_element_symbol(z);
            if (f)
                fprintf(stderr, "ecenet nve: %s:%ld: element %s is not in the model\n", xf.path,
                        exyz_atom_line(f, i), sym ? sym : "?");
            else
                fprintf(stderr, "ecenet nve: element %s is not in the model\n", sym ? sym : "?");
            goto done;
        }
        s.m[i] = z >= 1 && z <= 118 ? atomic_mass[z] : 0.0;
    }
    if (f && (have_v = read_columns(xf.path, f, &s)) < 0)
        goto done;
    for (size_t i = 0; i < s.n; i++)
        for (int k = 0; k < o.n_mass; k++)
            if (s.z[i] == o.mass_z[k])
                s.m[i] = o.mass_v[k];
    if (have_v) { /* momenta -> velocities with the final masses */
        for (size_t q = 0; q < 3 * s.n; q++)
            s.v[q] /= s.m[q / 3];
        if (!isfinite(kinetic(&s))) {
            fail("%s: the momenta give a kinetic energy that is not finite", xf.path);
            goto done;
        }
    }
    rc = run(&o, model, &s, have_v, src_name);
done:
    free(s.x);
    free(s.z);
    free(s.v);
    free(s.f);
    free(s.m);
    exyz_free(&xf);
    ecenet_model_free(model);
    return rc;
}
