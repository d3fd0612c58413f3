#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "error.h"

ecenet_status ecn_fail(char *err, size_t err_len, ecenet_status status, const char *fmt, ...)
{
    if (err && err_len > 0) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, err_len, fmt, ap);
        va_end(ap);
    }
    return status;
}

int ecn_env_int(const char *name, int def, int lo, int hi)
{
    const char *s = getenv(name);
    if (!s || !*s)
        return def;
    char *end;
    const long v = strtol(s, &end, 10);
    if (*end || v < lo || v > hi) {
        fprintf(stderr, "libecenet: ignoring %s=%s (expected %d..%d)\n", name, s, lo, hi);
        return def;
    }
    return (int)v;
}

int ecn_env_pick(const char *name, int def, const char *const *words, int n)
{
    const char *s = getenv(name);
    if (!s || !*s)
        return def;
    for (int k = 0; k < n; k++)
        if (!strcmp(s, words[k]))
            return k;
    fprintf(stderr, "libecenet: ignoring %s=%s (expected ", name, s);
    for (int k = 0; k < n; k++)
        fprintf(stderr, "%s%s", k == 0 ? "" : k + 1 < n ? ", " : " or ", words[k]);
    fprintf(stderr, ")\n");
    return def;
}
