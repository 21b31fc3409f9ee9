#include "ffi/ffi_common.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "share/host_share.h"

#include "share/host_share.h"

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
    snprintf(err->op, sizeof err->op, "%s", op);
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

/* What crashed jobs left in /dev/shm (see jmg_rdv_sweep_stale). */
static void sweep_stale(void) {
  (void)jmg_rdv_sweep_stale();
  (void)jmg_host_share_sweep();
}

int jmg_ffi_begin(XLA_FFI_CallFrame *frame, const jmg_ffi_platform *platform,
                  const char *op, int64_t nargs, int64_t nrets,
                  jmg_op_call *call, jmg_shard_io *io, jmg_ffi_buffer *a,
                  jmg_error *err) {
  memset(call, 0, sizeof *call);
  memset(io, 0, sizeof *io);
  jmg_ffi_buffer shard_buf = {0};
  int rc = jmg_ffi_check_counts(frame, op, nargs, nrets, err);
  if (rc == 0) rc = jmg_ffi_arg(frame, op, 0, "A", 2, a, err);
  if (rc == 0)
    rc = jmg_ffi_arg(frame, op, nargs - 1, "shard index", 0, &shard_buf, err);
  if (rc == 0) rc = jmg_ffi_dtype(a->xla_dtype, op, "A", &io->dtype, err);
  if (rc != 0) return rc;
  /* This shard of A: local_cols rows of n, i.e. n x local_cols column-major. */
  io->local_cols = a->dims[0];
  io->n = a->dims[1];
  if (io->local_cols < 1 || io->n % io->local_cols != 0 ||
      io->n / io->local_cols > INT32_MAX)
    return jmg_error_set(err, JMG_EINVAL, op, "FFI call frame",
                         "A's shard is %lld x %lld: the shard's rows must "
                         "divide N",
                         (long long)io->local_cols, (long long)io->n);
  const int nparts = (int)(io->n / io->local_cols);

  call->mem = platform->mem();
  call->rdv = platform->rendezvous();
  call->timeout_s = jmg_rdv_default_timeout();
  call->key.op = op;
  call->key.nparts = nparts;
  /* The position operand is group * nparts + shard: the shard is this
   * device's index along the sharded mesh axes, the group its index along
   * the other axes (a mesh ("S", "T") with A sharded over "T" solves one
   * independent copy per value of "S"). */
  int32_t position = -1;
  int64_t mesh_id = 0;
  rc = jmg_ffi_expect_dtype(&shard_buf, XLA_FFI_DataType_S32, op,
                            "the shard index", err);
  if (rc == 0) rc = platform->read_shard(frame, shard_buf.data, &position, err);
  if (rc == 0 && position < 0)
    rc = jmg_error_set(err, JMG_EINVAL, op, "FFI call frame",
                       "shard position %d is negative", (int)position);
  if (rc == 0) rc = jmg_ffi_attr_i64(frame, op, "mesh_id", &mesh_id, err);
  if (rc == 0) rc = jmg_ffi_attr_i64(frame, op, "T_A", &io->tile, err);
  /* The call site: the Python layer numbers every traced call, so that two
   * calls in one program never meet, whatever order the devices reach them
   * in (XLA:CPU runs independent calls in different orders on different
   * devices). Frames built by hand may leave it out: one site. */
  int64_t call_id = 0;
  if (rc == 0 && jmg_ffi_has_attr(frame, "call_id"))
    rc = jmg_ffi_attr_i64(frame, op, "call_id", &call_id, err);
  /* The Python layer says whether a scratch shard is likely to fit; frames
   * built by hand may leave it out: allowed. */
  int64_t scratch = 1;
  if (rc == 0 && jmg_ffi_has_attr(frame, "scratch"))
    rc = jmg_ffi_attr_i64(frame, op, "scratch", &scratch, err);
  io->scratch_ok = scratch != 0;
  int64_t job_id = 0;
  if (rc == 0 && jmg_ffi_has_attr(frame, "job_id"))
    rc = jmg_ffi_attr_i64(frame, op, "job_id", &job_id, err);
  if (rc == 0 && job_id != 0) {
    /* MPMD: XLA's run ids are per process and do not match across
     * processes. The key's run id is then the job's identity, which every
     * process of one job run shares and no other job has; the call site
     * (call_id, numbered alike in every process, see _shard.py) and the
     * sequence number (every process executes a call site's calls in the
     * same order) tell its calls apart. */
    if (platform->share == NULL)
      rc = jmg_error_set(err, JMG_EUNSUPPORTED, op, "FFI call frame",
                         "the %s platform cannot share buffers between "
                         "processes (MPMD)",
                         platform->name);
    call->key.run_id = job_id;
    if (rc == 0) {
      static pthread_once_t swept = PTHREAD_ONCE_INIT;
      pthread_once(&swept, sweep_stale);
      call->rdv = jmg_rendezvous_processes();
      call->share = platform->share();
    }
  } else if (rc == 0) {
    rc = jmg_ffi_run_id(frame, op, &call->key.run_id, err);
  }
  if (rc != 0) return rc;
  const int shard = position % nparts;
  const uint64_t group = (uint64_t)(position / nparts);
  /* MPMD calls from the Python layer name the process of every shard of
   * every group (pids, groups x nparts), so that a process that dies before
   * it reaches the call fails the others at once. */
  if (job_id != 0 && jmg_ffi_has_attr(frame, "pids")) {
    const int64_t *pids = NULL;
    size_t npids = 0;
    rc = jmg_ffi_attr_i64_array(frame, op, "pids", &pids, &npids, err);
    if (rc == 0 && (npids % (size_t)nparts != 0 || group >= npids / nparts))
      rc = jmg_error_set(err, JMG_EINVAL, op, "FFI call frame",
                         "attribute pids has %zu entries: not one per shard "
                         "of group %llu of %d shards",
                         npids, (unsigned long long)group, nparts);
    if (rc != 0) return rc;
    call->key.pids = pids + group * (uint64_t)nparts;
  }
  /* One identity for the device group and the call site: groups are
   * independent calls, and so are call sites. */
  call->key.mesh_id =
      (int64_t)((uint64_t)mesh_id ^ (group * UINT64_C(0x9E3779B97F4A7C15)) ^
                ((uint64_t)call_id * UINT64_C(0xC2B2AE3D27D4EB4F)));
  call->shard = shard;
  call->key.seq =
      jmg_rdv_next_seq(op, call->key.mesh_id, shard, call->key.run_id);
  /* The engine of this call (engine/engine.h); a refusal releases the
   * others. */
  jmg_config cfg;
  jmg_config_read(&cfg);
  const jmg_problem problem = {op, nparts, io->dtype, io->n, io->tile};
  if (jmg_engine_select(platform->engines, &problem, &cfg, &call->engine,
                        err) != 0)
    return jmg_op_abort(call, op, err);
  io->a = a->data;
  return 0;
}

/* One participant of an asynchronous call: what must outlive the handler. */
typedef struct async_participant {
  jmg_op_call call;
  jmg_shard_io io;
  const jmg_ffi_platform *platform;
  void *device_ctx;
  const XLA_FFI_Api *api;
  XLA_FFI_Future *future;
} async_participant;

static XLA_FFI_Error *xla_error_of(const XLA_FFI_Api *api,
                                   const jmg_error *err) {
  XLA_FFI_CallFrame frame;
  memset(&frame, 0, sizeof frame);
  frame.api = api;
  return jmg_ffi_error(&frame, err);
}

/* Completes the participant's future with the call's outcome, then frees it. */
static void async_done(void *ctx, int rc, const jmg_error *err) {
  async_participant *p = ctx;
  if (rc == 0) {
    XLA_FFI_Future_SetAvailable_Args args;
    memset(&args, 0, sizeof args);
    args.struct_size = XLA_FFI_Future_SetAvailable_Args_STRUCT_SIZE;
    args.future = p->future;
    XLA_FFI_Error *e = p->api->XLA_FFI_Future_SetAvailable(&args);
    if (e != NULL) {
      jmg_error ignored; /* nothing left to tell it to */
      jmg_ffi_consume_error(p->api, e, JMG_EINTERNAL, "Future_SetAvailable",
                            &ignored);
    }
  } else {
    XLA_FFI_Future_SetError_Args args;
    memset(&args, 0, sizeof args);
    args.struct_size = XLA_FFI_Future_SetError_Args_STRUCT_SIZE;
    args.future = p->future;
    args.error = xla_error_of(p->api, err); /* XLA takes ownership */
    XLA_FFI_Error *e = p->api->XLA_FFI_Future_SetError(&args);
    if (e != NULL) {
      jmg_error ignored;
      jmg_ffi_consume_error(p->api, e, JMG_EINTERNAL, "Future_SetError",
                            &ignored);
    }
  }
  if (p->device_ctx != NULL) p->platform->free_device_ctx(p->device_ctx);
  free(p);
}

/* Runs the op with the handler returning at once: the participant's state
 * moves to the heap and XLA waits on a future that async_done completes. */
static XLA_FFI_Error *run_async(XLA_FFI_CallFrame *frame,
                                const jmg_ffi_platform *platform,
                                jmg_op_run_fn run, jmg_op_call *call,
                                jmg_shard_io *io, void *ctx, jmg_error *err) {
  const char *op = call->key.op;
  async_participant *p = calloc(1, sizeof *p);
  if (p == NULL) {
    jmg_error_set(err, JMG_ENOMEM, op, "malloc",
                  "cannot allocate the participant's state");
    jmg_op_abort(call, op, err);
    if (ctx != NULL) platform->free_device_ctx(ctx);
    return jmg_ffi_error(frame, err);
  }
  XLA_FFI_Future_Create_Args fc;
  memset(&fc, 0, sizeof fc);
  fc.struct_size = XLA_FFI_Future_Create_Args_STRUCT_SIZE;
  XLA_FFI_Error *e = frame->api->XLA_FFI_Future_Create(&fc);
  if (e != NULL) {
    jmg_ffi_consume_error(frame->api, e, JMG_EINTERNAL, "XLA_FFI_Future_Create",
                          err);
    snprintf(err->op, sizeof err->op, "%s", op);
    jmg_op_abort(call, op, err);
    if (ctx != NULL) platform->free_device_ctx(ctx);
    free(p);
    return jmg_ffi_error(frame, err);
  }
  p->call = *call;
  p->io = *io;
  p->platform = platform;
  p->device_ctx = ctx;
  p->api = frame->api;
  p->future = fc.future;
  p->call.done = async_done;
  p->call.done_ctx = p;
  /* From here on every outcome goes through the future. */
  frame->future = fc.future;
  if (run(&p->call, &p->io, err) != 0) async_done(p, -(int)err->code, err);
  return NULL; /* p may be gone already: do not touch it */
}

XLA_FFI_Error *jmg_ffi_run(XLA_FFI_CallFrame *frame,
                           const jmg_ffi_platform *platform, jmg_op_run_fn run,
                           jmg_op_call *call, jmg_shard_io *io,
                           const jmg_ffi_buffer *a, jmg_error *err) {
  const char *op = call->key.op;
  jmg_ffi_buffer a_out = {0};
  void *ctx = NULL;
  int rc = jmg_ffi_ret(frame, op, 0, "A", 2, &a_out, err);
  if (rc == 0)
    rc = jmg_ffi_expect_dtype(&a_out, a->xla_dtype, op, "result A", err);
  if (rc == 0) rc = jmg_ffi_expect_dims(&a_out, a->dims, op, "result A", err);
  if (rc == 0) rc = platform->make_device_ctx(frame, &ctx, err);
  /* input_output_aliases makes result 0 A's own buffer; should XLA ever hand
   * a distinct one, work there on a copy. */
  if (rc == 0 && a_out.data != a->data) {
    size_t bytes =
        (size_t)a->dims[0] * (size_t)a->dims[1] * jmg_dtype_size(io->dtype);
    rc = platform->copy_local(ctx, a_out.data, a->data, bytes, err);
  }
  if (rc != 0) {
    if (err->op[0] == '\0') snprintf(err->op, sizeof err->op, "%s", op);
    jmg_op_abort(call, op, err);
    if (ctx != NULL) platform->free_device_ctx(ctx);
    return jmg_ffi_error(frame, err);
  }
  io->a = a_out.data;
  io->device_ctx = ctx;
  if (platform->async)
    return run_async(frame, platform, run, call, io, ctx, err);
  run(call, io, err);
  if (ctx != NULL) platform->free_device_ctx(ctx);
  return jmg_ffi_error(frame, err);
}
