/* Wire messages: the decoded form of every message peers and clients send,
 * and the pure codec between bytes and that form (proto/envelope.md,
 * proto/membership.md, proto/control.md).
 *
 * Framing: a message is two ZeroMQ frames, a 4-byte header (magic "SL",
 * version, type) and a body in canonical msgpack. Decoded strings and
 * byte strings are views into the input buffer: a decoded sl_msg_t is valid
 * while the buffer it came from lives, and sl_msg_fini() releases what the
 * decoder allocated (only the member array of a SYNC message). */
#ifndef STARLING_MSG_H
#define STARLING_MSG_H

#include <stddef.h>
#include <stdint.h>

#include "starling/common.h"

#ifdef __cplusplus
extern "C" {
#endif

#define SL_WIRE_MAGIC0 0x53 /* 'S' */
#define SL_WIRE_MAGIC1 0x4C /* 'L' */
#define SL_WIRE_VERSION 1
#define SL_WIRE_HEADER_LEN 4

/* Limits every decoder enforces (proto/envelope.md, "Limits"). */
#define SL_MSG_MAX_LEN (4u << 20)  /* body bytes */
#define SL_NAME_MAX 64             /* member name bytes */
#define SL_ADDR_MAX 128            /* "tcp://host:port" bytes */
#define SL_META_MAX_LEN 512        /* encoded metadata map bytes */
#define SL_META_MAX_ENTRIES 16     /* metadata map entries */
#define SL_META_KEY_MAX 32         /* metadata key bytes */
#define SL_META_VALUE_MAX 128      /* metadata value bytes */
#define SL_GOSSIP_MAX 32           /* piggybacked updates per message */
#define SL_SYNC_MAX_MEMBERS 16384  /* member records in one SYNC */
#define SL_CTL_MAX_ARGS 16         /* arguments of a control request */
#define SL_CTL_ARG_MAX (1u << 20)  /* bytes of one control argument */
#define SL_MSG_MAX_DEPTH 4         /* nesting depth of maps and arrays */

typedef enum {
    SL_MSG_PING = 1,      /* direct probe */
    SL_MSG_PING_REQ = 2,  /* ask a member to probe another for us */
    SL_MSG_ACK = 3,       /* reply to PING (or forwarded for PING_REQ) */
    SL_MSG_NACK = 4,      /* PING_REQ relay: "I could not reach the target" */
    SL_MSG_SYNC = 5,      /* push-pull of the whole member table */
    SL_MSG_CTL_REQ = 64,  /* client request (peerctl) */
    SL_MSG_CTL_REP = 65,  /* reply to a client request (one or a stream) */
    /* Types 16..63 are reserved for the store and study protocols. */
} sl_msg_type;

typedef enum {
    SL_STATE_ALIVE = 0,
    SL_STATE_SUSPECT = 1,
    SL_STATE_DEAD = 2,
    SL_STATE_LEFT = 3
} sl_member_state;

/* A borrowed byte string (not NUL-terminated). */
typedef struct {
    const uint8_t *ptr; /* first byte, or NULL when len is 0 */
    size_t len;         /* bytes */
} sl_bytes_t;

/* What one member is, as far as the sender knows: the unit of gossip and of
 * push-pull. `meta` is an encoded canonical msgpack map str -> str
 * (validated by the decoder; empty means no metadata). */
typedef struct {
    sl_bytes_t name;      /* member id, 1..SL_NAME_MAX bytes */
    sl_bytes_t addr;      /* advertised endpoint, 1..SL_ADDR_MAX bytes */
    uint64_t incarnation; /* only grows; the member alone raises it */
    uint8_t state;        /* sl_member_state */
    sl_bytes_t meta;      /* encoded metadata map, 0..SL_META_MAX_LEN bytes */
    sl_bytes_t from;      /* SUSPECT/DEAD: who declared it (may be empty) */
} sl_member_msg_t;

/* PING: probe `target`; piggybacks gossip. */
typedef struct {
    uint32_t seq;         /* sender's probe sequence number */
    sl_bytes_t target;    /* name the sender believes it is probing */
} sl_ping_t;

/* PING_REQ: ask the receiver to probe `target` at `target_addr` and relay
 * the ACK (or a NACK if `want_nack` and the target stays silent). */
typedef struct {
    uint32_t seq;           /* the requester's probe sequence number */
    sl_bytes_t target;      /* member to probe */
    sl_bytes_t target_addr; /* where to probe it */
    uint8_t want_nack;      /* 1: send NACK on timeout (Lifeguard) */
} sl_ping_req_t;

/* ACK: `seq` answered; `target` is the member that was probed (the sender
 * itself for a direct probe, the relayed member for PING_REQ). */
typedef struct {
    uint32_t seq;      /* sequence number being answered */
    sl_bytes_t target; /* member whose liveness this proves */
} sl_ack_t;

/* NACK: the relay for `seq` did not hear from its target in time. */
typedef struct {
    uint32_t seq; /* sequence number of the PING_REQ */
} sl_nack_t;

/* SYNC: the sender's full member table (push); `reply` 0 asks for the
 * receiver's table back (pull), 1 is that answer. `join` marks the first
 * exchange of a joining member. */
typedef struct {
    uint8_t join;             /* 1: sender is joining */
    uint8_t reply;            /* 1: this answers a SYNC */
    sl_member_msg_t *members; /* member records (decoder-allocated) */
    size_t member_count;      /* 0..SL_SYNC_MAX_MEMBERS */
} sl_sync_t;

/* CTL_REQ: a client command ("members", "stats", "put", ...) and its
 * string or byte arguments. `id` is echoed in every reply frame. */
typedef struct {
    uint32_t id;                     /* client's request id */
    sl_bytes_t cmd;                  /* command name, 1..32 bytes */
    sl_bytes_t args[SL_CTL_MAX_ARGS];/* arguments */
    size_t arg_count;                /* 0..SL_CTL_MAX_ARGS */
} sl_ctl_req_t;

/* CTL_REP: reply to a CTL_REQ. `status` is an sl_err; `body` is JSON text
 * (or raw bytes for byte-valued commands); `more` 1 means further replies
 * follow for the same request (streams, large results). */
typedef struct {
    uint32_t id;     /* the request's id */
    uint32_t status; /* sl_err: SL_OK or why it failed */
    uint8_t more;    /* 1: more replies follow */
    sl_bytes_t body; /* payload, 0..SL_MSG_MAX_LEN - 64 bytes */
} sl_ctl_rep_t;

/* One decoded message. `from` and `from_addr` identify the sending member
 * (membership messages only; empty for control messages). `gossip` is the
 * piggybacked updates of PING, ACK, NACK and PING_REQ. */
typedef struct {
    uint8_t type;           /* sl_msg_type */
    sl_bytes_t from;        /* sender's member name */
    sl_bytes_t from_addr;   /* sender's advertised address */
    sl_member_msg_t gossip[SL_GOSSIP_MAX]; /* piggybacked updates */
    size_t gossip_count;    /* 0..SL_GOSSIP_MAX */
    union {
        sl_ping_t ping;
        sl_ping_req_t ping_req;
        sl_ack_t ack;
        sl_nack_t nack;
        sl_sync_t sync;
        sl_ctl_req_t ctl_req;
        sl_ctl_rep_t ctl_rep;
    } u;
} sl_msg_t;

/* Decodes header + body. On error returns why (SL_EPROTO, SL_ETRUNC,
 * SL_ETOOBIG, SL_EVERSION, SL_ETYPE, SL_ENONCANON, SL_ENOMEM) and leaves
 * `msg` needing no sl_msg_fini. Pure: no I/O, no globals, bounded work. */
sl_err sl_msg_decode(const uint8_t *header, size_t header_len,
                     const uint8_t *body, size_t body_len, sl_msg_t *msg);

/* Encodes `msg` canonically: `header` gets SL_WIRE_HEADER_LEN bytes and
 * `*body` a buffer from sl_malloc (caller frees with sl_free). Returns
 * SL_ETOOBIG if the body would exceed SL_MSG_MAX_LEN or a field its limit;
 * SL_EINVAL for a field the decoder would refuse (an empty name, control
 * characters or invalid UTF-8 in a name or address, invalid metadata, a
 * state above 3, a flag above 1, gossip on a SYNC, sender fields on a
 * control message); SL_ETYPE for an unknown type; SL_ENOMEM. Whatever it
 * encodes decodes back to an equal message. */
sl_err sl_msg_encode(const sl_msg_t *msg, uint8_t header[SL_WIRE_HEADER_LEN],
                     uint8_t **body, size_t *body_len);

/* A CTL_REQ for `cmd` with `arg_count` (<= SL_CTL_MAX_ARGS, else
 * SL_EINVAL) arguments, encoded as sl_msg_encode does: what every client
 * sends. */
sl_err sl_msg_ctl_req_encode(uint32_t id, const char *cmd, const sl_bytes_t *args,
                             size_t arg_count, uint8_t header[SL_WIRE_HEADER_LEN],
                             uint8_t **body, size_t *body_len);

/* Encoded size of the body without building it (for the simulator's
 * bytes-per-node figures). */
sl_err sl_msg_encoded_len(const sl_msg_t *msg, size_t *len);

/* Releases what sl_msg_decode allocated. Idempotent. */
void sl_msg_fini(sl_msg_t *msg);

/* Validates an encoded metadata map (canonical map str -> str within the
 * limits above). */
sl_err sl_meta_validate(const uint8_t *meta, size_t len);

/* Name of a message type ("PING"), or "?" for an unknown one. */
const char *sl_msg_type_name(uint8_t type);

/* A view of a NUL-terminated string. */
static inline sl_bytes_t sl_bytes_str(const char *s) {
    sl_bytes_t b = {(const uint8_t *)s, 0};
    while (s && s[b.len])
        b.len++;
    return b;
}

#ifdef __cplusplus
}
#endif
#endif
