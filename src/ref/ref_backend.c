/* The reference backend's vtable: host memory, fp64, the ops of src/ref/. */
#define _POSIX_C_SOURCE 200809L
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "backend.h"
#include "ref.h"

static void *ref_alloc(size_t bytes) { return malloc(bytes ? bytes : 1); }
static void ref_release(void *p) { free(p); }
static void ref_zero(void *p, size_t bytes) { if (bytes) memset(p, 0, bytes); }
static void ref_copy(void *dst, const void *src, size_t bytes) { if (bytes) memcpy(dst, src, bytes); }
static void ref_upload(void *dst, const double *src, size_t n) { if (n) memcpy(dst, src, n * sizeof(double)); }
static void ref_download(double *dst, const void *src, size_t n) { if (n) memcpy(dst, src, n * sizeof(double)); }
static void ref_upload_idx(int32_t *dst, const int32_t *src, size_t n) { if (n) memcpy(dst, src, n * sizeof(int32_t)); }
static void ref_download_idx(int32_t *dst, const int32_t *src, size_t n) { if (n) memcpy(dst, src, n * sizeof(int32_t)); }
static double ref_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}
static void ref_sync(void) {}

const ecenet_backend ecn_ref_backend = {
    .name = "ref",
    .precision = ECENET_F64,
    .real_size = sizeof(double),
    .alloc = ref_alloc,
    .release = ref_release,
    .zero = ref_zero,
    .copy = ref_copy,
    .upload = ref_upload,
    .download = ref_download,
    .upload_idx = ref_upload_idx,
    .download_idx = ref_download_idx,
    .now = ref_now,
    .sync = ref_sync,
    .pair_geom_fwd = ref_pair_geom_fwd,
    .pair_geom_vjp = ref_pair_geom_vjp,
    .dist_vjp = ref_dist_vjp,
    .radial_fwd = ref_radial_fwd,
    .radial_vjp = ref_radial_vjp,
    .sph_fwd = ref_sph_fwd,
    .ace_fwd = ref_ace_fwd,
    .ace_vjp = ref_ace_vjp,
    .embed_fwd = ref_embed_fwd,
    .embed_vjp = ref_embed_vjp,
    .wigner_fwd = ref_wigner_fwd,
    .wigner_vjp = ref_wigner_vjp,
    .edge_frame_fwd = ref_edge_frame_fwd,
    .edge_frame_vjp = ref_edge_frame_vjp,
    .dist_embed_fwd = ref_dist_embed_fwd,
    .dist_embed_vjp = ref_dist_embed_vjp,
    .linear_fwd = ref_linear_fwd,
    .linear_vjp = ref_linear_vjp,
    .realspace_fwd = ref_realspace_fwd,
    .realspace_vjp = ref_realspace_vjp,
    .add = ref_add,
    .mp_pack_unrotate_fwd = ref_mp_pack_unrotate_fwd,
    .mp_pack_unrotate_vjp = ref_mp_pack_unrotate_vjp,
    .mp_weight_fwd = ref_mp_weight_fwd,
    .mp_weight_vjp = ref_mp_weight_vjp,
    .mp_scatter_fwd = ref_mp_scatter_fwd,
    .mp_scatter_vjp = ref_mp_scatter_vjp,
    .mp_rotate_unpack_fwd = ref_mp_rotate_unpack_fwd,
    .mp_rotate_unpack_vjp = ref_mp_rotate_unpack_vjp,
    .mp_attn_weight_fwd = ref_mp_attn_weight_fwd,
    .mp_attn_weight_vjp = ref_mp_attn_weight_vjp,
    .film_fwd = ref_film_fwd,
    .film_vjp = ref_film_vjp,
    .chan_scale_fwd = ref_chan_scale_fwd,
    .chan_scale_vjp = ref_chan_scale_vjp,
    .mlp_fwd = ref_mlp_fwd,
    .mlp_vjp = ref_mlp_vjp,
    .energy_fwd = ref_energy_fwd,
    .energy_vjp = ref_energy_vjp,
    .sum = ref_sum,
};
