/* Aggregation of a step profile (ecn_profile, step.h) into the tables of
 * `ecenet profile --op-profile`. */
#ifndef ECN_PROFILE_H
#define ECN_PROFILE_H

#include <stddef.h>
#include "step.h"

typedef struct {
    char key[64];        /* op name, or section name */
    int vjp;             /* for op rows of a joint step: 1 = backward row */
    int calls;
    double seconds;      /* total self time */
    size_t bytes;        /* memory rows: bytes attributed */
    size_t saved_bytes;  /* memory rows: of which kept for the backward */
} ecn_prof_row;

/* Self time per op (split_vjp: forward and backward rows apart), sorted by
 * decreasing time. *rows is malloc'ed (free it); returns the row count or
 * (size_t)-1 when out of memory. Only events with vjp <= max_vjp count. */
size_t ecn_prof_by_op(const ecn_profile *p, int split_vjp, int max_vjp, ecn_prof_row **rows);
/* Self time per section of the forward (vjp = 0) or backward (vjp = 1) part,
 * in order of first appearance. */
size_t ecn_prof_by_section(const ecn_profile *p, int vjp, ecn_prof_row **rows);
/* Workspace bytes per producing op, sorted by decreasing bytes; the rows sum
 * to p->workspace_bytes exactly. */
size_t ecn_prof_by_memory(const ecn_profile *p, ecn_prof_row **rows);
/* Σ self time of all events. */
double ecn_prof_sum(const ecn_profile *p);

#endif
