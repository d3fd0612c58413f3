/* Error messages: printf-style into a caller buffer (always terminated);
 * and the backends' tuning variables, which warn rather than fail. */
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
#ifdef __cplusplus
extern "C" {
#endif

ecenet_status ecn_fail(char *err, size_t err_len, ecenet_status status,
                       const char *fmt, ...) ECN_PRINTF(4, 5);

/* An integer tuning variable of the environment (callers read it once):
 * unset or empty gives def; anything but a whole number in lo..hi gives def
 * and a line on stderr that names the variable and the range. */
int ecn_env_int(const char *name, int def, int lo, int hi);

/* A tuning variable that takes one of n words: the index of the word it
 * equals; unset or empty gives def, anything else def and a line on stderr
 * that names the variable and the words. */
int ecn_env_pick(const char *name, int def, const char *const *words, int n);

#ifdef __cplusplus
}
#endif

#endif
