/* Error codes: their names and descriptions; the reason of a refusal
 * (base/why.h). */
#include <stdarg.h>
#include <stdio.h>

#include "base/why.h"
#include "starling/common.h"

static const struct {
    const char *name; /* stable symbol name */
    const char *text; /* lower-case description */
} err_table[SL_ERR_COUNT] = {
    [SL_OK] = {"SL_OK", "success"},
    [SL_EINVAL] = {"SL_EINVAL", "invalid argument"},
    [SL_ENOMEM] = {"SL_ENOMEM", "out of memory"},
    [SL_EPROTO] = {"SL_EPROTO", "malformed message"},
    [SL_ETOOBIG] = {"SL_ETOOBIG", "over a size, count or depth limit"},
    [SL_EVERSION] = {"SL_EVERSION", "unknown version"},
    [SL_ETYPE] = {"SL_ETYPE", "unknown message type"},
    [SL_ETRUNC] = {"SL_ETRUNC", "input ends early"},
    [SL_ENONCANON] = {"SL_ENONCANON", "not in the canonical encoding"},
    [SL_EIO] = {"SL_EIO", "input/output error"},
    [SL_ENOTFOUND] = {"SL_ENOTFOUND", "not found"},
    [SL_EEXIST] = {"SL_EEXIST", "already exists"},
    [SL_EAGAIN] = {"SL_EAGAIN", "try again"},
    [SL_ETIMEDOUT] = {"SL_ETIMEDOUT", "timed out"},
    [SL_ECORRUPT] = {"SL_ECORRUPT", "checksum or hash mismatch"},
    [SL_EAUTH] = {"SL_EAUTH", "authentication failed"},
    [SL_EUNSUPPORTED] = {"SL_EUNSUPPORTED", "not supported"},
    [SL_ECLOSED] = {"SL_ECLOSED", "closed"},
    [SL_EBUSY] = {"SL_EBUSY", "busy"},
    [SL_ENODEV] = {"SL_ENODEV", "no device"},
    [SL_ERANGE] = {"SL_ERANGE", "out of range"},
    [SL_ESTATE] = {"SL_ESTATE", "not valid in this state"},
    [SL_EINTERNAL] = {"SL_EINTERNAL", "internal error"},
};

const char *sl_strerror(sl_err err) {
    if ((unsigned)err >= SL_ERR_COUNT)
        return "unknown error";
    return err_table[err].text;
}

const char *sl_errname(sl_err err) {
    if ((unsigned)err >= SL_ERR_COUNT)
        return "SL_E?";
    return err_table[err].name;
}

sl_err sl_why(char *why, size_t why_len, sl_err err, const char *fmt, ...) {
    if (why && why_len) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(why, why_len, fmt, ap);
        va_end(ap);
    }
    return err;
}
