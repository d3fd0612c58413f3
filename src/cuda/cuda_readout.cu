/* Readout MLP, per-edge energy and the fp64 sum (SPEC §14), the element FiLM
 * gate and channel scaling (§17.4); mirrors ref_readout.c and ref_film.c.
 *
 * MLPs run as one kernel over tiles of edges: a tile's activations stay in
 * shared memory through all layers (lanes over the tile's rows, so the weight
 * loads are warp broadcasts and the per-row edge-type corrections cost only
 * their own loads); the hidden pre-activations go to H for the VJP. The sum
 * is a fixed two-stage fp64 reduction. */
#include "cuda_common.cuh"
#include "cuda_ops.cuh"

namespace ecn_cu {

template <typename T> struct Mlp {
    int n, act;
    int dims[ECENET_MLP_MAX + 1];
    const T *w[ECENET_MLP_MAX], *b[ECENET_MLP_MAX], *ws[ECENET_MLP_MAX], *wt[ECENET_MLP_MAX];
};

template <typename T> static Mlp<T> mlp_args(const ecenet_mlp_params *p)
{
    Mlp<T> m;
    memset(&m, 0, sizeof m);
    m.n = p->n_layers;
    m.act = p->act;
    for (int k = 0; k <= p->n_layers; k++)
        m.dims[k] = p->dims[k];
    for (int k = 0; k < p->n_layers; k++) {
        m.w[k] = (const T *)p->w[k];
        m.b[k] = (const T *)p->b[k];
        m.ws[k] = (const T *)p->w_src[k];
        m.wt[k] = (const T *)p->w_tgt[k];
    }
    return m;
}

/* where the MLP's input rows come from and where its output goes */
enum { MLP_READOUT = 0, MLP_FILM = 1 };

template <typename T> struct MlpIO {
    const T *X;   /* readout: input rows X[e*ldx + i] */
    int64_t ldx;
    const T *ea, *eb, *fr; /* FiLM: [ea[t_src] ‖ eb[t_tgt] ‖ fr[e]] */
    int P, nrbf;
    const int32_t *ts, *tt;
    T *H;         /* hidden pre-activations (E, nh) or NULL */
    int nh;
};

template <typename T>
__device__ static inline T mlp_weight(const Mlp<T> &p, int k, const int32_t *ts,
                                      const int32_t *tt, int64_t e, int64_t q)
{
    T v = p.w[k][q];
    const int64_t qm = (int64_t)p.dims[k + 1] * p.dims[k];
    if (p.ws[k])
        v += p.ws[k][ts[e] * qm + q];
    if (p.wt[k])
        v += p.wt[k][tt[e] * qm + q];
    return v;
}

/* k0 = 1: layer 0's product is already in H[:, 0:d1] (a GEMM); add its bias,
 * store the pre-activation back and start from layer 1 */
template <typename T, int MODE>
__global__ void mlp_fwd_k(int64_t E, Mlp<T> p, MlpIO<T> io, int tile, int wpad, int k0, T *out)
{
    extern __shared__ unsigned char smraw[];
    T *bufA = (T *)smraw, *bufB = bufA + (size_t)tile * wpad;
    for (int64_t e0 = (int64_t)blockIdx.x * tile; e0 < E; e0 += (int64_t)gridDim.x * tile) {
        const int nt = E - e0 < tile ? (int)(E - e0) : tile;
        T *in = bufA, *nx = bufB;
        const int d0 = p.dims[k0];
        for (int q = threadIdx.x; q < tile * d0; q += blockDim.x) {
            const int r = q / d0, i = q % d0;
            if (r >= nt)
                continue;
            const int64_t e = e0 + r;
            T v;
            if (k0) {
                const T z = io.H[e * io.nh + i] + p.b[0][i];
                io.H[e * io.nh + i] = z;
                v = act_f(p.act, z);
            } else if (MODE == MLP_READOUT)
                v = io.X[e * io.ldx + i];
            else if (i < io.P)
                v = io.ea[(int64_t)io.ts[e] * io.P + i];
            else if (i < 2 * io.P)
                v = io.eb[(int64_t)io.tt[e] * io.P + i - io.P];
            else
                v = io.fr[e * io.nrbf + i - 2 * io.P];
            in[r * wpad + i] = v;
        }
        __syncthreads();
        int hoff = k0 ? p.dims[1] : 0;
        for (int k = k0; k < p.n; k++) {
            const int din = p.dims[k], dout = p.dims[k + 1];
            const bool last = k + 1 == p.n;
            for (int q = threadIdx.x; q < tile * dout; q += blockDim.x) {
                const int r = q % tile, o = q / tile;
                if (r >= nt)
                    continue;
                const int64_t e = e0 + r;
                const T *x = in + r * wpad;
                T acc = 0;
                for (int i = 0; i < din; i++)
                    acc += x[i] * mlp_weight(p, k, io.ts, io.tt, e, (int64_t)o * din + i);
                const T z = acc + p.b[k][o];
                if (last) {
                    if (MODE == MLP_READOUT)
                        out[e * dout + o] = z;
                    else
                        out[e * dout + o] = z + (T)1;
                } else {
                    if (io.H)
                        io.H[e * io.nh + hoff + o] = z;
                    nx[r * wpad + o] = act_f(p.act, z);
                }
            }
            __syncthreads();
            T *t = in;
            in = nx;
            nx = t;
            hoff += dout;
        }
    }
}

/* z0 != NULL: stop at layer 1, writing its input gradient (times act') to
 * z0 (E, d1) instead of going through layer 0 (a GEMM) */
template <typename T, int MODE>
__global__ void mlp_vjp_k(int64_t E, Mlp<T> p, MlpIO<T> io, int tile, int wpad, const T *outbar,
                          T *xbar, T *z0)
{
    extern __shared__ unsigned char smraw[];
    T *bufA = (T *)smraw, *bufB = bufA + (size_t)tile * wpad;
    int hoff[ECENET_MLP_MAX + 1];
    hoff[0] = 0;
    for (int k = 0; k + 1 < p.n; k++)
        hoff[k + 1] = hoff[k] + p.dims[k + 1];
    const int dn = p.dims[p.n];
    for (int64_t e0 = (int64_t)blockIdx.x * tile; e0 < E; e0 += (int64_t)gridDim.x * tile) {
        const int nt = E - e0 < tile ? (int)(E - e0) : tile;
        T *zb = bufA, *nx = bufB;
        for (int q = threadIdx.x; q < tile * dn; q += blockDim.x) {
            const int r = q / dn, o = q % dn;
            if (r < nt)
                zb[r * wpad + o] = outbar[(e0 + r) * dn + o];
        }
        __syncthreads();
        for (int k = p.n - 1; k >= (z0 ? 1 : 0); k--) {
            const int din = p.dims[k], dout = p.dims[k + 1];
            for (int q = threadIdx.x; q < tile * din; q += blockDim.x) {
                const int r = q % tile, i = q / tile;
                if (r >= nt)
                    continue;
                const int64_t e = e0 + r;
                if (k == 0 && MODE == MLP_FILM && i < 2 * io.P)
                    continue; /* the type embeddings carry no geometry gradient */
                const T *z = zb + r * wpad;
                T acc = 0;
                for (int o = 0; o < dout; o++)
                    acc += z[o] * mlp_weight(p, k, io.ts, io.tt, e, (int64_t)o * din + i);
                if (k > 0) {
                    const T v = acc * act_g(p.act, io.H[e * io.nh + hoff[k - 1] + i]);
                    if (z0 && k == 1)
                        z0[e * din + i] = v;
                    else
                        nx[r * wpad + i] = v;
                } else if (MODE == MLP_READOUT) {
                    xbar[e * io.ldx + i] += acc;
                } else {
                    xbar[e * io.nrbf + i - 2 * io.P] += acc;
                }
            }
            __syncthreads();
            T *t = zb;
            zb = nx;
            nx = t;
        }
    }
}

/* rows per block so that two activation buffers fit the shared memory */
template <typename T> static void mlp_tile(const Mlp<T> &p, int *tile, int *wpad, size_t *sm)
{
    int wmax = 1;
    for (int k = 0; k <= p.n; k++)
        wmax = p.dims[k] > wmax ? p.dims[k] : wmax;
    *wpad = wmax | 1; /* odd row stride: lanes on rows hit distinct banks */
    size_t lim = state().smem_optin;
    if (lim > 96 * 1024)
        lim = 96 * 1024;
    int t = 32;
    while (t > 1 && (size_t)2 * t * (*wpad) * sizeof(T) > lim)
        t /= 2;
    *tile = t;
    *sm = (size_t)2 * t * (*wpad) * sizeof(T);
}

template <typename T, int MODE>
static void mlp_fwd_launch(int64_t E, const ecenet_mlp_params *pp, const MlpIO<T> &io, T *out,
                           int k0 = 0)
{
    if (E <= 0)
        return;
    const Mlp<T> p = mlp_args<T>(pp);
    int tile, wpad;
    size_t sm;
    mlp_tile(p, &tile, &wpad, &sm);
    if (!smem_ready(mlp_fwd_k<T, MODE>, sm, "mlp (a layer too wide)"))
        return;
    mlp_fwd_k<T, MODE><<<grid_items((E + tile - 1) / tile), 256, sm>>>(E, p, io, tile, wpad, k0,
                                                                       out);
    CU_LAUNCHED();
}

template <typename T, int MODE>
static void mlp_vjp_launch(int64_t E, const ecenet_mlp_params *pp, const MlpIO<T> &io,
                           const T *outbar, T *xbar, T *z0 = NULL)
{
    if (E <= 0)
        return;
    const Mlp<T> p = mlp_args<T>(pp);
    int tile, wpad;
    size_t sm;
    mlp_tile(p, &tile, &wpad, &sm);
    if (!smem_ready(mlp_vjp_k<T, MODE>, sm, "mlp (a layer too wide)"))
        return;
    mlp_vjp_k<T, MODE><<<grid_items((E + tile - 1) / tile), 256, sm>>>(E, p, io, tile, wpad,
                                                                       outbar, xbar, z0);
    CU_LAUNCHED();
}

static int hidden_size(const ecenet_mlp_params *p)
{
    int h = 0;
    for (int k = 0; k + 1 < p->n_layers; k++)
        h += p->dims[k + 1];
    return h;
}

/* ---- readout: layer 0 on cuBLAS ------------------------------------------------------------ */

static void gemm(cublasOperation_t ta, int m, int n, int k, const float *A, int lda,
                 const float *B, int ldb, float beta, float *C, int ldc)
{
    const float one = 1.0f;
    BLAS_CHECK(cublasSgemm(blas(0), ta, CUBLAS_OP_N, m, n, k, &one, A, lda, B, ldb, &beta, C, ldc));
}

static void gemm(cublasOperation_t ta, int m, int n, int k, const double *A, int lda,
                 const double *B, int ldb, double beta, double *C, int ldc)
{
    const double one = 1.0;
    BLAS_CHECK(cublasDgemm(blas(0), ta, CUBLAS_OP_N, m, n, k, &one, A, lda, B, ldb, &beta, C, ldc));
}

/* the VJP's layer-1 input gradient, in row chunks: fixed, so no allocation
 * per step (like the reduction scratch, one computation at a time) */
#define MLP_Z0_BYTES (8u << 20)
__device__ __align__(256) double g_mlp_z0[MLP_Z0_BYTES / sizeof(double)];

/* rows of the GEMM path per chunk, 0 = the kernel alone. Strict fp32 even
 * in TF32 mode, like the kernel it replaces (the energy is a sum over all
 * edges: no tensor-core rounding in the readout). */
template <typename T> static int64_t mlp_gemm_rows(const ecenet_mlp_params *p, const void *H)
{
    if (p->n_layers < 2 || !H || p->w_src[0] || p->w_tgt[0])
        return 0;
    const int64_t rows = MLP_Z0_BYTES / ((int64_t)p->dims[1] * sizeof(T));
    return rows < 32 ? 0 : rows;
}

template <typename T>
static void mlp_fwd(const ecenet_dims *dm, const ecenet_mlp_params *p, ecenet_idx tsrc,
                    ecenet_idx ttgt, const void *X, void *H, void *y)
{
    state();
    MlpIO<T> io;
    memset(&io, 0, sizeof io);
    io.X = (const T *)X;
    io.ldx = (int64_t)dm->Q * 2 * dm->F;
    io.ts = tsrc;
    io.tt = ttgt;
    io.H = (T *)H;
    io.nh = hidden_size(p);
    if (!mlp_gemm_rows<T>(p, H) || dm->E <= 0) {
        mlp_fwd_launch<T, MLP_READOUT>(dm->E, p, io, (T *)y);
        return;
    }
    /* H[e][o] = Σ_i W0[o][i]·X[e][i], o < d1: column-major H^T = W0^T·X^T */
    const int64_t step = 1 << 30; /* cuBLAS takes int sizes */
    for (int64_t e0 = 0; e0 < dm->E; e0 += step) {
        const int n = (int)(dm->E - e0 < step ? dm->E - e0 : step);
        gemm(CUBLAS_OP_T, p->dims[1], n, p->dims[0], (const T *)p->w[0], p->dims[0],
             io.X + e0 * io.ldx, (int)io.ldx, (T)0, io.H + e0 * io.nh, io.nh);
    }
    mlp_fwd_launch<T, MLP_READOUT>(dm->E, p, io, (T *)y, 1);
}

template <typename T>
static void mlp_vjp(const ecenet_dims *dm, const ecenet_mlp_params *p, ecenet_idx tsrc,
                    ecenet_idx ttgt, const void *H, const void *ybar, void *Xbar)
{
    state();
    MlpIO<T> io;
    memset(&io, 0, sizeof io);
    io.ldx = (int64_t)dm->Q * 2 * dm->F;
    io.ts = tsrc;
    io.tt = ttgt;
    io.H = (T *)H;
    io.nh = hidden_size(p);
    const int64_t rows = mlp_gemm_rows<T>(p, H);
    if (!rows) {
        mlp_vjp_launch<T, MLP_READOUT>(dm->E, p, io, (const T *)ybar, (T *)Xbar);
        return;
    }
    void *zp = NULL;
    CU_CHECK(cudaGetSymbolAddress(&zp, g_mlp_z0));
    T *z0 = (T *)zp;
    const int d1 = p->dims[1], dn = p->dims[p->n_layers];
    for (int64_t e0 = 0; e0 < dm->E; e0 += rows) {
        const int64_t n = dm->E - e0 < rows ? dm->E - e0 : rows;
        MlpIO<T> c = io;
        c.H = io.H + e0 * io.nh;
        c.ts = tsrc ? tsrc + e0 : NULL;
        c.tt = ttgt ? ttgt + e0 : NULL;
        mlp_vjp_launch<T, MLP_READOUT>(n, p, c, (const T *)ybar + e0 * dn, NULL, z0);
        /* Xbar[e][i] += Σ_o z0[e][o]·W0[o][i]: column-major Xbar^T += W0^T·z0^T */
        gemm(CUBLAS_OP_N, p->dims[0], (int)n, d1, (const T *)p->w[0], p->dims[0], z0, d1, (T)1,
             (T *)Xbar + e0 * io.ldx, (int)io.ldx);
    }
}

/* ---- element FiLM ------------------------------------------------------------------------- */

template <typename T>
static void film_fwd(const ecenet_dims *dm, const ecenet_mlp_params *p, const void *ea,
                     const void *eb, int P, int n_rbf, ecenet_idx tsrc, ecenet_idx ttgt,
                     const void *fr, void *H, void *gamma)
{
    state();
    MlpIO<T> io;
    memset(&io, 0, sizeof io);
    io.ea = (const T *)ea;
    io.eb = (const T *)eb;
    io.fr = (const T *)fr;
    io.P = P;
    io.nrbf = n_rbf;
    io.ts = tsrc;
    io.tt = ttgt;
    io.H = (T *)H;
    io.nh = hidden_size(p);
    mlp_fwd_launch<T, MLP_FILM>(dm->E, p, io, (T *)gamma);
}

template <typename T>
static void film_vjp(const ecenet_dims *dm, const ecenet_mlp_params *p, int P, int n_rbf,
                     ecenet_idx tsrc, ecenet_idx ttgt, const void *H, const void *gamma_bar,
                     void *frbar)
{
    state();
    if (n_rbf == 0)
        return;
    MlpIO<T> io;
    memset(&io, 0, sizeof io);
    io.P = P;
    io.nrbf = n_rbf;
    io.ts = tsrc;
    io.tt = ttgt;
    io.H = (T *)H;
    io.nh = hidden_size(p);
    mlp_vjp_launch<T, MLP_FILM>(dm->E, p, io, (const T *)gamma_bar, (T *)frbar);
}

template <typename T>
__global__ void chan_scale_fwd_k(int64_t E, int Q, int Fw, const T *s, const T *X, T *Y)
{
    const int64_t k = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    const int64_t row = (int64_t)2 * Q * Fw;
    if (k >= E * row)
        return;
    const int64_t e = k / row;
    const int f = (int)(k % Fw);
    Y[k] = X[k] * s[e * Fw + f];
}

template <typename T>
static void chan_scale_fwd(int64_t E, int Q, int Fw, const void *s, const void *X, void *Y)
{
    state();
    const int64_t n = E * 2 * Q * Fw;
    if (n <= 0)
        return;
    chan_scale_fwd_k<T><<<blocks_for(n, 256), 256>>>(E, Q, Fw, (const T *)s, (const T *)X,
                                                     (T *)Y);
    CU_LAUNCHED();
}

template <typename T>
__global__ void chan_scale_vjp_k(int64_t E, int Q, int Fw, const T *s, const T *X, const T *Yb,
                                 T *Xb, T *sb)
{
    const int64_t q = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (q >= E * Fw)
        return;
    const int64_t e = q / Fw;
    const int f = (int)(q % Fw);
    const T sv = s[q];
    T acc = 0;
    for (int p = 0; p < 2 * Q; p++) {
        const int64_t k = (e * 2 * Q + p) * Fw + f;
        Xb[k] += Yb[k] * sv;
        acc += Yb[k] * X[k];
    }
    if (sb)
        sb[q] += acc;
}

template <typename T>
static void chan_scale_vjp(int64_t E, int Q, int Fw, const void *s, const void *X,
                           const void *Ybar, void *Xbar, void *sbar)
{
    state();
    const int64_t n = E * Fw;
    if (n <= 0)
        return;
    chan_scale_vjp_k<T><<<blocks_for(n, 256), 256>>>(E, Q, Fw, (const T *)s, (const T *)X,
                                                     (const T *)Ybar, (T *)Xbar, (T *)sbar);
    CU_LAUNCHED();
}

/* ---- energy and the sum ---------------------------------------------------------------------- */

template <typename T> __global__ void energy_fwd_k(int64_t E, int K, const T *y, const T *fr, T *eps)
{
    const int64_t e = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (e >= E)
        return;
    T acc = 0;
    for (int k = 0; k < K; k++)
        acc += y[e * K + k] * fr[e * K + k];
    eps[e] = acc;
}

template <typename T>
static void energy_fwd(int64_t E, int K, const void *y, const void *fr, void *eps)
{
    state();
    if (E <= 0)
        return;
    energy_fwd_k<T><<<blocks_for(E, 256), 256>>>(E, K, (const T *)y, (const T *)fr, (T *)eps);
    CU_LAUNCHED();
}

template <typename T>
__global__ void energy_vjp_k(int64_t n, const T *y, const T *fr, T *yb, T *frb)
{
    const int64_t q = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (q >= n)
        return;
    yb[q] += fr[q];
    frb[q] += y[q];
}

template <typename T>
static void energy_vjp(int64_t E, int K, const void *y, const void *fr, void *ybar, void *frbar)
{
    state();
    const int64_t n = E * K;
    if (n <= 0)
        return;
    energy_vjp_k<T><<<blocks_for(n, 256), 256>>>(n, (const T *)y, (const T *)fr, (T *)ybar,
                                                 (T *)frbar);
    CU_LAUNCHED();
}

template <typename T> __global__ void sum_part_k(int64_t n, const T *x, double *part)
{
    extern __shared__ double sh[];
    double v[1] = {0.0};
    for (int64_t k = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; k < n;
         k += (int64_t)gridDim.x * blockDim.x)
        v[0] += (double)x[k];
    block_reduce<1>(v, sh);
    if (threadIdx.x == 0)
        part[blockIdx.x] = v[0];
}

__global__ void sum_final_k(int nb, const double *part, double *out)
{
    if (threadIdx.x)
        return;
    double v = 0.0;
    for (int b = 0; b < nb; b++)
        v += part[b];
    *out = v;
}

template <typename T> static double sum(int64_t n, const void *x)
{
    state();
    if (n <= 0)
        return 0.0;
    int nb = (int)((n + 255) / 256);
    if (nb > REDUCE_MAX_BLOCKS)
        nb = REDUCE_MAX_BLOCKS;
    double *part = reduce_scratch(), *out = reduce_result();
    sum_part_k<T><<<nb, 256, 256 * sizeof(double)>>>(n, (const T *)x, part);
    CU_LAUNCHED();
    sum_final_k<<<1, 32>>>(nb, part, out);
    CU_LAUNCHED();
    double v = 0.0;
    CU_CHECK(cudaMemcpy(&v, out, sizeof v, cudaMemcpyDeviceToHost));
    return failed() ? NAN : v;
}

template <typename T> void fill_readout(ecenet_backend &b)
{
    b.mlp_fwd = mlp_fwd<T>;
    b.mlp_vjp = mlp_vjp<T>;
    b.film_fwd = film_fwd<T>;
    b.film_vjp = film_vjp<T>;
    b.chan_scale_fwd = chan_scale_fwd<T>;
    b.chan_scale_vjp = chan_scale_vjp<T>;
    b.energy_fwd = energy_fwd<T>;
    b.energy_vjp = energy_vjp<T>;
    b.sum = sum<T>;
}

template void fill_readout<float>(ecenet_backend &);
template void fill_readout<double>(ecenet_backend &);

} // namespace ecn_cu
