/* Field-by-field equality of two decoded wire messages, shared by
 * tests/msg_test.c and the fuzz target. */
#ifndef STARLING_TESTS_MSG_EQ_H
#define STARLING_TESTS_MSG_EQ_H

#include <stdbool.h>
#include <string.h>

#include "starling/msg.h"

static inline bool sl_test_bytes_eq(sl_bytes_t a, sl_bytes_t b) {
    return a.len == b.len && (a.len == 0 || memcmp(a.ptr, b.ptr, a.len) == 0);
}

static inline bool sl_test_member_eq(const sl_member_msg_t *a, const sl_member_msg_t *b) {
    return sl_test_bytes_eq(a->name, b->name) && sl_test_bytes_eq(a->addr, b->addr) &&
           a->incarnation == b->incarnation && a->state == b->state &&
           sl_test_bytes_eq(a->meta, b->meta) && sl_test_bytes_eq(a->from, b->from);
}

static inline bool sl_test_msg_eq(const sl_msg_t *a, const sl_msg_t *b) {
    if (a->type != b->type || !sl_test_bytes_eq(a->from, b->from) ||
        !sl_test_bytes_eq(a->from_addr, b->from_addr) || a->gossip_count != b->gossip_count)
        return false;
    for (size_t i = 0; i < a->gossip_count; i++)
        if (!sl_test_member_eq(&a->gossip[i], &b->gossip[i]))
            return false;
    switch (a->type) {
    case SL_MSG_PING:
        return a->u.ping.seq == b->u.ping.seq &&
               sl_test_bytes_eq(a->u.ping.target, b->u.ping.target);
    case SL_MSG_PING_REQ:
        return a->u.ping_req.seq == b->u.ping_req.seq &&
               sl_test_bytes_eq(a->u.ping_req.target, b->u.ping_req.target) &&
               sl_test_bytes_eq(a->u.ping_req.target_addr, b->u.ping_req.target_addr) &&
               a->u.ping_req.want_nack == b->u.ping_req.want_nack;
    case SL_MSG_ACK:
        return a->u.ack.seq == b->u.ack.seq && sl_test_bytes_eq(a->u.ack.target, b->u.ack.target);
    case SL_MSG_NACK:
        return a->u.nack.seq == b->u.nack.seq;
    case SL_MSG_SYNC:
        if (a->u.sync.join != b->u.sync.join || a->u.sync.reply != b->u.sync.reply ||
            a->u.sync.member_count != b->u.sync.member_count)
            return false;
        for (size_t i = 0; i < a->u.sync.member_count; i++)
            if (!sl_test_member_eq(&a->u.sync.members[i], &b->u.sync.members[i]))
                return false;
        return true;
    case SL_MSG_CTL_REQ:
        if (a->u.ctl_req.id != b->u.ctl_req.id ||
            !sl_test_bytes_eq(a->u.ctl_req.cmd, b->u.ctl_req.cmd) ||
            a->u.ctl_req.arg_count != b->u.ctl_req.arg_count)
            return false;
        for (size_t i = 0; i < a->u.ctl_req.arg_count; i++)
            if (!sl_test_bytes_eq(a->u.ctl_req.args[i], b->u.ctl_req.args[i]))
                return false;
        return true;
    case SL_MSG_CTL_REP:
        return a->u.ctl_rep.id == b->u.ctl_rep.id && a->u.ctl_rep.status == b->u.ctl_rep.status &&
               a->u.ctl_rep.more == b->u.ctl_rep.more &&
               sl_test_bytes_eq(a->u.ctl_rep.body, b->u.ctl_rep.body);
    default:
        return false;
    }
}

#endif
