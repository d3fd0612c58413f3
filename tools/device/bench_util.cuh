/* Shared by the device benchmarks (gemm_bench.cu, lt_bench.cu). */
#pragma once
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cuda_runtime.h>
#include <vector>

/* stop at the first CUDA / cuBLAS status that is not success, naming the line */
#define CK(x)                                                                                      \
    do {                                                                                           \
        if ((x) != 0) {                                                                            \
            printf("error %d at line %d\n", (int)(x), __LINE__);                                   \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

/* median of reps CUDA-event timings of fn(), after warm untimed runs, with
 * the L2 flushed (fb bytes of flush written) before each run */
template <typename Fn> static float time_median(Fn fn, void *flush, size_t fb, int warm, int reps)
{
    cudaEvent_t a, b;
    cudaEventCreate(&a);
    cudaEventCreate(&b);
    std::vector<float> t;
    for (int r = 0; r < warm + reps; r++) {
        cudaMemsetAsync(flush, r, fb);
        cudaEventRecord(a);
        fn();
        cudaEventRecord(b);
        cudaEventSynchronize(b);
        float ms;
        cudaEventElapsedTime(&ms, a, b);
        if (r >= warm)
            t.push_back(ms);
    }
    cudaEventDestroy(a);
    cudaEventDestroy(b);
    std::sort(t.begin(), t.end());
    return t[t.size() / 2];
}
