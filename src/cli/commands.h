/* Subcommands implemented outside ecenet.c. */
#ifndef ECN_CLI_COMMANDS_H
#define ECN_CLI_COMMANDS_H

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

#endif
