/* Private to the membership core (src/membership/swim*.c): the member
 * table and the transmit-limited gossip queue. The interned strings they
 * hold are a leaf below it (membership/intern.h). */
#ifndef STARLING_SWIM_INTERNAL_H
#define STARLING_SWIM_INTERNAL_H

#include <stdint.h>
#include <string.h>

#include "starling/rng.h"
#include "starling/swim.h"
#include "membership/intern.h"
#include "membership/swim_test.h"

/* ---- Gossip queue (src/membership/swim_gossip.c) ---- */

/* One queued transmission: member index and the generation of the update
 * it carries (stale when the member's gossip_gen moved on). */
typedef struct {
    uint32_t member; /* index into the member table */
    uint32_t gen;    /* update generation; matches member.gossip_gen if live */
} gq_entry_t;

/* A stack of entries sent the same number of times. */
typedef struct {
    gq_entry_t *items; /* entries, newest on top */
    uint32_t count;    /* entries used */
    uint32_t cap;      /* entries allocated */
} gq_bucket_t;

#define GQ_MAX_BUCKETS 64 /* retransmit limits are clamped below this */

/* Transmit-limited queue (memberlist's TransmitLimitedQueue): bucket t holds
 * updates sent t times; picks come from the lowest bucket, newest first. */
typedef struct {
    gq_bucket_t buckets[GQ_MAX_BUCKETS]; /* by transmit count */
    uint32_t live;                       /* members with a live entry */
    uint32_t entries;                    /* entries in all buckets */
    uint32_t next_gen;                   /* next generation number (never 0) */
} gqueue_t;

/* ---- The core ---- */

/* One member record: 56 bytes, so 10,000 cores x 10,000 members fit. */
typedef struct {
    sl_istr_t *name;         /* member id (reference held) */
    sl_istr_t *addr;         /* advertised address (reference held) */
    sl_istr_t *meta;         /* encoded metadata, NULL when none */
    uint64_t incarnation;    /* latest known */
    int64_t state_change_ms; /* when this core last changed its state */
    uint32_t gossip_gen;     /* generation of its live gossip entry, 0: none */
    uint32_t susp;           /* 1 + index into suspicions, 0: not suspect */
    uint8_t state;           /* sl_member_state */
} member_t;

/* A running suspicion of one member (Lifeguard: the timeout shrinks from
 * max_ms to min_ms with independent confirmations). */
#define SUSP_MAX_CONFIRM 8 /* confirmers remembered */
typedef struct {
    uint32_t member;           /* index into the member table, or UINT32_MAX free */
    uint32_t confirm_count;    /* independent confirmations so far */
    uint32_t k;                /* confirmations expected */
    int64_t start_ms;          /* when the suspicion began */
    int64_t min_ms;            /* shortest timeout */
    int64_t max_ms;            /* starting timeout */
    int64_t deadline_ms;       /* when it turns DEAD */
    sl_istr_t *from;           /* who raised it (latest gossiped), ref held */
    sl_istr_t *confirmers[SUSP_MAX_CONFIRM]; /* distinct declarers, refs held */
    uint32_t confirmer_count;  /* used entries of confirmers */
} suspicion_t;

/* A queued output, materialised into an sl_msg_t when polled. */
typedef struct {
    uint8_t type;            /* sl_msg_type */
    uint8_t join;            /* SYNC: join flag */
    uint8_t reply;           /* SYNC: reply flag */
    uint8_t want_nack;       /* PING_REQ: want_nack */
    uint8_t gossip_only;     /* ACK seq 0 carrying gossip: skip if none */
    uint8_t slice;           /* SYNC: at most SYNC_SLICE records, not the whole table */
    uint32_t seq;            /* PING, PING_REQ, ACK, NACK */
    sl_istr_t *to_addr;      /* destination address (ref) */
    sl_istr_t *to_name;      /* destination name (ref) or NULL */
    sl_istr_t *target;       /* PING, PING_REQ, ACK target (ref) or NULL */
    sl_istr_t *target_addr;  /* PING_REQ target address (ref) or NULL */
} out_t;

/* A queued event. */
typedef struct {
    uint8_t kind;         /* sl_swim_event_kind */
    uint8_t old_state;    /* before */
    uint8_t new_state;    /* after */
    uint64_t old_incarnation; /* before */
    uint64_t incarnation; /* after */
    int64_t at_ms;        /* when */
    sl_istr_t *name;      /* ref */
    sl_istr_t *addr;      /* ref */
    sl_istr_t *meta;      /* ref or NULL */
} event_t;

/* A PING_REQ this core relays: probe `target`, forward the ACK. */
typedef struct {
    uint32_t our_seq;     /* seq of our PING to the target */
    uint32_t their_seq;   /* requester's seq */
    int64_t nack_at_ms;   /* NACK (if wanted) and forget at this time */
    uint8_t want_nack;    /* requester asked for a NACK */
    sl_istr_t *req_addr;  /* requester's address (ref) */
    sl_istr_t *req_name;  /* requester's name (ref) */
    sl_istr_t *target;    /* probed member (ref) */
} relay_t;

#define RELAY_MAX 64 /* relayed probes in flight; beyond: refused */

/* The probe in flight (this core as prober). */
typedef struct {
    bool active;          /* a probe is running */
    bool acked;           /* the target answered */
    bool indirect_sent;   /* PING_REQs went out */
    uint32_t seq;         /* its sequence number */
    uint32_t expected_nacks; /* relays asked for a NACK */
    uint32_t nacks;       /* NACKs received */
    uint64_t incarnation; /* target's incarnation when probed */
    int64_t timeout_ms;   /* direct deadline */
    int64_t period_end_ms; /* verdict time */
    sl_istr_t *target;    /* probed member (ref) */
} probe_t;

/* A seed address, re-dialled forever. */
typedef struct {
    sl_istr_t *addr;      /* the address (ref) */
    int64_t next_dial_ms; /* next attempt */
} seed_t;

#define EVENT_CAP 65536 /* queued events; beyond: oldest dropped */
#define SYNC_SLICE 64   /* records in a periodic push-pull between members (self included) */
#define SYNC_ASKED_MAX 8 /* SYNC requests remembered, to know their answers */

struct sl_swim {
    sl_swim_timing_t t;       /* timing in force */
    sl_rng_t rng;             /* every random choice */
    sl_intern_t *pool;        /* string pool (shared or own) */
    bool own_pool;            /* pool is ours to destroy */
    uint32_t self;            /* index of our record (always 0) */
    bool left;                /* sl_swim_leave was called */
    bool leave_sent;          /* the leave was handed out */
    uint32_t leave_seq;       /* seq of the leave PINGs */
    bool leave_acked;         /* a member answered a leave PING */
    int64_t now_ms;           /* latest time seen */
    bool clock_started;       /* the first call's time has shifted the first timers */
    sl_swim_bug bug;          /* test-only planted bug */
    bool quiet;               /* no events (sl_swim_add_member) */

    member_t *members;        /* the table; self at index 0 */
    uint32_t member_count;    /* records used */
    uint32_t member_cap;      /* records allocated */
    uint32_t alive_count;     /* ALIVE or SUSPECT records, self included */
    uint32_t *index;          /* open addressing: 1 + member index, 0 empty */
    uint32_t index_cap;       /* slots, a power of two */

    uint32_t *order;          /* shuffled probe order (member indexes) */
    uint32_t order_count;     /* entries used */
    uint32_t order_cap;       /* entries allocated */
    uint32_t order_pos;       /* next entry to probe */

    suspicion_t *susps;       /* suspicions (free ones: member UINT32_MAX) */
    uint32_t susp_count;      /* slots used (including free ones) */
    uint32_t susp_cap;        /* slots allocated */
    uint32_t susp_live;       /* running suspicions */

    gqueue_t gq;              /* dissemination queue */

    out_t *outs;              /* output ring */
    uint32_t out_head;        /* first queued */
    uint32_t out_count;       /* queued */
    uint32_t out_cap;         /* ring size */
    out_t last_out;           /* the output handed out last (refs held) */
    bool have_last_out;       /* last_out holds refs */
    bool last_out_leave;      /* last output carried our LEFT record */

    event_t *events;          /* event ring */
    uint32_t ev_head;         /* first queued */
    uint32_t ev_count;        /* queued */
    uint32_t ev_cap;          /* ring size */
    event_t last_ev;          /* handed out last (refs held) */
    bool have_last_ev;        /* last_ev holds refs */

    probe_t probe;            /* probe in flight */
    sl_istr_t *probe_next;    /* member to probe next, out of turn (sl_swim_probe_soon; ref) */
    relay_t relays[RELAY_MAX]; /* relayed probes */
    uint32_t relay_count;     /* used */
    uint32_t next_seq;        /* sequence numbers (never 0) */
    uint32_t awareness;       /* Lifeguard local health score */

    int64_t next_probe_ms;    /* next probe start */
    int64_t next_gossip_ms;   /* next gossip round */
    int64_t sync_base_ms;     /* last push-pull (or creation) */
    double sync_frac;         /* fraction of the interval to the next one:
                                 a random phase first, then 1 */
    int64_t next_reap_ms;     /* next reap scan */
    uint32_t sync_counter;    /* push-pulls done (every n-th to the dead) */
    bool sync_followup;       /* the next push-pull is a joiner's follow-up: whole tables */
    uint32_t slice_pos;       /* table index where the next SYNC slice's rotation starts */

    seed_t *seeds;            /* seed addresses */
    uint32_t seed_count;      /* used */

    sl_member_msg_t *scratch;      /* SYNC member records being handed out */
    uint32_t scratch_cap;          /* records allocated */

    bool any_addr;            /* names allowed in addresses (simulator) */
    bool joining_reply;       /* the message being applied answers a SYNC we sent */
    sl_istr_t *asked[SYNC_ASKED_MAX]; /* where our latest SYNC requests went (refs) */
    int64_t asked_at[SYNC_ASKED_MAX]; /* when each was sent */
    uint32_t asked_next;      /* next slot of asked to overwrite */
    int64_t repair_ms;        /* no repair push-pull before this (repair_from) */
    uint32_t msg_new;         /* unknown members added by the message being applied */
    int64_t new_window_ms;    /* start of the current max_new_per_period window */
    uint32_t new_in_window;   /* unknown members added from messages in it */
    sl_log_limit_t refuse_log; /* refused records: a line per REFUSE_LOG_MS */

    sl_swim_stats_t stats;    /* counters */
};

#define NONE UINT32_MAX /* no member index */

static inline bool is_up(uint8_t s) { return s == SL_STATE_ALIVE || s == SL_STATE_SUSPECT; }

/* Shared by swim.c and swim_out.c. */
uint32_t swim_find_hashed(const sl_swim_t *s, const uint8_t *p, size_t len, uint64_t hash);
void swim_out_release(sl_swim_t *s, out_t *o);
void swim_ev_release(sl_swim_t *s, event_t *e);
void swim_drop_scratch(sl_swim_t *s);
uint32_t swim_retransmit_limit(const sl_swim_t *s);
int64_t swim_sync_interval(const sl_swim_t *s);
sl_istr_t *swim_self_name(const sl_swim_t *s);
const char *swim_state_name(uint8_t s);

/* Gossip queue operations (src/membership/swim_gossip.c). */
void gq_init(gqueue_t *q);
void gq_fini(gqueue_t *q);
/* Queues a fresh update of member `idx` (replacing its older one). */
sl_err gq_push(gqueue_t *q, member_t *members, uint32_t idx);
/* Drops a member's live entry (it is being removed). */
void gq_forget(gqueue_t *q, member_t *m);
/* Picks up to `max` live entries, lowest transmit count first, newest
 * first, with their encoded sizes fitting `budget` bytes; increments their
 * transmit counts and drops those reaching `limit` (0: never). Writes the
 * member indexes to `picked`; never picks member `skip`. */
uint32_t gq_pick(gqueue_t *q, member_t *members, uint32_t member_count, uint32_t limit,
                 size_t budget, uint32_t max, uint32_t *picked, uint32_t skip);
/* Encoded size estimate of one member record on the wire. */
size_t gq_record_len(const member_t *m);

#endif
