/* Differences between the XLA FFI headers of the jaxlib versions we build
 * against, in one place.
 *
 * The headers come from jax.ffi.include_dir() at build time. Their names move
 * between versions: the extension chain's node is XLA_FFI_Extension_Base in
 * jaxlib <= 0.10 and XLA_FFI_InternalExtension in 0.11. Its layout has not
 * changed (struct_size, type, next), so we read it through our own mirror and
 * never name either type. Struct sizes are enum constants, which #ifdef cannot
 * test; where we need to know whether a field exists we compare offsets with
 * the struct_size the runtime reports. */
#ifndef JMG_FFI_XLA_COMPAT_H
#define JMG_FFI_XLA_COMPAT_H

#include <stddef.h>
#include <stdint.h>

#include "xla/ffi/api/c_api.h"

/* The node of the call frame's extension chain. */
typedef struct jmg_xla_extension {
  size_t struct_size;
  int type; /* an enum in XLA's header: int-sized */
  struct jmg_xla_extension *next;
} jmg_xla_extension;

/* XLA_FFI_Extension_Metadata: the registration-time metadata query. */
#define JMG_XLA_EXTENSION_METADATA 1

typedef struct jmg_xla_metadata_extension {
  jmg_xla_extension base;
  XLA_FFI_Metadata *metadata;
} jmg_xla_metadata_extension;

/* The first extension of a call frame, whatever the header calls its type. */
static inline const jmg_xla_extension *jmg_xla_first_extension(
    const XLA_FFI_CallFrame *frame) {
  return (const jmg_xla_extension *)(const void *)frame->extension_start;
}

/* True when the runtime's XLA_FFI_Api is large enough to hold the function
 * pointer at byte offset `offset` (a newer field on an older runtime). */
static inline int jmg_xla_api_has(const XLA_FFI_Api *api, size_t offset) {
  return api != NULL && api->struct_size >= offset + sizeof(void *);
}

#define JMG_XLA_API_HAS(api, field) \
  jmg_xla_api_has((api), offsetof(XLA_FFI_Api, field))

/* The message of an XLA error, valid until the error is destroyed. API 0.3
 * (jaxlib <= 0.10) reads it with XLA_FFI_Error_GetMessage, API 0.4 (jaxlib
 * 0.11) with XLA_FFI_Error_GetDetails, which also returns the code. */
static inline const char *jmg_xla_error_message(const XLA_FFI_Api *api,
                                                XLA_FFI_Error *error) {
#if XLA_FFI_API_MAJOR == 0 && XLA_FFI_API_MINOR < 4
  XLA_FFI_Error_GetMessage_Args args = {0};
  args.struct_size = XLA_FFI_Error_GetMessage_Args_STRUCT_SIZE;
  args.error = error;
  api->XLA_FFI_Error_GetMessage(&args);
#else
  XLA_FFI_Error_GetDetails_Args args = {0};
  args.struct_size = XLA_FFI_Error_GetDetails_Args_STRUCT_SIZE;
  args.error = error;
  api->XLA_FFI_Error_GetDetails(&args);
#endif
  return args.message;
}

#endif
