/* Pair geometry, radial basis, spherical harmonics, ACE basis and embedding
 * (SPEC §2.5-§6); mirrors src/ref/ref_geometry.c, ref_sph.c, ref_ace.c.
 * Per-entry work runs one thread per entry; per-atom sums loop over the
 * atom's CSR entries in order (no atomics). Transcendentals and the
 * spherical-harmonic recursions are evaluated in double for both precisions. */
#include "cuda_common.cuh"
#include "cuda_ops.cuh"

namespace ecn_cu {

/* ---- pair geometry ----------------------------------------------------------------- */

template <typename T>
__global__ void pair_geom_fwd_k(int64_t n, const int32_t *src, const int32_t *dst, const T *shift,
                                const T *pos, T *d, T *r)
{
    const int64_t k = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (k >= n)
        return;
    double v[3];
    for (int a = 0; a < 3; a++) {
        v[a] = ((double)pos[3 * (int64_t)dst[k] + a] - (double)pos[3 * (int64_t)src[k] + a]) +
               (double)shift[3 * k + a];
        d[3 * k + a] = (T)v[a];
    }
    r[k] = (T)sqrt(v[0] * v[0] + v[1] * v[1] + v[2] * v[2] + 1e-30);
}

template <typename T>
static void pair_geom_fwd(int64_t n, ecenet_idx src, ecenet_idx dst, const void *shift,
                          const void *pos, void *d, void *r)
{
    state();
    if (n <= 0)
        return;
    pair_geom_fwd_k<T><<<blocks_for(n, 256), 256>>>(n, src, dst, (const T *)shift,
                                                    (const T *)pos, (T *)d, (T *)r);
    CU_LAUNCHED();
}

/* Position gradient by atom: the thread at an atom's first CSR position (of
 * its by_dst group, or of its by_src group when the atom has no dst entries)
 * sums the atom's dst entries (+) then its src entries (-), in CSR order. No
 * atom count is needed: every atom with entries has a leader. */
template <typename T>
__global__ void pos_bar_k(int64_t n, const int32_t *src, const int32_t *dst,
                          const int32_t *sptr, const int32_t *sidx, const int32_t *dptr,
                          const int32_t *didx, const T *dbar, T *pos_bar)
{
    int64_t q = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (q >= 2 * n)
        return;
    int64_t a;
    if (q < n) {
        a = dst[didx[q]];
        if (q != dptr[a])
            return;
    } else {
        q -= n;
        a = src[sidx[q]];
        if (q != sptr[a] || dptr[a] != dptr[a + 1])
            return;
    }
    T acc[3] = {0, 0, 0};
    for (int32_t p = dptr[a]; p < dptr[a + 1]; p++) {
        const int64_t k = didx[p];
        for (int c = 0; c < 3; c++)
            acc[c] += dbar[3 * k + c];
    }
    for (int32_t p = sptr[a]; p < sptr[a + 1]; p++) {
        const int64_t k = sidx[p];
        for (int c = 0; c < 3; c++)
            acc[c] -= dbar[3 * k + c];
    }
    for (int c = 0; c < 3; c++)
        pos_bar[3 * a + c] += acc[c];
}

/* no grouping given: one thread, entry order */
template <typename T>
__global__ void pos_bar_serial_k(int64_t n, const int32_t *src, const int32_t *dst,
                                 const T *dbar, T *pos_bar)
{
    for (int64_t k = 0; k < n; k++)
        for (int a = 0; a < 3; a++) {
            pos_bar[3 * (int64_t)dst[k] + a] += dbar[3 * k + a];
            pos_bar[3 * (int64_t)src[k] + a] -= dbar[3 * k + a];
        }
}

/* virial partials: fixed grid (a function of n), fp64 block trees */
template <typename T>
__global__ void virial_part_k(int64_t n, const T *d, const T *dbar, double *part)
{
    extern __shared__ double sh[];
    double v[9] = {0, 0, 0, 0, 0, 0, 0, 0, 0};
    for (int64_t k = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; k < n;
         k += (int64_t)gridDim.x * blockDim.x)
        for (int b = 0; b < 3; b++)
            for (int a = 0; a < 3; a++)
                v[3 * b + a] += (double)d[3 * k + b] * (double)dbar[3 * k + a];
    block_reduce<9>(v, sh);
    if (threadIdx.x == 0)
        for (int q = 0; q < 9; q++)
            part[9 * blockIdx.x + q] = v[q];
}

template <typename T> __global__ void virial_final_k(int nb, const double *part, T *virial)
{
    const int q = threadIdx.x;
    if (q >= 9)
        return;
    double v = 0.0;
    for (int b = 0; b < nb; b++)
        v += part[9 * b + q];
    virial[q] += (T)v;
}

template <typename T>
static void pair_geom_vjp(int64_t n, ecenet_idx src, ecenet_idx dst, const ecenet_csr *by_src,
                          const ecenet_csr *by_dst, const void *d_, const void *dbar_,
                          void *pos_bar_, void *virial_)
{
    state();
    if (n <= 0)
        return;
    const T *d = (const T *)d_, *dbar = (const T *)dbar_;
    T *pos_bar = (T *)pos_bar_;
    if (by_src && by_dst) {
        pos_bar_k<T><<<blocks_for(2 * n, 256), 256>>>(n, src, dst, by_src->ptr, by_src->idx,
                                                      by_dst->ptr, by_dst->idx, dbar, pos_bar);
    } else {
        pos_bar_serial_k<T><<<1, 1>>>(n, src, dst, dbar, pos_bar);
    }
    CU_LAUNCHED();
    if (!virial_)
        return;
    int nb = (int)((n + 255) / 256);
    if (nb > REDUCE_MAX_BLOCKS)
        nb = REDUCE_MAX_BLOCKS;
    double *part = reduce_scratch();
    virial_part_k<T><<<nb, 256, 9 * 256 * sizeof(double)>>>(n, d, dbar, part);
    CU_LAUNCHED();
    virial_final_k<T><<<1, 32>>>(nb, part, (T *)virial_);
    CU_LAUNCHED();
}

template <typename T>
__global__ void dist_vjp_k(int64_t n, const T *d, const T *r, const T *rbar, T *dbar)
{
    const int64_t k = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (k >= n)
        return;
    for (int a = 0; a < 3; a++)
        dbar[3 * k + a] += rbar[k] * d[3 * k + a] / r[k];
}

template <typename T>
static void dist_vjp(int64_t n, const void *d, const void *r, const void *rbar, void *dbar)
{
    state();
    if (n <= 0)
        return;
    dist_vjp_k<T><<<blocks_for(n, 256), 256>>>(n, (const T *)d, (const T *)r, (const T *)rbar,
                                               (T *)dbar);
    CU_LAUNCHED();
}

/* ---- radial basis ----------------------------------------------------------------------- */

__device__ static void envelope(double r, double c, int type, double *fc, double *dfc)
{
    if (!(r < c)) {
        *fc = 0.0;
        *dfc = 0.0;
        return;
    }
    if (type == ECENET_CUTOFF_POLY) {
        double y = r / c;
        *fc = 1.0 - 10.0 * y * y * y + 15.0 * y * y * y * y - 6.0 * y * y * y * y * y;
        *dfc = -30.0 * y * y * (1.0 - y) * (1.0 - y) / c;
    } else {
        *fc = 0.5 * (1.0 + cos(M_PI * r / c));
        *dfc = -(M_PI / (2.0 * c)) * sin(M_PI * r / c);
    }
}

template <typename T>
__global__ void radial_fwd_k(int64_t n, const T *r, double c, int K, int type, T *f, T *df)
{
    const int64_t k = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (k >= n)
        return;
    const double rk = (double)r[k], norm = sqrt(2.0 / c);
    double fc, dfc;
    envelope(rk, c, type, &fc, &dfc);
    if (K == 0) {
        f[k] = (T)fc;
        if (df)
            df[k] = (T)dfc;
        return;
    }
    for (int q = 1; q <= K; q++) {
        double x = q * M_PI * rk / c;
        double sinc, dsinc;
        if (fabs(x) < 1e-8) {
            sinc = 1.0;
            dsinc = 0.0;
        } else {
            sinc = sin(x) / x;
            dsinc = (cos(x) - sinc) / x;
        }
        f[k * K + q - 1] = (T)(norm * sinc * fc);
        if (df)
            df[k * K + q - 1] = (T)(norm * (dsinc * (q * M_PI / c) * fc + sinc * dfc));
    }
}

template <typename T>
static void radial_fwd(int64_t n, const void *r, double cutoff, int K, int cutoff_type, void *f,
                       void *df)
{
    state();
    if (n <= 0)
        return;
    radial_fwd_k<T><<<blocks_for(n, 128), 128>>>(n, (const T *)r, cutoff, K, cutoff_type, (T *)f,
                                                 (T *)df);
    CU_LAUNCHED();
}

template <typename T>
__global__ void radial_vjp_k(int64_t n, int cols, const T *df, const T *fbar, T *rbar)
{
    const int64_t k = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (k >= n)
        return;
    T acc = 0;
    for (int q = 0; q < cols; q++)
        acc += fbar[k * cols + q] * df[k * cols + q];
    rbar[k] += acc;
}

template <typename T>
static void radial_vjp(int64_t n, int K, const void *df, const void *fbar, void *rbar)
{
    state();
    if (n <= 0)
        return;
    radial_vjp_k<T><<<blocks_for(n, 256), 256>>>(n, K == 0 ? 1 : K, (const T *)df,
                                                 (const T *)fbar, (T *)rbar);
    CU_LAUNCHED();
}

/* ---- spherical harmonics (SPEC §4; ref_sph.c) ------------------------------------------------ */

#define SPH_LMAX 12

/* col[l] = d^m P_l/dt^m (t), l = 0..L+1 (0 for l < m) */
__device__ static void legendre_col(int m, double t, int L, double *col)
{
    for (int l = 0; l <= L + 1; l++)
        col[l] = 0.0;
    if (m > L + 1)
        return;
    double qmm = 1.0;
    for (int j = 1; j <= 2 * m - 1; j += 2)
        qmm *= j;
    col[m] = qmm;
    if (m + 1 <= L + 1)
        col[m + 1] = (2 * m + 1) * t * qmm;
    for (int l = m + 2; l <= L + 1; l++)
        col[l] = ((2 * l - 1) * t * col[l - 1] - (l + m - 1) * col[l - 2]) / (l - m);
}

template <typename T>
__global__ void sph_fwd_k(int64_t n, int L, const T *d, T *Y, T *dY)
{
    const int64_t k = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (k >= n)
        return;
    const int S = (L + 1) * (L + 1);
    const double v0 = d[3 * k], v1 = d[3 * k + 1], v2 = d[3 * k + 2];
    const double rr = sqrt(v0 * v0 + v1 * v1 + v2 * v2);
    const double u[3] = {v0 / rr, v1 / rr, v2 / rr};
    double colA[SPH_LMAX + 2], colB[SPH_LMAX + 2];
    T *y = Y + k * S;
    T *dy = dY ? dY + k * S * 3 : NULL;
    double c = 1.0, s = 0.0, cp = 0.0, sp = 0.0; /* c_m, s_m and c_{m-1}, s_{m-1} */
    legendre_col(0, u[2], L, colA);
    for (int am = 0; am <= L; am++) {
        if (am > 0) {
            const double cn = c * u[0] - s * u[1], sn = c * u[1] + s * u[0];
            cp = c;
            sp = s;
            c = cn;
            s = sn;
            for (int l = 0; l <= L + 1; l++)
                colA[l] = colB[l];
        }
        legendre_col(am + 1, u[2], L, colB);
        for (int l = am; l <= L; l++) {
            double ratio = 1.0;
            for (int q = l - am + 1; q <= l + am; q++)
                ratio /= q;
            const double Nlm = sqrt((2 * l + 1) / (4.0 * M_PI) * ratio);
            const double pre = (am == 0 ? 1.0 : sqrt(2.0)) * Nlm;
            for (int sg = 0; sg < (am ? 2 : 1); sg++) {
                const int m = sg ? -am : am;
                const double trig = m >= 0 ? c : s;
                const int idx = l * l + l + m;
                y[idx] = (T)(pre * colA[l] * trig);
                if (!dy)
                    continue;
                double g[3];
                if (am == 0) {
                    g[0] = 0.0;
                    g[1] = 0.0;
                } else if (m > 0) {
                    g[0] = pre * colA[l] * am * cp;
                    g[1] = -pre * colA[l] * am * sp;
                } else {
                    g[0] = pre * colA[l] * am * sp;
                    g[1] = pre * colA[l] * am * cp;
                }
                g[2] = pre * colB[l] * trig;
                const double ug = u[0] * g[0] + u[1] * g[1] + u[2] * g[2];
                for (int a = 0; a < 3; a++)
                    dy[idx * 3 + a] = (T)((g[a] - u[a] * ug) / rr);
            }
        }
    }
}

template <typename T> static void sph_fwd(int64_t n, int L, const void *d, void *Y, void *dY)
{
    state();
    if (n <= 0)
        return;
    if (L > SPH_LMAX) {
        fail(-2, "sph_fwd: l_max above 12 is not supported", __FILE__, __LINE__);
        return;
    }
    sph_fwd_k<T><<<blocks_for(n, 128), 128>>>(n, L, (const T *)d, (T *)Y, (T *)dY);
    CU_LAUNCHED();
}

/* ---- ACE basis and embedding ------------------------------------------------------------------ */

/* one block per atom; element (t, n, s) per thread, pairs in CSR order */
template <typename T>
__global__ void ace_fwd_k(int64_t N, int T_, int R, int S, const int32_t *ptr, const int32_t *idx,
                          const int32_t *nb_dst, const int32_t *types, const T *f, const T *Y,
                          T *A)
{
    const int TRS = T_ * R * S;
    for (int64_t i = blockIdx.x; i < N; i += gridDim.x)
        for (int el = threadIdx.x; el < TRS; el += blockDim.x) {
            const int t = el / (R * S), n = (el / S) % R, s = el % S;
            T acc = 0;
            for (int32_t q = ptr[i]; q < ptr[i + 1]; q++) {
                const int64_t p = idx[q];
                if (types[nb_dst[p]] == t)
                    acc += f[p * R + n] * Y[p * S + s];
            }
            A[i * TRS + el] = acc;
        }
}

template <typename T>
static void ace_fwd(const ecenet_dims *dm, ecenet_idx nb_src, ecenet_idx nb_dst, ecenet_idx types,
                    const void *f, const void *Y, void *A)
{
    (void)nb_src;
    state();
    if (dm->N <= 0)
        return;
    const int TRS = dm->T * dm->R * dm->S;
    const int th = TRS >= 256 ? 256 : (TRS + 31) / 32 * 32;
    ace_fwd_k<T><<<grid_items(dm->N), th>>>(dm->N, dm->T, dm->R, dm->S, dm->p_src.ptr,
                                            dm->p_src.idx, nb_dst, types, (const T *)f,
                                            (const T *)Y, (T *)A);
    CU_LAUNCHED();
}

template <typename T>
__global__ void ace_vjp_k(int64_t P, int T_, int R, int S, const int32_t *nb_src,
                          const int32_t *nb_dst, const int32_t *types, const T *f, const T *df,
                          const T *Y, const T *dY, const T *d, const T *r, const T *Abar, T *dbar)
{
    const int64_t p = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (p >= P)
        return;
    const T *G = Abar + ((int64_t)nb_src[p] * T_ + types[nb_dst[p]]) * R * S;
    T rbar = 0, g[3] = {0, 0, 0};
    for (int s = 0; s < S; s++) {
        T ybar = 0;
        for (int n = 0; n < R; n++)
            ybar += f[p * R + n] * G[n * S + s];
        for (int a = 0; a < 3; a++)
            g[a] += ybar * dY[(p * S + s) * 3 + a];
    }
    for (int n = 0; n < R; n++) {
        T fbar = 0;
        for (int s = 0; s < S; s++)
            fbar += G[n * S + s] * Y[p * S + s];
        rbar += fbar * df[p * R + n];
    }
    for (int a = 0; a < 3; a++)
        dbar[3 * p + a] += g[a] + rbar * d[3 * p + a] / r[p];
}

template <typename T>
static void ace_vjp(const ecenet_dims *dm, ecenet_idx nb_src, ecenet_idx nb_dst, ecenet_idx types,
                    const void *f, const void *df, const void *Y, const void *dY, const void *d,
                    const void *r, const void *Abar, void *dbar)
{
    state();
    if (dm->P <= 0)
        return;
    ace_vjp_k<T><<<blocks_for(dm->P, 128), 128>>>(
        dm->P, dm->T, dm->R, dm->S, nb_src, nb_dst, types, (const T *)f, (const T *)df,
        (const T *)Y, (const T *)dY, (const T *)d, (const T *)r, (const T *)Abar, (T *)dbar);
    CU_LAUNCHED();
}

template <typename T>
__global__ void embed_fwd_k(int64_t N, int T_, int R, int S, int C, const int32_t *types,
                            const T *W, const T *A, T *Ae)
{
    const int64_t q = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (q >= N * C * S)
        return;
    const int64_t i = q / ((int64_t)C * S);
    const int c = (int)((q / S) % C), s = (int)(q % S);
    const T *Wi = W + (int64_t)types[i] * T_ * R * C;
    T acc = 0;
    for (int t = 0; t < T_; t++)
        for (int n = 0; n < R; n++)
            acc += A[((i * T_ + t) * R + n) * S + s] * Wi[(t * R + n) * C + c];
    Ae[q] = acc;
}

template <typename T>
static void embed_fwd(const ecenet_dims *dm, ecenet_idx types, const void *W, const void *A,
                      void *A_emb)
{
    state();
    const int64_t n = dm->N * dm->C * dm->S;
    if (n <= 0)
        return;
    embed_fwd_k<T><<<blocks_for(n, 256), 256>>>(dm->N, dm->T, dm->R, dm->S, dm->C, types,
                                                (const T *)W, (const T *)A, (T *)A_emb);
    CU_LAUNCHED();
}

template <typename T>
__global__ void embed_vjp_k(int64_t N, int T_, int R, int S, int C, const int32_t *types,
                            const T *W, const T *Eb, T *Ab)
{
    const int64_t q = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (q >= N * T_ * R * S)
        return;
    const int64_t i = q / ((int64_t)T_ * R * S);
    const int t = (int)((q / ((int64_t)R * S)) % T_), n = (int)((q / S) % R), s = (int)(q % S);
    const T *Wi = W + (int64_t)types[i] * T_ * R * C;
    T acc = 0;
    for (int c = 0; c < C; c++)
        acc += Eb[(i * C + c) * S + s] * Wi[(t * R + n) * C + c];
    Ab[q] += acc;
}

template <typename T>
static void embed_vjp(const ecenet_dims *dm, ecenet_idx types, const void *W,
                      const void *A_emb_bar, void *Abar)
{
    state();
    const int64_t n = dm->N * dm->T * dm->R * dm->S;
    if (n <= 0)
        return;
    embed_vjp_k<T><<<blocks_for(n, 256), 256>>>(dm->N, dm->T, dm->R, dm->S, dm->C, types,
                                                (const T *)W, (const T *)A_emb_bar, (T *)Abar);
    CU_LAUNCHED();
}

template <typename T> void fill_geometry(ecenet_backend &b)
{
    b.pair_geom_fwd = pair_geom_fwd<T>;
    b.pair_geom_vjp = pair_geom_vjp<T>;
    b.dist_vjp = dist_vjp<T>;
    b.radial_fwd = radial_fwd<T>;
    b.radial_vjp = radial_vjp<T>;
    b.sph_fwd = sph_fwd<T>;
    b.ace_fwd = ace_fwd<T>;
    b.ace_vjp = ace_vjp<T>;
    b.embed_fwd = embed_fwd<T>;
    b.embed_vjp = embed_vjp<T>;
}

template void fill_geometry<float>(ecenet_backend &);
template void fill_geometry<double>(ecenet_backend &);

} // namespace ecn_cu
