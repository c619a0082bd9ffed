/* The wire codec: header + canonical msgpack body <-> sl_msg_t
 * (proto/envelope.md, proto/membership.md, proto/control.md).
 *
 * Decoding is a pure function of the bytes: no globals, no I/O, work
 * linear in the input, and no allocation except the member array of a
 * SYNC (checked against the bytes present before it is made). Encoding
 * checks every field against the limits the decoder enforces, so whatever
 * it produces decodes back to the same message. */
#include "starling/msg.h"

#include <string.h>

#include "starling/mpack.h"

/* Keys of every body map (proto/membership.md, proto/control.md). */
enum {
    K_FROM = 0,      /* membership: sender's name */
    K_FROM_ADDR = 1, /* membership: sender's address */
    K_GOSSIP = 2,    /* PING, PING_REQ, ACK, NACK: piggybacked updates */
    K_SEQ = 3,       /* PING, PING_REQ, ACK, NACK */
    K_TARGET = 4,    /* PING, PING_REQ, ACK */
    K_TARGET_ADDR = 5, /* PING_REQ */
    K_WANT_NACK = 6,   /* PING_REQ */
    K_JOIN = 3,      /* SYNC */
    K_REPLY = 4,     /* SYNC */
    K_MEMBERS = 5,   /* SYNC */
    K_ID = 3,        /* CTL_REQ, CTL_REP */
    K_CMD = 4,       /* CTL_REQ */
    K_ARGS = 5,      /* CTL_REQ */
    K_STATUS = 4,    /* CTL_REP */
    K_MORE = 5,      /* CTL_REP */
    K_BODY = 6,      /* CTL_REP */
};

/* Keys of a member record. */
enum {
    M_NAME = 0,
    M_ADDR = 1,
    M_INCARNATION = 2,
    M_STATE = 3,
    M_META = 4,
    M_FROM = 5,
    M_KEY_COUNT = 6
};

#define BODY_MAX_ENTRIES 32   /* keys in a body map, unknown ones included */
#define MEMBER_MAX_ENTRIES 16 /* keys in a member record */
#define MEMBER_MIN_LEN 15     /* smallest encoded member record */
#define CTL_CMD_MAX 32        /* command name bytes */
#define CTL_BODY_MAX (SL_MSG_MAX_LEN - 64)

/* The keys message `type` defines (all required in version 1), as a bit
 * mask; 0 for an unknown type. */
static uint32_t known_keys(uint8_t type) {
    const uint32_t sender = 1u << K_FROM | 1u << K_FROM_ADDR;
    switch (type) {
    case SL_MSG_PING:
        return sender | 1u << K_GOSSIP | 1u << K_SEQ | 1u << K_TARGET;
    case SL_MSG_PING_REQ:
        return sender | 1u << K_GOSSIP | 1u << K_SEQ | 1u << K_TARGET | 1u << K_TARGET_ADDR |
               1u << K_WANT_NACK;
    case SL_MSG_ACK:
        return sender | 1u << K_GOSSIP | 1u << K_SEQ | 1u << K_TARGET;
    case SL_MSG_NACK:
        return sender | 1u << K_GOSSIP | 1u << K_SEQ;
    case SL_MSG_SYNC:
        return sender | 1u << K_JOIN | 1u << K_REPLY | 1u << K_MEMBERS;
    case SL_MSG_CTL_REQ:
        return 1u << K_ID | 1u << K_CMD | 1u << K_ARGS;
    case SL_MSG_CTL_REP:
        return 1u << K_ID | 1u << K_STATUS | 1u << K_MORE | 1u << K_BODY;
    default:
        return 0;
    }
}

const char *sl_msg_type_name(uint8_t type) {
    switch (type) {
    case SL_MSG_PING: return "PING";
    case SL_MSG_PING_REQ: return "PING_REQ";
    case SL_MSG_ACK: return "ACK";
    case SL_MSG_NACK: return "NACK";
    case SL_MSG_SYNC: return "SYNC";
    case SL_MSG_CTL_REQ: return "CTL_REQ";
    case SL_MSG_CTL_REP: return "CTL_REP";
    default: return "?";
    }
}

/* Identifiers (names, addresses, command names, metadata keys) hold no
 * control characters: no byte below 0x20, no 0x7f. */
static bool ident_ok(const uint8_t *p, size_t len) {
    for (size_t i = 0; i < len; i++)
        if (p[i] < 0x20 || p[i] == 0x7f)
            return false;
    return true;
}

/* ---- Decoding ---- */

/* An identifier str of min_len..max_len bytes. */
static sl_err read_ident(sl_mpack_reader_t *r, size_t min_len, size_t max_len, sl_bytes_t *out) {
    const uint8_t *at = r->p;
    if (sl_mpack_read_str(r, min_len, max_len, &out->ptr, &out->len))
        return r->err;
    if (!ident_ok(out->ptr, out->len)) {
        r->p = at;
        return sl_mpack_reader_fail(r, SL_EPROTO);
    }
    return SL_OK;
}

static sl_err read_bool8(sl_mpack_reader_t *r, uint8_t *out) {
    bool b;
    sl_mpack_read_bool(r, &b);
    *out = b;
    return r->err;
}

static sl_err read_u32(sl_mpack_reader_t *r, uint32_t *out) {
    uint64_t v;
    sl_mpack_read_uint(r, UINT32_MAX, &v);
    *out = (uint32_t)v;
    return r->err;
}

/* Reads a metadata map (str -> str, canonical, within the limits). */
static sl_err read_meta_map(sl_mpack_reader_t *r) {
    sl_mpack_map_t m;
    const uint8_t *k, *v;
    size_t klen, vlen;
    if (sl_mpack_map_begin(r, SL_META_MAX_ENTRIES, &m))
        return r->err;
    while (sl_mpack_map_next_str(r, &m, SL_META_KEY_MAX, &k, &klen)) {
        const uint8_t *at = r->p;
        if (!ident_ok(k, klen)) {
            r->p = at;
            return sl_mpack_reader_fail(r, SL_EPROTO);
        }
        sl_mpack_read_str(r, 0, SL_META_VALUE_MAX, &v, &vlen);
    }
    return r->err;
}

/* Reads an embedded metadata map, at most SL_META_MAX_LEN bytes long: it
 * is parsed from a window of that size, so a longer one is SL_ETOOBIG. */
static sl_err read_meta(sl_mpack_reader_t *r, sl_bytes_t *out) {
    size_t left = sl_mpack_reader_left(r);
    size_t window = left < SL_META_MAX_LEN ? left : SL_META_MAX_LEN;
    sl_mpack_reader_t sub;
    sl_mpack_reader_init(&sub, r->p, window);
    if (read_meta_map(&sub)) {
        sl_err err = sub.err;
        if (err == SL_ETRUNC && left > SL_META_MAX_LEN)
            err = SL_ETOOBIG;
        r->p += sub.err_off;
        return sl_mpack_reader_fail(r, err);
    }
    size_t used = (size_t)(sub.p - r->p);
    out->ptr = used > 1 ? r->p : NULL; /* an empty map (0x80) is "no metadata" */
    out->len = used > 1 ? used : 0;
    r->p += used;
    return SL_OK;
}

sl_err sl_meta_validate(const uint8_t *meta, size_t len) {
    if (len == 0)
        return SL_OK;
    if (!meta)
        return SL_EINVAL;
    if (len > SL_META_MAX_LEN)
        return SL_ETOOBIG;
    sl_mpack_reader_t r;
    sl_mpack_reader_init(&r, meta, len);
    read_meta_map(&r);
    return sl_mpack_reader_end(&r);
}

static sl_err read_member(sl_mpack_reader_t *r, sl_member_msg_t *mm) {
    sl_mpack_map_t m;
    uint64_t key, v;
    uint32_t seen = 0;
    const uint8_t *start = r->p;
    memset(mm, 0, sizeof *mm);
    if (sl_mpack_map_begin(r, MEMBER_MAX_ENTRIES, &m))
        return r->err;
    while (sl_mpack_map_next(r, &m, &key)) {
        switch (key) {
        case M_NAME: read_ident(r, 1, SL_NAME_MAX, &mm->name); break;
        case M_ADDR: read_ident(r, 1, SL_ADDR_MAX, &mm->addr); break;
        case M_INCARNATION: sl_mpack_read_uint(r, UINT64_MAX, &mm->incarnation); break;
        case M_STATE:
            sl_mpack_read_uint(r, SL_STATE_LEFT, &v);
            mm->state = (uint8_t)v;
            break;
        case M_META: read_meta(r, &mm->meta); break;
        case M_FROM: read_ident(r, 0, SL_NAME_MAX, &mm->from); break;
        default: sl_mpack_skip(r, 1); break; /* a later version's field */
        }
        if (key < M_KEY_COUNT)
            seen |= 1u << key;
    }
    if (r->err)
        return r->err;
    if (seen != (1u << M_KEY_COUNT) - 1) {
        r->p = start;
        return sl_mpack_reader_fail(r, SL_EPROTO); /* a required key is missing */
    }
    return SL_OK;
}

static sl_err read_gossip(sl_mpack_reader_t *r, sl_msg_t *msg) {
    uint32_t n;
    if (sl_mpack_read_array(r, SL_GOSSIP_MAX, &n))
        return r->err;
    for (uint32_t i = 0; i < n; i++)
        if (read_member(r, &msg->gossip[i]))
            return r->err;
    msg->gossip_count = n;
    return SL_OK;
}

static sl_err read_members(sl_mpack_reader_t *r, sl_sync_t *sync) {
    uint32_t n;
    const uint8_t *at = r->p;
    if (sl_mpack_read_array(r, SL_SYNC_MAX_MEMBERS, &n))
        return r->err;
    if ((uint64_t)n * MEMBER_MIN_LEN > sl_mpack_reader_left(r)) {
        r->p = at;
        return sl_mpack_reader_fail(r, SL_ETRUNC); /* before allocating */
    }
    if (n == 0)
        return SL_OK;
    sync->members = sl_calloc(n, sizeof *sync->members);
    if (!sync->members)
        return sl_mpack_reader_fail(r, SL_ENOMEM);
    for (uint32_t i = 0; i < n; i++) {
        if (read_member(r, &sync->members[i]))
            return r->err;
        sync->member_count = i + 1;
    }
    return SL_OK;
}

static sl_err read_args(sl_mpack_reader_t *r, sl_ctl_req_t *req) {
    uint32_t n;
    if (sl_mpack_read_array(r, SL_CTL_MAX_ARGS, &n))
        return r->err;
    for (uint32_t i = 0; i < n; i++)
        if (sl_mpack_read_bin(r, 0, SL_CTL_ARG_MAX, &req->args[i].ptr, &req->args[i].len))
            return r->err;
    req->arg_count = n;
    return SL_OK;
}

/* Reads the value of body key `key` of a message of msg->type; the key is
 * known to be defined for that type. */
static sl_err read_field(sl_mpack_reader_t *r, sl_msg_t *msg, uint64_t key) {
    if (key == K_FROM)
        return read_ident(r, 1, SL_NAME_MAX, &msg->from);
    if (key == K_FROM_ADDR)
        return read_ident(r, 1, SL_ADDR_MAX, &msg->from_addr);
    switch (msg->type) {
    case SL_MSG_PING:
        if (key == K_GOSSIP) return read_gossip(r, msg);
        if (key == K_SEQ) return read_u32(r, &msg->u.ping.seq);
        return read_ident(r, 1, SL_NAME_MAX, &msg->u.ping.target);
    case SL_MSG_PING_REQ:
        if (key == K_GOSSIP) return read_gossip(r, msg);
        if (key == K_SEQ) return read_u32(r, &msg->u.ping_req.seq);
        if (key == K_TARGET) return read_ident(r, 1, SL_NAME_MAX, &msg->u.ping_req.target);
        if (key == K_TARGET_ADDR)
            return read_ident(r, 1, SL_ADDR_MAX, &msg->u.ping_req.target_addr);
        return read_bool8(r, &msg->u.ping_req.want_nack);
    case SL_MSG_ACK:
        if (key == K_GOSSIP) return read_gossip(r, msg);
        if (key == K_SEQ) return read_u32(r, &msg->u.ack.seq);
        return read_ident(r, 1, SL_NAME_MAX, &msg->u.ack.target);
    case SL_MSG_NACK:
        if (key == K_GOSSIP) return read_gossip(r, msg);
        return read_u32(r, &msg->u.nack.seq);
    case SL_MSG_SYNC:
        if (key == K_JOIN) return read_bool8(r, &msg->u.sync.join);
        if (key == K_REPLY) return read_bool8(r, &msg->u.sync.reply);
        return read_members(r, &msg->u.sync);
    case SL_MSG_CTL_REQ:
        if (key == K_ID) return read_u32(r, &msg->u.ctl_req.id);
        if (key == K_CMD) return read_ident(r, 1, CTL_CMD_MAX, &msg->u.ctl_req.cmd);
        return read_args(r, &msg->u.ctl_req);
    case SL_MSG_CTL_REP:
        if (key == K_ID) return read_u32(r, &msg->u.ctl_rep.id);
        if (key == K_STATUS) return read_u32(r, &msg->u.ctl_rep.status);
        if (key == K_MORE) return read_bool8(r, &msg->u.ctl_rep.more);
        return sl_mpack_read_bin(r, 0, CTL_BODY_MAX, &msg->u.ctl_rep.body.ptr,
                                 &msg->u.ctl_rep.body.len);
    default:
        return sl_mpack_reader_fail(r, SL_EINTERNAL);
    }
}

/* Checks the 4-byte header; sets `*type`. */
static sl_err decode_header(const uint8_t *h, size_t len, uint8_t *type) {
    if (len < SL_WIRE_HEADER_LEN || !h)
        return SL_ETRUNC;
    if (len > SL_WIRE_HEADER_LEN)
        return SL_EPROTO;
    if (h[0] != SL_WIRE_MAGIC0 || h[1] != SL_WIRE_MAGIC1)
        return SL_EPROTO;
    if (h[2] != SL_WIRE_VERSION)
        return SL_EVERSION;
    if (known_keys(h[3]) == 0)
        return SL_ETYPE;
    *type = h[3];
    return SL_OK;
}

sl_err sl_msg_decode(const uint8_t *header, size_t header_len, const uint8_t *body,
                     size_t body_len, sl_msg_t *msg) {
    sl_mpack_reader_t r;
    sl_mpack_map_t m;
    uint64_t key;
    uint8_t type = 0;
    uint32_t seen = 0;
    memset(msg, 0, sizeof *msg);
    if (!body && body_len)
        return SL_EINVAL;
    sl_err err = decode_header(header, header_len, &type);
    if (err)
        return err;
    if (body_len > SL_MSG_MAX_LEN)
        return SL_ETOOBIG;
    msg->type = type;
    uint32_t known = known_keys(type);
    sl_mpack_reader_init(&r, body_len ? body : NULL, body_len);
    sl_mpack_map_begin(&r, BODY_MAX_ENTRIES, &m);
    while (sl_mpack_map_next(&r, &m, &key)) {
        if (key < 32 && (known & 1u << key)) {
            read_field(&r, msg, key);
            seen |= 1u << key;
        } else {
            sl_mpack_skip(&r, SL_MSG_MAX_DEPTH - 1); /* a later version's field */
        }
    }
    if (r.err == SL_OK && seen != known)
        sl_mpack_reader_fail(&r, SL_EPROTO); /* a required key is missing */
    err = sl_mpack_reader_end(&r);
    if (err) {
        sl_msg_fini(msg);
        memset(msg, 0, sizeof *msg);
    }
    return err;
}

void sl_msg_fini(sl_msg_t *msg) {
    if (!msg)
        return;
    if (msg->type == SL_MSG_SYNC) {
        sl_free(msg->u.sync.members);
        msg->u.sync.members = NULL;
        msg->u.sync.member_count = 0;
    }
}

/* ---- Encoding ---- */

/* Checks a byte string about to be sent as an identifier. */
static sl_err check_ident(sl_bytes_t b, size_t min_len, size_t max_len) {
    if (b.len > max_len)
        return SL_ETOOBIG;
    if (b.len < min_len || (b.len && !b.ptr))
        return SL_EINVAL;
    if (!ident_ok(b.ptr, b.len) || !sl_mpack_utf8_valid(b.ptr, b.len))
        return SL_EINVAL;
    return SL_OK;
}

static sl_err check_bytes(sl_bytes_t b, size_t max_len) {
    if (b.len > max_len)
        return SL_ETOOBIG;
    return b.len && !b.ptr ? SL_EINVAL : SL_OK;
}

static sl_err check_member(const sl_member_msg_t *mm) {
    sl_err err;
    if ((err = check_ident(mm->name, 1, SL_NAME_MAX)) ||
        (err = check_ident(mm->addr, 1, SL_ADDR_MAX)) ||
        (err = check_ident(mm->from, 0, SL_NAME_MAX)))
        return err;
    if (mm->state > SL_STATE_LEFT)
        return SL_EINVAL;
    if (mm->meta.len > SL_META_MAX_LEN)
        return SL_ETOOBIG;
    err = sl_meta_validate(mm->meta.ptr, mm->meta.len);
    return err == SL_OK || err == SL_ETOOBIG ? err : SL_EINVAL;
}

/* Checks every field of `msg` against the limits the decoder enforces. */
static sl_err check_msg(const sl_msg_t *msg) {
    sl_err err;
    uint32_t known = known_keys(msg->type);
    if (!known)
        return SL_ETYPE;
    bool member_msg = known & (1u << K_FROM);
    bool has_gossip = member_msg && msg->type != SL_MSG_SYNC;
    if (member_msg) {
        if ((err = check_ident(msg->from, 1, SL_NAME_MAX)) ||
            (err = check_ident(msg->from_addr, 1, SL_ADDR_MAX)))
            return err;
    } else if (msg->from.len || msg->from_addr.len) {
        return SL_EINVAL; /* control messages carry no sender */
    }
    if (msg->gossip_count > SL_GOSSIP_MAX)
        return SL_ETOOBIG;
    if (!has_gossip && msg->gossip_count)
        return SL_EINVAL;
    for (size_t i = 0; i < msg->gossip_count; i++)
        if ((err = check_member(&msg->gossip[i])))
            return err;
    switch (msg->type) {
    case SL_MSG_PING:
        return check_ident(msg->u.ping.target, 1, SL_NAME_MAX);
    case SL_MSG_PING_REQ:
        if ((err = check_ident(msg->u.ping_req.target, 1, SL_NAME_MAX)) ||
            (err = check_ident(msg->u.ping_req.target_addr, 1, SL_ADDR_MAX)))
            return err;
        return msg->u.ping_req.want_nack > 1 ? SL_EINVAL : SL_OK;
    case SL_MSG_ACK:
        return check_ident(msg->u.ack.target, 1, SL_NAME_MAX);
    case SL_MSG_NACK:
        return SL_OK;
    case SL_MSG_SYNC: {
        const sl_sync_t *s = &msg->u.sync;
        if (s->join > 1 || s->reply > 1)
            return SL_EINVAL;
        if (s->member_count > SL_SYNC_MAX_MEMBERS)
            return SL_ETOOBIG;
        if (s->member_count && !s->members)
            return SL_EINVAL;
        for (size_t i = 0; i < s->member_count; i++)
            if ((err = check_member(&s->members[i])))
                return err;
        return SL_OK;
    }
    case SL_MSG_CTL_REQ: {
        const sl_ctl_req_t *q = &msg->u.ctl_req;
        if ((err = check_ident(q->cmd, 1, CTL_CMD_MAX)))
            return err;
        if (q->arg_count > SL_CTL_MAX_ARGS)
            return SL_ETOOBIG;
        for (size_t i = 0; i < q->arg_count; i++)
            if ((err = check_bytes(q->args[i], SL_CTL_ARG_MAX)))
                return err;
        return SL_OK;
    }
    case SL_MSG_CTL_REP:
        if (msg->u.ctl_rep.more > 1)
            return SL_EINVAL;
        return check_bytes(msg->u.ctl_rep.body, CTL_BODY_MAX);
    default:
        return SL_ETYPE;
    }
}

static void write_bytes_str(sl_mpack_writer_t *w, sl_bytes_t b) {
    sl_mpack_write_str(w, b.ptr, b.len);
}

static void write_member(sl_mpack_writer_t *w, const sl_member_msg_t *mm) {
    static const uint8_t empty_map = 0x80;
    sl_mpack_write_map(w, M_KEY_COUNT);
    sl_mpack_write_uint(w, M_NAME);
    write_bytes_str(w, mm->name);
    sl_mpack_write_uint(w, M_ADDR);
    write_bytes_str(w, mm->addr);
    sl_mpack_write_uint(w, M_INCARNATION);
    sl_mpack_write_uint(w, mm->incarnation);
    sl_mpack_write_uint(w, M_STATE);
    sl_mpack_write_uint(w, mm->state);
    sl_mpack_write_uint(w, M_META);
    if (mm->meta.len)
        sl_mpack_write_raw(w, mm->meta.ptr, mm->meta.len);
    else
        sl_mpack_write_raw(w, &empty_map, 1);
    sl_mpack_write_uint(w, M_FROM);
    write_bytes_str(w, mm->from);
}

static void write_gossip(sl_mpack_writer_t *w, const sl_msg_t *msg) {
    sl_mpack_write_uint(w, K_GOSSIP);
    sl_mpack_write_array(w, (uint32_t)msg->gossip_count);
    for (size_t i = 0; i < msg->gossip_count; i++)
        write_member(w, &msg->gossip[i]);
}

/* Writes the body of a checked message; keys in ascending order. */
static sl_err write_body(sl_mpack_writer_t *w, const sl_msg_t *msg) {
    uint32_t known = known_keys(msg->type);
    uint32_t count = 0;
    for (uint32_t k = known; k; k &= k - 1)
        count++;
    sl_mpack_write_map(w, count);
    if (known & (1u << K_FROM)) {
        sl_mpack_write_uint(w, K_FROM);
        write_bytes_str(w, msg->from);
        sl_mpack_write_uint(w, K_FROM_ADDR);
        write_bytes_str(w, msg->from_addr);
    }
    switch (msg->type) {
    case SL_MSG_PING:
        write_gossip(w, msg);
        sl_mpack_write_uint(w, K_SEQ);
        sl_mpack_write_uint(w, msg->u.ping.seq);
        sl_mpack_write_uint(w, K_TARGET);
        write_bytes_str(w, msg->u.ping.target);
        break;
    case SL_MSG_PING_REQ:
        write_gossip(w, msg);
        sl_mpack_write_uint(w, K_SEQ);
        sl_mpack_write_uint(w, msg->u.ping_req.seq);
        sl_mpack_write_uint(w, K_TARGET);
        write_bytes_str(w, msg->u.ping_req.target);
        sl_mpack_write_uint(w, K_TARGET_ADDR);
        write_bytes_str(w, msg->u.ping_req.target_addr);
        sl_mpack_write_uint(w, K_WANT_NACK);
        sl_mpack_write_bool(w, msg->u.ping_req.want_nack);
        break;
    case SL_MSG_ACK:
        write_gossip(w, msg);
        sl_mpack_write_uint(w, K_SEQ);
        sl_mpack_write_uint(w, msg->u.ack.seq);
        sl_mpack_write_uint(w, K_TARGET);
        write_bytes_str(w, msg->u.ack.target);
        break;
    case SL_MSG_NACK:
        write_gossip(w, msg);
        sl_mpack_write_uint(w, K_SEQ);
        sl_mpack_write_uint(w, msg->u.nack.seq);
        break;
    case SL_MSG_SYNC:
        sl_mpack_write_uint(w, K_JOIN);
        sl_mpack_write_bool(w, msg->u.sync.join);
        sl_mpack_write_uint(w, K_REPLY);
        sl_mpack_write_bool(w, msg->u.sync.reply);
        sl_mpack_write_uint(w, K_MEMBERS);
        sl_mpack_write_array(w, (uint32_t)msg->u.sync.member_count);
        for (size_t i = 0; i < msg->u.sync.member_count; i++)
            write_member(w, &msg->u.sync.members[i]);
        break;
    case SL_MSG_CTL_REQ:
        sl_mpack_write_uint(w, K_ID);
        sl_mpack_write_uint(w, msg->u.ctl_req.id);
        sl_mpack_write_uint(w, K_CMD);
        write_bytes_str(w, msg->u.ctl_req.cmd);
        sl_mpack_write_uint(w, K_ARGS);
        sl_mpack_write_array(w, (uint32_t)msg->u.ctl_req.arg_count);
        for (size_t i = 0; i < msg->u.ctl_req.arg_count; i++)
            sl_mpack_write_bin(w, msg->u.ctl_req.args[i].ptr, msg->u.ctl_req.args[i].len);
        break;
    case SL_MSG_CTL_REP:
        sl_mpack_write_uint(w, K_ID);
        sl_mpack_write_uint(w, msg->u.ctl_rep.id);
        sl_mpack_write_uint(w, K_STATUS);
        sl_mpack_write_uint(w, msg->u.ctl_rep.status);
        sl_mpack_write_uint(w, K_MORE);
        sl_mpack_write_bool(w, msg->u.ctl_rep.more);
        sl_mpack_write_uint(w, K_BODY);
        sl_mpack_write_bin(w, msg->u.ctl_rep.body.ptr, msg->u.ctl_rep.body.len);
        break;
    default:
        return SL_ETYPE;
    }
    return w->err;
}

sl_err sl_msg_encode(const sl_msg_t *msg, uint8_t header[SL_WIRE_HEADER_LEN], uint8_t **body,
                     size_t *body_len) {
    sl_mpack_writer_t w;
    *body = NULL;
    *body_len = 0;
    sl_err err = check_msg(msg);
    if (err)
        return err;
    header[0] = SL_WIRE_MAGIC0;
    header[1] = SL_WIRE_MAGIC1;
    header[2] = SL_WIRE_VERSION;
    header[3] = msg->type;
    sl_mpack_writer_init(&w, SL_MSG_MAX_LEN);
    write_body(&w, msg);
    return sl_mpack_writer_finish(&w, body, body_len);
}

sl_err sl_msg_encoded_len(const sl_msg_t *msg, size_t *len) {
    sl_mpack_writer_t w;
    *len = 0;
    sl_err err = check_msg(msg);
    if (err)
        return err;
    sl_mpack_writer_init_count(&w, SL_MSG_MAX_LEN);
    if ((err = write_body(&w, msg)) == SL_OK)
        *len = w.len;
    sl_mpack_writer_fini(&w);
    return err;
}

sl_err sl_msg_ctl_req_encode(uint32_t id, const char *cmd, const sl_bytes_t *args,
                             size_t arg_count, uint8_t header[SL_WIRE_HEADER_LEN],
                             uint8_t **body, size_t *body_len) {
    if (arg_count > SL_CTL_MAX_ARGS)
        return SL_EINVAL;
    sl_msg_t req;
    memset(&req, 0, sizeof req);
    req.type = SL_MSG_CTL_REQ;
    req.u.ctl_req.id = id;
    req.u.ctl_req.cmd = sl_bytes_str(cmd);
    for (size_t i = 0; i < arg_count; i++)
        req.u.ctl_req.args[i] = args[i];
    req.u.ctl_req.arg_count = arg_count;
    return sl_msg_encode(&req, header, body, body_len);
}
