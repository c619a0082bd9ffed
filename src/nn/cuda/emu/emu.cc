/* The CPU emulation of the CUDA runtime and cuBLAS subset the cuda backend
 * uses (see cuda_runtime.h here for what is and is not emulated).
 *
 * Environment: SL_EMU_NO_DEVICE=1 makes cudaGetDeviceCount fail as it does
 * without a driver (error 35); SL_EMU_FAIL_ALLOC_AFTER=N makes every
 * cudaMalloc after the first N fail (out of memory). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include <map>
#include <vector>

#include "cublas_v2.h"
#include "cuda_runtime.h"

#if !defined(__x86_64__)
#error "the CUDA emulator's fiber switch is written for x86-64"
#endif

uint3 threadIdx, blockIdx;
dim3 blockDim, gridDim;

static cudaError_t last_error = cudaSuccess;

static void set_error(cudaError_t e) {
    if (last_error == cudaSuccess)
        last_error = e;
}

static void die(const char *what) {
    fprintf(stderr, "cuda emulator: %s (block %u, thread %u)\n", what, blockIdx.x, threadIdx.x);
    abort();
}

/* ---- fibers ---- */

/* Saves the callee-saved registers on the current stack, stores its
 * pointer in *save, switches to `to` and restores that stack's registers. */
extern "C" void sl_emu_switch(void **save, void *to);
__asm__(".text\n"
        ".globl sl_emu_switch\n"
        ".type sl_emu_switch,@function\n"
        "sl_emu_switch:\n"
        "  pushq %rbp\n"
        "  pushq %rbx\n"
        "  pushq %r12\n"
        "  pushq %r13\n"
        "  pushq %r14\n"
        "  pushq %r15\n"
        "  movq %rsp, (%rdi)\n"
        "  movq %rsi, %rsp\n"
        "  popq %r15\n"
        "  popq %r14\n"
        "  popq %r13\n"
        "  popq %r12\n"
        "  popq %rbx\n"
        "  popq %rbp\n"
        "  ret\n"
        ".size sl_emu_switch, .-sl_emu_switch\n");

enum { F_RUN, F_BLOCK, F_WARP, F_DONE };

typedef struct {
    void *sp;    /* saved stack pointer while switched out */
    int state;   /* F_* */
    char *stack; /* its stack (a guard page at the bottom) */
} fiber_t;

static const size_t STACK_LEN = 128 * 1024;
static std::vector<fiber_t> fibers;
static void *sched_sp;
static fiber_t *cur;
static const std::function<void()> *kernel_fn;
static uint64_t warp_slots[32][32];

extern "C" void sl_emu_fiber_main(void) {
    (*kernel_fn)();
    cur->state = F_DONE;
    sl_emu_switch(&cur->sp, sched_sp);
    die("a finished fiber was resumed");
}

static void fiber_start(fiber_t *f) {
    if (!f->stack) {
        void *p = mmap(NULL, STACK_LEN, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED)
            die("cannot map a fiber stack");
        mprotect(p, 4096, PROT_NONE); /* overflow faults instead of corrupting */
        f->stack = (char *)p;
    }
    uintptr_t top = ((uintptr_t)f->stack + STACK_LEN) & ~(uintptr_t)15;
    uint64_t *slot = (uint64_t *)(top - 16); /* 16-aligned: entry sees rsp = 8 mod 16 */
    slot[0] = (uint64_t)(uintptr_t)sl_emu_fiber_main;
    slot[1] = 0;
    uint64_t *sp = slot - 6; /* r15 r14 r13 r12 rbx rbp */
    for (int i = 0; i < 6; i++)
        sp[i] = 0;
    f->sp = sp;
    f->state = F_RUN;
}

static void yield(int state) {
    cur->state = state;
    sl_emu_switch(&cur->sp, sched_sp);
}

void sl_emu_barrier_block(void) { yield(F_BLOCK); }
void sl_emu_barrier_warp(void) { yield(F_WARP); }
uint64_t *sl_emu_warp_slots(void) { return warp_slots[threadIdx.x >> 5]; }

static void run_block(unsigned n) {
    if (fibers.size() < n)
        fibers.resize(n, fiber_t{NULL, F_DONE, NULL});
    for (unsigned t = 0; t < n; t++)
        fiber_start(&fibers[t]);
    for (;;) {
        bool ran = false;
        for (unsigned t = 0; t < n; t++) {
            if (fibers[t].state != F_RUN)
                continue;
            cur = &fibers[t];
            threadIdx = uint3{t, 0, 0};
            sl_emu_switch(&sched_sp, cur->sp);
            ran = true;
        }
        if (ran)
            continue;
        /* Everyone is waiting or done: release a warp whose live lanes all
         * wait at a warp barrier, else the block if all wait at its. */
        bool released = false, all_done = true, all_block = true;
        for (unsigned w = 0; w * 32 < n; w++) {
            bool warp_ready = true, any = false;
            for (unsigned t = w * 32; t < n && t < w * 32 + 32; t++) {
                int s = fibers[t].state;
                if (s == F_DONE)
                    continue;
                all_done = false;
                any = true;
                if (s != F_WARP)
                    warp_ready = false;
                if (s != F_BLOCK)
                    all_block = false;
            }
            if (any && warp_ready) {
                for (unsigned t = w * 32; t < n && t < w * 32 + 32; t++)
                    if (fibers[t].state == F_WARP)
                        fibers[t].state = F_RUN;
                released = true;
            }
        }
        if (all_done)
            return;
        if (released)
            continue;
        if (all_block) {
            for (unsigned t = 0; t < n; t++)
                if (fibers[t].state == F_BLOCK)
                    fibers[t].state = F_RUN;
            continue;
        }
        die("deadlock: threads wait at barriers their block or warp cannot all reach");
    }
}

void sl_emu_launch(dim3 grid, dim3 block, size_t shmem, cudaStream_t s,
                   const std::function<void()> &kernel) {
    (void)shmem;
    if (!s) {
        set_error(cudaErrorInvalidResourceHandle);
        return;
    }
    if (grid.x == 0 || grid.y != 1 || grid.z != 1 || block.x == 0 || block.x > 1024 ||
        block.y != 1 || block.z != 1) {
        set_error(cudaErrorInvalidConfiguration);
        return;
    }
    gridDim = grid;
    blockDim = block;
    kernel_fn = &kernel;
    for (unsigned b = 0; b < grid.x; b++) {
        blockIdx = uint3{b, 0, 0};
        run_block(block.x);
    }
    kernel_fn = NULL;
}

/* ---- device, streams, memory ---- */

struct sl_emu_stream {
    int unused; /* a handle only */
};
struct sl_emu_blas {
    cudaStream_t stream; /* bound stream */
};

static std::map<uintptr_t, size_t> allocations;
static long allocs_left = -1;

/* Whether [p, p+len) lies inside one allocation. */
static bool on_device(const void *p, size_t len) {
    auto it = allocations.upper_bound((uintptr_t)p);
    if (it == allocations.begin())
        return false;
    --it;
    return (uintptr_t)p + len <= it->first + it->second;
}

cudaError_t cudaGetDeviceCount(int *count) {
    const char *no = getenv("SL_EMU_NO_DEVICE");
    if (no && !strcmp(no, "1")) {
        *count = 0;
        return cudaErrorInsufficientDriver;
    }
    *count = 1;
    return cudaSuccess;
}

cudaError_t cudaGetLastError(void) {
    cudaError_t e = last_error;
    last_error = cudaSuccess;
    return e;
}

const char *cudaGetErrorName(cudaError_t e) {
    switch (e) {
    case cudaSuccess: return "cudaSuccess";
    case cudaErrorInvalidValue: return "cudaErrorInvalidValue";
    case cudaErrorMemoryAllocation: return "cudaErrorMemoryAllocation";
    case cudaErrorInvalidConfiguration: return "cudaErrorInvalidConfiguration";
    case cudaErrorInsufficientDriver: return "cudaErrorInsufficientDriver";
    case cudaErrorInvalidResourceHandle: return "cudaErrorInvalidResourceHandle";
    case cudaErrorInvalidDevice: return "cudaErrorInvalidDevice";
    default: return "cudaErrorUnknown";
    }
}

const char *cudaGetErrorString(cudaError_t e) {
    switch (e) {
    case cudaSuccess: return "no error";
    case cudaErrorInvalidValue: return "invalid argument";
    case cudaErrorMemoryAllocation: return "out of memory";
    case cudaErrorInvalidConfiguration: return "invalid configuration argument";
    case cudaErrorInsufficientDriver:
        return "CUDA driver version is insufficient for CUDA runtime version";
    case cudaErrorInvalidResourceHandle: return "invalid resource handle";
    case cudaErrorInvalidDevice: return "invalid device ordinal";
    default: return "unknown error";
    }
}

cudaError_t cudaSetDevice(int device) {
    return device == 0 ? cudaSuccess : cudaErrorInvalidDevice;
}

cudaError_t cudaGetDeviceProperties(cudaDeviceProp *prop, int device) {
    if (device != 0)
        return cudaErrorInvalidDevice;
    memset(prop, 0, sizeof *prop);
    snprintf(prop->name, sizeof prop->name, "Starling CPU emulation");
    prop->major = 9;
    prop->minor = 0;
    prop->multiProcessorCount = 2; /* grid-stride kernels then run 64 blocks */
    prop->totalGlobalMem = (size_t)16 << 30;
    return cudaSuccess;
}

cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, unsigned flags) {
    (void)flags;
    *s = new sl_emu_stream();
    return cudaSuccess;
}

cudaError_t cudaStreamSynchronize(cudaStream_t s) {
    return s ? cudaSuccess : cudaErrorInvalidResourceHandle;
}

/* Every op ran when it was queued: a stream is always idle. */
cudaError_t cudaStreamQuery(cudaStream_t s) {
    return s ? cudaSuccess : cudaErrorInvalidResourceHandle;
}

cudaError_t cudaStreamDestroy(cudaStream_t s) {
    delete s;
    return cudaSuccess;
}

cudaError_t cudaDriverGetVersion(int *v) {
    *v = 13000;
    return cudaSuccess;
}

cudaError_t cudaRuntimeGetVersion(int *v) {
    *v = 13000;
    return cudaSuccess;
}

cudaError_t cudaMalloc(void **p, size_t len) {
    *p = NULL;
    if (allocs_left < 0) {
        const char *env = getenv("SL_EMU_FAIL_ALLOC_AFTER");
        allocs_left = env && *env ? atol(env) : 0x7fffffffL;
    }
    if (allocs_left == 0 || len > ((size_t)16 << 30)) {
        set_error(cudaErrorMemoryAllocation);
        return cudaErrorMemoryAllocation;
    }
    allocs_left--;
    size_t rounded = (len + 255) & ~(size_t)255;
    void *q = aligned_alloc(256, rounded ? rounded : 256);
    if (!q) {
        set_error(cudaErrorMemoryAllocation);
        return cudaErrorMemoryAllocation;
    }
    memset(q, 0xA5, rounded); /* device memory starts as garbage, not zeros */
    allocations[(uintptr_t)q] = len;
    *p = q;
    return cudaSuccess;
}

cudaError_t cudaFree(void *p) {
    if (!p)
        return cudaSuccess;
    auto it = allocations.find((uintptr_t)p);
    if (it == allocations.end()) {
        set_error(cudaErrorInvalidDevicePointer);
        return cudaErrorInvalidDevicePointer;
    }
    allocations.erase(it);
    free(p);
    return cudaSuccess;
}

cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t len, cudaMemcpyKind kind,
                            cudaStream_t s) {
    if (!s)
        return cudaErrorInvalidResourceHandle;
    bool ok;
    switch (kind) {
    case cudaMemcpyHostToDevice: ok = on_device(dst, len) && !on_device(src, 1); break;
    case cudaMemcpyDeviceToHost: ok = on_device(src, len) && !on_device(dst, 1); break;
    case cudaMemcpyDeviceToDevice: ok = on_device(src, len) && on_device(dst, len); break;
    default: ok = false;
    }
    if (!ok) {
        set_error(cudaErrorInvalidValue);
        return cudaErrorInvalidValue;
    }
    memcpy(dst, src, len);
    return cudaSuccess;
}

cudaError_t cudaMemsetAsync(void *p, int value, size_t len, cudaStream_t s) {
    if (!s)
        return cudaErrorInvalidResourceHandle;
    if (!on_device(p, len)) {
        set_error(cudaErrorInvalidValue);
        return cudaErrorInvalidValue;
    }
    memset(p, value, len);
    return cudaSuccess;
}

/* ---- cuBLAS ---- */

cublasStatus_t cublasCreate(cublasHandle_t *h) {
    *h = new sl_emu_blas();
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasDestroy(cublasHandle_t h) {
    if (!h)
        return CUBLAS_STATUS_NOT_INITIALIZED;
    delete h;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetStream(cublasHandle_t h, cudaStream_t s) {
    if (!h)
        return CUBLAS_STATUS_NOT_INITIALIZED;
    h->stream = s;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetMathMode(cublasHandle_t h, cublasMath_t mode) {
    (void)mode;
    return h ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_NOT_INITIALIZED;
}

cublasStatus_t cublasGetVersion(cublasHandle_t h, int *version) {
    (void)h;
    *version = 130000;
    return CUBLAS_STATUS_SUCCESS;
}

const char *cublasGetStatusString(cublasStatus_t s) {
    switch (s) {
    case CUBLAS_STATUS_SUCCESS: return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED";
    default: return "CUBLAS_STATUS_INTERNAL_ERROR";
    }
}

/* Column-major C = alpha op(A) op(B) + beta C, with cuBLAS's argument
 * checks; C is not read when beta is 0. */
cublasStatus_t cublasSgemm(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m,
                           int n, int k, const float *alpha, const float *a, int lda,
                           const float *b, int ldb, const float *beta, float *c, int ldc) {
    if (!h || !h->stream)
        return CUBLAS_STATUS_NOT_INITIALIZED;
    int arows = ta == CUBLAS_OP_N ? m : k, brows = tb == CUBLAS_OP_N ? k : n;
    if (m < 0 || n < 0 || k < 0 || lda < (arows > 1 ? arows : 1) ||
        ldb < (brows > 1 ? brows : 1) || ldc < (m > 1 ? m : 1))
        return CUBLAS_STATUS_INVALID_VALUE;
    if (m == 0 || n == 0)
        return CUBLAS_STATUS_SUCCESS;
    size_t alen = (size_t)lda * ((ta == CUBLAS_OP_N ? k : m) - 1) + arows;
    size_t blen = (size_t)ldb * ((tb == CUBLAS_OP_N ? n : k) - 1) + brows;
    if ((k > 0 && (!on_device(a, alen * sizeof *a) || !on_device(b, blen * sizeof *b))) ||
        !on_device(c, ((size_t)ldc * (n - 1) + m) * sizeof *c))
        return CUBLAS_STATUS_EXECUTION_FAILED; /* what a wild pointer would give */
    std::vector<float> col((size_t)m);
    for (int j = 0; j < n; j++) {
        for (int i = 0; i < m; i++)
            col[i] = 0.0f;
        for (int l = 0; l < k; l++) {
            float bv = tb == CUBLAS_OP_N ? b[l + (size_t)j * ldb] : b[j + (size_t)l * ldb];
            if (ta == CUBLAS_OP_N) {
                const float *ac = a + (size_t)l * lda;
                for (int i = 0; i < m; i++)
                    col[i] += ac[i] * bv;
            } else {
                for (int i = 0; i < m; i++)
                    col[i] += a[l + (size_t)i * lda] * bv;
            }
        }
        float *cc = c + (size_t)j * ldc;
        for (int i = 0; i < m; i++)
            cc[i] = *beta == 0.0f ? *alpha * col[i] : *alpha * col[i] + *beta * cc[i];
    }
    return CUBLAS_STATUS_SUCCESS;
}
