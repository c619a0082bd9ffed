/* Backend registry: picks `cpu` or `cuda` at run time.
 *
 * The cuda backend lives in libstarling_cuda.so, which this file
 * dlopen()s only when asked for ("cuda") or allowed ("auto"), so the
 * binaries start on machines with no CUDA libraries at all. The library is
 * looked for in $SL_CUDA_BACKEND (a path), then beside the executable
 * (its directory, then its lib/ and src/nn/cuda/ sub-directories), then by
 * the dynamic loader's search path. */
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "nn/nn_internal.h"
#include "platform/process.h"
#include "starling/platform.h"

#define CUDA_SO "libstarling_cuda.so"

static void say(char *why, size_t why_len, const char *fmt, const char *a, const char *b) {
    if (why && why_len)
        snprintf(why, why_len, fmt, a, b);
}

/* The library's handle, or NULL (the loader's reason in err). */
static void *open_cuda_library(char *err, size_t err_len) {
    const char *env = sl_plat_getenv("SL_CUDA_BACKEND");
    if (env && *env)
        return sl_plat_lib_open(env, err, err_len);
    char exe[PATH_MAX];
    if (sl_plat_exe_dir(exe, sizeof exe) == SL_OK) {
        static const char *subdirs[] = {"", "/lib", "/src/nn/cuda", "/../src/nn/cuda", "/../lib"};
        for (size_t i = 0; i < sizeof subdirs / sizeof *subdirs; i++) {
            char path[PATH_MAX + 64];
            snprintf(path, sizeof path, "%s%s/" CUDA_SO, exe, subdirs[i]);
            if (sl_plat_can_read(path))
                return sl_plat_lib_open(path, err, err_len);
        }
    }
    return sl_plat_lib_open(CUDA_SO, err, err_len);
}

/* Opens an instance; on failure the backend's own reason (what it wrote
 * into its description) goes to `reason`. */
static sl_err open_with(const sl_nn_backend_ops_t *ops, void *dl, int threads,
                        sl_nn_backend_t **out, char *reason, size_t reason_len) {
    sl_nn_backend_t *be = sl_calloc(1, sizeof *be);
    if (!be)
        return SL_ENOMEM;
    be->ops = ops;
    be->dl = dl;
    sl_err err = ops->open(&be->self, threads, be->desc, sizeof be->desc);
    if (err != SL_OK) {
        if (reason && reason_len)
            snprintf(reason, reason_len, "%s", be->desc[0] ? be->desc : sl_strerror(err));
        sl_free(be);
        return err;
    }
    if (!be->desc[0])
        snprintf(be->desc, sizeof be->desc, "%s", ops->name);
    *out = be;
    return SL_OK;
}

/* Loads the cuda library and opens a device. */
static sl_err open_cuda(int threads, sl_nn_backend_t **out, char *why, size_t why_len) {
    char err[256] = "";
    void *dl = open_cuda_library(err, sizeof err);
    if (!dl) {
        say(why, why_len, "cuda backend not available: cannot load %s: %s", CUDA_SO, err);
        return SL_EUNSUPPORTED;
    }
    sl_nn_backend_entry_fn entry;
    *(void **)&entry = sl_plat_lib_sym(dl, SL_NN_BACKEND_ENTRY);
    int abi = 0;
    const sl_nn_backend_ops_t *ops = entry ? entry(&abi) : NULL;
    if (!ops || abi != SL_NN_BACKEND_ABI) {
        sl_plat_lib_close(dl);
        say(why, why_len, "cuda backend not usable: %s %s", CUDA_SO,
            ops ? "was built for another interface version; rebuild it"
                : "lacks its entry point");
        return SL_EVERSION;
    }
    char reason[192] = "";
    sl_err e = open_with(ops, dl, threads, out, reason, sizeof reason);
    if (e != SL_OK) {
        sl_plat_lib_close(dl);
        say(why, why_len, "cuda backend: no usable device: %s%s", reason,
            "; use --device cpu or auto");
        return e == SL_ENOMEM ? e : SL_ENODEV;
    }
    return SL_OK;
}

sl_err sl_nn_backend_open(const char *device, int threads, sl_nn_backend_t **out, char *why,
                          size_t why_len) {
    *out = NULL;
    if (!device || !strcmp(device, "auto")) {
        char ignored[256];
        if (open_cuda(threads, out, ignored, sizeof ignored) == SL_OK)
            return SL_OK;
        sl_log(SL_LOG_DEBUG, "NN-BACKEND-FALLBACK", "%s; using cpu", ignored);
        return open_with(&sl_nn_backend_cpu, NULL, threads, out, why, why_len);
    }
    if (!strcmp(device, "cpu"))
        return open_with(&sl_nn_backend_cpu, NULL, threads, out, why, why_len);
    if (!strcmp(device, "cuda"))
        return open_cuda(threads, out, why, why_len);
    say(why, why_len, "unknown device '%s': use auto, cpu or cuda%s", device, "");
    return SL_EINVAL;
}

void sl_nn_backend_destroy(sl_nn_backend_t **pbe) {
    if (!pbe || !*pbe)
        return;
    sl_nn_backend_t *be = *pbe;
    if (be->self)
        be->ops->close(&be->self);
    /* The cuda library stays loaded: its runtime may hold atexit handlers. */
    sl_free(be);
    *pbe = NULL;
}

const char *sl_nn_backend_name(const sl_nn_backend_t *be) { return be->ops->name; }
const char *sl_nn_backend_desc(const sl_nn_backend_t *be) { return be->desc; }
const sl_nn_backend_ops_t *sl_nn_backend_ops(const sl_nn_backend_t *be) { return be->ops; }
void *sl_nn_backend_self(const sl_nn_backend_t *be) { return be->self; }
