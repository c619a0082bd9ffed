/* Starling nn, cuda backend: errors and the device a call runs on --
 * what the kernels' launchers (kernels.cu) and the backend's table
 * (backend_cuda.cu) both use, below both, so neither calls back into the
 * other (tools/layers: no circle of files).
 *
 * An error is logged through sl_log when the executable exports it (a
 * weak reference), else on stderr, and mapped to an sl_err; one that
 * leaves the device unusable is kept and returned by every later op. */
#include <stdarg.h>
#include <stdio.h>

#include "nn/cuda/cuda_internal.h"

/* Present when the executable exports it (linked with -rdynamic). */
extern "C" void sl_log(int level, const char *id, const char *fmt, ...) __attribute__((weak));

void sl_cuda_report(int level, const char *id, const char *fmt, ...) {
    char msg[384];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (sl_log)
        sl_log(level, id, "%s", msg);
    else
        fprintf(stderr, "starling cuda: %s: %s\n", id, msg);
}

/* ---- errors ---- */

sl_err sl_cuda_map(cudaError_t e) {
    switch (e) {
    case cudaSuccess:
        return SL_OK;
    case cudaErrorMemoryAllocation:
        return SL_ENOMEM;
    case cudaErrorNoDevice:
    case cudaErrorInsufficientDriver:
    case cudaErrorInvalidDevice:
    case cudaErrorDevicesUnavailable:
    case cudaErrorInitializationError:
    case cudaErrorDeviceUninitialized:
    case cudaErrorNoKernelImageForDevice:
    case cudaErrorUnsupportedPtxVersion:
    case cudaErrorSystemDriverMismatch:
    case cudaErrorCompatNotSupportedOnDevice:
    case cudaErrorSystemNotReady:
    case cudaErrorStubLibrary:
    case cudaErrorECCUncorrectable:
    case cudaErrorNvlinkUncorrectable:
    case cudaErrorHardwareStackError:
    case cudaErrorLaunchTimeout:
    case cudaErrorCudartUnloading:
        return SL_ENODEV;
    case cudaErrorInvalidValue:
    case cudaErrorInvalidConfiguration:
    case cudaErrorInvalidDevicePointer:
    case cudaErrorInvalidMemcpyDirection:
    case cudaErrorInvalidResourceHandle:
        return SL_EINVAL;
    case cudaErrorNotSupported:
        return SL_EUNSUPPORTED;
    default: /* illegal address, launch failure, assert: a bug here */
        return SL_EINTERNAL;
    }
}

sl_err sl_cuda_map_blas(cublasStatus_t s) {
    switch (s) {
    case CUBLAS_STATUS_SUCCESS:
        return SL_OK;
    case CUBLAS_STATUS_ALLOC_FAILED:
        return SL_ENOMEM;
    case CUBLAS_STATUS_NOT_INITIALIZED:
    case CUBLAS_STATUS_ARCH_MISMATCH:
        return SL_ENODEV;
    case CUBLAS_STATUS_INVALID_VALUE:
        return SL_EINVAL;
    case CUBLAS_STATUS_NOT_SUPPORTED:
    case CUBLAS_STATUS_LICENSE_ERROR:
        return SL_EUNSUPPORTED;
    default: /* mapping error, execution failed, internal error */
        return SL_EINTERNAL;
    }
}

/* Whether an error leaves the device (context) unusable: those are kept
 * and returned by every later op. A refused argument or allocation is
 * returned once and the instance stays usable. */
static bool sticky(sl_err err) { return err == SL_ENODEV || err == SL_EINTERNAL; }

sl_err sl_cuda_fail(sl_cuda_t *c, cudaError_t e, const char *what) {
    sl_err err = sl_cuda_map(e);
    if (err == SL_OK)
        return SL_OK;
    sl_cuda_report(3, "CUDA-ERROR", "%s failed: %s (%s, %d)", what, cudaGetErrorString(e),
           cudaGetErrorName(e), (int)e);
    if (c && c->deferred == SL_OK && sticky(err))
        c->deferred = err;
    return err;
}

sl_err sl_cuda_fail_blas(sl_cuda_t *c, cublasStatus_t s, const char *what) {
    sl_err err = sl_cuda_map_blas(s);
    if (err == SL_OK)
        return SL_OK;
    sl_cuda_report(3, "CUDA-CUBLAS-ERROR", "%s failed: %s (%d)", what, cublasGetStatusString(s),
           (int)s);
    if (c && c->deferred == SL_OK && sticky(err))
        c->deferred = err;
    return err;
}

sl_err sl_cuda_launched(sl_cuda_t *c, const char *what) {
    cudaError_t e = cudaGetLastError();
    return e == cudaSuccess ? SL_OK : sl_cuda_fail(c, e, what);
}

/* The device this thread last made current through sl_cuda_enter. */
static thread_local int current_device = -1;

sl_err sl_cuda_enter(sl_cuda_t *c) {
    if (c->deferred != SL_OK)
        return c->deferred;
    if (current_device != c->device) {
        cudaError_t e = cudaSetDevice(c->device);
        if (e != cudaSuccess)
            return sl_cuda_fail(c, e, "cudaSetDevice");
        current_device = c->device;
    }
    return SL_OK;
}
