/* A CPU emulation of the part of the CUDA runtime the cuda backend uses,
 * so its kernels and its host code run (and are tested) on machines with
 * no GPU: the ctest nn_cuda_emu_test builds the .cu files of src/nn/cuda against this
 * header as C++ (translate.py rewrites the <<<>>> launches) and runs
 * nn_cuda_test against the result.
 *
 * What is emulated: one device ("Starling CPU emulation", sm_90); device
 * memory is host memory, tracked so that copies name real allocations;
 * one stream, and every launch runs to completion before it returns (so
 * stream order holds trivially). Each thread of a block is a fiber with
 * its own stack: __syncthreads() and the warp shuffles are real barriers
 * (a thread that waits at one while its block or warp cannot reach it is
 * reported as a deadlock), and __shared__ variables are shared by the
 * block. Not emulated: races between threads (fibers switch only at
 * barriers), memory fences, the timing of anything.
 *
 * This is a test tool, x86-64 only (the fiber switch is 12 instructions
 * of assembly); it is not part of libstarling_cuda.so. */
#ifndef STARLING_CUDA_EMU_RUNTIME_H
#define STARLING_CUDA_EMU_RUNTIME_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <functional>

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __shared__ static

typedef enum cudaError {
    cudaSuccess = 0,
    cudaErrorInvalidValue = 1,
    cudaErrorMemoryAllocation = 2,
    cudaErrorInitializationError = 3,
    cudaErrorCudartUnloading = 4,
    cudaErrorInvalidConfiguration = 9,
    cudaErrorInvalidDevicePointer = 17,
    cudaErrorInvalidMemcpyDirection = 21,
    cudaErrorInsufficientDriver = 35,
    cudaErrorNoDevice = 100,
    cudaErrorInvalidDevice = 101,
    cudaErrorDeviceUninitialized = 201,
    cudaErrorNoKernelImageForDevice = 209,
    cudaErrorECCUncorrectable = 214,
    cudaErrorNvlinkUncorrectable = 220,
    cudaErrorUnsupportedPtxVersion = 222,
    cudaErrorInvalidResourceHandle = 400,
    cudaErrorNotReady = 600,
    cudaErrorIllegalAddress = 700,
    cudaErrorLaunchOutOfResources = 701,
    cudaErrorLaunchTimeout = 702,
    cudaErrorHardwareStackError = 714,
    cudaErrorLaunchFailure = 719,
    cudaErrorNotSupported = 801,
    cudaErrorSystemNotReady = 802,
    cudaErrorSystemDriverMismatch = 803,
    cudaErrorCompatNotSupportedOnDevice = 804,
    cudaErrorStubLibrary = 34,
    cudaErrorDevicesUnavailable = 46,
    cudaErrorUnknown = 999
} cudaError_t;

typedef enum cudaMemcpyKind {
    cudaMemcpyHostToHost = 0,
    cudaMemcpyHostToDevice = 1,
    cudaMemcpyDeviceToHost = 2,
    cudaMemcpyDeviceToDevice = 3,
    cudaMemcpyDefault = 4
} cudaMemcpyKind;

typedef struct sl_emu_stream *cudaStream_t;
#define cudaStreamNonBlocking 0x01

typedef struct {
    char name[256];          /* device name */
    int major, minor;        /* compute capability */
    int multiProcessorCount; /* SMs */
    size_t totalGlobalMem;   /* bytes */
} cudaDeviceProp;

struct uint3 {
    unsigned x, y, z; /* index */
};
struct dim3 {
    unsigned x, y, z; /* extent */
    dim3(unsigned vx = 1, unsigned vy = 1, unsigned vz = 1) : x(vx), y(vy), z(vz) {}
};

/* The running fiber's coordinates (one OS thread runs all fibers). */
extern uint3 threadIdx, blockIdx;
extern dim3 blockDim, gridDim;

cudaError_t cudaGetDeviceCount(int *count);
cudaError_t cudaGetLastError(void);
const char *cudaGetErrorString(cudaError_t e);
const char *cudaGetErrorName(cudaError_t e);
cudaError_t cudaSetDevice(int device);
cudaError_t cudaGetDeviceProperties(cudaDeviceProp *prop, int device);
cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, unsigned flags);
cudaError_t cudaStreamSynchronize(cudaStream_t s);
cudaError_t cudaStreamQuery(cudaStream_t s);
cudaError_t cudaStreamDestroy(cudaStream_t s);
cudaError_t cudaDriverGetVersion(int *v);
cudaError_t cudaRuntimeGetVersion(int *v);
cudaError_t cudaMalloc(void **p, size_t len);
cudaError_t cudaFree(void *p);
cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t len, cudaMemcpyKind kind,
                            cudaStream_t s);
cudaError_t cudaMemsetAsync(void *p, int value, size_t len, cudaStream_t s);

/* Runs kernel() for every thread of a 1-D grid; a launch error (a zero or
 * oversized configuration) is left for cudaGetLastError, as in CUDA. */
void sl_emu_launch(dim3 grid, dim3 block, size_t shmem, cudaStream_t s,
                   const std::function<void()> &kernel);

/* Barriers: the block, or the calling thread's warp. */
void sl_emu_barrier_block(void);
void sl_emu_barrier_warp(void);
/* The per-warp exchange slots of the shuffles. */
uint64_t *sl_emu_warp_slots(void);

inline void __syncthreads(void) { sl_emu_barrier_block(); }

template <typename T> T __shfl_down_sync(unsigned mask, T v, unsigned delta) {
    static_assert(sizeof(T) <= sizeof(uint64_t), "shuffle of a large type");
    (void)mask;
    uint64_t *slots = sl_emu_warp_slots();
    unsigned lane = threadIdx.x & 31;
    uint64_t bits = 0;
    memcpy(&bits, &v, sizeof v);
    slots[lane] = bits;
    sl_emu_barrier_warp();
    T out = v;
    if (lane + delta < 32 && (threadIdx.x - lane) + lane + delta < blockDim.x)
        memcpy(&out, &slots[lane + delta], sizeof out);
    sl_emu_barrier_warp();
    return out;
}

#endif
