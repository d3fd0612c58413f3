// Probe (device, sm_90): which shared-memory layout and descriptor fields
// wgmma.m64n64k8.f32.tf32.tf32 reads for K-major operands without swizzle,
// and the accumulator fragment map. One 64 x 64 tile, K = 32, against a host
// sum of the same TF32-truncated inputs; prints the error of each variant.
//   nvcc -O2 -arch=sm_90a -o wgmma_probe tools/device/wgmma_probe.cu && ./wgmma_probe
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <vector>

constexpr int M = 64, N = 64, K = 32;

// core matrix = 8 rows x 4 tf32 (16 B), stored contiguously (128 B).
// layout 0: [row/8][k/4][row%8][k%4]  (K-adjacent cores 128 B apart, M-adjacent K/4*128 B)
// layout 1: [k/4][row/8][row%8][k%4]  (K-adjacent cores 8*128 B apart, M-adjacent 128 B)
__host__ __device__ inline int off(int layout, int r, int k)
{
    return layout == 0 ? ((r / 8) * (K / 4) + k / 4) * 32 + (r % 8) * 4 + k % 4
                       : ((k / 4) * 8 + r / 8) * 32 + (r % 8) * 4 + k % 4;
}

__device__ inline uint64_t desc(const float *p, unsigned lbo, unsigned sbo)
{
    const uint32_t a = (uint32_t)__cvta_generic_to_shared(p);
    return (uint64_t)((a & 0x3FFFF) >> 4) | (uint64_t)((lbo & 0x3FFFF) >> 4) << 16 |
           (uint64_t)((sbo & 0x3FFFF) >> 4) << 32;
}

#define R8(i) "+f"(d[i]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3]), "+f"(d[i + 4]), \
              "+f"(d[i + 5]), "+f"(d[i + 6]), "+f"(d[i + 7])
__device__ inline void wgmma64(float (&d)[32], uint64_t da, uint64_t db)
{
    asm volatile("wgmma.mma_async.sync.aligned.m64n64k8.f32.tf32.tf32 "
                 "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,"
                 "%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31}, "
                 "%32, %33, 1, 1, 1;\n"
                 : R8(0), R8(8), R8(16), R8(24)
                 : "l"(da), "l"(db));
}

__global__ void probe(const float *A, const float *B, float *D, int layout, int swap)
{
    __shared__ __align__(128) float sa[M * K], sb[N * K];
    for (int i = threadIdx.x; i < M * K; i += blockDim.x) {
        const int r = i / K, k = i % K;
        sa[off(layout, r, k)] = A[i];
        sb[off(layout, r, k)] = B[i]; // B as [n][k] (K-major)
    }
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
    __syncthreads();
    const unsigned kstep = layout == 0 ? 128 : 8 * 128, mstep = layout == 0 ? K / 4 * 128 : 128;
    const unsigned lbo = swap ? mstep : kstep, sbo = swap ? kstep : mstep;
    float d[32];
    for (int i = 0; i < 32; i++)
        d[i] = 0.0f;
    asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
    for (int q = 0; q < K / 8; q++) {
        const int o = off(layout, 0, 8 * q);
        wgmma64(d, desc(sa + o, lbo, sbo), desc(sb + o, lbo, sbo));
    }
    asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
    asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
    const int t = threadIdx.x, w = t / 32, lane = t % 32;
    for (int i = 0; i < 32; i++) {
        const int r = 16 * w + lane / 4 + 8 * ((i % 4) / 2), c = 8 * (i / 4) + 2 * (lane % 4) + i % 2;
        D[r * N + c] = d[i];
    }
}

static float trunc_tf32(float x)
{
    uint32_t u;
    memcpy(&u, &x, 4);
    u &= 0xFFFFE000u;
    memcpy(&x, &u, 4);
    return x;
}

int main()
{
    std::vector<float> A(M * K), B(N * K), D(M * N), ref(M * N);
    unsigned s = 12345;
    auto rnd = [&] { s = s * 1664525u + 1013904223u; return (float)((s >> 8) & 0xFFFF) / 65536.0f - 0.5f; };
    for (auto &x : A) x = rnd();
    for (auto &x : B) x = rnd();
    double rn = 0;
    for (int r = 0; r < M; r++)
        for (int c = 0; c < N; c++) {
            double acc = 0;
            for (int k = 0; k < K; k++)
                acc += (double)trunc_tf32(A[r * K + k]) * trunc_tf32(B[c * K + k]);
            ref[r * N + c] = (float)acc;
            rn += acc * acc;
        }
    float *dA, *dB, *dD;
    cudaMalloc(&dA, A.size() * 4);
    cudaMalloc(&dB, B.size() * 4);
    cudaMalloc(&dD, D.size() * 4);
    cudaMemcpy(dA, A.data(), A.size() * 4, cudaMemcpyHostToDevice);
    cudaMemcpy(dB, B.data(), B.size() * 4, cudaMemcpyHostToDevice);
    for (int layout = 0; layout < 2; layout++)
        for (int swap = 0; swap < 2; swap++) {
            cudaMemset(dD, 0xff, D.size() * 4);
            probe<<<1, 128>>>(dA, dB, dD, layout, swap);
            const cudaError_t e = cudaDeviceSynchronize();
            cudaMemcpy(D.data(), dD, D.size() * 4, cudaMemcpyDeviceToHost);
            double en = 0;
            for (int i = 0; i < M * N; i++)
                en += ((double)D[i] - ref[i]) * ((double)D[i] - ref[i]);
            printf("layout %d (%s-adjacent cores 128 B apart) LBO=%s: %s, rel L2 %.3g\n", layout,
                   layout == 0 ? "K" : "M", swap ? "M step" : "K step", cudaGetErrorString(e),
                   std::sqrt(en / rn));
        }
    return 0;
}
