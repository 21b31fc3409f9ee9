/* The fake XLA runtime (fake_xla.h). */
#define _POSIX_C_SOURCE 200809L
#include "fake_xla.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test.h"
#include "test_clock.h"

/* ---- the runtime --------------------------------------------------------- */

/* XLA's error and execution context are opaque to handlers: here they are
 * ours. */
struct XLA_FFI_Error {
  XLA_FFI_Error_Code errc;
  char *message;
};

static atomic_int g_errors_live;     /* created and not yet destroyed */
static atomic_int g_bad_struct_size; /* an API call got a wrong struct_size */
static atomic_int g_run_id_calls;

int fake_xla_errors_live(void) { return atomic_load(&g_errors_live); }
int fake_xla_bad_struct_size(void) { return atomic_load(&g_bad_struct_size); }
int fake_xla_run_id_calls(void) { return atomic_load(&g_run_id_calls); }

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

XLA_FFI_Error *fake_xla_run_id_get(XLA_FFI_RunId_Get_Args *args) {
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
XLA_FFI_Error *call_handler(XLA_FFI_Handler *handler,
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

void fake_xla_api_init(XLA_FFI_Api *api) {
  memset(api, 0, sizeof *api);
  api->struct_size = XLA_FFI_Api_STRUCT_SIZE;
  api->api_version.struct_size = XLA_FFI_Api_Version_STRUCT_SIZE;
  api->api_version.major_version = XLA_FFI_API_MAJOR;
  api->api_version.minor_version = XLA_FFI_API_MINOR;
  api->XLA_FFI_Error_Create = fake_error_create;
  api->FAKE_MESSAGE_FN = fake_error_get_message;
  api->XLA_FFI_Error_Destroy = fake_error_destroy;
  api->XLA_FFI_RunId_Get = fake_xla_run_id_get;
  api->XLA_FFI_Future_Create = fake_future_create;
  api->XLA_FFI_Future_SetAvailable = fake_future_available;
  api->XLA_FFI_Future_SetError = fake_future_error;
}

static XLA_FFI_Api g_api;

const XLA_FFI_Api *fake_xla_api(void) {
  fake_xla_api_init(&g_api);
  return &g_api;
}

xla_result take_error(XLA_FFI_Error *e) {
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
int64_t fresh_run_id(void) {
  static atomic_llong next = 9000000;
  return (int64_t)atomic_fetch_add(&next, 1000);
}

/* Every test that calls a handler bounds the rendezvous: a mistake that made
 * a participant wait would cost 5 s, not 300. */
void bound_rendezvous(void) { setenv("JAXMG_RENDEZVOUS_TIMEOUT", "5", 1); }

/* ---- call frames --------------------------------------------------------- */

const char fake_xla_names[] = "T_Amesh_idwant_vectors#";

void fb_init(frame_builder *f, const XLA_FFI_Api *api, int64_t run_id) {
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

XLA_FFI_Buffer *fb_arg(frame_builder *f, XLA_FFI_DataType t, void *data,
                       int64_t rank, int64_t d0, int64_t d1) {
  int64_t i = f->frame.args.size++;
  f->arg_types[i] = XLA_FFI_ArgType_BUFFER;
  XLA_FFI_Buffer *b = fb_buffer(f, t, data, rank, d0, d1);
  f->args[i] = b;
  return b;
}

XLA_FFI_Buffer *fb_ret(frame_builder *f, XLA_FFI_DataType t, void *data,
                       int64_t rank, int64_t d0, int64_t d1) {
  int64_t i = f->frame.rets.size++;
  f->ret_types[i] = XLA_FFI_RetType_BUFFER;
  XLA_FFI_Buffer *b = fb_buffer(f, t, data, rank, d0, d1);
  f->rets[i] = b;
  return b;
}

/* Adds an attribute of any type; name points into storage that outlives f. */
void fb_attr(frame_builder *f, const char *name, size_t len,
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
XLA_FFI_Scalar *fb_attr_scalar(frame_builder *f, const char *name, size_t len,
                               XLA_FFI_DataType dtype, int64_t value) {
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

void fb_attr_i64(frame_builder *f, const char *name, size_t len,
                 int64_t value) {
  fb_attr_scalar(f, name, len, XLA_FFI_DataType_S64, value);
}

/* ---- calling handlers ---------------------------------------------------- */

void expect_rejected(const char *label, XLA_FFI_Handler *handler,
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

static void *ffi_call_main(void *arg) {
  ffi_call *c = arg;
  double t0 = now_s();
  XLA_FFI_Error *e = call_handler(c->handler, c->frame);
  c->elapsed_s = now_s() - t0;
  c->result = take_error(e);
  return NULL;
}

void run_calls(ffi_call *calls, int n) {
  pthread_t th[16];
  for (int i = 0; i < n; ++i)
    if (pthread_create(&th[i], NULL, ffi_call_main, &calls[i]) != 0) abort();
  for (int i = 0; i < n; ++i) pthread_join(th[i], NULL);
}
