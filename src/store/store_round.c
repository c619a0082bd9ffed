/* The store's anti-entropy round: see store_round.h. */
#include "store/store_round.h"

#include <assert.h>
#include <string.h>

#include "starling/hash.h"
#include "starling/rng.h"

#define NONE UINT32_MAX

/* The classes of an up member, in the order `order` holds them. */
enum { AGREE = 0, SENT = 1, FRESH = 2, CLASSES = 3 };

typedef struct {
    uint64_t rid;        /* the replica id its digests carry (0: none yet) */
    uint64_t heard_fp;   /* the fingerprint it last told us (0: none) */
    uint64_t sent_epoch; /* our state's epoch when we last sent it a DIGEST (0: never) */
    uint32_t key_off;    /* its key in `keys` */
    uint32_t pos;        /* its index in `order` while up (NONE: not up) */
    uint32_t upos;       /* its index in `urgent` while urgent (NONE: not) */
    uint32_t fp_next;    /* next peer in its heard_fp's chain (NONE: last); forgotten:
                            the next free id */
    uint32_t fp_prev;    /* previous one (NONE: first) */
    uint16_t key_len;    /* key bytes (0: forgotten, the id free) */
} peer_t;

struct sl_store_round {
    sl_store_round_config_t cfg; /* periods and limits, defaults filled in */
    sl_rng_t rng;                /* peer choice */
    peer_t *peers;               /* by id */
    uint32_t count;              /* ids handed out (forgotten ones included) */
    uint32_t used;               /* of them held by a peer */
    uint32_t free_head;          /* a free id (NONE: none), chained by fp_next */
    uint32_t cap;                /* allocated */
    char *keys;                  /* every key, NUL-terminated, one after another */
    size_t keys_len;             /* bytes used */
    size_t keys_dead;            /* of them forgotten peers' (compacted past half) */
    size_t keys_cap;             /* allocated */
    uint32_t *index;             /* open addressing by key: 1 + id, 0 empty */
    uint32_t index_cap;          /* slots, a power of two (0: none yet) */
    uint32_t *fp_head;           /* chains of peers by heard_fp's hash: first id (NONE: empty) */
    uint32_t fp_cap;             /* chains, a power of two (0: none yet) */
    uint32_t *order;             /* up members: AGREE, then SENT, then FRESH */
    uint32_t end[CLASSES];       /* where each class ends in `order` (end[FRESH]: up count) */
    uint32_t *urgent;            /* urgent members (all up), in no order */
    uint32_t urgent_count;       /* entries */
    uint64_t fp;                 /* our fingerprint at the last round (0: none yet) */
    uint64_t epoch;              /* bumped at each change of fp (a DIGEST sent in an older
                                    epoch carried another state) */
    uint32_t active;             /* fast rounds left since fp last changed */
    uint64_t next_sync_ns;       /* next round */
    uint64_t next_idle_ns;       /* next idle SUMMARY */
    uint64_t next_refresh_ns;    /* next refresh SUMMARY */
    sl_store_round_stats_t st;   /* counters (the table's counts are filled in by _stats) */
};

sl_err sl_store_round_new(const sl_store_round_config_t *cfg, uint64_t seed,
                          sl_store_round_t **out) {
    *out = NULL;
    sl_store_round_t *r = sl_calloc(1, sizeof *r);
    if (!r)
        return SL_ENOMEM;
    if (cfg)
        r->cfg = *cfg;
    r->cfg.sync_ms = r->cfg.sync_ms ? r->cfg.sync_ms : 100;
    r->cfg.idle_ms = r->cfg.idle_ms ? r->cfg.idle_ms : 1000;
    r->cfg.refresh_ms = r->cfg.refresh_ms ? r->cfg.refresh_ms : 30000;
    r->cfg.active_rounds = r->cfg.active_rounds ? r->cfg.active_rounds : SL_STORE_ROUND_ACTIVE;
    if (!r->cfg.max_peers || r->cfg.max_peers > SL_STORE_ROUND_MAX_PEERS * 64u)
        r->cfg.max_peers = r->cfg.max_peers ? SL_STORE_ROUND_MAX_PEERS * 64u
                                            : SL_STORE_ROUND_MAX_PEERS;
    sl_rng_seed(&r->rng, seed);
    r->epoch = 1;
    r->free_head = NONE;
    *out = r;
    return SL_OK;
}

void sl_store_round_destroy(sl_store_round_t **rp) {
    sl_store_round_t *r = *rp;
    if (!r)
        return;
    sl_free(r->peers);
    sl_free(r->keys);
    sl_free(r->index);
    sl_free(r->fp_head);
    sl_free(r->order);
    sl_free(r->urgent);
    sl_free(r);
    *rp = NULL;
}

/* ---- the table ---- */

static const char *key_of(const sl_store_round_t *r, const peer_t *p) {
    return p->key_len ? r->keys + p->key_off : "";
}

static uint32_t key_home(const sl_store_round_t *r, const void *key, size_t len) {
    return (uint32_t)sl_hash64(key, len, 0x524e44) & (r->index_cap - 1); /* "RND" */
}

static uint32_t key_slot(const sl_store_round_t *r, const void *key, size_t len) {
    uint32_t mask = r->index_cap - 1;
    for (uint32_t i = key_home(r, key, len);; i = (i + 1) & mask) {
        uint32_t v = r->index[i];
        if (!v)
            return i;
        const peer_t *p = &r->peers[v - 1];
        if (p->key_len == len && memcmp(key_of(r, p), key, len) == 0)
            return i;
    }
}

static uint32_t fp_chain(const sl_store_round_t *r, uint64_t fp) {
    return (uint32_t)sl_mix64(fp) & (r->fp_cap - 1);
}

static void fp_unlink(sl_store_round_t *r, uint32_t id) {
    peer_t *p = &r->peers[id];
    if (!p->heard_fp)
        return;
    if (p->fp_prev != NONE)
        r->peers[p->fp_prev].fp_next = p->fp_next;
    else
        r->fp_head[fp_chain(r, p->heard_fp)] = p->fp_next;
    if (p->fp_next != NONE)
        r->peers[p->fp_next].fp_prev = p->fp_prev;
    p->fp_next = p->fp_prev = NONE;
}

static void fp_link(sl_store_round_t *r, uint32_t id) {
    peer_t *p = &r->peers[id];
    if (!p->heard_fp)
        return;
    uint32_t *head = &r->fp_head[fp_chain(r, p->heard_fp)];
    p->fp_prev = NONE;
    p->fp_next = *head;
    if (*head != NONE)
        r->peers[*head].fp_prev = id;
    *head = id;
}

/* Grows the key index and the fingerprint chains to fit `need` peers at
 * most half full (rebuilt: O(peers), on growth only). */
static sl_err grow_hashes(sl_store_round_t *r, uint32_t need) {
    if (2 * need <= r->index_cap)
        return SL_OK;
    uint32_t cap = r->index_cap ? 2 * r->index_cap : 64;
    uint32_t *idx = sl_calloc(cap, sizeof *idx);
    uint32_t *heads = sl_malloc(cap * sizeof *heads);
    if (!idx || !heads) {
        sl_free(idx);
        sl_free(heads);
        return SL_ENOMEM;
    }
    sl_free(r->index);
    sl_free(r->fp_head);
    r->index = idx;
    r->index_cap = cap;
    r->fp_head = heads;
    r->fp_cap = cap;
    memset(heads, 0xff, cap * sizeof *heads); /* NONE */
    for (uint32_t k = 0; k < r->count; k++) {
        peer_t *p = &r->peers[k];
        if (!p->key_len)
            continue; /* free: keeps its place in the free chain */
        idx[key_slot(r, key_of(r, p), p->key_len)] = k + 1;
        p->fp_next = p->fp_prev = NONE;
        fp_link(r, k);
    }
    return SL_OK;
}

sl_err sl_store_round_peer(sl_store_round_t *r, const void *key, size_t len, bool create,
                           uint32_t *id) {
    *id = NONE;
    if (!len || len > SL_STORE_ROUND_MAX_KEY)
        return SL_EINVAL;
    if (r->index_cap) {
        uint32_t v = r->index[key_slot(r, key, len)];
        if (v) {
            *id = v - 1;
            return SL_OK;
        }
    }
    if (!create)
        return SL_ENOTFOUND;
    if (r->used >= r->cfg.max_peers)
        return SL_EBUSY;
    sl_err err = grow_hashes(r, r->used + 1);
    if (err)
        return err;
    if (r->free_head == NONE && r->count == r->cap) {
        uint32_t cap = r->cap ? 2 * r->cap : 16;
        peer_t *p = sl_realloc(r->peers, cap * sizeof *p);
        if (!p)
            return SL_ENOMEM;
        r->peers = p;
        uint32_t *o = sl_realloc(r->order, cap * sizeof *o);
        if (!o)
            return SL_ENOMEM;
        r->order = o;
        uint32_t *u = sl_realloc(r->urgent, cap * sizeof *u);
        if (!u)
            return SL_ENOMEM;
        r->urgent = u;
        r->cap = cap;
    }
    if (r->keys_len + len + 1 > r->keys_cap) {
        size_t cap = r->keys_cap ? 2 * r->keys_cap : 1024;
        while (cap < r->keys_len + len + 1)
            cap *= 2;
        char *k = sl_realloc(r->keys, cap);
        if (!k)
            return SL_ENOMEM;
        r->keys = k;
        r->keys_cap = cap;
    }
    uint32_t n = r->free_head;
    if (n != NONE)
        r->free_head = r->peers[n].fp_next;
    else
        n = r->count++;
    r->used++;
    peer_t *p = &r->peers[n];
    memset(p, 0, sizeof *p);
    p->key_off = (uint32_t)r->keys_len;
    p->key_len = (uint16_t)len;
    p->pos = p->upos = p->fp_next = p->fp_prev = NONE;
    memcpy(r->keys + r->keys_len, key, len);
    r->keys[r->keys_len + len] = 0;
    r->keys_len += len + 1;
    r->index[key_slot(r, key, len)] = n + 1;
    *id = n;
    return SL_OK;
}

/* Takes the slot at `hole` out of the key index: each key further along
 * the probe run moves back into the hole when its home is not between
 * the hole and it, so every lookup's probe stays unbroken (no tombstones). */
static void index_remove(sl_store_round_t *r, uint32_t hole) {
    uint32_t mask = r->index_cap - 1;
    for (uint32_t j = (hole + 1) & mask; r->index[j]; j = (j + 1) & mask) {
        const peer_t *q = &r->peers[r->index[j] - 1];
        uint32_t home = key_home(r, key_of(r, q), q->key_len);
        if (((j - home) & mask) >= ((j - hole) & mask)) {
            r->index[hole] = r->index[j];
            hole = j;
        }
    }
    r->index[hole] = 0;
}

/* Copies the held keys to the front of `keys` once forgotten ones fill
 * half of it: O(ids), paid for by as many bytes forgotten. */
static void keys_compact(sl_store_round_t *r) {
    if (r->keys_dead * 2 < r->keys_len)
        return;
    size_t at = 0;
    char *k = sl_malloc(r->keys_cap); /* ids are not in key order: a new buffer */
    if (!k)
        return; /* compacted at a later forget */
    for (uint32_t id = 0; id < r->count; id++) {
        peer_t *p = &r->peers[id];
        if (!p->key_len)
            continue;
        memcpy(k + at, key_of(r, p), p->key_len + 1u);
        p->key_off = (uint32_t)at;
        at += p->key_len + 1u;
    }
    sl_free(r->keys);
    r->keys = k;
    r->keys_len = at;
    r->keys_dead = 0;
}

void sl_store_round_forget(sl_store_round_t *r, uint32_t id) {
    assert(id < r->count);
    peer_t *p = &r->peers[id];
    if (!p->key_len)
        return;
    sl_store_round_set_up(r, id, false);
    fp_unlink(r, id);
    index_remove(r, key_slot(r, key_of(r, p), p->key_len));
    r->keys_dead += p->key_len + 1u;
    memset(p, 0, sizeof *p); /* key_len 0: free, reads as "" */
    p->pos = p->upos = p->fp_prev = NONE;
    p->fp_next = r->free_head;
    r->free_head = id;
    r->used--;
    keys_compact(r);
}

uint32_t sl_store_round_peer_count(const sl_store_round_t *r) { return r->count; }

const char *sl_store_round_peer_key(const sl_store_round_t *r, uint32_t id) {
    assert(id < r->count);
    return key_of(r, &r->peers[id]);
}

uint64_t sl_store_round_peer_rid(const sl_store_round_t *r, uint32_t id) {
    assert(id < r->count);
    return r->peers[id].rid;
}

bool sl_store_round_peer_up(const sl_store_round_t *r, uint32_t id) {
    assert(id < r->count);
    return r->peers[id].pos != NONE;
}

bool sl_store_round_peer_urgent(const sl_store_round_t *r, uint32_t id) {
    assert(id < r->count);
    return r->peers[id].upos != NONE;
}

/* ---- classes ---- */

/* The class an up member belongs in now. */
static int class_of(const sl_store_round_t *r, const peer_t *p) {
    if (p->heard_fp == r->fp && r->fp)
        return AGREE;
    return p->sent_epoch == r->epoch ? SENT : FRESH;
}

/* The class the member at `pos` of `order` is in. */
static int class_at(const sl_store_round_t *r, uint32_t pos) {
    return pos < r->end[AGREE] ? AGREE : pos < r->end[SENT] ? SENT : FRESH;
}

static void swap_at(sl_store_round_t *r, uint32_t a, uint32_t b) {
    uint32_t x = r->order[a], y = r->order[b];
    r->order[a] = y;
    r->order[b] = x;
    r->peers[y].pos = a;
    r->peers[x].pos = b;
}

/* Moves an up member to class `to`, one class boundary at a time: to the
 * next class, it swaps with its class's last member and the boundary
 * steps back over it; to the class before, with its class's first. */
static void move_to(sl_store_round_t *r, uint32_t id, int to) {
    peer_t *p = &r->peers[id];
    int c = class_at(r, p->pos);
    for (; c < to; c++) {
        swap_at(r, p->pos, r->end[c] - 1);
        r->end[c]--;
    }
    for (; c > to; c--) {
        swap_at(r, p->pos, r->end[c - 1]);
        r->end[c - 1]++;
    }
}

static void reclass(sl_store_round_t *r, uint32_t id) {
    if (r->peers[id].pos != NONE)
        move_to(r, id, class_of(r, &r->peers[id]));
}

static void urgent_set(sl_store_round_t *r, uint32_t id, bool urgent) {
    peer_t *p = &r->peers[id];
    if (urgent == (p->upos != NONE))
        return;
    if (urgent) {
        p->upos = r->urgent_count;
        r->urgent[r->urgent_count++] = id;
        return;
    }
    uint32_t last = r->urgent[--r->urgent_count];
    r->urgent[p->upos] = last;
    r->peers[last].upos = p->upos;
    p->upos = NONE;
}

/* ---- events ---- */

void sl_store_round_set_up(sl_store_round_t *r, uint32_t id, bool up) {
    assert(id < r->count);
    peer_t *p = &r->peers[id];
    if (up == (p->pos != NONE))
        return;
    if (up) { /* appended as FRESH, then to its class */
        p->pos = r->end[FRESH]++;
        r->order[p->pos] = id;
        reclass(r, id);
        return;
    }
    urgent_set(r, id, false);
    move_to(r, id, FRESH);
    swap_at(r, p->pos, r->end[FRESH] - 1);
    r->end[FRESH]--;
    p->pos = NONE;
}

void sl_store_round_back(sl_store_round_t *r, uint32_t id) {
    assert(id < r->count);
    peer_t *p = &r->peers[id];
    fp_unlink(r, id);
    p->heard_fp = 0;
    p->sent_epoch = 0;
    reclass(r, id);
    if (p->pos != NONE) {
        urgent_set(r, id, true);
        r->next_sync_ns = 0;
    }
}

void sl_store_round_heal(sl_store_round_t *r) {
    for (uint32_t k = 0; k < r->end[FRESH]; k++)
        urgent_set(r, r->order[k], true);
    r->next_sync_ns = 0;
}

void sl_store_round_heard(sl_store_round_t *r, uint32_t id, uint64_t rid, uint64_t fp,
                          uint64_t *old_rid) {
    assert(id < r->count);
    peer_t *p = &r->peers[id];
    *old_rid = p->rid;
    if (p->rid && p->rid != rid)
        p->sent_epoch = 0; /* restarted: it holds nothing we sent its old replica */
    p->rid = rid;
    if (p->heard_fp != fp) {
        fp_unlink(r, id);
        p->heard_fp = fp;
        fp_link(r, id);
    }
    reclass(r, id);
}

/* ---- rounds ---- */

uint64_t sl_store_round_due_ns(const sl_store_round_t *r) { return r->next_sync_ns; }

/* Our fingerprint changed: nobody agrees or was sent this state (the
 * boundaries move, every up member is FRESH), but for those that told us
 * the new fingerprint already, found through its chain. */
static void new_state(sl_store_round_t *r, uint64_t fp) {
    r->fp = fp;
    r->epoch++;
    r->active = r->cfg.active_rounds;
    r->end[AGREE] = r->end[SENT] = 0;
    if (!r->fp_cap)
        return;
    for (uint32_t id = r->fp_head[fp_chain(r, fp)]; id != NONE; id = r->peers[id].fp_next)
        if (r->peers[id].heard_fp == fp)
            reclass(r, id);
}

/* A random member of `order`[from, to), or NONE when empty. */
static uint32_t pick_in(sl_store_round_t *r, uint32_t from, uint32_t to) {
    if (from >= to)
        return NONE;
    return r->order[from + (uint32_t)sl_rng_below(&r->rng, to - from)];
}

void sl_store_round_run(sl_store_round_t *r, uint64_t now_ns, uint64_t fp,
                        sl_store_round_pick_t *pick) {
    *pick = (sl_store_round_pick_t){SL_STORE_ROUND_QUIET, SL_STORE_ROUND_WHY_NONE, NONE};
    r->next_sync_ns = now_ns + (uint64_t)r->cfg.sync_ms * 1000000ull;
    r->st.rounds++;
    if (fp != r->fp)
        new_state(r, fp);
    if (r->urgent_count) {
        pick->peer = r->urgent[sl_rng_below(&r->rng, r->urgent_count)];
        pick->why = SL_STORE_ROUND_WHY_URGENT;
        pick->kind = SL_STORE_ROUND_DIGEST;
        urgent_set(r, pick->peer, false);
        return;
    }
    if (r->active && r->end[SENT] < r->end[FRESH]) {
        pick->peer = pick_in(r, r->end[SENT], r->end[FRESH]);
        pick->why = SL_STORE_ROUND_WHY_FRESH;
        pick->kind = SL_STORE_ROUND_DIGEST;
        r->active--;
        return;
    }
    if (now_ns < r->next_idle_ns)
        return;
    r->next_idle_ns = now_ns + (uint64_t)r->cfg.idle_ms * 1000000ull;
    pick->peer = pick_in(r, r->end[AGREE], r->end[FRESH]);
    pick->why = SL_STORE_ROUND_WHY_DIFFER;
    if (pick->peer == NONE && now_ns >= r->next_refresh_ns) {
        pick->peer = pick_in(r, 0, r->end[FRESH]);
        pick->why = SL_STORE_ROUND_WHY_REFRESH;
        if (pick->peer != NONE)
            r->next_refresh_ns = now_ns + (uint64_t)r->cfg.refresh_ms * 1000000ull;
    }
    if (pick->peer == NONE) {
        pick->why = SL_STORE_ROUND_WHY_NONE;
        r->st.rounds_silent++;
        return;
    }
    pick->kind = SL_STORE_ROUND_SUMMARY;
}

void sl_store_round_sent(sl_store_round_t *r, const sl_store_round_pick_t *pick) {
    if (pick->peer >= r->count)
        return;
    if (pick->kind == SL_STORE_ROUND_SUMMARY) {
        r->st.summaries_sent++;
        return;
    }
    if (pick->kind != SL_STORE_ROUND_DIGEST)
        return;
    r->st.digests_sent++;
    r->peers[pick->peer].sent_epoch = r->epoch;
    reclass(r, pick->peer);
}

void sl_store_round_stats(const sl_store_round_t *r, sl_store_round_stats_t *out) {
    *out = r->st;
    out->peers = r->used;
    out->up = r->end[FRESH];
    out->urgent = r->urgent_count;
    out->agree = r->end[AGREE];
    out->fresh = r->end[FRESH] - r->end[SENT];
}

/* ---- invariants ---- */

static sl_err broken(const char *what, uint32_t id) {
    sl_log(SL_LOG_ERR, "STORE-ROUND-CHECK", "store round table broken: %s (peer %u)", what, id);
    return SL_EINTERNAL;
}

sl_err sl_store_round_check(const sl_store_round_t *r) {
    if (r->end[AGREE] > r->end[SENT] || r->end[SENT] > r->end[FRESH] || r->end[FRESH] > r->count)
        return broken("class boundaries out of order", NONE);
    if (r->urgent_count > r->end[FRESH])
        return broken("more urgent than up members", NONE);
    uint32_t up = 0, urgent = 0, chained = 0, held = 0, free = 0;
    for (uint32_t id = r->free_head; id != NONE; id = r->peers[id].fp_next)
        if (id >= r->count || r->peers[id].key_len || ++free > r->count)
            return broken("free chain", id);
    for (uint32_t id = 0; id < r->count; id++) {
        const peer_t *p = &r->peers[id];
        if (!p->key_len) {
            if (p->pos != NONE || p->upos != NONE || p->heard_fp || p->rid)
                return broken("a free id in use", id);
            continue;
        }
        held++;
        if (p->pos != NONE) {
            up++;
            if (p->pos >= r->end[FRESH] || r->order[p->pos] != id)
                return broken("position and order disagree", id);
            if (class_at(r, p->pos) != class_of(r, p))
                return broken("member in the wrong class", id);
        }
        if (p->upos != NONE) {
            urgent++;
            if (p->upos >= r->urgent_count || r->urgent[p->upos] != id)
                return broken("urgent list and position disagree", id);
            if (p->pos == NONE)
                return broken("urgent but not up", id);
        }
        uint32_t v;
        if (!r->index_cap || (v = r->index[key_slot(r, key_of(r, p), p->key_len)]) != id + 1)
            return broken("key not indexed", id);
        chained += p->heard_fp != 0;
    }
    if (up != r->end[FRESH] || urgent != r->urgent_count || held != r->used ||
        held + free != r->count)
        return broken("counts disagree", NONE);
    uint32_t linked = 0;
    for (uint32_t c = 0; c < r->fp_cap; c++)
        for (uint32_t id = r->fp_head[c], prev = NONE; id != NONE; prev = id, id = r->peers[id].fp_next) {
            if (id >= r->count || r->peers[id].fp_prev != prev || !r->peers[id].heard_fp ||
                fp_chain(r, r->peers[id].heard_fp) != c || ++linked > chained)
                return broken("fingerprint chain", id);
        }
    if (linked != chained)
        return broken("a heard fingerprint not chained", NONE);
    return SL_OK;
}
