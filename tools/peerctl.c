/* peerctl: the command-line client. This file holds main(), the global
 * flags and the dispatch table; each sub-command lives in
 * tools/peerctl_*.c. See docs/cli.md. */
#include <stdio.h>
#include <string.h>

#include "peerctl.h"
#include "peerctl_blob.h"
#include "peerctl_client.h"
#include "peerctl_store.h"
#include "peerctl_study.h"
#include "starling/common.h"
#include "starling/net.h"

/* One sub-command. */
typedef struct {
    const char *name;                /* as typed */
    int (*fn)(int argc, char **argv); /* runs it; argv[0] is the name */
    const char *help;                /* one line for --help */
    const char *usage;               /* `peerctl CMD --help` for a command without its
                                        own (NULL: the command prints its own) */
} command_t;

static const command_t commands[] = {
    {"members", sl_cmd_members, "list the cluster's members as this peer sees them [--json]"},
    {"stats", sl_cmd_stats, "this peer's counters: messages, drops, bad input, memory [--json]"},
    {"keygen", sl_cmd_keygen, "print a new cluster key file (peerctl keygen > cluster.key)"},
    {"train", sl_cmd_train, "train a model locally"},
    {"put", sl_cmd_put, "store a value: put KEY VALUE | put KEY --file FILE"},
    {"get", sl_cmd_get, "print a stored value: get KEY"},
    {"del", sl_cmd_del, "delete a key: del KEY",
     "del KEY\n\nDeletes KEY (any type) on every peer. Fails if KEY does not exist."},
    {"keys", sl_cmd_keys, "list stored keys: keys [PREFIX]",
     "keys [PREFIX] [--json]\n\nLists the live keys that start with PREFIX (all without one), sorted;\n--json prints a JSON array."},
    {"blob", sl_cmd_blob, "large files: blob put FILE | blob get HASH OUTFILE | blob ls [--json]"},
    {"submit", sl_cmd_submit, "submit a study or an elastic job: submit FILE.json (prints its id)",
     "submit FILE.json\n\nSubmits a study (docs/studies.md) or an elastic job (a file with\n\"kind\": \"elastic\", docs/elastic.md; examples of both in peers/examples/) and\nprints its id. The same file always gives the same id; an invalid file is\nrefused with the field and the problem, and nothing is written. The\ncommands below take a study's or a job's id or name."},
    {"status", sl_cmd_status, "a study's trials, or a job's world and progress: status STUDY|JOB [--json]",
     "status STUDY [--json]\n\nThe study's trials as this peer sees them: trial, state\n(pending|running|paused|done|failed|preempted), owner, epoch, latest\nmetrics, config. STUDY is an id or a name."},
    {"watch", sl_cmd_watch, "live changes: watch [PREFIX] (keys), watch STUDY (progress bars), watch JOB"},
    {"logs", sl_cmd_logs, "a trial's log: logs STUDY TRIAL [-f]; a job's: logs JOB [PEER] [-f]",
     "logs STUDY TRIAL [-f]\n\nThe trial's log, every owner's run in order; -f follows it until the\ntrial is final."},
    {"results", sl_cmd_results, "leaderboard (--out DIR: models.json, pareto.json), or a job's end (--out DIR: model.npz, curves.csv, results.json): results STUDY|JOB [--json] [--out DIR]",
     "results STUDY [--json] [--out DIR]\n\nPrints the leaderboard (--json: the whole answer, models and Pareto front\nincluded). With --out DIR, also writes models.json (the best models, their\nconfigs and metrics), pareto.json (the Pareto front over the study's\nobjectives) and leaderboard.txt into DIR, made if missing; without --out\nit writes no file."},
    {"fetch", sl_cmd_fetch, "trained weights (.npz): fetch STUDY TRIAL DIR | fetch JOB DIR",
     "fetch STUDY TRIAL DIR\n\nWrites the trial's trained weights to DIR/TRIAL.npz (numpy: np.load),\nfrom its latest replicated checkpoint (fetched from a peer that holds it).\nFor a command trial: its checkpoint's first file in name order."},
    {"plot", sl_cmd_plot, "SVG plots: plot STUDY|JOB --out DIR (curves and Pareto front; a job's loss and world size)",
     "plot STUDY --out DIR\n\nWrites curves.svg (training curves of every trial) and pareto.svg (the\nPareto front) into DIR."},
    {"cancel", sl_cmd_cancel, "stop a study or a job: cancel STUDY|JOB",
     "cancel STUDY\n\nStops the study: running trials stop at their next epoch, nothing new is\nclaimed, and the study is marked finished."},
};

static void usage(FILE *f) {
    fprintf(f,
            "usage: peerctl [--peer DATA_DIR|ipc://PATH|HOST:PORT] [--key FILE] [--timeout MS]\n"
            "               COMMAND [ARGS]\n"
            "\n"
            "Talks to a running `peer` (see docs/cli.md).\n"
            "\n"
            "global options:\n"
            "  --peer WHERE      the peer to ask, at its control endpoint (never its gossip\n"
            "                    port): its data directory DIR (the Unix socket\n"
            "                    DIR/control.sock, on the peer's machine, as its user),\n"
            "                    ipc://PATH, or HOST:PORT of a `peer --control HOST:PORT`.\n"
            "                    Default: $STARLING_PEER, else the data directory of a peer\n"
            "                    started with no options ($HOME/.local/share/starling/HOST-%d)\n"
            "  --key FILE        the cluster key file, for a closed cluster (default: $STARLING_KEY)\n"
            "  --timeout MS      how long to wait for each reply (default %d)\n"
            "\n"
            "commands:\n",
            SL_NET_DEFAULT_PORT, SL_PEERCTL_TIMEOUT_MS);
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(f, "  %-9s %s\n", commands[i].name, commands[i].help);
    fprintf(f, "\nRun `peerctl COMMAND --help` for a command's own options.\n");
}

int main(int argc, char **argv) {
    sl_peerctl_opts_defaults(&sl_peerctl_opts);
    int i = 1;
    while (i < argc && argv[i][0] == '-') {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            usage(stdout);
            return 0;
        }
        if (!strcmp(argv[i], "--version")) {
            printf("peerctl %s\n", SL_VERSION);
            return 0;
        }
        int r = sl_peerctl_opts_take(&sl_peerctl_opts, argc, argv, &i);
        if (r < 0)
            return 2;
        if (r == 0) {
            fprintf(stderr, "peerctl: unknown option '%s'; see peerctl --help\n", argv[i]);
            return 2;
        }
    }
    if (i >= argc) {
        usage(stderr);
        return 2;
    }
    if (sl_init() != SL_OK) {
        fprintf(stderr, "peerctl: cannot start the crypto library\n");
        return 1;
    }
    for (size_t k = 0; k < sizeof commands / sizeof commands[0]; k++) {
        if (strcmp(argv[i], commands[k].name) != 0)
            continue;
        for (int a = i + 1; commands[k].usage && a < argc; a++)
            if (!strcmp(argv[a], "--help") || !strcmp(argv[a], "-h")) {
                printf("usage: peerctl %s\n", commands[k].usage);
                return 0;
            }
        return commands[k].fn(argc - i, argv + i);
    }
    fprintf(stderr, "peerctl: unknown command '%s'; see peerctl --help\n", argv[i]);
    return 2;
}
