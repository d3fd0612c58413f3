/* Timing driver for the cuda backend (not part of the build): the bench
 * config on a rattled diamond box, forward and joint E+F, fp32, fp32+TF32,
 * fp64, fused layer entries on/off; per-op profile; standalone RealSpace
 * (scalar against vector kernels; --rs-only: just that, --rs-edges N,
 * --rs-reps N, --rs-no-sweep, --rs-ncu: one launch of each for ncu, --rs-sin0:
 * the layer variants on sin0_zero parameters; --rs-sym: the folded kernels
 * of grid_sym parameters as well); the
 * largest box that fits. Build: see .cudabuild/rs.sh. */
#define _POSIX_C_SOURCE 200809L
#include <cuda_runtime_api.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "backend.h"
#include "cuda_backend.h"
#include "engine.h"
#include "graph.h"
#include "model.h"
#include "profile.h"
#include "step.h"
#include "synth.h"
#ifndef M_PI
#define M_PI 3.14159265358979323846
#endif

static int cmpd(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}
static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmpd);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static size_t dev_used(void)
{
    size_t fr = 0, tot = 0;
    cudaMemGetInfo(&fr, &tot);
    return tot - fr;
}

typedef struct {
    const char *label;
    int prec, tf32, fused;
} cfgrow;

static int run_cfg(const ecenet_model *m, const ecn_graph *g, size_t n, const double *pos,
                   const int32_t *types, const cfgrow *cf, int nw, int nt, double *energy,
                   double *forces, int profile)
{
    const ecenet_backend *be = ecn_backend_get("cuda", cf->prec);
    char err[1024];
    ecn_cuda_set_tf32(cf->tf32);
    size_t base = dev_used();
    ecn_cuda_reset_peak();
    ecn_engine *eng = NULL;
    if (ecn_engine_create(m, be, &eng, err, sizeof err) != ECENET_OK) {
        printf("%-14s engine: %s\n", cf->label, err);
        return -1;
    }
    ecn_engine_set_fused(eng, cf->fused);
    ecn_step_in in = {n, pos, types, g, NULL};
    double tf[64], tj[64];
    for (int joint = 0; joint < 2; joint++)
        for (int it = 0; it < nw + nt; it++) {
            ecn_step_out out;
            memset(&out, 0, sizeof out);
            out.grad = joint ? forces : NULL;
            be->sync();
            double t0 = ecn_synth_now();
            if (ecn_step(eng, &in, &out, err, sizeof err) != ECENET_OK) {
                printf("%-14s step: %s\n", cf->label, err);
                ecn_engine_free(eng);
                return -1;
            }
            double t = ecn_synth_now() - t0;
            if (it >= nw)
                (joint ? tj : tf)[it - nw] = t;
            *energy = out.energy;
        }
    size_t peak_hook = ecn_cuda_peak_bytes(), used = dev_used() - base;
    printf("%-14s forward %8.3f ms  joint %8.3f ms  E = %.10f  params %.1f MB  workspace %.1f "
           "MB  peak(alloc hook) %.2f GiB  device used by step %.2f GiB\n",
           cf->label, 1e3 * median(tf, nt), 1e3 * median(tj, nt), *energy,
           ecn_engine_param_bytes(eng) / 1e6, ecn_engine_workspace_bytes(eng) / 1e6,
           peak_hook / 1073741824.0, used / 1073741824.0);
    if (profile) {
        ecn_profile prof;
        memset(&prof, 0, sizeof prof);
        ecn_step_out out;
        memset(&out, 0, sizeof out);
        out.grad = forces;
        out.prof = &prof;
        if (ecn_step(eng, &in, &out, err, sizeof err) == ECENET_OK) {
            ecn_prof_row *rows = NULL;
            size_t nr = ecn_prof_by_op(&prof, 1, 1, &rows);
            printf("   op profile (synced per op): fwd %.3f ms, total %.3f ms\n",
                   1e3 * prof.fwd_seconds, 1e3 * prof.total_seconds);
            for (size_t k = 0; k < nr && k < 22; k++)
                printf("     %-24s %s %4d calls %9.3f ms\n", rows[k].key, rows[k].vjp ? "bwd" : "fwd",
                       rows[k].calls, 1e3 * rows[k].seconds);
            free(rows);
        }
        ecn_profile_free(&prof);
    }
    ecn_engine_free(eng);
    char msg[600];
    if (ecn_cuda_error(msg, sizeof msg)) {
        printf("CUDA ERROR: %s\n", msg);
        return -1;
    }
    return 0;
}

/* ---- standalone RealSpace ------------------------------------------------------------
 * Scalar (ecn_cuda_set_rs_vector(0)) against vector kernels (mode 1: wherever
 * they apply) side by side, medians over `reps` runs, the L2 flushed (a
 * memset of twice its size) before every timed launch:
 *   fwd      Y = RealSpace(X)              realspace_fwd             reads X, writes Y
 *   fwd+res  X += RealSpace(Z)             layer_fwd's kernel        reads Z, X, writes X
 *   vjp+=    Xb += RealSpace_vjp(X, Yb)    realspace_vjp             reads X, Yb, Xb, writes Xb
 *   vjp=     tmp = RealSpace_vjp(Z, Xb)    layer_vjp's kernel        reads Z, Xb, writes tmp
 * The two layer variants run the layer entries' RealSpace kernel alone
 * (ecn_cuda_rs_layer_kernels; until the sixth session they were timed as the
 * layer entry minus its linear, which overstated the sin0_zero kernels'
 * speed). GB/s counts each tensor read or written once (with --rs-sin0 the
 * layer kernels skip the sin m = 0 slot, so they move 1/8 less than that);
 * "max|diff|" compares the scalar and vector outputs (same inputs; the
 * accumulating ones start from the same state). */

#define RS_NV 4

typedef struct {
    const ecenet_backend *be;
    int64_t E;
    size_t n, rs;
    ecenet_realspace_params p;
    void *X, *Y, *Yb, *Xb, *Z, *Xio, *tmp, *X0;
    void *flush;
    size_t flush_bytes;
    cudaEvent_t a, b;
} rsb_ctx;

static void rsb_flush(rsb_ctx *c, int r)
{
    if (c->flush)
        cudaMemsetAsync(c->flush, r & 0xff, c->flush_bytes, 0);
}

static float rsb_elapsed(rsb_ctx *c)
{
    float ms = 0.0f;
    cudaEventSynchronize(c->b);
    cudaEventElapsedTime(&ms, c->a, c->b);
    return ms;
}

/* ms of one op after an L2 flush, between two events */
#define RSB_TIME(c, r, call)                                                                       \
    (rsb_flush((c), (r)), cudaEventRecord((c)->a, 0), (call), cudaEventRecord((c)->b, 0),          \
     rsb_elapsed(c))

/* one run of variant v (0..3): its time in ms */
static double rsb_run(rsb_ctx *c, int v, int r)
{
    const ecenet_backend *be = c->be;
    const size_t bytes = c->n * c->rs;
    const int prec = be->precision;
    switch (v) {
    case 0:
        return RSB_TIME(c, r, be->realspace_fwd(c->E, &c->p, NULL, NULL, c->X, c->Y));
    case 1:
        /* X += RealSpace(Z), X and Z from X0 every run (the kernel writes Z's m = 0 slots) */
        be->copy(c->Xio, c->X0, bytes);
        be->copy(c->Z, c->X0, bytes);
        return RSB_TIME(c, r, ecn_cuda_rs_layer_kernels(prec, 0, c->E, &c->p, NULL, c->Z, c->Xio,
                                                        NULL));
    case 2:
        be->zero(c->Xb, bytes);
        return RSB_TIME(c, r, be->realspace_vjp(c->E, &c->p, NULL, NULL, c->X, c->Yb, c->Xb));
    default:
        /* tmp = RealSpace_vjp(Z = X, Xbar = Yb) */
        return RSB_TIME(c, r, ecn_cuda_rs_layer_kernels(prec, 1, c->E, &c->p, NULL, c->X, c->Yb,
                                                        c->tmp));
    }
}

/* the output of variant v after rsb_run */
static const void *rsb_out(const rsb_ctx *c, int v)
{
    return v == 0 ? c->Y : v == 1 ? c->Xio : v == 2 ? c->Xb : c->tmp;
}

/* max |a - b| and the number of elements whose bits differ (raw device data) */
static double rsb_diff(const void *a, const void *b, size_t n, size_t rs, size_t *nbits)
{
    double m = 0.0;
    *nbits = 0;
    for (size_t k = 0; k < n; k++) {
        double x, y;
        if (rs == sizeof(float)) {
            x = ((const float *)a)[k];
            y = ((const float *)b)[k];
        } else {
            x = ((const double *)a)[k];
            y = ((const double *)b)[k];
        }
        if (memcmp((const char *)a + k * rs, (const char *)b + k * rs, rs))
            (*nbits)++;
        const double d = fabs(x - y);
        if (d > m || d != d)
            m = d;
    }
    return m;
}

/* --rs-sin0: the tables' sin m = 0 entries are zero (they are), so the layer
 * variants run the sin0_zero kernels (ecenet_realspace_params.sin0_zero) */
static int rs_sin0;
/* --rs-sym: the vector kernels also with grid_sym (the tables are the exact
 * DFT matrices, mirror-symmetric), a third column of rows: the folded
 * kernels unless ECENET_RS_SYM=0 */
static int rs_sym;

static void realspace_bench(int prec, int64_t E, int F, int Q, int G, int reps, int sweep, int ncu)
{
    rsb_ctx c;
    memset(&c, 0, sizeof c);
    const ecenet_backend *be = c.be = ecn_backend_get("cuda", prec);
    const char *pn = prec == ECENET_F64 ? "f64" : "f32";
    c.E = E;
    const size_t n = c.n = (size_t)E * 2 * Q * F, rs = c.rs = be->real_size;
    double *h = malloc(n * sizeof(double));
    if (!h) {
        printf("realspace bench: out of host memory\n");
        return;
    }
    void **bufs[] = {&c.X, &c.Y, &c.Yb, &c.Xb, &c.Z, &c.Xio, &c.tmp, &c.X0};
    int ok = 1;
    for (size_t k = 0; k < sizeof bufs / sizeof bufs[0]; k++)
        ok &= (*bufs[k] = be->alloc(n * rs)) != NULL;
    struct cudaDeviceProp dp;
    cudaGetDeviceProperties(&dp, 0);
    c.flush_bytes = 2 * (size_t)dp.l2CacheSize;
    if (cudaMalloc(&c.flush, c.flush_bytes) != cudaSuccess) {
        c.flush = NULL;
        (void)cudaGetLastError();
    }
    if (!ok) {
        printf("realspace bench: out of device memory\n");
        goto done;
    }
    for (size_t k = 0; k < n; k++)
        h[k] = sin(0.001 * (double)k) * 1.3;
    be->upload(c.X, h, n);
    be->upload(c.X0, h, n);
    for (size_t k = 0; k < n; k++)
        h[k] = cos(0.0007 * (double)k + 0.3) * 0.9;
    be->upload(c.Yb, h, n);
    double cs[64], ss[64], ca[64], sa[64], sc[1024], sh[1024];
    for (int m = 0; m < Q; m++)
        for (int k = 0; k < G; k++) {
            const double th = 2.0 * M_PI * k / G, w = m ? 2.0 / G : 1.0 / G;
            cs[m * G + k] = cos(m * th);
            ss[m * G + k] = sin(m * th);
            ca[k * Q + m] = w * cos(m * th);
            sa[k * Q + m] = w * sin(m * th);
        }
    for (int f = 0; f < F; f++) {
        sc[f] = 1.0 + 0.01 * f / F;
        sh[f] = 0.1;
    }
    void *dcs = be->alloc(Q * G * rs), *dss = be->alloc(Q * G * rs), *dca = be->alloc(Q * G * rs),
         *dsa = be->alloc(Q * G * rs), *dsc = be->alloc(F * rs), *dsh = be->alloc(F * rs);
    be->upload(dcs, cs, Q * G);
    be->upload(dss, ss, Q * G);
    be->upload(dca, ca, Q * G);
    be->upload(dsa, sa, Q * G);
    be->upload(dsc, sc, F);
    be->upload(dsh, sh, F);
    ecenet_realspace_params *p = &c.p;
    p->F = F;
    p->Q = Q;
    p->G = G;
    p->T = 1;
    p->act = ECENET_ACT_SILU;
    p->cos_synth = dcs;
    p->sin_synth = dss;
    p->cos_analysis = dca;
    p->sin_analysis = dsa;
    p->scale = dsc;
    p->shift = dsh;
    p->sin0_zero = rs_sin0;
    cudaEventCreate(&c.a);
    cudaEventCreate(&c.b);
    const int old_mode = ecn_cuda_set_rs_vector(1);
    const double bytes = (double)n * rs;
    if (ncu) { /* one launch of everything, for ncu --kernel-name regex:rs_ */
        for (int mi = 0; mi < (rs_sym ? 3 : 2); mi++) { /* the columns of the timed pass */
            ecn_cuda_set_rs_vector(mi ? 1 : 0);
            c.p.grid_sym = mi == 2;
            for (int v = 0; v < RS_NV; v++)
                rsb_run(&c, v, 0);
        }
        c.p.grid_sym = 0;
        printf("realspace %s: ncu pass done\n", pn);
        goto restore;
    }
    /* copy baseline */
    double tc[256];
    if (reps > 256)
        reps = 256;
    for (int r = 0; r < reps + 2; r++) {
        rsb_flush(&c, r);
        cudaEventRecord(c.a, 0);
        cudaMemcpyAsync(c.Y, c.X, n * rs, cudaMemcpyDeviceToDevice, 0);
        cudaEventRecord(c.b, 0);
        const float ms = rsb_elapsed(&c);
        if (r >= 2)
            tc[r - 2] = ms;
    }
    const double mc = median(tc, reps), copy_gbs = 2 * bytes / mc / 1e6;
    printf("\nrealspace %s E=%lld F=%d Q=%d G=%d SiLU+affine, medians of %d runs, L2 (%d MB) flushed "
           "before each: device copy %.3f ms (%.0f GB/s)\n",
           pn, (long long)E, F, Q, G, reps, dp.l2CacheSize >> 20, mc, copy_gbs);
    static const char *vname[RS_NV] = {"fwd     Y = RS(X)", "fwd+res X += RS(Z)",
                                       "vjp+=   Xb += RS'(X,Yb)", "vjp=    tmp = RS'(Z,Xb)"};
    static const char *vhow[RS_NV] = {"", "layer", "", "layer"};
    static const int ntens[RS_NV] = {2, 3, 4, 3};
    double med[3][RS_NV]; /* scalar, vector, vector folded (--rs-sym) */
    void *keep[RS_NV];
    for (int v = 0; v < RS_NV; v++)
        keep[v] = malloc(n * rs);
    for (int mi = 0; mi < (rs_sym ? 3 : 2); mi++) {
        ecn_cuda_set_rs_vector(mi ? 1 : 0);
        c.p.grid_sym = mi == 2; /* the folded vector kernels */
        for (int v = 0; v < RS_NV; v++) {
            double t0[256];
            for (int r = 0; r < reps + 2; r++) {
                const double t = rsb_run(&c, v, r);
                if (r >= 2)
                    t0[r - 2] = t;
            }
            med[mi][v] = median(t0, reps);
            cudaDeviceSynchronize();
            if (mi == 0) {
                if (keep[v])
                    cudaMemcpy(keep[v], rsb_out(&c, v), n * rs, cudaMemcpyDeviceToHost);
                continue;
            }
            void *cur = keep[v] ? malloc(n * rs) : NULL;
            double d = NAN;
            size_t nb = n;
            if (cur) {
                cudaMemcpy(cur, rsb_out(&c, v), n * rs, cudaMemcpyDeviceToHost);
                d = rsb_diff(keep[v], cur, n, rs, &nb);
                free(cur);
            }
            const double g0 = ntens[v] * bytes / med[0][v] / 1e6,
                         g1 = ntens[v] * bytes / med[mi][v] / 1e6;
            printf("  %-24s %-9s %d tensors | scalar %7.3f ms %5.0f GB/s %3.0f%% | vector%s "
                   "%7.3f ms %5.0f GB/s %3.0f%% | x%.2f | max|diff| %.3g, %zu of %zu differ%s\n",
                   vname[v], vhow[v], ntens[v], med[0][v], g0, 100 * g0 / copy_gbs,
                   mi == 2 ? " sym" : "", med[mi][v], g1, 100 * g1 / copy_gbs,
                   med[0][v] / med[mi][v], d, nb, n, nb ? "" : " (bitwise identical)");
        }
    }
    c.p.grid_sym = 0; /* the sweep below times the unfolded kernels */
    for (int v = 0; v < RS_NV; v++)
        free(keep[v]);
    printf("  (vector = the default mode, wherever the vector kernels apply)\n");
    if (sweep) {
        static const int cfgs[][2] = {{512, 4}, {256, 8}, {512, 8}, {2048, 8}, {1024, 8},
                                      {1024, 4}, {256, 4}, {128, 4}, {2048, 16}, {512, 16}};
        const int sweep_reps = reps < 20 ? reps : 20;
        printf("  launch sweep (fwd, vjp+=; vector: also the layer kernels), %d runs each; a row is "
               "one channel (scalar) or %d "
               "(vector):\n",
               sweep_reps, (int)(16 / rs));
        for (size_t ci = 0; ci < sizeof cfgs / sizeof cfgs[0]; ci++) {
            if (ecn_cuda_set_rs_launch(cfgs[ci][0], cfgs[ci][1]) != 0)
                continue;
            /* m[mode][v]: v = 0 fwd, 1 the layer fwd, 2 vjp+=, 3 the layer vjp
             * (the layer kernels in the vector mode only) */
            double m[2][4];
            for (int mi = 0; mi < 2; mi++) {
                ecn_cuda_set_rs_vector(mi ? 1 : 0);
                for (int v = 0; v < 4; v++) {
                    if (!mi && (v & 1))
                        continue;
                    double tt[256];
                    for (int r = 0; r < sweep_reps + 2; r++) {
                        const double t = rsb_run(&c, v, r);
                        if (r >= 2)
                            tt[r - 2] = t;
                    }
                    m[mi][v] = median(tt, sweep_reps);
                }
            }
            printf("    RS_BLOCK=%5d RS_WARPS=%2d: scalar fwd %.3f ms (%3.0f%%) vjp+= %.3f ms (%3.0f%%) "
                   "| vector fwd %.3f ms (%3.0f%%) vjp+= %.3f ms (%3.0f%%) layer fwd %.3f layer vjp "
                   "%.3f ms\n",
                   cfgs[ci][0], cfgs[ci][1], m[0][0], 100 * mc / m[0][0], m[0][2],
                   100 * 2 * mc / m[0][2], m[1][0], 100 * mc / m[1][0], m[1][2],
                   100 * 2 * mc / m[1][2], m[1][1], m[1][3]);
        }
        ecn_cuda_set_rs_launch(512, 4); /* the default */
    }
restore:
    ecn_cuda_set_rs_vector(old_mode);
    cudaEventDestroy(c.a);
    cudaEventDestroy(c.b);
    be->release(dcs);
    be->release(dss);
    be->release(dca);
    be->release(dsa);
    be->release(dsc);
    be->release(dsh);
done:
    for (size_t k = 0; k < sizeof bufs / sizeof bufs[0]; k++)
        be->release(*bufs[k]);
    if (c.flush)
        cudaFree(c.flush);
    free(h);
    char msg[600];
    if (ecn_cuda_error(msg, sizeof msg))
        printf("CUDA ERROR: %s\n", msg);
}

int main(int argc, char **argv)
{
    int ndia = 4, nw = 3, nt = 10, sizes = 1, rsb = 1, prof = 1, ncu = 0, quick = 0;
    int rs_only = 0, rs_reps = 25, rs_sweep = 1, rs_ncu = 0;
    long long rs_edges = 45648; /* the bench config's diamond 4^3 */
    for (int k = 1; k < argc; k++) {
        if (!strcmp(argv[k], "--diamond") && k + 1 < argc)
            ndia = atoi(argv[++k]);
        else if (!strcmp(argv[k], "--rs-only"))
            rs_only = 1, rsb = 1;
        else if (!strcmp(argv[k], "--rs-edges") && k + 1 < argc)
            rs_edges = atoll(argv[++k]);
        else if (!strcmp(argv[k], "--rs-reps") && k + 1 < argc)
            rs_reps = atoi(argv[++k]);
        else if (!strcmp(argv[k], "--rs-sin0"))
            rs_sin0 = 1;
        else if (!strcmp(argv[k], "--rs-sym"))
            rs_sym = 1;
        else if (!strcmp(argv[k], "--rs-no-sweep"))
            rs_sweep = 0;
        else if (!strcmp(argv[k], "--rs-ncu"))
            rs_only = 1, rsb = 1, rs_ncu = 1;
        else if (!strcmp(argv[k], "--no-sizes"))
            sizes = 0;
        else if (!strcmp(argv[k], "--no-rs"))
            rsb = 0;
        else if (!strcmp(argv[k], "--no-prof"))
            prof = 0;
        else if (!strcmp(argv[k], "--quick"))
            quick = 1, sizes = 0, rsb = 0, nw = 2, nt = 7;
        else if (!strcmp(argv[k], "--ncu"))
            ncu = 1, sizes = 0, rsb = 0, prof = 0, nw = 1, nt = 1;
        else if (!strcmp(argv[k], "--n-time") && k + 1 < argc)
            nt = atoi(argv[++k]);
    }
    char why[256];
    if (!ecn_cuda_available(why, sizeof why)) {
        printf("%s\n", why);
        return 77;
    }
    struct cudaDeviceProp dp;
    cudaGetDeviceProperties(&dp, 0);
    printf("device: %s, %d SMs\n", dp.name, dp.multiProcessorCount);
    if (rsb) {
        if (rs_reps < 1)
            rs_reps = 1;
        realspace_bench(ECENET_F32, rs_edges, 256, 4, 13, rs_reps, rs_sweep, rs_ncu);
        realspace_bench(ECENET_F64, rs_edges, 256, 4, 13, rs_reps, rs_sweep, rs_ncu);
        if (rs_only)
            return 0;
    }
    ecn_config cfg;
    ecn_synth_config("bench", &cfg);
    char err[1024];
    ecenet_model *m = NULL;
    if (ecn_synth_model(&cfg, 1, &m, err, sizeof err) != ECENET_OK) {
        printf("model: %s\n", err);
        return 1;
    }
    const int carbon = ecenet_model_type_of(m, 6);
    for (int pass = 0; pass < (sizes ? 2 : 1); pass++) {
        static const int big[] = {8, 10, 11, 12, 13};
        const int nsz = pass ? (int)(sizeof big / sizeof big[0]) : 1;
        for (int si = 0; si < nsz; si++) {
            const int nd = pass ? big[si] : ndia;
            size_t n = 0;
            double *pos = NULL, cell[9];
            int *numbers = NULL;
            ecn_synth_diamond(nd, 0.05, 1, &n, &pos, &numbers, cell);
            int32_t *types = malloc(n * sizeof *types);
            for (size_t i = 0; i < n; i++)
                types[i] = carbon;
            ecn_graph g;
            memset(&g, 0, sizeof g);
            const int pbc[3] = {1, 1, 1};
            if (ecn_graph_build(n, pos, cell, pbc, m->cfg.r_cut_edge, m->cfg.r_cut_neighbor, &g,
                                err, sizeof err) != ECENET_OK) {
                printf("graph: %s\n", err);
                return 1;
            }
            printf("\ndiamond %d^3: %zu atoms, %lld edges, %lld pairs\n", nd, n,
                   (long long)g.edges.n, (long long)g.nb.n);
            double *F64 = malloc(3 * n * sizeof(double)), *F = malloc(3 * n * sizeof(double));
            double e64 = 0, e = 0;
            if (!pass) {
                const cfgrow rows0[] = {{"f64", ECENET_F64, 0, 1},        {"f32", ECENET_F32, 0, 1},
                                       {"f32+tf32", ECENET_F32, 1, 1},   {"f32 unfused", ECENET_F32, 0, 0},
                                       {"tf32 unfused", ECENET_F32, 1, 0}, {"f64 unfused", ECENET_F64, 0, 0}};
                const cfgrow *rows = ncu ? rows0 + 2 : rows0;
                for (size_t r = 0; r < (ncu ? 1 : quick ? 3 : sizeof rows0 / sizeof rows0[0]); r++) {
                    double *f = r == 0 ? F64 : F;
                    if (run_cfg(m, &g, n, pos, types, &rows[r], nw, nt, r == 0 ? &e64 : &e, f,
                                prof && r < 3) != 0)
                        continue;
                    if (r) {
                        double fm = 0, fd = 0;
                        for (size_t q = 0; q < 3 * n; q++) {
                            fm = fmax(fm, fabs(F64[q]));
                            fd = fmax(fd, fabs(F[q] - F64[q]));
                        }
                        printf("%-14s vs f64: dE/E %.2e  dF/max|F| %.2e\n", rows[r].label,
                               fabs(e - e64) / fabs(e64), fd / fm);
                    }
                }
            } else {
                const cfgrow row = {"f32 (size)", ECENET_F32, 0, 1};
                if (run_cfg(m, &g, n, pos, types, &row, 0, 1, &e, F, 0) != 0) {
                    printf("diamond %d^3 does not fit (or failed)\n", nd);
                    ecn_cuda_clear_error();
                    free(F64);
                    free(F);
                    free(types);
                    free(pos);
                    free(numbers);
                    ecn_graph_free(&g);
                    break;
                }
            }
            free(F64);
            free(F);
            free(types);
            free(pos);
            free(numbers);
            ecn_graph_free(&g);
        }
    }
    ecenet_model_free(m);
    return 0;
}
