/* XLA FFI call-frame decoding (ffi/decode.c) and the CPU handlers
 * (ffi/cpu_targets.c), driven by call frames built by hand against a fake
 * XLA_FFI_Api: error creation, messages, destruction and the run id are ours,
 * every other field of the API is NULL. */
#define _POSIX_C_SOURCE 200809L
#include <complex.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "engine/lapack/table.h"
#include "ffi/handler.h"
#include "ops/ops.h"
#include "test.h"
#include "test_clock.h"

/* The handlers libjaxmg_cpu.so exports (csrc/ffi/cpu_targets.c). */
XLA_FFI_Error *jaxmg_potrs_cpu(XLA_FFI_CallFrame *frame);
XLA_FFI_Error *jaxmg_potri_cpu(XLA_FFI_CallFrame *frame);
XLA_FFI_Error *jaxmg_syevd_cpu(XLA_FFI_CallFrame *frame);
XLA_FFI_Error *jaxmg_lu_solve_cpu(XLA_FFI_CallFrame *frame);
int jaxmg_cpu_register_lapack(const char *name, void *fn);

/* ---- a fake XLA runtime -----------------------------------------------------
 */

/* XLA's error and execution context are opaque to handlers: here they are
 * ours. */
struct XLA_FFI_Error {
  XLA_FFI_Error_Code errc;
  char *message;
};

/* Our stand-in for XLA's opaque execution context (its tag differs between
 * header versions, so it is reached through void pointers). */
struct fake_context {
  int64_t run_id;
  int run_id_fails; /* XLA_FFI_RunId_Get returns an error */
};

static atomic_int g_errors_live;     /* created and not yet destroyed */
static atomic_int g_bad_struct_size; /* an API call got a wrong struct_size */
static atomic_int g_run_id_calls;

static XLA_FFI_Error *fake_error_create(XLA_FFI_Error_Create_Args *args) {
  if (args->struct_size != XLA_FFI_Error_Create_Args_STRUCT_SIZE)
    atomic_store(&g_bad_struct_size, 1);
  XLA_FFI_Error *e = malloc(sizeof *e);
  if (e == NULL) abort();
  e->errc = args->errc;
  e->message = strdup(args->message != NULL ? args->message : "(null)");
  if (e->message == NULL) abort();
  atomic_fetch_add(&g_errors_live, 1);
  return e;
}

/* XLA API 0.3 (jaxlib <= 0.10) reads messages with XLA_FFI_Error_GetMessage,
 * API 0.4 (jaxlib 0.11) with XLA_FFI_Error_GetDetails (ffi/xla_compat.h). */
#if XLA_FFI_API_MAJOR == 0 && XLA_FFI_API_MINOR < 4
#define FAKE_MESSAGE_FN XLA_FFI_Error_GetMessage
typedef XLA_FFI_Error_GetMessage_Args fake_message_args;
enum { FAKE_MESSAGE_ARGS_SIZE = XLA_FFI_Error_GetMessage_Args_STRUCT_SIZE };
#else
#define FAKE_MESSAGE_FN XLA_FFI_Error_GetDetails
typedef XLA_FFI_Error_GetDetails_Args fake_message_args;
enum { FAKE_MESSAGE_ARGS_SIZE = XLA_FFI_Error_GetDetails_Args_STRUCT_SIZE };
#endif

static void fake_error_get_message(fake_message_args *args) {
  if (args->struct_size != FAKE_MESSAGE_ARGS_SIZE)
    atomic_store(&g_bad_struct_size, 1);
  args->message = args->error->message;
}

static void fake_error_destroy(XLA_FFI_Error_Destroy_Args *args) {
  if (args->struct_size != XLA_FFI_Error_Destroy_Args_STRUCT_SIZE)
    atomic_store(&g_bad_struct_size, 1);
  free(args->error->message);
  free(args->error);
  atomic_fetch_sub(&g_errors_live, 1);
}

static XLA_FFI_Error *fake_run_id_get(XLA_FFI_RunId_Get_Args *args) {
  if (args->struct_size != XLA_FFI_RunId_Get_Args_STRUCT_SIZE)
    atomic_store(&g_bad_struct_size, 1);
  atomic_fetch_add(&g_run_id_calls, 1);
  const struct fake_context *ctx = (const void *)args->ctx;
  if (ctx == NULL || ctx->run_id_fails) {
    XLA_FFI_Error_Create_Args c;
    memset(&c, 0, sizeof c);
    c.struct_size = XLA_FFI_Error_Create_Args_STRUCT_SIZE;
    c.message = "this runtime has no run id today";
    c.errc = XLA_FFI_Error_Code_UNAVAILABLE;
    return fake_error_create(&c);
  }
  args->run_id = ctx->run_id;
  return NULL;
}

/* Futures: the CPU handlers return at once and complete a future later
 * (from whichever participant's thread ends the call). */
struct XLA_FFI_Future {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int state; /* 0 pending, 1 available, 2 error */
  XLA_FFI_Error *error;
};

static XLA_FFI_Error *fake_future_create(XLA_FFI_Future_Create_Args *args) {
  XLA_FFI_Future *f = calloc(1, sizeof *f);
  if (f == NULL) abort();
  pthread_mutex_init(&f->mu, NULL);
  pthread_cond_init(&f->cv, NULL);
  args->future = f;
  return NULL;
}

static void future_settle(XLA_FFI_Future *f, int state, XLA_FFI_Error *e) {
  pthread_mutex_lock(&f->mu);
  if (f->state != 0) abort(); /* completed twice */
  f->state = state;
  f->error = e;
  pthread_cond_broadcast(&f->cv);
  pthread_mutex_unlock(&f->mu);
}

static XLA_FFI_Error *fake_future_available(
    XLA_FFI_Future_SetAvailable_Args *args) {
  if (args->struct_size != XLA_FFI_Future_SetAvailable_Args_STRUCT_SIZE)
    atomic_store(&g_bad_struct_size, 1);
  future_settle(args->future, 1, NULL);
  return NULL;
}

static XLA_FFI_Error *fake_future_error(XLA_FFI_Future_SetError_Args *args) {
  if (args->struct_size != XLA_FFI_Future_SetError_Args_STRUCT_SIZE)
    atomic_store(&g_bad_struct_size, 1);
  future_settle(args->future, 2, args->error);
  return NULL;
}

/* Calls a handler as XLA does: a NULL return with a future set means the
 * outcome is the future's. Returns the error, or NULL. */
static XLA_FFI_Error *call_handler(XLA_FFI_Handler *handler,
                                   XLA_FFI_CallFrame *frame) {
  frame->future = NULL;
  XLA_FFI_Error *e = handler(frame);
  XLA_FFI_Future *f = frame->future;
  if (e != NULL || f == NULL) return e;
  pthread_mutex_lock(&f->mu);
  while (f->state == 0) pthread_cond_wait(&f->cv, &f->mu);
  pthread_mutex_unlock(&f->mu);
  e = f->error;
  pthread_cond_destroy(&f->cv);
  pthread_mutex_destroy(&f->mu);
  free(f);
  return e;
}

static void fake_api_init(XLA_FFI_Api *api) {
  memset(api, 0, sizeof *api);
  api->struct_size = XLA_FFI_Api_STRUCT_SIZE;
  api->api_version.struct_size = XLA_FFI_Api_Version_STRUCT_SIZE;
  api->api_version.major_version = XLA_FFI_API_MAJOR;
  api->api_version.minor_version = XLA_FFI_API_MINOR;
  api->XLA_FFI_Error_Create = fake_error_create;
  api->FAKE_MESSAGE_FN = fake_error_get_message;
  api->XLA_FFI_Error_Destroy = fake_error_destroy;
  api->XLA_FFI_RunId_Get = fake_run_id_get;
  api->XLA_FFI_Future_Create = fake_future_create;
  api->XLA_FFI_Future_SetAvailable = fake_future_available;
  api->XLA_FFI_Future_SetError = fake_future_error;
}

static XLA_FFI_Api g_api;

static const XLA_FFI_Api *fake_api(void) {
  fake_api_init(&g_api);
  return &g_api;
}

/* What a handler returned: copied out, and the error destroyed. */
typedef struct xla_result {
  int is_error;
  XLA_FFI_Error_Code errc;
  char msg[1024];
} xla_result;

static xla_result take_error(XLA_FFI_Error *e) {
  xla_result r;
  memset(&r, 0, sizeof r);
  if (e == NULL) return r;
  r.is_error = 1;
  r.errc = e->errc;
  snprintf(r.msg, sizeof r.msg, "%s", e->message);
  XLA_FFI_Error_Destroy_Args d;
  memset(&d, 0, sizeof d);
  d.struct_size = XLA_FFI_Error_Destroy_Args_STRUCT_SIZE;
  d.error = e;
  fake_error_destroy(&d);
  return r;
}

/* Run ids no other test uses, so that calls of different tests never meet. */
static int64_t fresh_run_id(void) {
  static atomic_llong next = 9000000;
  return (int64_t)atomic_fetch_add(&next, 1000);
}

/* Every test that calls a handler bounds the rendezvous: a mistake that made
 * a participant wait would cost 5 s, not 300. */
static void bound_rendezvous(void) {
  setenv("JAXMG_RENDEZVOUS_TIMEOUT", "5", 1);
}

/* ---- call frames
 * ------------------------------------------------------------- */

/* Attribute names the way XLA passes them: byte spans into storage with no NUL
 * after each name, so code that used strcmp/strlen on them would fail. */
static const char k_names[] = "T_Amesh_idwant_vectors#";
#define NAME_T_A k_names, 3
#define NAME_MESH_ID (k_names + 3), 7
#define NAME_WANT_VECTORS (k_names + 10), 12

enum { MAXN = 8 };

typedef struct frame_builder {
  XLA_FFI_CallFrame frame;
  struct fake_context ctx;
  XLA_FFI_ArgType arg_types[MAXN];
  void *args[MAXN];
  XLA_FFI_RetType ret_types[MAXN];
  void *rets[MAXN];
  XLA_FFI_AttrType attr_types[MAXN];
  XLA_FFI_ByteSpan spans[MAXN];
  XLA_FFI_ByteSpan *names[MAXN];
  void *attrs[MAXN];
  XLA_FFI_Buffer bufs[2 * MAXN];
  int64_t dims[2 * MAXN][2];
  int nbufs;
  XLA_FFI_Scalar scalars[MAXN];
  int64_t values[MAXN];
  int nscalars;
} frame_builder;

static void fb_init(frame_builder *f, const XLA_FFI_Api *api, int64_t run_id) {
  memset(f, 0, sizeof *f);
  f->frame.struct_size = XLA_FFI_CallFrame_STRUCT_SIZE;
  f->frame.extension_start = NULL;
  f->frame.api = api;
  f->frame.ctx = (void *)&f->ctx;
  f->frame.stage = XLA_FFI_ExecutionStage_EXECUTE;
  f->ctx.run_id = run_id;
  f->frame.args.struct_size = XLA_FFI_Args_STRUCT_SIZE;
  f->frame.args.types = f->arg_types;
  f->frame.args.args = f->args;
  f->frame.rets.struct_size = XLA_FFI_Rets_STRUCT_SIZE;
  f->frame.rets.types = f->ret_types;
  f->frame.rets.rets = f->rets;
  f->frame.attrs.struct_size = XLA_FFI_Attrs_STRUCT_SIZE;
  f->frame.attrs.types = f->attr_types;
  f->frame.attrs.names = f->names;
  f->frame.attrs.attrs = f->attrs;
}

static XLA_FFI_Buffer *fb_buffer(frame_builder *f, XLA_FFI_DataType t,
                                 void *data, int64_t rank, int64_t d0,
                                 int64_t d1) {
  if (f->nbufs >= 2 * MAXN) abort();
  int k = f->nbufs++;
  XLA_FFI_Buffer *b = &f->bufs[k];
  b->struct_size = XLA_FFI_Buffer_STRUCT_SIZE;
  b->dtype = t;
  b->data = data;
  b->rank = rank;
  f->dims[k][0] = d0;
  f->dims[k][1] = d1;
  b->dims = f->dims[k];
  return b;
}

/* Adds argument / result i as a buffer; returns the buffer to mutate. */
static XLA_FFI_Buffer *fb_arg(frame_builder *f, XLA_FFI_DataType t, void *data,
                              int64_t rank, int64_t d0, int64_t d1) {
  int64_t i = f->frame.args.size++;
  f->arg_types[i] = XLA_FFI_ArgType_BUFFER;
  XLA_FFI_Buffer *b = fb_buffer(f, t, data, rank, d0, d1);
  f->args[i] = b;
  return b;
}

static XLA_FFI_Buffer *fb_ret(frame_builder *f, XLA_FFI_DataType t, void *data,
                              int64_t rank, int64_t d0, int64_t d1) {
  int64_t i = f->frame.rets.size++;
  f->ret_types[i] = XLA_FFI_RetType_BUFFER;
  XLA_FFI_Buffer *b = fb_buffer(f, t, data, rank, d0, d1);
  f->rets[i] = b;
  return b;
}

/* Adds an attribute of any type; name points into storage that outlives f. */
static void fb_attr(frame_builder *f, const char *name, size_t len,
                    XLA_FFI_AttrType type, void *attr) {
  int64_t i = f->frame.attrs.size++;
  f->spans[i].ptr = name;
  f->spans[i].len = len;
  f->names[i] = &f->spans[i];
  f->attr_types[i] = type;
  f->attrs[i] = attr;
}

/* A scalar attribute; the value is stored in f (as int64, int32 or uint8
 * according to dtype, at the start of an aligned int64). */
static XLA_FFI_Scalar *fb_attr_scalar(frame_builder *f, const char *name,
                                      size_t len, XLA_FFI_DataType dtype,
                                      int64_t value) {
  int k = f->nscalars++;
  void *slot = &f->values[k];
  switch (dtype) {
    case XLA_FFI_DataType_S32: {
      int32_t v = (int32_t)value;
      memcpy(slot, &v, sizeof v);
      break;
    }
    case XLA_FFI_DataType_PRED: {
      uint8_t v = (uint8_t)value;
      memcpy(slot, &v, sizeof v);
      break;
    }
    default:
      memcpy(slot, &value, sizeof value);
      break;
  }
  f->scalars[k].dtype = dtype;
  f->scalars[k].value = slot;
  fb_attr(f, name, len, XLA_FFI_AttrType_SCALAR, &f->scalars[k]);
  return &f->scalars[k];
}

static void fb_attr_i64(frame_builder *f, const char *name, size_t len,
                        int64_t value) {
  fb_attr_scalar(f, name, len, XLA_FFI_DataType_S64, value);
}

/* potrs: args A (lc x n), B (nrhs x n), shard; rets A, X (nrhs x n), status;
 * attrs T_A, mesh_id (sorted by name, as XLA passes them). */
static void build_potrs(frame_builder *f, int64_t run_id, int64_t mesh_id,
                        int64_t tile, XLA_FFI_DataType dt, void *a, int64_t lc,
                        int64_t n, void *b, void *x, int64_t nrhs,
                        int32_t *shard, int32_t *status) {
  fb_init(f, fake_api(), run_id);
  fb_arg(f, dt, a, 2, lc, n);
  fb_arg(f, dt, b, 2, nrhs, n);
  fb_arg(f, XLA_FFI_DataType_S32, shard, 0, 0, 0);
  fb_ret(f, dt, a, 2, lc, n);
  fb_ret(f, dt, x, 2, nrhs, n);
  fb_ret(f, XLA_FFI_DataType_S32, status, 0, 0, 0);
  fb_attr_i64(f, NAME_T_A, tile);
  fb_attr_i64(f, NAME_MESH_ID, mesh_id);
}

/* potri: args A, shard; rets A, status; attrs T_A, mesh_id. */
static void build_potri(frame_builder *f, int64_t run_id, int64_t mesh_id,
                        int64_t tile, XLA_FFI_DataType dt, void *a, int64_t lc,
                        int64_t n, int32_t *shard, int32_t *status) {
  fb_init(f, fake_api(), run_id);
  fb_arg(f, dt, a, 2, lc, n);
  fb_arg(f, XLA_FFI_DataType_S32, shard, 0, 0, 0);
  fb_ret(f, dt, a, 2, lc, n);
  fb_ret(f, XLA_FFI_DataType_S32, status, 0, 0, 0);
  fb_attr_i64(f, NAME_T_A, tile);
  fb_attr_i64(f, NAME_MESH_ID, mesh_id);
}

/* syevd: args A, shard; rets A, W (n, real), status; attrs T_A, mesh_id,
 * want_vectors. */
static void build_syevd(frame_builder *f, int64_t run_id, int64_t mesh_id,
                        int64_t tile, XLA_FFI_DataType dt, void *a, int64_t lc,
                        int64_t n, XLA_FFI_DataType real, void *w,
                        int32_t *shard, int32_t *status) {
  fb_init(f, fake_api(), run_id);
  fb_arg(f, dt, a, 2, lc, n);
  fb_arg(f, XLA_FFI_DataType_S32, shard, 0, 0, 0);
  fb_ret(f, dt, a, 2, lc, n);
  fb_ret(f, real, w, 1, n, 0);
  fb_ret(f, XLA_FFI_DataType_S32, status, 0, 0, 0);
  fb_attr_i64(f, NAME_T_A, tile);
  fb_attr_i64(f, NAME_MESH_ID, mesh_id);
  fb_attr_scalar(f, NAME_WANT_VECTORS, XLA_FFI_DataType_PRED, 1);
}

/* Calls handler on f and checks that it fails promptly with code and a message
 * containing says. Asserts: check jmg_test_failed after calling. */
static void expect_rejected(const char *label, XLA_FFI_Handler *handler,
                            frame_builder *f, XLA_FFI_Error_Code code,
                            const char *says) {
  double t0 = now_s();
  xla_result r = take_error(call_handler(handler, &f->frame));
  double elapsed = now_s() - t0;
  if (!r.is_error || r.errc != code || strstr(r.msg, says) == NULL ||
      elapsed > 2.0) {
    TEST_FAIL_AT(
        "%s: expected error %d containing \"%s\" promptly; got %s "
        "%d \"%s\" after %.3f s",
        label, (int)code, says, r.is_error ? "error" : "success", (int)r.errc,
        r.msg, elapsed);
  }
}

/* ---- metadata
 * ---------------------------------------------------------------- */

/* The metadata query's extension, built through ffi/xla_compat.h's mirror of
 * the extension node (XLA renames the node's type between header versions).
 * Where the header has the 0.3 names, the mirror must match XLA's layout. */
#if XLA_FFI_API_MAJOR == 0 && XLA_FFI_API_MINOR < 4
_Static_assert(sizeof(jmg_xla_metadata_extension) ==
                   sizeof(XLA_FFI_Metadata_Extension),
               "metadata extension mirror size");
_Static_assert(offsetof(jmg_xla_metadata_extension, metadata) ==
                   offsetof(XLA_FFI_Metadata_Extension, metadata),
               "metadata extension mirror layout");
_Static_assert(offsetof(jmg_xla_extension, type) ==
                   offsetof(XLA_FFI_Extension_Base, type),
               "extension node mirror layout");
_Static_assert(offsetof(jmg_xla_extension, next) ==
                   offsetof(XLA_FFI_Extension_Base, next),
               "extension node mirror layout");
_Static_assert(XLA_FFI_Extension_Metadata == JMG_XLA_EXTENSION_METADATA,
               "metadata extension type");
#endif

static void metadata_frame(XLA_FFI_CallFrame *frame,
                           jmg_xla_metadata_extension *ext,
                           XLA_FFI_Metadata *md, int ext_type) {
  memset(ext, 0, sizeof *ext);
  ext->base.struct_size = sizeof *ext;
  ext->base.type = ext_type;
  ext->base.next = NULL;
  ext->metadata = md;
  memset(frame, 0, sizeof *frame);
  frame->struct_size = XLA_FFI_CallFrame_STRUCT_SIZE;
  frame->api = fake_api();
  frame->extension_start = (void *)ext;
}

TEST(ffi_answer_metadata_fills_version_and_traits) {
  XLA_FFI_Metadata md;
  memset(&md, 0xAB, sizeof md);
  md.struct_size = XLA_FFI_Metadata_STRUCT_SIZE;
  jmg_xla_metadata_extension ext;
  XLA_FFI_CallFrame frame;
  metadata_frame(&frame, &ext, &md, JMG_XLA_EXTENSION_METADATA);
  CHECK_EQ(jmg_ffi_answer_metadata(&frame), 1);
  CHECK_EQ(md.api_version.major_version, XLA_FFI_API_MAJOR);
  CHECK_EQ(md.api_version.minor_version, XLA_FFI_API_MINOR);
  CHECK_EQ(md.traits, 0);

  /* An ordinary call: no extension. */
  frame.extension_start = NULL;
  CHECK_EQ(jmg_ffi_answer_metadata(&frame), 0);
  /* An extension of another type is not the metadata query. */
  memset(&md, 0xAB, sizeof md);
  metadata_frame(&frame, &ext, &md, 77);
  CHECK_EQ(jmg_ffi_answer_metadata(&frame), 0);
  CHECK(md.traits != 0); /* untouched */
}

TEST(ffi_handlers_answer_metadata_query) {
  XLA_FFI_Handler *handlers[3] = {jaxmg_potrs_cpu, jaxmg_potri_cpu,
                                  jaxmg_syevd_cpu};
  for (int h = 0; h < 3; ++h) {
    XLA_FFI_Metadata md;
    memset(&md, 0xCD, sizeof md);
    md.struct_size = XLA_FFI_Metadata_STRUCT_SIZE;
    /* The metadata query comes with no arguments at all. */
    jmg_xla_metadata_extension ext;
    XLA_FFI_CallFrame frame;
    metadata_frame(&frame, &ext, &md, JMG_XLA_EXTENSION_METADATA);
    xla_result r = take_error(handlers[h](&frame));
    CHECK_EQ(r.is_error, 0);
    CHECK_EQ(md.api_version.major_version, XLA_FFI_API_MAJOR);
    CHECK_EQ(md.api_version.minor_version, XLA_FFI_API_MINOR);
    CHECK_EQ(md.traits, 0);
  }
  CHECK_EQ(atomic_load(&g_bad_struct_size), 0);
}

/* ---- decoding helpers -------------------------------------------------------
 */

TEST(ffi_check_counts) {
  frame_builder f;
  double a[4];
  fb_init(&f, fake_api(), 1);
  fb_arg(&f, XLA_FFI_DataType_F64, a, 2, 2, 2);
  fb_arg(&f, XLA_FFI_DataType_F64, a, 2, 2, 2);
  fb_ret(&f, XLA_FFI_DataType_F64, a, 2, 2, 2);
  jmg_error err;
  jmg_error_clear(&err);
  CHECK_EQ(jmg_ffi_check_counts(&f.frame, "potri", 2, 1, &err), 0);
  CHECK_EQ(jmg_ffi_check_counts(&f.frame, "potrs", 3, 1, &err), -JMG_EINVAL);
  CHECK_EQ(err.code, JMG_EINVAL);
  CHECK_CONTAINS(err.op, "potrs");
  CHECK_CONTAINS(err.msg, "expected 3 arguments and 1 results, got 2 and 1");
  CHECK_EQ(jmg_ffi_check_counts(&f.frame, "potrs", 2, 3, &err), -JMG_EINVAL);
  CHECK_CONTAINS(err.msg, "expected 2 arguments and 3 results, got 2 and 1");
}

TEST(ffi_arg_and_ret_decode_buffers_and_reject_bad_ones) {
  frame_builder f;
  double a[6];
  int32_t s = 0;
  fb_init(&f, fake_api(), 1);
  fb_arg(&f, XLA_FFI_DataType_F64, a, 2, 2, 3);
  XLA_FFI_Buffer *sb = fb_arg(&f, XLA_FFI_DataType_S32, &s, 0, 0, 0);
  fb_ret(&f, XLA_FFI_DataType_F64, a, 2, 2, 3);
  jmg_error err;
  jmg_error_clear(&err);
  jmg_ffi_buffer b;
  memset(&b, 0, sizeof b);

  CHECK_EQ(jmg_ffi_arg(&f.frame, "potri", 0, "A", 2, &b, &err), 0);
  CHECK(b.data == a);
  CHECK_EQ(b.xla_dtype, XLA_FFI_DataType_F64);
  CHECK_EQ(b.rank, 2);
  CHECK_EQ(b.dims[0], 2);
  CHECK_EQ(b.dims[1], 3);
  CHECK_EQ(jmg_ffi_arg(&f.frame, "potri", 1, "shard index", 0, &b, &err), 0);
  CHECK(b.data == &s);
  CHECK_EQ(b.rank, 0);
  CHECK_EQ(jmg_ffi_ret(&f.frame, "potri", 0, "A", 2, &b, &err), 0);
  CHECK(b.data == a);

  /* Wrong rank. */
  CHECK_EQ(jmg_ffi_arg(&f.frame, "potri", 0, "A", 1, &b, &err), -JMG_EINVAL);
  CHECK_CONTAINS(err.msg, "argument 0 (A) has rank 2, expected 1");
  CHECK_EQ(jmg_ffi_ret(&f.frame, "potri", 0, "A", 3, &b, &err), -JMG_EINVAL);
  CHECK_CONTAINS(err.msg, "result 0 (A) has rank 2, expected 3");
  /* Missing index, either side. */
  CHECK_EQ(jmg_ffi_arg(&f.frame, "potri", 2, "B", 2, &b, &err), -JMG_EINVAL);
  CHECK_CONTAINS(err.msg, "argument 2 (B) is missing");
  CHECK_EQ(jmg_ffi_arg(&f.frame, "potri", -1, "B", 2, &b, &err), -JMG_EINVAL);
  CHECK_CONTAINS(err.msg, "is missing");
  CHECK_EQ(jmg_ffi_ret(&f.frame, "potri", 1, "status", 0, &b, &err),
           -JMG_EINVAL);
  CHECK_CONTAINS(err.msg, "result 1 (status) is missing");
  /* Not a buffer (a type XLA may add later), or no buffer at all. */
  f.arg_types[1] = (XLA_FFI_ArgType)7;
  CHECK_EQ(jmg_ffi_arg(&f.frame, "potri", 1, "shard index", 0, &b, &err),
           -JMG_EINVAL);
  CHECK_CONTAINS(err.msg, "argument 1 (shard index) is not a buffer");
  f.arg_types[1] = XLA_FFI_ArgType_BUFFER;
  f.args[1] = NULL;
  CHECK_EQ(jmg_ffi_arg(&f.frame, "potri", 1, "shard index", 0, &b, &err),
           -JMG_EINVAL);
  CHECK_CONTAINS(err.msg, "is not a buffer");
  f.args[1] = sb;
  f.ret_types[0] = (XLA_FFI_RetType)9;
  CHECK_EQ(jmg_ffi_ret(&f.frame, "potri", 0, "A", 2, &b, &err), -JMG_EINVAL);
  CHECK_CONTAINS(err.msg, "result 0 (A) is not a buffer");
  f.ret_types[0] = XLA_FFI_RetType_BUFFER;
  /* A negative dimension. */
  f.dims[0][1] = -3;
  CHECK_EQ(jmg_ffi_arg(&f.frame, "potri", 0, "A", 2, &b, &err), -JMG_EINVAL);
  CHECK_CONTAINS(err.msg, "argument 0 (A) has a negative dimension");
}

TEST(ffi_dtype_accepts_solver_types_only) {
  static const struct {
    XLA_FFI_DataType xla;
    jmg_dtype ours;
  } ok[] = {{XLA_FFI_DataType_F32, JMG_F32},
            {XLA_FFI_DataType_F64, JMG_F64},
            {XLA_FFI_DataType_C64, JMG_C64},
            {XLA_FFI_DataType_C128, JMG_C128}};
  jmg_error err;
  jmg_error_clear(&err);
  for (size_t i = 0; i < sizeof ok / sizeof ok[0]; ++i) {
    jmg_dtype t = (jmg_dtype)-1;
    CHECK_EQ(jmg_ffi_dtype(ok[i].xla, "potrs", "A", &t, &err), 0);
    CHECK_EQ(t, ok[i].ours);
  }
  static const XLA_FFI_DataType bad[] = {
      XLA_FFI_DataType_S32, XLA_FFI_DataType_F16,  XLA_FFI_DataType_BF16,
      XLA_FFI_DataType_S64, XLA_FFI_DataType_PRED, XLA_FFI_DataType_INVALID};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; ++i) {
    jmg_dtype t = JMG_F64;
    jmg_error_clear(&err);
    CHECK_EQ(jmg_ffi_dtype(bad[i], "syevd", "A", &t, &err), -JMG_EINVAL);
    CHECK_EQ(err.code, JMG_EINVAL);
    CHECK_CONTAINS(err.op, "syevd");
    char want[64];
    snprintf(want, sizeof want, "A has XLA element type %d", (int)bad[i]);
    CHECK_CONTAINS(err.msg, want);
    CHECK_CONTAINS(err.msg, "float32, float64, complex64 and complex128");
  }
  /* expect_dtype / expect_dims. */
  int64_t dims[2] = {3, 5};
  jmg_ffi_buffer b = {XLA_FFI_DataType_F32, NULL, 2, dims};
  CHECK_EQ(jmg_ffi_expect_dtype(&b, XLA_FFI_DataType_F32, "potrs", "B", &err),
           0);
  CHECK_EQ(jmg_ffi_expect_dtype(&b, XLA_FFI_DataType_F64, "potrs", "B", &err),
           -JMG_EINVAL);
  CHECK_CONTAINS(err.msg, "B has XLA element type 11, expected 12");
  const int64_t same[2] = {3, 5}, other[2] = {3, 6};
  CHECK_EQ(jmg_ffi_expect_dims(&b, same, "potrs", "X", &err), 0);
  CHECK_EQ(jmg_ffi_expect_dims(&b, other, "potrs", "X", &err), -JMG_EINVAL);
  CHECK_CONTAINS(err.msg, "X has dimension 1 of size 5, expected 6");
}

TEST(ffi_attr_i64_finds_unterminated_names) {
  frame_builder f;
  fb_init(&f, fake_api(), 1);
  /* Sorted by name as XLA passes them; none of the three names is followed
   * by a NUL, and "mesh" is a prefix of "mesh_id". */
  fb_attr_scalar(&f, NAME_T_A, XLA_FFI_DataType_S32, -7);
  fb_attr_scalar(&f, k_names + 3, 4, XLA_FFI_DataType_S64, 999); /* "mesh" */
  fb_attr_scalar(&f, NAME_MESH_ID, XLA_FFI_DataType_S64, (int64_t)1 << 40 | 5);
  fb_attr_scalar(&f, NAME_WANT_VECTORS, XLA_FFI_DataType_PRED, 1);
  jmg_error err;
  jmg_error_clear(&err);
  int64_t v = 0;
  CHECK_EQ(jmg_ffi_attr_i64(&f.frame, "syevd", "T_A", &v, &err), 0);
  CHECK_EQ(v, -7);
  CHECK_EQ(jmg_ffi_attr_i64(&f.frame, "syevd", "mesh_id", &v, &err), 0);
  CHECK_EQ(v, (int64_t)1 << 40 | 5);
  CHECK_EQ(jmg_ffi_attr_i64(&f.frame, "syevd", "mesh", &v, &err), 0);
  CHECK_EQ(v, 999);
  CHECK_EQ(jmg_ffi_attr_i64(&f.frame, "syevd", "want_vectors", &v, &err), 0);
  CHECK_EQ(v, 1);
  /* PRED: any nonzero byte is true, zero is false. */
  f.values[3] = 0;
  memset(&f.values[3], 0x80, 1);
  CHECK_EQ(jmg_ffi_attr_i64(&f.frame, "syevd", "want_vectors", &v, &err), 0);
  CHECK_EQ(v, 1);
  memset(&f.values[3], 0, 1);
  CHECK_EQ(jmg_ffi_attr_i64(&f.frame, "syevd", "want_vectors", &v, &err), 0);
  CHECK_EQ(v, 0);

  /* Missing: not there at all, or only a longer / shorter name is. */
  CHECK_EQ(jmg_ffi_attr_i64(&f.frame, "syevd", "T_", &v, &err), -JMG_EINVAL);
  CHECK_CONTAINS(err.msg, "attribute T_ is missing");
  CHECK_EQ(jmg_ffi_attr_i64(&f.frame, "syevd", "mesh_id2", &v, &err),
           -JMG_EINVAL);
  CHECK_CONTAINS(err.msg, "attribute mesh_id2 is missing");
  CHECK_EQ(jmg_ffi_attr_i64(&f.frame, "syevd", "pad", &v, &err), -JMG_EINVAL);
  CHECK_CONTAINS(err.msg, "attribute pad is missing");

  /* Not an integer scalar. */
  f.scalars[0].dtype = XLA_FFI_DataType_F32;
  CHECK_EQ(jmg_ffi_attr_i64(&f.frame, "syevd", "T_A", &v, &err), -JMG_EINVAL);
  CHECK_CONTAINS(err.msg,
                 "attribute T_A has element type 11, expected an "
                 "integer");
  /* Not a scalar at all: an array attribute. */
  int64_t arr_data[2] = {1, 2};
  XLA_FFI_Array arr = {XLA_FFI_DataType_S64, 2, arr_data};
  f.attr_types[1] = XLA_FFI_AttrType_ARRAY;
  f.attrs[1] = &arr;
  CHECK_EQ(jmg_ffi_attr_i64(&f.frame, "syevd", "mesh", &v, &err), -JMG_EINVAL);
  CHECK_CONTAINS(err.msg, "attribute mesh is not a scalar");
  /* The neighbours are unaffected. */
  CHECK_EQ(jmg_ffi_attr_i64(&f.frame, "syevd", "mesh_id", &v, &err), 0);
  CHECK_EQ(v, (int64_t)1 << 40 | 5);
  /* The array accessor reads it, and refuses scalars and other types. */
  const int64_t *data = NULL;
  size_t n = 0;
  CHECK_EQ(jmg_ffi_attr_i64_array(&f.frame, "syevd", "mesh", &data, &n, &err),
           0);
  CHECK_EQ(n, 2);
  CHECK(data == arr_data);
  CHECK_EQ(jmg_ffi_attr_i64_array(&f.frame, "syevd", "mesh_id", &data, &n,
                                  &err),
           -JMG_EINVAL);
  CHECK_CONTAINS(err.msg, "attribute mesh_id is not an array");
  arr.dtype = XLA_FFI_DataType_S32;
  CHECK_EQ(jmg_ffi_attr_i64_array(&f.frame, "syevd", "mesh", &data, &n, &err),
           -JMG_EINVAL);
  CHECK_CONTAINS(err.msg, "attribute mesh has element type 4, expected int64");
  CHECK_EQ(jmg_ffi_attr_i64_array(&f.frame, "syevd", "pids", &data, &n, &err),
           -JMG_EINVAL);
  CHECK_CONTAINS(err.msg, "attribute pids is missing");

  /* No attributes at all. */
  frame_builder empty;
  fb_init(&empty, fake_api(), 1);
  CHECK_EQ(jmg_ffi_attr_i64(&empty.frame, "potrs", "T_A", &v, &err),
           -JMG_EINVAL);
  CHECK_CONTAINS(err.msg, "attribute T_A is missing");
}

TEST(ffi_run_id_from_runtime_or_zero) {
  frame_builder f;
  XLA_FFI_Api api;
  fake_api_init(&api);
  fb_init(&f, &api, (int64_t)0x123456789ABLL);
  jmg_error err;
  jmg_error_clear(&err);
  int64_t id = -1;
  int calls = atomic_load(&g_run_id_calls);
  CHECK_EQ(jmg_ffi_run_id(&f.frame, "potrs", &id, &err), 0);
  CHECK_EQ(id, (int64_t)0x123456789ABLL);
  CHECK_EQ(atomic_load(&g_run_id_calls), calls + 1);

  /* An older runtime whose API ends before XLA_FFI_RunId_Get: 0, not called. */
  api.struct_size = offsetof(XLA_FFI_Api, XLA_FFI_RunId_Get);
  id = -1;
  CHECK_EQ(jmg_ffi_run_id(&f.frame, "potrs", &id, &err), 0);
  CHECK_EQ(id, 0);
  CHECK_EQ(atomic_load(&g_run_id_calls), calls + 1);
  /* A runtime that has the field but leaves it NULL. */
  api.struct_size = XLA_FFI_Api_STRUCT_SIZE;
  api.XLA_FFI_RunId_Get = NULL;
  id = -1;
  CHECK_EQ(jmg_ffi_run_id(&f.frame, "potrs", &id, &err), 0);
  CHECK_EQ(id, 0);

  /* A runtime that fails: its message comes through, its error is freed. */
  api.XLA_FFI_RunId_Get = fake_run_id_get;
  f.ctx.run_id_fails = 1;
  int live = atomic_load(&g_errors_live);
  CHECK_EQ(jmg_ffi_run_id(&f.frame, "potrs", &id, &err), -JMG_EINTERNAL);
  CHECK_EQ(err.code, JMG_EINTERNAL);
  CHECK_CONTAINS(err.call, "XLA_FFI_RunId_Get");
  CHECK_CONTAINS(err.msg, "this runtime has no run id today");
  CHECK_EQ(atomic_load(&g_errors_live), live);
  CHECK_EQ(atomic_load(&g_bad_struct_size), 0);
}

TEST(ffi_error_maps_codes_and_formats_message) {
  frame_builder f;
  fb_init(&f, fake_api(), 1);
  jmg_error err;
  jmg_error_clear(&err);
  CHECK(jmg_ffi_error(&f.frame, &err) == NULL);
  CHECK(jmg_ffi_error(&f.frame, NULL) == NULL);
  static const struct {
    jmg_status code;
    XLA_FFI_Error_Code xla;
  } map[] = {{JMG_EINVAL, XLA_FFI_Error_Code_INVALID_ARGUMENT},
             {JMG_ENOMEM, XLA_FFI_Error_Code_RESOURCE_EXHAUSTED},
             {JMG_ETIMEDOUT, XLA_FFI_Error_Code_DEADLINE_EXCEEDED},
             {JMG_EPEER, XLA_FFI_Error_Code_ABORTED},
             {JMG_EUNSUPPORTED, XLA_FFI_Error_Code_UNIMPLEMENTED},
             {JMG_ELAPACK, XLA_FFI_Error_Code_INTERNAL},
             {JMG_ECUDA, XLA_FFI_Error_Code_INTERNAL},
             {JMG_EINTERNAL, XLA_FFI_Error_Code_INTERNAL}};
  for (size_t i = 0; i < sizeof map / sizeof map[0]; ++i) {
    jmg_error_set(&err, map[i].code, "potri", "dpotrf", "argument %d", 4);
    xla_result r = take_error(jmg_ffi_error(&f.frame, &err));
    CHECK_EQ(r.is_error, 1);
    CHECK_EQ(r.errc, map[i].xla);
    CHECK_CONTAINS(r.msg, "jaxmg.potri: dpotrf: argument 4");
    CHECK_CONTAINS(r.msg, jmg_status_name(map[i].code));
  }
  CHECK_EQ(atomic_load(&g_bad_struct_size), 0);
}

/* ---- whole handlers: rejected frames
 * ----------------------------------------- */

TEST(ffi_potrs_rejects_bad_frames_promptly) {
  bound_rendezvous();
  enum { N = 4 };
  double a[N * N] = {0}, b[N] = {0}, x[N] = {0};
  float bf[N] = {0};
  int32_t ai[N * N] = {0};
  int32_t shard = 0, status = -1;
  const int64_t mesh = 101;
  frame_builder f;
#define FRESH()                                                              \
  build_potrs(&f, fresh_run_id(), mesh, 1, XLA_FFI_DataType_F64, a, N, N, b, \
              x, 1, &shard, &status)
#define REJECT(label, code, says)                            \
  do {                                                       \
    expect_rejected(label, jaxmg_potrs_cpu, &f, code, says); \
    if (jmg_test_failed) return;                             \
  } while (0)
  const XLA_FFI_Error_Code INVAL = XLA_FFI_Error_Code_INVALID_ARGUMENT;
  int live = atomic_load(&g_errors_live);

  FRESH();
  f.frame.args.size = 2;
  REJECT("2 args", INVAL, "expected 3 arguments and 3 results, got 2 and 3");
  FRESH();
  f.frame.rets.size = 4;
  f.ret_types[3] = XLA_FFI_RetType_BUFFER;
  f.rets[3] = f.rets[2];
  REJECT("4 rets", INVAL, "expected 3 arguments and 3 results, got 3 and 4");
  FRESH();
  f.bufs[0].rank = 1;
  REJECT("A rank 1", INVAL, "argument 0 (A) has rank 1, expected 2");
  FRESH();
  f.bufs[0].rank = 3;
  REJECT("A rank 3", INVAL, "argument 0 (A) has rank 3, expected 2");
  FRESH();
  f.bufs[0].dtype = f.bufs[3].dtype = XLA_FFI_DataType_S32;
  f.bufs[0].data = f.bufs[3].data = ai;
  REJECT("S32 A", INVAL, "A has XLA element type 4; jaxmg solves in");
  FRESH();
  f.bufs[0].dtype = XLA_FFI_DataType_F16;
  REJECT("F16 A", INVAL, "A has XLA element type 10");
  FRESH();
  f.dims[0][0] = 3; /* 3 rows of 4: not a shard of N=4 */
  f.dims[3][0] = 3;
  REJECT("A 3 x 4", INVAL,
         "A's shard is 3 x 4: the shard's rows must "
         "divide N");
  FRESH();
  f.dims[0][0] = 0;
  REJECT("A 0 x 4", INVAL, "the shard's rows must divide N");
  FRESH();
  f.frame.attrs.size = 0;
  fb_attr_i64(&f, NAME_MESH_ID, mesh); /* mesh_id only */
  REJECT("no T_A", INVAL, "attribute T_A is missing");
  FRESH();
  f.frame.attrs.size = 1; /* T_A only */
  REJECT("no mesh_id", INVAL, "attribute mesh_id is missing");
  FRESH();
  f.scalars[0].dtype = XLA_FFI_DataType_F64;
  REJECT("T_A float", INVAL, "attribute T_A has element type 12");
  /* The position operand is group * nparts + shard: only a negative one is
   * out of range (a larger one is another group's call). */
  FRESH();
  shard = -1;
  REJECT("position -1", INVAL, "shard position -1 is negative");
  shard = INT32_MIN;
  REJECT("position INT32_MIN", INVAL, "is negative");
  shard = 0;
  FRESH();
  f.bufs[2].dtype = XLA_FFI_DataType_S64;
  REJECT("S64 shard", INVAL,
         "the shard index has XLA element type 5, "
         "expected 4");
  FRESH();
  f.bufs[2].rank = 1;
  REJECT("rank-1 shard", INVAL,
         "argument 2 (shard index) has rank 1, "
         "expected 0");
  FRESH();
  f.ctx.run_id_fails = 1;
  REJECT("run id fails", XLA_FFI_Error_Code_INTERNAL,
         "XLA_FFI_RunId_Get: this runtime has no run id today");

  /* Past the plan (ffi/plan.h): these abort the call in the rendezvous. */
  FRESH();
  f.bufs[1].dtype = XLA_FFI_DataType_F32;
  f.bufs[1].data = bf;
  REJECT("F32 B", INVAL, "B has XLA element type 11, expected 12");
  FRESH();
  f.bufs[1].rank = 1;
  REJECT("rank-1 B", INVAL, "argument 1 (B) has rank 1, expected 2");
  FRESH();
  f.arg_types[1] = (XLA_FFI_ArgType)5;
  REJECT("B not a buffer", INVAL, "argument 1 (B) is not a buffer");
  FRESH();
  f.dims[1][1] = 5;
  REJECT("B 1 x 5", INVAL, "B has dimension 1 of size 5, expected 4");
  FRESH();
  f.dims[4][0] = 2;
  REJECT("X 2 x 4", INVAL, "X has dimension 0 of size 2, expected 1");
  FRESH();
  f.bufs[4].dtype = XLA_FFI_DataType_C128;
  REJECT("C128 X", INVAL, "X has XLA element type 18, expected 12");
  FRESH();
  f.bufs[5].dtype = XLA_FFI_DataType_F32;
  REJECT("F32 status", INVAL, "status has XLA element type 11, expected 4");
  FRESH();
  f.bufs[5].rank = 1;
  REJECT("rank-1 status", INVAL, "result 2 (status) has rank 1, expected 0");
  FRESH();
  f.dims[3][1] = 5;
  REJECT("result A 4 x 5", INVAL, "result A has dimension 1 of size 5");
  FRESH();
  f.bufs[3].dtype = XLA_FFI_DataType_F32;
  REJECT("F32 result A", INVAL, "result A has XLA element type 11");
  FRESH();
  f.values[0] = 0; /* T_A = 0: passes decoding, fails the op's checks */
  REJECT("T_A 0", INVAL, "T_A >= 1");
#undef FRESH
#undef REJECT
  CHECK_EQ(atomic_load(&g_errors_live), live);
  CHECK_EQ(atomic_load(&g_bad_struct_size), 0);
  CHECK_EQ(status, -1); /* never written */
}

TEST(ffi_potri_and_syevd_reject_bad_frames_promptly) {
  bound_rendezvous();
  enum { N = 4 };
  double a[N * N] = {0}, w[N] = {0};
  float wf[N] = {0};
  int32_t shard = 0, status = -1;
  const int64_t mesh = 102;
  const XLA_FFI_Error_Code INVAL = XLA_FFI_Error_Code_INVALID_ARGUMENT;
  frame_builder f;
#define REJECT(handler, label, says)                  \
  do {                                                \
    expect_rejected(label, handler, &f, INVAL, says); \
    if (jmg_test_failed) return;                      \
  } while (0)
#define POTRI()                                                           \
  build_potri(&f, fresh_run_id(), mesh, 1, XLA_FFI_DataType_F64, a, N, N, \
              &shard, &status)
#define SYEVD()                                                           \
  build_syevd(&f, fresh_run_id(), mesh, 1, XLA_FFI_DataType_F64, a, N, N, \
              XLA_FFI_DataType_F64, w, &shard, &status)

  POTRI();
  f.frame.args.size = 3;
  f.arg_types[2] = XLA_FFI_ArgType_BUFFER;
  f.args[2] = f.args[1];
  REJECT(jaxmg_potri_cpu, "potri 3 args",
         "expected 2 arguments and 2 "
         "results, got 3 and 2");
  POTRI();
  f.frame.rets.size = 1;
  REJECT(jaxmg_potri_cpu, "potri 1 ret", "got 2 and 1");
  POTRI();
  f.bufs[0].rank = 1;
  REJECT(jaxmg_potri_cpu, "potri A rank 1", "argument 0 (A) has rank 1");
  POTRI();
  f.bufs[0].dtype = XLA_FFI_DataType_S32;
  REJECT(jaxmg_potri_cpu, "potri S32 A", "A has XLA element type 4");
  POTRI();
  f.dims[0][0] = 3;
  REJECT(jaxmg_potri_cpu, "potri A 3 x 4", "must divide N");
  POTRI();
  f.frame.attrs.size = 0;
  REJECT(jaxmg_potri_cpu, "potri no attrs", "attribute mesh_id is missing");
  POTRI();
  shard = -2;
  REJECT(jaxmg_potri_cpu, "potri position -2",
         "shard position -2 is "
         "negative");
  shard = 0;
  POTRI();
  f.bufs[3].dtype = XLA_FFI_DataType_S64;
  REJECT(jaxmg_potri_cpu, "potri S64 status", "status has XLA element type 5");

  SYEVD();
  f.frame.rets.size = 2;
  REJECT(jaxmg_syevd_cpu, "syevd 2 rets",
         "expected 2 arguments and 3 "
         "results, got 2 and 2");
  SYEVD();
  f.dims[0][0] = 3;
  REJECT(jaxmg_syevd_cpu, "syevd A 3 x 4", "A's shard is 3 x 4");
  SYEVD();
  f.bufs[0].dtype = f.bufs[2].dtype = XLA_FFI_DataType_S32;
  REJECT(jaxmg_syevd_cpu, "syevd S32 A", "A has XLA element type 4");
  SYEVD();
  f.frame.attrs.size = 2; /* no want_vectors */
  REJECT(jaxmg_syevd_cpu, "syevd no want_vectors",
         "attribute want_vectors is missing");
  SYEVD();
  f.frame.attrs.size = 1; /* T_A only */
  REJECT(jaxmg_syevd_cpu, "syevd no mesh_id", "attribute mesh_id is missing");
  SYEVD();
  f.bufs[3].dtype = XLA_FFI_DataType_F32;
  f.bufs[3].data = wf;
  REJECT(jaxmg_syevd_cpu, "syevd F32 W",
         "W has XLA element type 11, "
         "expected 12");
  SYEVD();
  f.dims[3][0] = N + 1;
  REJECT(jaxmg_syevd_cpu, "syevd W of 5",
         "W has dimension 0 of size 5, "
         "expected 4");
  SYEVD();
  f.bufs[3].rank = 2;
  REJECT(jaxmg_syevd_cpu, "syevd W rank 2",
         "result 1 (W) has rank 2, "
         "expected 1");
  SYEVD();
  f.bufs[4].dtype = XLA_FFI_DataType_F64;
  REJECT(jaxmg_syevd_cpu, "syevd F64 status",
         "status has XLA element type "
         "12, expected 4");
  SYEVD();
  shard = -1;
  REJECT(jaxmg_syevd_cpu, "syevd position -1",
         "shard position -1 is "
         "negative");
  shard = 0;
#undef REJECT
#undef POTRI
#undef SYEVD
  CHECK_EQ(status, -1);
}

/* ---- whole handlers: several participants on threads ------------------------
 */

typedef struct ffi_call {
  XLA_FFI_Handler *handler;
  XLA_FFI_CallFrame *frame;
  xla_result result;
  double elapsed_s;
} ffi_call;

static void *ffi_call_main(void *arg) {
  ffi_call *c = arg;
  double t0 = now_s();
  XLA_FFI_Error *e = call_handler(c->handler, c->frame);
  c->elapsed_s = now_s() - t0;
  c->result = take_error(e);
  return NULL;
}

static void run_calls(ffi_call *calls, int n) {
  pthread_t th[16];
  for (int i = 0; i < n; ++i)
    if (pthread_create(&th[i], NULL, ffi_call_main, &calls[i]) != 0) abort();
  for (int i = 0; i < n; ++i) pthread_join(th[i], NULL);
}

/* One participant of a potrs or potri call: its frame and its buffers. */
typedef struct shard_call {
  frame_builder f;
  double *a; /* lc x n: rows d*lc .. of A (= columns, A being symmetric) */
  double *b; /* nrhs x n */
  double *x; /* nrhs x n */
  int32_t shard, status;
  ffi_call call;
} shard_call;

/* Builds nparts potrs (or potri, when b == NULL) participants over the n x n
 * matrix A (row-major) and right-hand sides B (nrhs x n, row r = rhs r). */
static shard_call *make_shard_calls(int nparts, int64_t n, int64_t tile,
                                    int64_t mesh_id, int64_t run_id,
                                    const double *A, const double *B,
                                    int64_t nrhs) {
  shard_call *s = calloc((size_t)nparts, sizeof *s);
  if (s == NULL) abort();
  const int64_t lc = n / nparts;
  for (int d = 0; d < nparts; ++d) {
    s[d].shard = d;
    s[d].status = -99;
    s[d].a = malloc((size_t)(lc * n) * sizeof(double));
    s[d].b = malloc((size_t)(nrhs * n + 1) * sizeof(double));
    s[d].x = malloc((size_t)(nrhs * n + 1) * sizeof(double));
    if (!s[d].a || !s[d].b || !s[d].x) abort();
    memcpy(s[d].a, A + d * lc * n, (size_t)(lc * n) * sizeof(double));
    if (B != NULL) {
      memcpy(s[d].b, B, (size_t)(nrhs * n) * sizeof(double));
      for (int64_t i = 0; i < nrhs * n; ++i) s[d].x[i] = -777.0;
      build_potrs(&s[d].f, run_id, mesh_id, tile, XLA_FFI_DataType_F64, s[d].a,
                  lc, n, s[d].b, s[d].x, nrhs, &s[d].shard, &s[d].status);
      s[d].call.handler = jaxmg_potrs_cpu;
    } else {
      build_potri(&s[d].f, run_id, mesh_id, tile, XLA_FFI_DataType_F64, s[d].a,
                  lc, n, &s[d].shard, &s[d].status);
      s[d].call.handler = jaxmg_potri_cpu;
    }
    s[d].call.frame = &s[d].f.frame;
  }
  return s;
}

static void run_shard_calls(shard_call *s, int nparts) {
  ffi_call calls[16];
  for (int d = 0; d < nparts; ++d) calls[d] = s[d].call;
  run_calls(calls, nparts);
  for (int d = 0; d < nparts; ++d) s[d].call = calls[d];
}

static void free_shard_calls(shard_call *s, int nparts) {
  for (int d = 0; d < nparts; ++d) {
    free(s[d].a);
    free(s[d].b);
    free(s[d].x);
  }
  free(s);
}

/* A well-conditioned SPD matrix (a Hilbert matrix plus n I), row-major, with
 * an irregular off-diagonal so that any misplaced column shows. */
static double *spd_matrix(int64_t n) {
  double *A = malloc((size_t)(n * n) * sizeof *A);
  if (A == NULL) abort();
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < n; ++j)
      A[i * n + j] =
          1.0 / (double)(1 + i + j) + (i == j ? (double)n + (double)i : 0.0);
  return A;
}

TEST(ffi_multi_shard_rejection_on_one_shard_releases_the_others) {
  bound_rendezvous();
  enum { P = 4, N = 12, NRHS = 2 };
  double *A = spd_matrix(N);
  double B[NRHS * N] = {0};
  shard_call *s = make_shard_calls(P, N, 1, 201, fresh_run_id(), A, B, NRHS);
  /* Shard 2's B has the wrong element type: it fails after decoding its
   * call's key and aborts the call for the others. */
  float bf[NRHS * N] = {0};
  s[2].f.bufs[1].dtype = XLA_FFI_DataType_F32;
  s[2].f.bufs[1].data = bf;
  double t0 = now_s();
  run_shard_calls(s, P);
  double total = now_s() - t0;
  xla_result r[P];
  int32_t status[P];
  for (int d = 0; d < P; ++d) {
    r[d] = s[d].call.result;
    status[d] = s[d].status;
  }
  free_shard_calls(s, P);
  free(A);
  CHECK(total < 2.0);
  CHECK_EQ(r[2].is_error, 1);
  CHECK_CONTAINS(r[2].msg, "B has XLA element type 11, expected 12");
  for (int d = 0; d < P; ++d) {
    CHECK_EQ(status[d], -99);
    if (d == 2) continue;
    CHECK_EQ(r[d].is_error, 1);
    CHECK_EQ(r[d].errc, XLA_FFI_Error_Code_INVALID_ARGUMENT);
    CHECK_CONTAINS(r[d].msg, "shard 2 failed: B has XLA element type 11");
  }
}

TEST(ffi_multi_shard_bad_tile_or_mismatched_call_fails_everyone) {
  bound_rendezvous();
  enum { P = 4, N = 12, NRHS = 1 };
  double *A = spd_matrix(N);
  double B[NRHS * N] = {0};
  /* T_A = 2 does not fit shards of 3 columns: the leader's plan fails. */
  shard_call *s = make_shard_calls(P, N, 2, 202, fresh_run_id(), A, B, NRHS);
  run_shard_calls(s, P);
  xla_result r[P];
  for (int d = 0; d < P; ++d) r[d] = s[d].call.result;
  free_shard_calls(s, P);
  /* Shard 3 thinks T_A is 1 where the others say 3. */
  s = make_shard_calls(P, N, 3, 203, fresh_run_id(), A, B, NRHS);
  s[3].f.values[0] = 1;
  run_shard_calls(s, P);
  xla_result m[P];
  for (int d = 0; d < P; ++d) m[d] = s[d].call.result;
  free_shard_calls(s, P);
  free(A);
  for (int d = 0; d < P; ++d) {
    CHECK_EQ(r[d].is_error, 1);
    CHECK_EQ(r[d].errc, XLA_FFI_Error_Code_INVALID_ARGUMENT);
    CHECK_CONTAINS(r[d].msg,
                   "jaxmg.potrs: layout: T_A=2 does not fit the "
                   "shard size 3");
    CHECK_EQ(m[d].is_error, 1);
    CHECK_CONTAINS(m[d].msg,
                   "shard 3 describes a different call than shard "
                   "0");
  }
}

/* ---- whole handlers: LAPACK
 * ----------------------------------------------------- */

/* Must run before any test registers LAPACK routines (tests.def order). */
TEST(ffi_potrs_without_lapack_names_dpotrf) {
  bound_rendezvous();
  CHECK(jmg_lapack_routines_for(JMG_F64)->potrf == NULL);
  enum { N = 4 };
  double a[N * N] = {0}, b[N] = {1, 2, 3, 4}, x[N] = {0};
  for (int i = 0; i < N; ++i) a[i * N + i] = 1.0;
  int32_t shard = 0, status = -1;
  frame_builder f;
  build_potrs(&f, fresh_run_id(), 301, 1, XLA_FFI_DataType_F64, a, N, N, b, x,
              1, &shard, &status);
  double t0 = now_s();
  xla_result r = take_error(call_handler(jaxmg_potrs_cpu, &f.frame));
  CHECK(now_s() - t0 < 2.0);
  CHECK_EQ(r.is_error, 1);
  CHECK_EQ(r.errc, XLA_FFI_Error_Code_UNIMPLEMENTED);
  CHECK_CONTAINS(r.msg, "LAPACK routine dpotrf was not registered");
  CHECK_CONTAINS(r.msg, "jaxmg.potrs");
  CHECK_CONTAINS(r.msg, "JMG_EUNSUPPORTED");

  /* syevd names its own routine: dsyevd for real, zheevd for complex. */
  double w[N];
  build_syevd(&f, fresh_run_id(), 302, 1, XLA_FFI_DataType_F64, a, N, N,
              XLA_FFI_DataType_F64, w, &shard, &status);
  r = take_error(call_handler(jaxmg_syevd_cpu, &f.frame));
  CHECK_CONTAINS(r.msg, "LAPACK routine dsyevd was not registered");
  double z[2 * N * N] = {0};
  build_syevd(&f, fresh_run_id(), 303, 1, XLA_FFI_DataType_C128, z, N, N,
              XLA_FFI_DataType_F64, w, &shard, &status);
  r = take_error(call_handler(jaxmg_syevd_cpu, &f.frame));
  CHECK_CONTAINS(r.msg, "LAPACK routine zheevd was not registered");
}

/* Reference LAPACK for double, lower triangle, column-major, Fortran-style
 * pointer arguments (engine/lapack/table.h). Unblocked and plain. */
static void ref_dpotrf(char *uplo, int *n, void *a, int *lda, int *info) {
  double *A = a;
  const int N = *n, ld = *lda;
  *info = 0;
  if (*uplo != 'L') {
    *info = -1;
    return;
  }
  for (int j = 0; j < N; ++j) {
    double d = A[j + j * ld];
    for (int k = 0; k < j; ++k) d -= A[j + k * ld] * A[j + k * ld];
    if (!(d > 0.0)) {
      A[j + j * ld] = d;
      *info = j + 1;
      return;
    }
    d = sqrt(d);
    A[j + j * ld] = d;
    for (int i = j + 1; i < N; ++i) {
      double s = A[i + j * ld];
      for (int k = 0; k < j; ++k) s -= A[i + k * ld] * A[j + k * ld];
      A[i + j * ld] = s / d;
    }
  }
}

static void ref_dpotrs(char *uplo, int *n, int *nrhs, void *a, int *lda,
                       void *b, int *ldb, int *info) {
  const double *L = a;
  double *B = b;
  const int N = *n, ld = *lda, ldB = *ldb;
  *info = 0;
  if (*uplo != 'L') {
    *info = -1;
    return;
  }
  for (int r = 0; r < *nrhs; ++r) {
    double *y = B + (size_t)r * (size_t)ldB;
    for (int i = 0; i < N; ++i) { /* L y = b */
      double s = y[i];
      for (int k = 0; k < i; ++k) s -= L[i + k * ld] * y[k];
      y[i] = s / L[i + i * ld];
    }
    for (int i = N - 1; i >= 0; --i) { /* L^T x = y */
      double s = y[i];
      for (int k = i + 1; k < N; ++k) s -= L[k + i * ld] * y[k];
      y[i] = s / L[i + i * ld];
    }
  }
}

static void ref_dpotri(char *uplo, int *n, void *a, int *lda, int *info) {
  double *A = a;
  const int N = *n, ld = *lda;
  *info = 0;
  if (*uplo != 'L') {
    *info = -1;
    return;
  }
  double *W = calloc((size_t)N * (size_t)N, sizeof *W); /* inv(L), col-major */
  if (W == NULL) abort();
  for (int j = 0; j < N; ++j) {
    if (A[j + j * ld] == 0.0) {
      *info = j + 1;
      free(W);
      return;
    }
    W[j + j * N] = 1.0 / A[j + j * ld];
    for (int i = j + 1; i < N; ++i) {
      double s = 0.0;
      for (int k = j; k < i; ++k) s += A[i + k * ld] * W[k + j * N];
      W[i + j * N] = -s / A[i + i * ld];
    }
  }
  /* inv(A) = inv(L)^T inv(L); only the lower triangle is written. */
  for (int j = 0; j < N; ++j)
    for (int i = j; i < N; ++i) {
      double s = 0.0;
      for (int k = i; k < N; ++k) s += W[k + i * N] * W[k + j * N];
      A[i + j * ld] = s;
    }
  free(W);
}

static void register_reference_lapack(void) {
  if (jaxmg_cpu_register_lapack("dpotrf", (void *)ref_dpotrf) != 0 ||
      jaxmg_cpu_register_lapack("dpotrs", (void *)ref_dpotrs) != 0 ||
      jaxmg_cpu_register_lapack("dpotri", (void *)ref_dpotri) != 0)
    abort();
}

TEST(ffi_lapack_register_rejects_unknown_names) {
  CHECK_EQ(jmg_lapack_register("dgesvd", (void *)ref_dpotrf), -JMG_EINVAL);
  CHECK_EQ(jmg_lapack_register("xpotrf", (void *)ref_dpotrf), -JMG_EINVAL);
  CHECK_EQ(jmg_lapack_register("zsyevd", (void *)ref_dpotrf), -JMG_EINVAL);
  CHECK_EQ(jmg_lapack_register("dheevd", (void *)ref_dpotrf), -JMG_EINVAL);
  CHECK_EQ(jmg_lapack_register("dpotrfx", (void *)ref_dpotrf), -JMG_EINVAL);
  CHECK_EQ(jmg_lapack_register("dpotrf", NULL), -JMG_EINVAL);
  CHECK_EQ(jmg_lapack_register(NULL, (void *)ref_dpotrf), -JMG_EINVAL);
  CHECK(jmg_lapack_routines_for(JMG_C128)->syevd == NULL);
}

/* max_i |(A x_r)_i - b_r,i| over all right-hand sides; A row-major. */
static double residual(const double *A, const double *x, const double *b,
                       int64_t n, int64_t nrhs) {
  double worst = 0.0;
  for (int64_t r = 0; r < nrhs; ++r)
    for (int64_t i = 0; i < n; ++i) {
      double s = -b[r * n + i];
      for (int64_t j = 0; j < n; ++j) s += A[i * n + j] * x[r * n + j];
      if (!(fabs(s) <= worst)) worst = fabs(s); /* NaN propagates */
    }
  return worst;
}

/* Runs a potrs over nparts threads and checks it: status, x on every shard
 * the same and solving A x = b, b untouched. Asserts. */
static void check_potrs(int nparts, int64_t n, int64_t tile, int64_t nrhs,
                        int64_t mesh_id) {
  double *A = spd_matrix(n);
  double *B = malloc((size_t)(nrhs * n + 1) * sizeof *B);
  if (B == NULL) abort();
  for (int64_t i = 0; i < nrhs * n; ++i) B[i] = sin(1.0 + (double)i);
  shard_call *s =
      make_shard_calls(nparts, n, tile, mesh_id, fresh_run_id(), A, B, nrhs);
  run_shard_calls(s, nparts);
  char why[1200] = "";
  for (int d = 0; d < nparts && !why[0]; ++d) {
    const xla_result *r = &s[d].call.result;
    double res = residual(A, s[d].x, B, n, nrhs);
    if (r->is_error)
      snprintf(why, sizeof why, "shard %d failed: %s", d, r->msg);
    else if (s[d].status != 0)
      snprintf(why, sizeof why, "shard %d: status %d", d, (int)s[d].status);
    else if (!(res < 1e-10))
      snprintf(why, sizeof why, "shard %d: residual %g", d, res);
    else if (memcmp(s[d].x, s[0].x, (size_t)(nrhs * n) * sizeof(double)))
      snprintf(why, sizeof why, "shard %d's x differs from shard 0's", d);
    else if (memcmp(s[d].b, B, (size_t)(nrhs * n) * sizeof(double)))
      snprintf(why, sizeof why, "shard %d's b was written", d);
  }
  free_shard_calls(s, nparts);
  free(A);
  free(B);
  if (why[0])
    TEST_FAIL_AT("potrs over %d shards, N=%lld T_A=%lld NRHS=%lld: %s", nparts,
                 (long long)n, (long long)tile, (long long)nrhs, why);
}

TEST(ffi_potrs_end_to_end_with_reference_lapack) {
  bound_rendezvous();
  register_reference_lapack();
  check_potrs(1, 6, 2, 2, 401);
  if (jmg_test_failed) return;
  check_potrs(4, 12, 1, 3, 402); /* unit 1, several cycles */
  if (jmg_test_failed) return;
  check_potrs(4, 12, 3, 1, 403); /* T_A = shard size: nothing moves */
  if (jmg_test_failed) return;
  check_potrs(4, 16, 2, 2, 404);
  if (jmg_test_failed) return;
  check_potrs(3, 18, 2, 1, 405);
  if (jmg_test_failed) return;
  check_potrs(4, 8, 1, 0, 406); /* no right-hand sides */
}

TEST(ffi_potrs_groups_of_positions_are_independent_calls) {
  bound_rendezvous();
  register_reference_lapack();
  /* Two groups of 2 shards under one mesh id and one run id, at the same
   * time: positions 0, 1 are group 0 (shards 0, 1), positions 2, 3 are
   * group 1 (shards 0, 1). Each group solves its own matrix. */
  enum { P = 2, N = 8, NRHS = 2 };
  double *A0 = spd_matrix(N), *A1 = spd_matrix(N);
  for (int i = 0; i < N; ++i) A1[i * N + i] += 5.0 * (double)(i % 3);
  double B[NRHS * N];
  for (int i = 0; i < NRHS * N; ++i) B[i] = cos((double)i);
  const int64_t run_id = fresh_run_id();
  shard_call *g0 = make_shard_calls(P, N, 1, 408, run_id, A0, B, NRHS);
  shard_call *g1 = make_shard_calls(P, N, 1, 408, run_id, A1, B, NRHS);
  for (int d = 0; d < P; ++d) g1[d].shard = P + d;
  ffi_call calls[2 * P];
  for (int d = 0; d < P; ++d) {
    calls[d] = g1[d].call; /* group 1 first, for good measure */
    calls[P + d] = g0[d].call;
  }
  run_calls(calls, 2 * P);
  char why[1200] = "";
  for (int d = 0; d < P && !why[0]; ++d) {
    const xla_result *r1 = &calls[d].result, *r0 = &calls[P + d].result;
    double res0 = residual(A0, g0[d].x, B, N, NRHS);
    double res1 = residual(A1, g1[d].x, B, N, NRHS);
    if (r0->is_error || r1->is_error)
      snprintf(why, sizeof why, "shard %d failed: %s", d,
               r0->is_error ? r0->msg : r1->msg);
    else if (g0[d].status != 0 || g1[d].status != 0)
      snprintf(why, sizeof why, "shard %d: status %d / %d", d,
               (int)g0[d].status, (int)g1[d].status);
    else if (!(res0 < 1e-10) || !(res1 < 1e-10))
      snprintf(why, sizeof why, "shard %d: residuals %g / %g", d, res0, res1);
  }
  free_shard_calls(g0, P);
  free_shard_calls(g1, P);
  free(A0);
  free(A1);
  if (why[0]) TEST_FAIL_AT("%s", why);
}

TEST(ffi_potrs_not_positive_definite_gives_status_and_nan) {
  bound_rendezvous();
  register_reference_lapack();
  enum { P = 4, N = 12, NRHS = 2 };
  /* Leading minors of order 1 and 2 are positive, of order 3 negative. */
  double *A = spd_matrix(N);
  for (int i = 0; i < N; ++i)
    for (int j = 0; j < N; ++j) A[i * N + j] *= (i == j ? 1.0 : 0.01);
  A[2 * N + 2] = -3.0;
  double B[NRHS * N];
  for (int i = 0; i < NRHS * N; ++i) B[i] = 1.0;
  shard_call *s = make_shard_calls(P, N, 1, 407, fresh_run_id(), A, B, NRHS);
  run_shard_calls(s, P);
  int bad = -1;
  char what[1200] = "";
  for (int d = 0; d < P && bad < 0; ++d) {
    if (s[d].call.result.is_error) {
      bad = d;
      snprintf(what, sizeof what, "error %s", s[d].call.result.msg);
    } else if (s[d].status != 3) {
      bad = d;
      snprintf(what, sizeof what, "status %d, expected 3", (int)s[d].status);
    } else {
      for (int i = 0; i < NRHS * N; ++i)
        if (!isnan(s[d].x[i])) {
          bad = d;
          snprintf(what, sizeof what, "x[%d] = %g is not NaN", i, s[d].x[i]);
          break;
        }
    }
  }
  free_shard_calls(s, P);
  free(A);
  if (bad >= 0) TEST_FAIL_AT("shard %d: %s", bad, what);
}

TEST(ffi_potrs_nonfinite_a_gives_status_minus_one_and_nan) {
  bound_rendezvous();
  register_reference_lapack();
  enum { P = 4, N = 12, NRHS = 2 };
  /* A NaN, then an Inf, in a strict triangle of a positive definite A (the
   * solver would read one triangle only: the check reads all of A). */
  const double bad_values[2] = {NAN, -INFINITY};
  const int where[2] = {7 * N + 1, 2 * N + 10};
  char what[1200] = "";
  for (int t = 0; t < 2 && !what[0]; ++t) {
    double *A = spd_matrix(N);
    A[where[t]] = bad_values[t];
    double B[NRHS * N];
    for (int i = 0; i < NRHS * N; ++i) B[i] = 1.0;
    shard_call *s =
        make_shard_calls(P, N, 1, 408 + t, fresh_run_id(), A, B, NRHS);
    run_shard_calls(s, P);
    for (int d = 0; d < P && !what[0]; ++d) {
      if (s[d].call.result.is_error)
        snprintf(what, sizeof what, "case %d, shard %d: error %s", t, d,
                 s[d].call.result.msg);
      else if (s[d].status != JMG_INFO_NONFINITE)
        snprintf(what, sizeof what, "case %d, shard %d: status %d, expected %d",
                 t, d, (int)s[d].status, JMG_INFO_NONFINITE);
      for (int i = 0; i < NRHS * N && !what[0]; ++i)
        if (!isnan(s[d].x[i]))
          snprintf(what, sizeof what, "case %d, shard %d: x[%d] = %g", t, d, i,
                   s[d].x[i]);
      for (int i = 0; i < N * N / P && !what[0]; ++i)
        if (!isnan(s[d].a[i]))
          snprintf(what, sizeof what, "case %d, shard %d: a[%d] = %g", t, d, i,
                   s[d].a[i]);
    }
    free_shard_calls(s, P);
    free(A);
  }
  if (what[0]) TEST_FAIL_AT("%s", what);
}

/* Runs a potri over nparts threads; checks that every shard gets back its
 * own rows of inv(A), in A's own layout, both triangles. Asserts. */
static void check_potri(int nparts, int64_t n, int64_t tile, int64_t mesh_id) {
  double *A = spd_matrix(n);
  shard_call *s =
      make_shard_calls(nparts, n, tile, mesh_id, fresh_run_id(), A, NULL, 0);
  run_shard_calls(s, nparts);
  char why[1200] = "";
  const int64_t lc = n / nparts;
  double *inv = malloc((size_t)(n * n) * sizeof *inv);
  if (inv == NULL) abort();
  for (int d = 0; d < nparts && !why[0]; ++d) {
    if (s[d].call.result.is_error)
      snprintf(why, sizeof why, "shard %d failed: %s", d, s[d].call.result.msg);
    else if (s[d].status != 0)
      snprintf(why, sizeof why, "shard %d: status %d", d, (int)s[d].status);
    else
      memcpy(inv + d * lc * n, s[d].a, (size_t)(lc * n) * sizeof(double));
  }
  for (int64_t i = 0; i < n && !why[0]; ++i)
    for (int64_t j = 0; j < n && !why[0]; ++j) {
      double e = (i == j) ? -1.0 : 0.0;
      for (int64_t k = 0; k < n; ++k) e += A[i * n + k] * inv[k * n + j];
      if (!(fabs(e) < 1e-12))
        snprintf(why, sizeof why, "(A inv(A))[%lld][%lld] is off by %g",
                 (long long)i, (long long)j, e);
      else if (inv[i * n + j] != inv[j * n + i])
        snprintf(why, sizeof why, "inv(A) not symmetric at %lld, %lld",
                 (long long)i, (long long)j);
    }
  free(inv);
  free_shard_calls(s, nparts);
  free(A);
  if (why[0])
    TEST_FAIL_AT("potri over %d shards, N=%lld T_A=%lld: %s", nparts,
                 (long long)n, (long long)tile, why);
}

TEST(ffi_potri_end_to_end_returns_inverse_in_original_layout) {
  bound_rendezvous();
  register_reference_lapack();
  check_potri(1, 5, 1, 501);
  if (jmg_test_failed) return;
  check_potri(4, 12, 1, 502);
  if (jmg_test_failed) return;
  check_potri(4, 16, 2, 503);
  if (jmg_test_failed) return;
  check_potri(2, 10, 5, 504);
  if (jmg_test_failed) return;
  check_potri(8, 24, 1, 505);
}

TEST(ffi_potri_separate_result_buffer_leaves_input_alone) {
  bound_rendezvous();
  register_reference_lapack();
  enum { N = 5 };
  double *A = spd_matrix(N);
  double in[N * N], out[N * N];
  memcpy(in, A, sizeof in);
  for (int i = 0; i < N * N; ++i) out[i] = -1.0;
  int32_t shard = 0, status = -1;
  frame_builder f;
  build_potri(&f, fresh_run_id(), 506, 2, XLA_FFI_DataType_F64, in, N, N,
              &shard, &status);
  f.bufs[2].data = out; /* result A is not aliased to argument A */
  xla_result r = take_error(call_handler(jaxmg_potri_cpu, &f.frame));
  int input_intact = memcmp(in, A, sizeof in) == 0;
  double worst = 0.0;
  for (int i = 0; i < N; ++i)
    for (int j = 0; j < N; ++j) {
      double e = (i == j) ? -1.0 : 0.0;
      for (int k = 0; k < N; ++k) e += A[i * N + k] * out[k * N + j];
      if (!(fabs(e) <= worst)) worst = fabs(e);
    }
  free(A);
  CHECK_EQ(r.is_error, 0);
  CHECK_EQ(status, 0);
  CHECK(input_intact);
  CHECK(worst < 1e-12);
}

TEST(ffi_potri_not_positive_definite_gives_status_and_nan) {
  bound_rendezvous();
  register_reference_lapack();
  enum { P = 2, N = 6 };
  double *A = spd_matrix(N);
  A[0] = -1.0; /* the leading minor of order 1 */
  shard_call *s = make_shard_calls(P, N, 1, 507, fresh_run_id(), A, NULL, 0);
  run_shard_calls(s, P);
  int ok = 1;
  for (int d = 0; d < P; ++d) {
    if (s[d].call.result.is_error || s[d].status != 1) ok = 0;
    for (int i = 0; i < N * N / P; ++i)
      if (!isnan(s[d].a[i])) ok = 0;
  }
  free_shard_calls(s, P);
  free(A);
  CHECK(ok);
}

/* ---- lu_solve ----------------------------------------------------------- */

/* lu_solve: args A (lc x n), B (nrhs x n), shard; rets A, X (nrhs x n),
 * status; attrs T_A, mesh_id, trans. */
static const char k_trans[] = "trans#";
static void build_lu_solve(frame_builder *f, int64_t run_id, int64_t mesh_id,
                           int64_t tile, int64_t trans, XLA_FFI_DataType dt,
                           void *a, int64_t lc, int64_t n, void *b, void *x,
                           int64_t nrhs, int32_t *shard, int32_t *status) {
  fb_init(f, fake_api(), run_id);
  fb_arg(f, dt, a, 2, lc, n);
  fb_arg(f, dt, b, 2, nrhs, n);
  fb_arg(f, XLA_FFI_DataType_S32, shard, 0, 0, 0);
  fb_ret(f, dt, a, 2, lc, n);
  fb_ret(f, dt, x, 2, nrhs, n);
  fb_ret(f, XLA_FFI_DataType_S32, status, 0, 0, 0);
  fb_attr_i64(f, NAME_T_A, tile);
  fb_attr_i64(f, NAME_MESH_ID, mesh_id);
  fb_attr_scalar(f, k_trans, 5, XLA_FFI_DataType_PRED, trans);
}

/* Must run before any test registers getrf (tests.def order). */
TEST(ffi_lu_solve_without_lapack_names_dgetrf) {
  bound_rendezvous();
  CHECK(jmg_lapack_routines_for(JMG_F64)->getrf == NULL);
  enum { N = 4 };
  double a[N * N] = {0}, b[N] = {1, 2, 3, 4}, x[N] = {0};
  for (int i = 0; i < N; ++i) a[i * N + i] = 1.0;
  int32_t shard = 0, status = -1;
  frame_builder f;
  build_lu_solve(&f, fresh_run_id(), 601, 1, 0, XLA_FFI_DataType_F64, a, N, N,
                 b, x, 1, &shard, &status);
  xla_result r = take_error(call_handler(jaxmg_lu_solve_cpu, &f.frame));
  CHECK_EQ(r.is_error, 1);
  CHECK_EQ(r.errc, XLA_FFI_Error_Code_UNIMPLEMENTED);
  CHECK_CONTAINS(r.msg, "LAPACK routine dgetrf was not registered");
  CHECK_CONTAINS(r.msg, "jaxmg.lu_solve");
}

/* Reference getrf/getrs for every dtype, Fortran-style pointer arguments
 * (engine/lapack/table.h), computed in double complex: plain, unblocked, with
 * LAPACK's conventions (1-based pivots, the first exactly zero pivot in info
 * and the factorization carried on). getrs refuses trans 'C', which jaxmg
 * must never ask for (ops/lu_solve.c). */
static double complex ref_load(jmg_dtype t, const void *p, size_t i) {
  switch (t) {
    case JMG_F32:
      return ((const float *)p)[i];
    case JMG_F64:
      return ((const double *)p)[i];
    case JMG_C64:
      return ((const float complex *)p)[i];
    default:
      return ((const double complex *)p)[i];
  }
}

static void ref_store(jmg_dtype t, void *p, size_t i, double complex v) {
  switch (t) {
    case JMG_F32:
      ((float *)p)[i] = (float)creal(v);
      break;
    case JMG_F64:
      ((double *)p)[i] = creal(v);
      break;
    case JMG_C64:
      ((float complex *)p)[i] = (float complex)v;
      break;
    default:
      ((double complex *)p)[i] = v;
      break;
  }
}

static double cabs1(double complex v) {
  return fabs(creal(v)) + fabs(cimag(v));
}

static void ref_getrf(jmg_dtype t, int *m, int *n, void *a, int *lda, int *ipiv,
                      int *info) {
  const int M = *m, N = *n, ld = *lda;
  *info = 0;
  if (M != N) {
    *info = -1;
    return;
  }
#define A_(i, j) ((size_t)(i) + (size_t)(j) * (size_t)ld)
  for (int j = 0; j < N; ++j) {
    int p = j;
    for (int i = j + 1; i < N; ++i)
      if (cabs1(ref_load(t, a, A_(i, j))) > cabs1(ref_load(t, a, A_(p, j))))
        p = i;
    ipiv[j] = p + 1;
    for (int k = 0; k < N && p != j; ++k) {
      double complex s = ref_load(t, a, A_(j, k));
      ref_store(t, a, A_(j, k), ref_load(t, a, A_(p, k)));
      ref_store(t, a, A_(p, k), s);
    }
    double complex piv = ref_load(t, a, A_(j, j));
    if (piv == 0.0) {
      if (*info == 0) *info = j + 1;
      continue;
    }
    for (int i = j + 1; i < N; ++i) {
      double complex l = ref_load(t, a, A_(i, j)) / piv;
      ref_store(t, a, A_(i, j), l);
      for (int k = j + 1; k < N; ++k)
        ref_store(t, a, A_(i, k),
                  ref_load(t, a, A_(i, k)) - l * ref_load(t, a, A_(j, k)));
    }
  }
}

static void ref_getrs(jmg_dtype t, char *trans, int *n, int *nrhs, void *a,
                      int *lda, int *ipiv, void *b, int *ldb, int *info) {
  const int N = *n, ld = *lda;
  *info = 0;
  if (*trans != 'N' && *trans != 'T') {
    *info = -1;
    return;
  }
  double complex *y = malloc((size_t)(N > 0 ? N : 1) * sizeof *y);
  if (y == NULL) abort();
  for (int r = 0; r < *nrhs; ++r) {
    const size_t off = (size_t)r * (size_t)*ldb;
    for (int i = 0; i < N; ++i) y[i] = ref_load(t, b, off + (size_t)i);
    if (*trans == 'N') { /* P L U x = b */
      for (int i = 0; i < N; ++i) {
        double complex s = y[i];
        y[i] = y[ipiv[i] - 1];
        y[ipiv[i] - 1] = s;
      }
      for (int i = 0; i < N; ++i)
        for (int k = 0; k < i; ++k) y[i] -= ref_load(t, a, A_(i, k)) * y[k];
      for (int i = N - 1; i >= 0; --i) {
        for (int k = i + 1; k < N; ++k) y[i] -= ref_load(t, a, A_(i, k)) * y[k];
        y[i] /= ref_load(t, a, A_(i, i));
      }
    } else { /* Uᵀ Lᵀ Pᵀ x = b */
      for (int i = 0; i < N; ++i) {
        for (int k = 0; k < i; ++k) y[i] -= ref_load(t, a, A_(k, i)) * y[k];
        y[i] /= ref_load(t, a, A_(i, i));
      }
      for (int i = N - 1; i >= 0; --i)
        for (int k = i + 1; k < N; ++k) y[i] -= ref_load(t, a, A_(k, i)) * y[k];
      for (int i = N - 1; i >= 0; --i) {
        double complex s = y[i];
        y[i] = y[ipiv[i] - 1];
        y[ipiv[i] - 1] = s;
      }
    }
    for (int i = 0; i < N; ++i) ref_store(t, b, off + (size_t)i, y[i]);
  }
  free(y);
#undef A_
}

#define REF_LU(p, T)                                                       \
  static void ref_##p##getrf(int *m, int *n, void *a, int *lda, int *ipiv, \
                             int *info) {                                  \
    ref_getrf(T, m, n, a, lda, ipiv, info);                                \
  }                                                                        \
  static void ref_##p##getrs(char *trans, int *n, int *nrhs, void *a,      \
                             int *lda, int *ipiv, void *b, int *ldb,       \
                             int *info) {                                  \
    ref_getrs(T, trans, n, nrhs, a, lda, ipiv, b, ldb, info);              \
  }
REF_LU(s, JMG_F32)
REF_LU(d, JMG_F64)
REF_LU(c, JMG_C64)
REF_LU(z, JMG_C128)
#undef REF_LU

static void register_reference_lu(void) {
  if (jaxmg_cpu_register_lapack("sgetrf", (void *)ref_sgetrf) != 0 ||
      jaxmg_cpu_register_lapack("dgetrf", (void *)ref_dgetrf) != 0 ||
      jaxmg_cpu_register_lapack("cgetrf", (void *)ref_cgetrf) != 0 ||
      jaxmg_cpu_register_lapack("zgetrf", (void *)ref_zgetrf) != 0 ||
      jaxmg_cpu_register_lapack("sgetrs", (void *)ref_sgetrs) != 0 ||
      jaxmg_cpu_register_lapack("dgetrs", (void *)ref_dgetrs) != 0 ||
      jaxmg_cpu_register_lapack("cgetrs", (void *)ref_cgetrs) != 0 ||
      jaxmg_cpu_register_lapack("zgetrs", (void *)ref_zgetrs) != 0)
    abort();
}

static const XLA_FFI_DataType k_xla_types[JMG_NUM_DTYPES] = {
    XLA_FFI_DataType_F32, XLA_FFI_DataType_F64, XLA_FFI_DataType_C64,
    XLA_FFI_DataType_C128};

/* One lu_solve participant: its frame and its buffers, in the call's dtype. */
typedef struct lu_call {
  frame_builder f;
  void *a, *b, *x;
  int32_t shard, status;
  ffi_call call;
} lu_call;

/* A random, strongly non-symmetric n x n matrix in dtype t (row-major; the
 * upper triangle four times the lower, complex parts as large as the real
 * ones), with row `zero_row` zero when >= 0. Stored in t and returned in
 * double complex as stored. */
static double complex *lu_matrix(jmg_dtype t, int64_t n, uint64_t seed,
                                 int64_t zero_row) {
  double complex *A = malloc((size_t)(n * n) * sizeof *A);
  void *tmp = malloc(16);
  if (A == NULL || tmp == NULL) abort();
  uint64_t s = seed * 6364136223846793005ULL + 1442695040888963407ULL;
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double v[2];
      for (int k = 0; k < 2; ++k) {
        s = s * 6364136223846793005ULL + 1442695040888963407ULL;
        v[k] = (double)(s >> 11) / 9007199254740992.0 * 2.0 - 1.0;
      }
      double scale = j > i ? 4.0 : 1.0;
      double complex e =
          scale * (v[0] + (jmg_dtype_is_complex(t) ? v[1] : 0.0) * I);
      if (i == zero_row) e = 0.0;
      ref_store(t, tmp, 0, e);
      A[i * n + j] = ref_load(t, tmp, 0);
    }
  free(tmp);
  return A;
}

/* Runs nparts lu_solve participants over A (double complex, row-major) and
 * right-hand sides B (nrhs x n, row r = rhs r, both as stored in t). */
static lu_call *run_lu_calls(int nparts, jmg_dtype t, int64_t n, int64_t tile,
                             int64_t trans, const double complex *A,
                             const double complex *B, int64_t nrhs,
                             int64_t mesh_id) {
  const size_t es = jmg_dtype_size(t);
  const int64_t lc = n / nparts;
  const int64_t run_id = fresh_run_id();
  lu_call *s = calloc((size_t)nparts, sizeof *s);
  if (s == NULL) abort();
  for (int d = 0; d < nparts; ++d) {
    s[d].shard = d;
    s[d].status = -99;
    s[d].a = malloc((size_t)(lc * n) * es);
    s[d].b = malloc((size_t)(nrhs * n + 1) * es);
    s[d].x = malloc((size_t)(nrhs * n + 1) * es);
    if (!s[d].a || !s[d].b || !s[d].x) abort();
    for (int64_t i = 0; i < lc * n; ++i)
      ref_store(t, s[d].a, (size_t)i, A[d * lc * n + i]);
    for (int64_t i = 0; i < nrhs * n; ++i) {
      ref_store(t, s[d].b, (size_t)i, B[i]);
      ref_store(t, s[d].x, (size_t)i, -777.0);
    }
    build_lu_solve(&s[d].f, run_id, mesh_id, tile, trans, k_xla_types[t],
                   s[d].a, lc, n, s[d].b, s[d].x, nrhs, &s[d].shard,
                   &s[d].status);
    s[d].call.handler = jaxmg_lu_solve_cpu;
    s[d].call.frame = &s[d].f.frame;
  }
  ffi_call calls[16];
  for (int d = 0; d < nparts; ++d) calls[d] = s[d].call;
  run_calls(calls, nparts);
  for (int d = 0; d < nparts; ++d) s[d].call = calls[d];
  return s;
}

static void free_lu_calls(lu_call *s, int nparts) {
  for (int d = 0; d < nparts; ++d) {
    free(s[d].a);
    free(s[d].b);
    free(s[d].x);
  }
  free(s);
}

/* The normwise backward error of x as a solution of op(A) x = b, for every
 * right-hand side: max |op(A) x - b| / (|A| |x| + |b|) in the max norm, op
 * the transpose (not conjugated) when trans. NaN propagates. */
static double lu_backward_error(jmg_dtype t, const double complex *A,
                                const void *x, const double complex *B,
                                int64_t n, int64_t nrhs, int64_t trans) {
  double worst = 0.0, norm_a = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    double row = 0.0;
    for (int64_t j = 0; j < n; ++j)
      row += cabs(trans ? A[j * n + i] : A[i * n + j]);
    if (row > norm_a) norm_a = row;
  }
  for (int64_t r = 0; r < nrhs; ++r) {
    double norm_x = 0.0, norm_b = 0.0, res = 0.0;
    for (int64_t i = 0; i < n; ++i) {
      double ax = cabs(ref_load(t, x, (size_t)(r * n + i)));
      if (!(ax <= norm_x)) norm_x = ax;
      if (cabs(B[r * n + i]) > norm_b) norm_b = cabs(B[r * n + i]);
    }
    for (int64_t i = 0; i < n; ++i) {
      double complex s = -B[r * n + i];
      for (int64_t j = 0; j < n; ++j)
        s += (trans ? A[j * n + i] : A[i * n + j]) *
             ref_load(t, x, (size_t)(r * n + j));
      if (!(cabs(s) <= res)) res = cabs(s);
    }
    double e = res / (norm_a * norm_x + norm_b);
    if (!(e <= worst)) worst = e;
  }
  return worst;
}

/* Solves op(A) X = B for a random non-symmetric A over nparts threads and
 * checks: status 0, X the same on every shard, a small backward error (and
 * a large one for the other op, so that a wrong transpose cannot pass), B
 * untouched. Asserts. */
static void check_lu_solve(int nparts, jmg_dtype t, int64_t n, int64_t tile,
                           int64_t nrhs, int64_t trans, int64_t mesh_id) {
  const size_t es = jmg_dtype_size(t);
  const double eps = jmg_dtype_real_size(t) == 4 ? 1.2e-7 : 2.3e-16;
  double complex *A = lu_matrix(t, n, (uint64_t)(mesh_id * 7 + t), -1);
  double complex *B = lu_matrix(t, n, (uint64_t)(mesh_id * 11 + t + 1), -1);
  lu_call *s = run_lu_calls(nparts, t, n, tile, trans, A, B, nrhs, mesh_id);
  void *b_stored = malloc((size_t)(nrhs * n + 1) * es);
  if (b_stored == NULL) abort();
  for (int64_t i = 0; i < nrhs * n; ++i)
    ref_store(t, b_stored, (size_t)i, B[i]);
  char why[1200] = "";
  for (int d = 0; d < nparts && !why[0]; ++d) {
    const xla_result *r = &s[d].call.result;
    double berr = lu_backward_error(t, A, s[d].x, B, n, nrhs, trans);
    double other = lu_backward_error(t, A, s[d].x, B, n, nrhs, !trans);
    if (r->is_error)
      snprintf(why, sizeof why, "shard %d failed: %s", d, r->msg);
    else if (s[d].status != 0)
      snprintf(why, sizeof why, "shard %d: status %d", d, (int)s[d].status);
    else if (!(berr < 64.0 * (double)n * eps))
      snprintf(why, sizeof why, "shard %d: backward error %g", d, berr);
    else if (nrhs > 0 && n > 1 && !(other > 1e-3))
      snprintf(why, sizeof why, "shard %d: solves the other op too (%g)", d,
               other);
    else if (memcmp(s[d].x, s[0].x, (size_t)(nrhs * n) * es))
      snprintf(why, sizeof why, "shard %d's x differs from shard 0's", d);
    else if (memcmp(s[d].b, b_stored, (size_t)(nrhs * n) * es))
      snprintf(why, sizeof why, "shard %d's b was written", d);
  }
  free_lu_calls(s, nparts);
  free(b_stored);
  free(A);
  free(B);
  if (why[0])
    TEST_FAIL_AT(
        "lu_solve %s over %d shards, N=%lld T_A=%lld NRHS=%lld "
        "trans=%lld: %s",
        jmg_dtype_name(t), nparts, (long long)n, (long long)tile,
        (long long)nrhs, (long long)trans, why);
}

TEST(ffi_lu_solve_end_to_end_every_dtype_and_transpose) {
  bound_rendezvous();
  register_reference_lu();
  static const struct {
    int nparts;
    int64_t n, tile, nrhs;
  } cases[] = {
      {1, 6, 2, 2},  {4, 12, 1, 3}, /* unit 1, several cycles */
      {4, 12, 3, 1},                /* T_A = shard size: nothing moves */
      {4, 16, 2, 2}, {3, 18, 2, 1},
      {2, 20, 5, 4}, {4, 8, 1, 0}, /* no right-hand sides */
  };
  int64_t mesh = 610;
  for (int t = 0; t < JMG_NUM_DTYPES; ++t)
    for (int64_t trans = 0; trans < 2; ++trans)
      for (size_t c = 0; c < sizeof cases / sizeof cases[0]; ++c) {
        check_lu_solve(cases[c].nparts, (jmg_dtype)t, cases[c].n, cases[c].tile,
                       cases[c].nrhs, trans, mesh++);
        if (jmg_test_failed) return;
      }
}

TEST(ffi_lu_solve_singular_gives_first_zero_pivot_and_nan) {
  bound_rendezvous();
  register_reference_lu();
  enum { P = 4, N = 12, NRHS = 2 };
  /* A's row 2 is zero: the engine holds Aᵀ, whose column 2 stays zero
   * through the elimination, so U(3, 3) is the first exactly zero pivot. */
  for (int t = 0; t < JMG_NUM_DTYPES; ++t)
    for (int64_t trans = 0; trans < 2; ++trans) {
      double complex *A = lu_matrix((jmg_dtype)t, N, 77, 2);
      double complex *B = lu_matrix((jmg_dtype)t, N, 78, -1);
      lu_call *s = run_lu_calls(P, (jmg_dtype)t, N, 1, trans, A, B, NRHS,
                                620 + 2 * t + trans);
      char what[1200] = "";
      for (int d = 0; d < P && !what[0]; ++d) {
        if (s[d].call.result.is_error)
          snprintf(what, sizeof what, "shard %d: error %s", d,
                   s[d].call.result.msg);
        else if (s[d].status != 3)
          snprintf(what, sizeof what, "shard %d: status %d, expected 3", d,
                   (int)s[d].status);
        for (int i = 0; i < NRHS * N && !what[0]; ++i) {
          double complex v = ref_load((jmg_dtype)t, s[d].x, (size_t)i);
          if (!isnan(creal(v)))
            snprintf(what, sizeof what, "shard %d: x[%d] = %g is not NaN", d, i,
                     creal(v));
        }
      }
      free_lu_calls(s, P);
      free(A);
      free(B);
      if (what[0])
        TEST_FAIL_AT("%s trans=%lld: %s", jmg_dtype_name((jmg_dtype)t),
                     (long long)trans, what);
      if (jmg_test_failed) return;
    }
}

TEST(ffi_lu_solve_shards_disagreeing_on_trans_fail_everyone) {
  bound_rendezvous();
  register_reference_lu();
  enum { P = 2, N = 8, NRHS = 1 };
  double complex *A = lu_matrix(JMG_F64, N, 90, -1);
  double complex *B = lu_matrix(JMG_F64, N, 91, -1);
  const int64_t run_id = fresh_run_id();
  lu_call s[P];
  memset(s, 0, sizeof s);
  double a[P][N * N / P], b[P][N], x[P][N];
  for (int d = 0; d < P; ++d) {
    s[d].shard = d;
    s[d].status = -99;
    for (int i = 0; i < N * N / P; ++i) a[d][i] = creal(A[d * N * N / P + i]);
    for (int i = 0; i < N; ++i) b[d][i] = creal(B[i]);
    build_lu_solve(&s[d].f, run_id, 630, 1, d, XLA_FFI_DataType_F64, a[d],
                   N / P, N, b[d], x[d], NRHS, &s[d].shard, &s[d].status);
    s[d].call.handler = jaxmg_lu_solve_cpu;
    s[d].call.frame = &s[d].f.frame;
  }
  ffi_call calls[P];
  for (int d = 0; d < P; ++d) calls[d] = s[d].call;
  run_calls(calls, P);
  free(A);
  free(B);
  for (int d = 0; d < P; ++d) {
    CHECK_EQ(calls[d].result.is_error, 1);
    CHECK_CONTAINS(calls[d].result.msg, "describes a different call");
  }
}

/* --- potrs's log-determinant (want_logdet) --------------------------------- */

/* Reference potrf/potrs for every dtype (Hermitian, lower, L L^H), computed
 * in double complex, Fortran-style pointer arguments; registered for s, c, z
 * (d keeps ref_dpotrf/ref_dpotrs). */
static void ref_potrf(jmg_dtype t, char *uplo, int *n, void *a, int *lda,
                      int *info) {
  const int N = *n, ld = *lda;
  *info = 0;
  if (*uplo != 'L') {
    *info = -1;
    return;
  }
#define L(i, j) ref_load(t, a, (size_t)(i) + (size_t)(j) * (size_t)ld)
  for (int j = 0; j < N; ++j) {
    double d = creal(L(j, j));
    for (int k = 0; k < j; ++k) d -= creal(L(j, k) * conj(L(j, k)));
    if (!(d > 0.0)) {
      *info = j + 1;
      return;
    }
    d = sqrt(d);
    ref_store(t, a, (size_t)j + (size_t)j * (size_t)ld, d);
    for (int i = j + 1; i < N; ++i) {
      double complex s = L(i, j);
      for (int k = 0; k < j; ++k) s -= L(i, k) * conj(L(j, k));
      ref_store(t, a, (size_t)i + (size_t)j * (size_t)ld, s / d);
    }
  }
}

static void ref_potrs(jmg_dtype t, char *uplo, int *n, int *nrhs, void *a,
                      int *lda, void *b, int *ldb, int *info) {
  const int N = *n, ld = *lda, ldB = *ldb;
  *info = 0;
  if (*uplo != 'L') {
    *info = -1;
    return;
  }
  for (int r = 0; r < *nrhs; ++r) {
    const size_t off = (size_t)r * (size_t)ldB;
    for (int i = 0; i < N; ++i) { /* L y = b */
      double complex s = ref_load(t, b, off + (size_t)i);
      for (int k = 0; k < i; ++k) s -= L(i, k) * ref_load(t, b, off + (size_t)k);
      ref_store(t, b, off + (size_t)i, s / L(i, i));
    }
    for (int i = N - 1; i >= 0; --i) { /* L^H x = y */
      double complex s = ref_load(t, b, off + (size_t)i);
      for (int k = i + 1; k < N; ++k)
        s -= conj(L(k, i)) * ref_load(t, b, off + (size_t)k);
      ref_store(t, b, off + (size_t)i, s / L(i, i));
    }
  }
#undef L
}

#define REF_CHOL(p, T)                                                      \
  static void ref_##p##potrf_any(char *uplo, int *n, void *a, int *lda,     \
                                 int *info) {                               \
    ref_potrf(T, uplo, n, a, lda, info);                                    \
  }                                                                         \
  static void ref_##p##potrs_any(char *uplo, int *n, int *nrhs, void *a,    \
                                 int *lda, void *b, int *ldb, int *info) {  \
    ref_potrs(T, uplo, n, nrhs, a, lda, b, ldb, info);                      \
  }
REF_CHOL(s, JMG_F32)
REF_CHOL(c, JMG_C64)
REF_CHOL(z, JMG_C128)
#undef REF_CHOL

static void register_reference_cholesky(void) {
  register_reference_lapack();
  if (jaxmg_cpu_register_lapack("spotrf", (void *)ref_spotrf_any) != 0 ||
      jaxmg_cpu_register_lapack("cpotrf", (void *)ref_cpotrf_any) != 0 ||
      jaxmg_cpu_register_lapack("zpotrf", (void *)ref_zpotrf_any) != 0 ||
      jaxmg_cpu_register_lapack("spotrs", (void *)ref_spotrs_any) != 0 ||
      jaxmg_cpu_register_lapack("cpotrs", (void *)ref_cpotrs_any) != 0 ||
      jaxmg_cpu_register_lapack("zpotrs", (void *)ref_zpotrs_any) != 0)
    abort();
}

static const char k_want_logdet[] = "want_logdet#";

/* potrs with the log-determinant: rets A, X, logdet (rank 0, real), status;
 * attrs T_A, mesh_id, want_logdet. */
static void build_potrs_logdet(frame_builder *f, int64_t run_id,
                               int64_t mesh_id, int64_t tile, jmg_dtype t,
                               void *a, int64_t lc, int64_t n, void *b,
                               void *x, int64_t nrhs, void *logdet,
                               int32_t *shard, int32_t *status) {
  const XLA_FFI_DataType dt = k_xla_types[t];
  fb_init(f, fake_api(), run_id);
  fb_arg(f, dt, a, 2, lc, n);
  fb_arg(f, dt, b, 2, nrhs, n);
  fb_arg(f, XLA_FFI_DataType_S32, shard, 0, 0, 0);
  fb_ret(f, dt, a, 2, lc, n);
  fb_ret(f, dt, x, 2, nrhs, n);
  fb_ret(f,
         jmg_dtype_real_size(t) == 4 ? XLA_FFI_DataType_F32
                                     : XLA_FFI_DataType_F64,
         logdet, 0, 0, 0);
  fb_ret(f, XLA_FFI_DataType_S32, status, 0, 0, 0);
  fb_attr_i64(f, NAME_T_A, tile);
  fb_attr_i64(f, NAME_MESH_ID, mesh_id);
  fb_attr_scalar(f, k_want_logdet, 11, XLA_FFI_DataType_PRED, 1);
}

/* An n x n Hermitian positive definite matrix (row-major; complex parts off
 * the diagonal for complex t), as stored in t; with bad_minor >= 1 the
 * leading minor of that order is made negative. */
static double complex *hpd_matrix(jmg_dtype t, int64_t n, int bad_minor) {
  double complex *A = malloc((size_t)(n * n) * sizeof *A);
  void *tmp = malloc(16);
  if (A == NULL || tmp == NULL) abort();
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double complex e = 1.0 / (double)(1 + i + j) +
                         (i == j ? (double)n + (double)i : 0.0);
      if (jmg_dtype_is_complex(t))
        e += 0.3 * (double)(i - j) / (double)(1 + i + j) * I;
      if (bad_minor >= 1 && i == bad_minor - 1 && j == i) e = -3.0;
      ref_store(t, tmp, 0, e);
      A[i * n + j] = ref_load(t, tmp, 0);
    }
  free(tmp);
  return A;
}

/* log det A of a Hermitian positive definite A (row-major, as stored), by
 * the reference Cholesky in double complex. */
static double ref_logdet(const double complex *A, int64_t n) {
  double complex *L = malloc((size_t)(n * n) * sizeof *L);
  if (L == NULL) abort();
  memcpy(L, A, (size_t)(n * n) * sizeof *L);
  char lower = 'L';
  int N = (int)n, info = 0;
  /* Row-major A is column-major A^T = conj(A): the same determinant. */
  ref_potrf(JMG_C128, &lower, &N, L, &N, &info);
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) sum += log(creal(L[i * n + i]));
  free(L);
  return info == 0 ? 2.0 * sum : NAN;
}

/* Runs a potrs with want_logdet over nparts threads in dtype t; checks every
 * shard's status, its logdet against want (NaN: must be NaN) and, when
 * status is 0, that x solves the system closely. Asserts. */
static void check_potrs_logdet(int nparts, jmg_dtype t, int64_t n,
                               int64_t tile, int bad_minor, int64_t mesh_id) {
  enum { NRHS = 2 };
  const size_t es = jmg_dtype_size(t);
  const int64_t lc = n / nparts;
  const int64_t run_id = fresh_run_id();
  double complex *A = hpd_matrix(t, n, bad_minor);
  const double want = bad_minor >= 1 ? NAN : ref_logdet(A, n);
  lu_call *s = calloc((size_t)nparts, sizeof *s);
  double ld[16][2];
  if (s == NULL) abort();
  for (int d = 0; d < nparts; ++d) {
    s[d].shard = d;
    s[d].status = -99;
    s[d].a = malloc((size_t)(lc * n) * es);
    s[d].b = malloc((size_t)(NRHS * n) * es);
    s[d].x = malloc((size_t)(NRHS * n) * es);
    if (!s[d].a || !s[d].b || !s[d].x) abort();
    for (int64_t i = 0; i < lc * n; ++i)
      ref_store(t, s[d].a, (size_t)i, A[d * lc * n + i]);
    for (int64_t i = 0; i < NRHS * n; ++i)
      ref_store(t, s[d].b, (size_t)i, 1.0);
    ld[d][0] = ld[d][1] = -777.0;
    build_potrs_logdet(&s[d].f, run_id, mesh_id, tile, t, s[d].a, lc, n,
                       s[d].b, s[d].x, NRHS, ld[d], &s[d].shard, &s[d].status);
    s[d].call.handler = jaxmg_potrs_cpu;
    s[d].call.frame = &s[d].f.frame;
  }
  ffi_call calls[16];
  for (int d = 0; d < nparts; ++d) calls[d] = s[d].call;
  run_calls(calls, nparts);
  const double tol = jmg_dtype_real_size(t) == 4 ? 1e-4 : 1e-11;
  char why[1200] = "";
  for (int d = 0; d < nparts && !why[0]; ++d) {
    float single;
    memcpy(&single, ld[d], sizeof single);
    const double got = jmg_dtype_real_size(t) == 4 ? (double)single : ld[d][0];
    if (calls[d].result.is_error)
      snprintf(why, sizeof why, "shard %d failed: %s", d, calls[d].result.msg);
    else if (s[d].status != (bad_minor >= 1 ? bad_minor : 0))
      snprintf(why, sizeof why, "shard %d: status %d", d, (int)s[d].status);
    else if (isnan(want) ? !isnan(got)
                         : !(fabs(got - want) <= tol * fabs(want)))
      snprintf(why, sizeof why, "shard %d: logdet %.17g, expected %.17g", d,
               got, want);
  }
  free_lu_calls(s, nparts);
  free(A);
  if (why[0])
    TEST_FAIL_AT("potrs logdet, dtype %d, %d shards, N=%lld T_A=%lld: %s",
                 (int)t, nparts, (long long)n, (long long)tile, why);
}

TEST(ffi_potrs_logdet_every_dtype_with_reference_lapack) {
  bound_rendezvous();
  register_reference_cholesky();
  for (int t = 0; t < JMG_NUM_DTYPES && !jmg_test_failed; ++t) {
    check_potrs_logdet(1, (jmg_dtype)t, 6, 2, 0, 700 + t);
    if (!jmg_test_failed) check_potrs_logdet(4, (jmg_dtype)t, 16, 2, 0, 710 + t);
    if (!jmg_test_failed) check_potrs_logdet(2, (jmg_dtype)t, 12, 3, 0, 720 + t);
  }
}

TEST(ffi_potrs_logdet_is_nan_when_not_positive_definite) {
  bound_rendezvous();
  register_reference_cholesky();
  for (int t = 0; t < JMG_NUM_DTYPES && !jmg_test_failed; ++t)
    check_potrs_logdet(4, (jmg_dtype)t, 12, 1, 3, 730 + t);
}

/* ---- the local model's plan -------------------------------------------- */

/* A local-model engine and a platform around it, for the plan's checks: its
 * routine and its communicator must never be reached (the plan stops
 * before). */
static atomic_int g_local_reached;

static int local_never_potri(const jmg_engine *e, const jmg_local_matrix *a,
                             int *info, jmg_error *err) {
  (void)e, (void)a, (void)info;
  atomic_fetch_add(&g_local_reached, 1);
  return jmg_error_set(err, JMG_EINTERNAL, "potri", "test", "reached");
}

static const jmg_engine g_local_engine = {
    .name = "local-test",
    .model = JMG_MODEL_LOCAL,
    .local = {.potri = local_never_potri},
};
static const jmg_engine *const g_local_engines[] = {&g_local_engine, NULL};

static int never_open(const void *id, int rank, int ranks, void *device_ctx,
                      jmg_comm **out, const char *op, jmg_error *err) {
  (void)id, (void)rank, (void)ranks, (void)device_ctx, (void)out;
  atomic_fetch_add(&g_local_reached, 1);
  return jmg_error_set(err, JMG_EINTERNAL, op, "test", "opened");
}
static const jmg_comm_ops g_never_comm = {.name = "never",
                                          .id_bytes = 128,
                                          .open = never_open};
static const jmg_comm_ops *never_comm(void) { return &g_never_comm; }

static int host_read_shard(XLA_FFI_CallFrame *frame, const void *buf,
                           int32_t *out, jmg_error *err) {
  (void)frame, (void)err;
  memcpy(out, buf, sizeof *out);
  return 0;
}
static int no_device_ctx(XLA_FFI_CallFrame *frame, void **ctx,
                         jmg_error *err) {
  (void)frame, (void)err;
  *ctx = NULL;
  return 0;
}
static void no_free_ctx(void *ctx) { (void)ctx; }
static int host_copy_local(void *ctx, void *dst, const void *src, size_t bytes,
                           jmg_error *err) {
  (void)ctx, (void)err;
  memmove(dst, src, bytes);
  return 0;
}

static jmg_ffi_platform local_platform(const jmg_comm_ops *(*comm)(void)) {
  jmg_ffi_platform p = {
      .name = "local-test-platform",
      .engines = g_local_engines,
      .mem = jmg_host_mem,
      .rendezvous = jmg_rendezvous_threads,
      .read_shard = host_read_shard,
      .make_device_ctx = no_device_ctx,
      .free_device_ctx = no_free_ctx,
      .copy_local = host_copy_local,
      .async = 0,
      .share = NULL, /* MPMD below: the local model must not need it */
      .comm = comm,
  };
  return p;
}

static const char k_local_names[] = "T_Acomm_idjob_idmesh_idgrid_rowscall_id";
#define NAME_L_T_A k_local_names, 3
#define NAME_L_COMM_ID (k_local_names + 3), 7
#define NAME_L_JOB_ID (k_local_names + 10), 6
#define NAME_L_MESH_ID (k_local_names + 16), 7
#define NAME_L_GRID_ROWS (k_local_names + 23), 9
#define NAME_L_CALL_ID (k_local_names + 32), 7

/* A one-shard potri frame (A n x n, the shard index, A back, the status),
 * with T_A = 2; the caller adds the other attributes. */
static void local_potri_frame(frame_builder *f, double *a, int64_t n,
                              int32_t *shard, int32_t *status) {
  fb_init(f, fake_api(), fresh_run_id());
  fb_arg(f, XLA_FFI_DataType_F64, a, 2, n, n);
  fb_arg(f, XLA_FFI_DataType_S32, shard, 0, 0, 0);
  fb_ret(f, XLA_FFI_DataType_F64, a, 2, n, n);
  fb_ret(f, XLA_FFI_DataType_S32, status, 0, 0, 0);
  fb_attr_i64(f, NAME_L_T_A, 2);
}

TEST(ffi_local_model_plan_needs_a_communicator_and_comm_id) {
  bound_rendezvous();
  atomic_store(&g_local_reached, 0);
  const int64_t n = 4;
  double a[16] = {0};
  int32_t shard = 0, status = -7;
  int64_t words[16] = {0};
  XLA_FFI_Array comm_id = {XLA_FFI_DataType_S64, 16, words};
  XLA_FFI_Array short_id = {XLA_FFI_DataType_S64, 8, words};
  struct {
    const char *label;
    const jmg_comm_ops *(*comm)(void);
    XLA_FFI_Array *id;
    int64_t grid_rows; /* 0: no attribute */
    const char *says[3];
  } cases[] = {
      {"no communicator", NULL, &comm_id, 0,
       {"local-test", "local model", "has no communicator"}},
      {"no comm_id", never_comm, NULL, 0,
       {"comm_id", "Python layer", "local-test"}},
      {"short comm_id", never_comm, &short_id, 0,
       {"comm_id", "8 words", "Python layer"}},
      {"grid rows not dividing the group", never_comm, &comm_id, 2,
       {"grid_rows=2", "does not divide", "1 devices"}},
  };
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; ++c) {
    const jmg_ffi_platform platform = local_platform(cases[c].comm);
    frame_builder f;
    local_potri_frame(&f, a, n, &shard, &status);
    if (cases[c].id != NULL)
      fb_attr(&f, NAME_L_COMM_ID, XLA_FFI_AttrType_ARRAY, cases[c].id);
    if (cases[c].grid_rows != 0)
      fb_attr_i64(&f, NAME_L_GRID_ROWS, cases[c].grid_rows);
    /* MPMD: a local-model call reaches neither the process rendezvous nor
     * share/ (the platform has none: the leader model would refuse). */
    fb_attr_i64(&f, NAME_L_JOB_ID, 77);
    fb_attr_i64(&f, NAME_L_MESH_ID, 5);
    const double t0 = now_s();
    xla_result r =
        take_error(jmg_ffi_handle(&f.frame, &platform, &jmg_potri_op));
    CHECK(now_s() - t0 < 2.0);
    if (!r.is_error) {
      TEST_FAIL_AT("%s: the call succeeded", cases[c].label);
      return;
    }
    for (int k = 0; k < 3; ++k) CHECK_CONTAINS(r.msg, cases[c].says[k]);
    CHECK(strstr(r.msg, "share") == NULL);
  }
  CHECK_EQ(atomic_load(&g_local_reached), 0);
  CHECK_EQ(status, -7);

  /* With both, the call goes to the local executor, which opens the
   * communicator (here refusing): no rendezvous, no engine reached. */
  const jmg_ffi_platform platform = local_platform(never_comm);
  frame_builder f;
  local_potri_frame(&f, a, n, &shard, &status);
  fb_attr(&f, NAME_L_COMM_ID, XLA_FFI_AttrType_ARRAY, &comm_id);
  fb_attr_i64(&f, NAME_L_JOB_ID, 78);
  fb_attr_i64(&f, NAME_L_MESH_ID, 5);
  const double t0 = now_s();
  xla_result r = take_error(jmg_ffi_handle(&f.frame, &platform, &jmg_potri_op));
  CHECK(now_s() - t0 < 2.0);
  CHECK(r.is_error);
  CHECK_CONTAINS(r.msg, "opened");
  CHECK_EQ(atomic_load(&g_local_reached), 1);
  CHECK_EQ(status, -7);
}

/* A communicator of the per-call-site kind (comm/comm.h): records the id
 * it is asked to open, then refuses. */
static unsigned char g_opened_id[JMG_COMM_ID_MAX];
static int recording_open(const void *id, int rank, int ranks,
                          void *device_ctx, jmg_comm **out, const char *op,
                          jmg_error *err) {
  (void)rank, (void)ranks, (void)device_ctx, (void)out;
  memcpy(g_opened_id, id, JMG_COMM_ID_MAX);
  return jmg_error_set(err, JMG_EINTERNAL, op, "test", "opened");
}
static const jmg_comm_ops g_site_comm = {.name = "per-site",
                                         .id_bytes = 64,
                                         .per_call_site = 1,
                                         .open = recording_open};
static const jmg_comm_ops *site_comm(void) { return &g_site_comm; }

/* Its calls open one communicator per call site: the id's first bytes as
 * the Python layer made them, its last 8 the call site's, different for two
 * sites of one device set and the same for two calls of one site. */
TEST(ffi_local_model_opens_one_communicator_per_call_site_where_asked) {
  bound_rendezvous();
  const int64_t n = 4;
  double a[16] = {0};
  int32_t shard = 0, status = -7;
  int64_t words[16];
  for (int i = 0; i < 16; ++i) words[i] = 1000 + i;
  XLA_FFI_Array comm_id = {XLA_FFI_DataType_S64, 16, words};
  unsigned char seen[3][JMG_COMM_ID_MAX];
  const int64_t sites[3] = {1, 2, 1};
  const jmg_ffi_platform platform = local_platform(site_comm);
  for (int c = 0; c < 3; ++c) {
    frame_builder f;
    local_potri_frame(&f, a, n, &shard, &status);
    fb_attr_i64(&f, NAME_L_CALL_ID, sites[c]);
    fb_attr(&f, NAME_L_COMM_ID, XLA_FFI_AttrType_ARRAY, &comm_id);
    fb_attr_i64(&f, NAME_L_MESH_ID, 5);
    memset(g_opened_id, 0, sizeof g_opened_id);
    xla_result r = take_error(jmg_ffi_handle(&f.frame, &platform, &jmg_potri_op));
    CHECK(r.is_error);
    CHECK_CONTAINS(r.msg, "opened");
    memcpy(seen[c], g_opened_id, JMG_COMM_ID_MAX);
    CHECK(memcmp(seen[c], words, JMG_COMM_ID_MAX - 8) == 0);
  }
  CHECK(memcmp(seen[0], seen[1], JMG_COMM_ID_MAX) != 0);
  CHECK(memcmp(seen[0], seen[2], JMG_COMM_ID_MAX) == 0);
  CHECK_EQ(status, -7);
}
