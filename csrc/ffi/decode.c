/* Decoding XLA FFI call frames (ffi/decode.h). */
#include "ffi/decode.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

int jmg_ffi_answer_metadata(XLA_FFI_CallFrame *frame) {
  const jmg_xla_extension *ext = jmg_xla_first_extension(frame);
  if (ext == NULL || ext->type != JMG_XLA_EXTENSION_METADATA) return 0;
  const jmg_xla_metadata_extension *meta =
      (const jmg_xla_metadata_extension *)(const void *)ext;
  meta->metadata->api_version.major_version = XLA_FFI_API_MAJOR;
  meta->metadata->api_version.minor_version = XLA_FFI_API_MINOR;
  meta->metadata->traits = 0;
  return 1;
}

int jmg_ffi_check_counts(const XLA_FFI_CallFrame *frame, const char *op,
                         int64_t nargs, int64_t nrets, jmg_error *err) {
  if (frame->args.size != nargs || frame->rets.size != nrets)
    return jmg_error_set(err, JMG_EINVAL, op, "FFI call frame",
                         "expected %lld arguments and %lld results, got %lld "
                         "and %lld",
                         (long long)nargs, (long long)nrets,
                         (long long)frame->args.size,
                         (long long)frame->rets.size);
  return 0;
}

static int decode_buffer(void *raw, int is_buffer, const char *op,
                         const char *kind, int64_t i, const char *what,
                         int64_t rank, jmg_ffi_buffer *out, jmg_error *err) {
  if (!is_buffer || raw == NULL)
    return jmg_error_set(err, JMG_EINVAL, op, "FFI call frame",
                         "%s %lld (%s) is not a buffer", kind, (long long)i,
                         what);
  const XLA_FFI_Buffer *b = raw;
  if (b->rank != rank)
    return jmg_error_set(err, JMG_EINVAL, op, "FFI call frame",
                         "%s %lld (%s) has rank %lld, expected %lld", kind,
                         (long long)i, what, (long long)b->rank,
                         (long long)rank);
  out->xla_dtype = b->dtype;
  out->data = b->data;
  out->rank = b->rank;
  out->dims = b->dims;
  for (int64_t k = 0; k < rank; ++k)
    if (b->dims[k] < 0)
      return jmg_error_set(err, JMG_EINVAL, op, "FFI call frame",
                           "%s %lld (%s) has a negative dimension", kind,
                           (long long)i, what);
  return 0;
}

int jmg_ffi_arg(const XLA_FFI_CallFrame *frame, const char *op, int64_t i,
                const char *what, int64_t rank, jmg_ffi_buffer *out,
                jmg_error *err) {
  if (i < 0 || i >= frame->args.size)
    return jmg_error_set(err, JMG_EINVAL, op, "FFI call frame",
                         "argument %lld (%s) is missing", (long long)i, what);
  return decode_buffer(frame->args.args[i],
                       frame->args.types[i] == XLA_FFI_ArgType_BUFFER, op,
                       "argument", i, what, rank, out, err);
}

int jmg_ffi_ret(const XLA_FFI_CallFrame *frame, const char *op, int64_t i,
                const char *what, int64_t rank, jmg_ffi_buffer *out,
                jmg_error *err) {
  if (i < 0 || i >= frame->rets.size)
    return jmg_error_set(err, JMG_EINVAL, op, "FFI call frame",
                         "result %lld (%s) is missing", (long long)i, what);
  return decode_buffer(frame->rets.rets[i],
                       frame->rets.types[i] == XLA_FFI_RetType_BUFFER, op,
                       "result", i, what, rank, out, err);
}

int jmg_ffi_dtype(XLA_FFI_DataType t, const char *op, const char *what,
                  jmg_dtype *out, jmg_error *err) {
  switch (t) {
    case XLA_FFI_DataType_F32:
      *out = JMG_F32;
      return 0;
    case XLA_FFI_DataType_F64:
      *out = JMG_F64;
      return 0;
    case XLA_FFI_DataType_C64:
      *out = JMG_C64;
      return 0;
    case XLA_FFI_DataType_C128:
      *out = JMG_C128;
      return 0;
    default:
      return jmg_error_set(err, JMG_EINVAL, op, "FFI call frame",
                           "%s has XLA element type %d; jaxmg solves in "
                           "float32, float64, complex64 and complex128",
                           what, (int)t);
  }
}

int jmg_ffi_expect_dtype(const jmg_ffi_buffer *buf, XLA_FFI_DataType t,
                         const char *op, const char *what, jmg_error *err) {
  if (buf->xla_dtype != t)
    return jmg_error_set(err, JMG_EINVAL, op, "FFI call frame",
                         "%s has XLA element type %d, expected %d", what,
                         (int)buf->xla_dtype, (int)t);
  return 0;
}

int jmg_ffi_expect_dims(const jmg_ffi_buffer *buf, const int64_t *dims,
                        const char *op, const char *what, jmg_error *err) {
  for (int64_t k = 0; k < buf->rank; ++k)
    if (buf->dims[k] != dims[k])
      return jmg_error_set(err, JMG_EINVAL, op, "FFI call frame",
                           "%s has dimension %lld of size %lld, expected %lld",
                           what, (long long)k, (long long)buf->dims[k],
                           (long long)dims[k]);
  return 0;
}

static int name_is(const XLA_FFI_ByteSpan *span, const char *name) {
  size_t len = strlen(name);
  return span->len == len && memcmp(span->ptr, name, len) == 0;
}

/* The index of attribute name in the frame, or -1. */
static int64_t attr_index(const XLA_FFI_CallFrame *frame, const char *name) {
  for (int64_t i = 0; i < frame->attrs.size; ++i)
    if (name_is(frame->attrs.names[i], name)) return i;
  return -1;
}

int jmg_ffi_has_attr(const XLA_FFI_CallFrame *frame, const char *name) {
  return attr_index(frame, name) >= 0;
}

/* The attribute name of the frame, of type want (what says it in an
 * error): its index, or a negative status when it is missing or of another
 * type. */
static int attr_of_type(const XLA_FFI_CallFrame *frame, const char *op,
                        const char *name, XLA_FFI_AttrType want,
                        const char *what, int64_t *index, jmg_error *err) {
  *index = attr_index(frame, name);
  if (*index < 0)
    return jmg_error_set(err, JMG_EINVAL, op, "FFI call frame",
                         "attribute %s is missing", name);
  if (frame->attrs.types[*index] != want)
    return jmg_error_set(err, JMG_EINVAL, op, "FFI call frame",
                         "attribute %s is not %s", name, what);
  return 0;
}

int jmg_ffi_attr_i64(const XLA_FFI_CallFrame *frame, const char *op,
                     const char *name, int64_t *out, jmg_error *err) {
  int64_t i = 0;
  int rc = attr_of_type(frame, op, name, XLA_FFI_AttrType_SCALAR, "a scalar",
                        &i, err);
  if (rc != 0) return rc;
  const XLA_FFI_Scalar *s = frame->attrs.attrs[i];
  switch (s->dtype) {
    case XLA_FFI_DataType_S64:
      *out = *(const int64_t *)s->value;
      return 0;
    case XLA_FFI_DataType_S32:
      *out = *(const int32_t *)s->value;
      return 0;
    case XLA_FFI_DataType_PRED:
      *out = *(const uint8_t *)s->value ? 1 : 0;
      return 0;
    default:
      return jmg_error_set(err, JMG_EINVAL, op, "FFI call frame",
                           "attribute %s has element type %d, expected an "
                           "integer",
                           name, (int)s->dtype);
  }
}

int jmg_ffi_attr_i64_array(const XLA_FFI_CallFrame *frame, const char *op,
                           const char *name, const int64_t **data, size_t *n,
                           jmg_error *err) {
  int64_t i = 0;
  int rc = attr_of_type(frame, op, name, XLA_FFI_AttrType_ARRAY, "an array",
                        &i, err);
  if (rc != 0) return rc;
  const XLA_FFI_Array *a = frame->attrs.attrs[i];
  if (a->dtype != XLA_FFI_DataType_S64)
    return jmg_error_set(err, JMG_EINVAL, op, "FFI call frame",
                         "attribute %s has element type %d, expected int64",
                         name, (int)a->dtype);
  *data = a->data;
  *n = a->size;
  return 0;
}

int jmg_ffi_consume_error(const XLA_FFI_Api *api, XLA_FFI_Error *e,
                          jmg_status code, const char *call, jmg_error *err) {
  const char *msg = jmg_xla_error_message(api, e);
  jmg_error_set(err, code, NULL, call, "%s", msg ? msg : "failed");
  XLA_FFI_Error_Destroy_Args args;
  memset(&args, 0, sizeof args);
  args.struct_size = XLA_FFI_Error_Destroy_Args_STRUCT_SIZE;
  args.error = e;
  api->XLA_FFI_Error_Destroy(&args);
  return -(int)code;
}

int jmg_ffi_run_id(XLA_FFI_CallFrame *frame, const char *op, int64_t *out,
                   jmg_error *err) {
  *out = 0;
  const XLA_FFI_Api *api = frame->api;
  if (!JMG_XLA_API_HAS(api, XLA_FFI_RunId_Get) ||
      api->XLA_FFI_RunId_Get == NULL)
    return 0; /* older runtime: sequence numbers alone tell calls apart */
  XLA_FFI_RunId_Get_Args args;
  memset(&args, 0, sizeof args);
  args.struct_size = XLA_FFI_RunId_Get_Args_STRUCT_SIZE;
  args.ctx = frame->ctx;
  XLA_FFI_Error *e = api->XLA_FFI_RunId_Get(&args);
  if (e != NULL) {
    jmg_ffi_consume_error(api, e, JMG_EINTERNAL, "XLA_FFI_RunId_Get", err);
    jmg_error_name_op(err, op);
    return -JMG_EINTERNAL;
  }
  *out = args.run_id;
  return 0;
}

static XLA_FFI_Error_Code xla_code(jmg_status s) {
  switch (s) {
    case JMG_EINVAL:
      return XLA_FFI_Error_Code_INVALID_ARGUMENT;
    case JMG_ENOMEM:
      return XLA_FFI_Error_Code_RESOURCE_EXHAUSTED;
    case JMG_ETIMEDOUT:
      return XLA_FFI_Error_Code_DEADLINE_EXCEEDED;
    case JMG_EPEER:
      return XLA_FFI_Error_Code_ABORTED;
    case JMG_EUNSUPPORTED:
      return XLA_FFI_Error_Code_UNIMPLEMENTED;
    default:
      return XLA_FFI_Error_Code_INTERNAL;
  }
}

XLA_FFI_Error *jmg_ffi_error(const XLA_FFI_CallFrame *frame,
                             const jmg_error *err) {
  if (err == NULL || err->code == JMG_OK) return NULL;
  char msg[JMG_ERROR_OP_LEN + JMG_ERROR_CALL_LEN + JMG_ERROR_MSG_LEN + 64];
  jmg_error_format(err, msg, sizeof msg);
  XLA_FFI_Error_Create_Args args;
  memset(&args, 0, sizeof args);
  args.struct_size = XLA_FFI_Error_Create_Args_STRUCT_SIZE;
  args.message = msg; /* XLA copies the message */
  args.errc = xla_code(err->code);
  return frame->api->XLA_FFI_Error_Create(&args);
}

int jmg_ffi_decode_head(const XLA_FFI_CallFrame *frame, const char *op,
                        int64_t nargs, int64_t nrets, const char *rows_attr,
                        jmg_ffi_head *out, jmg_error *err) {
  memset(out, 0, sizeof *out);
  int rc = jmg_ffi_check_counts(frame, op, nargs, nrets, err);
  if (rc == 0) rc = jmg_ffi_arg(frame, op, 0, "A", 2, &out->a, err);
  if (rc == 0)
    rc = jmg_ffi_arg(frame, op, nargs - 1, "shard index", 0, &out->shard, err);
  if (rc == 0) rc = jmg_ffi_dtype(out->a.xla_dtype, op, "A", &out->dtype, err);
  if (rc != 0) return rc;
  /* This shard of A: local_cols rows of n, i.e. n x local_cols column-major. */
  out->local_cols = out->a.dims[0];
  out->n = out->a.dims[1];
  if (rows_attr != NULL) {
    /* A rectangular A (op_desc.h, rows_scalar): its rows say the group. */
    rc = jmg_ffi_attr_i64(frame, op, rows_attr, &out->m, err);
    if (rc != 0) return rc;
    if (out->local_cols < 1 || out->m < 1 || out->m % out->local_cols != 0 ||
        out->m / out->local_cols > INT32_MAX)
      return jmg_error_set(err, JMG_EINVAL, op, "FFI call frame",
                           "A's shard has %lld of A's %s=%lld rows: the "
                           "shard's rows must divide them",
                           (long long)out->local_cols, rows_attr,
                           (long long)out->m);
    out->nparts = (int)(out->m / out->local_cols);
    return 0;
  }
  out->m = out->n;
  if (out->local_cols < 1 || out->n % out->local_cols != 0 ||
      out->n / out->local_cols > INT32_MAX)
    return jmg_error_set(err, JMG_EINVAL, op, "FFI call frame",
                         "A's shard is %lld x %lld: the shard's rows must "
                         "divide N",
                         (long long)out->local_cols, (long long)out->n);
  out->nparts = (int)(out->n / out->local_cols);
  return 0;
}

/* The XLA element type that buffer b must have in a call whose A has a's. */
static XLA_FFI_DataType expected_type(const jmg_op_buf *b, jmg_dtype dtype,
                                      XLA_FFI_DataType a) {
  switch (b->elem) {
    case JMG_ELEM_OF_A:
      return a;
    case JMG_ELEM_REAL:
      return jmg_dtype_real_size(dtype) == 4 ? XLA_FFI_DataType_F32
                                             : XLA_FFI_DataType_F64;
    default:
      return XLA_FFI_DataType_S32;
  }
}

/* Buffer i of op (not A): found, typed, shaped, and its pointer in io. */
static int decode_buffer_of(const XLA_FFI_CallFrame *frame,
                            const jmg_op_desc *op, int i,
                            const jmg_ffi_head *head, jmg_shard_io *io,
                            jmg_error *err) {
  const jmg_op_buf *b = jmg_op_buffer(op, i);
  const int own = i - 1; /* its index among the op's own, if it is one */
  jmg_ffi_buffer buf = {0};
  int rc;
  if (b->arg >= 0) {
    rc = jmg_ffi_arg(frame, op->name, b->arg, b->name, b->rank, &buf, err);
  } else {
    rc = jmg_ffi_ret(frame, op->name, jmg_op_ret_index(op, b, io), b->name,
                     b->rank, &buf, err);
  }
  if (rc != 0) return rc;
  for (int k = 0; own < op->nbufs && k < op->nscalars; ++k) {
    const jmg_op_scalar *s = &op->scalars[k];
    if (s->from == JMG_FROM_DIM && s->buf == own)
      *jmg_op_scalar_slot(s, io) = buf.dims[s->dim];
  }
  rc =
      jmg_ffi_expect_dtype(&buf, expected_type(b, io->dtype, head->a.xla_dtype),
                           op->name, b->name, err);
  int64_t dims[JMG_OP_MAX_RANK];
  for (int k = 0; k < b->rank; ++k) dims[k] = jmg_op_dim(op, io, b->dims[k]);
  if (rc == 0 && b->rank > 0)
    rc = jmg_ffi_expect_dims(&buf, dims, op->name, b->name, err);
  if (rc == 0) *jmg_op_buf_slot(b, io) = buf.data;
  return rc;
}

int jmg_ffi_decode_scalars(const XLA_FFI_CallFrame *frame,
                           const jmg_op_desc *op, int optional_only,
                           jmg_shard_io *io, jmg_error *err) {
  int rc = 0;
  for (int k = 0; rc == 0 && k < op->nscalars; ++k) {
    const jmg_op_scalar *s = &op->scalars[k];
    if (s->from != JMG_FROM_ATTR || (optional_only && !s->optional)) continue;
    int64_t v = 0;
    if (s->optional && !jmg_ffi_has_attr(frame, s->name)) {
      *jmg_op_scalar_slot(s, io) = 0;
      continue;
    }
    rc = jmg_ffi_attr_i64(frame, op->name, s->name, &v, err);
    if (rc == 0) *jmg_op_scalar_slot(s, io) = s->boolean ? v != 0 : v;
  }
  return rc;
}

int jmg_ffi_decode_op(const XLA_FFI_CallFrame *frame, const jmg_op_desc *op,
                      const jmg_ffi_head *head, jmg_shard_io *io,
                      jmg_error *err) {
  int rc = jmg_ffi_decode_scalars(frame, op, 0, io, err);
  /* Buffer 0 is A: decoded with the head. A result the call does not want
   * is not in the frame: its pointer stays NULL. */
  for (int i = 1; rc == 0 && i < jmg_op_nbuffers(op); ++i)
    if (jmg_op_buf_present(op, jmg_op_buffer(op, i), io))
      rc = decode_buffer_of(frame, op, i, head, io, err);
    else
      *jmg_op_buf_slot(jmg_op_buffer(op, i), io) = NULL;
  return rc;
}
