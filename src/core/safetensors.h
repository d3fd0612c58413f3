/* Safetensors reader: 8-byte little-endian header length, JSON header
 * (parsed with cJSON), raw little-endian data. Every tensor's dtype, shape
 * and byte range are validated against the file size on open. */
#ifndef ECN_SAFETENSORS_H
#define ECN_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>
#include "ecenet.h"

typedef enum { ECN_DT_F64 = 0, ECN_DT_F32, ECN_DT_I64, ECN_DT_I32, ECN_DT_U8, ECN_DT_BOOL } ecn_dtype;

#define ECN_ST_MAX_RANK 8

typedef struct {
    char *name;
    ecn_dtype dtype;
    int rank;
    int64_t shape[ECN_ST_MAX_RANK];
    int64_t numel;
    const void *data;       /* points into the file buffer (8-byte aligned copy) */
    int used;               /* set by the consumer; lets the loader report unused tensors */
} ecn_tensor;

typedef struct {
    char *path;
    void *buffer;           /* whole data section, 8-byte aligned */
    size_t n_tensors;
    ecn_tensor *tensors;    /* sorted by name */
    size_t n_meta;
    char **meta_keys, **meta_values;
} ecn_safetensors;

/* Open and validate; on failure NULL is returned and err names the file and the problem. */
ecn_safetensors *ecn_st_open(const char *path, char *err, size_t err_len);
void ecn_st_close(ecn_safetensors *st);
/* Tensor by exact name, or NULL. */
ecn_tensor *ecn_st_find(const ecn_safetensors *st, const char *name);
/* Metadata value by key, or NULL. */
const char *ecn_st_meta(const ecn_safetensors *st, const char *key);

/* Byte offset of the first \u0000 escape (a NUL) in JSON text, or -1.
 * cJSON decodes it into its C strings, which then end there, so a name or
 * value would be read cut short; the loaders refuse such text. */
long ecn_json_nul_escape(const char *json);

#endif
