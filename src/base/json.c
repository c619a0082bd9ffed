/* Strict reading of users' JSON files (base/json.h). */
#include "base/json.h"

#include <ctype.h>
#include <string.h>

#include "base/why.h"

/* "path.key", or "key" at the top. */
#define FIELD(path, key) (path), (*(path) ? "." : ""), (key)

sl_err sl_json_parse_object(const char *json, size_t len, const char *what, cJSON **out,
                            char *why, size_t why_len) {
    *out = NULL;
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(json, len, &end, false);
    if (!root) {
        size_t off = end && end >= json ? (size_t)(end - json) : 0;
        return sl_why(why, why_len, SL_EINVAL, "%s: not valid JSON near byte %zu", what, off);
    }
    if (!cJSON_IsObject(root)) {
        cJSON_Delete(root);
        return sl_why(why, why_len, SL_EINVAL, "%s: must be a JSON object", what);
    }
    while (end && end < json + len && isspace((unsigned char)*end))
        end++;
    if (end != json + len && !(end && *end == '\0' && end + 1 == json + len)) {
        cJSON_Delete(root);
        return sl_why(why, why_len, SL_EINVAL, "%s: text after the JSON object (byte %zu)", what,
                      (size_t)(end - json));
    }
    *out = root;
    return SL_OK;
}

sl_err sl_json_check_keys(const cJSON *obj, const char *path, const char *const *allowed,
                          char *why, size_t why_len) {
    for (const cJSON *it = obj->child; it; it = it->next) {
        bool ok = false;
        for (size_t i = 0; allowed[i] && !ok; i++)
            ok = strcmp(it->string, allowed[i]) == 0;
        if (!ok)
            return sl_why(why, why_len, SL_EINVAL, "%s%s%s: unknown field", FIELD(path, it->string));
        for (const cJSON *j = it->next; j; j = j->next)
            if (strcmp(it->string, j->string) == 0)
                return sl_why(why, why_len, SL_EINVAL, "%s%s%s: given twice",
                              FIELD(path, it->string));
    }
    return SL_OK;
}

sl_err sl_json_get_str(const cJSON *obj, const char *path, const char *key, bool required,
                       char *out, size_t cap, char *why, size_t why_len) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    if (!v)
        return required ? sl_why(why, why_len, SL_EINVAL, "%s%s%s: required", FIELD(path, key))
                        : SL_OK;
    if (!cJSON_IsString(v))
        return sl_why(why, why_len, SL_EINVAL, "%s%s%s: must be a string", FIELD(path, key));
    size_t n = strlen(v->valuestring);
    if (n == 0)
        return sl_why(why, why_len, SL_EINVAL, "%s%s%s: must not be empty", FIELD(path, key));
    if (n >= cap)
        return sl_why(why, why_len, SL_EINVAL, "%s%s%s: longer than %zu characters",
                      FIELD(path, key), cap - 1);
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)v->valuestring[i] < 0x20)
            return sl_why(why, why_len, SL_EINVAL, "%s%s%s: holds a control character",
                          FIELD(path, key));
    memcpy(out, v->valuestring, n + 1);
    return SL_OK;
}
