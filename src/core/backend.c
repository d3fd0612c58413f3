/* Backend registry. A backend exists in a build when its sources were
 * compiled in (configure decides); ref is always present. */
#include <string.h>
#include "backend.h"

const ecenet_backend *ecn_backend_get(const char *name, int precision)
{
    if (!name)
        return NULL;
    if (strcmp(name, "ref") == 0)
        return precision == ECENET_F64 ? &ecn_ref_backend : NULL;
    return NULL;
}

const char *ecn_backend_names(void) { return "ref"; }

const char *ecenet_backends(void) { return ecn_backend_names(); }
