/* The blob service inside the daemon's loop (src/blob_node.c): three
 * peers on loopback in one process, stepped in turn, R = 2. A put from a
 * buffer settles on exactly the two placed peers; a peer without a copy
 * gets it to a file through the completion callback; an unknown hash is
 * refused; when a holder stops, the survivors restore two copies; when it
 * comes back with its copy, the extra copy outside the placement goes. */
#include <dirent.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "starling/blob_node.h"
#include "starling/msg.h"
#include "starling/peer.h"
#include "starling/platform.h"
#include "starling/store_node.h"
#include "testlib.h"

#define DEADLINE_MS 20000
#define NPEERS 3

static char tmpdir[256];

static uint64_t ms_since(uint64_t t0) { return (sl_plat_now_ns() - t0) / 1000000ull; }

static void rm_rf(const char *dir) {
    DIR *d = opendir(dir);
    if (!d)
        return;
    struct dirent *e;
    char p[768];
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        struct stat st;
        if (lstat(p, &st) == 0 && S_ISDIR(st.st_mode))
            rm_rf(p);
        else
            unlink(p);
    }
    closedir(d);
    rmdir(dir);
}

typedef struct {
    sl_node_t *node;        /* the loop */
    sl_store_node_t *store; /* the store module */
    sl_blob_node_t *blobs;  /* the blob service */
    const char *name;       /* member name */
} peer_t;

static void start(peer_t *p, const char *name, const char *seed) {
    char data[512], sdir[600], bdir[600];
    snprintf(data, sizeof data, "%s/%s", tmpdir, name);
    snprintf(sdir, sizeof sdir, "%s/%s-store", tmpdir, name);
    snprintf(bdir, sizeof bdir, "%s/%s-blob", tmpdir, name);
    const char *seeds[1] = {seed};
    sl_node_config_t cfg = {.name = name, .listen = "tcp://127.0.0.1:0", .data_dir = data,
                            .seeds = seeds, .seed_count = seed ? 1 : 0, .leave_wait_ms = 100};
    sl_swim_config_defaults(&cfg.swim);
    cfg.swim.timing.probe_interval_ms = 100;
    cfg.swim.timing.probe_timeout_ms = 50;
    cfg.swim.timing.gossip_interval_ms = 20;
    p->name = name;
    CHECK_OK(sl_node_new(&cfg, &p->node));
    sl_store_node_config_t scfg = {.dir = sdir, .sync_ms = 50};
    if (p->node)
        CHECK_OK(sl_store_node_attach(p->node, &scfg, &p->store));
    sl_blob_node_config_t bcfg = {.dir = bdir, .reconcile_ms = 200, .timeout_ms = 1000};
    if (p->store)
        CHECK_OK(sl_blob_node_attach(p->node, p->store, &bcfg, &p->blobs));
}

static void stop(peer_t *p) {
    sl_node_destroy(&p->node);
    sl_blob_node_destroy(&p->blobs);
    sl_store_node_destroy(&p->store);
    CHECK(p->blobs == NULL);
}

static void step(peer_t *ps, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (ps[i].node)
            sl_node_step(ps[i].node, 1);
}

#define WAIT_FOR(cond)                                                                             \
    do {                                                                                           \
        uint64_t t0_ = sl_plat_now_ns();                                                           \
        while (!(cond) && ms_since(t0_) < DEADLINE_MS)                                             \
            step(ps, NPEERS);                                                                      \
        CHECK_MSG(cond, "timed out waiting for %s", #cond);                                        \
    } while (0)

/* Does `viewer` record `who` as holder of `hash`? */
static bool holder(peer_t *viewer, peer_t *who, const uint8_t *hash) {
    char key[256], hex[65];
    sl_hex(hash, SL_BLAKE2B_LEN, hex);
    int n = snprintf(key, sizeof key, "blob/%s/h/%s", hex, who->name);
    const uint8_t *v;
    size_t vl;
    return sl_store_get(sl_store_node_store(viewer->store), key, (size_t)n, &v, &vl) == SL_OK;
}

typedef struct {
    int calls;     /* times called */
    sl_err err;    /* last outcome */
} done_t;

static void on_done(void *ctx, sl_err err, const uint8_t hash[SL_BLAKE2B_LEN]) {
    (void)hash;
    done_t *d = ctx;
    d->calls++;
    d->err = err;
}

static bool alive_all(peer_t *ps, size_t want) {
    for (int i = 0; i < NPEERS; i++)
        if (ps[i].node && sl_swim_alive_count(sl_node_swim(ps[i].node)) != want)
            return false;
    return true;
}

static void test_put_get_rereplicate(void) {
    peer_t ps[NPEERS] = {{0}};
    static const char *names[NPEERS] = {"a", "b", "c"};
    start(&ps[0], names[0], NULL);
    if (!ps[0].blobs)
        return;
    for (int i = 1; i < NPEERS; i++)
        start(&ps[i], names[i], sl_node_addr(ps[0].node));
    WAIT_FOR(alive_all(ps, NPEERS));

    size_t len = 2 * SL_BLOB_CHUNK_LEN + 12345;
    uint8_t *data = malloc(len);
    for (size_t i = 0; i < len; i++)
        data[i] = (uint8_t)(i * 2654435761u >> 13);
    uint8_t h[SL_BLAKE2B_LEN];
    CHECK_OK(sl_blob_node_put(ps[0].blobs, data, len, h));
    sl_blob_manifest_t m;
    CHECK_OK(sl_blob_manifest_build(data, len, 0, &m));
    CHECK(!memcmp(m.hash, h, SL_BLAKE2B_LEN));
    sl_blob_manifest_fini(&m);

    /* durable here at once; two alive copies soon */
    CHECK(sl_blob_node_holders(ps[0].blobs, h) >= 1);
    WAIT_FOR(sl_blob_node_holders(ps[0].blobs, h) >= 2);
    /* placement settles on the two placed peers, as every peer sees it */
    size_t placed[2];
    CHECK_INT(sl_blob_place(h, names, NPEERS, 2, placed), 2);
    peer_t *p0 = &ps[placed[0]], *p1 = &ps[placed[1]];
    peer_t *other = &ps[3 - placed[0] - placed[1]];
    for (int i = 0; i < NPEERS; i++)
        WAIT_FOR(holder(&ps[i], p0, h) && holder(&ps[i], p1, h) && !holder(&ps[i], other, h));

    /* the third peer gets it to a file: the callback says when */
    char path[600];
    snprintf(path, sizeof path, "%s/out.bin", tmpdir);
    done_t d = {0, SL_EINTERNAL};
    CHECK_OK(sl_blob_node_get_file(other->blobs, h, path, on_done, &d));
    WAIT_FOR(d.calls == 1);
    CHECK_INT(d.err, SL_OK);
    uint8_t *got;
    size_t got_len;
    CHECK_OK(sl_plat_read_file(path, len + 1, &got, &got_len));
    CHECK(got_len == len && !memcmp(got, data, len));
    sl_free(got);
    /* ... and reads it in memory too, verified */
    CHECK_OK(sl_blob_node_read(other->blobs, h, &got, &got_len));
    CHECK(got_len == len && !memcmp(got, data, len));
    sl_free(got);
    /* it is a cached copy, not a holder */
    CHECK(!holder(other, other, h));

    /* an unknown blob */
    uint8_t nope[SL_BLAKE2B_LEN];
    memset(nope, 0xee, sizeof nope);
    CHECK_ERR(sl_blob_node_fetch(other->blobs, nope, on_done, &d), SL_ENOTFOUND);
    CHECK_INT(d.calls, 1);

    sl_blob_node_stats_t st;
    sl_blob_node_stats(ps[0].blobs, &st);
    CHECK_INT(st.puts, 1);
    CHECK_INT(st.corrupt, 0);
    uint64_t replicated = 0;
    for (int i = 0; i < NPEERS; i++) {
        sl_blob_node_stats(ps[i].blobs, &st);
        replicated += st.replicated;
    }
    CHECK(replicated >= 1);

    /* a holder stops for good: the two alive peers both hold it again */
    stop(p0);
    WAIT_FOR(alive_all(ps, NPEERS - 1));
    WAIT_FOR(holder(other, other, h) && holder(other, p1, h) && holder(p1, other, h));
    CHECK_OK(sl_blob_node_read(other->blobs, h, &got, &got_len));
    CHECK(got_len == len && !memcmp(got, data, len));
    sl_free(got);
    CHECK_INT(sl_blob_node_holders(other->blobs, h), 2);

    /* the stopped holder comes back with its copy: three holders, and the
     * one outside the placement drops its extra copy */
    start(p0, names[placed[0]], sl_node_addr(p1->node));
    WAIT_FOR(alive_all(ps, NPEERS));
    WAIT_FOR(holder(p1, p0, h) && holder(p1, p1, h) && !holder(p1, other, h) &&
             holder(other, p0, h) && !holder(other, other, h));
    uint64_t dropped = 0;
    for (int i = 0; i < NPEERS; i++) {
        sl_blob_node_stats(ps[i].blobs, &st);
        dropped += st.dropped;
    }
    CHECK(dropped >= 1);
    CHECK_OK(sl_blob_node_read(p0->blobs, h, &got, &got_len));
    CHECK(got_len == len && !memcmp(got, data, len));
    sl_free(got);
    free(data);
    for (int i = 0; i < NPEERS; i++)
        stop(&ps[i]);
}

int main(void) {
    sl_log_set_level(SL_LOG_ERR);
    snprintf(tmpdir, sizeof tmpdir, "%s/sl-blob-node-%d",
             access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp", (int)getpid());
    mkdir(tmpdir, 0700);
    sl_test_run("put_get_rereplicate", test_put_get_rereplicate);
    rm_rf(tmpdir);
    return sl_test_finish();
}
