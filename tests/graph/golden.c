/* The golden graphs (ethanol, diamond, options): the lists of the reference
 * implementation, as sets, equal ours. */
#include "harness.h"

typedef struct {
    int64_t src, dst, n[3], idx;
} gentry;

static int gentry_cmp(const void *pa, const void *pb)
{
    const gentry *a = pa, *b = pb;
    int k;
    if (a->src != b->src)
        return a->src < b->src ? -1 : 1;
    if (a->dst != b->dst)
        return a->dst < b->dst ? -1 : 1;
    for (k = 0; k < 3; k++)
        if (a->n[k] != b->n[k])
            return a->n[k] < b->n[k] ? -1 : 1;
    return 0;
}

/* The golden list as a set: each shift converted to its integer image (and
 * checked to be one), sorted by (src, dst, image), compared with ours. */
static void compare_golden_list(const ecn_safetensors *st, const char *src_name,
                                const char *dst_name, const char *shift_name,
                                const ecn_pairlist *ours, const double *cell, int64_t n_atoms)
{
    const ecn_tensor *t = ecn_st_find(st, src_name);
    int64_t m, e;
    const int64_t *gs, *gd;
    const double *gsh;
    double inv[9] = {0};
    gentry *ge;
    ck_assert_msg(t != NULL, "%s missing", src_name);
    m = t->numel;
    gs = tu_i64(st, src_name, m);
    gd = tu_i64(st, dst_name, m);
    gsh = tu_f64(st, shift_name, 3 * m);
    if (cell)
        inv3(cell, inv);
    ge = malloc((size_t)(m ? m : 1) * sizeof *ge);
    ck_assert_ptr_nonnull(ge);
    for (e = 0; e < m; e++) {
        int k;
        if (gs[e] < 0 || gs[e] >= n_atoms || gd[e] < 0 || gd[e] >= n_atoms)
            ck_abort_msg("%s: bad atom index at %lld", src_name, (long long)e);
        ge[e].src = gs[e];
        ge[e].dst = gd[e];
        ge[e].idx = e;
        for (k = 0; k < 3; k++) {
            const double *sh = &gsh[3 * e];
            ge[e].n[k] = cell ? (int64_t)floor(sh[0] * inv[k] + sh[1] * inv[3 + k] +
                                               sh[2] * inv[6 + k] + 0.5)
                              : 0;
        }
        for (k = 0; k < 3; k++) {
            double v = cell ? ge[e].n[0] * cell[k] + ge[e].n[1] * cell[3 + k] +
                                  ge[e].n[2] * cell[6 + k]
                            : 0.0;
            if (!(fabs(v - gsh[3 * e + k]) < 1e-9))
                ck_abort_msg("%s entry %lld: shift is not a lattice vector", shift_name,
                             (long long)e);
        }
    }
    qsort(ge, (size_t)m, sizeof *ge, gentry_cmp);
    ck_assert_msg(ours->n == m, "%s: %lld entries, golden %lld", src_name, (long long)ours->n,
                  (long long)m);
    for (e = 0; e < m; e++) {
        int k;
        if (ours->src[e] != ge[e].src || ours->dst[e] != ge[e].dst)
            ck_abort_msg("%s sorted entry %lld: (%d -> %d), golden (%lld -> %lld)", src_name,
                         (long long)e, ours->src[e], ours->dst[e], (long long)ge[e].src,
                         (long long)ge[e].dst);
        for (k = 0; k < 3; k++)
            if (!(fabs(ours->shift[3 * e + k] - gsh[3 * ge[e].idx + k]) <= 1e-9))
                ck_abort_msg("%s sorted entry %lld (%d -> %d): shift[%d] %.17g, golden %.17g",
                             src_name, (long long)e, ours->src[e], ours->dst[e], k,
                             ours->shift[3 * e + k], gsh[3 * ge[e].idx + k]);
    }
    free(ge);
}

static void check_golden(const char *name, double rce, double rcn, int periodic)
{
    ecn_safetensors *st = tu_open_golden(name, "ref");
    const ecn_tensor *tp = ecn_st_find(st, "input.positions"), *tb = ecn_st_find(st, "input.pbc");
    int64_t n;
    const double *pos, *cell;
    const uint8_t *pb;
    int pbc[3], k;
    ecn_graph g;
    char err[256];
    ck_assert_ptr_nonnull(tp);
    ck_assert_int_eq(tp->rank, 2);
    n = tp->shape[0];
    pos = tu_f64(st, "input.positions", 3 * n);
    cell = tu_f64(st, "input.cell", 9);
    ck_assert_ptr_nonnull(tb);
    ck_assert_int_eq(tb->dtype, ECN_DT_U8);
    ck_assert_int_eq(tb->numel, 3);
    pb = tb->data;
    for (k = 0; k < 3; k++) {
        pbc[k] = pb[k];
        ck_assert_int_eq(pbc[k] != 0, periodic);
    }
    ck_assert_int_eq(ecn_graph_build((size_t)n, pos, periodic ? cell : NULL, pbc, rce, rcn, &g,
                                     err, sizeof err),
                     ECENET_OK);
    compare_golden_list(st, "graph.edge_i", "graph.edge_j", "graph.edge_shift", &g.edges,
                        periodic ? cell : NULL, n);
    compare_golden_list(st, "graph.nb_src", "graph.nb_dst", "graph.nb_shift", &g.nb,
                        periodic ? cell : NULL, n);
    /* and the brute force agrees too */
    ecn_graph_free(&g);
    check_case(name, (size_t)n, pos, periodic ? cell : NULL, pbc, rce, rcn, NULL);
    ecn_st_close(st);
}

START_TEST(test_golden_ethanol) { check_golden("ethanol", 5.0, 4.0, 0); }
END_TEST

START_TEST(test_golden_diamond) { check_golden("diamond", 5.0, 4.0, 1); }
END_TEST

START_TEST(test_golden_options) { check_golden("options", 4.5, 3.5, 1); }
END_TEST

void golden_tests(TCase *tc)
{
    tcase_add_test(tc, test_golden_ethanol);
    tcase_add_test(tc, test_golden_diamond);
    tcase_add_test(tc, test_golden_options);
}
