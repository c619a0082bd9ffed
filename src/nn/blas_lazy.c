/* OpenBLAS, loaded on first use. The cpu backend (backend_cpu.c) calls
 * the four OpenBLAS functions below as declared in <cblas.h>; these are
 * their definitions here, each loading libopenblas.so.0 with dlopen the
 * first time any of them runs and then calling the real one.
 *
 * Why: every `peer` links the training engine, but most of the time a
 * peer trains nothing (it coordinates, holds the store, waits for work).
 * Linked directly, OpenBLAS and libgfortran cost each process about 2 MB
 * of resident memory (relocated data and touched pages) from the start;
 * loaded lazily they cost nothing until a trial trains. The library is
 * the one pkg-config names (Debian's libopenblas0 alternatives), so the
 * environment's OpenBLAS settings (OPENBLAS_CORETYPE, ...) apply as
 * before: OpenBLAS reads them when it is loaded. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include <cblas.h>

#define OPENBLAS_SONAME "libopenblas.so.0"

typedef void (*sgemm_fn)(const enum CBLAS_ORDER, const enum CBLAS_TRANSPOSE,
                         const enum CBLAS_TRANSPOSE, const blasint, const blasint, const blasint,
                         const float, const float *, const blasint, const float *, const blasint,
                         const float, float *, const blasint);
typedef void (*set_threads_fn)(int);
typedef int (*get_threads_fn)(void);
typedef char *(*get_config_fn)(void);

static struct {
    sgemm_fn sgemm;
    set_threads_fn set_threads;
    get_threads_fn get_threads;
    get_config_fn get_config;
} blas;

static pthread_once_t once = PTHREAD_ONCE_INIT;

/* OpenBLAS is a dependency of the package: its absence is an installation
 * fault, and a matrix product has no error to return, so this stops the
 * process with what to do. */
static void load(void) {
    void *h = dlopen(OPENBLAS_SONAME, RTLD_NOW | RTLD_LOCAL);
    if (h) {
        *(void **)&blas.sgemm = dlsym(h, "cblas_sgemm");
        *(void **)&blas.set_threads = dlsym(h, "openblas_set_num_threads");
        *(void **)&blas.get_threads = dlsym(h, "openblas_get_num_threads");
        *(void **)&blas.get_config = dlsym(h, "openblas_get_config");
    }
    if (!h || !blas.sgemm || !blas.set_threads || !blas.get_threads || !blas.get_config) {
        fprintf(stderr, "starling: cannot load OpenBLAS (%s): %s; install Debian's libopenblas0 "
                        "(tools/setup does)\n",
                OPENBLAS_SONAME, h ? "a function is missing" : dlerror());
        abort();
    }
}

void cblas_sgemm(OPENBLAS_CONST enum CBLAS_ORDER order, OPENBLAS_CONST enum CBLAS_TRANSPOSE ta,
                 OPENBLAS_CONST enum CBLAS_TRANSPOSE tb, OPENBLAS_CONST blasint m,
                 OPENBLAS_CONST blasint n, OPENBLAS_CONST blasint k, OPENBLAS_CONST float alpha,
                 OPENBLAS_CONST float *a, OPENBLAS_CONST blasint lda, OPENBLAS_CONST float *b,
                 OPENBLAS_CONST blasint ldb, OPENBLAS_CONST float beta, float *c,
                 OPENBLAS_CONST blasint ldc) {
    pthread_once(&once, load);
    blas.sgemm(order, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

void openblas_set_num_threads(int num_threads) {
    pthread_once(&once, load);
    blas.set_threads(num_threads);
}

int openblas_get_num_threads(void) {
    pthread_once(&once, load);
    return blas.get_threads();
}

char *openblas_get_config(void) {
    pthread_once(&once, load);
    return blas.get_config();
}
