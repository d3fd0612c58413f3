/* The shared helpers of check_model (tests/model/harness.c): what the topic
 * files (tests/model/<topic>.c) use to read the golden model files, write
 * edited copies to temporary files and check the loads that must fail. */
#ifndef ECN_TESTS_MODEL_HARNESS_H
#define ECN_TESTS_MODEL_HARNESS_H

#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ecenet.h"
#include "model.h"
#include "safetensors.h"
#include "test_util.h"

/* ---- golden models ---------------------------------------------------------- */

/* <data>/golden/<case_name>.model.safetensors, loaded (must succeed) */
ecenet_model *load_ok(const char *case_name);

/* A golden model file split into header text and data section. */
typedef struct {
    char *json;          /* NUL-terminated header */
    unsigned char *data; /* data section */
    size_t data_len;
    unsigned char *raw;  /* whole file */
    size_t raw_len;
} raw_file;

void raw_read(const char *case_name, raw_file *r);
void raw_free(raw_file *r);

/* ---- temporary files ($TMPDIR, else /tmp; the caller removes them) ---------- */

/* Writes bytes to a fresh temporary file; returns its malloc'd path. */
char *write_tmp(const void *a, size_t na, const void *b, size_t nb);
/* A safetensors file with this header text (padded to a multiple of 8) and
 * data section. */
char *write_st(const char *json, const void *data, size_t data_len);

/* ---- edited golden models (temporary files) --------------------------------- */

/* s with every `from` replaced by `to` (at least one must occur); malloc'd */
char *replace(const char *s, const char *from, const char *to);
/* Golden model with one header edit (every occurrence of `from`). */
char *golden_edit(const char *case_name, const char *from, const char *to);
/* Golden model with 8 bytes of the data section overwritten. */
char *golden_poke(const char *case_name, size_t offset, const void *value8);
/* Data-section offset and value of a tensor entry of a golden model. */
size_t golden_offset(const char *case_name, const char *name, int64_t index);
double golden_value(const char *case_name, const char *name, int64_t index);
char *diamond_edit(const char *from, const char *to);

/* ---- checks ----------------------------------------------------------------- */

/* Loading `path` fails with `want`; the message starts with the path and
 * contains each of the (up to two) needles. Removes the file, frees path. */
void expect_fail(char *path, ecenet_status want, const char *needle1, const char *needle2);
int contains(const char *hay, const char *needle);

/* ---- the topics (tests/model/<topic>.c): each adds its tests to a tcase ------ */

void golden_tests(TCase *tc);        /* golden.c: "golden" */
void research_load_tests(TCase *tc); /* research.c: "golden" */
void api_tests(TCase *tc);           /* api.c: "golden" */
void safetensors_tests(TCase *tc);   /* safetensors.c: "safetensors" */
void bad_file_tests(TCase *tc);      /* bad_files.c: "bad_files" */
void research_bad_tests(TCase *tc);  /* research.c: "bad_files" */
void fuzz_tests(TCase *tc);          /* bad_files.c: "bad_files" */

#endif
