/* Blob transfer: wire codec and fetch state machine; see
 * include/starling/blob_xfer.h and proto/blob.md. Pure: no I/O. */
#include "starling/blob_xfer.h"

#include <stdio.h>
#include <string.h>

#include "starling/mpack.h"

/* ---- codec ---- */

/* Keys each type requires (bit k for key k). */
static uint32_t required_keys(uint8_t type) {
    switch (type) {
    case SL_BLOB_MSG_GET: return 0x1f;   /* xfer, blob, index, chunk, addr */
    case SL_BLOB_MSG_CHUNK: return 0x1f; /* xfer, index, chunk, status, data */
    case SL_BLOB_MSG_OFFER: return 0x03; /* manifest, addr */
    default: return 0;
    }
}

static void read_hash(sl_mpack_reader_t *r, uint8_t out[SL_BLAKE2B_LEN]) {
    const uint8_t *p;
    size_t n;
    if (!sl_mpack_read_bin(r, SL_BLAKE2B_LEN, SL_BLAKE2B_LEN, &p, &n))
        memcpy(out, p, SL_BLAKE2B_LEN);
}

static void read_addr(sl_mpack_reader_t *r, sl_blob_msg_t *m) {
    const uint8_t *p;
    size_t n;
    if (!sl_mpack_read_str(r, 1, SL_BLOB_XFER_MAX_ADDR, &p, &n)) {
        for (size_t i = 0; i < n; i++)
            if (p[i] <= 0x20 || p[i] >= 0x7f) { /* an address is printable ASCII */
                sl_mpack_reader_fail(r, SL_EPROTO);
                return;
            }
        m->addr = p;
        m->addr_len = n;
    }
}

sl_err sl_blob_msg_decode(uint8_t type, const uint8_t *body, size_t len, sl_blob_msg_t *out) {
    memset(out, 0, sizeof *out);
    uint32_t need = required_keys(type);
    if (!need)
        return SL_ETYPE;
    out->type = type;
    sl_mpack_reader_t r;
    sl_mpack_map_t map;
    uint64_t key, v;
    const uint8_t *p;
    size_t n;
    uint32_t seen = 0;
    sl_mpack_reader_init(&r, body, len);
    sl_mpack_map_begin(&r, 16, &map);
    while (sl_mpack_map_next(&r, &map, &key)) {
        seen |= key < 8 ? 1u << key : 0;
        if (type == SL_BLOB_MSG_GET) {
            switch (key) {
            case 0: sl_mpack_read_uint(&r, UINT64_MAX, &out->xfer); break;
            case 1: read_hash(&r, out->blob); break;
            case 2:
                if (!sl_mpack_read_uint(&r, SL_BLOB_MAX_CHUNKS - 1, &v))
                    out->index = (uint32_t)v;
                break;
            case 3: read_hash(&r, out->chunk); break;
            case 4: read_addr(&r, out); break;
            default: sl_mpack_skip(&r, 2); break;
            }
        } else if (type == SL_BLOB_MSG_CHUNK) {
            switch (key) {
            case 0: sl_mpack_read_uint(&r, UINT64_MAX, &out->xfer); break;
            case 1:
                if (!sl_mpack_read_uint(&r, SL_BLOB_MAX_CHUNKS - 1, &v))
                    out->index = (uint32_t)v;
                break;
            case 2: read_hash(&r, out->chunk); break;
            case 3:
                if (!sl_mpack_read_uint(&r, SL_BLOB_CHUNK_MISSING, &v))
                    out->status = (uint8_t)v;
                break;
            case 4:
                if (!sl_mpack_read_bin(&r, 0, SL_BLOB_XFER_MAX_DATA, &p, &n)) {
                    out->data = p;
                    out->data_len = n;
                }
                break;
            default: sl_mpack_skip(&r, 2); break;
            }
        } else {
            switch (key) {
            case 0:
                if (!sl_mpack_read_bin(&r, 1, SL_BLOB_XFER_MAX_MANIFEST, &p, &n)) {
                    out->data = p;
                    out->data_len = n;
                }
                break;
            case 1: read_addr(&r, out); break;
            default: sl_mpack_skip(&r, 2); break;
            }
        }
    }
    sl_mpack_reader_end(&r);
    if (!r.err && (seen & need) != need)
        sl_mpack_reader_fail(&r, SL_EPROTO);
    if (!r.err && type == SL_BLOB_MSG_CHUNK && out->status != SL_BLOB_CHUNK_OK && out->data_len)
        sl_mpack_reader_fail(&r, SL_EPROTO);
    if (!r.err && type == SL_BLOB_MSG_OFFER) {
        sl_blob_manifest_t m;
        sl_err err = sl_blob_manifest_decode(out->data, out->data_len, &m);
        if (err)
            sl_mpack_reader_fail(&r, err);
        else
            sl_blob_manifest_fini(&m);
    }
    if (r.err) {
        memset(out, 0, sizeof *out);
        return r.err;
    }
    return SL_OK;
}

sl_err sl_blob_msg_encode(const sl_blob_msg_t *m, uint8_t **out, size_t *len) {
    *out = NULL;
    *len = 0;
    if (!required_keys(m->type))
        return SL_ETYPE;
    if (m->addr_len > SL_BLOB_XFER_MAX_ADDR ||
        (m->type != SL_BLOB_MSG_CHUNK && m->addr_len == 0) ||
        (m->type == SL_BLOB_MSG_CHUNK && m->data_len > SL_BLOB_XFER_MAX_DATA) ||
        (m->type == SL_BLOB_MSG_OFFER && m->data_len > SL_BLOB_XFER_MAX_MANIFEST))
        return SL_ETOOBIG;
    sl_mpack_writer_t w;
    sl_mpack_writer_init(&w, 256 + m->data_len);
    if (m->type == SL_BLOB_MSG_GET) {
        sl_mpack_write_map(&w, 5);
        sl_mpack_write_uint(&w, 0);
        sl_mpack_write_uint(&w, m->xfer);
        sl_mpack_write_uint(&w, 1);
        sl_mpack_write_bin(&w, m->blob, SL_BLAKE2B_LEN);
        sl_mpack_write_uint(&w, 2);
        sl_mpack_write_uint(&w, m->index);
        sl_mpack_write_uint(&w, 3);
        sl_mpack_write_bin(&w, m->chunk, SL_BLAKE2B_LEN);
        sl_mpack_write_uint(&w, 4);
        sl_mpack_write_str(&w, m->addr, m->addr_len);
    } else if (m->type == SL_BLOB_MSG_CHUNK) {
        sl_mpack_write_map(&w, 5);
        sl_mpack_write_uint(&w, 0);
        sl_mpack_write_uint(&w, m->xfer);
        sl_mpack_write_uint(&w, 1);
        sl_mpack_write_uint(&w, m->index);
        sl_mpack_write_uint(&w, 2);
        sl_mpack_write_bin(&w, m->chunk, SL_BLAKE2B_LEN);
        sl_mpack_write_uint(&w, 3);
        sl_mpack_write_uint(&w, m->status);
        sl_mpack_write_uint(&w, 4);
        sl_mpack_write_bin(&w, m->data, m->data_len);
    } else {
        sl_mpack_write_map(&w, 2);
        sl_mpack_write_uint(&w, 0);
        sl_mpack_write_bin(&w, m->data, m->data_len);
        sl_mpack_write_uint(&w, 1);
        sl_mpack_write_str(&w, m->addr, m->addr_len);
    }
    return sl_mpack_writer_finish(&w, out, len);
}

/* ---- fetch ---- */

enum { CHUNK_WANTED = 0, CHUNK_ASKED = 1, CHUNK_WRITING = 2, CHUNK_HELD = 3 };

typedef struct {
    uint32_t index;    /* chunk asked for */
    uint32_t source;   /* index into sources when asked */
    uint64_t sent_ms;  /* when asked */
    char addr[SL_BLOB_XFER_MAX_ADDR + 1]; /* whom (sources may change meanwhile) */
} flight_t;

struct sl_blob_fetch {
    uint64_t xfer;                 /* transfer id echoed by holders */
    sl_blob_manifest_t m;          /* what is fetched (owned copy) */
    uint8_t *state;                /* per chunk: CHUNK_* */
    uint8_t *tries;                /* per chunk: GETs issued (saturating) */
    char (*sources)[SL_BLOB_XFER_MAX_ADDR + 1]; /* holders to ask */
    size_t source_count;           /* entries */
    flight_t flights[SL_BLOB_XFER_MAX_WINDOW]; /* GETs unanswered */
    uint32_t window;               /* chunks in flight at most */
    uint32_t timeout_ms;           /* per GET */
    uint32_t max_tries;            /* per chunk */
    uint32_t next;                 /* lowest chunk that may still be wanted */
    sl_err failed;                 /* SL_OK, or why the fetch gave up */
    sl_blob_fetch_stats_t st;      /* counters */
};

void sl_blob_fetch_destroy(sl_blob_fetch_t **pf) {
    sl_blob_fetch_t *f = pf ? *pf : NULL;
    if (!f)
        return;
    sl_blob_manifest_fini(&f->m);
    sl_free(f->state);
    sl_free(f->tries);
    sl_free(f->sources);
    sl_free(f);
    *pf = NULL;
}

sl_err sl_blob_fetch_set_sources(sl_blob_fetch_t *f, const char *const *sources, size_t count) {
    if (count > SL_BLOB_XFER_MAX_SOURCES)
        count = SL_BLOB_XFER_MAX_SOURCES;
    for (size_t i = 0; i < count; i++)
        if (strlen(sources[i]) > SL_BLOB_XFER_MAX_ADDR)
            return SL_EINVAL;
    void *n = sl_realloc(f->sources, (count ? count : 1) * sizeof *f->sources);
    if (!n)
        return SL_ENOMEM;
    f->sources = n;
    for (size_t i = 0; i < count; i++)
        snprintf(f->sources[i], sizeof f->sources[i], "%s", sources[i]);
    f->source_count = count;
    /* a GET to a holder no longer listed will not be answered: ask again */
    for (uint32_t k = 0; k < f->st.in_flight;) {
        bool listed = false;
        for (size_t i = 0; i < count && !listed; i++)
            listed = !strcmp(f->sources[i], f->flights[k].addr);
        if (listed) {
            k++;
            continue;
        }
        f->state[f->flights[k].index] = CHUNK_WANTED;
        if (f->flights[k].index < f->next)
            f->next = f->flights[k].index;
        f->flights[k] = f->flights[--f->st.in_flight];
    }
    return SL_OK;
}

sl_err sl_blob_fetch_new(uint64_t xfer, const sl_blob_manifest_t *m, const bool *have,
                         const char *const *sources, size_t source_count,
                         const sl_blob_fetch_config_t *cfg, sl_blob_fetch_t **out) {
    *out = NULL;
    sl_blob_fetch_t *f = sl_calloc(1, sizeof *f);
    if (!f)
        return SL_ENOMEM;
    sl_err err = sl_blob_manifest_copy(m, &f->m);
    size_t n = m->chunk_count ? m->chunk_count : 1;
    if (!err && (!(f->state = sl_calloc(n, 1)) || !(f->tries = sl_calloc(n, 1))))
        err = SL_ENOMEM;
    if (!err)
        err = sl_blob_fetch_set_sources(f, sources, source_count);
    if (err) {
        sl_blob_fetch_destroy(&f);
        return err;
    }
    f->xfer = xfer;
    f->window = cfg && cfg->window ? cfg->window : 4;
    if (f->window > SL_BLOB_XFER_MAX_WINDOW)
        f->window = SL_BLOB_XFER_MAX_WINDOW;
    f->timeout_ms = cfg && cfg->timeout_ms ? cfg->timeout_ms : 3000;
    f->max_tries = cfg && cfg->max_tries ? cfg->max_tries : 0;
    if (f->max_tries > 255)
        f->max_tries = 255;
    f->st.chunks = m->chunk_count;
    for (uint32_t i = 0; i < m->chunk_count; i++)
        if (have && have[i]) {
            f->state[i] = CHUNK_HELD;
            f->st.held++;
        }
    *out = f;
    return SL_OK;
}

uint64_t sl_blob_fetch_xfer(const sl_blob_fetch_t *f) { return f->xfer; }

const sl_blob_manifest_t *sl_blob_fetch_manifest(const sl_blob_fetch_t *f) { return &f->m; }

static uint32_t tries_allowed(const sl_blob_fetch_t *f) {
    if (f->max_tries)
        return f->max_tries;
    size_t t = 2 * f->source_count;
    return t < 3 ? 3 : t > 255 ? 255 : (uint32_t)t;
}

/* Takes flight k off the table; the chunk is wanted again. */
static void land(sl_blob_fetch_t *f, uint32_t k, bool retry) {
    uint32_t index = f->flights[k].index;
    if (retry) {
        f->state[index] = CHUNK_WANTED;
        if (index < f->next)
            f->next = index;
    }
    f->flights[k] = f->flights[--f->st.in_flight];
}

size_t sl_blob_fetch_poll(sl_blob_fetch_t *f, uint64_t now_ms, sl_blob_req_t *reqs, size_t cap) {
    for (uint32_t k = 0; k < f->st.in_flight;) {
        if (now_ms >= f->flights[k].sent_ms + f->timeout_ms) {
            f->st.timeouts++;
            land(f, k, true);
        } else {
            k++;
        }
    }
    size_t out = 0;
    if (f->failed || f->source_count == 0)
        return 0;
    while (out < cap && f->st.in_flight < f->window) {
        while (f->next < f->m.chunk_count && f->state[f->next] != CHUNK_WANTED)
            f->next++;
        if (f->next >= f->m.chunk_count)
            break;
        uint32_t i = f->next;
        if (f->tries[i] >= tries_allowed(f)) {
            f->failed = SL_ENOTFOUND; /* no holder gave it */
            break;
        }
        /* spread chunks over the holders, and ask the next one on a retry */
        uint32_t src = (uint32_t)((i + f->tries[i]) % f->source_count);
        f->tries[i]++;
        f->state[i] = CHUNK_ASKED;
        flight_t *fl = &f->flights[f->st.in_flight++];
        fl->index = i;
        fl->source = src;
        fl->sent_ms = now_ms;
        memcpy(fl->addr, f->sources[src], sizeof fl->addr);
        reqs[out].addr = f->sources[src];
        reqs[out].index = i;
        memcpy(reqs[out].chunk, f->m.chunks[i], SL_BLAKE2B_LEN);
        out++;
        f->st.requested++;
    }
    return out;
}

uint64_t sl_blob_fetch_deadline(const sl_blob_fetch_t *f) {
    uint64_t d = 0;
    for (uint32_t k = 0; k < f->st.in_flight; k++) {
        uint64_t t = f->flights[k].sent_ms + f->timeout_ms;
        if (!d || t < d)
            d = t;
    }
    return d;
}

sl_err sl_blob_fetch_on_chunk(sl_blob_fetch_t *f, uint64_t now_ms, const sl_blob_msg_t *msg) {
    (void)now_ms;
    uint32_t k = 0;
    while (k < f->st.in_flight && f->flights[k].index != msg->index)
        k++;
    if (msg->type != SL_BLOB_MSG_CHUNK || msg->xfer != f->xfer || k == f->st.in_flight ||
        msg->index >= f->m.chunk_count) {
        f->st.stale++;
        return SL_ESTATE;
    }
    uint32_t i = msg->index;
    if (msg->status != SL_BLOB_CHUNK_OK) {
        f->st.missing++;
        land(f, k, true);
        return SL_ENOTFOUND;
    }
    uint64_t off = (uint64_t)i * f->m.chunk_len;
    uint64_t want = f->m.size - off < f->m.chunk_len ? f->m.size - off : f->m.chunk_len;
    if (msg->data_len != want || memcmp(msg->chunk, f->m.chunks[i], SL_BLAKE2B_LEN) != 0 ||
        sl_blob_verify(msg->data, msg->data_len, f->m.chunks[i]) != SL_OK) {
        f->st.corrupt++;
        land(f, k, true);
        return SL_ECORRUPT;
    }
    f->st.received++;
    f->state[i] = CHUNK_WRITING;
    land(f, k, false);
    return SL_OK;
}

void sl_blob_fetch_stored(sl_blob_fetch_t *f, uint32_t index, sl_err err) {
    if (index >= f->m.chunk_count || f->state[index] != CHUNK_WRITING)
        return;
    if (err) {
        f->failed = err;
        f->state[index] = CHUNK_WANTED;
        return;
    }
    f->state[index] = CHUNK_HELD;
    f->st.held++;
}

sl_err sl_blob_fetch_status(const sl_blob_fetch_t *f) {
    if (f->failed)
        return f->failed;
    return f->st.held == f->m.chunk_count ? SL_OK : SL_EAGAIN;
}

void sl_blob_fetch_stats(const sl_blob_fetch_t *f, sl_blob_fetch_stats_t *out) { *out = f->st; }
