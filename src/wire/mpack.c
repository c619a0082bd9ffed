/* Canonical msgpack writer (on msgpack-c's packer, whose integer, length
 * and container encodings are already the smallest) and a strict bounded
 * reader of our own: msgpack-c's unpacker cannot tell a non-minimal
 * encoding from a minimal one. See include/starling/mpack.h and
 * proto/envelope.md for the profile. */
#include "starling/mpack.h"

#include <math.h>
#include <string.h>

#include <msgpack.h>

/* ---- Writer ---- */

void sl_mpack_writer_init(sl_mpack_writer_t *w, size_t max_len) {
    memset(w, 0, sizeof *w);
    w->max_len = max_len;
}

void sl_mpack_writer_init_count(sl_mpack_writer_t *w, size_t max_len) {
    sl_mpack_writer_init(w, max_len);
    w->counting = true;
}

void sl_mpack_writer_fini(sl_mpack_writer_t *w) {
    if (!w)
        return;
    sl_free(w->buf);
    w->buf = NULL;
    w->len = 0;
    w->cap = 0;
}

sl_err sl_mpack_writer_finish(sl_mpack_writer_t *w, uint8_t **out, size_t *len) {
    sl_err err = w->err;
    *out = NULL;
    *len = 0;
    if (err == SL_OK && !w->counting) {
        *out = w->buf;
        *len = w->len;
        w->buf = NULL;
    }
    sl_mpack_writer_fini(w);
    return err;
}

/* Appends `len` bytes (the packer's write callback). */
static int writer_append(void *data, const char *p, size_t len) {
    sl_mpack_writer_t *w = data;
    if (w->err)
        return -1;
    if (len > w->max_len - w->len) {
        w->err = SL_ETOOBIG;
        return -1;
    }
    if (!w->counting) {
        if (w->len + len > w->cap) {
            size_t cap = w->cap ? w->cap : 256;
            while (cap < w->len + len)
                cap = cap > SIZE_MAX / 2 ? w->len + len : cap * 2;
            uint8_t *buf = sl_realloc(w->buf, cap);
            if (!buf) {
                w->err = SL_ENOMEM;
                return -1;
            }
            w->buf = buf;
            w->cap = cap;
        }
        if (len)
            memcpy(w->buf + w->len, p, len);
    }
    w->len += len;
    return 0;
}

/* A packer that appends to `w`: msgpack-c picks the smallest encodings. */
static msgpack_packer packer(sl_mpack_writer_t *w) {
    msgpack_packer pk;
    msgpack_packer_init(&pk, w, writer_append);
    return pk;
}

sl_err sl_mpack_write_nil(sl_mpack_writer_t *w) {
    msgpack_packer pk = packer(w);
    if (!w->err)
        msgpack_pack_nil(&pk);
    return w->err;
}

sl_err sl_mpack_write_bool(sl_mpack_writer_t *w, bool v) {
    msgpack_packer pk = packer(w);
    if (!w->err)
        (void)(v ? msgpack_pack_true(&pk) : msgpack_pack_false(&pk));
    return w->err;
}

sl_err sl_mpack_write_uint(sl_mpack_writer_t *w, uint64_t v) {
    msgpack_packer pk = packer(w);
    if (!w->err)
        msgpack_pack_uint64(&pk, v);
    return w->err;
}

sl_err sl_mpack_write_int(sl_mpack_writer_t *w, int64_t v) {
    msgpack_packer pk = packer(w);
    if (!w->err)
        msgpack_pack_int64(&pk, v);
    return w->err;
}

sl_err sl_mpack_write_double(sl_mpack_writer_t *w, double v) {
    msgpack_packer pk = packer(w);
    if (isnan(v)) {
        uint64_t bits = 0x7ff8000000000000ull;
        memcpy(&v, &bits, sizeof v);
    }
    if (!w->err)
        msgpack_pack_double(&pk, v);
    return w->err;
}

sl_err sl_mpack_write_str(sl_mpack_writer_t *w, const void *s, size_t len) {
    msgpack_packer pk = packer(w);
    if (w->err)
        return w->err;
    if (len > UINT32_MAX)
        return w->err = SL_ETOOBIG;
    if (!sl_mpack_utf8_valid(s, len))
        return w->err = SL_EINVAL;
    if (msgpack_pack_str(&pk, len) == 0 && len)
        msgpack_pack_str_body(&pk, s, len);
    return w->err;
}

sl_err sl_mpack_write_bin(sl_mpack_writer_t *w, const void *p, size_t len) {
    msgpack_packer pk = packer(w);
    if (w->err)
        return w->err;
    if (len > UINT32_MAX)
        return w->err = SL_ETOOBIG;
    if (msgpack_pack_bin(&pk, len) == 0 && len)
        msgpack_pack_bin_body(&pk, p, len);
    return w->err;
}

sl_err sl_mpack_write_array(sl_mpack_writer_t *w, uint32_t count) {
    msgpack_packer pk = packer(w);
    if (!w->err)
        msgpack_pack_array(&pk, count);
    return w->err;
}

sl_err sl_mpack_write_map(sl_mpack_writer_t *w, uint32_t count) {
    msgpack_packer pk = packer(w);
    if (!w->err)
        msgpack_pack_map(&pk, count);
    return w->err;
}

sl_err sl_mpack_write_raw(sl_mpack_writer_t *w, const void *p, size_t len) {
    if (!w->err)
        writer_append(w, p, len);
    return w->err;
}

/* ---- UTF-8 ---- */

bool sl_mpack_utf8_valid(const uint8_t *p, size_t len) {
    size_t i = 0;
    while (i < len) {
        uint8_t c = p[i];
        if (c < 0x80) {
            i++;
            continue;
        }
        size_t n;
        uint32_t cp, min;
        if (c >= 0xc2 && c <= 0xdf) {
            n = 1;
            cp = c & 0x1f;
            min = 0x80;
        } else if (c >= 0xe0 && c <= 0xef) {
            n = 2;
            cp = c & 0x0f;
            min = 0x800;
        } else if (c >= 0xf0 && c <= 0xf4) {
            n = 3;
            cp = c & 0x07;
            min = 0x10000;
        } else {
            return false; /* continuation byte, overlong lead, or > U+10FFFF */
        }
        if (len - i - 1 < n)
            return false;
        for (size_t k = 1; k <= n; k++) {
            uint8_t cc = p[i + k];
            if ((cc & 0xc0) != 0x80)
                return false;
            cp = (cp << 6) | (cc & 0x3f);
        }
        if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
            return false;
        i += n + 1;
    }
    return true;
}

/* ---- Reader ---- */

void sl_mpack_reader_init(sl_mpack_reader_t *r, const void *buf, size_t len) {
    memset(r, 0, sizeof *r);
    r->start = buf;
    r->p = buf;
    r->end = r->p ? r->p + len : NULL;
}

/* Records `err` for the value starting at `at` (first error wins). */
static sl_err fail_at(sl_mpack_reader_t *r, const uint8_t *at, sl_err err) {
    if (r->err == SL_OK) {
        r->err = err;
        r->err_off = r->start ? (size_t)(at - r->start) : 0;
    }
    return r->err;
}

sl_err sl_mpack_reader_fail(sl_mpack_reader_t *r, sl_err err) {
    return fail_at(r, r->p, err);
}

sl_err sl_mpack_reader_end(sl_mpack_reader_t *r) {
    if (r->err == SL_OK && r->p != r->end)
        return fail_at(r, r->p, SL_EPROTO);
    return r->err;
}

static uint64_t load_be(const uint8_t *p, size_t n) {
    uint64_t v = 0;
    for (size_t i = 0; i < n; i++)
        v = (v << 8) | p[i];
    return v;
}

sl_mpack_type sl_mpack_peek(const sl_mpack_reader_t *r) {
    if (r->p >= r->end)
        return SL_MPACK_INVALID;
    uint8_t b = *r->p;
    if (b <= 0x7f)
        return SL_MPACK_UINT;
    if (b <= 0x8f)
        return SL_MPACK_MAP;
    if (b <= 0x9f)
        return SL_MPACK_ARRAY;
    if (b <= 0xbf)
        return SL_MPACK_STR;
    if (b >= 0xe0)
        return SL_MPACK_INT;
    switch (b) {
    case 0xc0: return SL_MPACK_NIL;
    case 0xc2: case 0xc3: return SL_MPACK_BOOL;
    case 0xc4: case 0xc5: case 0xc6: return SL_MPACK_BIN;
    case 0xc7: case 0xc8: case 0xc9: return SL_MPACK_EXT;
    case 0xca: case 0xcb: return SL_MPACK_FLOAT;
    case 0xcc: case 0xcd: case 0xce: case 0xcf: return SL_MPACK_UINT;
    case 0xd0: case 0xd1: case 0xd2: case 0xd3: return SL_MPACK_INT;
    case 0xd4: case 0xd5: case 0xd6: case 0xd7: case 0xd8: return SL_MPACK_EXT;
    case 0xd9: case 0xda: case 0xdb: return SL_MPACK_STR;
    case 0xdc: case 0xdd: return SL_MPACK_ARRAY;
    case 0xde: case 0xdf: return SL_MPACK_MAP;
    default: return SL_MPACK_INVALID; /* 0xc1 */
    }
}

/* A parsed value head: its type and its integer value or length/count. */
typedef struct {
    sl_mpack_type type; /* what the head announces */
    const uint8_t *at;  /* first byte of the value */
    uint64_t u;         /* UINT value, or STR/BIN length, or ARRAY/MAP count */
    int64_t i;          /* INT value (negative) */
    bool b;             /* BOOL value */
    uint64_t f_bits;    /* FLOAT64 bits */
} head_t;

/* Reads the head of the next value (type byte and the length or integer
 * bytes after it, not a str/bin payload), checking it is canonical. If
 * `want` is not SL_MPACK_INVALID, any other type is SL_EPROTO before the
 * rest of the head is read. */
static sl_err read_head(sl_mpack_reader_t *r, sl_mpack_type want, head_t *h) {
    if (r->err)
        return r->err;
    h->at = r->p;
    if (r->p >= r->end)
        return fail_at(r, h->at, SL_ETRUNC);
    h->type = sl_mpack_peek(r);
    if (want != SL_MPACK_INVALID && h->type != want)
        return fail_at(r, h->at, SL_EPROTO);
    uint8_t b = *r->p;
    size_t n = 0;   /* bytes after the type byte */
    uint64_t min = 0; /* smallest value this form may carry (canonical) */
    switch (h->type) {
    case SL_MPACK_INVALID:
    case SL_MPACK_EXT:
        return fail_at(r, h->at, SL_EPROTO);
    case SL_MPACK_NIL:
        break;
    case SL_MPACK_BOOL:
        h->b = b == 0xc3;
        break;
    case SL_MPACK_FLOAT:
        if (!r->allow_float)
            return fail_at(r, h->at, SL_EPROTO);
        if (b == 0xca)
            return fail_at(r, h->at, SL_ENONCANON);
        n = 8;
        break;
    case SL_MPACK_UINT:
        if (b <= 0x7f) {
            h->u = b;
        } else {
            n = (size_t)1 << (b - 0xcc);
            min = n == 1 ? 0x80 : n == 2 ? 0x100 : n == 4 ? 0x10000 : 0x100000000ull;
        }
        break;
    case SL_MPACK_INT:
        if (b >= 0xe0)
            h->i = (int8_t)b;
        else
            n = (size_t)1 << (b - 0xd0);
        break;
    case SL_MPACK_STR:
        if (b <= 0xbf) {
            h->u = b & 0x1f;
        } else {
            n = (size_t)1 << (b - 0xd9);
            min = n == 1 ? 32 : n == 2 ? 0x100 : 0x10000;
        }
        break;
    case SL_MPACK_BIN:
        n = (size_t)1 << (b - 0xc4);
        min = n == 1 ? 0 : n == 2 ? 0x100 : 0x10000;
        break;
    case SL_MPACK_ARRAY:
        if (b <= 0x9f) {
            h->u = b & 0x0f;
        } else {
            n = b == 0xdc ? 2 : 4;
            min = n == 2 ? 16 : 0x10000;
        }
        break;
    case SL_MPACK_MAP:
        if (b <= 0x8f) {
            h->u = b & 0x0f;
        } else {
            n = b == 0xde ? 2 : 4;
            min = n == 2 ? 16 : 0x10000;
        }
        break;
    }
    if ((size_t)(r->end - r->p) - 1 < n)
        return fail_at(r, h->at, SL_ETRUNC);
    uint64_t v = load_be(r->p + 1, n);
    r->p += 1 + n;
    if (n == 0)
        return SL_OK;
    if (h->type == SL_MPACK_FLOAT) {
        h->f_bits = v;
        if ((v & 0x7ff0000000000000ull) == 0x7ff0000000000000ull &&
            (v & 0x000fffffffffffffull) != 0 && v != 0x7ff8000000000000ull)
            return fail_at(r, h->at, SL_ENONCANON); /* a NaN, not the canonical one */
        return SL_OK;
    }
    if (h->type == SL_MPACK_INT) {
        /* Sign-extend; a non-negative value or a smaller-fitting one is
         * non-canonical. */
        int64_t s = n == 1 ? (int8_t)v : n == 2 ? (int16_t)v : n == 4 ? (int32_t)v : (int64_t)v;
        int64_t lo = n == 1 ? -32 : n == 2 ? -128 : n == 4 ? -32768 : -2147483648ll;
        if (s >= lo)
            return fail_at(r, h->at, SL_ENONCANON);
        h->i = s;
        return SL_OK;
    }
    if (v < min)
        return fail_at(r, h->at, SL_ENONCANON);
    h->u = v;
    return SL_OK;
}

sl_err sl_mpack_read_nil(sl_mpack_reader_t *r) {
    head_t h;
    return read_head(r, SL_MPACK_NIL, &h);
}

sl_err sl_mpack_read_bool(sl_mpack_reader_t *r, bool *out) {
    head_t h;
    *out = false;
    if (read_head(r, SL_MPACK_BOOL, &h))
        return r->err;
    *out = h.b;
    return SL_OK;
}

sl_err sl_mpack_read_uint(sl_mpack_reader_t *r, uint64_t max, uint64_t *out) {
    head_t h;
    *out = 0;
    /* A signed form (0xd0..0xd3) is read in full, so one holding a
     * non-negative value is reported as non-canonical, not as a wrong type. */
    bool signed_form = !r->err && r->p < r->end && *r->p >= 0xd0 && *r->p <= 0xd3;
    if (read_head(r, signed_form ? SL_MPACK_INT : SL_MPACK_UINT, &h))
        return r->err;
    if (h.type == SL_MPACK_INT)
        return fail_at(r, h.at, SL_EPROTO); /* negative */
    if (h.u > max)
        return fail_at(r, h.at, SL_EPROTO);
    *out = h.u;
    return SL_OK;
}

sl_err sl_mpack_read_int(sl_mpack_reader_t *r, int64_t min, int64_t max, int64_t *out) {
    head_t h;
    *out = 0;
    sl_mpack_type t = r->err ? SL_MPACK_INVALID : sl_mpack_peek(r);
    if (t != SL_MPACK_UINT && t != SL_MPACK_INT)
        t = SL_MPACK_INT; /* read_head reports the mismatch or truncation */
    if (read_head(r, t, &h))
        return r->err;
    if (t == SL_MPACK_UINT) {
        if (h.u > (uint64_t)INT64_MAX || (int64_t)h.u > max || (int64_t)h.u < min)
            return fail_at(r, h.at, SL_EPROTO);
        *out = (int64_t)h.u;
    } else {
        if (h.i < min || h.i > max)
            return fail_at(r, h.at, SL_EPROTO);
        *out = h.i;
    }
    return SL_OK;
}

sl_err sl_mpack_read_double(sl_mpack_reader_t *r, double *out) {
    head_t h;
    *out = 0;
    if (read_head(r, SL_MPACK_FLOAT, &h))
        return r->err;
    memcpy(out, &h.f_bits, sizeof *out);
    return SL_OK;
}

/* Str or bin: limits first, then presence of the payload. */
static sl_err read_bytes(sl_mpack_reader_t *r, sl_mpack_type t, size_t min_len, size_t max_len,
                         const uint8_t **ptr, size_t *len) {
    head_t h;
    *ptr = NULL;
    *len = 0;
    if (read_head(r, t, &h))
        return r->err;
    if (h.u > max_len)
        return fail_at(r, h.at, SL_ETOOBIG);
    if (h.u < min_len)
        return fail_at(r, h.at, SL_EPROTO);
    if (h.u > sl_mpack_reader_left(r))
        return fail_at(r, h.at, SL_ETRUNC);
    if (t == SL_MPACK_STR && !sl_mpack_utf8_valid(r->p, (size_t)h.u))
        return fail_at(r, h.at, SL_EPROTO);
    *ptr = h.u ? r->p : NULL;
    *len = (size_t)h.u;
    r->p += h.u;
    return SL_OK;
}

sl_err sl_mpack_read_str(sl_mpack_reader_t *r, size_t min_len, size_t max_len,
                         const uint8_t **ptr, size_t *len) {
    return read_bytes(r, SL_MPACK_STR, min_len, max_len, ptr, len);
}

sl_err sl_mpack_read_bin(sl_mpack_reader_t *r, size_t min_len, size_t max_len,
                         const uint8_t **ptr, size_t *len) {
    return read_bytes(r, SL_MPACK_BIN, min_len, max_len, ptr, len);
}

/* Array or map header: limit first; then a count that cannot fit in the
 * bytes left (each element takes at least one byte) is SL_ETRUNC at once. */
static sl_err read_container(sl_mpack_reader_t *r, sl_mpack_type t, uint32_t max,
                             uint32_t *count) {
    head_t h;
    *count = 0;
    if (read_head(r, t, &h))
        return r->err;
    if (h.u > max)
        return fail_at(r, h.at, SL_ETOOBIG);
    uint64_t need = t == SL_MPACK_MAP ? 2 * h.u : h.u;
    if (need > sl_mpack_reader_left(r))
        return fail_at(r, h.at, SL_ETRUNC);
    *count = (uint32_t)h.u;
    return SL_OK;
}

sl_err sl_mpack_read_array(sl_mpack_reader_t *r, uint32_t max, uint32_t *count) {
    return read_container(r, SL_MPACK_ARRAY, max, count);
}

sl_err sl_mpack_read_map(sl_mpack_reader_t *r, uint32_t max, uint32_t *count) {
    return read_container(r, SL_MPACK_MAP, max, count);
}

sl_err sl_mpack_map_begin(sl_mpack_reader_t *r, uint32_t max, sl_mpack_map_t *m) {
    memset(m, 0, sizeof *m);
    m->first = true;
    return read_container(r, SL_MPACK_MAP, max, &m->left);
}

bool sl_mpack_map_next(sl_mpack_reader_t *r, sl_mpack_map_t *m, uint64_t *key) {
    *key = 0;
    if (r->err || m->left == 0)
        return false;
    const uint8_t *at = r->p;
    if (sl_mpack_read_uint(r, UINT32_MAX, key))
        return false;
    if (!m->first && *key == m->last_key) {
        fail_at(r, at, SL_EPROTO); /* duplicate key */
        return false;
    }
    if (!m->first && *key < m->last_key) {
        fail_at(r, at, SL_ENONCANON); /* out of order */
        return false;
    }
    m->first = false;
    m->last_key = *key;
    m->left--;
    return true;
}

/* Bytewise order, a prefix first: <0, 0, >0. */
static int bytes_cmp(const uint8_t *a, size_t alen, const uint8_t *b, size_t blen) {
    size_t n = alen < blen ? alen : blen;
    int c = n ? memcmp(a, b, n) : 0;
    if (c)
        return c;
    return alen < blen ? -1 : alen > blen ? 1 : 0;
}

bool sl_mpack_map_next_str(sl_mpack_reader_t *r, sl_mpack_map_t *m, size_t max_len,
                           const uint8_t **key, size_t *key_len) {
    *key = NULL;
    *key_len = 0;
    if (r->err || m->left == 0)
        return false;
    const uint8_t *at = r->p;
    if (sl_mpack_read_str(r, 1, max_len, key, key_len))
        return false;
    if (!m->first) {
        int c = bytes_cmp(*key, *key_len, m->last_str, m->last_str_len);
        if (c <= 0) {
            fail_at(r, at, c == 0 ? SL_EPROTO : SL_ENONCANON);
            return false;
        }
    }
    m->first = false;
    m->last_str = *key;
    m->last_str_len = *key_len;
    m->left--;
    return true;
}

static sl_err skip_value(sl_mpack_reader_t *r, int depth_left);

/* Skips a map's entries: keys all uint ascending or all str ascending. */
static sl_err skip_map(sl_mpack_reader_t *r, uint32_t count, int depth_left) {
    sl_mpack_map_t m;
    memset(&m, 0, sizeof m);
    m.first = true;
    m.left = count;
    bool str_keys = sl_mpack_peek(r) == SL_MPACK_STR;
    while (m.left && !r->err) {
        uint64_t key;
        const uint8_t *skey;
        size_t skey_len;
        if (str_keys)
            sl_mpack_map_next_str(r, &m, UINT32_MAX, &skey, &skey_len);
        else
            sl_mpack_map_next(r, &m, &key);
        skip_value(r, depth_left);
    }
    return r->err;
}

/* Skips one value holding at most `depth_left` levels of containers. */
static sl_err skip_value(sl_mpack_reader_t *r, int depth_left) {
    head_t h;
    if (read_head(r, SL_MPACK_INVALID, &h))
        return r->err;
    switch (h.type) {
    case SL_MPACK_STR:
    case SL_MPACK_BIN: {
        const uint8_t *p;
        size_t n;
        r->p = h.at; /* re-read with the payload checks */
        return read_bytes(r, h.type, 0, UINT32_MAX, &p, &n);
    }
    case SL_MPACK_ARRAY:
    case SL_MPACK_MAP: {
        if (depth_left < 1)
            return fail_at(r, h.at, SL_ETOOBIG);
        uint64_t need = h.type == SL_MPACK_MAP ? 2 * h.u : h.u;
        if (need > sl_mpack_reader_left(r))
            return fail_at(r, h.at, SL_ETRUNC);
        if (h.type == SL_MPACK_MAP)
            return skip_map(r, (uint32_t)h.u, depth_left - 1);
        for (uint64_t i = 0; i < h.u && !r->err; i++)
            skip_value(r, depth_left - 1);
        return r->err;
    }
    default:
        return SL_OK;
    }
}

sl_err sl_mpack_skip(sl_mpack_reader_t *r, int max_depth) {
    if (max_depth > SL_MPACK_MAX_DEPTH)
        max_depth = SL_MPACK_MAX_DEPTH;
    return skip_value(r, max_depth);
}

sl_err sl_mpack_read_raw(sl_mpack_reader_t *r, int max_depth, const uint8_t **ptr,
                         size_t *len) {
    const uint8_t *start = r->p;
    *ptr = NULL;
    *len = 0;
    if (sl_mpack_skip(r, max_depth))
        return r->err;
    *ptr = start;
    *len = (size_t)(r->p - start);
    return SL_OK;
}
