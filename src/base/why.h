/* The reason of a refusal, for functions that take a caller's buffer
 * (char *why, size_t why_len) beside their error code: the spec parsers
 * (study/study_spec.c, nn/spec.c), the reporter (study/report.c) and the
 * training engine's loaders. Internal to the library; in base/err.c. */
#ifndef STARLING_BASE_WHY_H
#define STARLING_BASE_WHY_H

#include <stddef.h>

#include "starling/common.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Writes the formatted message into why (when why is non-NULL and why_len
 * is not 0, truncated to fit); returns err. */
sl_err sl_why(char *why, size_t why_len, sl_err err, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

#ifdef __cplusplus
}
#endif

#endif
