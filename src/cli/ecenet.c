/*
 * ecenet — command-line front end of libecenet.
 *
 *   ecenet info MODEL
 *   ecenet compute --model MODEL [--backend NAME] [--precision f64|f32]
 *                  INPUT.extxyz [-o OUTPUT.extxyz]
 *
 * Exit status: 0 success, 1 error (bad input, model, backend, I/O),
 * 2 usage error.
 */
#define _POSIX_C_SOURCE 200809L

#include "commands.h"
#include "extxyz.h"

#include <ecenet.h>

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#define EXIT_USAGE 2

/* ---- subcommand table ----------------------------------------------------- */

typedef int (*command_fn)(int argc, char **argv);

typedef struct {
    const char *name;
    command_fn run;
    const char *summary;
    const char *usage;
} command;

static int cmd_compute(int argc, char **argv);
static int cmd_info(int argc, char **argv);
static int cmd_help(int argc, char **argv);

static const command commands[] = {
    {"compute", cmd_compute,
     "energy, forces and stress of every frame of an extended XYZ file",
     "usage: ecenet compute --model MODEL [--backend NAME] [--precision f64|f32]\n"
     "                      [--tf32] [--low-memory] INPUT.extxyz [-o OUTPUT.extxyz]\n"
     "\n"
     "Reads every frame of INPUT (\"-\" = standard input), computes the energy,\n"
     "the forces and, for periodic frames whose cell has a volume, the stress,\n"
     "and writes the same frames with energy=, stress= (full 3x3, eV/A^3) and a\n"
     "forces:R:3 column to OUTPUT (default: standard output). Other keys and\n"
     "columns are kept.\n"
     "A summary line per frame goes to standard error. On any error nothing\n"
     "is written.\n"
     "\n"
     "  -m, --model MODEL       model file (.safetensors)\n"
     "  -b, --backend NAME      backend (default: $ECENET_BACKEND, else ref)\n"
     "  -p, --precision P       f64 (default, or $ECENET_PRECISION) or f32\n"
     "                          (also spelled fp64, double / fp32, float)\n"
     "  -o, --output FILE       output file (\"-\" = standard output)\n"
     "      --tf32              TF32 tensor-core GEMMs (cuda f32 only; ~1e-3 rel.)\n"
     "      --low-memory        recompute layer activations in the backward in\n"
     "                          edge chunks: a fraction of the memory, ~1 more\n"
     "                          forward pass of the layers in time\n"},
    {"info", cmd_info,
     "describe a model file: variant, elements, cutoffs, configuration",
     "usage: ecenet info MODEL\n"
     "\n"
     "Prints the model variant, its elements (symbol, Z, type index), the\n"
     "cutoffs, the resolved configuration (JSON) and the compiled backends.\n"},
    {"help", cmd_help, "show help for a subcommand",
     "usage: ecenet help [COMMAND]\n"},
    {"bench", ecn_cmd_bench,
     "time the forward and energy+forces steps of backends side by side", ecn_bench_usage},
    {"profile", ecn_cmd_profile, "per-section and per-op timings and memory of a step",
     ecn_profile_usage},
    {"nve", ecn_cmd_nve, "energy conservation of velocity-Verlet NVE dynamics", ecn_nve_usage},
};

#define N_COMMANDS (sizeof commands / sizeof commands[0])

static const command *find_command(const char *name)
{
    size_t k;
    for (k = 0; k < N_COMMANDS; k++)
        if (strcmp(commands[k].name, name) == 0)
            return &commands[k];
    return NULL;
}

static void print_command_usage(const char *name)
{
    const command *c = find_command(name);
    if (c)
        fputs(c->usage, stdout);
}

static void print_main_usage(FILE *fp)
{
    size_t k;
    fprintf(fp,
            "usage: ecenet COMMAND [ARGS]\n"
            "       ecenet --help | --version\n"
            "\n"
            "Evaluate ECENet interatomic potentials (energy, forces, stress).\n"
            "\n"
            "commands:\n");
    for (k = 0; k < N_COMMANDS; k++)
        fprintf(fp, "  %-9s %s\n", commands[k].name, commands[k].summary);
    fprintf(fp, "\nRun 'ecenet help COMMAND' for the options of a command.\n");
}

#if defined(__GNUC__)
__attribute__((format(printf, 2, 3)))
#endif
static int usage_error(const char *cmd, const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "ecenet: ");
    if (cmd)
        fprintf(stderr, "%s: ", cmd);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    if (cmd)
        fprintf(stderr, "\nTry 'ecenet help %s'.\n", cmd);
    else
        fprintf(stderr, "\nTry 'ecenet --help'.\n");
    return EXIT_USAGE;
}

#if defined(__GNUC__)
__attribute__((format(printf, 1, 2)))
#endif
static int error(const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "ecenet: ");
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    return EXIT_FAILURE;
}

static int is_help(const char *arg)
{
    return strcmp(arg, "-h") == 0 || strcmp(arg, "--help") == 0;
}

/* Match option argv[*i] against -s / --long / --long=VALUE. Returns 1 and
 * sets *value on a match, 0 if it is another option, -1 if the value is
 * missing. */
static int take_option(int argc, char **argv, int *i, const char *s,
                       const char *lng, const char **value)
{
    const char *a = argv[*i];
    size_t n = strlen(lng);
    if ((s && strcmp(a, s) == 0) || strcmp(a, lng) == 0) {
        if (*i + 1 >= argc)
            return -1;
        *value = argv[++*i];
        return 1;
    }
    if (strncmp(a, lng, n) == 0 && a[n] == '=') {
        *value = a + n + 1;
        return 1;
    }
    return 0;
}

static double now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void model_elements(const ecenet_model *m, char *buf, size_t len)
{
    int t, n = ecenet_model_n_types(m);
    size_t used = 0;
    buf[0] = '\0';
    for (t = 0; t < n && used < len; t++) {
        const char *sym = ecenet_element_symbol(ecenet_model_type_number(m, t));
        int w = snprintf(buf + used, len - used, "%s%s", t ? " " : "",
                         sym ? sym : "?");
        if (w < 0)
            break;
        used += (size_t)w;
    }
}

/* ---- compute ---------------------------------------------------------- */

static int cmd_compute(int argc, char **argv)
{
    const char *model_path = NULL, *backend = NULL, *prec_s = NULL;
    const char *input = NULL, *output = NULL;
    ecenet_precision precision = ECENET_F64;
    ecenet_model *model = NULL;
    ecenet_ctx *ctx = NULL;
    exyz_file file;
    char err[1024];
    int i, rc = EXIT_FAILURE, only_positional = 0, tf32 = 0, low_memory = 0;
    size_t k;

    memset(&file, 0, sizeof file);
    for (i = 1; i < argc; i++) {
        const char *a = argv[i];
        int got;
        if (!only_positional && a[0] == '-' && a[1] != '\0') {
            if (strcmp(a, "--") == 0) {
                only_positional = 1;
                continue;
            }
            if (is_help(a)) {
                print_command_usage("compute");
                return 0;
            }
            if (strcmp(a, "--tf32") == 0 || strcmp(a, "--low-memory") == 0) {
                *(a[2] == 't' ? &tf32 : &low_memory) = 1;
                continue;
            }
            if ((got = take_option(argc, argv, &i, "-m", "--model", &model_path)) ||
                (got = take_option(argc, argv, &i, "-b", "--backend", &backend)) ||
                (got = take_option(argc, argv, &i, "-p", "--precision", &prec_s)) ||
                (got = take_option(argc, argv, &i, "-o", "--output", &output))) {
                if (got < 0)
                    return usage_error("compute", "option '%s' needs a value", a);
                continue;
            }
            return usage_error("compute", "unknown option '%s'", a);
        }
        if (input)
            return usage_error("compute", "more than one input file ('%s' and '%s')",
                               input, a);
        input = a;
    }
    if (!model_path)
        return usage_error("compute", "missing --model MODEL");
    if (!input)
        return usage_error("compute", "missing the input file (extended XYZ)");
    if (output && !*output)
        return usage_error("compute", "--output: empty file name");
    {
        /* the output replaces its file: refuse to replace the model with it */
        struct stat so, sm;
        if (output && strcmp(output, "-") != 0 && stat(output, &so) == 0 &&
            stat(model_path, &sm) == 0 && so.st_dev == sm.st_dev && so.st_ino == sm.st_ino)
            return usage_error("compute", "--output '%s' is the model file '%s'", output,
                               model_path);
    }
    if (prec_s) {
        const char *why = ecn_cli_precision_why(prec_s, &precision);
        if (why)
            return usage_error("compute", "--precision '%s' %s", prec_s, why);
    } else if (getenv("ECENET_PRECISION") && *getenv("ECENET_PRECISION")) {
        prec_s = getenv("ECENET_PRECISION");
        const char *why = ecn_cli_precision_why(prec_s, &precision);
        if (why)
            return usage_error("compute", "ECENET_PRECISION='%s' %s", prec_s, why);
    }

    if (exyz_read(input, &file, err, sizeof err) != 0)
        return error("%s", err);

    err[0] = '\0';
    if (ecenet_model_load(model_path, &model, err, sizeof err) != ECENET_OK) {
        if (err[0])
            error("%s", err);
        else
            error("%s: cannot load the model", model_path);
        goto done;
    }
    err[0] = '\0';
    if (ecenet_ctx_create(model, backend, precision, &ctx, err, sizeof err) !=
        ECENET_OK) {
        if (err[0])
            error("%s", err);
        else
            error("cannot create a context for backend '%s'",
                  backend ? backend : "(default)");
        goto done;
    }
    if ((tf32 && ecenet_ctx_set_option(ctx, ECENET_OPT_TF32, 1) != ECENET_OK) ||
        (low_memory && ecenet_ctx_set_option(ctx, ECENET_OPT_LOW_MEMORY, 1) != ECENET_OK)) {
        error("%s", ecenet_ctx_error(ctx));
        goto done;
    }

    for (k = 0; k < file.n_frames; k++) {
        exyz_frame *f = &file.frames[k];
        ecenet_system sys;
        ecenet_outputs out;
        ecenet_status st;
        size_t a;
        double t0, t1, fmax = 0.0;
        int periodic = exyz_is_periodic(f);

        for (a = 0; a < f->n_atoms; a++) {
            if (ecenet_model_type_of(model, f->numbers[a]) < 0) {
                char elems[256];
                const char *sym = ecenet_element_symbol(f->numbers[a]);
                model_elements(model, elems, sizeof elems);
                error("%s:%ld: element %s is not in the model %s (its elements: %s)",
                      file.path, exyz_atom_line(f, a), sym ? sym : "?",
                      model_path, elems);
                goto done;
            }
        }

        memset(&sys, 0, sizeof sys);
        sys.n_atoms = f->n_atoms;
        sys.positions = f->positions;
        sys.numbers = f->numbers;
        sys.cell = periodic ? f->cell : NULL;
        sys.pbc[0] = f->pbc[0];
        sys.pbc[1] = f->pbc[1];
        sys.pbc[2] = f->pbc[2];

        free(f->forces);
        f->forces = malloc((3 * f->n_atoms + 1) * sizeof *f->forces);
        if (!f->forces) {
            error("%s:%ld: frame %zu: out of memory", file.path, f->line, k);
            goto done;
        }
        memset(&out, 0, sizeof out);
        out.energy = &f->energy;
        out.forces = f->forces;
        out.forces_len = 3 * f->n_atoms;
        /* stress needs a volume: a cell with zero rows along its
         * non-periodic axes (a wire, a sheet) gets energy and forces only */
        const double *L = f->cell;
        const double vol = fabs(L[0] * (L[4] * L[8] - L[5] * L[7]) -
                                L[1] * (L[3] * L[8] - L[5] * L[6]) +
                                L[2] * (L[3] * L[7] - L[4] * L[6]));
        const int with_stress = periodic && vol >= 1e-12;
        if (with_stress) {
            out.stress = f->stress;
            out.stress_len = 6;
        }
        t0 = now_seconds();
        st = ecenet_compute(ctx, &sys, &out);
        t1 = now_seconds();
        if (st != ECENET_OK) {
            const char *msg = ecenet_ctx_error(ctx);
            error("%s:%ld: frame %zu: %s", file.path, f->line, k,
                  msg && *msg ? msg : ecenet_status_string(st));
            goto done;
        }
        f->has_results = 1;
        f->has_stress = with_stress;
        for (a = 0; a < 3 * f->n_atoms; a++)
            if (fabs(f->forces[a]) > fmax)
                fmax = fabs(f->forces[a]);
        fprintf(stderr,
                "frame %zu: %zu atoms, E = %.15g eV, max|F| = %.3f eV/A, %.3f s\n",
                k, f->n_atoms, f->energy, fmax, t1 - t0);
    }

    if (exyz_write(output, &file, err, sizeof err) != 0) {
        error("%s", err);
        goto done;
    }
    rc = 0;
done:
    ecenet_ctx_free(ctx);
    ecenet_model_free(model);
    exyz_free(&file);
    return rc;
}

/* ---- info ------------------------------------------------------------- */

static int cmd_info(int argc, char **argv)
{
    const char *path = NULL;
    ecenet_model *model = NULL;
    char err[1024];
    int i, t, n;

    for (i = 1; i < argc; i++) {
        if (is_help(argv[i])) {
            print_command_usage("info");
            return 0;
        }
        if (argv[i][0] == '-' && argv[i][1] != '\0')
            return usage_error("info", "unknown option '%s'", argv[i]);
        if (path)
            return usage_error("info", "more than one model file ('%s' and '%s')",
                               path, argv[i]);
        path = argv[i];
    }
    if (!path)
        return usage_error("info", "missing the model file");

    err[0] = '\0';
    if (ecenet_model_load(path, &model, err, sizeof err) != ECENET_OK) {
        if (err[0])
            return error("%s", err);
        return error("%s: cannot load the model", path);
    }
    n = ecenet_model_n_types(model);
    printf("model:     %s\n", path);
    printf("variant:   %s\n", ecenet_model_variant(model));
    printf("elements:  %d\n", n);
    printf("  type  symbol  Z\n");
    for (t = 0; t < n; t++) {
        int z = ecenet_model_type_number(model, t);
        const char *sym = ecenet_element_symbol(z);
        printf("  %4d  %-6s  %d\n", t, sym ? sym : "?", z);
    }
    printf("cutoffs:   edge %.17g A, neighbor %.17g A\n",
           ecenet_model_cutoff_edge(model), ecenet_model_cutoff_neighbor(model));
    printf("backends:  %s\n", ecenet_backends());
    printf("config:    %s\n", ecenet_model_config_json(model));
    ecenet_model_free(model);
    return 0; /* main checks that standard output was written */
}

/* ---- help, version ---------------------------------------------------- */

static int cmd_help(int argc, char **argv)
{
    const command *c;
    if (argc < 2) {
        print_main_usage(stdout);
        return 0;
    }
    if (argc > 2)
        return usage_error("help", "too many arguments");
    c = find_command(argv[1]);
    if (!c)
        return usage_error("help", "unknown command '%s'", argv[1]);
    fputs(c->usage, stdout);
    return 0;
}

static void print_version(void)
{
    printf("ecenet (libecenet) %s\n", ecenet_version());
    printf("ABI %d, backends: %s\n", ecenet_abi_version(), ecenet_backends());
}

/* Every command's standard output must have reached its file: a full disk
 * or a closed pipe is an error (status 1), not a silent success. */
static int stdout_checked(int rc)
{
    errno = 0;
    if ((fflush(stdout) != 0 || ferror(stdout)) && rc == 0) {
        fprintf(stderr, "ecenet: write error on standard output: %s\n",
                strerror(errno ? errno : EIO));
        return 1;
    }
    return rc;
}

int main(int argc, char **argv)
{
    const command *c;
    if (argc < 2) {
        print_main_usage(stderr);
        return EXIT_USAGE;
    }
    if (is_help(argv[1])) {
        print_main_usage(stdout);
        return stdout_checked(0);
    }
    if (strcmp(argv[1], "--version") == 0 || strcmp(argv[1], "-V") == 0) {
        print_version();
        return stdout_checked(0);
    }
    if (argv[1][0] == '-')
        return usage_error(NULL, "unknown option '%s'", argv[1]);
    c = find_command(argv[1]);
    if (!c)
        return usage_error(NULL, "unknown command '%s'", argv[1]);
    return stdout_checked(c->run(argc - 1, argv + 1));
}
