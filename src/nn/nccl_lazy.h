/* NCCL, loaded at run time: the gradient all-reduce of an elastic job's
 * world whose members all train on a GPU (docs/elastic.md "NCCL").
 *
 * libnccl.so.2 is dlopen()ed the first time a communicator is wanted
 * ($STARLING_NCCL_LIB names another file: the CPU emulation of the tests,
 * src/nn/cuda/emu/nccl_emu.c), as the cuda backend is: no binary links
 * NCCL, and a machine without it trains over the ring. A communicator is
 * nonblocking: its creation and each collective return at once, and the
 * caller polls (sl_nccl_poll, and the backend's stream) with its own
 * deadline, aborting the communicator when a member is gone, where a
 * blocking call would wait for ever. Internal to the library. */
#ifndef STARLING_NN_NCCL_LAZY_H
#define STARLING_NN_NCCL_LAZY_H

#include <stddef.h>
#include <stdint.h>

#include "starling/common.h"

#define SL_NCCL_ID_LEN 128 /* bytes of a unique id (NCCL_UNIQUE_ID_BYTES) */

typedef struct sl_nccl sl_nccl_t;

/* Loads the library once (thread-safe). SL_EUNSUPPORTED, with what is
 * missing in `why`, when it cannot be loaded or lacks a function; the
 * same answer on every later call. */
sl_err sl_nccl_load(char *why, size_t why_len);
/* The loaded library's version code (22809 for 2.28.9), 0 when none. */
int sl_nccl_version(void);
/* A fresh unique id: the process that makes it hosts the communicator's
 * bootstrap, so rank 0 makes it. */
sl_err sl_nccl_unique_id(uint8_t id[SL_NCCL_ID_LEN], char *why, size_t why_len);
/* Starts rank `rank` of `nranks` on the current device (the caller's
 * thread has the backend's device current); the communicator is usable
 * once sl_nccl_poll returns SL_OK. */
sl_err sl_nccl_new(const uint8_t id[SL_NCCL_ID_LEN], int nranks, int rank, sl_nccl_t **out,
                   char *why, size_t why_len);
/* The state of the last thing started (the creation, or the enqueueing
 * of a collective): SL_OK done, SL_EAGAIN still in progress, or the
 * communicator's error (a member failed: SL_ECLOSED; see sl_nccl_error).
 * An error is kept: every later call returns it. */
sl_err sl_nccl_poll(sl_nccl_t *c);
/* Sums `count` floats at device pointer `dev` over the ranks, in place,
 * queued on `stream` (a cudaStream_t). Returns once it is enqueued or
 * being enqueued (poll, then wait for the stream). */
sl_err sl_nccl_allreduce_sum(sl_nccl_t *c, float *dev, size_t count, void *stream);
/* What went wrong last, "" when nothing did. */
const char *sl_nccl_error(const sl_nccl_t *c);
/* Aborts whatever is in flight (a collective waiting for a dead member
 * ends) and frees; NULL-safe, nulls the pointer. */
void sl_nccl_abort(sl_nccl_t **c);

#endif
