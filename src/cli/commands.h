/* Subcommands implemented outside ecenet.c. */
#ifndef ECN_CLI_COMMANDS_H
#define ECN_CLI_COMMANDS_H

int ecn_cmd_bench(int argc, char **argv);
extern const char ecn_bench_usage[];
int ecn_cmd_profile(int argc, char **argv);
extern const char ecn_profile_usage[];

#endif
