/* peer: the Starling daemon. Parses the command line, sets up logging,
 * signals and the data directory, then runs the event loop
 * (src/node/peer_node.c) until SIGTERM or SIGINT, when it leaves the cluster
 * gracefully and exits 0. See docs/cli.md. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "starling/addr.h"
#include "starling/common.h"
#include "starling/mpack.h"
#include "starling/net.h"
#include "starling/peer.h"
#include "starling/platform.h"
#include "starling/blob_node.h"
#include "starling/store_node.h"
#include "starling/store_watch.h"
#include "starling/elastic_node.h"
#include "starling/study_node.h"

#define MAX_META 16

/* Everything the command line says. */
typedef struct {
    char listen[SL_ADDR_MAX + 16];    /* normalised --listen */
    char advertise[SL_ADDR_MAX + 16]; /* normalised --advertise, or "" */
    char name[SL_NAME_MAX + 1];       /* --name or host-port */
    char data_dir[4096];              /* --data or the default */
    const char *key_file;             /* --key */
    char *seeds[SL_NODE_MAX_SEEDS];   /* --join and --peers-file addresses (heap) */
    size_t seed_count;                /* entries in seeds */
    const char *meta_k[MAX_META];     /* --meta keys */
    size_t meta_kl[MAX_META];         /* key lengths */
    const char *meta_v[MAX_META];     /* --meta values */
    size_t meta_count;                /* entries */
    int log_level;                    /* --log-level */
    sl_swim_config_t swim;            /* timers (defaults + fast-timer flags) */
    int leave_wait_ms;                /* --leave-wait MS */
    int slots;                        /* --slots N: trials run at once (0: the study's) */
    int threads;                      /* --threads N: BLAS threads per trial (0: the study's) */
    const char *trial_user;           /* --trial-user USER: command trials run as USER */
    uint64_t blob_cache_bytes;        /* --blob-cache MB (0: the blob service's default) */
    int ring_port;                    /* --ring-port N: elastic jobs' all-reduce (0: gossip + 1) */
    const char *device;               /* --device: elastic jobs' training backend */
    char control[SL_NET_CONTROL_MAX]; /* --control: "" for the default, "none", ipc:// or tcp:// */
    bool allow_commands;              /* --allow-commands */
    bool test_faults;                 /* --test-faults */
} opts_t;

static void usage(FILE *f) {
    sl_swim_config_t d;
    sl_swim_config_defaults(&d);
    fprintf(f,
        "usage: peer [OPTIONS]\n"
        "\n"
        "Runs a Starling peer: joins the cluster, keeps the membership, answers peerctl.\n"
        "SIGTERM or SIGINT (Ctrl-C) leaves the cluster gracefully and exits 0.\n"
        "\n"
        "options:\n"
        "  --listen HOST:PORT     where to accept connections (default 127.0.0.1:%d;\n"
        "                         use 0.0.0.0:%d to accept from other machines)\n"
        "  --advertise HOST:PORT  the address other peers use to reach this one (default:\n"
        "                         the listen address; set it behind NAT, in containers, or\n"
        "                         when listening on 0.0.0.0)\n"
        "  --join HOST:PORT[,...] peers to join through; repeatable. Unreachable ones are\n"
        "                         retried; with none, this peer starts a new cluster\n"
        "  --peers-file FILE      more join addresses, one a line ('#' starts a comment)\n"
        "                         (host names in --listen, --advertise, --join and here are\n"
        "                         resolved once, at start, 5 s at most; the peer dials and\n"
        "                         advertises numeric addresses only)\n"
        "  --name NAME            member name, unique in the cluster (default HOST-PORT)\n"
        "  --data DIR             state directory (default $HOME/.local/share/starling/NAME,\n"
        "                         else ./starling-data/NAME). A restart with the same name\n"
        "                         and directory is the same member with a higher incarnation\n"
        "  --key FILE             cluster key (from `peerctl keygen`): CurveZMQ on every\n"
        "                         connection, only key holders can join or ask. Without it\n"
        "                         the cluster is open: anyone who can reach the port can join,\n"
        "                         read and write the store (docs/security.md)\n"
        "  --control ENDPOINT     where peerctl asks this peer (default ipc://DATA/control.sock,\n"
        "                         a Unix socket only this user may open); HOST:PORT or\n"
        "                         tcp://HOST:PORT for TCP (off loopback only with --key);\n"
        "                         none for no control. The gossip port never serves it\n"
        "  --allow-commands       open cluster (no --key): run studies' command trainers\n"
        "                         anyway. Anyone who can write to the cluster can then run\n"
        "                         commands as this peer's user; give it to every peer\n"
        "  --test-faults          answer test-only fault commands (store-fault); never in\n"
        "                         production\n"
        "  --meta KEY=VALUE       metadata shown to other members (repeatable; up to %d)\n"
        "  --log-level LEVEL      err, warning, notice, info (default) or debug\n"
        "  --help, --version\n"
        "\n"
        "timers (defaults suit a LAN; tests use smaller ones):\n"
        "  --probe-interval MS    time between probes of a random member (default %u)\n"
        "  --probe-timeout MS     time to wait for a direct ack (default %u)\n"
        "  --suspicion-mult N     suspicion timeout >= N * log10(members) * interval (default %u)\n"
        "  --sync-interval MS     push-pull of the member table with a random member (default %u,\n"
        "                         scaled up with log N past 32 members)\n"
        "  --leave-wait MS        after announcing a leave, keep serving this long (default 500)\n"
        "  --max-members N        member records kept at most; unknown members past it are\n"
        "                         refused and counted (default 4096)\n"
        "\n"
        "studies (docs/studies.md):\n"
        "  --slots N              trials this peer trains at once (default: the study's concurrency;\n"
        "                         0: none, the peer only coordinates and serves)\n"
        "  --threads N            BLAS threads per builtin trial (default: the study's threads)\n"
        "  --trial-user USER      run command trials as USER (the peer must run as root; USER\n"
        "                         must exist and reach --data); default: the peer's own user\n"
        "\n"
        "elastic jobs (docs/elastic.md):\n"
        "  --ring-port N          TCP port of this peer's all-reduce ring (default: the gossip\n"
        "                         port + 1), on the advertised host\n"
        "  --device DEV           training backend of elastic jobs: cpu, cuda or auto (default auto)\n"
        "\n"
        "blobs (docs/store.md):\n"
        "  --blob-cache MB        copies of blobs fetched here for `blob get` without being one of\n"
        "                         their holders are kept up to this size, least recently used out\n"
        "                         first (default 2048; 0: none once idle)\n",
        SL_NET_DEFAULT_PORT, SL_NET_DEFAULT_PORT, MAX_META,
        (unsigned)d.timing.probe_interval_ms, (unsigned)d.timing.probe_timeout_ms,
        (unsigned)d.timing.suspicion_mult, (unsigned)d.timing.push_pull_interval_ms);
}

static int bad(const char *fmt, const char *arg) {
    fprintf(stderr, "peer: ");
    fprintf(stderr, fmt, arg);
    fprintf(stderr, "; see peer --help\n");
    return 2;
}

static int add_seed(opts_t *o, const char *addr, size_t len) {
    char tmp[SL_ADDR_MAX + 16], norm[SL_ADDR_MAX + 16];
    if (len == 0)
        return 0;
    if (len >= sizeof tmp)
        return bad("join address too long: '%s'", addr);
    memcpy(tmp, addr, len);
    tmp[len] = 0;
    if (sl_net_addr_normalize(tmp, norm, sizeof norm) != SL_OK)
        return bad("'%s' is not a HOST:PORT join address", tmp);
    if (o->seed_count >= SL_NODE_MAX_SEEDS)
        return bad("too many join addresses (at most 64): '%s'", tmp);
    o->seeds[o->seed_count] = sl_strdup(norm);
    if (!o->seeds[o->seed_count])
        return 1;
    o->seed_count++;
    return 0;
}

static int add_join_list(opts_t *o, const char *list) {
    const char *p = list;
    while (*p) {
        const char *comma = strchr(p, ',');
        size_t len = comma ? (size_t)(comma - p) : strlen(p);
        while (len > 0 && (*p == ' ')) {
            p++;
            len--;
        }
        int rc = add_seed(o, p, len);
        if (rc)
            return rc;
        p += len;
        if (*p == ',')
            p++;
    }
    return 0;
}

static int read_peers_file(opts_t *o, const char *path) {
    uint8_t *data = NULL;
    size_t len = 0;
    sl_err err = sl_plat_read_file(path, 1 << 20, &data, &len);
    if (err != SL_OK) {
        fprintf(stderr, "peer: cannot read peers file %s: %s; fix --peers-file\n", path,
                sl_strerror(err));
        return 1;
    }
    int rc = 0;
    char *s = (char *)data;
    char *save = NULL;
    for (char *line = strtok_r(s, "\n", &save); line && !rc; line = strtok_r(NULL, "\n", &save)) {
        char *hash = strchr(line, '#');
        if (hash)
            *hash = 0;
        while (*line == ' ' || *line == '\t')
            line++;
        size_t l = strlen(line);
        while (l > 0 && (line[l - 1] == ' ' || line[l - 1] == '\t' || line[l - 1] == '\r'))
            l--;
        rc = add_seed(o, line, l);
    }
    sl_free(data);
    return rc;
}

static int parse_ms(const char *flag, const char *v, uint32_t lo, uint32_t hi, uint32_t *out) {
    char *end = NULL;
    errno = 0;
    long n = strtol(v, &end, 10);
    if (errno || !*v || *end || n < (long)lo || n > (long)hi) {
        fprintf(stderr, "peer: %s needs a number from %u to %u, not '%s'\n", flag, lo, hi, v);
        return 2;
    }
    *out = (uint32_t)n;
    return 0;
}

static int parse_level(const char *v, int *out) {
    static const struct { const char *name; int level; } levels[] = {
        {"err", SL_LOG_ERR}, {"error", SL_LOG_ERR}, {"warning", SL_LOG_WARNING},
        {"warn", SL_LOG_WARNING}, {"notice", SL_LOG_NOTICE}, {"info", SL_LOG_INFO},
        {"debug", SL_LOG_DEBUG},
    };
    for (size_t i = 0; i < sizeof levels / sizeof levels[0]; i++)
        if (!strcmp(v, levels[i].name)) {
            *out = levels[i].level;
            return 0;
        }
    return bad("--log-level must be err, warning, notice, info or debug, not '%s'", v);
}


/* Whether `s` begins with the literal `prefix`. */
static bool starts_with(const char *s, const char *prefix) {
    return !strncmp(s, prefix, strlen(prefix));
}

/* Whether a tcp:// endpoint listens on every interface (0.0.0.0 or *). */
static bool listens_everywhere(const char *endpoint) {
    return starts_with(endpoint, "tcp://0.0.0.0:") || starts_with(endpoint, "tcp://*:");
}
static int parse(opts_t *o, int argc, char **argv) {
    memset(o, 0, sizeof *o);
    snprintf(o->listen, sizeof o->listen, "tcp://127.0.0.1:%d", SL_NET_DEFAULT_PORT);
    o->log_level = SL_LOG_INFO;
    o->leave_wait_ms = 500;
    sl_swim_config_defaults(&o->swim);
    const char *data = NULL, *name = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return -1;
        }
        if (!strcmp(a, "--version")) {
            printf("peer %s\n", SL_VERSION);
            return -1;
        }
        if (!strcmp(a, "--allow-commands") || !strcmp(a, "--test-faults")) {
            *(a[2] == 'a' ? &o->allow_commands : &o->test_faults) = true;
            continue;
        }
        /* Every other option takes a value: --flag VALUE or --flag=VALUE. */
        const char *eq = strchr(a, '=');
        char flag[64];
        const char *v;
        if (strncmp(a, "--", 2) != 0)
            return bad("unexpected argument '%s'", a);
        snprintf(flag, sizeof flag, "%.*s", (int)(eq ? eq - a : (long)strlen(a)), a);
        static const char *const known[] = {
            "--trial-user",
            "--listen", "--advertise", "--join", "--peers-file", "--name", "--data", "--key",
            "--meta", "--log-level", "--probe-interval", "--probe-timeout", "--suspicion-mult",
            "--sync-interval", "--leave-wait", "--max-members", "--slots", "--threads", "--blob-cache",
            "--control", "--ring-port", "--device"};
        bool is_known = false;
        for (size_t k = 0; k < sizeof known / sizeof known[0]; k++)
            is_known |= !strcmp(flag, known[k]);
        if (!is_known)
            return bad("unknown option '%s'", flag);
        if (eq) {
            v = eq + 1;
        } else {
            if (i + 1 >= argc)
                return bad("%s needs a value", flag);
            v = argv[++i];
        }
        int rc = 0;
        uint32_t n;
        if (!strcmp(flag, "--listen")) {
            if (sl_net_addr_normalize(v, o->listen, sizeof o->listen) != SL_OK)
                return bad("--listen needs HOST:PORT, not '%s'", v);
        } else if (!strcmp(flag, "--advertise")) {
            if (sl_net_addr_normalize(v, o->advertise, sizeof o->advertise) != SL_OK)
                return bad("--advertise needs HOST:PORT, not '%s'", v);
        } else if (!strcmp(flag, "--control")) {
            char tmp[SL_NET_CONTROL_MAX];
            if (!strcmp(v, "none") || (!strncmp(v, "ipc://", 6) && v[6] && strlen(v) < sizeof tmp))
                snprintf(o->control, sizeof o->control, "%s", v);
            else if (sl_net_addr_normalize(v, tmp, sizeof tmp) == SL_OK)
                snprintf(o->control, sizeof o->control, "%s", tmp);
            else
                return bad("--control needs ipc://PATH, HOST:PORT, tcp://HOST:PORT or none, not '%s'",
                           v);
        } else if (!strcmp(flag, "--join")) {
            rc = add_join_list(o, v);
        } else if (!strcmp(flag, "--peers-file")) {
            rc = read_peers_file(o, v);
        } else if (!strcmp(flag, "--name")) {
            if (!v[0] || strlen(v) > SL_NAME_MAX || strchr(v, '/'))
                return bad("--name must be 1 to 64 bytes without '/', not '%s'", v);
            name = v;
        } else if (!strcmp(flag, "--data")) {
            if (!v[0] || strlen(v) > 3000)
                return bad("--data needs a directory, not '%s'", v);
            data = v;
        } else if (!strcmp(flag, "--key")) {
            o->key_file = v;
        } else if (!strcmp(flag, "--meta")) {
            const char *e = strchr(v, '=');
            if (!e || e == v || (size_t)(e - v) > SL_META_KEY_MAX || strlen(e + 1) > SL_META_VALUE_MAX)
                return bad("--meta needs KEY=VALUE (key up to 32 bytes, value up to 128), not '%s'", v);
            if (o->meta_count >= MAX_META - 1)
                return bad("too many --meta entries: '%s'", v);
            o->meta_k[o->meta_count] = v;
            o->meta_kl[o->meta_count] = (size_t)(e - v);
            o->meta_v[o->meta_count] = e + 1;
            o->meta_count++;
        } else if (!strcmp(flag, "--log-level")) {
            rc = parse_level(v, &o->log_level);
        } else if (!strcmp(flag, "--max-members")) {
            rc = parse_ms(flag, v, 2, 1000000, &n);
            o->swim.timing.max_members = n;
        } else if (!strcmp(flag, "--probe-interval")) {
            rc = parse_ms(flag, v, 10, 60000, &n);
            o->swim.timing.probe_interval_ms = n;
        } else if (!strcmp(flag, "--probe-timeout")) {
            rc = parse_ms(flag, v, 5, 60000, &n);
            o->swim.timing.probe_timeout_ms = n;
        } else if (!strcmp(flag, "--suspicion-mult")) {
            rc = parse_ms(flag, v, 1, 100, &n);
            o->swim.timing.suspicion_mult = n;
        } else if (!strcmp(flag, "--sync-interval")) {
            rc = parse_ms(flag, v, 100, 3600000, &n);
            o->swim.timing.push_pull_interval_ms = n;
        } else if (!strcmp(flag, "--leave-wait")) {
            rc = parse_ms(flag, v, 0, 60000, &n);
            o->leave_wait_ms = (int)n;
        } else if (!strcmp(flag, "--slots")) {
            rc = parse_ms(flag, v, 0, 64, &n);
            o->slots = n ? (int)n : -1;
        } else if (!strcmp(flag, "--threads")) {
            rc = parse_ms(flag, v, 1, 256, &n);
            o->threads = (int)n;
        } else if (!strcmp(flag, "--trial-user")) {
            if (!v[0] || strlen(v) > 32)
                return bad("--trial-user needs a user name, not '%s'", v);
            o->trial_user = v;
        } else if (!strcmp(flag, "--ring-port")) {
            rc = parse_ms(flag, v, 1, 65535, &n);
            o->ring_port = (int)n;
        } else if (!strcmp(flag, "--device")) {
            if (strcmp(v, "cpu") && strcmp(v, "cuda") && strcmp(v, "auto"))
                return bad("--device takes cpu, cuda or auto, not '%s'", v);
            o->device = v;
        } else if (!strcmp(flag, "--blob-cache")) {
            rc = parse_ms(flag, v, 0, 1u << 24, &n);
            o->blob_cache_bytes = n ? (uint64_t)n << 20 : 1; /* 0 is the config's "default" */
        } else {
            return bad("unknown option '%s'", flag);
        }
        if (rc)
            return rc;
    }
    if (o->swim.timing.probe_timeout_ms >= o->swim.timing.probe_interval_ms) {
        fprintf(stderr, "peer: --probe-timeout (%u) must be below --probe-interval (%u)\n",
                (unsigned)o->swim.timing.probe_timeout_ms, (unsigned)o->swim.timing.probe_interval_ms);
        return 2;
    }
    const char *port = strrchr(o->listen, ':') + 1;
    if (!o->advertise[0]) {
        /* Listening on every interface: others reach us by host name. */
        if (listens_everywhere(o->listen)) {
            char host[256];
            if (sl_plat_hostname(host, sizeof host) != SL_OK)
                snprintf(host, sizeof host, "localhost");
            snprintf(o->advertise, sizeof o->advertise, "tcp://%.100s:%s", host, port);
            sl_log(SL_LOG_NOTICE, "PEER-ADVERTISE",
                   "listening on all interfaces; advertising %s (set --advertise to change)",
                   o->advertise);
        } else {
            snprintf(o->advertise, sizeof o->advertise, "%s", o->listen);
        }
    }
    if (name) {
        snprintf(o->name, sizeof o->name, "%s", name);
    } else {
        char host[256];
        if (sl_plat_hostname(host, sizeof host) != SL_OK)
            snprintf(host, sizeof host, "peer");
        const char *aport = strrchr(o->advertise, ':') + 1;
        snprintf(o->name, sizeof o->name, "%.*s-%s", (int)(SL_NAME_MAX - 7), host, aport);
    }
    if (data) {
        snprintf(o->data_dir, sizeof o->data_dir, "%s", data);
    } else if (sl_plat_home()) {
        snprintf(o->data_dir, sizeof o->data_dir, "%s/.local/share/starling/%s", sl_plat_home(),
                 o->name);
    } else {
        snprintf(o->data_dir, sizeof o->data_dir, "./starling-data/%s", o->name);
    }
    return 0;
}

/* Key comparison for sorting metadata entries bytewise. */
static int meta_cmp(const opts_t *o, size_t a, size_t b) {
    size_t la = o->meta_kl[a], lb = o->meta_kl[b];
    int c = memcmp(o->meta_k[a], o->meta_k[b], la < lb ? la : lb);
    return c ? c : (la < lb ? -1 : la > lb);
}

/* Encodes --meta entries plus version=... as a canonical map. */
static sl_err encode_meta(opts_t *o, uint8_t **out, size_t *len) {
    bool has_version = false;
    for (size_t i = 0; i < o->meta_count; i++)
        has_version |= o->meta_kl[i] == 7 && !memcmp(o->meta_k[i], "version", 7);
    if (!has_version) {
        o->meta_k[o->meta_count] = "version";
        o->meta_kl[o->meta_count] = 7;
        o->meta_v[o->meta_count] = SL_VERSION;
        o->meta_count++;
    }
    size_t idx[MAX_META];
    for (size_t i = 0; i < o->meta_count; i++)
        idx[i] = i;
    for (size_t i = 1; i < o->meta_count; i++) /* insertion sort: a handful of entries */
        for (size_t j = i; j > 0 && meta_cmp(o, idx[j - 1], idx[j]) > 0; j--) {
            size_t t = idx[j];
            idx[j] = idx[j - 1];
            idx[j - 1] = t;
        }
    for (size_t i = 1; i < o->meta_count; i++)
        if (meta_cmp(o, idx[i - 1], idx[i]) == 0) {
            fprintf(stderr, "peer: --meta key '%.*s' given twice\n", (int)o->meta_kl[idx[i]],
                    o->meta_k[idx[i]]);
            return SL_EINVAL;
        }
    sl_mpack_writer_t w;
    sl_mpack_writer_init(&w, SL_META_MAX_LEN);
    sl_mpack_write_map(&w, (uint32_t)o->meta_count);
    for (size_t i = 0; i < o->meta_count; i++) {
        sl_mpack_write_str(&w, o->meta_k[idx[i]], o->meta_kl[idx[i]]);
        sl_mpack_write_str(&w, o->meta_v[idx[i]], strlen(o->meta_v[idx[i]]));
    }
    sl_err err = sl_mpack_writer_finish(&w, out, len);
    if (err == SL_OK)
        err = sl_meta_validate(*out, *len);
    if (err != SL_OK) {
        fprintf(stderr, "peer: metadata is too large or not valid UTF-8 (%s): shorten --meta\n",
                sl_strerror(err));
        sl_free(*out);
        *out = NULL;
    }
    return err;
}

/* No DNS on the I/O path (docs/transport.md): the host names the operator
 * gave are resolved here, once, each within SL_ADDR_RESOLVE_MS, so that
 * every address the peer dials or advertises is numeric. */
static int resolve_one(const char *what, char *addr, size_t cap) {
    char host[SL_ADDR_MAX + 1];
    if (sl_addr_host((const uint8_t *)addr, strlen(addr), host, sizeof host) == SL_OK &&
        (!strcmp(host, "*") || !strcmp(host, "0.0.0.0")))
        return 0; /* every interface: nothing to look up */
    char out[SL_ADDR_MAX + 16];
    sl_err err = sl_addr_resolve(addr, SL_ADDR_RESOLVE_MS, out, sizeof out);
    if (err != SL_OK) {
        fprintf(stderr, "peer: cannot resolve %s '%s': %s; give a numeric address (IPv4, or "
                "IPv6 in brackets) or fix the name\n", what, addr,
                err == SL_ETIMEDOUT ? "the resolver did not answer in 5 s" : sl_strerror(err));
        return 2;
    }
    if (strcmp(out, addr))
        sl_log(SL_LOG_NOTICE, "PEER-RESOLVE", "%s %s is %s", what, addr, out);
    snprintf(addr, cap, "%s", out);
    return 0;
}

static int resolve_names(opts_t *o) {
    int rc = resolve_one("--listen", o->listen, sizeof o->listen);
    if (!rc)
        rc = resolve_one("--advertise", o->advertise, sizeof o->advertise);
    if (rc)
        return rc;
    if (starts_with(o->advertise, "tcp://127.") &&
        listens_everywhere(o->listen))
        sl_log(SL_LOG_WARNING, "PEER-ADVERTISE",
               "advertising %s, a loopback address, while listening on all interfaces: other "
               "hosts cannot reach it; set --advertise", o->advertise);
    for (size_t i = 0; i < o->seed_count;) {
        char buf[SL_ADDR_MAX + 16];
        snprintf(buf, sizeof buf, "%s", o->seeds[i]);
        if (resolve_one("join address", buf, sizeof buf) != 0) {
            /* one stale name in a peers file does not stop the others */
            sl_free(o->seeds[i]);
            o->seeds[i] = o->seeds[--o->seed_count];
            continue;
        }
        char *copy = sl_strdup(buf);
        if (!copy)
            return 1;
        sl_free(o->seeds[i]);
        o->seeds[i++] = copy;
    }
    return 0;
}

static void seeds_free(opts_t *o) {
    for (size_t i = 0; i < o->seed_count; i++)
        sl_free(o->seeds[i]);
    o->seed_count = 0;
}

int main(int argc, char **argv) {
    opts_t o;
    int rc = parse(&o, argc, argv);
    if (rc) {
        seeds_free(&o);
        return rc < 0 ? 0 : rc;
    }
    sl_log_set_level(o.log_level);
    if (sl_init() != SL_OK) {
        fprintf(stderr, "peer: cannot start the crypto library (libsodium)\n");
        seeds_free(&o);
        return 1;
    }
    if ((rc = resolve_names(&o)) != 0) {
        seeds_free(&o); /* (a name that does not resolve: LeakSanitizer made exit 2 an exit 1) */
        return rc;
    }
    sl_net_key_t key;
    bool has_key = false;
    uint8_t *meta = NULL;
    size_t meta_len = 0;
    sl_node_t *node = NULL;
    sl_store_node_t *store = NULL;
    sl_store_watch_t *watch = NULL;
    sl_study_node_t *study = NULL;
    sl_elastic_node_t *elastic = NULL;
    sl_blob_node_t *blobs = NULL;
    rc = 1;
    if (o.key_file) {
        sl_err err = sl_net_key_load(o.key_file, &key);
        if (err == SL_ENOTFOUND) {
            fprintf(stderr, "peer: key file %s does not exist; make one with "
                            "`peerctl keygen > %s` and give every peer the same file\n",
                    o.key_file, o.key_file);
            goto done;
        }
        if (err != SL_OK) {
            fprintf(stderr, "peer: cannot use key file %s: %s; it should be the output of "
                            "`peerctl keygen`\n", o.key_file, sl_strerror(err));
            goto done;
        }
        has_key = true;
    }
    if (encode_meta(&o, &meta, &meta_len) != SL_OK) {
        rc = 2;
        goto done;
    }
    if (sl_plat_signals_install() != SL_OK) {
        fprintf(stderr, "peer: cannot install signal handlers\n");
        goto done;
    }
    sl_node_config_t cfg = {
        .name = o.name,
        .listen = o.listen,
        .advertise = o.advertise,
        .data_dir = o.data_dir,
        .key = has_key ? &key : NULL,
        .seeds = (const char *const *)o.seeds,
        .seed_count = o.seed_count,
        .meta = meta,
        .meta_len = meta_len,
        .swim = o.swim,
        .leave_wait_ms = o.leave_wait_ms,
        .control = o.control[0] ? o.control : NULL,
        .allow_commands = o.allow_commands,
        .test_faults = o.test_faults,
    };
    sl_err err = sl_node_new(&cfg, &node);
    if (err == SL_EBUSY) {
        fprintf(stderr, "peer: %s or data directory %s is in use (another peer running?); choose "
                        "another --listen port, or another --name or --data\n",
                o.listen, o.data_dir);
        goto done;
    }
    if (err == SL_EAUTH) {
        fprintf(stderr, "peer: refusing a TCP control endpoint off loopback (%s) without a "
                        "cluster key: anyone who reaches it could run commands; use --key FILE, "
                        "or --control 127.0.0.1:PORT, or the default Unix socket\n",
                o.control);
        goto done;
    }
    if (err != SL_OK) {
        fprintf(stderr, "peer: cannot start: %s (listen %s, data %s, control %s)\n",
                sl_strerror(err), o.listen, o.data_dir, o.control[0] ? o.control : "default");
        goto done;
    }
    if (!has_key)
        sl_log(SL_LOG_WARNING, "PEER-OPEN",
               "no --key: this cluster is open; anyone who can reach %s can join it, read and "
               "write its store%s (make a key with `peerctl keygen > cluster.key`, then start "
               "every peer with --key cluster.key)",
               o.listen, o.allow_commands ? ", and, with --allow-commands, run commands here"
                                          : "");
    char store_dir[4200];
    snprintf(store_dir, sizeof store_dir, "%s/store", o.data_dir);
    sl_store_node_config_t scfg = {.dir = store_dir};
    if ((err = sl_store_node_attach(node, &scfg, &store)) != SL_OK) {
        fprintf(stderr, "peer: cannot open the store in %s: %s\n", store_dir, sl_strerror(err));
        goto done;
    }
    if ((err = sl_store_watch_attach(node, store, &watch)) != SL_OK) {
        fprintf(stderr, "peer: cannot serve store watches: %s\n", sl_strerror(err));
        goto done;
    }
    char blob_dir[4200];
    snprintf(blob_dir, sizeof blob_dir, "%s/blob", o.data_dir);
    sl_blob_node_config_t bcfg = {.dir = blob_dir, .cache_max_bytes = o.blob_cache_bytes};
    if ((err = sl_blob_node_attach(node, store, &bcfg, &blobs)) != SL_OK) {
        fprintf(stderr, "peer: cannot open the blob store in %s: %s\n", blob_dir, sl_strerror(err));
        goto done;
    }
    sl_study_node_config_t ycfg = {.slots = o.slots, .threads = o.threads, .blobs = blobs,
                                   .trial_user = o.trial_user};
    if ((err = sl_study_node_attach(node, store, &ycfg, &study)) != SL_OK) {
        fprintf(stderr, "peer: cannot start the study runtime: %s%s\n", sl_strerror(err),
                o.trial_user ? " (--trial-user: the STUDY-USER line above says why)" : "");
        goto done;
    }
    sl_elastic_node_config_t ecfg = {.blobs = blobs, .ring_port = (uint16_t)o.ring_port,
                                     .threads = o.threads, .device = o.device,
                                     .key = has_key ? &key : NULL};
    if ((err = sl_elastic_node_attach(node, store, &ecfg, &elastic)) != SL_OK) {
        fprintf(stderr, "peer: cannot start the elastic jobs' runtime: %s\n", sl_strerror(err));
        goto done;
    }
    err = sl_node_run(node);
    rc = err == SL_OK ? 0 : 1;
done:
    sl_node_destroy(&node);
    sl_elastic_node_destroy(&elastic);
    sl_study_node_destroy(&study);
    sl_blob_node_destroy(&blobs);
    sl_store_watch_destroy(&watch);
    sl_store_node_destroy(&store);
    memset(&key, 0, sizeof key);
    sl_free(meta);
    seeds_free(&o);
    return rc;
}
