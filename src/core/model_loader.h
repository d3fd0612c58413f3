/* The model loader's state and its messages, shared by its two halves:
 * model.c (the container, the tensors, the model object) and model_config.c
 * (the metadata: variant, configuration, elements, energy metadata).
 * Internal to the library. */
#ifndef ECN_MODEL_LOADER_H
#define ECN_MODEL_LOADER_H

#include <stddef.h>
#include <cjson/cJSON.h>
#include "error.h"
#include "model.h"

typedef struct {
    const char *path; /* the file, named first in every message */
    char *err;
    size_t err_len;
    ecn_safetensors *st;
    ecenet_model *m;
} ecn_loader;

/* "PATH: message" into ld->err (when there is room); returns s */
ecenet_status ecn_ld_fail(ecn_loader *ld, ecenet_status s, const char *fmt, ...) ECN_PRINTF(3, 4);

/* model_config.c: the file's variant (*research) and its configuration JSON,
 * every key checked, parsed into ld->m->cfg and finished (ecn_config_finish).
 * *cj: the parsed JSON for ecn_ld_print_config, which the caller deletes;
 * NULL on failure. */
ecenet_status ecn_ld_config(ecn_loader *ld, int *research, cJSON **cj);
/* model_config.c: the elements and the energy metadata into ld->m (its
 * type_z and e_ref allocated by the caller) */
ecenet_status ecn_ld_metadata(ecn_loader *ld);
/* model_config.c: the resolved configuration as JSON text (malloc'd; NULL
 * when out of memory) */
char *ecn_ld_print_config(const ecenet_model *m, const cJSON *src);

#endif
