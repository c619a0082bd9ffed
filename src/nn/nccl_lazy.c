/* NCCL, loaded with dlopen the first time a communicator is wanted
 * (nccl_lazy.h). The declarations below are the few of <nccl.h> used,
 * written out so that the build needs no NCCL headers; their values are
 * NCCL's ABI, stable since 2.x. */
#include "nn/nccl_lazy.h"

#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/why.h"
#include "starling/common.h"

#define NCCL_SONAME "libnccl.so.2"
#define NCCL_TOOLKIT_PATH "/usr/local/cuda/lib64/libnccl.so.2" /* the CUDA toolkit's */

typedef struct ncclComm *ncclComm_t;
typedef struct {
    char internal[SL_NCCL_ID_LEN];
} ncclUniqueId;
typedef int ncclResult_t; /* an enum in nccl.h */
enum {
    NCCL_SUCCESS = 0,
    NCCL_UNHANDLED_CUDA_ERROR = 1,
    NCCL_SYSTEM_ERROR = 2,
    NCCL_INTERNAL_ERROR = 3,
    NCCL_INVALID_ARGUMENT = 4,
    NCCL_INVALID_USAGE = 5,
    NCCL_REMOTE_ERROR = 6,
    NCCL_IN_PROGRESS = 7
};
enum { NCCL_FLOAT32 = 7, NCCL_SUM = 0 };

/* ncclConfig_t as NCCL 2.17 defined it: newer libraries read a config by
 * its version and size, so the fields up to splitShare are enough. */
typedef struct {
    size_t size;          /* sizeof this struct */
    unsigned int magic;   /* 0xcafebeef */
    unsigned int version; /* the layout's NCCL version */
    int blocking;         /* 0: nonblocking communicator */
    int cgaClusterSize;   /* INT_MIN: NCCL's default */
    int minCTAs;          /* INT_MIN: default */
    int maxCTAs;          /* INT_MIN: default */
    const char *netName;  /* NULL: default */
    int splitShare;       /* INT_MIN: default */
} nccl_config_t;
#define NCCL_CONFIG_MAGIC 0xcafebeefu
#define NCCL_CONFIG_VERSION 21700 /* NCCL_VERSION(2, 17, 0) */

typedef ncclResult_t (*get_version_fn)(int *);
typedef ncclResult_t (*get_unique_id_fn)(ncclUniqueId *);
typedef ncclResult_t (*init_rank_config_fn)(ncclComm_t *, int, ncclUniqueId, int,
                                            nccl_config_t *);
typedef ncclResult_t (*all_reduce_fn)(const void *, void *, size_t, int, int, ncclComm_t,
                                      void *);
typedef ncclResult_t (*comm_fn)(ncclComm_t);
typedef ncclResult_t (*async_error_fn)(ncclComm_t, ncclResult_t *);
typedef const char *(*error_string_fn)(ncclResult_t);
typedef const char *(*last_error_fn)(ncclComm_t);

static struct {
    get_version_fn get_version;
    get_unique_id_fn get_unique_id;
    init_rank_config_fn init_rank_config;
    all_reduce_fn all_reduce;
    comm_fn comm_abort;
    comm_fn comm_destroy;
    async_error_fn async_error;
    error_string_fn error_string;
    last_error_fn last_error; /* optional (NCCL 2.13 and later) */
    int version;              /* ncclGetVersion's */
    sl_err err;               /* the load's outcome */
    char why[300];            /* its reason when it failed */
} lib;

static pthread_once_t once = PTHREAD_ONCE_INIT;

struct sl_nccl {
    ncclComm_t comm; /* the communicator (NULL once aborted) */
    sl_err err;      /* the kept error, SL_OK while healthy */
    char why[300];   /* its text */
};

static void load(void) {
    const char *env = getenv("STARLING_NCCL_LIB");
    const char *path = env && *env ? env : NCCL_SONAME;
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h && !(env && *env))
        h = dlopen(path = NCCL_TOOLKIT_PATH, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        const char *e = dlerror();
        lib.err = sl_why(lib.why, sizeof lib.why, SL_EUNSUPPORTED,
                         "nccl not available: cannot load %s: %s",
                         env && *env ? env : NCCL_SONAME, e ? e : "unknown dlopen error");
        return;
    }
    static const struct {
        const char *name;
        void **slot;
    } syms[] = {
        {"ncclGetVersion", (void **)&lib.get_version},
        {"ncclGetUniqueId", (void **)&lib.get_unique_id},
        {"ncclCommInitRankConfig", (void **)&lib.init_rank_config},
        {"ncclAllReduce", (void **)&lib.all_reduce},
        {"ncclCommAbort", (void **)&lib.comm_abort},
        {"ncclCommDestroy", (void **)&lib.comm_destroy},
        {"ncclCommGetAsyncError", (void **)&lib.async_error},
        {"ncclGetErrorString", (void **)&lib.error_string},
    };
    for (size_t i = 0; i < sizeof syms / sizeof *syms; i++) {
        *syms[i].slot = dlsym(h, syms[i].name);
        if (!*syms[i].slot) {
            lib.err = sl_why(lib.why, sizeof lib.why, SL_EUNSUPPORTED,
                             "nccl not usable: %s lacks %s (NCCL 2.17 or later is needed)",
                             path, syms[i].name);
            return; /* the library stays loaded: harmless */
        }
    }
    *(void **)&lib.last_error = dlsym(h, "ncclGetLastError");
    if (lib.get_version(&lib.version) != NCCL_SUCCESS || lib.version < 21700) {
        lib.err = sl_why(lib.why, sizeof lib.why, SL_EUNSUPPORTED,
                         "nccl not usable: %s is version %d, 2.17 or later is needed", path,
                         lib.version);
        return;
    }
    lib.err = SL_OK;
}

sl_err sl_nccl_load(char *why, size_t why_len) {
    pthread_once(&once, load);
    if (lib.err != SL_OK)
        return sl_why(why, why_len, lib.err, "%s", lib.why);
    return SL_OK;
}

int sl_nccl_version(void) {
    pthread_once(&once, load);
    return lib.err == SL_OK ? lib.version : 0;
}

/* NCCL's result as an sl_err: a failed member (remote, or the system
 * calls that talk to it) is a closed world, as a broken ring is. */
static sl_err map(ncclResult_t r) {
    switch (r) {
    case NCCL_SUCCESS: return SL_OK;
    case NCCL_IN_PROGRESS: return SL_EAGAIN;
    case NCCL_UNHANDLED_CUDA_ERROR: return SL_ENODEV;
    case NCCL_SYSTEM_ERROR:
    case NCCL_REMOTE_ERROR: return SL_ECLOSED;
    case NCCL_INVALID_ARGUMENT:
    case NCCL_INVALID_USAGE: return SL_EINVAL;
    default: return SL_EINTERNAL;
    }
}

/* Keeps the first error of `c` with NCCL's text and the call. */
static sl_err fail(sl_nccl_t *c, ncclResult_t r, const char *call) {
    sl_err err = map(r);
    if (err == SL_OK || err == SL_EAGAIN || c->err != SL_OK)
        return c->err != SL_OK ? c->err : err;
    const char *last = lib.last_error && c->comm ? lib.last_error(c->comm) : NULL;
    c->err = sl_why(c->why, sizeof c->why, err, "%s%s%s (%d)%s%s", call ? call : "",
                    call ? ": " : "", lib.error_string(r), r, last && *last ? ": " : "",
                    last ? last : "");
    return err;
}

sl_err sl_nccl_unique_id(uint8_t id[SL_NCCL_ID_LEN], char *why, size_t why_len) {
    sl_err err = sl_nccl_load(why, why_len);
    if (err != SL_OK)
        return err;
    ncclUniqueId u;
    ncclResult_t r = lib.get_unique_id(&u);
    if (r != NCCL_SUCCESS)
        return sl_why(why, why_len, map(r) == SL_EAGAIN ? SL_EINTERNAL : map(r),
                      "ncclGetUniqueId: %s (%d)", lib.error_string(r), r);
    memcpy(id, u.internal, SL_NCCL_ID_LEN);
    return SL_OK;
}

sl_err sl_nccl_new(const uint8_t id[SL_NCCL_ID_LEN], int nranks, int rank, sl_nccl_t **out,
                   char *why, size_t why_len) {
    *out = NULL;
    sl_err err = sl_nccl_load(why, why_len);
    if (err != SL_OK)
        return err;
    sl_nccl_t *c = sl_calloc(1, sizeof *c);
    if (!c)
        return sl_why(why, why_len, SL_ENOMEM, "out of memory for a communicator");
    ncclUniqueId u;
    memcpy(u.internal, id, SL_NCCL_ID_LEN);
    nccl_config_t cfg = {.size = sizeof cfg,
                         .magic = NCCL_CONFIG_MAGIC,
                         .version = NCCL_CONFIG_VERSION,
                         .blocking = 0,
                         .cgaClusterSize = INT_MIN,
                         .minCTAs = INT_MIN,
                         .maxCTAs = INT_MIN,
                         .netName = NULL,
                         .splitShare = INT_MIN};
    ncclResult_t r = lib.init_rank_config(&c->comm, nranks, u, rank, &cfg);
    err = map(r);
    if (err != SL_OK && err != SL_EAGAIN) {
        fail(c, r, "ncclCommInitRankConfig");
        sl_why(why, why_len, err, "%s", c->why);
        sl_nccl_abort(&c);
        return err;
    }
    *out = c;
    return SL_OK;
}

sl_err sl_nccl_poll(sl_nccl_t *c) {
    if (c->err != SL_OK)
        return c->err;
    ncclResult_t state = NCCL_SUCCESS;
    ncclResult_t r = lib.async_error(c->comm, &state);
    if (r != NCCL_SUCCESS)
        return fail(c, r, "ncclCommGetAsyncError");
    return fail(c, state, NULL); /* the caller names what it waited for */
}

sl_err sl_nccl_allreduce_sum(sl_nccl_t *c, float *dev, size_t count, void *stream) {
    if (c->err != SL_OK)
        return c->err;
    ncclResult_t r = lib.all_reduce(dev, dev, count, NCCL_FLOAT32, NCCL_SUM, c->comm, stream);
    sl_err err = fail(c, r, "ncclAllReduce");
    return err == SL_EAGAIN ? SL_OK : err;
}

const char *sl_nccl_error(const sl_nccl_t *c) { return c ? c->why : ""; }

void sl_nccl_abort(sl_nccl_t **pc) {
    if (!pc || !*pc)
        return;
    sl_nccl_t *c = *pc;
    if (c->comm)
        lib.comm_abort(c->comm); /* nothing to report to: it is gone either way */
    sl_free(c);
    *pc = NULL;
}
