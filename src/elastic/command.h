/* An elastic command job's worker on this peer: the job's command, run
 * for one world with torchrun's environment, so that a PyTorch script
 * written for torchrun runs unchanged (docs/elastic.md "Command jobs").
 *
 * The node starts one when its world starts and stops it when the world
 * ends: SIGTERM to the command's process group, SIGKILL after the job's
 * stop_grace_s. The command runs under `sh -c` in its own process group,
 * with the peer's environment plus:
 *
 *   RANK, GROUP_RANK        this peer's rank in the world (one process per peer)
 *   LOCAL_RANK              0
 *   WORLD_SIZE              the world's ranks
 *   LOCAL_WORLD_SIZE        1
 *   ROLE_RANK, ROLE_WORLD_SIZE, ROLE_NAME ("default"), GROUP_WORLD_SIZE
 *   MASTER_ADDR, MASTER_PORT  rank 0's host and port (its ring endpoint)
 *   TORCHELASTIC_RESTART_COUNT  worlds this peer ran the job in before this one
 *   TORCHELASTIC_RUN_ID     the job id
 *   TORCHELASTIC_MAX_RESTARTS  0 (Starling restarts without a limit)
 *   TORCHELASTIC_USE_AGENT_STORE  "False" (the script makes its own store at MASTER_ADDR)
 *   TORCHELASTIC_ERROR_FILE unset (torch's @record then prints the error: a LOG line)
 *   NCCL_ASYNC_ERROR_HANDLING  the peer's, else "1" (as torchrun)
 *   PYTHONUNBUFFERED        the peer's, else "1" (lines arrive as printed)
 *   STARLING_JOB, STARLING_ROUND  the job id and the world's round
 *   STARLING_CHECKPOINT_DIR a directory of this peer the script saves its
 *                           checkpoints in and resumes from; the node
 *                           replicates rank 0's as blobs and restores the
 *                           newest into every member's before a world starts
 *
 * The shell is sl_plat_spawn's (platform.h): the command's programs get
 * the SIGTERM, and the command ends when they have (a program that
 * checkpoints on SIGTERM finishes within the grace); what the command
 * leaves behind when it ends is killed; when the peer dies, the group is
 * killed with SIGKILL at once. The command runs as the peer's user
 * (--trial-user is for studies only). Its standard output and error are
 * read line by line into LOG events (a line longer than an event's text
 * comes in pieces). The worker never touches the store or the node. */
#ifndef STARLING_ELASTIC_COMMAND_H
#define STARLING_ELASTIC_COMMAND_H

#include <stdbool.h>
#include <stdint.h>

#include "starling/elastic.h"

typedef struct {
    char command[SL_ELASTIC_TEXT_MAX + 1];  /* the shell command */
    uint32_t stop_grace_s;                  /* SIGTERM to SIGKILL */
    char job_id[SL_ELASTIC_JOB_ID_LEN + 1]; /* TORCHELASTIC_RUN_ID, STARLING_JOB */
    uint64_t round;                         /* STARLING_ROUND */
    uint32_t rank;                          /* RANK */
    uint32_t world_size;                    /* WORLD_SIZE */
    uint32_t restart_count;                 /* TORCHELASTIC_RESTART_COUNT */
    char master_addr[256];                  /* MASTER_ADDR */
    uint16_t master_port;                   /* MASTER_PORT */
    char checkpoint_dir[600];               /* STARLING_CHECKPOINT_DIR (exists) */
    char cwd[600];                          /* working directory ("": the peer's) */
    int wake_fd;                            /* a byte for each event (0: none) */
} sl_elastic_command_cfg_t;

typedef enum {
    SL_ECEV_LOG = 0, /* a line of the command's output */
    SL_ECEV_END = 1  /* the command ended: `status` (exit code, or 128 + signal;
                        127: it could not start, the LOG says why), `stopped`
                        when it ended after sl_elastic_command_stop */
} sl_ecev_kind;

typedef struct sl_ecev {
    sl_ecev_kind kind;    /* what */
    int status;           /* END */
    bool stopped;         /* END */
    char text[512];       /* LOG: the line; END: in words */
    struct sl_ecev *next; /* queue link */
} sl_ecev_t;

typedef struct sl_elastic_command sl_elastic_command_t;

/* Starts the command (and a thread that reads its output and reaps it). */
sl_err sl_elastic_command_start(const sl_elastic_command_cfg_t *cfg,
                                sl_elastic_command_t **out);
/* Stops it: SIGTERM to its process group now, SIGKILL once stop_grace_s
 * has passed; an END event follows. */
void sl_elastic_command_stop(sl_elastic_command_t *c);
/* Pops the next event (caller sl_free's it), or NULL. */
sl_ecev_t *sl_elastic_command_pop(sl_elastic_command_t *c);
/* Whether it has ended (its END event is queued). */
bool sl_elastic_command_ended(sl_elastic_command_t *c);
/* Stops it if running (SIGKILL at once), joins the thread and frees. */
void sl_elastic_command_destroy(sl_elastic_command_t **c);

#endif
