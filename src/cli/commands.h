/* Subcommands implemented outside ecenet.c. */
#ifndef ECN_CLI_COMMANDS_H
#define ECN_CLI_COMMANDS_H

#include <stddef.h>
#include "ecenet.h"

int ecn_cmd_bench(int argc, char **argv);
extern const char ecn_bench_usage[];
int ecn_cmd_profile(int argc, char **argv);
extern const char ecn_profile_usage[];
int ecn_cmd_nve(int argc, char **argv);
extern const char ecn_nve_usage[];

/* bench.c, for bench and profile: a header line with the library version,
 * the time (UTC) and every ECENET_* variable set, then "  NAME device: ..."
 * for each distinct backend of bes[0..n-1] (NULLs skipped) that names its
 * device */
struct ecenet_backend;
void ecn_cli_run_info(const struct ecenet_backend *const *bes, int n);

/* bench.c, for the subcommands' options: *out = the decimal integer s if it
 * is one, whole, in lo..hi; returns 0, or -1 (out untouched) */
int ecn_cli_parse_int(const char *s, int lo, int hi, int *out);
/* whether s is one of the NULL-terminated names */
int ecn_cli_is_one_of(const char *s, const char *const *names);
/* 0 if option a is one of the NULL-terminated valued and has a value v;
 * else 2, with "is not an option" or "needs a value" and the usage printed */
int ecn_cli_check_valued(const char *cmd, const char *a, const char *v,
                         const char *const *valued, const char *usage);
/* NULL if s names a precision, stored in *p: f64 (also fp64, double) or
 * f32 (also fp32, float); else why not. compute, nve and profile take these
 * names (bench's rows name their precision in its own backend list). */
const char *ecn_cli_precision_why(const char *s, ecenet_precision *p);
/* NULL if s is an integer in [lo, hi] (stored in *out), else why not (in buf) */
const char *ecn_cli_int_why(const char *s, int lo, int hi, int *out, char *buf, size_t len);
/* "ecenet CMD: OPT 'VAL' WHY" (no value: "OPT WHY"), then the usage; returns 2 */
int ecn_cli_opt_error(const char *cmd, const char *opt, const char *val, const char *why,
                      const char *usage);

#endif
