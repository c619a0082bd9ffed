/* Membership: SWIM with the Lifeguard refinements, as a sans-I/O core.
 *
 * The core holds the member table (keyed by name) and decides what to send
 * and when; it never touches a socket, a clock or a disk. The caller (the
 * daemon's event loop, or the simulator) feeds it:
 *   - decoded messages:   sl_swim_receive(swim, now_ms, &msg)
 *   - the passing of time: sl_swim_tick(swim, now_ms), at the latest at
 *                          sl_swim_next_deadline_ms(swim)
 *   - local requests:     sl_swim_join, sl_swim_leave, sl_swim_set_meta
 * and after each call drains
 *   - messages to send:   sl_swim_next_output(swim, &out) until SL_EAGAIN
 *   - member events:      sl_swim_next_event(swim, &ev) until SL_EAGAIN
 * Views (sl_bytes_t) handed out by the core stay valid until the next call
 * into the core that takes a `now_ms` or polls an output or event.
 *
 * Protocol (docs/membership.md, proto/membership.md):
 *   - every probe period, PING the next member of a shuffled round-robin
 *     order; no ACK within the probe timeout: PING_REQ through k others
 *     (relays NACK when their own probe fails, Lifeguard); no ACK by the
 *     end of the period: the target becomes SUSPECT;
 *   - a suspicion becomes DEAD after a timeout that starts at
 *     suspicion_max and shrinks towards suspicion_min with each independent
 *     confirmation (Lifeguard); the suspect refutes by raising its
 *     incarnation, and the higher incarnation wins;
 *   - the local health multiplier (0..awareness_max-1) scales the probe
 *     period and timeout while this member misses ACKs or NACKs or is
 *     itself suspected (Lifeguard);
 *   - updates are piggybacked on every message, each retransmitted up to
 *     retransmit_mult * ceil(log10(N + 1)) times, fewest-sent first, and
 *     spread every gossip interval to gossip_fanout random members (a
 *     gossip-only message is an ACK with seq 0, which no probe uses);
 *   - the whole table is exchanged (SYNC push-pull) at join and every
 *     push-pull interval (scaled up with log N), also with a dead member
 *     now and then so that a healed partition merges;
 *   - seeds (addresses) are re-dialled forever: every join_retry_ms while
 *     no other member is known, every seed_redial_ms otherwise.
 *
 * Record order (the lattice every view converges to): a record with a
 * higher incarnation wins; at equal incarnations ALIVE < SUSPECT < DEAD <
 * LEFT. Only the member itself raises its incarnation. */
#ifndef STARLING_SWIM_H
#define STARLING_SWIM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "starling/common.h"
#include "starling/msg.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct sl_swim sl_swim_t;

/* A pool of interned, reference-counted byte strings (names, addresses,
 * metadata blobs). Cores driven from one thread (the simulator's 10,000
 * nodes) may share one pool so each distinct string is stored once; a core
 * given none makes its own. Not thread-safe. */
typedef struct sl_intern sl_intern_t;

sl_err sl_intern_new(sl_intern_t **out);
/* Frees the pool; every core using it must be destroyed first. */
void sl_intern_destroy(sl_intern_t **pool);
/* Distinct strings held and their total bytes (for memory figures). */
void sl_intern_usage(const sl_intern_t *pool, size_t *count, size_t *bytes);

/* Timing and protocol parameters. sl_swim_config_defaults() fills them;
 * a zero field in a config passed to sl_swim_new means "the default". */
typedef struct {
    uint32_t probe_interval_ms;     /* probe period (default 1250) */
    uint32_t probe_timeout_ms;      /* direct ACK deadline (default 400) */
    uint32_t indirect_count;        /* k relays for PING_REQ (default 3) */
    uint32_t suspicion_mult;        /* min = mult*max(1,log10 N)*period (1) */
    uint32_t suspicion_max_mult;    /* max = max_mult * min (default 3) */
    uint32_t awareness_max;         /* local health score ceiling (8) */
    uint32_t gossip_interval_ms;    /* gossip-only sends period (100) */
    uint32_t gossip_fanout;         /* members per gossip period (3) */
    uint32_t retransmit_mult;       /* lambda in lambda*log10(N+1) (4) */
    uint32_t gossip_max_bytes;      /* piggyback budget per message (1024) */
    uint32_t push_pull_interval_ms; /* SYNC period at N <= 32 (30000) */
    uint32_t dead_sync_every;       /* every n-th SYNC goes to a dead member,
                                       if any, to heal partitions (3) */
    uint32_t join_retry_ms;         /* seed re-dial period while alone (1000) */
    uint32_t seed_redial_ms;        /* seed re-dial period otherwise (30000) */
    uint32_t leave_fanout;          /* members told of a leave directly (16) */
    uint32_t reap_ms;               /* forget dead/left members after (3600000) */
    uint32_t max_outputs;           /* queued outputs cap; beyond: dropped
                                       and counted (4096) */
    uint32_t max_members;           /* records held, self included; beyond:
                                       unknown members refused (4096) */
    uint32_t max_new_per_msg;       /* unknown members one message may add,
                                       but for the answer to a SYNC we sent
                                       or to our join (64) */
    uint32_t max_new_per_period;    /* unknown members all messages together
                                       may add per push-pull interval, but
                                       for those answers (1024) */
} sl_swim_timing_t;

typedef struct {
    const char *name;        /* member id, 1..SL_NAME_MAX bytes, required */
    const char *addr;        /* advertised "tcp://host:port", required */
    const uint8_t *meta;     /* encoded metadata map (sl_meta_validate) */
    size_t meta_len;         /* 0: no metadata */
    uint64_t incarnation;    /* start value; the daemon restores the last
                                one from disk and passes it plus one */
    uint64_t seed;           /* rng seed (probe order, relays, gossip) */
    sl_intern_t *intern;     /* borrowed shared string pool, or NULL */
    sl_swim_timing_t timing; /* zero fields take the defaults */
    bool any_addr;           /* accept addresses that are not numeric (the
                                simulator's "sim://n3"); a daemon leaves it
                                false: no DNS on the I/O path */
} sl_swim_config_t;

/* What a received record may claim (docs/membership.md, "What a record may
 * claim"); records beyond are refused, counted (stats.records_refused) and
 * make sl_swim_receive return SL_EPROTO (or SL_ETOOBIG for a full table):
 *   - an incarnation above SL_SWIM_INC_MAX, or more than SL_SWIM_INC_JUMP_MAX
 *     above the highest one known for that member (self included), so
 *     that no refutation ever wraps;
 *   - an address that is not numeric (sl_addr_is_numeric), unless any_addr;
 *   - a new address for a member held ALIVE or SUSPECT, or held DEAD or
 *     LEFT for less than one push-pull interval: a member moves only by
 *     restarting, and only once its old address has been given up;
 *   - an unknown member past max_members, max_new_per_msg or
 *     max_new_per_period. */
#define SL_SWIM_INC_MAX (UINT64_C(1) << 62)
#define SL_SWIM_INC_JUMP_MAX (UINT64_C(1) << 20)

/* The defaults (Serf's probe pace, a short suspicion): at N = 10, a kill -9
 * is declared dead everywhere in about 2-4 s, a leave is seen everywhere
 * within 0.3 s, and a peer's membership traffic is about 250 B/s on the
 * wire at rest (bench/results/membership.md). */
void sl_swim_config_defaults(sl_swim_config_t *cfg);

/* Creates a core that knows only itself (ALIVE at cfg->incarnation).
 * Returns SL_EINVAL for a bad name, address or metadata. The config's
 * strings are copied. */
sl_err sl_swim_new(const sl_swim_config_t *cfg, sl_swim_t **out);
void sl_swim_destroy(sl_swim_t **swim);

/* Sizes the member table for `count` records up front (a hint: the table
 * still grows past it). */
sl_err sl_swim_reserve(sl_swim_t *swim, size_t count);

/* Starts joining through `seed_addrs` (addresses; names unknown): a SYNC
 * with join=1 goes to each, and they are re-dialled forever at a low rate.
 * count 0: the first member of a new cluster. May be called again to add
 * seeds. Seeds equal to our own address are ignored. */
sl_err sl_swim_join(sl_swim_t *swim, int64_t now_ms, const char *const *seed_addrs,
                    size_t count);

/* A hint from the transport: the connection of the member at `addr`
 * closed. A process that dies while its host lives (a crash, an OOM kill,
 * kill -9) closes its TCP connections at once, long before a probe would
 * find it gone. The member is probed next: at once, unless a probe is
 * still waiting for its answer, else as soon as that probe ends. Nothing
 * else changes: only a failed probe makes it suspect, so a connection
 * closed for any other reason costs one probe. SL_ENOTFOUND when no other
 * member that is up has that address. */
sl_err sl_swim_probe_soon(sl_swim_t *swim, int64_t now_ms, const char *addr, size_t addr_len);

/* Graceful leave: this member becomes LEFT at its incarnation, the record
 * is sent directly (in PINGs) to up to leave_fanout members and gossiped;
 * probing stops and received messages are ignored but for the ACKs of those
 * PINGs. Keep feeding the core until sl_swim_leave_acked() or a short
 * deadline (a second), then exit: a leave nobody heard is a crash. */
sl_err sl_swim_leave(sl_swim_t *swim, int64_t now_ms);
/* True once the leave has been handed out to at least one member (or there
 * was nobody to tell). */
bool sl_swim_leave_sent(const sl_swim_t *swim);
/* True once a member acknowledged the leave (or there was nobody to tell). */
bool sl_swim_leave_acked(const sl_swim_t *swim);

/* One decoded membership message (PING, PING_REQ, ACK, NACK, SYNC); other
 * types return SL_ETYPE. A message whose records break the rules (bad
 * names, metadata) returns SL_EPROTO after applying the good ones; the
 * caller counts and moves on. */
sl_err sl_swim_receive(sl_swim_t *swim, int64_t now_ms, const sl_msg_t *msg);

/* Runs the timers due at `now_ms` (probes, suspicion timeouts, gossip,
 * push-pull, seed re-dials, reaping). Time must not go backwards. */
sl_err sl_swim_tick(sl_swim_t *swim, int64_t now_ms);

/* Absolute time of the next timer (INT64_MAX if none). */
int64_t sl_swim_next_deadline_ms(const sl_swim_t *swim);

/* Applies one member record as if learned from a SYNC, without gossiping
 * it on and without events: for restoring a saved view and for simulations
 * that start from a formed cluster. */
sl_err sl_swim_add_member(sl_swim_t *swim, int64_t now_ms, const sl_member_msg_t *rec);

/* Replaces this member's metadata and re-gossips it with a higher
 * incarnation. SL_EINVAL if the map is invalid. */
sl_err sl_swim_set_meta(sl_swim_t *swim, int64_t now_ms, const uint8_t *meta, size_t len);

/* ---- Outputs ---- */

/* A message to send. `to_name` is empty when only the address is known
 * (a seed). `msg` and every view in it stay valid until the next call into
 * the core. */
typedef struct {
    sl_bytes_t to_addr; /* destination address */
    sl_bytes_t to_name; /* destination name, or empty */
    sl_msg_t msg;       /* the message (encode with sl_msg_encode) */
} sl_swim_output_t;

/* Next message to send, or SL_EAGAIN when none is queued. */
sl_err sl_swim_next_output(sl_swim_t *swim, sl_swim_output_t *out);

/* ---- Events ---- */

typedef enum {
    SL_SWIM_EV_JOIN = 1,   /* a member we did not know */
    SL_SWIM_EV_STATE = 2,  /* a known member changed state */
    SL_SWIM_EV_UPDATE = 3, /* same state, new incarnation, address or meta */
    SL_SWIM_EV_REAP = 4    /* a dead or left member was forgotten */
} sl_swim_event_kind;

#define SL_SWIM_STATE_NONE 0xFF /* old_state of a JOIN event */

typedef struct {
    uint8_t kind;         /* sl_swim_event_kind */
    sl_bytes_t name;      /* the member */
    sl_bytes_t addr;      /* its address */
    sl_bytes_t meta;      /* its metadata */
    uint8_t old_state;    /* sl_member_state, or SL_SWIM_STATE_NONE */
    uint8_t new_state;    /* sl_member_state */
    uint64_t old_incarnation; /* before the change (JOIN: the same) */
    uint64_t incarnation; /* its incarnation after the change */
    int64_t at_ms;        /* when this core made the change */
} sl_swim_event_t;

/* Next event, or SL_EAGAIN. Events are queued up to a cap (oldest dropped
 * and counted in stats.events_dropped). */
sl_err sl_swim_next_event(sl_swim_t *swim, sl_swim_event_t *ev);

/* ---- Queries ---- */

typedef struct {
    sl_bytes_t name;         /* member id */
    sl_bytes_t addr;         /* advertised address */
    sl_bytes_t meta;         /* encoded metadata map */
    uint64_t incarnation;    /* latest known */
    uint8_t state;           /* sl_member_state */
    bool is_self;            /* this core's own record */
    int64_t state_change_ms; /* when this core last changed its state */
} sl_swim_member_t;

/* Records held, every state, self included. */
size_t sl_swim_member_count(const sl_swim_t *swim);
/* Members in state ALIVE or SUSPECT, self included. */
size_t sl_swim_alive_count(const sl_swim_t *swim);
/* The i-th record (0 <= i < member_count; order is arbitrary and changes
 * when members are reaped). */
sl_err sl_swim_member_at(const sl_swim_t *swim, size_t i, sl_swim_member_t *m);
/* The record named `name`, or SL_ENOTFOUND. */
sl_err sl_swim_member_find(const sl_swim_t *swim, sl_bytes_t name, sl_swim_member_t *m);
/* Writes up to `cap` names of ALIVE or SUSPECT members (self included),
 * sorted bytewise, and returns how many there are in all. For rendezvous
 * hashing. */
size_t sl_swim_alive_names(const sl_swim_t *swim, sl_bytes_t *names, size_t cap);

/* This member's current incarnation (refutations raise it: persist it). */
uint64_t sl_swim_incarnation(const sl_swim_t *swim);
/* Local health multiplier score, 0 (healthy) .. awareness_max - 1. */
uint32_t sl_swim_health(const sl_swim_t *swim);
/* The timing actually in force (defaults filled in). */
const sl_swim_timing_t *sl_swim_timing(const sl_swim_t *swim);

typedef struct {
    uint64_t probes;           /* direct PINGs sent as prober */
    uint64_t probe_acks;       /* probes answered (directly or relayed) */
    uint64_t probe_failures;   /* probes with no ACK by the period's end */
    uint64_t probes_hinted;    /* probes started out of turn by sl_swim_probe_soon */
    uint64_t ping_reqs_sent;   /* indirect probe requests sent */
    uint64_t ping_reqs_served; /* PING_REQs relayed for others */
    uint64_t nacks_sent;       /* NACKs sent as relay */
    uint64_t nacks_received;   /* NACKs received as prober */
    uint64_t suspects;         /* members this core suspected itself */
    uint64_t confirmations;    /* independent suspicion confirmations */
    uint64_t deaths;           /* suspicions this core timed out to DEAD */
    uint64_t refutations;      /* times this member refuted a suspicion */
    uint64_t syncs_sent;       /* SYNC messages sent (push or reply) */
    uint64_t syncs_received;   /* SYNC messages received */
    uint64_t syncs_repair;     /* push-pulls sent to a member we held dead
                                  or did not know, on a message from it */
    uint64_t gossip_sent;      /* member records piggybacked */
    uint64_t gossip_received;  /* member records received (incl. SYNC) */
    uint64_t msgs_sent;        /* outputs handed out */
    uint64_t msgs_received;    /* messages received */
    uint64_t msgs_ignored;     /* received but not for us / stale / bad */
    uint64_t outputs_dropped;  /* outputs dropped at max_outputs */
    uint64_t events_dropped;   /* events dropped at the event cap */
    uint64_t seed_dials;       /* SYNCs sent to seed addresses */
    uint64_t records_refused;  /* received records refused, all reasons: */
    uint64_t refused_inc;      /*   incarnation over the cap or jump bound */
    uint64_t refused_addr;     /*   address change of a member not given up */
    uint64_t refused_name;     /*   a host name where a numeric address belongs
                                    (also whole messages, by their sender) */
    uint64_t refused_new;      /*   unknown member over a table or rate cap */
} sl_swim_stats_t;

void sl_swim_stats(const sl_swim_t *swim, sl_swim_stats_t *stats);

/* Checks the core's internal invariants (table index, queues, states,
 * suspicion timers, own record). SL_OK or SL_EINTERNAL with a log line at
 * SL_LOG_ERR saying what broke. Cost O(N). */
sl_err sl_swim_check(const sl_swim_t *swim);

#ifdef __cplusplus
}
#endif
#endif
