/* Safetensors reader (see safetensors.h and doc/file-format.md).
 *
 * The whole file is read with stdio; nothing is mapped. Every number in the
 * header is checked before it is used as a size or an offset, so a truncated
 * or hostile file gives a message, never an out-of-bounds read.
 *
 * On failure errno tells the caller what kind of failure it was (the header
 * has no status out-parameter): EINVAL malformed file, ENOMEM allocation,
 * anything else an I/O error (the errno of the failing call, or EIO). */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <cjson/cJSON.h>
#include "error.h"
#include "safetensors.h"

/* Largest header accepted. The reference implementation uses the same
 * limit; a real model header is a few tens of kB. */
#define ST_MAX_HEADER ((uint64_t)100 * 1000 * 1000)
/* Offsets and dimensions are JSON numbers (doubles): above 2^53 they are not
 * exact any more, so refuse them rather than guess. */
#define ST_MAX_INT 9007199254740992.0

static const struct {
    const char *name;
    ecn_dtype dtype;
    size_t size;
} st_dtypes[] = {
    {"F64", ECN_DT_F64, 8}, {"F32", ECN_DT_F32, 4}, {"I64", ECN_DT_I64, 8},
    {"I32", ECN_DT_I32, 4}, {"U8", ECN_DT_U8, 1},   {"BOOL", ECN_DT_BOOL, 1},
};

static size_t dtype_size(ecn_dtype dt)
{
    size_t i;
    for (i = 0; i < sizeof st_dtypes / sizeof st_dtypes[0]; i++)
        if (st_dtypes[i].dtype == dt) return st_dtypes[i].size;
    return 0;
}

static char *dup_str(const char *s)
{
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d) memcpy(d, s, n);
    return d;
}

static int cmp_tensor(const void *a, const void *b)
{
    return strcmp(((const ecn_tensor *)a)->name, ((const ecn_tensor *)b)->name);
}

/* a tensor's byte range in the data section, for the tiling check */
typedef struct {
    uint64_t b, e;
    size_t k;
} st_range;

static int cmp_range(const void *pa, const void *pb)
{
    const st_range *a = pa, *b = pb;
    if (a->b != b->b)
        return a->b < b->b ? -1 : 1;
    if (a->e != b->e)
        return a->e < b->e ? -1 : 1;
    return 0;
}

long ecn_json_nul_escape(const char *json)
{
    for (const char *u = strstr(json, "\\u0000"); u; u = strstr(u + 1, "\\u0000")) {
        const size_t at = (size_t)(u - json);
        size_t nb = 1; /* backslashes ending at u: an odd count makes u an escape */
        while (nb <= at && json[at - nb] == '\\')
            nb++;
        if (nb % 2)
            return (long)at;
    }
    return -1;
}

/* Record a failure: message into err, errno set to e (see the top). */
static void st_err(int e, char *err, size_t err_len, const char *fmt, ...) ECN_PRINTF(4, 5);
static void st_err(int e, char *err, size_t err_len, const char *fmt, ...)
{
    if (err && err_len > 0) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, err_len, fmt, ap);
        va_end(ap);
    }
    errno = e;
}

/* A JSON number that is a non-negative integer below 2^53. */
static int json_uint(const cJSON *v, uint64_t *out)
{
    double d;
    if (!cJSON_IsNumber(v)) return 0;
    d = v->valuedouble;
    if (!(d >= 0.0) || d > ST_MAX_INT || floor(d) != d) return 0;
    *out = (uint64_t)d;
    return 1;
}

/* Reads exactly n bytes; 0 on a short read (errno set by stdio, if at all). */
static int read_exact(FILE *f, void *buf, size_t n)
{
    errno = 0;
    return n == 0 || fread(buf, 1, n, f) == n;
}

static void read_failed(const char *path, const char *what, char *err, size_t err_len)
{
    int e = errno ? errno : EIO;
    st_err(e, err, err_len, "%s: read error in %s: %s", path, what, strerror(e));
}

/* Validate one tensor entry and fill t (except data). Returns 0 and writes
 * err on failure. */
static int parse_entry(const char *path, const cJSON *item, uint64_t data_len, ecn_tensor *t,
                       uint64_t *begin, char *err, size_t err_len)
{
    const char *name = item->string;
    const cJSON *dt = cJSON_GetObjectItemCaseSensitive(item, "dtype");
    const cJSON *shape = cJSON_GetObjectItemCaseSensitive(item, "shape");
    const cJSON *offs = cJSON_GetObjectItemCaseSensitive(item, "data_offsets");
    const cJSON *v;
    size_t i, isz = 0;
    uint64_t numel = 1, b, e, nbytes;
    int rank;

    if (!cJSON_IsObject(item)) {
        st_err(EINVAL, err, err_len, "%s: tensor '%s': header entry is not a JSON object", path,
               name);
        return 0;
    }
    if (!cJSON_IsString(dt)) {
        st_err(EINVAL, err, err_len, "%s: tensor '%s': missing or non-string \"dtype\"", path, name);
        return 0;
    }
    for (i = 0; i < sizeof st_dtypes / sizeof st_dtypes[0]; i++)
        if (strcmp(dt->valuestring, st_dtypes[i].name) == 0) {
            t->dtype = st_dtypes[i].dtype;
            isz = st_dtypes[i].size;
        }
    if (isz == 0) {
        st_err(EINVAL, err, err_len,
               "%s: tensor '%s': unsupported dtype \"%s\" (supported: F64, F32, I64, I32, U8, BOOL)",
               path, name, dt->valuestring);
        return 0;
    }
    if (!cJSON_IsArray(shape)) {
        st_err(EINVAL, err, err_len, "%s: tensor '%s': missing or non-array \"shape\"", path, name);
        return 0;
    }
    rank = cJSON_GetArraySize(shape);
    if (rank > ECN_ST_MAX_RANK) {
        st_err(EINVAL, err, err_len, "%s: tensor '%s': rank %d exceeds the maximum %d", path, name,
               rank, ECN_ST_MAX_RANK);
        return 0;
    }
    t->rank = rank;
    i = 0;
    cJSON_ArrayForEach(v, shape) {
        uint64_t d;
        if (!json_uint(v, &d)) {
            st_err(EINVAL, err, err_len,
                   "%s: tensor '%s': shape entry %zu is not a non-negative integer", path, name, i);
            return 0;
        }
        /* numel * itemsize must fit in the data section, which is far below
         * INT64_MAX; checking against that bound avoids overflow. */
        if (d != 0 && numel > (uint64_t)INT64_MAX / 8 / d) {
            st_err(EINVAL, err, err_len, "%s: tensor '%s': shape is too large", path, name);
            return 0;
        }
        numel *= d;
        t->shape[i++] = (int64_t)d;
    }
    t->numel = (int64_t)numel;
    nbytes = numel * isz;
    if (!cJSON_IsArray(offs) || cJSON_GetArraySize(offs) != 2 ||
        !json_uint(cJSON_GetArrayItem(offs, 0), &b) || !json_uint(cJSON_GetArrayItem(offs, 1), &e)) {
        st_err(EINVAL, err, err_len,
               "%s: tensor '%s': \"data_offsets\" must be [begin, end] with non-negative integers",
               path, name);
        return 0;
    }
    if (e < b) {
        st_err(EINVAL, err, err_len,
               "%s: tensor '%s': data_offsets [%llu, %llu] end before they begin", path, name,
               (unsigned long long)b, (unsigned long long)e);
        return 0;
    }
    if (e > data_len) {
        st_err(EINVAL, err, err_len,
               "%s: tensor '%s': data_offsets [%llu, %llu] exceed the data section (%llu bytes); "
               "the file is truncated or corrupt",
               path, name, (unsigned long long)b, (unsigned long long)e,
               (unsigned long long)data_len);
        return 0;
    }
    if (e - b != nbytes) {
        st_err(EINVAL, err, err_len,
               "%s: tensor '%s': data_offsets [%llu, %llu] hold %llu bytes, but dtype %s and its "
               "shape need %llu",
               path, name, (unsigned long long)b, (unsigned long long)e,
               (unsigned long long)(e - b), dt->valuestring, (unsigned long long)nbytes);
        return 0;
    }
    *begin = b;
    return 1;
}

ecn_safetensors *ecn_st_open(const char *path, char *err, size_t err_len)
{
    FILE *f = NULL;
    ecn_safetensors *st = NULL;
    char *hdr = NULL;
    cJSON *root = NULL;
    const cJSON *item, *meta = NULL;
    unsigned char lenbuf[8];
    uint64_t hlen = 0, file_len, data_len, *begins = NULL, extra = 0;
    long pos;
    size_t i, k, n_entries = 0, n_meta = 0;
    const char *parse_end = NULL;

    if (err && err_len) err[0] = '\0';
    if (!path) {
        st_err(EINVAL, err, err_len, "(null): no file name given");
        return NULL;
    }
    f = fopen(path, "rb");
    if (!f) {
        int e = errno ? errno : EIO;
        st_err(e, err, err_len, "%s: cannot open: %s", path, strerror(e));
        return NULL;
    }
    {
        struct stat sb; /* a device or a directory has no meaningful size */
        if (fstat(fileno(f), &sb) == 0 && !S_ISREG(sb.st_mode)) {
            st_err(EINVAL, err, err_len, "%s: not a regular file (a %s)", path,
                   S_ISDIR(sb.st_mode) ? "directory" : S_ISCHR(sb.st_mode) ? "character device"
                   : S_ISFIFO(sb.st_mode) ? "pipe" : "special file");
            goto fail;
        }
    }
    if (fseek(f, 0, SEEK_END) != 0 || (pos = ftell(f)) < 0 || fseek(f, 0, SEEK_SET) != 0) {
        int e = errno ? errno : EIO;
        st_err(e, err, err_len, "%s: cannot determine the file size: %s", path, strerror(e));
        goto fail;
    }
    file_len = (uint64_t)pos;
    if (file_len < 8) {
        st_err(EINVAL, err, err_len,
               "%s: file is %llu bytes, too short for a safetensors file (an 8-byte header "
               "length comes first)",
               path, (unsigned long long)file_len);
        goto fail;
    }
    if (!read_exact(f, lenbuf, 8)) {
        read_failed(path, "the header length", err, err_len);
        goto fail;
    }
    for (i = 8; i-- > 0;) hlen = (hlen << 8) | lenbuf[i];
    if (hlen < 2 || hlen > ST_MAX_HEADER) {
        st_err(EINVAL, err, err_len,
               "%s: header length %llu is not plausible (expected 2..%llu bytes); not a "
               "safetensors file?",
               path, (unsigned long long)hlen, (unsigned long long)ST_MAX_HEADER);
        goto fail;
    }
    if (hlen > file_len - 8) {
        st_err(EINVAL, err, err_len,
               "%s: header length %llu exceeds the file (%llu bytes after the length field); the "
               "file is truncated",
               path, (unsigned long long)hlen, (unsigned long long)(file_len - 8));
        goto fail;
    }
    data_len = file_len - 8 - hlen;
    if (data_len > (uint64_t)SIZE_MAX / 2) {
        st_err(ENOMEM, err, err_len, "%s: data section too large for this machine", path);
        goto fail;
    }

    hdr = malloc((size_t)hlen + 1);
    st = calloc(1, sizeof *st);
    if (!hdr || !st) goto nomem;
    if (!read_exact(f, hdr, (size_t)hlen)) {
        read_failed(path, "the header", err, err_len);
        goto fail;
    }
    hdr[hlen] = '\0';
    if (memchr(hdr, '\0', (size_t)hlen)) {
        st_err(EINVAL, err, err_len, "%s: header contains a NUL byte; corrupt file", path);
        goto fail;
    }
    /* nor a \u0000 escape ("ecenet\u0000junk" would read as "ecenet") */
    {
        const long at = ecn_json_nul_escape(hdr);
        if (at >= 0) {
            st_err(EINVAL, err, err_len,
                   "%s: header byte %ld: a \\u0000 escape (NUL) in a JSON string; corrupt file",
                   path, at);
            goto fail;
        }
    }
    root = cJSON_ParseWithOpts(hdr, &parse_end, 1);
    if (!root) {
        size_t at = parse_end && parse_end >= hdr ? (size_t)(parse_end - hdr) : 0;
        st_err(EINVAL, err, err_len, "%s: header is not valid JSON (error near byte %zu of %llu)",
               path, at, (unsigned long long)hlen);
        goto fail;
    }
    if (!cJSON_IsObject(root)) {
        st_err(EINVAL, err, err_len, "%s: header is not a JSON object", path);
        goto fail;
    }

    /* Data: one malloc'd block (malloc alignment suits double/int64). */
    st->buffer = malloc(data_len ? (size_t)data_len : 1);
    if (!st->buffer) goto nomem;
    if (!read_exact(f, st->buffer, (size_t)data_len)) {
        read_failed(path, "the data section", err, err_len);
        goto fail;
    }
    fclose(f);
    f = NULL;

    cJSON_ArrayForEach(item, root) {
        if (strcmp(item->string, "__metadata__") == 0) {
            if (meta) {
                st_err(EINVAL, err, err_len, "%s: \"__metadata__\" appears twice", path);
                goto fail;
            }
            meta = item;
        } else {
            n_entries++;
        }
    }
    st->path = dup_str(path);
    st->tensors = calloc(n_entries ? n_entries : 1, sizeof *st->tensors);
    begins = calloc(n_entries ? n_entries : 1, sizeof *begins);
    if (!st->path || !st->tensors || !begins) goto nomem;

    k = 0;
    cJSON_ArrayForEach(item, root) {
        ecn_tensor *t;
        if (item == meta) continue;
        t = &st->tensors[k];
        if (!parse_entry(path, item, data_len, t, &begins[k], err, err_len)) goto fail;
        t->name = dup_str(item->string);
        if (!t->name) goto nomem;
        st->n_tensors = ++k;
        /* A tensor whose offset is not a multiple of its element size would
         * give a misaligned pointer; such tensors get an aligned copy after
         * the data section (counted here, copied below). */
        if (begins[k - 1] % dtype_size(t->dtype) != 0)
            extra += ((uint64_t)t->numel * dtype_size(t->dtype) + 7) & ~(uint64_t)7;
    }

    /* The tensors tile the data section, in offset order, as the safetensors
     * format requires (and its reference loader checks): an overlap would
     * alias two tensors, a gap or trailing bytes mean a corrupt file. */
    {
        st_range *r = malloc((st->n_tensors ? st->n_tensors : 1) * sizeof *r);
        uint64_t at = 0;
        if (!r) goto nomem;
        for (k = 0; k < st->n_tensors; k++) {
            r[k].b = begins[k];
            r[k].e = begins[k] + (uint64_t)st->tensors[k].numel * dtype_size(st->tensors[k].dtype);
            r[k].k = k;
        }
        qsort(r, st->n_tensors, sizeof *r, cmp_range);
        for (k = 0; k < st->n_tensors && r[k].b == at; k++)
            at = r[k].e;
        if (k < st->n_tensors) {
            const ecn_tensor *t = &st->tensors[r[k].k];
            if (r[k].b < at)
                st_err(EINVAL, err, err_len,
                       "%s: tensor '%s': data_offsets [%llu, %llu] overlap tensor '%s' [%llu, %llu]",
                       path, t->name, (unsigned long long)r[k].b, (unsigned long long)r[k].e,
                       st->tensors[r[k - 1].k].name, (unsigned long long)r[k - 1].b,
                       (unsigned long long)r[k - 1].e);
            else
                st_err(EINVAL, err, err_len,
                       "%s: tensor '%s': data_offsets [%llu, %llu] leave bytes [%llu, %llu) of the "
                       "data section to no tensor; the file is corrupt",
                       path, t->name, (unsigned long long)r[k].b, (unsigned long long)r[k].e,
                       (unsigned long long)at, (unsigned long long)r[k].b);
            free(r);
            goto fail;
        }
        free(r);
        if (at != data_len) {
            st_err(EINVAL, err, err_len,
                   "%s: the tensors' data ends at byte %llu of the %llu-byte data section: %llu "
                   "trailing bytes belong to no tensor; the file is corrupt",
                   path, (unsigned long long)at, (unsigned long long)data_len,
                   (unsigned long long)(data_len - at));
            goto fail;
        }
    }

    if (extra) {
        uint64_t base = (data_len + 7) & ~(uint64_t)7, off = base;
        void *nb;
        if (extra > (uint64_t)SIZE_MAX / 2 - base) goto nomem;
        nb = realloc(st->buffer, (size_t)(base + extra));
        if (!nb) goto nomem;
        st->buffer = nb;
        for (k = 0; k < st->n_tensors; k++) {
            ecn_tensor *t = &st->tensors[k];
            size_t sz = dtype_size(t->dtype), nbytes = (size_t)t->numel * sz;
            if (begins[k] % sz == 0) continue;
            memcpy((char *)st->buffer + off, (char *)st->buffer + begins[k], nbytes);
            begins[k] = off;
            off += (nbytes + 7) & ~(size_t)7;
        }
    }
    for (k = 0; k < st->n_tensors; k++)
        st->tensors[k].data = (const char *)st->buffer + begins[k];

    qsort(st->tensors, st->n_tensors, sizeof *st->tensors, cmp_tensor);
    for (k = 1; k < st->n_tensors; k++)
        if (strcmp(st->tensors[k - 1].name, st->tensors[k].name) == 0) {
            st_err(EINVAL, err, err_len, "%s: tensor '%s' appears twice in the header", path,
                   st->tensors[k].name);
            goto fail;
        }

    if (meta) {
        if (!cJSON_IsObject(meta)) {
            st_err(EINVAL, err, err_len, "%s: \"__metadata__\" is not a JSON object", path);
            goto fail;
        }
        n_meta = (size_t)cJSON_GetArraySize(meta);
        st->meta_keys = calloc(n_meta ? n_meta : 1, sizeof *st->meta_keys);
        st->meta_values = calloc(n_meta ? n_meta : 1, sizeof *st->meta_values);
        if (!st->meta_keys || !st->meta_values) goto nomem;
        cJSON_ArrayForEach(item, meta) {
            if (!cJSON_IsString(item)) {
                st_err(EINVAL, err, err_len,
                       "%s: metadata key '%s': value is not a string (safetensors metadata maps "
                       "strings to strings)",
                       path, item->string);
                goto fail;
            }
            for (k = 0; k < st->n_meta; k++)
                if (strcmp(st->meta_keys[k], item->string) == 0) {
                    st_err(EINVAL, err, err_len, "%s: metadata key '%s' appears twice", path,
                           item->string);
                    goto fail;
                }
            st->meta_keys[st->n_meta] = dup_str(item->string);
            st->meta_values[st->n_meta] = dup_str(item->valuestring);
            if (!st->meta_keys[st->n_meta] || !st->meta_values[st->n_meta]) {
                /* count it so that close frees whichever copy succeeded */
                st->n_meta++;
                goto nomem;
            }
            st->n_meta++;
        }
    }

    free(begins);
    cJSON_Delete(root);
    free(hdr);
    errno = 0;
    return st;

nomem:
    st_err(ENOMEM, err, err_len, "%s: out of memory while reading the file", path);
fail:
    {
        int e = errno;
        if (f) fclose(f);
        free(begins);
        cJSON_Delete(root);
        free(hdr);
        ecn_st_close(st);
        errno = e;
    }
    return NULL;
}

void ecn_st_close(ecn_safetensors *st)
{
    size_t i;
    if (!st) return;
    if (st->tensors)
        for (i = 0; i < st->n_tensors; i++) free(st->tensors[i].name);
    free(st->tensors);
    if (st->meta_keys)
        for (i = 0; i < st->n_meta; i++) free(st->meta_keys[i]);
    if (st->meta_values)
        for (i = 0; i < st->n_meta; i++) free(st->meta_values[i]);
    free(st->meta_keys);
    free(st->meta_values);
    free(st->buffer);
    free(st->path);
    free(st);
}

ecn_tensor *ecn_st_find(const ecn_safetensors *st, const char *name)
{
    ecn_tensor key;
    if (!st || !name || st->n_tensors == 0) return NULL;
    key.name = (char *)name;
    return bsearch(&key, st->tensors, st->n_tensors, sizeof *st->tensors, cmp_tensor);
}

const char *ecn_st_meta(const ecn_safetensors *st, const char *key)
{
    size_t i;
    if (!st || !key) return NULL;
    for (i = 0; i < st->n_meta; i++)
        if (strcmp(st->meta_keys[i], key) == 0) return st->meta_values[i];
    return NULL;
}
