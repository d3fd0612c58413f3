/* CUDA-specific checks. The op-by-op comparison against ref, the golden
 * models and the determinism checks run for cuda (fp64, fp32, fp32+TF32) in
 * check_backends.c, with the same source as every other backend; this file
 * holds only what is particular to CUDA:
 *
 * 1. Device detection: without a CUDA device (or without the backend
 *    compiled in) the program prints the reason and exits 77 (SKIP). The
 *    check runs in a child process, so the Check fork mode keeps working (a
 *    CUDA context does not survive fork()).
 * 2. Memory hooks: an impossible allocation is a NULL, not a recorded CUDA
 *    error; upload/download/zero round trips.
 * 3. The TF32 switch (ecn_cuda_set_tf32 / ecn_cuda_tf32): returns the
 *    previous setting, and switching it back gives the same bits as before;
 *    strict fp32 runs the split-TF32 GEMM on the engine's split weights,
 *    TF32 neither.
 * 4. The device neighbour search (ops.h nlist_count / nlist_fill): on
 *    periodic, mixed and open systems, small cells with many images, atoms
 *    outside the cell, both cutoff orders, its lists and groupings equal the
 *    host's ecn_graph_build entry for entry and its shifts bit for bit (fp64;
 *    fp32: the host shift rounded to float); a coincident pair asks for the
 *    host search; ecenet_compute with the device search gives the same bits
 *    as with the host search, and the host's error for coincident atoms.
 * 5. Golden case "golden": one golden model (ECENET_CUDA_GOLDEN, default
 *    diamond) in fp64, fp32 and fp32+TF32, two runs each, bitwise equal and
 *    without a CUDA error. Meant for compute-sanitizer runs:
 *      CK_FORK=no CK_RUN_CASE=golden ECENET_CUDA_GOLDEN=diamond \
 *        compute-sanitizer --tool memcheck tests/check_cuda */
#define _POSIX_C_SOURCE 200809L
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>
#include "backend.h"
#include "graph.h"
#include "model.h"
#include "test_util.h"
#ifdef ECENET_HAVE_CUDA
#include "cuda_backend.h"

typedef struct {
    int prec, tf32;
    const char *label;
} cfg_id;

static const cfg_id CONFIGS[] = {
    {ECENET_F64, 0, "f64"},
    {ECENET_F32, 0, "f32"},
    {ECENET_F32, 1, "f32+tf32"},
};
#define N_CONFIGS ((int)(sizeof CONFIGS / sizeof CONFIGS[0]))

static const ecenet_backend *get_backend(int i)
{
    const ecenet_backend *be = ecn_backend_get("cuda", CONFIGS[i].prec);
    ck_assert_msg(be != NULL, "cuda %s: backend not available", CONFIGS[i].label);
    ecn_cuda_set_tf32(CONFIGS[i].tf32);
    return be;
}

/* a failing CUDA call anywhere in a test fails the test */
static void check_no_cuda_error(const char *where)
{
    char msg[600];
    int code = ecn_cuda_error(msg, sizeof msg);
    ck_assert_msg(code == 0, "%s: %s", where, msg);
}

/* memory hooks: an impossible allocation is a NULL (not a recorded error) */
START_TEST(test_memory)
{
    const ecenet_backend *be = get_backend(_i);
    ck_assert_ptr_null(be->alloc((size_t)1 << 52));
    check_no_cuda_error("alloc of 4 PiB");
    void *p = be->alloc(0);
    ck_assert_ptr_nonnull(p);
    be->release(p);
    double h[5] = {1.5, -2.25, 3.0, 0.0, 1e-3}, g[5];
    void *d = be->alloc(5 * be->real_size);
    be->upload(d, h, 5);
    be->download(g, d, 5);
    for (int k = 0; k < 5; k++)
        ck_assert(fabs(g[k] - h[k]) <= 1e-7 * fabs(h[k]));
    be->zero(d, 5 * be->real_size);
    be->download(g, d, 5);
    for (int k = 0; k < 5; k++)
        ck_assert(g[k] == 0.0);
    be->release(d);
    check_no_cuda_error("memory hooks");
}
END_TEST

/* ---- whole models through the public API --------------------------------------------- */

typedef struct {
    size_t N;
    double *pos, cell[9];
    int *numbers, periodic;
} structure;

static void load_structure(const char *name, structure *s)
{
    s->N = tu_golden_atoms(name);
    s->pos = malloc(3 * s->N * sizeof(double));
    s->numbers = malloc(s->N * sizeof(int));
    ck_assert(s->pos && s->numbers);
    tu_golden_structure(name, s->N, s->pos, s->numbers, s->cell, &s->periodic);
}

static void free_structure(structure *s)
{
    free(s->pos);
    free(s->numbers);
}

typedef struct {
    double energy, stress[6], *forces;
} result;

static void compute(const ecenet_model *m, ecenet_precision prec, const structure *s, result *r)
{
    char err[1024];
    ecenet_ctx *ctx = NULL;
    ck_assert_msg(ecenet_ctx_create(m, "cuda", prec, &ctx, err, sizeof err) == ECENET_OK,
                  "cuda: %s", err);
    r->forces = malloc(3 * s->N * sizeof(double));
    ck_assert_ptr_nonnull(r->forces);
    ecenet_system sys = {s->N, s->pos, s->numbers, s->periodic ? s->cell : NULL,
                         {s->periodic, s->periodic, s->periodic}};
    ecenet_outputs out = {&r->energy, r->forces, 3 * s->N, s->periodic ? r->stress : NULL, 6,
                          NULL, 0, NULL, 0};
    ck_assert_msg(ecenet_compute(ctx, &sys, &out) == ECENET_OK, "cuda: %s",
                  ecenet_ctx_error(ctx));
    ecenet_ctx_free(ctx);
}

static ecenet_model *load_model(const char *name)
{
    char path[4096], err[1024];
    snprintf(path, sizeof path, "%s/golden/%s.model.safetensors", tu_data_dir(), name);
    ecenet_model *m = NULL;
    ck_assert_msg(ecenet_model_load(path, &m, err, sizeof err) == ECENET_OK, "%s: %s", name, err);
    return m;
}

static int same_bits(const result *a, const result *b, const structure *s)
{
    return memcmp(&a->energy, &b->energy, sizeof(double)) == 0 &&
           memcmp(a->forces, b->forces, 3 * s->N * sizeof(double)) == 0 &&
           (!s->periodic || memcmp(a->stress, b->stress, sizeof a->stress) == 0);
}

/* The TF32 switch returns the previous setting, and switching TF32 on and
 * off again leaves the fp32 results bit for bit as they were. */
START_TEST(test_tf32_switch)
{
    const ecenet_backend *be = ecn_backend_get("cuda", ECENET_F32);
    ck_assert_ptr_nonnull(be);
    ecn_cuda_set_tf32(0);
    ck_assert_int_eq(ecn_cuda_tf32(), 0);
    ck_assert_int_eq(ecn_cuda_set_tf32(1), 0);
    ck_assert_int_eq(ecn_cuda_tf32(), 1);
    ck_assert_int_eq(ecn_cuda_set_tf32(0), 1);
    ck_assert_int_eq(ecn_cuda_tf32(), 0);
    ecenet_model *m = load_model("diamond");
    structure s;
    load_structure("diamond", &s);
    result r[3];
    compute(m, ECENET_F32, &s, &r[0]);
    ecn_cuda_set_tf32(1);
    compute(m, ECENET_F32, &s, &r[1]);
    ecn_cuda_set_tf32(0);
    compute(m, ECENET_F32, &s, &r[2]);
    check_no_cuda_error("tf32 switch");
    ck_assert_msg(same_bits(&r[0], &r[2], &s),
                  "fp32 results differ after switching TF32 on and off (energy %.17g vs %.17g)",
                  r[2].energy, r[0].energy);
    printf("cuda tf32 switch: diamond energy fp32 %.17g, tf32 %.17g, fp32 again bitwise equal\n",
           r[0].energy, r[1].energy);
    for (int k = 0; k < 3; k++)
        free(r[k].forces);
    free_structure(&s);
    ecenet_model_free(m);
}
END_TEST

/* The engine's split weights (ops.h linear_split, ecn_engine_split): a
 * strict-fp32 compute runs the split-TF32 GEMM on them (those runs count in
 * ecn_cuda_fp32_gemm_x3_pre_runs), a TF32 compute runs neither; models
 * with plain layers, attention MP and bottleneck layers. That a GEMM on
 * them gives the bits of one splitting W itself is checked op by op in
 * check_backends. */
START_TEST(test_split_weights)
{
    static const char *names[] = {"diamond", "thglab_sum_pbc", "thglab_softmax"};
    const char *name = names[_i];
    ecenet_model *m = load_model(name);
    structure s;
    load_structure(name, &s);
    for (int tf32 = 0; tf32 <= 1; tf32++) {
        ecn_cuda_set_tf32(tf32);
        const unsigned long long x0 = ecn_cuda_fp32_gemm_x3_runs(),
                                 p0 = ecn_cuda_fp32_gemm_x3_pre_runs();
        result r;
        compute(m, ECENET_F32, &s, &r);
        free(r.forces);
        const unsigned long long x3 = ecn_cuda_fp32_gemm_x3_runs() - x0,
                                 pre = ecn_cuda_fp32_gemm_x3_pre_runs() - p0;
        printf("cuda split weights: %s %s: %llu split-TF32 GEMMs, %llu on split weights\n", name,
               tf32 ? "tf32" : "fp32", x3, pre);
        if (tf32)
            ck_assert_msg(x3 == 0 && pre == 0, "%s tf32: %llu split-TF32 GEMMs ran", name, x3);
        else
            ck_assert_msg(pre > 0 && pre <= x3, "%s fp32: %llu of %llu GEMMs on split weights",
                          name, pre, x3);
    }
    ecn_cuda_set_tf32(0);
    check_no_cuda_error("split weights");
    free_structure(&s);
    ecenet_model_free(m);
}
END_TEST

/* ---- the device neighbour search ------------------------------------------------------- */

typedef struct {
    const char *label;
    size_t n;
    double cell[9];
    int pbc[3], has_cell;
    double rce, rcn;
    double outside; /* atoms moved by this many cell vectors (wrap offsets) */
    int no_mtab;    /* 1: the key's image fields are too wide for the shift table */
} nl_case;

static const nl_case NL_CASES[] = {
    {"cubic 12 A, 150 atoms", 150, {12, 0, 0, 0, 12, 0, 0, 0, 12}, {1, 1, 1}, 1, 5.0, 4.0, 0, 0},
    {"triclinic, atoms outside", 60, {7.1, 0, 0, 1.3, 6.4, 0, -0.9, 1.1, 6.9}, {1, 1, 1}, 1, 5.0, 4.0, 1.7, 0},
    {"tiny cell, many images", 3, {2.1, 0, 0, 0.4, 2.3, 0, 0.2, -0.3, 2.2}, {1, 1, 1}, 1, 5.0, 4.5, -2.3, 0},
    {"one atom, self images", 1, {3.0, 0, 0, 0, 3.2, 0, 0, 0, 2.9}, {1, 1, 1}, 1, 4.0, 5.0, 0, 0},
    {"slab (pbc 1 1 0)", 80, {9.0, 0, 0, 0, 9.5, 0, 0, 0, 14.0}, {1, 1, 0}, 1, 5.0, 4.0, 0.6, 0},
    {"open cluster", 70, {0}, {0, 0, 0}, 0, 5.0, 4.0, 0, 0},
    {"nb cutoff larger", 100, {10, 0, 0, 0, 11, 0, 0, 0, 10.5}, {1, 1, 1}, 1, 3.0, 4.5, 0, 0},
    /* 13 images per axis: 4 bits each, over the shift table's 10 in all,
     * so each pair's shift is computed from its key, not looked up */
    {"1 A cell, no shift table", 1, {1.05, 0, 0, 0.1, 1.1, 0, 0, 0.2, 1.0}, {1, 1, 1}, 1, 5.0, 4.0, 0, 1},
    {"2 atoms, no shift table", 2, {1.6, 0, 0, 0, 1.5, 0, 0.1, 0, 1.55}, {1, 1, 1}, 1, 5.0, 4.0, 1.2, 1},
};
#define N_NL_CASES ((int)(sizeof NL_CASES / sizeof NL_CASES[0]))

static void nl_positions(const nl_case *c, double *pos, uint64_t seed)
{
    tu_rng_seed(seed);
    if (c->has_cell && c->n > 1) {
        tu_random_positions(pos, c->n, 0.0, c->cell, 0.9);
    } else if (c->has_cell) {
        pos[0] = 0.3, pos[1] = 0.2, pos[2] = 0.1;
    } else {
        tu_random_positions(pos, c->n, 9.0, NULL, 1.0);
    }
    /* every third atom moved by a fraction of the cell: non-zero wrap offsets */
    for (size_t i = 0; c->outside != 0.0 && i < c->n; i += 3)
        for (int k = 0; k < 3; k++)
            pos[3 * i + k] += c->outside * (c->cell[k] + c->cell[3 + k] + (c->pbc[2] ? c->cell[6 + k] : 0.0));
}

static int32_t *dl_idx(const ecenet_backend *be, const int32_t *d, int64_t n)
{
    int32_t *h = malloc((size_t)(n + 1) * sizeof *h);
    ck_assert_ptr_nonnull(h);
    be->download_idx(h, d, (size_t)n);
    return h;
}

static void nl_same_i32(const char *what, const char *label, const int32_t *host, const int32_t *dev,
                        int64_t n)
{
    for (int64_t k = 0; k < n; k++)
        ck_assert_msg(host[k] == dev[k], "%s: %s[%lld]: host %d, device %d", label, what,
                      (long long)k, (int)host[k], (int)dev[k]);
}

/* One list: device arrays (backend memory), downloaded and compared. */
static void nl_compare_list(const ecenet_backend *be, const char *label, const char *name,
                            const ecn_pairlist *h, int64_t N, const ecenet_nlist_out *o,
                            const int32_t *types)
{
    char what[64];
    int32_t *a;
#define CMP(field, host, len)                                                              \
    do {                                                                                   \
        snprintf(what, sizeof what, "%s." #field, name);                                   \
        a = dl_idx(be, o->field, len);                                                     \
        nl_same_i32(what, label, host, a, len);                                            \
        free(a);                                                                           \
    } while (0)
    CMP(src, h->src, h->n);
    CMP(dst, h->dst, h->n);
    CMP(src_ptr, h->src_ptr, N + 1);
    CMP(src_idx, h->src_idx, h->n);
    CMP(dst_ptr, h->dst_ptr, N + 1);
    CMP(dst_idx, h->dst_idx, h->n);
#undef CMP
    if (o->tsrc) {
        int32_t *ts = dl_idx(be, o->tsrc, h->n), *td = dl_idx(be, o->tdst, h->n);
        for (int64_t k = 0; k < h->n; k++)
            ck_assert_msg(ts[k] == types[h->src[k]] && td[k] == types[h->dst[k]],
                          "%s: %s types of entry %lld", label, name, (long long)k);
        free(ts);
        free(td);
    }
    double *sh = malloc((size_t)(3 * h->n + 1) * sizeof *sh);
    ck_assert_ptr_nonnull(sh);
    be->download(sh, o->shift, (size_t)(3 * h->n));
    for (int64_t k = 0; k < 3 * h->n; k++) {
        const double want = be->precision == ECENET_F64 ? h->shift[k] : (double)(float)h->shift[k];
        ck_assert_msg(memcmp(&want, &sh[k], sizeof want) == 0,
                      "%s: %s shift[%lld][%lld]: host %.17g, device %.17g", label, name,
                      (long long)(k / 3), (long long)(k % 3), want, sh[k]);
    }
    free(sh);
}

static void nl_alloc_list(const ecenet_backend *be, int64_t m, int64_t N, int types,
                          ecenet_nlist_out *o)
{
    const size_t b = (size_t)(m + 1) * sizeof(int32_t), bp = (size_t)(N + 1) * sizeof(int32_t);
    o->src = be->alloc(b);
    o->dst = be->alloc(b);
    o->tsrc = types ? be->alloc(b) : NULL;
    o->tdst = types ? be->alloc(b) : NULL;
    o->shift = be->alloc((size_t)(3 * m + 1) * be->real_size);
    o->src_ptr = be->alloc(bp);
    o->src_idx = be->alloc(b);
    o->dst_ptr = be->alloc(bp);
    o->dst_idx = be->alloc(b);
    ck_assert(o->src && o->dst && o->shift && o->src_ptr && o->src_idx && o->dst_ptr && o->dst_idx);
    ck_assert(!types || (o->tsrc && o->tdst));
}

static void nl_free_list(const ecenet_backend *be, ecenet_nlist_out *o)
{
    void *p[9] = {o->src, o->dst, o->tsrc, o->tdst, o->shift, o->src_ptr, o->src_idx, o->dst_ptr,
                  o->dst_idx};
    for (int k = 0; k < 9; k++)
        if (p[k])
            be->release(p[k]);
}

/* The device lists of one system against the host's (the device must not
 * ask for the host search here). */
static void nl_check_system(const ecenet_backend *be, const char *label, size_t N, const double *pos,
                           const double *cell, const int pbc[3], double rce, double rcn,
                           int no_mtab)
{
    char err[512];
    ecn_graph hg, dg;
    memset(&dg, 0, sizeof dg);
    ck_assert_msg(ecn_graph_build(N, pos, cell, pbc, rce, rcn, &hg, err, sizeof err) == ECENET_OK,
                  "%s: host graph: %s", label, err);
    ecenet_nlist s;
    ck_assert_msg(ecn_graph_setup(N, pos, cell, pbc, rce, rcn, &dg, &s, err, sizeof err) ==
                      ECENET_OK,
                  "%s: set-up: %s", label, err);
    if (no_mtab >= 0)
        ck_assert_msg(s.use_mtab == !no_mtab, "%s: shift table %s, this case wants it %s", label,
                      s.use_mtab ? "used" : "not used", no_mtab ? "not used" : "used");
    ecenet_nlist_counts c;
    ck_assert_int_eq(be->nlist_count(&s, &c), 0);
    check_no_cuda_error(label);
    ck_assert_int_eq(c.fallback, 0);
    ck_assert_msg(c.n_edges == hg.edges.n && c.n_nb == hg.nb.n,
                  "%s: device counts %lld edges, %lld pairs; host %lld, %lld", label,
                  (long long)c.n_edges, (long long)c.n_nb, (long long)hg.edges.n, (long long)hg.nb.n);
    int32_t *types = malloc(N * sizeof *types);
    ck_assert_ptr_nonnull(types);
    for (size_t i = 0; i < N; i++)
        types[i] = (int32_t)(i % 3);
    int32_t *dtypes = be->alloc(N * sizeof *dtypes);
    be->upload_idx(dtypes, types, N);
    ecenet_nlist_out eo, no;
    nl_alloc_list(be, c.n_edges, (int64_t)N, 1, &eo);
    nl_alloc_list(be, c.n_nb, (int64_t)N, 0, &no);
    be->nlist_fill(&s, dtypes, &eo, &no);
    check_no_cuda_error(label);
    nl_compare_list(be, label, "edges", &hg.edges, (int64_t)N, &eo, types);
    nl_compare_list(be, label, "nb", &hg.nb, (int64_t)N, &no, NULL);
    nl_free_list(be, &eo);
    nl_free_list(be, &no);
    be->release(dtypes);
    free(types);
    ecn_graph_free(&hg);
    ecn_graph_free(&dg);
}

START_TEST(test_nlist_lists)
{
    const ecenet_backend *be = get_backend(_i);
    ck_assert(be->nlist_count != NULL && be->nlist_fill != NULL && be->download_idx != NULL);
    /* warps per atom: automatic (these small systems get many), then 1 (what
     * systems over 64 x SMs atoms get) and 3 (a stencil split unevenly) */
    static const int warps[] = {0, 1, 3};
    for (int w = 0; w < 3; w++) {
        ecn_cuda_set_nlist_warps(warps[w]);
        for (int k = 0; k < N_NL_CASES; k++) {
            const nl_case *c = &NL_CASES[k];
            double *pos = malloc(3 * c->n * sizeof *pos);
            ck_assert_ptr_nonnull(pos);
            for (uint64_t seed = 1; seed <= 2; seed++) {
                nl_positions(c, pos, 100 * (uint64_t)k + seed);
                char label[160];
                snprintf(label, sizeof label, "cuda %s, %s (seed %llu, warps per atom %s)",
                         CONFIGS[_i].label, c->label, (unsigned long long)seed,
                         warps[w] ? (warps[w] == 1 ? "1" : "3") : "auto");
                nl_check_system(be, label, c->n, pos, c->has_cell ? c->cell : NULL, c->pbc,
                                c->rce, c->rcn, c->no_mtab);
            }
            free(pos);
        }
    }
    ecn_cuda_set_nlist_warps(0);
    /* the golden structures */
    static const char *gold[] = {"diamond", "ethanol"};
    for (int g = 0; g < 2; g++) {
        structure s;
        load_structure(gold[g], &s);
        const int pbc[3] = {s.periodic, s.periodic, s.periodic};
        char label[128];
        snprintf(label, sizeof label, "cuda %s, golden %s", CONFIGS[_i].label, gold[g]);
        nl_check_system(be, label, s.N, s.pos, s.periodic ? s.cell : NULL, pbc, 5.0, 4.0, -1);
        free_structure(&s);
    }
    /* a coincident pair (through an image): the device asks for the host search */
    {
        const double cell[9] = {6, 0, 0, 0, 6, 0, 0, 0, 6};
        const double pos[6] = {0.5, 0.5, 0.5, 6.5, 0.5, 0.5};
        const int pbc[3] = {1, 1, 1};
        char err[512];
        ecn_graph dg;
        memset(&dg, 0, sizeof dg);
        ecenet_nlist s;
        ck_assert_int_eq(ecn_graph_setup(2, pos, cell, pbc, 5.0, 4.0, &dg, &s, err, sizeof err),
                         ECENET_OK);
        ecenet_nlist_counts c;
        ck_assert_int_eq(be->nlist_count(&s, &c), 0);
        ck_assert_msg(c.fallback == 1, "coincident atoms: fallback %d", c.fallback);
        ecn_graph_free(&dg);
    }
    check_no_cuda_error("nlist");
    printf("cuda %-8s device neighbour lists equal the host's (%d systems x 2 seeds x 3 warp "
           "counts + 2 golden), coincident pair -> host search\n",
           CONFIGS[_i].label, N_NL_CASES);
}
END_TEST

/* Through the public API: the device search gives the host search's bits,
 * and coincident atoms give the host's error. */
START_TEST(test_nlist_compute)
{
    const ecenet_backend *be = get_backend(_i);
    ecenet_model *m = load_model("diamond");
    structure s;
    load_structure("diamond", &s);
    result r[2];
    for (int dev = 0; dev < 2; dev++) {
        char err[1024];
        ecenet_ctx *ctx = NULL;
        ck_assert_msg(ecenet_ctx_create(m, "cuda", (ecenet_precision)be->precision, &ctx, err,
                                        sizeof err) == ECENET_OK,
                      "cuda: %s", err);
        ck_assert_int_eq(ecenet_ctx_set_option(ctx, ECENET_OPT_DEVICE_NLIST, dev), ECENET_OK);
        if (CONFIGS[_i].tf32)
            ck_assert_int_eq(ecenet_ctx_set_option(ctx, ECENET_OPT_TF32, 1), ECENET_OK);
        r[dev].forces = malloc(3 * s.N * sizeof(double));
        ck_assert_ptr_nonnull(r[dev].forces);
        ecenet_system sys = {s.N, s.pos, s.numbers, s.cell, {1, 1, 1}};
        ecenet_outputs out = {&r[dev].energy, r[dev].forces, 3 * s.N, r[dev].stress, 6,
                              NULL, 0, NULL, 0};
        ck_assert_msg(ecenet_compute(ctx, &sys, &out) == ECENET_OK, "cuda: %s",
                      ecenet_ctx_error(ctx));
        if (dev) {
            /* atom 1 onto atom 0's image: the host search's message */
            double *p2 = malloc(3 * s.N * sizeof *p2);
            ck_assert_ptr_nonnull(p2);
            memcpy(p2, s.pos, 3 * s.N * sizeof *p2);
            for (int k = 0; k < 3; k++)
                p2[3 + k] = s.pos[k] + s.cell[k];
            ecenet_system bad = {s.N, p2, s.numbers, s.cell, {1, 1, 1}};
            ck_assert_int_eq(ecenet_compute(ctx, &bad, &out), ECENET_ERR_INPUT);
            ck_assert_msg(strstr(ecenet_ctx_error(ctx), "atoms 0 and 1 coincide") != NULL,
                          "coincident atoms: '%s'", ecenet_ctx_error(ctx));
            printf("cuda %-8s device search, coincident atoms: %s\n", CONFIGS[_i].label,
                   ecenet_ctx_error(ctx));
            free(p2);
            /* and the context works again */
            double e2 = 0.0;
            ecenet_outputs o2 = {&e2, NULL, 0, NULL, 0, NULL, 0, NULL, 0};
            ck_assert_int_eq(ecenet_compute(ctx, &sys, &o2), ECENET_OK);
            ck_assert(memcmp(&e2, &r[dev].energy, sizeof e2) == 0);
        }
        ecenet_ctx_free(ctx);
    }
    check_no_cuda_error("nlist compute");
    ck_assert_msg(same_bits(&r[0], &r[1], &s),
                  "cuda %s: device search vs host search: energy %.17g vs %.17g",
                  CONFIGS[_i].label, r[1].energy, r[0].energy);
    printf("cuda %-8s diamond: device and host neighbour search give the same bits (E %.17g)\n",
           CONFIGS[_i].label, r[0].energy);
    for (int k = 0; k < 2; k++)
        free(r[k].forces);
    free_structure(&s);
    ecenet_model_free(m);
}
END_TEST

/* One golden case (ECENET_CUDA_GOLDEN, default diamond), two runs, bitwise
 * equal and without a CUDA error: small enough for compute-sanitizer. */
START_TEST(test_golden)
{
    const char *name = getenv("ECENET_CUDA_GOLDEN");
    if (!name || !*name)
        name = "diamond";
    const ecenet_backend *be = get_backend(_i);
    ecenet_model *m = load_model(name);
    structure s;
    load_structure(name, &s);
    result r[2];
    for (int k = 0; k < 2; k++)
        compute(m, (ecenet_precision)be->precision, &s, &r[k]);
    check_no_cuda_error(name);
    ck_assert_msg(isfinite(r[0].energy), "cuda %s %s: energy %g", CONFIGS[_i].label, name,
                  r[0].energy);
    ck_assert_msg(same_bits(&r[0], &r[1], &s), "cuda %s %s: two runs differ (energy %.17g vs %.17g)",
                  CONFIGS[_i].label, name, r[1].energy, r[0].energy);
    printf("cuda %-8s %-14s energy %.17g, bitwise equal in two runs\n", CONFIGS[_i].label, name,
           r[0].energy);
    for (int k = 0; k < 2; k++)
        free(r[k].forces);
    free_structure(&s);
    ecenet_model_free(m);
}
END_TEST
#endif /* ECENET_HAVE_CUDA */

/* 1 if a CUDA device is usable; asked in a child process so that this
 * process never initialises CUDA before Check forks the tests. */
static int cuda_usable(char *why, size_t len)
{
#ifdef ECENET_HAVE_CUDA
    int fd[2];
    if (pipe(fd) != 0) {
        snprintf(why, len, "pipe() failed");
        return 0;
    }
    pid_t pid = fork();
    if (pid < 0) {
        snprintf(why, len, "fork() failed");
        return 0;
    }
    if (pid == 0) {
        char msg[512] = "";
        int ok = ecn_cuda_available(msg, sizeof msg);
        ssize_t w = write(fd[1], msg, strlen(msg) + 1);
        (void)w;
        _exit(ok ? 0 : 1);
    }
    close(fd[1]);
    ssize_t n = read(fd[0], why, len - 1);
    why[n > 0 ? n : 0] = 0;
    close(fd[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    return WIFEXITED(status) && WEXITSTATUS(status) == 0;
#else
    snprintf(why, len, "the cuda backend is not compiled in (configure --with-cuda)");
    return 0;
#endif
}

int main(void)
{
    char why[512] = "";
    setvbuf(stdout, NULL, _IOLBF, 0); /* lines reach the log before a failing check */
    if (!cuda_usable(why, sizeof why)) {
        printf("SKIP: %s\n", why);
        return 77;
    }
#ifdef ECENET_HAVE_CUDA
    Suite *s = suite_create("cuda");
    TCase *mem = tcase_create("memory");
    /* Check's default limit, 4 s, is less than a CUDA context can take to start */
    tcase_set_timeout(mem, TU_HANG_GUARD_S);
    tcase_add_loop_test(mem, test_memory, 0, N_CONFIGS);
    suite_add_tcase(s, mem);
    TCase *tf = tcase_create("tf32");
    tcase_set_timeout(tf, 600);
    tcase_add_test(tf, test_tf32_switch);
    tcase_add_loop_test(tf, test_split_weights, 0, 3);
    suite_add_tcase(s, tf);
    TCase *nl = tcase_create("nlist");
    tcase_set_timeout(nl, 600);
    tcase_add_loop_test(nl, test_nlist_lists, 0, 2); /* f64, f32 */
    tcase_add_loop_test(nl, test_nlist_compute, 0, N_CONFIGS);
    suite_add_tcase(s, nl);
    TCase *gold = tcase_create("golden");
    tcase_set_timeout(gold, 600);
    tcase_add_loop_test(gold, test_golden, 0, N_CONFIGS);
    suite_add_tcase(s, gold);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int nf = srunner_ntests_failed(sr);
    srunner_free(sr);
    return nf ? EXIT_FAILURE : EXIT_SUCCESS;
#else
    return 77;
#endif
}
