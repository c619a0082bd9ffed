/* The client side of the control protocol (see peerctl_client.h and
 * proto/control.md): one DEALER to one peer, CTL_REQ out, CTL_REP parts
 * back until one says no more follow. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "peerctl_client.h"
#include "starling/msg.h"
#include "starling/platform.h"
#include "starling/rng.h"

sl_peerctl_opts_t sl_peerctl_opts;

int sl_peerctl_resolve(const char *v, char *out, size_t cap) {
    char norm[SL_NET_CONTROL_MAX];
    struct stat st;
    int n = -1;
    if (!v || !v[0])
        return -1;
    if (!strncmp(v, "ipc://", 6))
        n = v[6] ? snprintf(out, cap, "%s", v) : -1;
    else if (!strncmp(v, "tcp://", 6) || (!strchr(v, '/') && strchr(v, ':') && stat(v, &st) != 0))
        n = sl_net_addr_normalize(v, norm, sizeof norm) == SL_OK ? snprintf(out, cap, "%s", norm)
                                                                  : -1;
    else /* a peer's data directory (it need not exist yet: the error then says so) */
        n = snprintf(out, cap, "ipc://%s%scontrol.sock", v, v[strlen(v) - 1] == '/' ? "" : "/");
    return n > 0 && (size_t)n < cap ? 0 : -1;
}

void sl_peerctl_opts_defaults(sl_peerctl_opts_t *o) {
    memset(o, 0, sizeof *o);
    const char *env = getenv("STARLING_PEER");
    if (env && env[0]) {
        if (sl_peerctl_resolve(env, o->peer, sizeof o->peer) != 0) {
            fprintf(stderr, "peerctl: ignoring STARLING_PEER='%s': it is not HOST:PORT, "
                            "ipc://PATH or a peer's data directory\n", env);
            env = NULL;
        }
    }
    if (!env || !env[0]) {
        /* the control socket of a peer started with no options */
        char host[256], dir[SL_NET_CONTROL_MAX];
        if (sl_plat_hostname(host, sizeof host) != SL_OK)
            snprintf(host, sizeof host, "peer");
        if (sl_plat_home())
            snprintf(dir, sizeof dir, "%.80s/.local/share/starling/%.40s-%d", sl_plat_home(), host,
                     SL_NET_DEFAULT_PORT);
        else
            snprintf(dir, sizeof dir, "./starling-data/%.40s-%d", host, SL_NET_DEFAULT_PORT);
        snprintf(o->peer, sizeof o->peer, "ipc://%.140s/control.sock", dir);
    }
    const char *key = getenv("STARLING_KEY");
    o->key_file = key && key[0] ? key : NULL;
    o->timeout_ms = SL_PEERCTL_TIMEOUT_MS;
}

/* The value of --name X or --name=X at argv[*i]; NULL when not that flag. */
static const char *flag_value(const char *name, int argc, char **argv, int *i, bool *missing) {
    size_t n = strlen(name);
    const char *a = argv[*i];
    *missing = false;
    if (strncmp(a, name, n) != 0)
        return NULL;
    if (a[n] == '=')
        return a + n + 1;
    if (a[n] != 0)
        return NULL;
    if (*i + 1 >= argc) {
        *missing = true;
        return NULL;
    }
    (*i)++;
    return argv[*i];
}

int sl_peerctl_opts_take(sl_peerctl_opts_t *o, int argc, char **argv, int *i) {
    bool missing = false;
    const char *v;
    if ((v = flag_value("--peer", argc, argv, i, &missing)) || missing) {
        if (!v || sl_peerctl_resolve(v, o->peer, sizeof o->peer) != 0) {
            fprintf(stderr, "peerctl: --peer needs a peer's data directory (its --data), "
                            "ipc://PATH of its control socket, or HOST:PORT of a TCP control "
                            "endpoint (peer --control), not '%s'\n", v ? v : "");
            return -1;
        }
        (*i)++;
        return 1;
    }
    if ((v = flag_value("--key", argc, argv, i, &missing)) || missing) {
        if (!v || !v[0]) {
            fprintf(stderr, "peerctl: --key needs a key file (make one with `peerctl keygen > cluster.key`)\n");
            return -1;
        }
        o->key_file = v;
        (*i)++;
        return 1;
    }
    if ((v = flag_value("--timeout", argc, argv, i, &missing)) || missing) {
        char *end = NULL;
        long ms = v ? strtol(v, &end, 10) : 0;
        if (!v || *end || ms <= 0 || ms > 3600000) {
            fprintf(stderr, "peerctl: --timeout needs milliseconds between 1 and 3600000\n");
            return -1;
        }
        o->timeout_ms = (int)ms;
        (*i)++;
        return 1;
    }
    return 0;
}

/* Explains why nothing came back, from what the connection saw. */
static void explain_silence(const sl_peerctl_opts_t *o, sl_net_client_t *c) {
    switch (sl_net_client_state_get(c)) {
    case SL_NET_CLIENT_NEVER_CONNECTED:
        if (!strncmp(o->peer, "ipc://", 6))
            fprintf(stderr,
                    "peerctl: nothing answers on the control socket %s: is `peer` running with "
                    "that --data? set --peer DATA_DIR or STARLING_PEER\n",
                    o->peer + 6);
        else
            fprintf(stderr,
                    "peerctl: cannot reach a control endpoint at %s: is `peer` running with "
                    "--control %s? (the gossip port --listen does not serve peerctl; on the "
                    "peer's machine use --peer DATA_DIR) set --peer or STARLING_PEER\n",
                    o->peer, o->peer + 6);
        break;
    case SL_NET_CLIENT_HANDSHAKE_FAILED:
    case SL_NET_CLIENT_TCP_ONLY:
        if (o->key_file)
            fprintf(stderr,
                    "peerctl: peer at %s refused the connection: the key in %s is not this "
                    "cluster's key (or the cluster is open: then leave out --key)\n",
                    o->peer, o->key_file);
        else
            fprintf(stderr,
                    "peerctl: peer at %s refused the connection: the cluster is closed; "
                    "pass its key file with --key FILE (or set STARLING_KEY)\n",
                    o->peer);
        break;
    case SL_NET_CLIENT_CONNECTED:
        fprintf(stderr,
                "peerctl: peer at %s did not answer within %d ms: it may be busy or stopping; "
                "try again, or raise --timeout\n",
                o->peer, o->timeout_ms);
        break;
    }
}

int sl_peerctl_call(const sl_peerctl_opts_t *o, const char *cmd, const char *const *args,
                    size_t arg_count, sl_peerctl_part_fn fn, void *ctx) {
    sl_bytes_t b[SL_CTL_MAX_ARGS];
    if (arg_count > SL_CTL_MAX_ARGS) {
        fprintf(stderr, "peerctl: too many arguments (at most %d)\n", SL_CTL_MAX_ARGS);
        return 2;
    }
    for (size_t i = 0; i < arg_count; i++)
        b[i] = sl_bytes_str(args[i]);
    return sl_peerctl_call_bytes(o, cmd, b, arg_count, fn, ctx, NULL);
}

struct sl_peerctl_conn {
    const sl_peerctl_opts_t *opts; /* --peer, --key, --timeout */
    sl_net_client_t *client;       /* the DEALER */
    uint32_t next_id;              /* id of the next request */
};

sl_peerctl_conn_t *sl_peerctl_connect(const sl_peerctl_opts_t *o) {
    sl_net_key_t key;
    bool has_key = false;
    if (o->key_file) {
        sl_err err = sl_net_key_load(o->key_file, &key);
        if (err == SL_ENOTFOUND) {
            fprintf(stderr, "peerctl: key file %s does not exist; make one with "
                            "`peerctl keygen > cluster.key` or fix --key\n", o->key_file);
            return NULL;
        }
        if (err != SL_OK) {
            fprintf(stderr, "peerctl: cannot use key file %s: %s; it should be the output of "
                            "`peerctl keygen`\n", o->key_file, sl_strerror(err));
            return NULL;
        }
        has_key = true;
    }
    if (!strncmp(o->peer, "ipc://", 6)) {
        /* a missing or forbidden socket file: say so now, not after the timeout */
        const char *path = o->peer + 6;
        struct stat st;
        if (stat(path, &st) != 0) {
            fprintf(stderr, "peerctl: no control socket at %s: is `peer` running with --data "
                            "%.*s? set --peer DATA_DIR (or STARLING_PEER) to the peer's data "
                            "directory\n", path,
                    (int)(strrchr(path, '/') ? strrchr(path, '/') - path : 1),
                    strrchr(path, '/') ? path : ".");
            return NULL;
        }
        if (access(path, R_OK | W_OK) != 0) {
            fprintf(stderr, "peerctl: cannot open the control socket %s: %s; run peerctl as "
                            "the user the peer runs as\n", path, strerror(errno));
            return NULL;
        }
    }
    sl_peerctl_conn_t *c = sl_calloc(1, sizeof *c);
    if (!c) {
        fprintf(stderr, "peerctl: out of memory\n");
        return NULL;
    }
    sl_err err = sl_net_client_new(o->peer, has_key ? &key : NULL, &c->client);
    memset(&key, 0, sizeof key);
    if (err != SL_OK) {
        fprintf(stderr, "peerctl: cannot connect to %s: %s; set --peer DATA_DIR, ipc://PATH "
                        "or HOST:PORT\n", o->peer, sl_strerror(err));
        sl_free(c);
        return NULL;
    }
    c->opts = o;
    sl_rng_t rng;
    sl_rng_seed(&rng, sl_plat_now_ns() ^ ((uint64_t)getpid() << 32));
    c->next_id = (uint32_t)sl_rng_next(&rng);
    return c;
}

void sl_peerctl_close(sl_peerctl_conn_t **pc) {
    if (!pc || !*pc)
        return;
    sl_net_client_destroy(&(*pc)->client);
    sl_free(*pc);
    *pc = NULL;
}

int sl_peerctl_send(sl_peerctl_conn_t *c, const char *cmd, const sl_bytes_t *args,
                    size_t arg_count, uint32_t *id) {
    if (arg_count > SL_CTL_MAX_ARGS) {
        fprintf(stderr, "peerctl: too many arguments (at most %d)\n", SL_CTL_MAX_ARGS);
        return 2;
    }
    *id = c->next_id++;
    uint8_t header[SL_WIRE_HEADER_LEN];
    uint8_t *body = NULL;
    size_t body_len = 0;
    sl_err err = sl_msg_ctl_req_encode(*id, cmd, args, arg_count, header, &body, &body_len);
    if (err != SL_OK) {
        fprintf(stderr, "peerctl: cannot encode the request: %s (an argument is too long?)\n",
                sl_strerror(err));
        return 1;
    }
    /* A peer that is up accepts within milliseconds; do not make a user
     * wait the whole reply timeout to learn that nothing listens. */
    int connect_ms = c->opts->timeout_ms < 3000 ? c->opts->timeout_ms : 3000;
    err = sl_net_client_send(c->client, header, body, body_len, connect_ms);
    sl_free(body);
    if (err != SL_OK) {
        explain_silence(c->opts, c->client);
        return 1;
    }
    return 0;
}

int sl_peerctl_recv(sl_peerctl_conn_t *c, sl_peerctl_part_t *part) {
    memset(part, 0, sizeof *part);
    sl_err err = sl_net_client_recv(c->client, c->opts->timeout_ms, &part->raw_header,
                                    &part->raw_header_len, &part->raw_body, &part->raw_body_len);
    if (err == SL_ETIMEDOUT) {
        explain_silence(c->opts, c->client);
        return 1;
    }
    if (err != SL_OK) {
        fprintf(stderr, "peerctl: bad reply from %s: %s\n", c->opts->peer, sl_strerror(err));
        return 1;
    }
    sl_msg_t rep;
    err = sl_msg_decode(part->raw_header, part->raw_header_len, part->raw_body,
                        part->raw_body_len, &rep);
    if (err != SL_OK || rep.type != SL_MSG_CTL_REP) {
        fprintf(stderr, "peerctl: cannot read the reply from %s (%s): are peer and peerctl "
                        "the same version?\n",
                c->opts->peer, err != SL_OK ? sl_strerror(err) : "not a reply");
        if (err == SL_OK)
            sl_msg_fini(&rep);
        sl_peerctl_part_fini(part);
        return 1;
    }
    part->id = rep.u.ctl_rep.id;
    part->status = (sl_err)rep.u.ctl_rep.status;
    part->more = rep.u.ctl_rep.more;
    part->body = rep.u.ctl_rep.body.ptr; /* points into raw_body */
    part->len = rep.u.ctl_rep.body.len;
    sl_msg_fini(&rep);
    return 0;
}

void sl_peerctl_part_fini(sl_peerctl_part_t *part) {
    sl_free(part->raw_header);
    sl_free(part->raw_body);
    memset(part, 0, sizeof *part);
}

int sl_peerctl_conn_call(sl_peerctl_conn_t *c, const char *cmd, const sl_bytes_t *args,
                         size_t arg_count, sl_peerctl_part_fn fn, void *ctx, sl_err *status) {
    if (status)
        *status = SL_OK;
    uint32_t id;
    int rc = sl_peerctl_send(c, cmd, args, arg_count, &id);
    if (rc)
        return rc;
    for (;;) {
        sl_peerctl_part_t part;
        if (sl_peerctl_recv(c, &part))
            return 1;
        if (part.id != id) { /* a stale reply: ignore it */
            sl_peerctl_part_fini(&part);
            continue;
        }
        int stop = 0;
        if (part.status != SL_OK && status) {
            *status = part.status;
            if (fn)
                fn(ctx, part.body, part.len);
            stop = 1;
        } else if (part.status != SL_OK) {
            fprintf(stderr, "peerctl: %s: %.*s\n", cmd, (int)part.len,
                    part.body ? (const char *)part.body : "");
            stop = 1;
        } else if (fn) {
            stop = fn(ctx, part.body, part.len);
        }
        bool more = part.more;
        sl_peerctl_part_fini(&part);
        if (stop)
            return 1;
        if (!more)
            return 0;
    }
}

int sl_peerctl_call_bytes(const sl_peerctl_opts_t *o, const char *cmd, const sl_bytes_t *args,
                          size_t arg_count, sl_peerctl_part_fn fn, void *ctx, sl_err *status) {
    if (status)
        *status = SL_OK;
    sl_peerctl_conn_t *c = sl_peerctl_connect(o);
    if (!c)
        return 1;
    int rc = sl_peerctl_conn_call(c, cmd, args, arg_count, fn, ctx, status);
    sl_peerctl_close(&c);
    return rc;
}

/* Appends each part to a growing buffer. */
typedef struct {
    char *buf;  /* gathered bytes, NUL-terminated */
    size_t len; /* bytes gathered */
} collect_t;

static int collect_part(void *ctx, const uint8_t *body, size_t len) {
    collect_t *c = ctx;
    char *nb = sl_realloc(c->buf, c->len + len + 1);
    if (!nb) {
        fprintf(stderr, "peerctl: out of memory\n");
        return 1;
    }
    if (len)
        memcpy(nb + c->len, body, len);
    c->len += len;
    nb[c->len] = 0;
    c->buf = nb;
    return 0;
}

int sl_peerctl_call_collect(const sl_peerctl_opts_t *o, const char *cmd,
                            const char *const *args, size_t arg_count, char **out, size_t *len) {
    collect_t c = {NULL, 0};
    int rc = sl_peerctl_call(o, cmd, args, arg_count, collect_part, &c);
    if (rc != 0) {
        sl_free(c.buf);
        *out = NULL;
        *len = 0;
        return rc;
    }
    if (!c.buf) {
        c.buf = sl_malloc(1);
        if (!c.buf)
            return 1;
        c.buf[0] = 0;
    }
    *out = c.buf;
    *len = c.len;
    return 0;
}
