/* Backend registry: the backends compiled into this build. */
#ifndef ECN_BACKEND_H
#define ECN_BACKEND_H

#include "ecenet.h"
#include "ecenet/ops.h"

/* The backend with this name and precision, or NULL if not compiled in. */
const ecenet_backend *ecn_backend_get(const char *name, int precision);
/* Comma-separated names of the compiled backends. */
const char *ecn_backend_names(void);

extern const ecenet_backend ecn_ref_backend;   /* src/ref/ref_backend.c */

#endif
