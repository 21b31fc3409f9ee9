/* A fake XLA runtime for the C tests of the FFI layer and the CPU handlers
 * (ffi/, ffi/cpu_targets.c): an XLA_FFI_Api whose error creation, messages,
 * destruction, run id and futures are ours (every other field NULL), call
 * frames built by hand, and a handler called as XLA calls it, alone or with
 * several participants on threads. */
#ifndef JMG_TESTS_FAKE_XLA_H
#define JMG_TESTS_FAKE_XLA_H

#include <stddef.h>
#include <stdint.h>

#include "ffi/handler.h"

/* The handlers libjaxmg_cpu.so exports (csrc/ffi/cpu_targets.c). */
XLA_FFI_Error *jaxmg_potrs_cpu(XLA_FFI_CallFrame *frame);
XLA_FFI_Error *jaxmg_potri_cpu(XLA_FFI_CallFrame *frame);
XLA_FFI_Error *jaxmg_syevd_cpu(XLA_FFI_CallFrame *frame);
XLA_FFI_Error *jaxmg_lu_solve_cpu(XLA_FFI_CallFrame *frame);
int jaxmg_cpu_register_lapack(const char *name, void *fn);

/* ---- the runtime --------------------------------------------------------- */

/* Our stand-in for XLA's opaque execution context (its tag differs between
 * header versions, so it is reached through void pointers). */
struct fake_context {
  int64_t run_id;
  int run_id_fails; /* XLA_FFI_RunId_Get returns an error */
};

/* What the runtime has seen since the process started: errors created and
 * not yet destroyed, whether an API call got a wrong struct_size, and how
 * often the run id was asked for. Tests compare before and after. */
int fake_xla_errors_live(void);
int fake_xla_bad_struct_size(void);
int fake_xla_run_id_calls(void);

/* Fills api with the fake runtime; fake_xla_api() is one kept for every
 * frame. fake_xla_run_id_get is the API's XLA_FFI_RunId_Get, for a test
 * that takes it away and puts it back. */
void fake_xla_api_init(XLA_FFI_Api *api);
const XLA_FFI_Api *fake_xla_api(void);
XLA_FFI_Error *fake_xla_run_id_get(XLA_FFI_RunId_Get_Args *args);

/* Calls a handler as XLA does: a NULL return with a future set means the
 * outcome is the future's, waited for. Returns the error, or NULL. */
XLA_FFI_Error *call_handler(XLA_FFI_Handler *handler, XLA_FFI_CallFrame *frame);

/* What a handler returned: copied out, and the error destroyed. */
typedef struct xla_result {
  int is_error;
  XLA_FFI_Error_Code errc;
  char msg[1024];
} xla_result;

xla_result take_error(XLA_FFI_Error *e);

/* Run ids no other test uses, so that calls of different tests never meet. */
int64_t fresh_run_id(void);

/* Every test that calls a handler bounds the rendezvous: a mistake that made
 * a participant wait would cost 5 s, not 300. */
void bound_rendezvous(void);

/* ---- call frames --------------------------------------------------------- */

/* Attribute names the way XLA passes them: byte spans into storage with no
 * NUL after each name, so code that used strcmp/strlen on them would fail. */
extern const char fake_xla_names[]; /* "T_Amesh_idwant_vectors#" */
#define NAME_T_A fake_xla_names, 3
#define NAME_MESH_ID (fake_xla_names + 3), 7
#define NAME_WANT_VECTORS (fake_xla_names + 10), 12

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

void fb_init(frame_builder *f, const XLA_FFI_Api *api, int64_t run_id);

/* Adds argument / result i as a buffer; returns the buffer to mutate. */
XLA_FFI_Buffer *fb_arg(frame_builder *f, XLA_FFI_DataType t, void *data,
                       int64_t rank, int64_t d0, int64_t d1);
XLA_FFI_Buffer *fb_ret(frame_builder *f, XLA_FFI_DataType t, void *data,
                       int64_t rank, int64_t d0, int64_t d1);

/* Adds an attribute of any type; name points into storage that outlives f. */
void fb_attr(frame_builder *f, const char *name, size_t len,
             XLA_FFI_AttrType type, void *attr);

/* A scalar attribute; the value is stored in f (as int64, int32 or uint8
 * according to dtype, at the start of an aligned int64). */
XLA_FFI_Scalar *fb_attr_scalar(frame_builder *f, const char *name, size_t len,
                               XLA_FFI_DataType dtype, int64_t value);
void fb_attr_i64(frame_builder *f, const char *name, size_t len, int64_t value);

/* ---- calling handlers ---------------------------------------------------- */

/* Calls handler on f and checks that it fails promptly with code and a
 * message containing says. Asserts: check jmg_test_failed after calling. */
void expect_rejected(const char *label, XLA_FFI_Handler *handler,
                     frame_builder *f, XLA_FFI_Error_Code code,
                     const char *says);

/* expect_rejected, then a return from the calling test where it failed:
 * for a test that checks one frame after another. */
#define EXPECT_REJECTED(label, handler, f, code, says) \
  do {                                                 \
    expect_rejected(label, handler, f, code, says);    \
    if (jmg_test_failed) return;                       \
  } while (0)

/* One participant's call, made on a thread of its own by run_calls. */
typedef struct ffi_call {
  XLA_FFI_Handler *handler;
  XLA_FFI_CallFrame *frame;
  xla_result result;
  double elapsed_s;
} ffi_call;

/* Makes the n calls (n <= 16) at once, each on its thread; returns when
 * every one has. */
void run_calls(ffi_call *calls, int n);

#endif
