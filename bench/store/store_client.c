/* sl-store-client: a control client for the store's cluster benchmarks
 * (bench/store/cluster.py) and cluster tests. peerctl opens one connection
 * per command and waits for each answer, which caps it at a few hundred
 * writes a second; this keeps one DEALER per peer open and pipelines
 * requests on all of them from one zmq_poll loop. Open clusters only (no
 * --key). An ADDR is a peer's control endpoint: ipc://DATA_DIR/control.sock
 * (its --data), or HOST:PORT of a `peer --control HOST:PORT`; the gossip
 * port serves no control (docs/security.md). Modes:
 *
 *   call ADDR CMD [ARG...]
 *       one request (any command, e.g. `store-fault block ADDR...`); prints
 *       the reply; exit 1 when it is an error.
 *   burst [--writers W] [--count N] [--sample K] [--window D] [--prefix P]
 *         [--first F] [--tag T] [--no-observe] [--timeout S] ADDR...
 *       N puts of 64-byte values to keys P0000000 + F, ... (7 digits); the
 *       i-th is written by peer i % W (of the first W addresses), with D
 *       puts in flight per writer. Every K-th write of a writer is a
 *       sample: from its acknowledgement, every peer is polled with `get`
 *       until it holds it. A replica applies one writer's dots in order, so
 *       each peer is polled only for the oldest sample it has not shown
 *       yet (one `get` in flight per peer, a miss retried after 5 ms). From
 *       the last acknowledgement on, rounds of `stats` (alongside the gets)
 *       until every peer reports one store.state_hash.
 *       Prints a JSON summary line (times in seconds).
 *   expect ADDR FILE
 *       FILE holds lines "KEY VALUE" (the value runs to the end of the
 *       line); `get` of every key, pipelined on one connection. Exit 0
 *       when every key reads its value, else 1 naming the first that does
 *       not (the cluster tests check many keys on many peers this way).
 *   agree [--timeout S] ADDR...
 *       rounds of `stats` until every peer reports one state_hash; prints
 *       {"agree_s": ...} from the start.
 *   heal [--timeout S] ADDR...
 *       sends `store-fault heal` to every peer at once, then as agree, the
 *       time counted from the first heal sent.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

#include "starling/common.h"
#include "starling/msg.h"
#include "starling/net.h"
#include "starling/platform.h"

#define MAX_PEERS 256 /* (64 before issue 14: 100 and 200 peers are measured) */
#define VALUE_LEN 64
#define RETRY_NS 5000000ull    /* a sample not there yet: ask that peer again after 5 ms */
#define ROUND_GAP_NS 20000000ull /* between rounds of stats */

/* Request ids say what a reply answers: kind in the top 4 bits. */
enum { KIND_PUT = 1, KIND_GET = 2, KIND_STATS = 3, KIND_CALL = 4 };
#define ID(kind, n) (((uint32_t)(kind) << 28) | ((uint32_t)(n) & 0x0fffffffu))
#define ID_KIND(id) ((id) >> 28)
#define ID_N(id) ((id) & 0x0fffffffu)

typedef struct {
    uint32_t key;       /* key index */
    uint64_t ack_ns;    /* when its put was acknowledged (0: not yet) */
    uint64_t seen_ns;   /* when the last peer showed it (0: not all yet) */
    uint32_t seen_by;   /* peers that showed it */
} sample_t;

typedef struct {
    void *sock;           /* DEALER to the peer */
    char addr[SL_NET_CONTROL_MAX]; /* its control endpoint: "ipc://PATH" or "host:port" */
    /* as a writer */
    uint32_t next_key;    /* its next key index (steps of writer count) */
    uint32_t in_flight;   /* puts not acknowledged */
    sample_t *samples;    /* its samples in write order */
    uint32_t sample_count; /* entries */
    uint32_t samples_acked; /* prefix of samples acknowledged (acks come in order) */
    /* as an observer */
    uint32_t *seen_upto;  /* per writer: samples this peer has shown */
    uint64_t *retry_at;   /* per writer: not before this time */
    bool get_busy;        /* a get in flight */
    uint32_t get_rr;      /* next writer to look at */
    /* stats rounds */
    double state_hash;    /* last reported (JSON number) */
    uint64_t applied;     /* last reported store.applied */
} peer_t;

typedef struct {
    void *zctx;             /* ZeroMQ context */
    peer_t peers[MAX_PEERS]; /* every address given */
    size_t peer_count;      /* entries */
    size_t writers;         /* the first `writers` peers write */
    uint32_t first;         /* the burst's first key index */
    uint32_t count;         /* writes in the burst */
    uint32_t sample_every;  /* a sample every this many writes of a writer */
    uint32_t window;        /* puts in flight per writer (--window) */
    const char *prefix;     /* key prefix */
    const char *tag;        /* goes into every value */
    bool observe;           /* poll samples */
    uint64_t deadline_ns;   /* give up */
    uint32_t acked;         /* puts acknowledged */
    uint32_t failed;        /* puts refused */
} bench_t;

static uint64_t now_ns(void) { return sl_plat_now_ns(); }

static int die(const char *fmt, const char *arg) {
    fprintf(stderr, "sl-store-client: ");
    fprintf(stderr, fmt, arg);
    fprintf(stderr, "\n");
    return 2;
}

static sl_err peer_open(void *zctx, peer_t *p, const char *addr) {
    char ep[SL_NET_CONTROL_MAX];
    if (!strncmp(addr, "ipc://", 6) && addr[6] && strlen(addr) < sizeof ep)
        snprintf(ep, sizeof ep, "%s", addr); /* a peer's control socket */
    else if (sl_net_addr_normalize(addr, ep, sizeof ep) != SL_OK)
        return SL_EINVAL;
    snprintf(p->addr, sizeof p->addr, "%s", addr);
    p->sock = zmq_socket(zctx, ZMQ_DEALER);
    if (!p->sock)
        return SL_EIO;
    int zero = 0, hwm = 100000;
    zmq_setsockopt(p->sock, ZMQ_LINGER, &zero, sizeof zero);
    zmq_setsockopt(p->sock, ZMQ_SNDHWM, &hwm, sizeof hwm);
    zmq_setsockopt(p->sock, ZMQ_RCVHWM, &hwm, sizeof hwm);
    return zmq_connect(p->sock, ep) == 0 ? SL_OK : SL_EIO;
}

/* Sends one request; blocks only while the connection is being made. */
static sl_err send_req(peer_t *p, uint32_t id, const char *cmd, const sl_bytes_t *args,
                       size_t arg_count) {
    uint8_t header[SL_WIRE_HEADER_LEN];
    uint8_t *body = NULL;
    size_t len = 0;
    sl_err err = sl_msg_ctl_req_encode(id, cmd, args, arg_count, header, &body, &len);
    if (err)
        return err;
    if (zmq_send(p->sock, header, sizeof header, ZMQ_SNDMORE) < 0 ||
        zmq_send(p->sock, body, len, 0) < 0)
        err = SL_EIO;
    sl_free(body);
    return err;
}

/* Receives one reply if there is one. *got false when none was waiting. */
typedef struct {
    uint32_t id;       /* request id */
    uint32_t status;   /* sl_err */
    bool more;         /* more parts follow */
    char *body;        /* NUL-terminated copy (sl_malloc) */
    size_t len;        /* bytes */
} reply_t;

static sl_err recv_rep(peer_t *p, reply_t *r, bool *got) {
    *got = false;
    zmq_msg_t h, b;
    zmq_msg_init(&h);
    if (zmq_msg_recv(&h, p->sock, ZMQ_DONTWAIT) < 0) {
        zmq_msg_close(&h);
        return errno == EAGAIN ? SL_OK : SL_EIO;
    }
    zmq_msg_init(&b);
    sl_err err = SL_EPROTO;
    if (zmq_msg_more(&h) && zmq_msg_recv(&b, p->sock, 0) >= 0 && !zmq_msg_more(&b)) {
        sl_msg_t m;
        err = sl_msg_decode(zmq_msg_data(&h), zmq_msg_size(&h), zmq_msg_data(&b),
                            zmq_msg_size(&b), &m);
        if (!err && m.type != SL_MSG_CTL_REP) {
            sl_msg_fini(&m);
            err = SL_EPROTO;
        }
        if (!err) {
            r->id = m.u.ctl_rep.id;
            r->status = m.u.ctl_rep.status;
            r->more = m.u.ctl_rep.more;
            r->len = m.u.ctl_rep.body.len;
            r->body = sl_malloc(r->len + 1);
            if (r->body) {
                if (r->len)
                    memcpy(r->body, m.u.ctl_rep.body.ptr, r->len);
                r->body[r->len] = 0;
                *got = true;
            } else {
                err = SL_ENOMEM;
            }
            sl_msg_fini(&m);
        }
    }
    zmq_msg_close(&h);
    zmq_msg_close(&b);
    return err;
}

/* Waits up to `timeout_ms` for input on any peer. */
static void wait_input(bench_t *b, long timeout_ms) {
    zmq_pollitem_t items[MAX_PEERS];
    for (size_t i = 0; i < b->peer_count; i++)
        items[i] = (zmq_pollitem_t){b->peers[i].sock, 0, ZMQ_POLLIN, 0};
    zmq_poll(items, (int)b->peer_count, timeout_ms);
}

static void key_name(const bench_t *b, uint32_t key, char *out, size_t cap) {
    snprintf(out, cap, "%s%07" PRIu32, b->prefix, b->first + key);
}

/* A number after "KEY": inside the "store" object of a stats reply. */
static bool store_number(const char *json, const char *key, double *out) {
    const char *s = strstr(json, "\"store\":{");
    if (!s)
        return false;
    char pat[64];
    snprintf(pat, sizeof pat, "\"%s\":", key);
    const char *k = strstr(s, pat);
    if (!k)
        return false;
    char *end = NULL;
    *out = strtod(k + strlen(pat), &end);
    return end != k + strlen(pat);
}

/* ---- burst ---- */

static void send_puts(bench_t *b, peer_t *w, size_t wi) {
    while (w->in_flight < b->window && w->next_key < b->count) {
        uint32_t key = w->next_key;
        char k[600], v[VALUE_LEN + 1];
        key_name(b, key, k, sizeof k);
        memset(v, '.', VALUE_LEN); /* padded to 64 bytes; the tag makes each run's values new */
        int n = snprintf(v, sizeof v, "%.40s/%07" PRIu32 "/", b->tag, b->first + key);
        if (n > 0 && n < VALUE_LEN)
            v[n] = '.'; /* snprintf's NUL */
        sl_bytes_t args[2] = {sl_bytes_str(k), {(const uint8_t *)v, VALUE_LEN}};
        if (send_req(w, ID(KIND_PUT, key), "put", args, 2) != SL_OK) {
            fprintf(stderr, "sl-store-client: cannot send a put to %s\n", w->addr);
            b->failed++;
        }
        w->in_flight++;
        w->next_key += (uint32_t)b->writers;
        (void)wi;
    }
}

/* Asks observer `o` for the oldest sample it has not shown, taking
 * writers in turn; nothing when every acknowledged sample is shown or
 * waiting for its retry time. */
static void send_get(bench_t *b, peer_t *o, uint64_t now) {
    if (o->get_busy)
        return;
    for (size_t t = 0; t < b->writers; t++) {
        size_t wi = (o->get_rr + t) % b->writers;
        peer_t *w = &b->peers[wi];
        uint32_t m = o->seen_upto[wi];
        if (m >= w->samples_acked || now < o->retry_at[wi])
            continue;
        char k[600];
        key_name(b, w->samples[m].key, k, sizeof k);
        sl_bytes_t arg = sl_bytes_str(k);
        if (send_req(o, ID(KIND_GET, wi), "get", &arg, 1) == SL_OK) {
            o->get_busy = true;
            o->get_rr = (uint32_t)(wi + 1) % (uint32_t)b->writers;
        }
        return;
    }
}

static void on_put_ack(bench_t *b, peer_t *w, uint32_t key, bool ok, uint64_t now) {
    w->in_flight--;
    if (!ok) {
        b->failed++;
        return;
    }
    b->acked++;
    /* acks of one connection come in order, so samples are acked in order */
    if (w->samples_acked < w->sample_count && w->samples[w->samples_acked].key == key)
        w->samples[w->samples_acked++].ack_ns = now;
}

static void on_get_reply(bench_t *b, peer_t *o, size_t wi, bool found, uint64_t now) {
    o->get_busy = false;
    peer_t *w = &b->peers[wi];
    if (!found) {
        o->retry_at[wi] = now + RETRY_NS;
        return;
    }
    sample_t *s = &w->samples[o->seen_upto[wi]++];
    if (++s->seen_by == b->peer_count)
        s->seen_ns = now;
}

static bool all_seen(const bench_t *b) {
    for (size_t wi = 0; wi < b->writers; wi++) {
        const peer_t *w = &b->peers[wi];
        for (size_t o = 0; o < b->peer_count; o++)
            if (b->peers[o].seen_upto[wi] < w->sample_count)
                return false;
    }
    return true;
}

static int cmp_double(const void *x, const void *y) {
    double a = *(const double *)x, c = *(const double *)y;
    return (a > c) - (a < c);
}

static double pct(const double *v, size_t n, double q) {
    if (!n)
        return -1;
    size_t i = (size_t)(q * (double)(n - 1) + 0.5);
    return v[i < n ? i : n - 1];
}

/* Rounds of `stats` on every peer, one round at a time (ROUND_GAP_NS
 * apart), until a round in which every peer reports one state_hash. */
typedef struct {
    size_t waiting;     /* replies the round in flight still needs */
    uint64_t next_ns;   /* the next round, not before */
    uint32_t rounds;    /* rounds started */
    uint64_t agreed_ns; /* when the last reply of the agreeing round came (0: not yet) */
} agree_t;

static void agree_step(bench_t *b, agree_t *a, uint64_t now) {
    if (a->agreed_ns || a->waiting || now < a->next_ns)
        return;
    for (size_t i = 0; i < b->peer_count; i++)
        if (send_req(&b->peers[i], ID(KIND_STATS, i), "stats", NULL, 0) == SL_OK)
            a->waiting++;
    a->rounds++;
    a->next_ns = now + ROUND_GAP_NS;
}

static void agree_reply(bench_t *b, agree_t *a, peer_t *p, const reply_t *r, uint64_t now) {
    double h = 0, n = 0;
    if (r->status == SL_OK && store_number(r->body, "state_hash", &h))
        p->state_hash = h;
    if (r->status == SL_OK && store_number(r->body, "applied", &n))
        p->applied = (uint64_t)n;
    if (!a->waiting || --a->waiting)
        return;
    bool same = true;
    for (size_t i = 1; i < b->peer_count; i++)
        same &= b->peers[i].state_hash == b->peers[0].state_hash;
    if (same)
        a->agreed_ns = now;
}

/* Returns the agreement time, or 0 on timeout. Other replies are dropped. */
static uint64_t stats_until_agree(bench_t *b, uint32_t *rounds) {
    agree_t a = {0};
    while (!a.agreed_ns && now_ns() <= b->deadline_ns) {
        agree_step(b, &a, now_ns());
        wait_input(b, 5);
        uint64_t now = now_ns();
        for (size_t i = 0; i < b->peer_count; i++) {
            peer_t *p = &b->peers[i];
            for (;;) {
                reply_t r;
                bool got;
                if (recv_rep(p, &r, &got) != SL_OK || !got)
                    break;
                if (ID_KIND(r.id) == KIND_STATS)
                    agree_reply(b, &a, p, &r, now);
                sl_free(r.body);
            }
        }
    }
    *rounds = a.rounds;
    return a.agreed_ns;
}

static int run_burst(bench_t *b) {
    uint32_t per_writer = (b->count + (uint32_t)b->writers - 1) / (uint32_t)b->writers;
    for (size_t wi = 0; wi < b->writers; wi++) {
        peer_t *w = &b->peers[wi];
        w->next_key = (uint32_t)wi;
        w->samples = sl_calloc(per_writer / b->sample_every + 2, sizeof *w->samples);
        if (!w->samples)
            return die("%s", "out of memory");
        for (uint32_t j = 0, key = (uint32_t)wi; key < b->count; j++, key += (uint32_t)b->writers)
            if (j % b->sample_every == 0)
                w->samples[w->sample_count++].key = key;
    }
    for (size_t i = 0; i < b->peer_count; i++) {
        b->peers[i].seen_upto = sl_calloc(b->writers, sizeof(uint32_t));
        b->peers[i].retry_at = sl_calloc(b->writers, sizeof(uint64_t));
        if (!b->peers[i].seen_upto || !b->peers[i].retry_at)
            return die("%s", "out of memory");
    }
    uint64_t t0 = now_ns(), last_ack = 0;
    agree_t agree = {0}; /* rounds of stats from the last acknowledgement on */
    for (size_t wi = 0; wi < b->writers; wi++)
        send_puts(b, &b->peers[wi], wi);
    for (;;) {
        bool written = b->acked + b->failed == b->count;
        if (written && (!b->observe || all_seen(b)) && agree.agreed_ns)
            break;
        uint64_t now = now_ns();
        if (now > b->deadline_ns) {
            fprintf(stderr, "sl-store-client: timed out (%" PRIu32 " of %" PRIu32 " acked)\n",
                    b->acked, b->count);
            break;
        }
        if (b->observe)
            for (size_t o = 0; o < b->peer_count; o++)
                send_get(b, &b->peers[o], now);
        if (written)
            agree_step(b, &agree, now);
        wait_input(b, 1);
        now = now_ns();
        for (size_t i = 0; i < b->peer_count; i++) {
            peer_t *p = &b->peers[i];
            for (;;) {
                reply_t r;
                bool got;
                sl_err err = recv_rep(p, &r, &got);
                if (err) {
                    fprintf(stderr, "sl-store-client: bad reply from %s: %s\n", p->addr,
                            sl_strerror(err));
                    break;
                }
                if (!got)
                    break;
                if (ID_KIND(r.id) == KIND_PUT) {
                    if (r.status != SL_OK && b->failed < 5)
                        fprintf(stderr, "sl-store-client: put refused by %s: %s\n", p->addr, r.body);
                    on_put_ack(b, p, ID_N(r.id), r.status == SL_OK, now);
                    last_ack = now;
                    send_puts(b, p, i);
                } else if (ID_KIND(r.id) == KIND_GET && ID_N(r.id) < b->writers) {
                    on_get_reply(b, p, ID_N(r.id), r.status == SL_OK, now);
                } else if (ID_KIND(r.id) == KIND_STATS) {
                    agree_reply(b, &agree, p, &r, now);
                }
                sl_free(r.body);
            }
        }
    }
    uint64_t t_written = last_ack;
    uint32_t rounds = agree.rounds;
    uint64_t t_agree = agree.agreed_ns;
    /* latencies of the samples every peer showed */
    size_t n = 0, total = 0;
    for (size_t wi = 0; wi < b->writers; wi++)
        total += b->peers[wi].sample_count;
    double *lat = sl_calloc(total + 1, sizeof *lat);
    if (!lat)
        return die("%s", "out of memory");
    for (size_t wi = 0; wi < b->writers; wi++)
        for (uint32_t m = 0; m < b->peers[wi].sample_count; m++) {
            const sample_t *s = &b->peers[wi].samples[m];
            if (s->ack_ns && s->seen_ns)
                lat[n++] = s->seen_ns > s->ack_ns ? (double)(s->seen_ns - s->ack_ns) / 1e9 : 0;
        }
    qsort(lat, n, sizeof *lat, cmp_double);
    printf("{\"writes\":%" PRIu32 ",\"acked\":%" PRIu32 ",\"failed\":%" PRIu32
           ",\"writers\":%zu,\"peers\":%zu,\"write_s\":%.4f,\"writes_per_s\":%.1f"
           ",\"samples\":%zu,\"samples_seen\":%zu,\"p50_s\":%.4f,\"p90_s\":%.4f,\"p99_s\":%.4f"
           ",\"max_s\":%.4f,\"agree_after_last_ack_s\":%.4f,\"agree_after_first_put_s\":%.4f"
           ",\"stats_rounds\":%" PRIu32 "}\n",
           b->count, b->acked, b->failed, b->writers, b->peer_count,
           (double)(t_written - t0) / 1e9, b->acked / ((double)(t_written - t0) / 1e9 + 1e-9),
           total, n, pct(lat, n, 0.5), pct(lat, n, 0.9), pct(lat, n, 0.99),
           n ? lat[n - 1] : -1.0,
           t_agree ? (double)(t_agree - t_written) / 1e9 : -1.0,
           t_agree ? (double)(t_agree - t0) / 1e9 : -1.0, rounds);
    sl_free(lat);
    bool ok = b->acked == b->count && t_agree && (!b->observe || n == total);
    return ok ? 0 : 1;
}

static int run_agree(bench_t *b, bool heal) {
    uint64_t t0 = now_ns();
    if (heal) {
        sl_bytes_t arg = sl_bytes_str("heal");
        for (size_t i = 0; i < b->peer_count; i++)
            if (send_req(&b->peers[i], ID(KIND_CALL, i), "store-fault", &arg, 1) != SL_OK)
                return die("cannot send heal to %s", b->peers[i].addr);
    }
    uint32_t rounds = 0;
    uint64_t t = stats_until_agree(b, &rounds);
    printf("{\"agree_s\":%.4f,\"stats_rounds\":%" PRIu32 ",\"applied_max\":%" PRIu64 "}\n",
           t ? (double)(t - t0) / 1e9 : -1.0, rounds, b->peers[0].applied);
    return t ? 0 : 1;
}

/* Pipelined gets of every "KEY VALUE" line of `path`; 0 when all match. */
static int run_expect(bench_t *b, const char *path) {
    FILE *f = fopen(path, "r");
    if (!f)
        return die("cannot read %s", path);
    char line[2048];
    size_t count = 0, cap = 0;
    char **lines = NULL;
    while (fgets(line, sizeof line, f)) {
        size_t n = strcspn(line, "\n");
        line[n] = 0;
        if (!n)
            continue;
        if (!strchr(line, ' ')) {
            fclose(f);
            return die("a line without a value in %s", path);
        }
        if (count == cap) {
            cap = cap ? cap * 2 : 64;
            char **l = sl_realloc(lines, cap * sizeof *l);
            if (!l) {
                fclose(f);
                return die("%s", "out of memory");
            }
            lines = l;
        }
        lines[count] = sl_malloc(n + 1);
        if (!lines[count]) {
            fclose(f);
            return die("%s", "out of memory");
        }
        memcpy(lines[count++], line, n + 1);
    }
    fclose(f);
    peer_t *p = &b->peers[0];
    for (size_t i = 0; i < count; i++) {
        char *sp = strchr(lines[i], ' ');
        sl_bytes_t key = {(const uint8_t *)lines[i], (size_t)(sp - lines[i])};
        if (send_req(p, ID(KIND_GET, i), "get", &key, 1) != SL_OK)
            return die("cannot send to %s", p->addr);
    }
    size_t answered = 0;
    int rc = 0;
    while (answered < count) {
        if (now_ns() > b->deadline_ns) {
            rc = die("no answer from %s", p->addr);
            break;
        }
        wait_input(b, 100);
        for (;;) {
            reply_t r;
            bool got;
            if (recv_rep(p, &r, &got) != SL_OK || !got)
                break;
            size_t i = ID_N(r.id);
            if (ID_KIND(r.id) == KIND_GET && i < count) {
                answered++;
                const char *want = strchr(lines[i], ' ') + 1;
                bool same = r.status == SL_OK && r.len == strlen(want) && !memcmp(r.body, want, r.len);
                if (!same && rc == 0) {
                    fprintf(stderr, "sl-store-client: %s: %.*s reads '%s', expected '%s'\n", p->addr,
                            (int)(strchr(lines[i], ' ') - lines[i]), lines[i],
                            r.status == SL_OK ? r.body : "(not found)", want);
                    rc = 1;
                }
            }
            sl_free(r.body);
        }
    }
    for (size_t i = 0; i < count; i++)
        sl_free(lines[i]);
    sl_free(lines);
    return rc;
}

static int run_call(bench_t *b, const char *cmd, char **argv, int argc) {
    sl_bytes_t args[SL_CTL_MAX_ARGS];
    if (argc > SL_CTL_MAX_ARGS)
        return die("%s", "too many arguments (at most 16)");
    for (int i = 0; i < argc; i++)
        args[i] = sl_bytes_str(argv[i]);
    peer_t *p = &b->peers[0];
    if (send_req(p, ID(KIND_CALL, 1), cmd, args, (size_t)argc) != SL_OK)
        return die("cannot send to %s", p->addr);
    for (;;) {
        if (now_ns() > b->deadline_ns)
            return die("no answer from %s", p->addr);
        wait_input(b, 100);
        reply_t r;
        bool got;
        if (recv_rep(p, &r, &got) != SL_OK)
            return die("bad reply from %s", p->addr);
        if (!got || r.id != ID(KIND_CALL, 1)) {
            if (got)
                sl_free(r.body);
            continue;
        }
        FILE *f = r.status == SL_OK ? stdout : stderr;
        fwrite(r.body, 1, r.len, f);
        fputc('\n', f);
        bool more = r.more;
        uint32_t status = r.status;
        sl_free(r.body);
        if (status != SL_OK)
            return 1;
        if (!more)
            return 0;
    }
}

static int usage(void) {
    fprintf(stderr,
            "usage: sl-store-client call ADDR CMD [ARG...]\n"
            "       sl-store-client burst [--writers W] [--count N] [--sample K] [--window D]\n"
            "                             [--prefix P] [--first F] [--tag T] [--no-observe] [--timeout S]\n"
            "                             ADDR...\n"
            "       sl-store-client expect ADDR FILE\n"
            "       sl-store-client agree [--timeout S] ADDR...\n"
            "       sl-store-client heal [--timeout S] ADDR...\n");
    return 2;
}

/* --name N with N in 1..2^28-1 (0 allowed only for --first). */
static bool take_u32(int argc, char **argv, int *i, const char *name, uint32_t *out) {
    if (strcmp(argv[*i], name) != 0 || *i + 1 >= argc)
        return false;
    char *end = NULL;
    unsigned long v = strtoul(argv[*i + 1], &end, 10);
    if (end == argv[*i + 1] || *end || (v == 0 && strcmp(name, "--first") != 0) || v > 0x0fffffffu)
        return false;
    *out = (uint32_t)v;
    *i += 2;
    return true;
}

int main(int argc, char **argv) {
    if (argc < 3)
        return usage();
    static bench_t b;
    b.writers = 1;
    b.count = 100000;
    b.sample_every = 100;
    b.window = 64;
    b.prefix = "burst/";
    b.tag = "v";
    b.observe = true;
    uint32_t timeout_s = 300, writers = 1;
    const char *mode = argv[1];
    int i = 2;
    if (strcmp(mode, "call") == 0 || strcmp(mode, "expect") == 0) {
        if (argc < 4 || (mode[0] == 'e' && argc != 4))
            return usage();
        b.zctx = zmq_ctx_new();
        if (!b.zctx || peer_open(b.zctx, &b.peers[0], argv[2]) != SL_OK)
            return die("cannot open a connection to %s", argv[2]);
        b.peer_count = 1;
        b.deadline_ns = now_ns() + (mode[0] == 'c' ? 10000000000ull : 5000000000ull);
        int rc = mode[0] == 'c' ? run_call(&b, argv[3], argv + 4, argc - 4)
                                : run_expect(&b, argv[3]);
        zmq_close(b.peers[0].sock);
        zmq_ctx_term(b.zctx);
        return rc;
    }
    if (strcmp(mode, "burst") && strcmp(mode, "agree") && strcmp(mode, "heal"))
        return usage();
    while (i < argc && strncmp(argv[i], "--", 2) == 0) {
        if (take_u32(argc, argv, &i, "--writers", &writers) ||
            take_u32(argc, argv, &i, "--count", &b.count) ||
            take_u32(argc, argv, &i, "--first", &b.first) ||
            take_u32(argc, argv, &i, "--sample", &b.sample_every) ||
            take_u32(argc, argv, &i, "--window", &b.window) ||
            take_u32(argc, argv, &i, "--timeout", &timeout_s))
            continue;
        if (strcmp(argv[i], "--prefix") == 0 && i + 1 < argc) {
            b.prefix = argv[i + 1];
            i += 2;
        } else if (strcmp(argv[i], "--tag") == 0 && i + 1 < argc) {
            b.tag = argv[i + 1];
            i += 2;
        } else if (strcmp(argv[i], "--no-observe") == 0) {
            b.observe = false;
            i++;
        } else {
            return die("bad option or value at '%s'", argv[i]);
        }
    }
    if (i >= argc || argc - i > MAX_PEERS)
        return usage();
    b.zctx = zmq_ctx_new();
    if (!b.zctx)
        return die("%s", "no ZeroMQ context");
    for (; i < argc; i++)
        if (peer_open(b.zctx, &b.peers[b.peer_count++], argv[i]) != SL_OK)
            return die("cannot open a connection to %s", argv[i]);
    if (writers > b.peer_count)
        return die("%s", "--writers is more than the addresses given");
    b.writers = writers;
    b.deadline_ns = now_ns() + (uint64_t)timeout_s * 1000000000ull;
    int rc = strcmp(mode, "burst") == 0 ? run_burst(&b) : run_agree(&b, strcmp(mode, "heal") == 0);
    for (size_t k = 0; k < b.peer_count; k++) {
        zmq_close(b.peers[k].sock);
        sl_free(b.peers[k].samples);
        sl_free(b.peers[k].seen_upto);
        sl_free(b.peers[k].retry_at);
    }
    zmq_ctx_term(b.zctx);
    return rc;
}
