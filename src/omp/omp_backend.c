/* The omp backend's vtable (one instance per precision: ecn_omp_backend_f32 /
 * ecn_omp_backend_f64), host memory hooks, per-thread scratch, the BLIS GEMM
 * wrapper and the edge-type grouping shared by the linear layers and MLPs. */
#define _POSIX_C_SOURCE 200809L
#include <blis.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#ifdef _OPENMP
#include <omp.h>
#endif
#include "backend.h"
#include "error.h"
#include "omp_ops.h"

/* ---- host memory ---------------------------------------------------------- */

/* 64-byte aligned, with a zeroed 256-byte tail: BLIS's kernels load a full
 * vector at the end of a row of C (e.g. 4 floats for the last 3), so up to
 * a vector past an operand's last element must be readable (the guard-page
 * test in tests/check_backends.c places buffers this far from an unmapped
 * page). Reads of a whole row past A are kept off buffer ends by omp_gemm. */
#define ALLOC_SLACK 256

static void *be_alloc(size_t bytes)
{
    void *p = NULL;
    if (bytes > SIZE_MAX - 2 * ALLOC_SLACK || posix_memalign(&p, 64, bytes + ALLOC_SLACK) != 0)
        return NULL;
    memset((char *)p + bytes, 0, ALLOC_SLACK);
    return p;
}

static void be_release(void *p) { free(p); }

#define PAR_MIN 65536 /* below this many elements a copy/convert loop runs serially */

static void be_zero(void *p, size_t bytes)
{
    if (!bytes)
        return;
    const size_t chunk = (size_t)1 << 20;
    const int64_t nc = (int64_t)((bytes + chunk - 1) / chunk);
    char *c = p;
#pragma omp parallel for schedule(static) if (nc > 1)
    for (int64_t k = 0; k < nc; k++) {
        size_t o = (size_t)k * chunk;
        memset(c + o, 0, bytes - o < chunk ? bytes - o : chunk);
    }
}

static void be_copy(void *dst, const void *src, size_t bytes)
{
    if (!bytes)
        return;
    const size_t chunk = (size_t)1 << 20;
    const int64_t nc = (int64_t)((bytes + chunk - 1) / chunk);
    char *d = dst;
    const char *s = src;
#pragma omp parallel for schedule(static) if (nc > 1)
    for (int64_t k = 0; k < nc; k++) {
        size_t o = (size_t)k * chunk;
        memcpy(d + o, s + o, bytes - o < chunk ? bytes - o : chunk);
    }
}

static void be_upload(void *dst_, const double *src, size_t n)
{
    real *dst = dst_;
#pragma omp parallel for schedule(static) if (n > PAR_MIN)
    for (int64_t k = 0; k < (int64_t)n; k++)
        dst[k] = (real)src[k];
}

static void be_download(double *dst, const void *src_, size_t n)
{
    const real *src = src_;
#pragma omp parallel for schedule(static) if (n > PAR_MIN)
    for (int64_t k = 0; k < (int64_t)n; k++)
        dst[k] = (double)src[k];
}

static void be_upload_idx(int32_t *dst, const int32_t *src, size_t n)
{
    if (n)
        memcpy(dst, src, n * sizeof(int32_t));
}

static void be_download_idx(int32_t *dst, const int32_t *src, size_t n)
{
    if (n)
        memcpy(dst, src, n * sizeof(int32_t));
}

static double be_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void be_sync(void) {}

/* ---- tile size ------------------------------------------------------------- */

static int tile_env = 0;
static pthread_once_t tile_once = PTHREAD_ONCE_INIT;

static void tile_init(void)
{
    /* ECENET_OMP_TILE: tuning knob (edges per tile); results depend on it only
     * through BLIS's blocking, never on the number of threads */
    tile_env = ecn_env_int("ECENET_OMP_TILE", 0, 1, 4096); /* 0: unset */
}

int OMP_FN(omp_tile_edges)(int F)
{
    pthread_once(&tile_once, tile_init);
    if (tile_env)
        return tile_env;
    /* about 8192 features per (m, part) slice of a tile: 32 edges at F = 256
     * (tuned on the bench config), more at small F where BLIS's per-call
     * overhead dominates */
    int t = 8192 / (F > 0 ? F : 1);
    t = t < 32 ? 32 : (t > 256 ? 256 : t);
    return t & ~7;
}

/* ---- per-thread scratch ----------------------------------------------------- */

typedef struct {
    void *p[OMP_SCR_SLOTS];
    size_t n[OMP_SCR_SLOTS];
} scratch;

static pthread_key_t scr_key;
static pthread_once_t scr_once = PTHREAD_ONCE_INIT;

static void scr_free(void *v)
{
    scratch *s = v;
    for (int k = 0; k < OMP_SCR_SLOTS; k++)
        free(s->p[k]);
    free(s);
}

static void scr_init(void)
{
    if (pthread_key_create(&scr_key, scr_free) != 0) {
        fprintf(stderr, "libecenet (omp backend): cannot create the scratch key\n");
        abort();
    }
}

void *OMP_FN(omp_scratch)(int slot, size_t bytes)
{
    pthread_once(&scr_once, scr_init);
    scratch *s = pthread_getspecific(scr_key);
    if (!s) {
        s = calloc(1, sizeof *s);
        if (!s || pthread_setspecific(scr_key, s) != 0) {
            fprintf(stderr, "libecenet (omp backend): out of memory for thread scratch\n");
            abort();
        }
    }
    if (s->n[slot] < bytes) {
        size_t want = bytes + bytes / 4 + 4096;
        free(s->p[slot]);
        s->p[slot] = NULL;
        s->n[slot] = 0;
        if (posix_memalign(&s->p[slot], 64, want) != 0) {
            fprintf(stderr, "libecenet (omp backend): cannot allocate %zu bytes of thread "
                            "scratch\n", want);
            abort();
        }
        s->n[slot] = want;
    }
    return s->p[slot];
}

/* ---- BLIS ---------------------------------------------------------------------- */

void OMP_FN(omp_gemm)(int64_t m, int64_t n, int64_t k, const real *A, int64_t rsa,
                      int64_t csa, const real *B, int64_t rsb, int64_t csb, real beta, real *C,
                      int64_t rsc, int64_t csc, int a_next)
{
    if (m <= 0 || n <= 0)
        return;
    if (k <= 0) {
        for (int64_t i = 0; i < m; i++)
            for (int64_t j = 0; j < n; j++)
                C[i * rsc + j * csc] = beta == RL(0.0) ? RL(0.0) : beta * C[i * rsc + j * csc];
        return;
    }
    rntm_t rntm;
    bli_rntm_init(&rntm);
    bli_rntm_set_num_threads(1, &rntm);
    if (!a_next)
        bli_rntm_disable_l3_sup(&rntm);
    real one = RL(1.0);
#ifdef OMP_F32
    bli_sgemm_ex(BLIS_NO_TRANSPOSE, BLIS_NO_TRANSPOSE, m, n, k, &one, (real *)A, rsa, csa,
                 (real *)B, rsb, csb, &beta, C, rsc, csc, NULL, &rntm);
#else
    bli_dgemm_ex(BLIS_NO_TRANSPOSE, BLIS_NO_TRANSPOSE, m, n, k, &one, (real *)A, rsa, csa,
                 (real *)B, rsb, csb, &beta, C, rsc, csc, NULL, &rntm);
#endif
}

/* ---- edge-type grouping -------------------------------------------------------- */

/* off needs 2T+1 entries (the second half is a cursor). */
void OMP_FN(omp_group_rows)(int64_t e0, int nt, ecenet_idx types, int T, int32_t *perm,
                            int32_t *off)
{
    int32_t *cur = off + T + 1;
    for (int t = 0; t <= T; t++)
        off[t] = 0;
    for (int r = 0; r < nt; r++)
        off[types[e0 + r] + 1]++;
    for (int t = 0; t < T; t++) {
        off[t + 1] += off[t];
        cur[t] = off[t];
    }
    for (int r = 0; r < nt; r++)
        perm[cur[types[e0 + r]]++] = r;
}

void OMP_FN(omp_corr_gemm)(int nt, const int32_t *perm, const int32_t *off, int T,
                           const real *W, int64_t wstride, int64_t rsb, int64_t csb, int64_t k,
                           int64_t n, const real *A, int64_t lda, real *C, int64_t ldc,
                           real *As, real *Cs)
{
    (void)nt;
    for (int t = 0; t < T; t++) {
        const int c = off[t + 1] - off[t];
        if (!c)
            continue;
        const int32_t *rows = perm + off[t];
        for (int j = 0; j < c; j++)
            memcpy(As + (int64_t)j * k, A + (int64_t)rows[j] * lda, (size_t)k * sizeof(real));
        OMP_FN(omp_gemm)(c, n, k, As, k, 1, W + (int64_t)t * wstride, rsb, csb, RL(0.0), Cs, n,
                         1, 1); /* As is followed by Cs */
        for (int j = 0; j < c; j++) {
            real *y = C + (int64_t)rows[j] * ldc;
            const real *ys = Cs + (int64_t)j * n;
            OMP_SIMD
            for (int64_t o = 0; o < n; o++)
                y[o] += ys[o];
        }
    }
}

/* the CPU (Linux: /proc/cpuinfo) and the OpenMP threads, for `ecenet bench`'s header */
static char dev_line[256];
static pthread_once_t dev_once = PTHREAD_ONCE_INIT;

static void dev_init(void)
{
    char model[160] = "(CPU model unknown)", line[512];
    FILE *f = fopen("/proc/cpuinfo", "r");
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, "model name", 10) && strchr(line, ':')) {
            const char *c = strchr(line, ':') + 1;
            c += strspn(c, " \t");
            snprintf(model, sizeof model, "%s", c);
            model[strcspn(model, "\n")] = 0;
            break;
        }
    if (f)
        fclose(f);
#ifdef _OPENMP
    const int nt = omp_get_max_threads();
#else
    const int nt = 1;
#endif
    snprintf(dev_line, sizeof dev_line, "%s, %d OpenMP thread%s", model, nt, nt == 1 ? "" : "s");
}

static const char *be_device(void)
{
    pthread_once(&dev_once, dev_init);
    return dev_line;
}

/* ---- the vtable ------------------------------------------------------------------- */

const ecenet_backend OMP_FN(ecn_omp_backend) = {
    .name = "omp",
    .precision = OMP_PREC,
    .real_size = sizeof(real),
    .alloc = be_alloc,
    .release = be_release,
    .zero = be_zero,
    .copy = be_copy,
    .upload = be_upload,
    .download = be_download,
    .upload_idx = be_upload_idx,
    .download_idx = be_download_idx,
    .now = be_now,
    .sync = be_sync,
    .device = be_device,
    .pair_geom_fwd = OMP_FN(omp_pair_geom_fwd),
    .pair_geom_vjp = OMP_FN(omp_pair_geom_vjp),
    .dist_vjp = OMP_FN(omp_dist_vjp),
    .radial_fwd = OMP_FN(omp_radial_fwd),
    .radial_vjp = OMP_FN(omp_radial_vjp),
    .sph_fwd = OMP_FN(omp_sph_fwd),
    .ace_fwd = OMP_FN(omp_ace_fwd),
    .ace_vjp = OMP_FN(omp_ace_vjp),
    .embed_fwd = OMP_FN(omp_embed_fwd),
    .embed_vjp = OMP_FN(omp_embed_vjp),
    .wigner_fwd = OMP_FN(omp_wigner_fwd),
    .wigner_vjp = OMP_FN(omp_wigner_vjp),
    .edge_frame_fwd = OMP_FN(omp_edge_frame_fwd),
    .edge_frame_vjp = OMP_FN(omp_edge_frame_vjp),
    .dist_embed_fwd = OMP_FN(omp_dist_embed_fwd),
    .dist_embed_vjp = OMP_FN(omp_dist_embed_vjp),
    .linear_fwd = OMP_FN(omp_linear_fwd),
    .linear_vjp = OMP_FN(omp_linear_vjp),
    .realspace_fwd = OMP_FN(omp_realspace_fwd),
    .realspace_vjp = OMP_FN(omp_realspace_vjp),
    .add = OMP_FN(omp_add),
    .layer_fwd = OMP_FN(omp_layer_fwd),
    .layer_vjp = OMP_FN(omp_layer_vjp),
    .mp_pack_unrotate_fwd = OMP_FN(omp_mp_pack_unrotate_fwd),
    .mp_pack_unrotate_vjp = OMP_FN(omp_mp_pack_unrotate_vjp),
    .mp_weight_fwd = OMP_FN(omp_mp_weight_fwd),
    .mp_weight_vjp = OMP_FN(omp_mp_weight_vjp),
    .mp_scatter_fwd = OMP_FN(omp_mp_scatter_fwd),
    .mp_scatter_vjp = OMP_FN(omp_mp_scatter_vjp),
    .mp_rotate_unpack_fwd = OMP_FN(omp_mp_rotate_unpack_fwd),
    .mp_rotate_unpack_vjp = OMP_FN(omp_mp_rotate_unpack_vjp),
    .mp_attn_weight_fwd = OMP_FN(omp_mp_attn_weight_fwd),
    .mp_attn_weight_vjp = OMP_FN(omp_mp_attn_weight_vjp),
    .film_fwd = OMP_FN(omp_film_fwd),
    .film_vjp = OMP_FN(omp_film_vjp),
    .chan_scale_fwd = OMP_FN(omp_chan_scale_fwd),
    .chan_scale_vjp = OMP_FN(omp_chan_scale_vjp),
    .mlp_fwd = OMP_FN(omp_mlp_fwd),
    .mlp_vjp = OMP_FN(omp_mlp_vjp),
    .energy_fwd = OMP_FN(omp_energy_fwd),
    .energy_vjp = OMP_FN(omp_energy_vjp),
    .sum = OMP_FN(omp_sum),
};
