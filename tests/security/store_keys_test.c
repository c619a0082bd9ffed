/* Issue 12, item 12 (store part): NUL, newline, ESC and other control
 * characters were accepted in keys and printed raw by `peerctl keys` and
 * logs (terminal injection); refusals of network input were not told
 * apart; HLC-REJECT logged a line per message (21 MB of log).
 *
 *   local_keys    a local put, del, set add, counter add or map put
 *                 refuses a key with a C0 control, DEL or C1 control
 *                 (SL_EINVAL); other UTF-8 is fine
 *   network_keys  a DELTA or RESET SNAPSHOT from a peer carrying such a
 *                 key is refused whole and counted
 *   logs_limited  10,000 refused messages (bad keys, future stamps) in
 *                 one second log at most two lines each, and the next
 *                 line 10 s later says how many were left out
 */
#include <stdlib.h>

#include "starling/hlc.h"
#include "starling/store.h"
#include "testlib.h"

#define NOW 1000
#ifndef SL_HLC_LOG_EVERY_MS /* built against the code before the fix, to see it fail */
#define SL_HLC_LOG_EVERY_MS 10000
#endif

static const char *bad[] = {"a\nb", "esc\x1b[31mred", "bell\x07", "del\x7f", "c1\xc2\x9b" "2J",
                            "tab\tx", "cr\r"};

static sl_store_t *mk(uint64_t rid) {
    sl_store_t *s;
    CHECK_OK(sl_store_new(rid, NULL, &s));
    return s;
}

static void test_local_keys(void) {
    sl_store_t *s = mk(1);
    sl_store_msg_t d;
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        const char *k = bad[i];
        CHECK_ERR(sl_store_put(s, k, strlen(k), "v", 1, NOW, &d), SL_EINVAL);
        CHECK_ERR(sl_store_set_add(s, k, strlen(k), "e", 1, NOW, &d), SL_EINVAL);
        CHECK_ERR(sl_store_counter_add(s, k, strlen(k), 1, NOW, &d), SL_EINVAL);
        CHECK_ERR(sl_store_gmap_put(s, k, strlen(k), "f", 1, "v", 1, NOW, &d), SL_EINVAL);
        CHECK_ERR(sl_store_del(s, k, strlen(k), NOW, &d), SL_EINVAL);
    }
    /* NUL inside a key */
    CHECK_ERR(sl_store_put(s, "nul\0x", 5, "v", 1, NOW, &d), SL_EINVAL);
    /* invalid UTF-8 */
    CHECK_ERR(sl_store_put(s, "\xff\xfe", 2, "v", 1, NOW, &d), SL_EINVAL);
    /* printable UTF-8, including U+00A0 and above, is a key */
    const char *good = "study/ключ/é\xc2\xa0/日本";
    CHECK_OK(sl_store_put(s, good, strlen(good), "v", 1, NOW, &d));
    sl_store_msg_fini(&d);
    sl_store_stats_t st;
    sl_store_stats(s, &st);
    CHECK_INT(st.keys, 1);
    sl_store_destroy(&s);
}

/* A DELTA from replica 0x77 with one LWW atom under `key`. */
static sl_err send_key(sl_store_t *to, const char *key, size_t key_len, uint64_t seq,
                       uint64_t hlc) {
    sl_store_range_t r = {0x77, seq - 1, seq};
    sl_store_item_t item = {.key = (const uint8_t *)key, .key_len = (uint32_t)key_len,
                            .it = {.kind = SL_ITEM_LWW, .type = SL_CRDT_LWW, .dot = {0x77, seq},
                                   .hlc = hlc, .a = (const uint8_t *)"x", .a_len = 1}};
    sl_store_dmsg_t m = {.type = SL_STORE_MSG_DELTA, .sender = 0x77, .ranges = &r,
                         .range_count = 1, .items = &item, .item_count = 1};
    sl_store_msg_t msg;
    CHECK_OK(sl_store_msg_encode(&m, 1 << 20, &msg));
    sl_store_out_t o;
    sl_store_out_init(&o);
    sl_err err = sl_store_receive(to, msg.type, msg.body, msg.len, NOW, &o, &(bool){0});
    sl_store_out_fini(&o);
    sl_store_msg_fini(&msg);
    return err;
}

static void test_network_keys(void) {
    sl_store_t *s = mk(1);
    uint64_t hlc = sl_hlc_make(NOW - 10, 0);
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        CHECK_ERR(send_key(s, bad[i], strlen(bad[i]), 1, hlc), SL_EPROTO);
    CHECK_ERR(send_key(s, "nul\0x", 5, 1, hlc), SL_EPROTO);
    sl_store_stats_t st;
    sl_store_stats(s, &st);
    CHECK_INT(st.keys, 0);
    CHECK_INT(st.rejected, sizeof bad / sizeof *bad + 1);
    CHECK_INT(sl_store_vv_get(s, 0x77), 0);
    /* the same replica's next, clean write still applies */
    CHECK_OK(send_key(s, "clean", 5, 1, hlc));
    sl_store_stats(s, &st);
    CHECK_INT(st.keys, 1);
    sl_store_destroy(&s);
}

typedef struct {
    int lines;     /* lines with the id below */
    const char *id;/* the log id counted */
    char last[512];/* the last such line */
} count_t;

static void sink(void *ctx, int level, const char *id, const char *msg) {
    count_t *c = ctx;
    (void)level;
    if (strcmp(id, c->id) == 0) {
        c->lines++;
        snprintf(c->last, sizeof c->last, "%s", msg);
    }
}

static void test_logs_limited(void) {
    sl_store_t *s = mk(1);
    sl_log_set_level(SL_LOG_DEBUG);
    count_t bad_msg = {.id = "STORE-BAD-MSG"}, hlc = {.id = "HLC-REJECT"};
    sl_log_set_sink(sink, &bad_msg);
    uint64_t ok_hlc = sl_hlc_make(NOW - 10, 0);
    for (int i = 0; i < 10000; i++)
        send_key(s, "k\x1b", 2, 1, ok_hlc);
    CHECK_MSG(bad_msg.lines <= 2, "%d STORE-BAD-MSG lines for 10,000 refusals", bad_msg.lines);
    sl_log_set_sink(sink, &hlc);
    uint64_t future = sl_hlc_make(NOW + 60000, 0);
    for (int i = 0; i < 10000; i++)
        send_key(s, "k", 1, 1, future);
    CHECK_MSG(hlc.lines <= 2, "%d HLC-REJECT lines for 10,000 rejections", hlc.lines);
    /* 10 s later: one line, and it counts the ones left out */
    sl_hlc_t c;
    sl_hlc_init(&c, 500);
    hlc.lines = 0;
    for (int i = 0; i < 1000; i++)
        sl_hlc_update(&c, 5000, future * 10, 9, NULL);
    sl_hlc_update(&c, 5000 + SL_HLC_LOG_EVERY_MS, sl_hlc_make(99999999, 0), 9, NULL);
    CHECK_INT(hlc.lines, 2);
    CHECK_MSG(strstr(hlc.last, "999 more") != NULL, "the line does not count: %s", hlc.last);
    CHECK_INT(c.rejected, 1001);
    sl_log_set_sink(NULL, NULL);
    sl_log_set_level(SL_LOG_ERR);
    sl_store_destroy(&s);
}

int main(void) {
    sl_log_set_level(SL_LOG_ERR);
    sl_test_run("local_keys", test_local_keys);
    sl_test_run("network_keys", test_network_keys);
    sl_test_run("logs_limited", test_logs_limited);
    return sl_test_finish();
}
