/* Allocation through one hook (Lua's lua_Alloc), so tests can fail the Nth
 * allocation and count live ones. */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include <sodium.h>

#include "starling/common.h"

static void *libc_realloc(void *ctx, void *ptr, size_t len) {
    if (len == 0) {
        free(ptr);
        return NULL;
    }
    return realloc(ptr, len);
}

static sl_alloc_hook_t alloc_hook = {libc_realloc, NULL}; /* current allocator */
static _Atomic uint64_t fail_countdown; /* 0: no injected failure pending */
static _Atomic bool fail_sticky;        /* keep failing after the first */
static _Atomic bool failing;            /* sticky failure in force */
static _Atomic int64_t live_count;      /* allocations not yet freed */

void sl_alloc_set_hook(const sl_alloc_hook_t *hook) {
    if (hook)
        alloc_hook = *hook;
    else
        alloc_hook = (sl_alloc_hook_t){libc_realloc, NULL};
}

void sl_alloc_fail_after(uint64_t n, bool sticky) {
    atomic_store(&failing, false);
    atomic_store(&fail_sticky, sticky);
    atomic_store(&fail_countdown, n);
}

int64_t sl_alloc_live(void) { return atomic_load(&live_count); }

static bool inject_failure(void) {
    if (atomic_load(&failing))
        return true;
    uint64_t n = atomic_load(&fail_countdown);
    if (n == 0)
        return false;
    if (atomic_fetch_sub(&fail_countdown, 1) == 1) {
        if (atomic_load(&fail_sticky))
            atomic_store(&failing, true);
        return true;
    }
    return false;
}

void *sl_malloc(size_t len) {
    if (len == 0)
        len = 1;
    if (inject_failure())
        return NULL;
    void *p = alloc_hook.realloc_fn(alloc_hook.ctx, NULL, len);
    if (p)
        atomic_fetch_add(&live_count, 1);
    return p;
}

void *sl_calloc(size_t count, size_t len) {
    if (len && count > SIZE_MAX / len)
        return NULL;
    /* With the libc allocator, calloc: a large block comes from fresh
     * mmap'd pages that are zero already, so it stays unresident until
     * used (the study node's 860 KB of slots cost a peer at rest nothing). */
    if (alloc_hook.realloc_fn == libc_realloc) {
        if (inject_failure())
            return NULL;
        void *p = calloc(count ? count : 1, len ? len : 1);
        if (p)
            atomic_fetch_add(&live_count, 1);
        return p;
    }
    void *p = sl_malloc(count * len);
    if (p)
        memset(p, 0, count * len > 0 ? count * len : 1);
    return p;
}

void *sl_realloc(void *ptr, size_t len) {
    if (!ptr)
        return sl_malloc(len);
    if (len == 0)
        len = 1;
    if (inject_failure())
        return NULL;
    return alloc_hook.realloc_fn(alloc_hook.ctx, ptr, len);
}

void sl_free(void *ptr) {
    if (!ptr)
        return;
    atomic_fetch_sub(&live_count, 1);
    alloc_hook.realloc_fn(alloc_hook.ctx, ptr, 0);
}

char *sl_strndup(const char *s, size_t len) {
    char *p = sl_malloc(len + 1);
    if (!p)
        return NULL;
    memcpy(p, s, len);
    p[len] = '\0';
    return p;
}

char *sl_strdup(const char *s) { return sl_strndup(s, strlen(s)); }

sl_err sl_init(void) { return sodium_init() < 0 ? SL_EINTERNAL : SL_OK; }
