/* What the statically linked libzmq (cmake/zeromq.cmake, ADR 0006)
 * references but Starling never uses, defined here so that a peer maps no
 * Kerberos and no libbsd: about 0.7 MB of resident memory a peer.
 *
 * - GSSAPI: libzmq's GSSAPI security mechanism. A socket uses it only when
 *   its own options ask for it (ZMQ_GSSAPI_SERVER / _PLAINTEXT...), which
 *   Starling never sets: a remote peer cannot select it (libzmq refuses a
 *   greeting whose mechanism differs from ours before any mechanism code
 *   runs). Every function fails anyway, should that ever change.
 * - strlcpy: libbsd's, which glibc 2.36 lacks. */
#include <gssapi/gssapi.h>
#include <string.h>

size_t strlcpy(char *dst, const char *src, size_t size);

size_t strlcpy(char *dst, const char *src, size_t size) {
    size_t len = strlen(src);
    if (size > 0) {
        size_t n = len < size - 1 ? len : size - 1;
        memcpy(dst, src, n);
        dst[n] = 0;
    }
    return len;
}

/* Name types libzmq passes by reference; never dereferenced here. */
gss_OID GSS_C_NT_HOSTBASED_SERVICE = NULL;
gss_OID GSS_C_NT_USER_NAME = NULL;

#define UNUSED_MECHANISM(minor)                                                                    \
    do {                                                                                           \
        if (minor)                                                                                 \
            *(minor) = 0;                                                                          \
        return GSS_S_FAILURE;                                                                      \
    } while (0)

OM_uint32 gss_acquire_cred(OM_uint32 *minor, gss_name_t name, OM_uint32 time_req,
                           gss_OID_set mechs, gss_cred_usage_t usage, gss_cred_id_t *cred,
                           gss_OID_set *actual, OM_uint32 *time_rec) {
    (void)name, (void)time_req, (void)mechs, (void)usage, (void)cred, (void)actual;
    (void)time_rec;
    UNUSED_MECHANISM(minor);
}

OM_uint32 gss_release_cred(OM_uint32 *minor, gss_cred_id_t *cred) {
    (void)cred;
    UNUSED_MECHANISM(minor);
}

OM_uint32 gss_init_sec_context(OM_uint32 *minor, gss_cred_id_t cred, gss_ctx_id_t *ctx,
                               gss_name_t target, gss_OID mech, OM_uint32 req_flags,
                               OM_uint32 time_req, gss_channel_bindings_t bindings,
                               gss_buffer_t input, gss_OID *actual_mech, gss_buffer_t output,
                               OM_uint32 *ret_flags, OM_uint32 *time_rec) {
    (void)cred, (void)ctx, (void)target, (void)mech, (void)req_flags, (void)time_req;
    (void)bindings, (void)input, (void)actual_mech, (void)output, (void)ret_flags;
    (void)time_rec;
    UNUSED_MECHANISM(minor);
}

OM_uint32 gss_accept_sec_context(OM_uint32 *minor, gss_ctx_id_t *ctx, gss_cred_id_t cred,
                                 gss_buffer_t input, gss_channel_bindings_t bindings,
                                 gss_name_t *src_name, gss_OID *mech, gss_buffer_t output,
                                 OM_uint32 *ret_flags, OM_uint32 *time_rec,
                                 gss_cred_id_t *delegated) {
    (void)ctx, (void)cred, (void)input, (void)bindings, (void)src_name, (void)mech;
    (void)output, (void)ret_flags, (void)time_rec, (void)delegated;
    UNUSED_MECHANISM(minor);
}

OM_uint32 gss_delete_sec_context(OM_uint32 *minor, gss_ctx_id_t *ctx, gss_buffer_t output) {
    (void)ctx, (void)output;
    UNUSED_MECHANISM(minor);
}

OM_uint32 gss_wrap(OM_uint32 *minor, gss_ctx_id_t ctx, int conf_req, gss_qop_t qop,
                   gss_buffer_t input, int *conf_state, gss_buffer_t output) {
    (void)ctx, (void)conf_req, (void)qop, (void)input, (void)conf_state, (void)output;
    UNUSED_MECHANISM(minor);
}

OM_uint32 gss_unwrap(OM_uint32 *minor, gss_ctx_id_t ctx, gss_buffer_t input,
                     gss_buffer_t output, int *conf_state, gss_qop_t *qop) {
    (void)ctx, (void)input, (void)output, (void)conf_state, (void)qop;
    UNUSED_MECHANISM(minor);
}

OM_uint32 gss_display_name(OM_uint32 *minor, gss_name_t name, gss_buffer_t output,
                           gss_OID *type) {
    (void)name, (void)output, (void)type;
    UNUSED_MECHANISM(minor);
}

OM_uint32 gss_import_name(OM_uint32 *minor, gss_buffer_t input, gss_OID type,
                          gss_name_t *output) {
    (void)input, (void)type, (void)output;
    UNUSED_MECHANISM(minor);
}

OM_uint32 gss_release_name(OM_uint32 *minor, gss_name_t *name) {
    (void)name;
    UNUSED_MECHANISM(minor);
}

OM_uint32 gss_release_buffer(OM_uint32 *minor, gss_buffer_t buffer) {
    (void)buffer;
    UNUSED_MECHANISM(minor);
}
