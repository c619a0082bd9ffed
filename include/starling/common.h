/* Starling: what every module shares — error codes, logging, allocation.
 *
 * Errors: functions return sl_err (SL_OK = 0); outputs go through
 * out-parameters. Logging: sl_log(level, "STABLE-ID", fmt, ...) with syslog
 * levels and a pluggable sink. Allocation goes through a hook so tests can
 * fail the Nth allocation. */
#ifndef STARLING_COMMON_H
#define STARLING_COMMON_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    SL_OK = 0,
    SL_EINVAL,       /* invalid argument or configuration */
    SL_ENOMEM,       /* out of memory */
    SL_EPROTO,       /* malformed message or record */
    SL_ETOOBIG,      /* over a stated size, count or depth limit */
    SL_EVERSION,     /* unknown protocol or file version */
    SL_ETYPE,        /* unknown message type */
    SL_ETRUNC,       /* input ends early */
    SL_ENONCANON,    /* valid msgpack but not in the canonical profile */
    SL_EIO,          /* the operating system refused a read or write */
    SL_ENOTFOUND,    /* no such key, file, member or trial */
    SL_EEXIST,       /* already exists */
    SL_EAGAIN,       /* nothing now; try again later */
    SL_ETIMEDOUT,    /* a deadline passed */
    SL_ECORRUPT,     /* a checksum or hash does not match */
    SL_EAUTH,        /* authentication failed or key missing */
    SL_EUNSUPPORTED, /* not supported on this build or machine */
    SL_ECLOSED,      /* the object was closed or is shutting down */
    SL_EBUSY,        /* resource busy or over capacity */
    SL_ENODEV,       /* no device (GPU) available */
    SL_ERANGE,       /* a value is out of its allowed range */
    SL_ESTATE,       /* call not valid in the current state */
    SL_EINTERNAL,    /* a bug: an invariant failed */
    SL_ERR_COUNT
} sl_err;

/* A short, lower-case description of an error code. Never NULL. */
const char *sl_strerror(sl_err err);

/* Stable name of an error code ("SL_EPROTO"), for logs and test vectors. */
const char *sl_errname(sl_err err);

/* ---- Logging ---- */

enum {
    SL_LOG_ERR = 3,
    SL_LOG_WARNING = 4,
    SL_LOG_NOTICE = 5,
    SL_LOG_INFO = 6,
    SL_LOG_DEBUG = 7
};

/* A sink gets every message at or below the current level. `id` is a
 * stable identifier ("SWIM-SUSPECT") that tools can grep for. */
typedef void (*sl_log_sink_fn)(void *ctx, int level, const char *id, const char *msg);

/* Sets the sink (NULL restores the default: stderr with wall-clock time). */
void sl_log_set_sink(sl_log_sink_fn sink, void *ctx);
void sl_log_set_level(int level);
int sl_log_get_level(void);
void sl_log(int level, const char *id, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void sl_logv(int level, const char *id, const char *fmt, va_list ap);

/* A line that input can repeat (one per refused message, one per failed
 * write) is written at most once per interval, saying how many were left
 * out since: a flood of hostile messages costs no disk. Embed one limiter
 * per line; `now_ms` is the caller's clock (cores log on their own). */
typedef struct {
    uint64_t last_ms;  /* when the last line was written (0: never) */
    uint64_t left_out; /* lines not written since */
} sl_log_limit_t;

/* True when the line may be written now (the first ever, or `every_ms`
 * after the last); then `*left_out` is how many were left out since the
 * last one. False (and one more left out) otherwise. */
bool sl_log_limit(sl_log_limit_t *lim, uint64_t now_ms, uint64_t every_ms, uint64_t *left_out);

/* ---- Allocation ---- */

/* Every allocation in the library goes through these, so tests can inject
 * failures. sl_free(NULL) is a no-op. */
void *sl_malloc(size_t len);
void *sl_calloc(size_t count, size_t len);
void *sl_realloc(void *ptr, size_t len);
void sl_free(void *ptr);
char *sl_strdup(const char *s);
char *sl_strndup(const char *s, size_t len);

typedef struct {
    void *(*realloc_fn)(void *ctx, void *ptr, size_t len); /* len 0 frees */
    void *ctx;                                             /* passed back */
} sl_alloc_hook_t;

/* Replaces the allocator (NULL restores libc). Not thread-safe: call at start. */
void sl_alloc_set_hook(const sl_alloc_hook_t *hook);

/* Test aid: make the Nth allocation from now fail (0 = never), and every
 * one after it when `sticky`. */
void sl_alloc_fail_after(uint64_t n, bool sticky);

/* Number of live allocations made through the hook (for leak checks). */
int64_t sl_alloc_live(void);

/* Library start-up (libsodium). Idempotent; returns SL_EINTERNAL if the
 * crypto library cannot start. */
sl_err sl_init(void);

#ifdef __cplusplus
}
#endif
#endif
