/* A CPU emulation of the NCCL calls Starling uses (src/nn/nccl_lazy.c),
 * for tests only: built as libnccl_emu.so and loaded through
 * STARLING_NCCL_LIB beside the CUDA emulator (emu.cc), whose "device
 * memory" is host memory, so that an elastic job's NCCL path (the unique
 * id, a nonblocking creation, the gradient all-reduce, an abort) runs
 * end to end on any machine, with the ranks in separate processes.
 *
 * The unique id carries a 127.0.0.1 TCP port: ncclGetUniqueId listens on
 * a port the kernel picks, and the communicator of rank 0 in the same
 * process (the one that made the id, as Starling's rank 0 does) accepts
 * the other ranks there. An all-reduce is a star: every rank sends its
 * buffer to rank 0, which sums them in rank order and sends the sum back,
 * so every rank gets the same bits. Each communicator has a thread that
 * does the work; the calls return at once (ncclInProgress) and
 * ncclCommGetAsyncError says when it is done, as for NCCL's nonblocking
 * communicators. A closed connection is ncclRemoteError; ncclCommAbort
 * shuts the sockets down, which ends whatever the thread waits for.
 *
 * NCCL_EMU_FAIL_INIT=1 makes every communicator's creation in this
 * process fail (ncclSystemError), as a member whose GPU or network NCCL
 * cannot use.
 *
 * What it does not emulate: streams (the work is done when
 * ncclCommGetAsyncError says ncclSuccess, and the stream is then idle),
 * data types other than float32, operations other than sum, and a
 * blocking communicator's collectives (init may be blocking). */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define EXPORT __attribute__((visibility("default")))
#define ID_LEN 128
#define MAGIC "slncclemu1"
#define MAX_RANKS 64
#define MAX_LISTENERS 16

typedef int ncclResult_t;
enum {
    ncclSuccess = 0,
    ncclSystemError = 2,
    ncclInternalError = 3,
    ncclInvalidArgument = 4,
    ncclInvalidUsage = 5,
    ncclRemoteError = 6,
    ncclInProgress = 7
};
typedef struct {
    char internal[ID_LEN];
} ncclUniqueId;
typedef struct {
    size_t size;
    unsigned int magic;
    unsigned int version;
    int blocking;
} config_head_t; /* the leading fields of every ncclConfig_t version */

/* What an id holds (at the start of its 128 bytes). */
typedef struct {
    char magic[10];  /* MAGIC */
    uint16_t port;   /* rank 0's listening port, host order */
    uint64_t nonce;  /* names the communicator */
} id_t_;

/* The listeners ncclGetUniqueId opened, until rank 0's communicator takes one. */
static pthread_mutex_t listeners_mu = PTHREAD_MUTEX_INITIALIZER;
static struct {
    uint64_t nonce; /* 0: free slot */
    int fd;         /* listening socket */
} listeners[MAX_LISTENERS];

enum { JOB_NONE, JOB_INIT, JOB_REDUCE };

struct ncclComm {
    pthread_mutex_t mu;       /* guards the fields down to `aborted` */
    pthread_cond_t cv;        /* a job was given, or abort */
    int job;                  /* JOB_* the thread should do (JOB_NONE: idle) */
    ncclResult_t state;       /* ncclInProgress while a job runs, else its outcome (kept
                                 once an error) */
    int aborted;              /* abort asked */
    char last[256];           /* the last error's text */
    /* The thread's own, below. */
    pthread_t thread;         /* the worker */
    int nranks, rank;         /* the communicator's shape */
    id_t_ id;                 /* its id */
    int listen_fd;            /* rank 0: the id's listener (-1 after init) */
    int fds[MAX_RANKS];       /* rank 0: a connection per rank (fds[0] unused); others: fds[0] */
    float *buf;               /* JOB_REDUCE: the buffer, summed in place */
    size_t count;             /* its floats */
    float *tmp;               /* rank 0: a received buffer */
    size_t tmp_count;         /* its floats */
};

static void set_state(struct ncclComm *c, ncclResult_t r, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void set_state(struct ncclComm *c, ncclResult_t r, const char *fmt, ...) {
    pthread_mutex_lock(&c->mu);
    if (c->state == ncclInProgress || c->state == ncclSuccess) {
        c->state = r;
        if (fmt) {
            va_list ap;
            va_start(ap, fmt);
            vsnprintf(c->last, sizeof c->last, fmt, ap);
            va_end(ap);
        }
    }
    c->job = JOB_NONE;
    pthread_mutex_unlock(&c->mu);
}

static int aborted(struct ncclComm *c) {
    pthread_mutex_lock(&c->mu);
    int a = c->aborted;
    pthread_mutex_unlock(&c->mu);
    return a;
}

/* Waits until fd is ready for `events`, checking for an abort every 50 ms. */
static int wait_fd(struct ncclComm *c, int fd, short events) {
    for (;;) {
        if (aborted(c))
            return -1;
        struct pollfd p = {.fd = fd, .events = events};
        int n = poll(&p, 1, 50);
        if (n > 0)
            return 0;
        if (n < 0 && errno != EINTR)
            return -1;
    }
}

static int send_all(struct ncclComm *c, int fd, const void *p, size_t len) {
    const char *b = p;
    while (len) {
        if (wait_fd(c, fd, POLLOUT) != 0)
            return -1;
        ssize_t n = send(fd, b, len, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n < 0 && (errno == EAGAIN || errno == EINTR))
            continue;
        if (n <= 0)
            return -1;
        b += n;
        len -= (size_t)n;
    }
    return 0;
}

static int recv_all(struct ncclComm *c, int fd, void *p, size_t len) {
    char *b = p;
    while (len) {
        if (wait_fd(c, fd, POLLIN) != 0)
            return -1;
        ssize_t n = recv(fd, b, len, MSG_DONTWAIT);
        if (n < 0 && (errno == EAGAIN || errno == EINTR))
            continue;
        if (n <= 0)
            return -1;
        b += n;
        len -= (size_t)n;
    }
    return 0;
}

/* The greeting a rank sends rank 0 on connecting. */
typedef struct {
    uint64_t nonce;  /* the id's */
    uint32_t rank;   /* the sender's */
    uint32_t nranks; /* its communicator's size */
} hello_t;

static void do_init(struct ncclComm *c) {
    const char *fail = getenv("NCCL_EMU_FAIL_INIT");
    if (fail && *fail == '1') {
        set_state(c, ncclSystemError, "creation failed (NCCL_EMU_FAIL_INIT)");
        return;
    }
    if (c->rank == 0) {
        for (int got = 1; got < c->nranks;) {
            if (wait_fd(c, c->listen_fd, POLLIN) != 0) {
                set_state(c, ncclSystemError, "init aborted with %d of %d ranks", got, c->nranks);
                return;
            }
            int fd = accept(c->listen_fd, NULL, NULL);
            if (fd < 0)
                continue;
            hello_t h;
            if (recv_all(c, fd, &h, sizeof h) != 0 || h.nonce != c->id.nonce ||
                (int)h.nranks != c->nranks || h.rank == 0 || (int)h.rank >= c->nranks ||
                c->fds[h.rank] >= 0) {
                close(fd); /* a stranger, or a rank of another communicator */
                continue;
            }
            c->fds[h.rank] = fd;
            got++;
        }
        close(c->listen_fd);
        c->listen_fd = -1;
    } else {
        int fd = socket(AF_INET, SOCK_STREAM, 0);
        struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(c->id.port)};
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
            if (fd >= 0)
                close(fd);
            set_state(c, ncclRemoteError, "cannot reach rank 0 at 127.0.0.1:%u: %s",
                      c->id.port, strerror(errno));
            return;
        }
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        c->fds[0] = fd;
        hello_t h = {.nonce = c->id.nonce, .rank = (uint32_t)c->rank, .nranks = (uint32_t)c->nranks};
        if (send_all(c, fd, &h, sizeof h) != 0) {
            set_state(c, ncclRemoteError, "rank 0 closed the connection during init");
            return;
        }
    }
    set_state(c, ncclSuccess, NULL);
}

static void do_reduce(struct ncclComm *c) {
    size_t len = c->count * sizeof(float);
    if (c->rank == 0) {
        if (c->tmp_count < c->count) {
            free(c->tmp);
            c->tmp = malloc(len ? len : 1);
            c->tmp_count = c->tmp ? c->count : 0;
            if (!c->tmp) {
                set_state(c, ncclSystemError, "out of memory");
                return;
            }
        }
        for (int r = 1; r < c->nranks; r++) {
            if (recv_all(c, c->fds[r], c->tmp, len) != 0) {
                set_state(c, ncclRemoteError, "rank %d closed its connection", r);
                return;
            }
            for (size_t i = 0; i < c->count; i++)
                c->buf[i] += c->tmp[i];
        }
        for (int r = 1; r < c->nranks; r++)
            if (send_all(c, c->fds[r], c->buf, len) != 0) {
                set_state(c, ncclRemoteError, "rank %d closed its connection", r);
                return;
            }
    } else if (send_all(c, c->fds[0], c->buf, len) != 0 ||
               recv_all(c, c->fds[0], c->buf, len) != 0) {
        set_state(c, ncclRemoteError, "rank 0 closed its connection");
        return;
    }
    set_state(c, ncclSuccess, NULL);
}

static void *worker(void *arg) {
    struct ncclComm *c = arg;
    for (;;) {
        pthread_mutex_lock(&c->mu);
        while (!c->aborted && c->job == JOB_NONE)
            pthread_cond_wait(&c->cv, &c->mu);
        int job = c->aborted ? JOB_NONE : c->job;
        pthread_mutex_unlock(&c->mu);
        if (job == JOB_NONE)
            return NULL;
        if (job == JOB_INIT)
            do_init(c);
        else
            do_reduce(c);
    }
}

EXPORT ncclResult_t ncclGetVersion(int *version) {
    *version = 22809;
    return ncclSuccess;
}

EXPORT const char *ncclGetErrorString(ncclResult_t r) {
    switch (r) {
    case ncclSuccess: return "no error";
    case ncclSystemError: return "unhandled system error (emulated)";
    case ncclInternalError: return "internal error (emulated)";
    case ncclInvalidArgument: return "invalid argument (emulated)";
    case ncclInvalidUsage: return "invalid usage (emulated)";
    case ncclRemoteError: return "remote process exited or there was a network error (emulated)";
    case ncclInProgress: return "NCCL operation in progress";
    default: return "unknown result code";
    }
}

EXPORT const char *ncclGetLastError(struct ncclComm *c) { return c ? c->last : ""; }

EXPORT ncclResult_t ncclGetUniqueId(ncclUniqueId *out) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = 0};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t alen = sizeof a;
    if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof a) != 0 || listen(fd, MAX_RANKS) != 0 ||
        getsockname(fd, (struct sockaddr *)&a, &alen) != 0) {
        if (fd >= 0)
            close(fd);
        return ncclSystemError;
    }
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    id_t_ id = {.port = ntohs(a.sin_port)};
    memcpy(id.magic, MAGIC, sizeof id.magic);
    id.nonce = ((uint64_t)getpid() << 40) ^ (uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 20) ^
               ((uint64_t)(uintptr_t)&id);
    id.nonce |= 1; /* never 0, the free slot */
    pthread_mutex_lock(&listeners_mu);
    int slot = -1;
    for (int i = 0; i < MAX_LISTENERS && slot < 0; i++)
        if (listeners[i].nonce == 0)
            slot = i;
    if (slot >= 0) {
        listeners[slot].nonce = id.nonce;
        listeners[slot].fd = fd;
    }
    pthread_mutex_unlock(&listeners_mu);
    if (slot < 0) {
        close(fd);
        return ncclInternalError;
    }
    memset(out, 0, sizeof *out);
    memcpy(out->internal, &id, sizeof id);
    return ncclSuccess;
}

static void comm_free(struct ncclComm *c) {
    if (c->listen_fd >= 0)
        close(c->listen_fd);
    for (int i = 0; i < MAX_RANKS; i++)
        if (c->fds[i] >= 0)
            close(c->fds[i]);
    free(c->tmp);
    pthread_cond_destroy(&c->cv);
    pthread_mutex_destroy(&c->mu);
    free(c);
}

EXPORT ncclResult_t ncclCommInitRankConfig(struct ncclComm **out, int nranks, ncclUniqueId uid,
                                           int rank, void *config) {
    *out = NULL;
    id_t_ id;
    memcpy(&id, uid.internal, sizeof id);
    const config_head_t *cfg = config;
    if (memcmp(id.magic, MAGIC, sizeof id.magic) != 0 || nranks < 1 || nranks > MAX_RANKS ||
        rank < 0 || rank >= nranks || (cfg && cfg->magic != 0xcafebeefu))
        return ncclInvalidArgument;
    struct ncclComm *c = calloc(1, sizeof *c);
    if (!c)
        return ncclSystemError;
    pthread_mutex_init(&c->mu, NULL);
    pthread_cond_init(&c->cv, NULL);
    c->nranks = nranks;
    c->rank = rank;
    c->id = id;
    c->listen_fd = -1;
    for (int i = 0; i < MAX_RANKS; i++)
        c->fds[i] = -1;
    if (rank == 0) {
        pthread_mutex_lock(&listeners_mu);
        for (int i = 0; i < MAX_LISTENERS; i++)
            if (listeners[i].nonce == id.nonce) {
                c->listen_fd = listeners[i].fd;
                listeners[i].nonce = 0;
            }
        pthread_mutex_unlock(&listeners_mu);
        if (c->listen_fd < 0) { /* the id was made elsewhere, or used twice */
            comm_free(c);
            return ncclInvalidUsage;
        }
    }
    c->state = ncclInProgress;
    c->job = JOB_INIT;
    if (pthread_create(&c->thread, NULL, worker, c) != 0) {
        comm_free(c);
        return ncclSystemError;
    }
    *out = c;
    if (cfg && cfg->blocking == 0)
        return ncclInProgress;
    for (;;) { /* blocking: wait for the thread */
        pthread_mutex_lock(&c->mu);
        ncclResult_t s = c->state;
        pthread_mutex_unlock(&c->mu);
        if (s != ncclInProgress)
            return s;
        usleep(1000);
    }
}

EXPORT ncclResult_t ncclCommInitRank(struct ncclComm **out, int nranks, ncclUniqueId uid,
                                     int rank) {
    return ncclCommInitRankConfig(out, nranks, uid, rank, NULL);
}

EXPORT ncclResult_t ncclCommGetAsyncError(struct ncclComm *c, ncclResult_t *state) {
    if (!c)
        return ncclInvalidArgument;
    pthread_mutex_lock(&c->mu);
    *state = c->state;
    pthread_mutex_unlock(&c->mu);
    return ncclSuccess;
}

EXPORT ncclResult_t ncclAllReduce(const void *send, void *recv, size_t count, int dtype, int op,
                                  struct ncclComm *c, void *stream) {
    (void)stream;
    if (!c || dtype != 7 || op != 0 || (send != recv && count))
        return ncclInvalidArgument; /* float32 sum in place only */
    pthread_mutex_lock(&c->mu);
    ncclResult_t s = c->state;
    if (s == ncclSuccess) {
        c->buf = recv;
        c->count = count;
        c->state = ncclInProgress;
        c->job = JOB_REDUCE;
        pthread_cond_signal(&c->cv);
    }
    pthread_mutex_unlock(&c->mu);
    if (s == ncclInProgress)
        return ncclInvalidUsage; /* the last operation is not done */
    return s == ncclSuccess ? ncclInProgress : s;
}

EXPORT ncclResult_t ncclCommAbort(struct ncclComm *c) {
    if (!c)
        return ncclSuccess;
    pthread_mutex_lock(&c->mu);
    c->aborted = 1;
    pthread_cond_signal(&c->cv);
    pthread_mutex_unlock(&c->mu);
    pthread_join(c->thread, NULL);
    comm_free(c);
    return ncclSuccess;
}

EXPORT ncclResult_t ncclCommDestroy(struct ncclComm *c) { return ncclCommAbort(c); }
