// gpu_copy_bw: the device-to-device copy bandwidth reference for the memory-bound
// patterns (fused, they should reach 80% of it).  Copies BYTES (default 2 GiB, many times any L2)
// with cudaMemcpyAsync on one stream, timed with CUDA events over REPS copies after a warmup, and
// prints one line: bytes, ms per copy, and GB/s counted as bytes read + written
// (a copy moves each byte twice through DRAM, as a fused kernel's read of its
// input and write of its output do).  Exit status: 0 measured, 1 a CUDA error,
// 2 a bad BYTES, 77 no CUDA device (scripts/gpu-check.sh --dry-run expects it).
//
//   gpu_copy_bw [BYTES]     BYTES in 1 MiB .. 64 GiB, default 2 GiB
#include <cstdio>
#include <cstdlib>

#include <cuda_runtime.h>

static int check(cudaError_t e, const char *what)
{
    if (e == cudaSuccess)
        return 0;
    std::fprintf(stderr, "gpu_copy_bw: %s: %s\n", what, cudaGetErrorString(e));
    return 1;
}

int main(int argc, char **argv)
{
    size_t bytes = (size_t)2 << 30;
    const int reps = 20;
    int devices = 0;
    void *src = nullptr, *dst = nullptr;
    cudaEvent_t t0, t1;
    float ms = 0;

    if (argc > 2) {
        std::fprintf(stderr, "usage: gpu_copy_bw [BYTES]\n");
        return 2;
    }
    if (argc == 2) {
        char *end = nullptr;
        unsigned long long b = std::strtoull(argv[1], &end, 10);
        if (*argv[1] < '0' || *argv[1] > '9' || *end || b < ((size_t)1 << 20) ||
            b > ((size_t)64 << 30)) {
            std::fprintf(stderr, "gpu_copy_bw: BYTES must be a whole number in 1 MiB .. 64 GiB\n");
            return 2;
        }
        bytes = (size_t)b;
    }
    if (cudaGetDeviceCount(&devices) != cudaSuccess || devices < 1) {
        std::printf("skipped: no CUDA device\n");
        return 77;
    }
    if (check(cudaMalloc(&src, bytes), "cudaMalloc") ||
        check(cudaMalloc(&dst, bytes), "cudaMalloc") ||
        check(cudaMemset(src, 1, bytes), "cudaMemset") || check(cudaEventCreate(&t0), "event") ||
        check(cudaEventCreate(&t1), "event"))
        return 1;
    for (int i = 0; i < 3; i++)
        if (check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice), "warmup copy"))
            return 1;
    cudaEventRecord(t0);
    for (int i = 0; i < reps; i++)
        cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice);
    cudaEventRecord(t1);
    if (check(cudaEventSynchronize(t1), "copies") ||
        check(cudaEventElapsedTime(&ms, t0, t1), "time"))
        return 1;
    ms /= reps;
    std::printf("bytes %zu ms %.4f read+write_GBps %.1f\n", bytes, ms, 2.0 * bytes / (ms * 1e6));
    return 0;
}
