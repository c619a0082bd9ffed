/* peerctl's views of an elastic job (tools/peerctl_job.c), used by the
 * study commands when the peer answers for a job. */
#ifndef STARLING_PEERCTL_JOB_H
#define STARLING_PEERCTL_JOB_H

#include <stdbool.h>

#include <cjson/cJSON.h>

/* Whether a status or results reply is a job's ("kind": "elastic"). */
bool sl_job_is(const cJSON *reply);
/* Prints a job's status for people; returns whether the job has ended. */
bool sl_job_print_status(const cJSON *st);
/* Prints the job's progress and every change of world as it happens,
 * until it ends; `status` asks the peer (NULL with *rc on failure). */
int sl_job_watch(const char *job, cJSON *(*status)(const char *id, int *rc));
/* results JOB [--json] [--out DIR]: prints the job's end, and with DIR
 * writes curves.csv, results.json and model.npz (the final model) there. */
int sl_job_results(const cJSON *r, const char *out_dir, bool json);

#endif
