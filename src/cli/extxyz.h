/*
 * Reader and writer of ASE's extended XYZ format, several frames per file.
 *
 * Frame layout:
 *   line 1   number of atoms
 *   line 2   key=value pairs; values may be "double quoted" (with \" and \\
 *            escapes) or {braced} / [bracketed]; a bare key means key=T.
 *            Known keys: Lattice="a1 a2 a3 b1 b2 b3 c1 c2 c3" (cell rows),
 *            pbc="T T F", Properties=name:type:count:... (type S, R, I or L).
 *   N lines  one atom each, whitespace-separated columns as in Properties.
 *
 * Only species (S:1) and pos/positions (R:3) columns are required; missing
 * Properties means species:S:1:pos:R:3. Lattice without pbc means pbc T T T;
 * no Lattice means non-periodic (a true pbc flag then is an error).
 *
 * Everything else (other key=value pairs, other columns) is kept verbatim
 * and written back unchanged, except the results this program replaces:
 * energy, free_energy, stress and virial are dropped from line 2 and an
 * input forces column is replaced.
 */
#ifndef ECENET_CLI_EXTXYZ_H
#define ECENET_CLI_EXTXYZ_H

#include <stddef.h>

typedef struct {
    char *name;
    char type;      /* 'S', 'R', 'I' or 'L' */
    int count;      /* number of tokens */
} exyz_column;

typedef struct {
    char *key;      /* unquoted key */
    char *value;    /* unquoted value; "T" for a bare key */
    char *raw;      /* the pair exactly as it was written */
} exyz_kv;

typedef struct {
    long line;              /* 1-based line number of the atom-count line */
    size_t n_atoms;

    size_t n_kv;            /* line-2 key=value pairs, in input order */
    exyz_kv *kv;

    size_t n_cols;          /* Properties columns */
    exyz_column *cols;
    size_t n_tokens;        /* tokens per atom line (sum of counts) */
    int species_col, pos_col, forces_col;  /* column index or -1 */
    size_t species_tok, pos_tok, forces_tok;  /* token offsets of those */

    char **atom_lines;      /* n_atoms buffers holding NUL-separated tokens */
    char **tokens;          /* n_atoms * n_tokens pointers into atom_lines */

    int *numbers;           /* n_atoms atomic numbers */
    double *positions;      /* 3 * n_atoms, Å */
    int has_cell;
    double cell[9];         /* rows = lattice vectors */
    int pbc[3];

    /* results, filled by the caller before writing */
    int has_results;
    double energy;
    double *forces;         /* 3 * n_atoms, malloc'd by the caller or NULL */
    int has_stress;
    double stress[6];       /* Voigt xx yy zz yz xz xy */
} exyz_frame;

typedef struct {
    char *path;             /* as given ("<stdin>" for "-") */
    size_t n_frames;
    exyz_frame *frames;
} exyz_file;

/* Line number (1-based) of atom k of a frame. */
long exyz_atom_line(const exyz_frame *f, size_t k);

/* True if any periodic flag is set and the frame has a Lattice. */
int exyz_is_periodic(const exyz_frame *f);

/* Read every frame of path ("-" = standard input). On failure returns -1,
 * leaves *out empty and writes "PATH:LINE: message" into err. */
int exyz_read(const char *path, exyz_file *out, char *err, size_t err_len);

/* Write the frames with their results (energy=, stress= for frames with
 * has_stress, a forces:R:3 column). path NULL or "-" = standard output.
 * A file is written to PATH.tmp.XXXXXX and renamed into place, so that a
 * failure never leaves a partial file. Returns 0, or -1 with err set. */
int exyz_write(const char *path, const exyz_file *file, char *err,
               size_t err_len);

void exyz_free(exyz_file *file);

#endif
