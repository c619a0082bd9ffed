/* peerctl's study commands (tools/peerctl_study.c): each takes argv from
 * the sub-command's name and returns the exit status. */
#ifndef STARLING_PEERCTL_STUDY_H
#define STARLING_PEERCTL_STUDY_H

int sl_cmd_submit(int argc, char **argv);
int sl_cmd_status(int argc, char **argv);
/* peerctl watch STUDY (tools/peerctl_watch.c decides study or keys) */
int sl_cmd_watch_study(const char *study);
int sl_cmd_logs(int argc, char **argv);
int sl_cmd_results(int argc, char **argv);
int sl_cmd_fetch(int argc, char **argv);
int sl_cmd_plot(int argc, char **argv);
int sl_cmd_cancel(int argc, char **argv);

#endif
