/* The cpu backend: OpenBLAS sgemm, and element-wise loops over the
 * formulas of ops_math.h that the compiler vectorises.
 *
 * Threads: a backend of T threads runs OpenBLAS single-threaded and
 * splits each large sgemm itself into T independent column (or row) blocks,
 * one per thread: the caller runs block 0, T-1 helper threads the others,
 * and they meet once at the end. OpenBLAS's own threaded sgemm shares packed
 * panels between its threads and synchronises many times per call, so on a
 * busy machine a thread that loses its core stalls the other; independent
 * blocks only wait at the join. Between jobs a helper polls for the next one
 * for a bounded time (SPIN_NS), then sleeps on a condition variable; the
 * caller polls for the join the same way. A sleeping thread takes 20-50 us
 * to wake on this VM, and a training step posts a job every 10-300 us, so
 * waking by futex alone cost ~15% of an MLP epoch. Polling only pays while
 * the pool has the cores to itself: when another process's thread wants
 * one, a polling thread takes its share of the core from the pool's
 * working threads (epochs ran 2x slower under load). So the caller looks
 * at the machine's runnable-thread count (/proc/loadavg, every PROBE_NS)
 * and the pool polls only while the other runnable threads fit on the
 * cores it leaves free; else it sleeps at once, as it always did.
 * SL_NN_CPU_POLL=always|never overrides the probe (tests, measurements). The
 * window ops (im2col, col2im, max-pooling) are split the same way, by
 * samples; the other loops run on the calling thread. T is
 * `threads` when > 0, else OpenBLAS's own count (OPENBLAS_NUM_THREADS etc.
 * are read, not changed). The split points depend on the shape and T only,
 * and no sum is split, so results are bit-for-bit the same for a given T.
 *
 * Hot loops are compiled twice (target_clones: AVX2 and baseline) and
 * picked at load time, so the binary still runs on any x86-64. Reductions
 * use fixed partial sums, never reassociation, so results are a function
 * of the inputs alone (bit-for-bit resume). */
#include <cblas.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define cpu_relax() _mm_pause()
#else
#define cpu_relax() ((void)0)
#endif

#include "nn/cpu_sparse.h"
#include "nn/ops_math.h"
#include "platform/process.h"
#include "starling/nn_backend.h"
#include "starling/platform.h"

#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && !defined(SL_SANITIZE)
#define SL_VEC __attribute__((target_clones("avx2", "default")))
#else
#define SL_VEC
#endif

/* One sgemm block: C[m][n] (row-major) = alpha op(A) op(B) + beta C. */
typedef struct {
    bool ta;        /* A transposed */
    bool tb;        /* B transposed */
    int m;          /* rows of C */
    int n;          /* columns of C */
    int k;          /* inner dimension */
    float alpha;    /* scale of the product */
    const float *a; /* A */
    int lda;        /* leading dimension of A */
    const float *b; /* B */
    int ldb;        /* leading dimension of B */
    float beta;     /* scale of the old C */
    float *c;       /* C */
    int ldc;        /* leading dimension of C */
} gemm_t;

/* The most threads one cpu backend splits an sgemm over. */
#define SL_NN_CPU_MAX_THREADS 64

typedef struct {
    int threads;           /* threads an sgemm is split over (OpenBLAS runs with 1) */
    int started;           /* helper threads running (threads - 1 once open) */
    pthread_t *helpers;    /* the helper threads [started] */
    pthread_mutex_t lock;  /* guards sleeping on the two conditions */
    pthread_cond_t wake;   /* signalled when a job is posted or on stop */
    pthread_cond_t idle;   /* signalled when the last helper finishes a job */
    _Atomic uint64_t generation; /* bumped for every posted job */
    atomic_int pending;    /* helpers still working on the current job */
    atomic_int sleepers;   /* helpers asleep (or about to be) on `wake` */
    atomic_bool joining;   /* the caller sleeps (or is about to) on `idle` */
    atomic_int arrived;    /* threads at the current job's barrier (job_barrier) */
    pthread_cond_t met;    /* signalled when the last thread reaches the barrier */
    atomic_bool stop;      /* helpers exit */
    atomic_bool may_spin;  /* the machine has a core for every pool thread (probe_load) */
    long probe_at;         /* caller: when to look at the machine's load again (ns) */
    int cores;             /* online cores */
    int poll;              /* SL_NN_CPU_POLL: 1 always, -1 never, 0 probe the load */
    void (*fn)(void *arg, int part, int parts); /* the current job: runs part `part` */
    void *arg;             /* the current job's argument */
    gemm_t part[SL_NN_CPU_MAX_THREADS]; /* an sgemm job's blocks, [i] for thread i */
    float *partial;        /* KSPLIT_MAX_OUT floats per thread: k-split partial products */
    int sparse;            /* SL_NN_CPU_SPARSE: 1 always, -1 never, 0 by the cost model */
    double dense_rate;     /* OpenBLAS's multiply-adds a ns, by its kernels (the cost model's) */
    void *sparse_scratch;  /* cpu_sparse.c's scratch (grown on demand) */
    size_t sparse_len;     /* its length in bytes */
} cpu_t;

/* The k-split of sgemm (see ksplit_run). */
#define KSPLIT_BLOCK 4096
#define KSPLIT_MIN_K (2 * KSPLIT_BLOCK)
#define KSPLIT_MAX_OUT 16384 /* floats of C */

/* How long a thread polls before sleeping: a few training steps' gaps
 * between jobs, short enough that an idle pool is asleep at once. */
#define SPIN_NS 200000L
/* How often the caller re-reads the machine's runnable-thread count. */
#define PROBE_NS 20000000L

static long now_ns(void) { return (long)sl_plat_now_ns(); }

/* Polls until cond(c, arg) holds or SPIN_NS passed, when polling is
 * allowed; returns whether it holds. */
static bool spin_until(cpu_t *c, bool (*cond)(cpu_t *, uint64_t), uint64_t arg) {
    long deadline = 0;
    for (int i = 0;; i++) {
        if (cond(c, arg))
            return true;
        if (!atomic_load_explicit(&c->may_spin, memory_order_relaxed))
            return false;
        cpu_relax();
        if ((i & 63) == 63) {
            long t = now_ns();
            if (!deadline)
                deadline = t + SPIN_NS;
            else if (t > deadline)
                return false;
        }
    }
}

/* Caller only: every PROBE_NS, whether the runnable threads of other
 * processes leave a core to each pool thread. /proc/loadavg's fourth
 * field counts runnable threads, the caller and every helper not asleep
 * included. Unreadable: no polling (sleep at once). */
static void probe_load(cpu_t *c) {
    if (c->poll) {
        atomic_store(&c->may_spin, c->poll > 0);
        return;
    }
    long t = now_ns();
    if (t < c->probe_at)
        return;
    c->probe_at = t + PROBE_NS;
    bool spin = false;
    int running = sl_plat_runnable_threads();
    if (running >= 0) {
        int awake = 1 + (c->threads - 1) - atomic_load(&c->sleepers);
        int others = running - awake;
        spin = others + c->threads <= c->cores;
    }
    atomic_store(&c->may_spin, spin);
}

static bool job_posted(cpu_t *c, uint64_t seen) {
    return atomic_load(&c->stop) || atomic_load(&c->generation) != seen;
}

static bool job_done(cpu_t *c, uint64_t unused) { return atomic_load(&c->pending) == 0; }

/* Runs one block on the calling thread (OpenBLAS single-threaded). */
static void gemm_run(const gemm_t *g) {
    if (g->m > 0 && g->n > 0)
        cblas_sgemm(CblasRowMajor, g->ta ? CblasTrans : CblasNoTrans,
                    g->tb ? CblasTrans : CblasNoTrans, g->m, g->n, g->k, g->alpha, g->a, g->lda,
                    g->b, g->ldb, g->beta, g->c, g->ldc);
}

static void *helper_main(void *arg) {
    cpu_t *c = ((void **)arg)[0];
    int index = (int)(intptr_t)((void **)arg)[1];
    sl_free(arg);
    uint64_t seen = 0;
    for (;;) {
        if (!spin_until(c, job_posted, seen)) {
            /* Sleep. sleepers is raised before generation is read again
             * (both seq_cst), so a poster either sees a sleeper and
             * broadcasts under the lock, or this re-check sees its job. */
            pthread_mutex_lock(&c->lock);
            atomic_fetch_add(&c->sleepers, 1);
            while (!job_posted(c, seen))
                pthread_cond_wait(&c->wake, &c->lock);
            atomic_fetch_sub(&c->sleepers, 1);
            pthread_mutex_unlock(&c->lock);
        }
        if (atomic_load(&c->stop))
            break;
        seen = atomic_load(&c->generation);
        c->fn(c->arg, index, c->threads);
        if (atomic_fetch_sub(&c->pending, 1) == 1 && atomic_load(&c->joining)) {
            pthread_mutex_lock(&c->lock);
            pthread_cond_signal(&c->idle);
            pthread_mutex_unlock(&c->lock);
        }
    }
    return NULL;
}

static void cpu_close(void **self) {
    if (!self || !*self)
        return;
    cpu_t *c = *self;
    if (c->started) {
        pthread_mutex_lock(&c->lock);
        atomic_store(&c->stop, true);
        pthread_cond_broadcast(&c->wake);
        pthread_mutex_unlock(&c->lock);
        for (int i = 0; i < c->started; i++)
            pthread_join(c->helpers[i], NULL);
    }
    if (c->helpers) {
        pthread_cond_destroy(&c->wake);
        pthread_cond_destroy(&c->idle);
        pthread_cond_destroy(&c->met);
        pthread_mutex_destroy(&c->lock);
    }
    sl_free(c->helpers);
    free(c->partial);
    free(c->sparse_scratch);
    sl_free(c);
    *self = NULL;
}

/* OpenBLAS picks its kernels by the CPU's model number when it loads, and
 * on a CPU newer than the library (Debian 12's 0.3.21 on a Sapphire
 * Rapids) it falls back to its Prescott (SSE3) kernels: 16 multiply-adds
 * a ns on the training engine's shapes, where its Haswell kernels run 38
 * and its SkylakeX ones 55-75 on the same core (docs/training.md). So,
 * unless OPENBLAS_CORETYPE is set, it is set here
 * from the CPU's features before OpenBLAS is first used (it reads the
 * variable when it loads, src/nn/blas_lazy.c): AVX-512 F, BW, DQ and VL
 * pick SkylakeX, else AVX2 with FMA Haswell (the kernels OpenBLAS gives
 * the CPUs of those kinds it knows). Child processes inherit it. setenv
 * while other threads may read the environment: glibc frees no array of
 * the environment it did not allocate itself, and this is the engine's
 * only setenv, made once per process. */
static void pick_blas_kernels(void) {
#if defined(__GNUC__) && defined(__x86_64__)
    if (sl_plat_getenv("OPENBLAS_CORETYPE"))
        return;
    __builtin_cpu_init();
    const char *core = NULL;
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl"))
        core = "SkylakeX";
    else if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
        core = "Haswell";
    if (core)
        sl_plat_setenv("OPENBLAS_CORETYPE", core, false);
#endif
}

static pthread_once_t blas_kernels_once = PTHREAD_ONCE_INIT;

/* The dense rate of the sparse path's cost model (sl_nn_spgemm_worth) for
 * the kernels OpenBLAS runs, read from its configuration string: 70
 * multiply-adds a ns for its AVX-512 kernels, 16 for the SSE ones, 45
 * (AVX2, the model's fit on Zen 3) otherwise. */
static double blas_dense_rate(const char *cfg) {
    static const char *avx512[] = {"SkylakeX", "Cooperlake", "SapphireRapids"};
    static const char *sse[] = {"Prescott", "Core2", "Penryn", "Dunnington", "Nehalem", "Atom"};
    for (size_t i = 0; cfg && i < sizeof avx512 / sizeof avx512[0]; i++)
        if (strstr(cfg, avx512[i]))
            return 70.0;
    for (size_t i = 0; cfg && i < sizeof sse / sizeof sse[0]; i++)
        if (strstr(cfg, sse[i]))
            return 16.0;
    return 45.0;
}

static sl_err cpu_open(void **self, int threads, char *desc, size_t desc_len) {
    pthread_once(&blas_kernels_once, pick_blas_kernels);
    cpu_t *c = sl_calloc(1, sizeof *c);
    void *cc = c;
    if (!c)
        return SL_ENOMEM;
    c->threads = threads > 0 ? threads : openblas_get_num_threads();
    if (c->threads < 1)
        c->threads = 1;
    if (c->threads > SL_NN_CPU_MAX_THREADS)
        c->threads = SL_NN_CPU_MAX_THREADS;
    openblas_set_num_threads(1);
    c->partial = aligned_alloc(64, (size_t)c->threads * KSPLIT_MAX_OUT * sizeof(float));
    if (!c->partial)
        goto fail;
    c->cores = sl_plat_cpu_count();
    const char *poll = sl_plat_getenv("SL_NN_CPU_POLL");
    c->poll = poll && !strcmp(poll, "always") ? 1 : poll && !strcmp(poll, "never") ? -1 : 0;
    const char *sparse = sl_plat_getenv("SL_NN_CPU_SPARSE");
    c->sparse = sparse && !strcmp(sparse, "always") ? 1 : sparse && !strcmp(sparse, "never") ? -1 : 0;
    if (!sl_nn_spgemm_available())
        c->sparse = -1;
    const char *blas_cfg = openblas_get_config();
    c->dense_rate = blas_dense_rate(blas_cfg);
    if (c->threads > 1) {
        c->helpers = sl_calloc((size_t)c->threads - 1, sizeof *c->helpers);
        if (!c->helpers)
            goto fail;
        pthread_mutex_init(&c->lock, NULL);
        pthread_cond_init(&c->wake, NULL);
        pthread_cond_init(&c->idle, NULL);
        pthread_cond_init(&c->met, NULL);
        for (int i = 1; i < c->threads; i++) {
            void **arg = sl_malloc(2 * sizeof *arg);
            if (!arg)
                goto fail;
            arg[0] = c;
            arg[1] = (void *)(intptr_t)i;
            if (pthread_create(&c->helpers[i - 1], NULL, helper_main, arg) != 0) {
                sl_free(arg);
                goto fail;
            }
            c->started++;
        }
    }
    if (desc && desc_len) {
        snprintf(desc, desc_len, "cpu: %s, %d thread%s", blas_cfg ? blas_cfg : "OpenBLAS",
                 c->threads, c->threads == 1 ? "" : "s");
    }
    *self = c;
    return SL_OK;
fail:
    cpu_close(&cc);
    return SL_ENOMEM;
}

static sl_err cpu_sync(void *self) { return SL_OK; }

/* Device buffers are host memory, 64-byte aligned (not through the
 * allocation hook: aligned_alloc has no realloc counterpart). */
static sl_err cpu_alloc(void *self, size_t len, void **out) {
    size_t rounded = (len + 63) & ~(size_t)63;
    void *p = aligned_alloc(64, rounded ? rounded : 64);
    if (!p)
        return SL_ENOMEM;
    *out = p;
    return SL_OK;
}

static void cpu_free(void *self, void *dev) { free(dev); }

static sl_err cpu_upload(void *self, void *dev, const void *host, size_t len) {
    if (len)
        memcpy(dev, host, len);
    return SL_OK;
}

static sl_err cpu_download(void *self, void *host, const void *dev, size_t len) {
    if (len)
        memcpy(host, dev, len);
    return SL_OK;
}

static sl_err cpu_copy(void *self, float *dst, const float *src, size_t count) {
    if (count && dst != src)
        memmove(dst, src, count * sizeof *dst);
    return SL_OK;
}

SL_VEC static sl_err cpu_fill(void *self, float *restrict dst, float value, size_t count) {
    for (size_t i = 0; i < count; i++)
        dst[i] = value;
    return SL_OK;
}

/* Runs fn(arg, i, T) for every part i < T: part 0 on the caller, the
 * others on the helpers; returns when all are done. */
static void run_parts(cpu_t *cp, void (*fn)(void *, int, int), void *arg) {
    /* The helpers are between jobs (pending was 0), so fn and arg are
     * theirs to read once the generation's release publishes them. */
    probe_load(cp);
    cp->fn = fn;
    cp->arg = arg;
    atomic_store(&cp->pending, cp->threads - 1);
    atomic_store(&cp->arrived, 0);
    atomic_fetch_add(&cp->generation, 1);
    if (atomic_load(&cp->sleepers) > 0) {
        pthread_mutex_lock(&cp->lock);
        pthread_cond_broadcast(&cp->wake);
        pthread_mutex_unlock(&cp->lock);
    }
    fn(arg, 0, cp->threads);
    if (!spin_until(cp, job_done, 0)) {
        pthread_mutex_lock(&cp->lock);
        atomic_store(&cp->joining, true);
        while (atomic_load(&cp->pending) > 0)
            pthread_cond_wait(&cp->idle, &cp->lock);
        atomic_store(&cp->joining, false);
        pthread_mutex_unlock(&cp->lock);
    }
}

static bool barrier_met(cpu_t *c, uint64_t unused) {
    return atomic_load(&c->arrived) == c->threads;
}

/* Inside a job posted by run_parts, on every part's thread: returns once
 * all `threads` parts have called it (once per job). Two phases of one
 * job meet here instead of in two hand-offs: a thread that waits polls as
 * at a hand-off, then sleeps, and the last one to arrive wakes it, so a
 * sleeping pool pays one wake-up between the phases instead of two (the
 * caller woken for the first join, then a helper for the second job). */
static void job_barrier(cpu_t *cp) {
    if (atomic_fetch_add(&cp->arrived, 1) + 1 == cp->threads) {
        pthread_mutex_lock(&cp->lock);
        pthread_cond_broadcast(&cp->met);
        pthread_mutex_unlock(&cp->lock);
        return;
    }
    if (spin_until(cp, barrier_met, 0))
        return;
    pthread_mutex_lock(&cp->lock);
    while (!barrier_met(cp, 0))
        pthread_cond_wait(&cp->met, &cp->lock);
    pthread_mutex_unlock(&cp->lock);
}

static void gemm_part(void *arg, int part, int parts) {
    gemm_run(&((cpu_t *)arg)->part[part]);
}

/* Products below this many multiply-adds run unsplit on the caller. */
#define SPLIT_MIN_MACS (1L << 21)

/* A small output over a long inner dimension (conv1's weight gradient:
 * 32x25 over 73,728 columns per minibatch) runs OpenBLAS at a fifth of its
 * speed, and cannot be split by rows or columns. It is cut along k
 * instead: blocks of KSPLIT_BLOCK (OpenBLAS ran 2x faster on 4096-long
 * blocks than on the whole), a contiguous run of blocks per thread into
 * its own partial product, and the partials added in thread order. The
 * cut depends on the shape and T only, so results stay reproducible for
 * a given T; this is the one sum the backend splits. (KSPLIT_* above.) */

typedef struct {
    cpu_t *cp;
    gemm_t g; /* the whole product (its beta and C are applied at the end) */
} ksplit_t;

static void ksplit_part(void *arg, int part, int parts) {
    const ksplit_t *j = arg;
    const gemm_t *g = &j->g;
    long blocks = (g->k + KSPLIT_BLOCK - 1) / KSPLIT_BLOCK;
    long b0 = blocks * part / parts, b1 = blocks * (part + 1) / parts;
    float *p = j->cp->partial + (size_t)part * KSPLIT_MAX_OUT;
    if (b0 == b1)
        memset(p, 0, (size_t)g->m * g->n * sizeof *p);
    for (long b = b0; b < b1; b++) {
        long k0 = b * KSPLIT_BLOCK, k1 = k0 + KSPLIT_BLOCK < g->k ? k0 + KSPLIT_BLOCK : g->k;
        gemm_t q = *g;
        q.k = (int)(k1 - k0);
        q.a = g->ta ? g->a + k0 * g->lda : g->a + k0;
        q.b = g->tb ? g->b + k0 : g->b + k0 * g->ldb;
        q.beta = b == b0 ? 0.0f : 1.0f;
        q.c = p;
        q.ldc = g->n;
        gemm_run(&q);
    }
}

static void ksplit_run(cpu_t *cp, const gemm_t *g) {
    ksplit_t j = {cp, *g};
    int parts = cp->threads;
    if (parts > 1)
        run_parts(cp, ksplit_part, &j);
    else
        ksplit_part(&j, 0, 1);
    for (int i = 0; i < g->m; i++) {
        float *restrict c = g->c + (size_t)i * g->ldc;
        for (int t = 0; t < g->n; t++) {
            float sum = cp->partial[(size_t)i * g->n + t];
            for (int q = 1; q < parts; q++)
                sum += cp->partial[(size_t)q * KSPLIT_MAX_OUT + (size_t)i * g->n + t];
            c[t] = g->beta == 0.0f ? sum : sum + g->beta * c[t];
        }
    }
}

/* A sparse product on the pool: every part prepares its share, meets the
 * others (compute reads what all of them prepared), then computes its
 * share, in one hand-off. */
typedef struct {
    cpu_t *cp;
    sl_nn_spgemm_t *j;
} sparse_job_t;

static void sparse_part(void *arg, int part, int parts) {
    const sparse_job_t *job = arg;
    sl_nn_spgemm_prepare(job->j, part, parts);
    job_barrier(job->cp);
    sl_nn_spgemm_compute(job->j, part, parts);
}

/* Products below this many multiply-adds never look for zeros. */
#define SPARSE_MIN_MACS (1L << 20)

/* Runs g through cpu_sparse.c when one operand is sparse enough for that
 * to pay (its cost model, from a sampled density; SL_NN_CPU_SPARSE=always
 * takes every product with alpha 1 and beta 0 or 1, of any size, never
 * none); returns whether it did. The
 * choice depends on the operands' values and sizes only, never on the
 * thread count, and so does the sparse result. */
static bool sparse_try(cpu_t *cp, const gemm_t *g) {
    if (cp->sparse < 0 || g->alpha != 1.0f || (g->beta != 0.0f && g->beta != 1.0f) ||
        g->k <= 0 || (cp->sparse == 0 && (long)g->m * g->n * g->k < SPARSE_MIN_MACS))
        return false;
    double da = sl_nn_spgemm_density(g->a, g->ta ? g->k : g->m, g->ta ? g->m : g->k, g->lda);
    double db = sl_nn_spgemm_density(g->b, g->tb ? g->n : g->k, g->tb ? g->k : g->n, g->ldb);
    sl_nn_spgemm_t j = {.accumulate = g->beta != 0.0f, .o = g->c, .ldo = g->ldc};
    double density;
    if (da <= db) { /* C = op(A) op(B), A sparse */
        j.M = g->m, j.N = g->n, j.K = g->k;
        j.s = g->a, j.lds = g->lda, j.s_trans = g->ta;
        j.d = g->b, j.ldd = g->ldb, j.d_trans = g->tb;
        j.o_trans = false;
        density = da;
    } else { /* C^T = op(B)^T op(A)^T, B sparse */
        j.M = g->n, j.N = g->m, j.K = g->k;
        j.s = g->b, j.lds = g->ldb, j.s_trans = !g->tb;
        j.d = g->a, j.ldd = g->lda, j.d_trans = !g->ta;
        j.o_trans = true;
        density = db;
    }
    if (cp->sparse == 0 && !sl_nn_spgemm_worth(j.M, j.N, j.K, j.s_trans, j.d_trans, j.o_trans,
                                                   density, cp->dense_rate))
        return false;
    size_t len = sl_nn_spgemm_scratch_len(j.M, j.N, j.K, j.d_trans);
    if (len > cp->sparse_len) {
        void *p = aligned_alloc(64, (len + 63) & ~(size_t)63);
        if (!p)
            return false; /* the dense product needs no memory */
        free(cp->sparse_scratch);
        cp->sparse_scratch = p;
        cp->sparse_len = len;
    }
    j.scratch = cp->sparse_scratch;
    if (cp->threads > 1) {
        sparse_job_t job = {cp, &j};
        run_parts(cp, sparse_part, &job);
    } else {
        sl_nn_spgemm_prepare(&j, 0, 1);
        sl_nn_spgemm_compute(&j, 0, 1);
    }
    return true;
}

static sl_err cpu_sgemm(void *self, bool ta, bool tb, int m, int n, int k, float alpha,
                        const float *a, int lda, const float *b, int ldb, float beta, float *c,
                        int ldc) {
    if (m <= 0 || n <= 0)
        return SL_OK;
    cpu_t *cp = self;
    gemm_t g = {ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc};
    if (sparse_try(cp, &g))
        return SL_OK;
    if (k >= KSPLIT_MIN_K && (long)m * n <= KSPLIT_MAX_OUT) {
        ksplit_run(cp, &g);
        return SL_OK;
    }
    int parts = cp->threads;
    bool by_cols = n >= m;
    int len = by_cols ? n : m;
    if (parts < 2 || (long)m * n * k < SPLIT_MIN_MACS || len < 32 * parts) {
        gemm_run(&g);
        return SL_OK;
    }
    /* Blocks of whole 16s (the kernels' tile edge); the last takes the rest. */
    int step = (len / parts + 15) / 16 * 16;
    for (int i = 0; i < parts; i++) {
        int lo = i * step < len ? i * step : len;
        int hi = i == parts - 1 || (i + 1) * step > len ? len : (i + 1) * step;
        gemm_t *p = &cp->part[i];
        *p = g;
        if (by_cols) {
            p->n = hi - lo;
            p->b = tb ? b + (size_t)lo * ldb : b + lo;
            p->c = c + lo;
        } else {
            p->m = hi - lo;
            p->a = ta ? a + lo : a + (size_t)lo * lda;
            p->c = c + (size_t)lo * ldc;
        }
    }
    run_parts(cp, gemm_part, cp);
    return SL_OK;
}

SL_VEC static sl_err cpu_axpby(void *self, size_t count, float alpha, const float *restrict x,
                               float beta, float *restrict y) {
    for (size_t i = 0; i < count; i++)
        y[i] = alpha * x[i] + beta * y[i];
    return SL_OK;
}

/* ---- element-wise ops split over the pool ----
 *
 * Each op below cuts its work into one contiguous slice per thread (rows,
 * channels or elements); no sum is split, so the result is the same for
 * any thread count. Work under SPLIT_MIN_ELEMS stays on the caller, and
 * so does all of it while the pool sleeps between jobs (waking a helper
 * costs more than these few microseconds of work). */
#define SPLIT_MIN_ELEMS (1L << 14)

static bool want_split(cpu_t *cp, long elems, long units) {
    if (cp->threads < 2 || elems < SPLIT_MIN_ELEMS || units < 2 * cp->threads)
        return false;
    probe_load(cp);
    return atomic_load(&cp->may_spin);
}

/* Slice `part` of `parts` of [0, n), boundaries rounded to `align`. */
static void slice(long n, int part, int parts, long align, long *lo, long *hi) {
    long step = (n / parts + align - 1) / align * align;
    *lo = part * step < n ? part * step : n;
    *hi = part == parts - 1 || (part + 1) * step > n ? n : (part + 1) * step;
}

SL_VEC static void gather_u8_rows(float *restrict dst, const uint8_t *restrict src,
                                  const int32_t *idx, size_t first, int rows, int cols,
                                  float scale, float shift) {
    for (int r = 0; r < rows; r++) {
        size_t row = idx ? (size_t)idx[first + r] : first + r;
        const uint8_t *s = src + row * cols;
        float *d = dst + (size_t)r * cols;
        for (int c = 0; c < cols; c++)
            d[c] = sl_op_convert((float)s[c], scale, shift);
    }
}

SL_VEC static void gather_f32_rows(float *restrict dst, const float *restrict src,
                                   const int32_t *idx, size_t first, int rows, int cols,
                                   float scale, float shift) {
    for (int r = 0; r < rows; r++) {
        size_t row = idx ? (size_t)idx[first + r] : first + r;
        const float *s = src + row * cols;
        float *d = dst + (size_t)r * cols;
        for (int c = 0; c < cols; c++)
            d[c] = sl_op_convert(s[c], scale, shift);
    }
}

typedef struct {
    float *dst;
    const void *src; /* uint8_t or float */
    bool u8;
    const int32_t *idx;
    size_t first;
    int rows, cols;
    float scale, shift;
} gather_job_t;

static void gather_part(void *arg, int part, int parts) {
    const gather_job_t *j = arg;
    long lo, hi;
    slice(j->rows, part, parts, 1, &lo, &hi);
    float *dst = j->dst + lo * j->cols;
    if (j->u8)
        gather_u8_rows(dst, j->src, j->idx, j->first + lo, (int)(hi - lo), j->cols, j->scale,
                       j->shift);
    else
        gather_f32_rows(dst, j->src, j->idx, j->first + lo, (int)(hi - lo), j->cols, j->scale,
                        j->shift);
}

static sl_err gather_run(cpu_t *cp, gather_job_t *j) {
    if (want_split(cp, (long)j->rows * j->cols, j->rows))
        run_parts(cp, gather_part, j);
    else
        gather_part(j, 0, 1);
    return SL_OK;
}

static sl_err cpu_gather_u8(void *self, float *dst, const uint8_t *src, const int32_t *idx,
                            size_t first, int rows, int cols, float scale, float shift) {
    gather_job_t j = {dst, src, true, idx, first, rows, cols, scale, shift};
    return gather_run(self, &j);
}

static sl_err cpu_gather_f32(void *self, float *dst, const float *src, const int32_t *idx,
                             size_t first, int rows, int cols, float scale, float shift) {
    gather_job_t j = {dst, src, false, idx, first, rows, cols, scale, shift};
    return gather_run(self, &j);
}

static sl_err cpu_gather_i32(void *self, int32_t *dst, const int32_t *src, const int32_t *idx,
                             size_t first, int rows) {
    for (int r = 0; r < rows; r++)
        dst[r] = src[idx ? (size_t)idx[first + r] : first + r];
    return SL_OK;
}

static sl_err cpu_swap_axes(void *self, float *restrict dst, const float *restrict src, int a,
                            int b, int inner) {
    for (int i = 0; i < a; i++)
        for (int j = 0; j < b; j++)
            memcpy(dst + ((size_t)j * a + i) * inner, src + ((size_t)i * b + j) * inner,
                   (size_t)inner * sizeof *dst);
    return SL_OK;
}

/* ---- fused bias + activation ---- */

static inline void bias_act_run(float *restrict y, float bias, size_t n, const int act) {
    for (size_t i = 0; i < n; i++)
        y[i] = sl_op_act(y[i] + bias, act);
}

static inline void bias_act_rows(float *restrict y, const float *restrict bias, int cols,
                                 const int act) {
    if (bias)
        for (int c = 0; c < cols; c++)
            y[c] = sl_op_act(y[c] + bias[c], act);
    else
        for (int c = 0; c < cols; c++)
            y[c] = sl_op_act(y[c], act);
}

/* Rows [o0, o1) and channels [c0, c1) of the [outer][channels][inner] view. */
SL_VEC static void bias_act_fwd_range(float *y, const float *bias, int channels, int inner,
                                      sl_nn_act act, long o0, long o1, long c0, long c1) {
    for (long o = o0; o < o1; o++) {
        float *yo = y + (size_t)o * channels * inner;
        if (inner == 1) {
            if (act == SL_NN_ACT_RELU)
                bias_act_rows(yo + c0, bias ? bias + c0 : NULL, (int)(c1 - c0), SL_NN_ACT_RELU);
            else
                bias_act_rows(yo + c0, bias ? bias + c0 : NULL, (int)(c1 - c0), SL_NN_ACT_NONE);
            continue;
        }
        for (long c = c0; c < c1; c++) {
            float b = bias ? bias[c] : 0.0f;
            float *p = yo + (size_t)c * inner;
            if (act == SL_NN_ACT_RELU)
                bias_act_run(p, b, (size_t)inner, SL_NN_ACT_RELU);
            else if (bias)
                bias_act_run(p, b, (size_t)inner, SL_NN_ACT_NONE);
        }
    }
}

typedef struct {
    float *dy;          /* bwd: gradient (in place); fwd: unused */
    float *y;           /* fwd: output (in place); bwd: forward output */
    const float *bias;  /* fwd */
    float *dbias;       /* bwd */
    int outer, channels, inner;
    sl_nn_act act;
} bias_job_t;

/* Forward: by rows when there are several (dense), else by channels. */
static void bias_fwd_part(void *arg, int part, int parts) {
    const bias_job_t *j = arg;
    long lo, hi;
    if (j->outer > 1) {
        slice(j->outer, part, parts, 1, &lo, &hi);
        bias_act_fwd_range(j->y, j->bias, j->channels, j->inner, j->act, lo, hi, 0, j->channels);
    } else {
        slice(j->channels, part, parts, 1, &lo, &hi);
        bias_act_fwd_range(j->y, j->bias, j->channels, j->inner, j->act, 0, j->outer, lo, hi);
    }
}

static sl_err cpu_bias_act_fwd(void *self, float *y, const float *bias, int outer, int channels,
                               int inner, sl_nn_act act) {
    bias_job_t j = {NULL, y, bias, NULL, outer, channels, inner, act};
    if (want_split(self, (long)outer * channels * inner, outer > 1 ? outer : channels))
        run_parts(self, bias_fwd_part, &j);
    else
        bias_fwd_part(&j, 0, 1);
    return SL_OK;
}

/* Sum of n floats with 16 fixed partial sums (vectorisable, deterministic). */
static inline float sum16(const float *restrict p, size_t n) {
    float acc[16] = {0};
    size_t i = 0;
    for (; i + 16 <= n; i += 16)
        for (int k = 0; k < 16; k++)
            acc[k] += p[i + k];
    float s = 0.0f;
    for (; i < n; i++)
        s += p[i];
    for (int k = 0; k < 16; k++)
        s += acc[k];
    return s;
}

static inline void act_grad_run(float *restrict dy, const float *restrict y, size_t n,
                                const int act) {
    for (size_t i = 0; i < n; i++)
        dy[i] = sl_op_act_grad(y[i], dy[i], act);
}

/* Channels [c0, c1) of the backward: each dbias[c] sums over rows in the
 * same order whatever the slice, so splitting by channels is exact. */
SL_VEC static void bias_act_bwd_range(float *dy, const float *y, float *dbias, int outer,
                                      int channels, int inner, sl_nn_act act, long c0,
                                      long c1) {
    if (dbias)
        memset(dbias + c0, 0, (size_t)(c1 - c0) * sizeof *dbias);
    for (int o = 0; o < outer; o++) {
        size_t base = (size_t)o * channels * inner;
        if (inner == 1) {
            float *restrict d = dy + base;
            const float *restrict yy = y + base;
            if (act == SL_NN_ACT_RELU)
                act_grad_run(d + c0, yy + c0, (size_t)(c1 - c0), SL_NN_ACT_RELU);
            if (dbias)
                for (long c = c0; c < c1; c++)
                    dbias[c] += d[c];
            continue;
        }
        for (long c = c0; c < c1; c++) {
            float *d = dy + base + (size_t)c * inner;
            if (act == SL_NN_ACT_RELU)
                act_grad_run(d, y + base + (size_t)c * inner, (size_t)inner, SL_NN_ACT_RELU);
            if (dbias)
                dbias[c] += sum16(d, (size_t)inner);
        }
    }
}

static void bias_bwd_part(void *arg, int part, int parts) {
    const bias_job_t *j = arg;
    long lo, hi;
    /* Dense rows are short: slices of 16 channels keep the loops vectorised. */
    slice(j->channels, part, parts, j->inner == 1 ? 16 : 1, &lo, &hi);
    bias_act_bwd_range(j->dy, j->y, j->dbias, j->outer, j->channels, j->inner, j->act, lo, hi);
}

static sl_err cpu_bias_act_bwd(void *self, float *dy, const float *y, float *dbias, int outer,
                               int channels, int inner, sl_nn_act act) {
    bias_job_t j = {dy, (float *)y, NULL, dbias, outer, channels, inner, act};
    if (want_split(self, (long)outer * channels * inner, channels))
        run_parts(self, bias_bwd_part, &j);
    else
        bias_bwd_part(&j, 0, 1);
    return SL_OK;
}

/* ---- im2col / col2im ---- */

/* The valid output-column range [lo, hi) for kernel column j (x = ox *
 * stride - pad + j must lie in [0, w)). */
static inline void valid_range(const sl_nn_window_t *win, int j, int *lo, int *hi) {
    int s = win->stride;
    int l = win->pad - j > 0 ? (win->pad - j + s - 1) / s : 0;
    int h = (win->w + win->pad - j + s - 1) / s;
    if (h > win->out_w)
        h = win->out_w;
    if (l > h)
        l = h;
    *lo = l;
    *hi = h;
}

/* The window ops below work on the samples [n0, n1) of the batch, so that
 * a backend with several threads can give each a slice: every sample's
 * columns and planes are its own (no sums cross samples), so the result
 * is the same for any split. */

/* im2col rows for stride 1 and no padding: every window row is a plain
 * copy of `OW` floats; OW a constant lets the copy become vector moves. */
#define IM2COL_DENSE(OW)                                                                   \
    for (int c = 0; c < win->channels; c++)                                                \
        for (int i = 0; i < win->kh; i++)                                                  \
            for (int j = 0; j < win->kw; j++) {                                            \
                float *restrict d =                                                        \
                    col + ((long)(c * win->kh + i) * win->kw + j) * ncols + n0 * ohw;      \
                for (int n = n0; n < n1; n++) {                                            \
                    const float *restrict s =                                              \
                        x + sl_op_plane(win, c, n, hw) + (long)i * win->w + j;             \
                    for (int oy = 0; oy < win->out_h; oy++, d += (OW), s += win->w)         \
                        for (int ox = 0; ox < (OW); ox++)                                  \
                            d[ox] = s[ox];                                                 \
                }                                                                          \
            }

SL_VEC static void im2col_range(const float *x, float *col, const sl_nn_window_t *win, long n0,
                                long n1) {
    const long hw = (long)win->h * win->w, ohw = (long)win->out_h * win->out_w;
    const long ncols = ohw * win->batch;
    if (win->stride == 1 && win->pad == 0) {
        switch (win->out_w) {
        case 8:
            IM2COL_DENSE(8);
            return;
        case 16:
            IM2COL_DENSE(16);
            return;
        case 24:
            IM2COL_DENSE(24);
            return;
        default:
            IM2COL_DENSE(win->out_w);
            return;
        }
    }
    for (int c = 0; c < win->channels; c++)
        for (int i = 0; i < win->kh; i++)
            for (int j = 0; j < win->kw; j++) {
                float *dst = col + ((long)(c * win->kh + i) * win->kw + j) * ncols;
                int lo, hi;
                valid_range(win, j, &lo, &hi);
                for (long n = n0; n < n1; n++) {
                    const float *plane = x + sl_op_plane(win, c, (int)n, hw);
                    float *dn = dst + n * ohw;
                    for (int oy = 0; oy < win->out_h; oy++) {
                        float *restrict d = dn + (long)oy * win->out_w;
                        int y = oy * win->stride - win->pad + i;
                        if (y < 0 || y >= win->h) {
                            memset(d, 0, (size_t)win->out_w * sizeof *d);
                            continue;
                        }
                        const float *restrict src = plane + (long)y * win->w - win->pad + j;
                        for (int ox = 0; ox < lo; ox++)
                            d[ox] = 0.0f;
                        if (win->stride == 1)
                            for (int ox = lo; ox < hi; ox++)
                                d[ox] = src[ox];
                        else
                            for (int ox = lo; ox < hi; ox++)
                                d[ox] = src[(long)ox * win->stride];
                        for (int ox = hi; ox < win->out_w; ox++)
                            d[ox] = 0.0f;
                    }
                }
            }
}

/* col2im for stride 1 and no padding (see IM2COL_DENSE). */
#define COL2IM_DENSE(OW)                                                                   \
    for (int c = 0; c < win->channels; c++)                                                \
        for (int i = 0; i < win->kh; i++)                                                  \
            for (int j = 0; j < win->kw; j++) {                                            \
                const float *restrict s =                                                  \
                    col + ((long)(c * win->kh + i) * win->kw + j) * ncols + n0 * ohw;      \
                for (int n = n0; n < n1; n++) {                                            \
                    float *restrict d =                                                    \
                        dx + sl_op_plane(win, c, n, hw) + (long)i * win->w + j;            \
                    for (int oy = 0; oy < win->out_h; oy++, s += (OW), d += win->w)         \
                        for (int ox = 0; ox < (OW); ox++)                                  \
                            d[ox] += s[ox];                                                \
                }                                                                          \
            }

SL_VEC static void col2im_range(const float *col, float *dx, const sl_nn_window_t *win, long n0,
                                long n1) {
    const long hw = (long)win->h * win->w, ohw = (long)win->out_h * win->out_w;
    const long ncols = ohw * win->batch;
    for (int c = 0; c < win->channels; c++)
        for (long n = n0; n < n1; n++)
            memset(dx + sl_op_plane(win, c, (int)n, hw), 0, (size_t)hw * sizeof *dx);
    if (win->stride == 1 && win->pad == 0) {
        switch (win->out_w) {
        case 8:
            COL2IM_DENSE(8);
            return;
        case 16:
            COL2IM_DENSE(16);
            return;
        case 24:
            COL2IM_DENSE(24);
            return;
        default:
            COL2IM_DENSE(win->out_w);
            return;
        }
    }
    for (int c = 0; c < win->channels; c++)
        for (int i = 0; i < win->kh; i++)
            for (int j = 0; j < win->kw; j++) {
                const float *srcrow = col + ((long)(c * win->kh + i) * win->kw + j) * ncols;
                int lo, hi;
                valid_range(win, j, &lo, &hi);
                for (long n = n0; n < n1; n++) {
                    float *plane = dx + sl_op_plane(win, c, (int)n, hw);
                    const float *sn = srcrow + n * ohw;
                    for (int oy = 0; oy < win->out_h; oy++) {
                        int y = oy * win->stride - win->pad + i;
                        if (y < 0 || y >= win->h)
                            continue;
                        const float *restrict s = sn + (long)oy * win->out_w;
                        float *restrict d = plane + (long)y * win->w - win->pad + j;
                        if (win->stride == 1)
                            for (int ox = lo; ox < hi; ox++)
                                d[ox] += s[ox];
                        else
                            for (int ox = lo; ox < hi; ox++)
                                d[(long)ox * win->stride] += s[ox];
                    }
                }
            }
}

/* ---- max-pool ---- */

/* One output row of a 2x2 stride-2 pool, branch-free (first max wins). */
static inline void pool2_row(const float *restrict r0, int w, int32_t base, float *restrict y,
                             int32_t *restrict arg, int out_w) {
    const float *restrict r1 = r0 + w;
    for (int ox = 0; ox < out_w; ox++) {
        float a = r0[2 * ox], b = r0[2 * ox + 1], c = r1[2 * ox], d = r1[2 * ox + 1];
        int32_t at = base + 2 * ox;
        float m = a;
        int32_t i = at;
        i = b > m ? at + 1 : i;
        m = b > m ? b : m;
        i = c > m ? at + w : i;
        m = c > m ? c : m;
        i = d > m ? at + w + 1 : i;
        m = d > m ? d : m;
        y[ox] = m;
        arg[ox] = i;
    }
}

SL_VEC static void maxpool_fwd_range(const float *x, float *y, int32_t *argmax,
                                     const sl_nn_window_t *win, long n0, long n1) {
    const long hw = (long)win->h * win->w, ohw = (long)win->out_h * win->out_w;
    const bool fast = win->kh == 2 && win->kw == 2 && win->stride == 2 && win->pad == 0;
    for (int c = 0; c < win->channels; c++)
        for (long n = n0; n < n1; n++) {
            const float *plane = x + sl_op_plane(win, c, (int)n, hw);
            long ob = sl_op_plane(win, c, (int)n, ohw);
            float *yo = y + ob;
            int32_t *ao = argmax + ob;
            if (fast) {
                for (int oy = 0; oy < win->out_h; oy++)
                    pool2_row(plane + (long)(2 * oy) * win->w, win->w, 2 * oy * win->w,
                              yo + (long)oy * win->out_w, ao + (long)oy * win->out_w,
                              win->out_w);
                continue;
            }
            for (int oy = 0; oy < win->out_h; oy++)
                for (int ox = 0; ox < win->out_w; ox++) {
                    int k = oy * win->out_w + ox;
                    yo[k] = sl_op_maxpool_at(plane, win, oy, ox, &ao[k]);
                }
        }
}

static void maxpool_bwd_range(const float *dy, const int32_t *argmax, float *dx,
                              const sl_nn_window_t *win, long n0, long n1) {
    const long hw = (long)win->h * win->w, ohw = (long)win->out_h * win->out_w;
    for (int c = 0; c < win->channels; c++)
        for (long n = n0; n < n1; n++) {
            float *plane = dx + sl_op_plane(win, c, (int)n, hw);
            long ob = sl_op_plane(win, c, (int)n, ohw);
            memset(plane, 0, (size_t)hw * sizeof *plane);
            for (long k = 0; k < ohw; k++)
                plane[argmax[ob + k]] += dy[ob + k];
        }
}

/* One window op over a slice of the batch per thread. */
typedef enum { WIN_IM2COL, WIN_COL2IM, WIN_POOL_FWD, WIN_POOL_BWD } win_op;

typedef struct {
    win_op op;
    const float *in;            /* x, col, x, dy */
    float *out;                 /* col, dx, y, dx */
    int32_t *argmax;            /* pooling */
    const sl_nn_window_t *win;
} win_job_t;

static void win_part(void *arg, int part, int parts) {
    const win_job_t *j = arg;
    long b = j->win->batch, n0 = b * part / parts, n1 = b * (part + 1) / parts;
    switch (j->op) {
    case WIN_IM2COL:
        im2col_range(j->in, j->out, j->win, n0, n1);
        break;
    case WIN_COL2IM:
        col2im_range(j->in, j->out, j->win, n0, n1);
        break;
    case WIN_POOL_FWD:
        maxpool_fwd_range(j->in, j->out, j->argmax, j->win, n0, n1);
        break;
    case WIN_POOL_BWD:
        maxpool_bwd_range(j->in, j->argmax, j->out, j->win, n0, n1);
        break;
    }
}

/* Window ops touching fewer floats than this run on the caller alone (a
 * hand-off costs a few microseconds). */
#define SPLIT_MIN_FLOATS (1L << 15)

static void win_run(cpu_t *cp, const win_job_t *j, long floats) {
    if (cp->threads < 2 || j->win->batch < 2 * cp->threads || floats < SPLIT_MIN_FLOATS)
        win_part((void *)j, 0, 1);
    else
        run_parts(cp, win_part, (void *)j);
}

static sl_err cpu_im2col(void *self, const float *x, float *col, const sl_nn_window_t *win) {
    win_job_t j = {WIN_IM2COL, x, col, NULL, win};
    win_run(self, &j, (long)win->channels * win->kh * win->kw * win->out_h * win->out_w * win->batch);
    return SL_OK;
}

static sl_err cpu_col2im(void *self, const float *col, float *dx, const sl_nn_window_t *win) {
    win_job_t j = {WIN_COL2IM, col, dx, NULL, win};
    win_run(self, &j, (long)win->channels * win->kh * win->kw * win->out_h * win->out_w * win->batch);
    return SL_OK;
}

static sl_err cpu_maxpool_fwd(void *self, const float *x, float *y, int32_t *argmax,
                              const sl_nn_window_t *win) {
    win_job_t j = {WIN_POOL_FWD, x, y, argmax, win};
    win_run(self, &j, (long)win->channels * win->h * win->w * win->batch);
    return SL_OK;
}

static sl_err cpu_maxpool_bwd(void *self, const float *dy, const int32_t *argmax, float *dx,
                              const sl_nn_window_t *win) {
    win_job_t j = {WIN_POOL_BWD, dy, dx, (int32_t *)argmax, win};
    win_run(self, &j, (long)win->channels * win->h * win->w * win->batch);
    return SL_OK;
}

/* ---- batch norm ---- */

SL_VEC static sl_err cpu_batchnorm_fwd(void *self, const float *x, float *y, const float *gamma,
                                       const float *beta, float *running_mean,
                                       float *running_var, float *save_mean, float *save_invstd,
                                       int outer, int channels, int inner, float momentum,
                                       float eps, bool training) {
    const size_t stride = (size_t)channels * inner;
    const double m = (double)outer * inner;
    for (int c = 0; c < channels; c++) {
        float mean, invstd;
        if (training) {
            double s = 0.0;
            for (int o = 0; o < outer; o++)
                s += sum16(x + o * stride + (size_t)c * inner, (size_t)inner);
            mean = (float)(s / m);
            double v = 0.0;
            for (int o = 0; o < outer; o++) {
                const float *p = x + o * stride + (size_t)c * inner;
                float acc[16] = {0};
                int i = 0;
                for (; i + 16 <= inner; i += 16)
                    for (int k = 0; k < 16; k++) {
                        float d = p[i + k] - mean;
                        acc[k] += d * d;
                    }
                for (; i < inner; i++) {
                    float d = p[i] - mean;
                    v += (double)d * d;
                }
                for (int k = 0; k < 16; k++)
                    v += acc[k];
            }
            float var = (float)(v / m);
            invstd = sl_op_bn_invstd(var, eps);
            save_mean[c] = mean;
            save_invstd[c] = invstd;
            float unbiased = m > 1 ? (float)(v / (m - 1)) : var;
            running_mean[c] = sl_op_ema(running_mean[c], mean, momentum);
            running_var[c] = sl_op_ema(running_var[c], unbiased, momentum);
        } else {
            mean = running_mean[c];
            invstd = sl_op_bn_invstd(running_var[c], eps);
        }
        float g = gamma[c], b = beta[c];
        for (int o = 0; o < outer; o++) {
            const float *restrict p = x + o * stride + (size_t)c * inner;
            float *restrict q = y + o * stride + (size_t)c * inner;
            for (int i = 0; i < inner; i++)
                q[i] = sl_op_bn_fwd(p[i], mean, invstd, g, b);
        }
    }
    return SL_OK;
}

SL_VEC static sl_err cpu_batchnorm_bwd(void *self, const float *dy, const float *x,
                                       const float *gamma, const float *save_mean,
                                       const float *save_invstd, float *dx, float *dgamma,
                                       float *dbeta, int outer, int channels, int inner) {
    const size_t stride = (size_t)channels * inner;
    const double m = (double)outer * inner;
    for (int c = 0; c < channels; c++) {
        float mean = save_mean[c], invstd = save_invstd[c];
        double sdy = 0.0, sdyx = 0.0;
        for (int o = 0; o < outer; o++) {
            const float *pd = dy + o * stride + (size_t)c * inner;
            const float *px = x + o * stride + (size_t)c * inner;
            float a1[16] = {0}, a2[16] = {0};
            int i = 0;
            for (; i + 16 <= inner; i += 16)
                for (int k = 0; k < 16; k++) {
                    a1[k] += pd[i + k];
                    a2[k] += pd[i + k] * ((px[i + k] - mean) * invstd);
                }
            for (; i < inner; i++) {
                sdy += pd[i];
                sdyx += (double)pd[i] * ((px[i] - mean) * invstd);
            }
            for (int k = 0; k < 16; k++) {
                sdy += a1[k];
                sdyx += a2[k];
            }
        }
        dgamma[c] = (float)sdyx;
        dbeta[c] = (float)sdy;
        float mdy = (float)(sdy / m), mdyx = (float)(sdyx / m), g = gamma[c];
        for (int o = 0; o < outer; o++) {
            const float *pd = dy + o * stride + (size_t)c * inner;
            const float *px = x + o * stride + (size_t)c * inner;
            float *q = dx + o * stride + (size_t)c * inner;
            for (int i = 0; i < inner; i++)
                q[i] = sl_op_bn_bwd(pd[i], px[i], mean, invstd, g, mdy, mdyx);
        }
    }
    return SL_OK;
}

/* ---- dropout, loss, optimizer, reductions ---- */

SL_VEC static sl_err cpu_dropout(void *self, const float *x, float *y, size_t count, float p,
                                 uint64_t seed) {
    for (size_t i = 0; i < count; i++)
        y[i] = sl_op_dropout(x[i], seed, i, p);
    return SL_OK;
}

static sl_err cpu_softmax_xent(void *self, const float *logits, const int32_t *labels, int rows,
                               int classes, float *dlogits, float grad_scale, double *acc) {
    double loss = 0.0;
    long correct = 0;
    for (int r = 0; r < rows; r++) {
        int ok;
        loss += sl_op_xent_row(logits + (size_t)r * classes, classes, labels[r],
                               dlogits ? dlogits + (size_t)r * classes : NULL, grad_scale, &ok);
        correct += ok;
    }
    acc[0] += loss;
    acc[1] += (double)correct;
    return SL_OK;
}

static sl_err cpu_zero_acc(void *self, double *acc, int count) {
    for (int i = 0; i < count; i++)
        acc[i] = 0.0;
    return SL_OK;
}

/* One loop per rule, so each is a straight vectorisable loop. */
#define OPT_LOOP(KIND)                                                                   \
    do {                                                                                 \
        sl_nn_opt_step_t s = *step;                                                      \
        s.kind = KIND;                                                                   \
        for (size_t i = 0; i < count; i++)                                               \
            sl_op_opt(&w[i], g[i], &s1[i], s2 ? &s2[i] : &s1[i], &s);                    \
    } while (0)

SL_VEC static void opt_step_range(float *restrict w, const float *restrict g,
                                  float *restrict s1, float *restrict s2, size_t count,
                                  const sl_nn_opt_step_t *step) {
    switch (step->kind) {
    case SL_NN_OPT_SGD:
        OPT_LOOP(SL_NN_OPT_SGD);
        break;
    case SL_NN_OPT_NESTEROV:
        OPT_LOOP(SL_NN_OPT_NESTEROV);
        break;
    case SL_NN_OPT_ADAM:
        OPT_LOOP(SL_NN_OPT_ADAM);
        break;
    case SL_NN_OPT_ADAMW:
        OPT_LOOP(SL_NN_OPT_ADAMW);
        break;
    }
}

typedef struct {
    float *w;
    const float *g;
    float *s1, *s2;
    size_t count;
    const sl_nn_opt_step_t *step;
} opt_job_t;

static void opt_part(void *arg, int part, int parts) {
    const opt_job_t *j = arg;
    long lo, hi;
    slice((long)j->count, part, parts, 16, &lo, &hi);
    opt_step_range(j->w + lo, j->g + lo, j->s1 + lo, j->s2 ? j->s2 + lo : NULL,
                   (size_t)(hi - lo), j->step);
}

static sl_err cpu_opt_step(void *self, float *w, const float *g, float *s1, float *s2,
                           size_t count, const sl_nn_opt_step_t *step) {
    if (step->kind != SL_NN_OPT_SGD && step->kind != SL_NN_OPT_NESTEROV &&
        step->kind != SL_NN_OPT_ADAM && step->kind != SL_NN_OPT_ADAMW)
        return SL_EINVAL;
    if ((step->kind == SL_NN_OPT_ADAM || step->kind == SL_NN_OPT_ADAMW) && !s2)
        return SL_EINVAL;
    opt_job_t j = {w, g, s1, s2, count, step};
    if (want_split(self, (long)count, (long)count / 16))
        run_parts(self, opt_part, &j);
    else
        opt_part(&j, 0, 1);
    return SL_OK;
}

static sl_err cpu_sum_squares(void *self, const float *x, size_t count, double *out) {
    double s = 0.0;
    for (size_t i = 0; i < count; i++)
        s += (double)x[i] * x[i];
    out[0] = s;
    return SL_OK;
}

const sl_nn_backend_ops_t sl_nn_backend_cpu = {
    .name = "cpu",
    .host_visible = true,
    .open = cpu_open,
    .close = cpu_close,
    .sync = cpu_sync,
    .alloc = cpu_alloc,
    .free = cpu_free,
    .upload = cpu_upload,
    .download = cpu_download,
    .copy = cpu_copy,
    .fill = cpu_fill,
    .sgemm = cpu_sgemm,
    .axpby = cpu_axpby,
    .gather_u8 = cpu_gather_u8,
    .gather_f32 = cpu_gather_f32,
    .gather_i32 = cpu_gather_i32,
    .swap_axes = cpu_swap_axes,
    .bias_act_fwd = cpu_bias_act_fwd,
    .bias_act_bwd = cpu_bias_act_bwd,
    .im2col = cpu_im2col,
    .col2im = cpu_col2im,
    .maxpool_fwd = cpu_maxpool_fwd,
    .maxpool_bwd = cpu_maxpool_bwd,
    .batchnorm_fwd = cpu_batchnorm_fwd,
    .batchnorm_bwd = cpu_batchnorm_bwd,
    .dropout = cpu_dropout,
    .softmax_xent = cpu_softmax_xent,
    .zero_acc = cpu_zero_acc,
    .opt_step = cpu_opt_step,
    .sum_squares = cpu_sum_squares,
    /* conv2 of cnn:32,64 in chunks of 9-10 samples (576-640 columns):
     * its three products took 140-144 us a sample against 148-154 at 20
     * (1280 columns) and 165+ at 16 or 32 (power-of-two columns: the
     * transposed stores of the sparse product alias in L1), single thread,
     * bench/results/train.md. */
    .im2col_chunk_len = 2u << 20,
};
