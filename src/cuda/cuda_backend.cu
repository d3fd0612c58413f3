/* The cuda backend's vtables (ecn_cuda_backend_f32 / _f64), device memory
 * hooks, the backend state (cuBLAS handle, TF32, RealSpace launch settings)
 * and the sticky error record. The ops live in the other cuda_*.cu files;
 * each contributes its entries through a fill_* function. */
#include <math.h>
#include <mutex>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unordered_map>
#include <vector>
#include "ecenet.h"
#include "cuda_backend.h"
#include "cuda_common.cuh"
#include "cuda_ops.cuh"

namespace ecn_cu {

/* ---- errors --------------------------------------------------------------------- */

static std::mutex err_mu;
static int err_code = 0;
static char err_msg[512];

void fail(int code, const char *what, const char *file, int line)
{
    std::lock_guard<std::mutex> g(err_mu);
    if (err_code)
        return;
    err_code = code ? code : -1;
    const char *base = strrchr(file, '/');
    snprintf(err_msg, sizeof err_msg, "cuda backend: %s (code %d) at %s:%d", what, code,
             base ? base + 1 : file, line);
    fprintf(stderr, "libecenet: %s\n", err_msg);
}

int failed() { return err_code != 0; }

/* ---- state ------------------------------------------------------------------------ */

static State st;
static std::once_flag st_once;

static void init_state()
{
    memset(&st, 0, sizeof st);
    st.tf32 = ecn_env_int("ECENET_TF32", 0, 0, 1);
    /* RealSpace launch: 512 rows / 4 warps (H200 sweep and whole-step
     * measurement in doc/performance.md) */
    st.rs_block = ecn_env_int("ECENET_RS_BLOCK", 512, 32, 1 << 16);
    st.rs_warps = ecn_env_int("ECENET_RS_WARPS", 4, 1, 16);
    if (st.rs_block % (32 * st.rs_warps)) {
        fprintf(stderr, "libecenet: ECENET_RS_BLOCK=%d is not a multiple of 32*ECENET_RS_WARPS=%d; "
                        "using 512/4\n", st.rs_block, 32 * st.rs_warps);
        st.rs_block = 512;
        st.rs_warps = 4;
    }
    int dev = 0;
    CU_CHECK(cudaGetDevice(&dev));
    cudaDeviceProp prop;
    if (cudaGetDeviceProperties(&prop, dev) == cudaSuccess) {
        st.n_sm = prop.multiProcessorCount;
        st.smem_optin = prop.sharedMemPerBlockOptin;
        st.cc_major = prop.major;
        st.cc_minor = prop.minor;
    } else {
        st.n_sm = 80;
        st.smem_optin = 48 * 1024;
    }
    if (cublasCreate(&st.blas) == CUBLAS_STATUS_SUCCESS) {
        st.blas_ok = 1;
        BLAS_CHECK(cublasSetStream(st.blas, 0));
        BLAS_CHECK(cublasSetPointerMode(st.blas, CUBLAS_POINTER_MODE_HOST));
    } else {
        fail(10000, "cuBLAS: cublasCreate failed", __FILE__, __LINE__);
    }
}

State &state()
{
    std::call_once(st_once, init_state);
    return st;
}

cublasHandle_t blas(int tf32_allowed)
{
    State &s = state();
    BLAS_CHECK(cublasSetMathMode(s.blas, tf32_allowed && s.tf32 ? CUBLAS_TF32_TENSOR_OP_MATH
                                                                : CUBLAS_DEFAULT_MATH));
    return s.blas;
}

__device__ double g_reduce_part[REDUCE_MAX_BLOCKS * 9];
__device__ double g_reduce_out[9];

double *reduce_scratch()
{
    void *p = NULL;
    CU_CHECK(cudaGetSymbolAddress(&p, g_reduce_part));
    return (double *)p;
}

double *reduce_result()
{
    void *p = NULL;
    CU_CHECK(cudaGetSymbolAddress(&p, g_reduce_out));
    return (double *)p;
}

/* ---- memory hooks ----------------------------------------------------------------------- */

static std::mutex mem_mu;
static std::unordered_map<void *, size_t> mem_sizes;
static size_t mem_in_use = 0, mem_peak = 0;

static void *be_alloc(size_t bytes)
{
    state();
    if (failed())
        return NULL;
    void *p = NULL;
    const size_t n = bytes ? bytes : 256;
    cudaError_t e = cudaMalloc(&p, n);
    if (e != cudaSuccess) {
        /* an out-of-memory is reported through the NULL return, not recorded */
        if (e != cudaErrorMemoryAllocation)
            fail((int)e, cudaGetErrorString(e), __FILE__, __LINE__);
        (void)cudaGetLastError();
        return NULL;
    }
    std::lock_guard<std::mutex> g(mem_mu);
    mem_sizes[p] = n;
    mem_in_use += n;
    if (mem_in_use > mem_peak)
        mem_peak = mem_in_use;
    return p;
}

static void be_release(void *p)
{
    if (!p)
        return;
    CU_CHECK(cudaFree(p));
    std::lock_guard<std::mutex> g(mem_mu);
    auto it = mem_sizes.find(p);
    if (it != mem_sizes.end()) {
        mem_in_use -= it->second;
        mem_sizes.erase(it);
    }
}

void *mem_alloc(size_t bytes) { return be_alloc(bytes); }
void mem_release(void *p) { be_release(p); }

static void be_zero(void *p, size_t bytes)
{
    if (bytes)
        CU_CHECK(cudaMemsetAsync(p, 0, bytes, 0));
}

static void be_copy(void *dst, const void *src, size_t bytes)
{
    if (bytes)
        CU_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, 0));
}

/* host staging for the precision conversion (pageable; transfers are small) */
static std::mutex stage_mu;
static std::vector<char> stage;

template <typename T> static void be_upload(void *dst, const double *src, size_t n)
{
    if (!n)
        return;
    if (sizeof(T) == sizeof(double)) {
        CU_CHECK(cudaMemcpy(dst, src, n * sizeof(double), cudaMemcpyHostToDevice));
        return;
    }
    std::lock_guard<std::mutex> g(stage_mu);
    if (stage.size() < n * sizeof(T))
        stage.resize(n * sizeof(T));
    T *h = (T *)stage.data();
    for (size_t k = 0; k < n; k++)
        h[k] = (T)src[k];
    CU_CHECK(cudaMemcpy(dst, h, n * sizeof(T), cudaMemcpyHostToDevice));
}

template <typename T> static void be_download(double *dst, const void *src, size_t n)
{
    if (!n)
        return;
    if (sizeof(T) == sizeof(double)) {
        CU_CHECK(cudaMemcpy(dst, src, n * sizeof(double), cudaMemcpyDeviceToHost));
    } else {
        std::lock_guard<std::mutex> g(stage_mu);
        if (stage.size() < n * sizeof(T))
            stage.resize(n * sizeof(T));
        T *h = (T *)stage.data();
        CU_CHECK(cudaMemcpy(h, src, n * sizeof(T), cudaMemcpyDeviceToHost));
        for (size_t k = 0; k < n; k++)
            dst[k] = (double)h[k];
    }
    if (failed()) /* never hand out results computed after a failure */
        for (size_t k = 0; k < n; k++)
            dst[k] = NAN;
}

static void be_upload_idx(int32_t *dst, const int32_t *src, size_t n)
{
    if (n)
        CU_CHECK(cudaMemcpy(dst, src, n * sizeof(int32_t), cudaMemcpyHostToDevice));
}

static void be_download_idx(int32_t *dst, const int32_t *src, size_t n)
{
    if (n)
        CU_CHECK(cudaMemcpy(dst, src, n * sizeof(int32_t), cudaMemcpyDeviceToHost));
    if (failed()) /* never hand out results computed after a failure */
        for (size_t k = 0; k < n; k++)
            dst[k] = -1;
}

static void be_sync(void) { CU_CHECK(cudaDeviceSynchronize()); }

/* The profiler's clock: a CUDA event recorded on the stream, read against a
 * reference event. cudaEventElapsedTime is a float in ms, so the reference
 * moves forward every second and the elapsed time so far is kept in a double:
 * resolution stays at the event's ~0.5 us however long the run. Falls back to
 * the host clock if events cannot be created. */
static double be_now(void)
{
    static std::mutex mu;
    static cudaEvent_t ev[2];
    static int cur = -1; /* index of the reference event; -1: not created, -2: host clock */
    static double base = 0.0;
    std::lock_guard<std::mutex> g(mu);
    if (cur == -1) {
        if (cudaEventCreate(&ev[0]) == cudaSuccess && cudaEventCreate(&ev[1]) == cudaSuccess &&
            cudaEventRecord(ev[0], 0) == cudaSuccess) {
            cur = 0;
        } else {
            (void)cudaGetLastError();
            cur = -2;
        }
    }
    if (cur >= 0) {
        float ms = 0.0f;
        const int nxt = 1 - cur;
        if (cudaEventRecord(ev[nxt], 0) == cudaSuccess &&
            cudaEventSynchronize(ev[nxt]) == cudaSuccess &&
            cudaEventElapsedTime(&ms, ev[cur], ev[nxt]) == cudaSuccess) {
            const double t = base + 1e-3 * (double)ms;
            if (ms > 1000.0f) { /* re-base: ev[nxt] becomes the reference */
                base = t;
                cur = nxt;
            }
            return t;
        }
        CU_CHECK(cudaGetLastError());
    }
    be_sync();
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* NVTX ranges (header-only NVTX 3, part of the toolkit): Nsight Systems shows
 * every op under the profiler's name; a no-op unless a tool is attached. */
#if defined(__has_include)
#if __has_include(<nvtx3/nvToolsExt.h>)
#include <nvtx3/nvToolsExt.h>
#define ECN_HAVE_NVTX 1
#endif
#endif
#ifdef ECN_HAVE_NVTX
static void be_range_push(const char *name) { nvtxRangePushA(name); }
static void be_range_pop(void) { nvtxRangePop(); }
#endif

static int be_set_tf32(int on)
{
    if (on >= 0)
        ecn_cu::state().tf32 = on ? 1 : 0;
    return ecn_cu::state().tf32;
}

/* the GPU of this process, for `ecenet bench`'s header */
static const char *be_device(void)
{
    static char line[512]; /* the name (at most 255 characters) and the rest fit */
    static std::once_flag once;
    std::call_once(once, [] {
        int dev = 0, drv = 0;
        cudaDeviceProp prop;
        if (cudaGetDevice(&dev) != cudaSuccess || cudaGetDeviceProperties(&prop, dev) != cudaSuccess) {
            snprintf(line, sizeof line, "(no CUDA device)");
            return;
        }
        cudaDriverGetVersion(&drv);
        /* GiB in tenths, as integers: a bounded line (gcc 13 warned it could truncate) */
        const long long gib10 = (long long)(prop.totalGlobalMem / 107374182.4 + 0.5);
        snprintf(line, sizeof line, "%.255s, %d SMs, %lld.%lld GiB, compute capability %d.%d, driver %d.%d",
                 prop.name, prop.multiProcessorCount, gib10 / 10, gib10 % 10,
                 prop.major, prop.minor, drv / 1000, drv % 1000 / 10);
    });
    return line;
}

template <typename T> static ecenet_backend make()
{
    ecenet_backend b;
    memset(&b, 0, sizeof b);
    b.name = "cuda";
    b.precision = sizeof(T) == sizeof(double) ? ECENET_F64 : ECENET_F32;
    b.real_size = sizeof(T);
    b.linear_w_t = 1; /* the VJP GEMM's faster operand layout (cuda_layers.cu) */
    b.alloc = be_alloc;
    b.release = be_release;
    b.zero = be_zero;
    b.copy = be_copy;
    b.upload = be_upload<T>;
    b.download = be_download<T>;
    b.upload_idx = be_upload_idx;
    b.download_idx = be_download_idx;
    b.now = be_now;
    b.sync = be_sync;
#ifdef ECN_HAVE_NVTX
    b.range_push = be_range_push;
    b.range_pop = be_range_pop;
#endif
    b.set_tf32 = sizeof(T) == sizeof(float) ? be_set_tf32 : NULL; /* TF32 is an fp32 mode */
    b.device = be_device;
    /* fp64: a stage's layers 8192 edges at a time, 7% off the bench box's
     * forward and joint steps on an H100; TF32 lost 12% with it, so fp32
     * runs all edges at once (doc/performance.md, twenty-seventh session) */
    b.stage_chunk = sizeof(T) == sizeof(double) ? 8192 : 0;
    fill_geometry<T>(b);
    fill_wigner<T>(b);
    fill_frame<T>(b);
    fill_mp<T>(b);
    fill_layers<T>(b);
    fill_realspace<T>(b);
    fill_readout<T>(b);
    fill_nlist<T>(b);
    return b;
}

} // namespace ecn_cu

extern "C" {

const ecenet_backend ecn_cuda_backend_f32 = ecn_cu::make<float>();
const ecenet_backend ecn_cuda_backend_f64 = ecn_cu::make<double>();

int ecn_cuda_available(char *why, size_t why_len)
{
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess || n < 1) {
        if (why && why_len)
            snprintf(why, why_len, "no CUDA device: %s",
                     e != cudaSuccess ? cudaGetErrorString(e) : "cudaGetDeviceCount returned 0");
        (void)cudaGetLastError();
        return 0;
    }
    return 1;
}

int ecn_cuda_set_tf32(int on)
{
    ecn_cu::State &s = ecn_cu::state();
    int old = s.tf32;
    s.tf32 = on ? 1 : 0;
    return old;
}

int ecn_cuda_tf32(void) { return ecn_cu::state().tf32; }

int ecn_cuda_set_rs_launch(int rows, int warps)
{
    ecn_cu::State &s = ecn_cu::state();
    if (warps < 1 || warps > 16 || rows < 32 * warps || rows % (32 * warps))
        return -1;
    s.rs_block = rows;
    s.rs_warps = warps;
    return 0;
}

int ecn_cuda_error(char *buf, size_t len)
{
    std::lock_guard<std::mutex> g(ecn_cu::err_mu);
    if (buf && len)
        snprintf(buf, len, "%s", ecn_cu::err_code ? ecn_cu::err_msg : "");
    return ecn_cu::err_code;
}

void ecn_cuda_clear_error(void)
{
    std::lock_guard<std::mutex> g(ecn_cu::err_mu);
    ecn_cu::err_code = 0;
    ecn_cu::err_msg[0] = 0;
}

size_t ecn_cuda_bytes_in_use(void)
{
    std::lock_guard<std::mutex> g(ecn_cu::mem_mu);
    return ecn_cu::mem_in_use;
}

size_t ecn_cuda_peak_bytes(void)
{
    std::lock_guard<std::mutex> g(ecn_cu::mem_mu);
    return ecn_cu::mem_peak;
}

void ecn_cuda_reset_peak(void)
{
    std::lock_guard<std::mutex> g(ecn_cu::mem_mu);
    ecn_cu::mem_peak = ecn_cu::mem_in_use;
}

} /* extern "C" */
