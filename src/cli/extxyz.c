/* Extended XYZ reader and writer (see extxyz.h). */
#define _XOPEN_SOURCE 700 /* realpath */

#include "extxyz.h"

#include <ecenet.h>

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

/* ---- small helpers ------------------------------------------------------ */

static int is_space(char c)
{
    return c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\v' ||
           c == '\f';
}

static char lower(char c)
{
    return (c >= 'A' && c <= 'Z') ? (char)(c - 'A' + 'a') : c;
}

static int equal_nocase(const char *a, const char *b)
{
    while (*a && *b && lower(*a) == lower(*b)) {
        a++;
        b++;
    }
    return *a == '\0' && *b == '\0';
}

static char *dup_range(const char *s, size_t n)
{
    char *d = malloc(n + 1);
    if (d) {
        memcpy(d, s, n);
        d[n] = '\0';
    }
    return d;
}

static char *dup_str(const char *s)
{
    return dup_range(s, strlen(s));
}

/* Parse a whole token as a finite double. */
static int parse_double(const char *tok, double *out)
{
    char *end;
    double v;
    if (*tok == '\0')
        return -1;
    /* decimal only: strtod would also take hexadecimal ("0x10" = 16), which
     * no other extended XYZ reader does */
    if (strpbrk(tok, "xX"))
        return -1;
    errno = 0;
    v = strtod(tok, &end);
    if (end == tok || *end != '\0')
        return -1;
    if (!isfinite(v))
        return -1;
    *out = v;
    return 0;
}

/* Parse a whole token as a long in [lo, hi]. */
static int parse_long(const char *tok, long lo, long hi, long *out)
{
    char *end;
    long v;
    if (*tok == '\0')
        return -1;
    errno = 0;
    v = strtol(tok, &end, 10);
    if (end == tok || *end != '\0' || errno == ERANGE || v < lo || v > hi)
        return -1;
    *out = v;
    return 0;
}

/* Split s in place at whitespace; store up to max token pointers. Returns
 * the number of tokens (which may exceed max). */
static size_t split_ws(char *s, char **tok, size_t max)
{
    size_t n = 0;
    while (*s) {
        while (is_space(*s))
            s++;
        if (!*s)
            break;
        if (n < max)
            tok[n] = s;
        n++;
        while (*s && !is_space(*s))
            s++;
        if (*s)
            *s++ = '\0';
    }
    return n;
}

/* ---- reader ------------------------------------------------------------- */

typedef struct {
    FILE *fp;
    const char *path;
    long line;          /* number of the line in buf */
    char *buf;
    size_t cap;
    size_t len;
    char *err;
    size_t err_len;
} reader;

#if defined(__GNUC__)
__attribute__((format(printf, 3, 4)))
#endif
static void fail(reader *r, long line, const char *fmt, ...)
{
    va_list ap;
    int n;
    if (!r->err || r->err_len == 0)
        return;
    n = snprintf(r->err, r->err_len, "%s:%ld: ", r->path, line);
    if (n < 0 || (size_t)n >= r->err_len)
        return;
    va_start(ap, fmt);
    vsnprintf(r->err + n, r->err_len - (size_t)n, fmt, ap);
    va_end(ap);
}

/* Read the next line into r->buf without its line terminator.
 * Returns 1 for a line, 0 at end of file, -1 on error. */
static int next_line(reader *r)
{
    ssize_t n;
    errno = 0;
    n = getline(&r->buf, &r->cap, r->fp);
    if (n < 0) {
        if (ferror(r->fp)) {
            fail(r, r->line + 1, "read error: %s", strerror(errno));
            return -1;
        }
        if (errno == ENOMEM) {
            fail(r, r->line + 1, "out of memory");
            return -1;
        }
        return 0;
    }
    r->line++;
    r->len = (size_t)n;
    if (strlen(r->buf) != r->len) {
        fail(r, r->line, "NUL byte in line (not a text file?)");
        return -1;
    }
    while (r->len > 0 &&
           (r->buf[r->len - 1] == '\n' || r->buf[r->len - 1] == '\r'))
        r->buf[--r->len] = '\0';
    return 1;
}

static int is_blank(const char *s)
{
    while (is_space(*s))
        s++;
    return *s == '\0';
}

/* Parse a quoted string starting at *p == '"'; advance *p past the closing
 * quote; return the unescaped content (malloc'd) or NULL on error
 * (*unterminated set). */
static char *parse_quoted(const char **p, int *unterminated)
{
    const char *s = *p + 1;
    size_t n = 0;
    char *out = malloc(strlen(s) + 1);
    *unterminated = 0;
    if (!out)
        return NULL;
    while (*s && *s != '"') {
        if (*s == '\\' && s[1])
            s++;
        out[n++] = *s++;
    }
    if (*s != '"') {
        free(out);
        *unterminated = 1;
        return NULL;
    }
    out[n] = '\0';
    *p = s + 1;
    return out;
}

static int parse_properties(reader *r, exyz_frame *f, const char *value)
{
    char *copy = dup_str(value);
    char *fields[3];
    char *s, *next;
    size_t cap = 0;
    int nf = 0;
    size_t tok = 0;
    if (!copy) {
        fail(r, r->line, "out of memory");
        return -1;
    }
    f->species_col = f->pos_col = f->forces_col = -1;
    s = copy;
    for (;;) {
        next = strchr(s, ':');
        if (next)
            *next = '\0';
        fields[nf++] = s;
        if (nf == 3) {
            exyz_column *c;
            long count;
            size_t k;
            nf = 0;
            if (fields[0][0] == '\0') {
                fail(r, r->line, "Properties: empty column name");
                goto bad;
            }
            if (strlen(fields[1]) != 1 || !strchr("SRIL", fields[1][0])) {
                fail(r, r->line,
                     "Properties: column '%s' has type '%s' (expected S, R, I or L)",
                     fields[0], fields[1]);
                goto bad;
            }
            if (parse_long(fields[2], 1, 1000000, &count) != 0) {
                fail(r, r->line, "Properties: column '%s' has count '%s'",
                     fields[0], fields[2]);
                goto bad;
            }
            for (k = 0; k < f->n_cols; k++) {
                if (strcmp(f->cols[k].name, fields[0]) == 0) {
                    fail(r, r->line, "Properties: column '%s' appears twice",
                         fields[0]);
                    goto bad;
                }
            }
            if (f->n_cols == cap) {
                size_t ncap = cap ? 2 * cap : 8;
                exyz_column *nc = realloc(f->cols, ncap * sizeof *nc);
                if (!nc) {
                    fail(r, r->line, "out of memory");
                    goto bad;
                }
                f->cols = nc;
                cap = ncap;
            }
            c = &f->cols[f->n_cols];
            c->name = dup_str(fields[0]);
            if (!c->name) {
                fail(r, r->line, "out of memory");
                goto bad;
            }
            c->type = fields[1][0];
            c->count = (int)count;
            f->n_cols++;
            if (strcmp(c->name, "species") == 0) {
                if (c->type != 'S' || c->count != 1) {
                    fail(r, r->line, "Properties: species must be species:S:1");
                    goto bad;
                }
                f->species_col = (int)(f->n_cols - 1);
                f->species_tok = tok;
            } else if (strcmp(c->name, "pos") == 0 ||
                       strcmp(c->name, "positions") == 0) {
                if (f->pos_col >= 0) {
                    fail(r, r->line,
                         "Properties: both pos and positions columns");
                    goto bad;
                }
                if (c->type != 'R' || c->count != 3) {
                    fail(r, r->line, "Properties: %s must be %s:R:3", c->name,
                         c->name);
                    goto bad;
                }
                f->pos_col = (int)(f->n_cols - 1);
                f->pos_tok = tok;
            } else if (strcmp(c->name, "forces") == 0) {
                f->forces_col = (int)(f->n_cols - 1);
                f->forces_tok = tok;
            }
            tok += (size_t)c->count;
            if (tok > 1000000) {
                fail(r, r->line, "Properties: more than 1000000 values per atom");
                goto bad;
            }
        }
        if (!next)
            break;
        s = next + 1;
    }
    if (nf != 0) {
        fail(r, r->line,
             "Properties=%s: expected name:type:count triples", value);
        goto bad;
    }
    if (f->species_col < 0) {
        fail(r, r->line, "Properties=%s has no species:S:1 column", value);
        goto bad;
    }
    if (f->pos_col < 0) {
        fail(r, r->line, "Properties=%s has no pos:R:3 column", value);
        goto bad;
    }
    f->n_tokens = tok;
    free(copy);
    return 0;
bad:
    free(copy);
    return -1;
}

static int parse_lattice(reader *r, exyz_frame *f, const char *value)
{
    char *copy = dup_str(value);
    char *tok[10];
    size_t n, k;
    if (!copy) {
        fail(r, r->line, "out of memory");
        return -1;
    }
    n = split_ws(copy, tok, 10);
    if (n != 9) {
        fail(r, r->line, "Lattice=\"%s\": expected 9 numbers, found %zu",
             value, n);
        free(copy);
        return -1;
    }
    for (k = 0; k < 9; k++) {
        if (parse_double(tok[k], &f->cell[k]) != 0) {
            fail(r, r->line, "Lattice: '%s' is not a finite number", tok[k]);
            free(copy);
            return -1;
        }
    }
    f->has_cell = 1;
    free(copy);
    return 0;
}

static int parse_bool(const char *s, int *out)
{
    if (equal_nocase(s, "t") || equal_nocase(s, "true") || strcmp(s, "1") == 0) {
        *out = 1;
        return 0;
    }
    if (equal_nocase(s, "f") || equal_nocase(s, "false") || strcmp(s, "0") == 0) {
        *out = 0;
        return 0;
    }
    return -1;
}

static int parse_pbc(reader *r, exyz_frame *f, const char *value)
{
    char *copy = dup_str(value);
    char *tok[4];
    size_t n, k;
    if (!copy) {
        fail(r, r->line, "out of memory");
        return -1;
    }
    n = split_ws(copy, tok, 4);
    if (n != 3) {
        fail(r, r->line, "pbc=\"%s\": expected 3 flags (T or F), found %zu",
             value, n);
        free(copy);
        return -1;
    }
    for (k = 0; k < 3; k++) {
        if (parse_bool(tok[k], &f->pbc[k]) != 0) {
            fail(r, r->line, "pbc: '%s' is not T or F", tok[k]);
            free(copy);
            return -1;
        }
    }
    free(copy);
    return 0;
}

/* Parse the comment line (r->buf) into f->kv and the known keys. */
static int parse_comment(reader *r, exyz_frame *f)
{
    const char *p = r->buf;
    size_t cap = 0;
    int seen_lattice = 0, seen_pbc = 0, seen_props = 0;
    const char *props = "species:S:1:pos:R:3";
    char *props_owned = NULL;
    int unterminated;

    for (;;) {
        const char *start, *q;
        char *key = NULL, *value = NULL;
        exyz_kv *kv;
        while (is_space(*p))
            p++;
        if (!*p)
            break;
        start = p;
        if (*p == '"') {
            key = parse_quoted(&p, &unterminated);
            if (!key) {
                fail(r, r->line, unterminated ? "unterminated quote in key"
                                              : "out of memory");
                goto bad;
            }
        } else {
            while (*p && !is_space(*p) && *p != '=')
                p++;
            key = dup_range(start, (size_t)(p - start));
            if (!key) {
                fail(r, r->line, "out of memory");
                goto bad;
            }
        }
        if (key[0] == '\0') {
            fail(r, r->line, "key=value pair with an empty key");
            free(key);
            goto bad;
        }
        q = p;
        while (is_space(*q))
            q++;
        if (*q == '=') {
            p = q + 1;
            while (is_space(*p))
                p++;
            if (*p == '"') {
                value = parse_quoted(&p, &unterminated);
                if (!value) {
                    fail(r, r->line,
                         unterminated ? "unterminated quote in value of %s"
                                      : "out of memory: %s", key);
                    free(key);
                    goto bad;
                }
            } else if (*p == '{' || *p == '[') {
                char open = *p, close = open == '{' ? '}' : ']';
                int depth = 0;
                const char *v = p;
                do {
                    if (*p == open)
                        depth++;
                    else if (*p == close)
                        depth--;
                    p++;
                } while (*p && depth > 0);
                if (depth > 0) {
                    fail(r, r->line, "unterminated '%c' in value of %s", open,
                         key);
                    free(key);
                    goto bad;
                }
                value = dup_range(v, (size_t)(p - v));
            } else {
                const char *v = p;
                while (*p && !is_space(*p))
                    p++;
                value = dup_range(v, (size_t)(p - v));
            }
        } else {
            value = dup_str("T");
        }
        if (!value) {
            fail(r, r->line, "out of memory");
            free(key);
            goto bad;
        }
        /* a second value of a key would be silently dropped by whoever reads it */
        for (size_t k = 0; k < f->n_kv; k++)
            if (strcmp(f->kv[k].key, key) == 0) {
                fail(r, r->line, "key '%s' given twice", key);
                free(key);
                free(value);
                goto bad;
            }
        if (f->n_kv == cap) {
            size_t ncap = cap ? 2 * cap : 8;
            exyz_kv *nk = realloc(f->kv, ncap * sizeof *nk);
            if (!nk) {
                fail(r, r->line, "out of memory");
                free(key);
                free(value);
                goto bad;
            }
            f->kv = nk;
            cap = ncap;
        }
        kv = &f->kv[f->n_kv++];
        kv->key = key;
        kv->value = value;
        kv->raw = dup_range(start, (size_t)(p - start));
        if (!kv->raw) {
            fail(r, r->line, "out of memory");
            goto bad;
        }

        if (equal_nocase(key, "Lattice")) {
            if (seen_lattice++) {
                fail(r, r->line, "Lattice given twice");
                goto bad;
            }
            if (parse_lattice(r, f, value) != 0)
                goto bad;
        } else if (equal_nocase(key, "pbc")) {
            if (seen_pbc++) {
                fail(r, r->line, "pbc given twice");
                goto bad;
            }
            if (parse_pbc(r, f, value) != 0)
                goto bad;
        } else if (equal_nocase(key, "Properties")) {
            if (seen_props++) {
                fail(r, r->line, "Properties given twice");
                goto bad;
            }
            props = value;
        }
    }
    if (!seen_props) {
        props_owned = dup_str(props);
        if (!props_owned) {
            fail(r, r->line, "out of memory");
            goto bad;
        }
        props = props_owned;
    }
    if (parse_properties(r, f, props) != 0)
        goto bad;
    free(props_owned);
    props_owned = NULL;
    if (f->has_cell && !seen_pbc)
        f->pbc[0] = f->pbc[1] = f->pbc[2] = 1;
    if (!f->has_cell && (f->pbc[0] || f->pbc[1] || f->pbc[2])) {
        fail(r, r->line, "pbc has a periodic direction but there is no Lattice");
        goto bad;
    }
    return 0;
bad:
    free(props_owned);
    return -1;
}

static void free_frame(exyz_frame *f)
{
    size_t k;
    for (k = 0; k < f->n_kv; k++) {
        free(f->kv[k].key);
        free(f->kv[k].value);
        free(f->kv[k].raw);
    }
    free(f->kv);
    for (k = 0; k < f->n_cols; k++)
        free(f->cols[k].name);
    free(f->cols);
    if (f->atom_lines) {
        for (k = 0; k < f->n_atoms; k++)
            free(f->atom_lines[k]);
    }
    free(f->atom_lines);
    free(f->tokens);
    free(f->numbers);
    free(f->positions);
    free(f->forces);
    memset(f, 0, sizeof *f);
}

/* Read the atom lines of frame f (its header is parsed). */
static int read_atoms(reader *r, exyz_frame *f, size_t n_declared)
{
    size_t cap = 0, k;
    size_t nt = f->n_tokens;
    char **tok_tmp = malloc((nt + 1) * sizeof *tok_tmp);
    if (!tok_tmp) {
        fail(r, r->line, "out of memory");
        return -1;
    }
    f->n_atoms = 0;
    for (k = 0; k < n_declared; k++) {
        int rc;
        size_t nfound, j;
        char *line;
        double *xyz;
        if (k == cap) {
            /* the first block holds at most 2^20 tokens (a short file may
             * declare many atoms and columns); then doubling, as lines come */
            size_t first = ((size_t)1 << 20) / (nt ? nt : 1);
            size_t ncap = cap ? 2 * cap : (first < 1 ? 1 : first > 1024 ? 1024 : first);
            char **nl, **ntok;
            int *nn;
            double *np;
            if (ncap > n_declared)
                ncap = n_declared;
            if (ncap > SIZE_MAX / sizeof *ntok / (nt ? nt : 1)) {
                fail(r, r->line, "out of memory: %zu atoms of %zu columns", ncap, nt);
                goto bad;
            }
            nl = realloc(f->atom_lines, ncap * sizeof *nl);
            if (nl)
                f->atom_lines = nl;
            ntok = nl ? realloc(f->tokens, ncap * nt * sizeof *ntok) : NULL;
            if (ntok)
                f->tokens = ntok;
            nn = ntok ? realloc(f->numbers, ncap * sizeof *nn) : NULL;
            if (nn)
                f->numbers = nn;
            np = nn ? realloc(f->positions, 3 * ncap * sizeof *np) : NULL;
            if (np)
                f->positions = np;
            if (!np) {
                fail(r, r->line, "out of memory");
                goto bad;
            }
            cap = ncap;
        }
        rc = next_line(r);
        if (rc < 0)
            goto bad;
        if (rc == 0) {
            fail(r, r->line + 1,
                 "unexpected end of file: the frame at line %ld declares %zu atoms, found %zu",
                 f->line, n_declared, k);
            goto bad;
        }
        /* Take over the line buffer. */
        line = r->buf;
        r->buf = NULL;
        r->cap = 0;
        f->atom_lines[k] = line;
        f->n_atoms = k + 1;
        nfound = split_ws(line, tok_tmp, nt + 1);
        if (nfound != nt) {
            fail(r, r->line,
                 "atom line has %zu columns, expected %zu (from Properties)",
                 nfound, nt);
            goto bad;
        }
        for (j = 0; j < nt; j++)
            f->tokens[k * nt + j] = tok_tmp[j];
        f->numbers[k] = ecenet_element_number(tok_tmp[f->species_tok]);
        if (f->numbers[k] <= 0) {
            fail(r, r->line, "unknown element '%s'", tok_tmp[f->species_tok]);
            goto bad;
        }
        xyz = f->positions + 3 * k;
        for (j = 0; j < 3; j++) {
            const char *t = tok_tmp[f->pos_tok + j];
            if (parse_double(t, &xyz[j]) != 0) {
                fail(r, r->line, "position '%s' is not a finite number", t);
                goto bad;
            }
        }
    }
    free(tok_tmp);
    return 0;
bad:
    free(tok_tmp);
    return -1;
}

long exyz_atom_line(const exyz_frame *f, size_t k)
{
    return f->line + 2 + (long)k;
}

int exyz_is_periodic(const exyz_frame *f)
{
    return f->has_cell && (f->pbc[0] || f->pbc[1] || f->pbc[2]);
}

void exyz_free(exyz_file *file)
{
    size_t k;
    if (!file)
        return;
    for (k = 0; k < file->n_frames; k++)
        free_frame(&file->frames[k]);
    free(file->frames);
    free(file->path);
    memset(file, 0, sizeof *file);
}

int exyz_read(const char *path, exyz_file *out, char *err, size_t err_len)
{
    reader r;
    exyz_file file;
    size_t cap = 0;
    int use_stdin = strcmp(path, "-") == 0;

    memset(&r, 0, sizeof r);
    memset(&file, 0, sizeof file);
    memset(out, 0, sizeof *out);
    r.path = use_stdin ? "<stdin>" : path;
    r.err = err;
    r.err_len = err_len;
    if (err && err_len)
        err[0] = '\0';
    file.path = dup_str(r.path);
    if (!file.path) {
        if (err && err_len)
            snprintf(err, err_len, "%s: out of memory", r.path);
        return -1;
    }
    if (use_stdin) {
        r.fp = stdin;
    } else {
        r.fp = fopen(path, "r");
        if (!r.fp) {
            if (err && err_len)
                snprintf(err, err_len, "%s: %s", path, strerror(errno));
            free(file.path);
            return -1;
        }
    }

    for (;;) {
        exyz_frame *f;
        long count;
        long blank_line = 0;
        int rc;
        char *s, *e;

        /* The atom count, or the end of the file (blank lines may trail). */
        for (;;) {
            rc = next_line(&r);
            if (rc <= 0 || !is_blank(r.buf))
                break;
            if (!blank_line)
                blank_line = r.line;
        }
        if (rc < 0)
            goto bad;
        if (rc == 0)
            break;
        if (blank_line) {
            fail(&r, blank_line,
                 "blank line where a frame's atom count was expected");
            goto bad;
        }
        s = r.buf;
        while (is_space(*s))
            s++;
        e = s + strlen(s);
        while (e > s && is_space(e[-1]))
            *--e = '\0';
        if (parse_long(s, 0, 1000000000L, &count) != 0) {
            fail(&r, r.line, "expected the number of atoms, found '%s'", s);
            goto bad;
        }

        if (file.n_frames == cap) {
            size_t ncap = cap ? 2 * cap : 4;
            exyz_frame *nf = realloc(file.frames, ncap * sizeof *nf);
            if (!nf) {
                fail(&r, r.line, "out of memory");
                goto bad;
            }
            file.frames = nf;
            cap = ncap;
        }
        f = &file.frames[file.n_frames++];
        memset(f, 0, sizeof *f);
        f->species_col = f->pos_col = f->forces_col = -1;
        f->line = r.line;

        rc = next_line(&r);
        if (rc < 0)
            goto bad;
        if (rc == 0) {
            fail(&r, r.line + 1,
                 "unexpected end of file: the frame at line %ld has no comment line",
                 f->line);
            goto bad;
        }
        if (parse_comment(&r, f) != 0)
            goto bad;
        if (read_atoms(&r, f, (size_t)count) != 0)
            goto bad;
    }
    if (file.n_frames == 0) {
        fail(&r, r.line > 0 ? r.line : 1, "no frames (empty file)");
        goto bad;
    }
    if (!use_stdin)
        fclose(r.fp);
    free(r.buf);
    *out = file;
    return 0;
bad:
    if (!use_stdin)
        fclose(r.fp);
    free(r.buf);
    exyz_free(&file);
    return -1;
}

/* ---- writer ------------------------------------------------------------- */

/* Keys with results of a previous calculation: replaced or dropped. */
static int is_result_key(const char *key)
{
    return strcmp(key, "energy") == 0 || strcmp(key, "free_energy") == 0 ||
           strcmp(key, "stress") == 0 || strcmp(key, "virial") == 0;
}

static void write_properties(FILE *fp, const exyz_frame *f)
{
    size_t c;
    fputs("Properties=", fp);
    for (c = 0; c < f->n_cols; c++) {
        if (c > 0)
            fputc(':', fp);
        if ((int)c == f->forces_col && f->has_results)
            fputs("forces:R:3", fp);
        else
            fprintf(fp, "%s:%c:%d", f->cols[c].name, f->cols[c].type,
                    f->cols[c].count);
    }
    if (f->forces_col < 0 && f->has_results)
        fputs(":forces:R:3", fp);
}

static void write_frame(FILE *fp, const exyz_frame *f)
{
    size_t k, c;
    int sep = 0, wrote_props = 0;
    fprintf(fp, "%zu\n", f->n_atoms);
    for (k = 0; k < f->n_kv; k++) {
        const exyz_kv *kv = &f->kv[k];
        if (f->has_results && is_result_key(kv->key))
            continue;
        if (sep)
            fputc(' ', fp);
        sep = 1;
        if (equal_nocase(kv->key, "Properties")) {
            write_properties(fp, f);
            wrote_props = 1;
        } else {
            fputs(kv->raw, fp);
        }
    }
    if (!wrote_props) {
        if (sep)
            fputc(' ', fp);
        sep = 1;
        write_properties(fp, f);
    }
    if (f->has_results) {
        fprintf(fp, " energy=%.17g", f->energy);
        if (f->has_stress) {
            /* Full symmetric 3x3 in ASE's order from Voigt xx yy zz yz xz xy. */
            const double *v = f->stress;
            double m[9];
            m[0] = v[0]; m[1] = v[5]; m[2] = v[4];
            m[3] = v[5]; m[4] = v[1]; m[5] = v[3];
            m[6] = v[4]; m[7] = v[3]; m[8] = v[2];
            fputs(" stress=\"", fp);
            for (c = 0; c < 9; c++)
                fprintf(fp, c ? " %.17g" : "%.17g", m[c]);
            fputc('"', fp);
        }
    }
    fputc('\n', fp);

    for (k = 0; k < f->n_atoms; k++) {
        char *const *tok = f->tokens + k * f->n_tokens;
        size_t t = 0;
        int first = 1;
        for (c = 0; c < f->n_cols; c++) {
            int j;
            int count = f->cols[c].count;
            if ((int)c == f->pos_col) {
                for (j = 0; j < 3; j++) {
                    fprintf(fp, first ? "%.17g" : " %.17g",
                            f->positions[3 * k + (size_t)j]);
                    first = 0;
                }
            } else if ((int)c == f->forces_col && f->has_results) {
                for (j = 0; j < 3; j++) {
                    fprintf(fp, first ? "%.17g" : " %.17g",
                            f->forces[3 * k + (size_t)j]);
                    first = 0;
                }
            } else {
                for (j = 0; j < count; j++) {
                    if (!first)
                        fputc(' ', fp);
                    fputs(tok[t + (size_t)j], fp);
                    first = 0;
                }
            }
            t += (size_t)count;
        }
        if (f->forces_col < 0 && f->has_results) {
            int j;
            for (j = 0; j < 3; j++)
                fprintf(fp, " %.17g", f->forces[3 * k + (size_t)j]);
        }
        fputc('\n', fp);
    }
}

static int write_all(FILE *fp, const exyz_file *file)
{
    size_t k;
    for (k = 0; k < file->n_frames; k++)
        write_frame(fp, &file->frames[k]);
    return ferror(fp) ? -1 : 0;
}

static int write_at(const char *path, const exyz_file *file, char *err, size_t err_len);

int exyz_write(const char *path, const exyz_file *file, char *err,
               size_t err_len)
{
    /* A symbolic link is written through: the new file replaces its
     * target, not the link (a dangling link, which realpath cannot
     * resolve, is replaced) */
    struct stat sb;
    char *resolved = NULL;
    int rc;
    if (path && lstat(path, &sb) == 0 && S_ISLNK(sb.st_mode))
        resolved = realpath(path, NULL);
    rc = write_at(resolved ? resolved : path, file, err, err_len);
    free(resolved);
    return rc;
}

static int write_at(const char *path, const exyz_file *file, char *err, size_t err_len)
{
    char *tmp;
    int fd;
    FILE *fp;
    mode_t mask;
    size_t k;

    if (err && err_len)
        err[0] = '\0';
    for (k = 0; k < file->n_frames; k++) {
        const exyz_frame *f = &file->frames[k];
        if (f->has_results && f->n_atoms > 0 && !f->forces) {
            if (err && err_len)
                snprintf(err, err_len, "frame %zu has no forces", k);
            return -1;
        }
    }

    if (!path || strcmp(path, "-") == 0) {
        errno = 0;
        if (write_all(stdout, file) != 0 || fflush(stdout) != 0) {
            if (err && err_len)
                snprintf(err, err_len, "<stdout>: write error: %s",
                         strerror(errno));
            return -1;
        }
        return 0;
    }

    /* An existing non-regular file (a device, a FIFO) is written in place:
     * renaming over it would replace it. */
    {
        struct stat sb;
        if (stat(path, &sb) == 0 && !S_ISREG(sb.st_mode)) {
            fp = fopen(path, "w");
            if (!fp) {
                if (err && err_len)
                    snprintf(err, err_len, "%s: %s", path, strerror(errno));
                return -1;
            }
            errno = 0;
            if (write_all(fp, file) != 0 || fflush(fp) != 0) {
                if (err && err_len)
                    snprintf(err, err_len, "%s: write error: %s", path,
                             strerror(errno ? errno : EIO));
                fclose(fp);
                return -1;
            }
            if (fclose(fp) != 0) {
                if (err && err_len)
                    snprintf(err, err_len, "%s: write error: %s", path,
                             strerror(errno));
                return -1;
            }
            return 0;
        }
    }

    tmp = malloc(strlen(path) + sizeof ".tmp.XXXXXX");
    if (!tmp) {
        if (err && err_len)
            snprintf(err, err_len, "%s: out of memory", path);
        return -1;
    }
    strcpy(tmp, path);
    strcat(tmp, ".tmp.XXXXXX");
    fd = mkstemp(tmp);
    if (fd < 0) {
        if (err && err_len)
            snprintf(err, err_len, "%s: cannot create a temporary file: %s",
                     path, strerror(errno));
        free(tmp);
        return -1;
    }
    /* mkstemp creates 0600; give the file the usual 0666 & ~umask. */
    mask = umask(0);
    umask(mask);
    (void)fchmod(fd, (mode_t)(0666 & ~mask));
    fp = fdopen(fd, "w");
    if (!fp) {
        if (err && err_len)
            snprintf(err, err_len, "%s: %s", tmp, strerror(errno));
        close(fd);
        unlink(tmp);
        free(tmp);
        return -1;
    }
    errno = 0;
    if (write_all(fp, file) != 0 || fflush(fp) != 0) {
        if (err && err_len)
            snprintf(err, err_len, "%s: write error: %s", path,
                     strerror(errno ? errno : EIO));
        fclose(fp);
        unlink(tmp);
        free(tmp);
        return -1;
    }
    if (fclose(fp) != 0) {
        if (err && err_len)
            snprintf(err, err_len, "%s: write error: %s", path,
                     strerror(errno));
        unlink(tmp);
        free(tmp);
        return -1;
    }
    if (rename(tmp, path) != 0) {
        if (err && err_len)
            snprintf(err, err_len, "%s: cannot rename %s into place: %s",
                     path, tmp, strerror(errno));
        unlink(tmp);
        free(tmp);
        return -1;
    }
    free(tmp);
    return 0;
}
