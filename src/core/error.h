/* Error messages: printf-style into a caller buffer (always terminated). */
#ifndef ECN_ERROR_H
#define ECN_ERROR_H

#include <stddef.h>
#include "ecenet.h"

#if defined(__GNUC__)
#define ECN_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define ECN_PRINTF(a, b)
#endif

/* Writes the message (if err != NULL) and returns status, so that callers can
 * `return ecn_fail(err, n, ECENET_ERR_FORMAT, "...", ...);`. */
ecenet_status ecn_fail(char *err, size_t err_len, ecenet_status status,
                       const char *fmt, ...) ECN_PRINTF(4, 5);

#endif
