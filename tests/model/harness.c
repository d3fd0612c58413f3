/* The shared helpers of check_model (declared in harness.h): golden model files
 * read whole, edited and written to temporary files, loads that must fail. */
#define _POSIX_C_SOURCE 200809L
#include "harness.h"

/* ---- golden models ---------------------------------------------------------- */

static char *golden_path(const char *case_name)
{
    char buf[4096];
    snprintf(buf, sizeof buf, "%s/golden/%s.model.safetensors", tu_data_dir(), case_name);
    return strdup(buf);
}

ecenet_model *load_ok(const char *case_name)
{
    char err[1024], *path = golden_path(case_name);
    ecenet_model *m = NULL;
    ecenet_status s = ecenet_model_load(path, &m, err, sizeof err);
    ck_assert_msg(s == ECENET_OK, "loading %s failed (%d): %s", path, (int)s, err);
    ck_assert_ptr_nonnull(m);
    free(path);
    return m;
}

void raw_read(const char *case_name, raw_file *r)
{
    char *path = golden_path(case_name);
    FILE *f = fopen(path, "rb");
    uint64_t n = 0;
    int i;
    ck_assert_msg(f != NULL, "cannot open %s", path);
    fseek(f, 0, SEEK_END);
    r->raw_len = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    r->raw = malloc(r->raw_len);
    ck_assert(fread(r->raw, 1, r->raw_len, f) == r->raw_len);
    fclose(f);
    free(path);
    for (i = 7; i >= 0; i--) n = (n << 8) | r->raw[i];
    r->json = malloc((size_t)n + 1);
    memcpy(r->json, r->raw + 8, (size_t)n);
    r->json[n] = '\0';
    r->data = r->raw + 8 + n;
    r->data_len = r->raw_len - 8 - (size_t)n;
}

void raw_free(raw_file *r)
{
    free(r->json);
    free(r->raw);
}

/* ---- temporary files ------------------------------------------------------- */

/* Writes bytes to a fresh temporary file; returns its malloc'd path. */
char *write_tmp(const void *a, size_t na, const void *b, size_t nb)
{
    const char *dir = getenv("TMPDIR");
    char tmpl[4096];
    FILE *f;
    int fd;
    snprintf(tmpl, sizeof tmpl, "%s/ecenet_check_model_XXXXXX", dir && *dir ? dir : "/tmp");
    fd = mkstemp(tmpl);
    ck_assert_msg(fd >= 0, "mkstemp failed");
    f = fdopen(fd, "wb");
    ck_assert(f != NULL);
    if (na) ck_assert(fwrite(a, 1, na, f) == na);
    if (nb) ck_assert(fwrite(b, 1, nb, f) == nb);
    ck_assert(fclose(f) == 0);
    return strdup(tmpl);
}

/* A safetensors file with this header text (padded to a multiple of 8, as
 * the format asks) and data section. */
char *write_st(const char *json, const void *data, size_t data_len)
{
    size_t n = strlen(json), padded = (n + 7) / 8 * 8, i;
    unsigned char *buf = malloc(8 + padded);
    char *path;
    for (i = 0; i < 8; i++) buf[i] = (unsigned char)((uint64_t)padded >> (8 * i));
    memcpy(buf + 8, json, n);
    memset(buf + 8 + n, ' ', padded - n);
    path = write_tmp(buf, 8 + padded, data, data_len);
    free(buf);
    return path;
}

/* ---- edited golden models -------------------------------------------------- */

/* s with every `from` replaced by `to` (at least one must occur). */
char *replace(const char *s, const char *from, const char *to)
{
    size_t nf = strlen(from), nt = strlen(to), count = 0;
    const char *p;
    char *out, *o;
    for (p = strstr(s, from); p; p = strstr(p + nf, from)) count++;
    ck_assert_msg(count > 0, "test setup: '%s' not found in the header", from);
    out = malloc(strlen(s) + count * nt + 1);
    o = out;
    while ((p = strstr(s, from)) != NULL) {
        memcpy(o, s, (size_t)(p - s));
        o += p - s;
        memcpy(o, to, nt);
        o += nt;
        s = p + nf;
    }
    strcpy(o, s);
    return out;
}

/* Golden model with one header edit (every occurrence of `from`). */
char *golden_edit(const char *case_name, const char *from, const char *to)
{
    raw_file r;
    char *json, *path;
    raw_read(case_name, &r);
    json = replace(r.json, from, to);
    path = write_st(json, r.data, r.data_len);
    free(json);
    raw_free(&r);
    return path;
}

/* Golden model with 8 bytes of the data section overwritten. */
char *golden_poke(const char *case_name, size_t offset, const void *value8)
{
    raw_file r;
    char *path;
    raw_read(case_name, &r);
    ck_assert(offset + 8 <= r.data_len);
    memcpy(r.data + offset, value8, 8);
    path = write_tmp(r.raw, r.raw_len, NULL, 0);
    raw_free(&r);
    return path;
}

/* Data-section offset of a tensor entry of a golden model (the golden tensors
 * are aligned, so the reader's pointer is buffer + begin). */
size_t golden_offset(const char *case_name, const char *name, int64_t index)
{
    ecn_safetensors *st = tu_open_golden(case_name, "model");
    const ecn_tensor *t = ecn_st_find(st, name);
    size_t off;
    ck_assert_msg(t != NULL, "test setup: no tensor '%s' in %s", name, case_name);
    off = (size_t)((const char *)t->data - (const char *)st->buffer) + (size_t)index * 8;
    ecn_st_close(st);
    return off;
}

/* Value of a tensor entry of a golden model. */
double golden_value(const char *case_name, const char *name, int64_t index)
{
    ecn_safetensors *st = tu_open_golden(case_name, "model");
    const ecn_tensor *t = ecn_st_find(st, name);
    double v;
    ck_assert_msg(t != NULL, "test setup: no tensor '%s' in %s", name, case_name);
    ck_assert(index < t->numel);
    v = ((const double *)t->data)[index];
    ecn_st_close(st);
    return v;
}

char *diamond_edit(const char *from, const char *to) { return golden_edit("diamond", from, to); }

/* ---- checks ---------------------------------------------------------------- */

/* Loading `path` fails with `want`; the message starts with the path and
 * contains each of the (up to two) needles. Removes the file. */
void expect_fail(char *path, ecenet_status want, const char *needle1, const char *needle2)
{
    char err[2048];
    ecenet_model *m = (ecenet_model *)(void *)&m; /* must be reset to NULL */
    ecenet_status s = ecenet_model_load(path, &m, err, sizeof err);
    if (getenv("ECENET_TEST_VERBOSE")) printf("[%d] %s\n", (int)s, err);
    ck_assert_msg(s == want, "status %d, expected %d; message: %s", (int)s, (int)want, err);
    ck_assert_ptr_null(m);
    ck_assert_msg(strncmp(err, path, strlen(path)) == 0, "message does not start with the path: %s",
                  err);
    if (needle1) ck_assert_msg(strstr(err, needle1), "message lacks '%s': %s", needle1, err);
    if (needle2) ck_assert_msg(strstr(err, needle2), "message lacks '%s': %s", needle2, err);
    unlink(path);
    free(path);
}

int contains(const char *hay, const char *needle) { return strstr(hay, needle) != NULL; }
