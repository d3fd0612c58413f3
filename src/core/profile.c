/* Aggregation of step profiles into per-op, per-section and memory tables. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "profile.h"

/* Find or append the row with this key (and vjp flag). */
static ecn_prof_row *row_for(ecn_prof_row **rows, size_t *n, size_t *cap, const char *key,
                             int vjp)
{
    for (size_t k = 0; k < *n; k++)
        if ((*rows)[k].vjp == vjp && strcmp((*rows)[k].key, key) == 0)
            return &(*rows)[k];
    if (*n == *cap) {
        size_t c = *cap ? 2 * *cap : 64;
        ecn_prof_row *r = realloc(*rows, c * sizeof *r);
        if (!r)
            return NULL;
        *rows = r;
        *cap = c;
    }
    ecn_prof_row *r = &(*rows)[(*n)++];
    memset(r, 0, sizeof *r);
    snprintf(r->key, sizeof r->key, "%s", key);
    r->vjp = vjp;
    return r;
}

static int by_time(const void *a, const void *b)
{
    double x = ((const ecn_prof_row *)a)->seconds, y = ((const ecn_prof_row *)b)->seconds;
    return (x < y) - (x > y);
}

static int by_bytes(const void *a, const void *b)
{
    size_t x = ((const ecn_prof_row *)a)->bytes, y = ((const ecn_prof_row *)b)->bytes;
    return (x < y) - (x > y);
}

size_t ecn_prof_by_op(const ecn_profile *p, int split_vjp, int max_vjp, ecn_prof_row **rows)
{
    size_t n = 0, cap = 0;
    *rows = NULL;
    for (size_t k = 0; k < p->n_ev; k++) {
        const ecn_prof_event *e = &p->ev[k];
        if (e->vjp > max_vjp)
            continue;
        ecn_prof_row *r = row_for(rows, &n, &cap, e->op, split_vjp ? e->vjp : 0);
        if (!r) {
            free(*rows);
            *rows = NULL;
            return (size_t)-1;
        }
        r->calls++;
        r->seconds += e->seconds;
    }
    if (n)
        qsort(*rows, n, sizeof **rows, by_time);
    return n;
}

size_t ecn_prof_by_section(const ecn_profile *p, int vjp, ecn_prof_row **rows)
{
    size_t n = 0, cap = 0;
    *rows = NULL;
    for (size_t k = 0; k < p->n_ev; k++) {
        const ecn_prof_event *e = &p->ev[k];
        if (e->vjp != vjp)
            continue;
        ecn_prof_row *r = row_for(rows, &n, &cap, e->section, vjp);
        if (!r) {
            free(*rows);
            *rows = NULL;
            return (size_t)-1;
        }
        r->calls++;
        r->seconds += e->seconds;
    }
    return n;
}

size_t ecn_prof_by_memory(const ecn_profile *p, ecn_prof_row **rows)
{
    size_t n = 0, cap = 0;
    *rows = NULL;
    for (size_t k = 0; k < p->n_buf; k++) {
        const ecn_prof_buffer *b = &p->buf[k];
        ecn_prof_row *r = row_for(rows, &n, &cap, b->op, 0);
        if (!r) {
            free(*rows);
            *rows = NULL;
            return (size_t)-1;
        }
        r->calls++;
        r->bytes += b->bytes;
        if (b->saved)
            r->saved_bytes += b->bytes;
    }
    if (n)
        qsort(*rows, n, sizeof **rows, by_bytes);
    return n;
}

double ecn_prof_sum(const ecn_profile *p)
{
    double s = 0.0;
    for (size_t k = 0; k < p->n_ev; k++)
        s += p->ev[k].seconds;
    return s;
}
