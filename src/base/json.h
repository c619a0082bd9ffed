/* Strict reading of the JSON files users write (study specs, elastic job
 * files): one object, nothing after it, no unknown or repeated field, and
 * every refusal naming the field by its path ("trainer.command: must be a
 * string"). Internal to the library; in base/json.c. */
#ifndef STARLING_BASE_JSON_H
#define STARLING_BASE_JSON_H

#include <stdbool.h>
#include <stddef.h>

#include <cjson/cJSON.h>

#include "starling/common.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Parses `len` bytes as one JSON object (a final NUL and white space after
 * it allowed). `what` names the document in refusals ("study", "job"). On
 * success *out is the object, for cJSON_Delete; else SL_EINVAL and why. */
sl_err sl_json_parse_object(const char *json, size_t len, const char *what, cJSON **out,
                            char *why, size_t why_len);

/* Refuses keys of `obj` not in `allowed` (NULL-terminated) and duplicates;
 * `path` is the object's place ("" at the top, "trainer", ...). */
sl_err sl_json_check_keys(const cJSON *obj, const char *path, const char *const *allowed,
                          char *why, size_t why_len);

/* A string field of 1..cap-1 characters, none of them a control character;
 * absent keeps *out unless `required`. */
sl_err sl_json_get_str(const cJSON *obj, const char *path, const char *key, bool required,
                       char *out, size_t cap, char *why, size_t why_len);

#ifdef __cplusplus
}
#endif

#endif
