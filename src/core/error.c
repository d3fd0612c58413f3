#include <stdarg.h>
#include <stdio.h>
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
