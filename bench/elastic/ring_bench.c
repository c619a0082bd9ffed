/* sl-ring-bench: one rank of the ring all-reduce, timed.
 *
 *   sl-ring-bench --world W --rank R --port P [--sizes-mib 1,4,16,64]
 *                 [--iters N] [--warmup N] [--chunk-kib C] [--window K]
 *                 [--transport tcp|zmq]
 *
 * --transport picks the link's transport (default: the link's own choice
 * for a cluster without a key, tcp; zmq is the ZeroMQ link a keyed
 * cluster uses, here without a key).
 * Rank r binds tcp://127.0.0.1:(P+r) and dials rank r+1. For each size,
 * after the warm-up calls (which also serve as a barrier), it prints one
 * line per size: `size_bytes seconds seconds ...`, each the wall time of
 * one sl_ring_link_allreduce (an average: divisor W). allreduce.py takes
 * the slowest rank per call. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "elastic/ring_link.h"
#include "starling/platform.h"

int main(int argc, char **argv) {
    uint32_t world = 0, rank = 0, port = 0, iters = 5, warmup = 2, window = 0;
    size_t chunk_kib = 0;
    const char *sizes = "1,4,16,64";
    sl_ring_transport_t transport = SL_RING_AUTO;
    for (int i = 1; i + 1 < argc; i += 2) {
        const char *k = argv[i], *v = argv[i + 1];
        if (!strcmp(k, "--world"))
            world = (uint32_t)atoi(v);
        else if (!strcmp(k, "--rank"))
            rank = (uint32_t)atoi(v);
        else if (!strcmp(k, "--port"))
            port = (uint32_t)atoi(v);
        else if (!strcmp(k, "--sizes-mib"))
            sizes = v;
        else if (!strcmp(k, "--iters"))
            iters = (uint32_t)atoi(v);
        else if (!strcmp(k, "--warmup"))
            warmup = (uint32_t)atoi(v);
        else if (!strcmp(k, "--chunk-kib"))
            chunk_kib = (size_t)atol(v);
        else if (!strcmp(k, "--window"))
            window = (uint32_t)atoi(v);
        else if (!strcmp(k, "--transport") && (!strcmp(v, "tcp") || !strcmp(v, "zmq")))
            transport = !strcmp(v, "tcp") ? SL_RING_TCP : SL_RING_ZMQ;
        else {
            fprintf(stderr, "sl-ring-bench: unknown option %s\n", k);
            return 2;
        }
    }
    if (world == 0 || rank >= world || port == 0 || port + world > 65535) {
        fprintf(stderr, "usage: sl-ring-bench --world W --rank R --port P [--sizes-mib 1,4] "
                        "[--iters N] [--warmup N] [--chunk-kib C] [--window K] "
                        "[--transport tcp|zmq]\n");
        return 2;
    }
    char text[64][40];
    const char *eps[64];
    if (world > 64)
        return 2;
    for (uint32_t r = 0; r < world; r++) {
        snprintf(text[r], sizeof text[r], "tcp://127.0.0.1:%u", port + r);
        eps[r] = text[r];
    }
    sl_ring_link_cfg_t cfg = {.job = 1, .round = 1, .world = world, .rank = rank,
                              .endpoints = eps, .chunk_bytes = chunk_kib * 1024,
                              .window = window, .timeout_ms = 30000,
                              .transport = transport};
    sl_ring_link_t *link = NULL;
    sl_err err = sl_ring_link_open(&cfg, &link);
    if (err != SL_OK) {
        fprintf(stderr, "sl-ring-bench: open: %s\n", sl_strerror(err));
        return 1;
    }
    int rc = 0;
    for (const char *s = sizes; *s && rc == 0;) {
        uint64_t mib = strtoull(s, (char **)&s, 10);
        if (*s == ',')
            s++;
        uint64_t count = mib << 20 >> 2;
        float *buf = malloc(count * sizeof(float) + 1);
        for (uint64_t i = 0; i < count; i++)
            buf[i] = (float)(i % 1000) * 0.001f;
        printf("%llu", (unsigned long long)(count * sizeof(float)));
        for (uint32_t i = 0; i < warmup + iters; i++) {
            uint64_t t0 = sl_plat_now_ns();
            err = sl_ring_link_allreduce(link, buf, count, (float)world);
            uint64_t t1 = sl_plat_now_ns();
            if (err != SL_OK) {
                fprintf(stderr, "sl-ring-bench: rank %u: %s\n", rank, sl_ring_link_error(link));
                rc = 1;
                break;
            }
            if (i >= warmup)
                printf(" %.6f", (double)(t1 - t0) / 1e9);
        }
        printf("\n");
        fflush(stdout);
        free(buf);
    }
    sl_ring_link_close(&link);
    return rc;
}
