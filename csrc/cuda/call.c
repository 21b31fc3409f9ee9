/* The CUDA engines' call frame (call.h). */
#include "cuda/call.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/trace.h"
#include "cuda/check.h"

size_t jmg_cuda_align(size_t bytes) {
  return (bytes + JMG_CUDA_ALIGN - 1) / JMG_CUDA_ALIGN * JMG_CUDA_ALIGN;
}

size_t jmg_cuda_work_part(jmg_cuda_work *w, size_t bytes) {
  const size_t at = jmg_cuda_align(w->bytes);
  w->bytes = at + bytes;
  return at;
}

size_t jmg_cuda_work_alloc_bytes(const jmg_cuda_work *w) {
  return jmg_cuda_align(w->bytes) + JMG_CUDA_MAX_INFO * sizeof(int);
}

/* err's op named, rc passed on: every failure of the frame ends so. */
static int named(const jmg_cuda_call *c, int rc, jmg_error *err) {
  if (rc != 0) jmg_error_name_op(err, c->op);
  return rc;
}

int jmg_cuda_call_begin(jmg_cuda_call *c, const char *op, const char *who,
                        int n, void *const *device_ctx, int flags,
                        jmg_error *err) {
  memset(c, 0, sizeof *c);
  c->op = op;
  c->who = who;
  c->group.n = n;
  c->group.device_ctx = device_ctx;
  c->mem = jmg_cuda_mem();
  c->saved_device = -1;
  c->begun = 1;
  if (n < 1 || device_ctx == NULL || device_ctx[0] == NULL)
    return jmg_error_set(err, JMG_EINTERNAL, op, who,
                         "a call on %d GPUs without a device", n);
  c->dev = device_ctx[0];
  c->stream = (cudaStream_t)c->dev->stream;
  int rc = JMG_CUDA_TRY(cudaGetDevice(&c->saved_device), op, err);
  if (rc != 0) c->saved_device = -1;
  if (rc == 0 && (flags & JMG_CUDA_CALL_HANDLES))
    rc = jmg_cuda_handles_acquire(device_ctx, n, who, &c->h, err);
  if (rc == 0) rc = jmg_cuda_call_device(c, err);
  return named(c, rc, err);
}

int jmg_cuda_call_device(jmg_cuda_call *c, jmg_error *err) {
  int now = -1;
  int rc = JMG_CUDA_TRY(cudaGetDevice(&now), c->op, err);
  if (rc == 0 && now != c->dev->device)
    rc = JMG_CUDA_TRY(cudaSetDevice(c->dev->device), c->op, err);
  return named(c, rc, err);
}

static int take(jmg_cuda_call *c, const jmg_cuda_work *w, jmg_error *err);

int jmg_cuda_call_take(jmg_cuda_call *c, const jmg_cuda_work *w,
                       jmg_error *err) {
  const int rc = take(c, w, err);
  jmg_trace_mark("workspace");
  return rc;
}

static int take(jmg_cuda_call *c, const jmg_cuda_work *w, jmg_error *err) {
  const size_t bytes = jmg_cuda_work_alloc_bytes(w);
  int rc = c->mem->alloc(&c->group, 0, bytes, &c->work, err);
  if (rc != 0) {
    c->work = NULL;
    named(c, rc, err);
    /* Which problem asked: the op is named, whose workspace and the
     * problem too. */
    const size_t len = strlen(err->msg);
    snprintf(err->msg + len, sizeof err->msg - len,
             " (%s's workspace for %s%s%s)", c->who, c->op,
             c->what[0] ? " of " : "", c->what);
    return rc;
  }
  c->alloc_bytes = bytes;
  c->work_bytes = w->bytes;
  c->d_info = (int *)((char *)c->work + jmg_cuda_align(w->bytes));
  if (w->host_bytes > 0) {
    c->host_work = malloc(w->host_bytes);
    if (c->host_work == NULL)
      return jmg_error_set(err, JMG_ENOMEM, c->op, "malloc",
                           "cannot allocate %zu bytes of %s's host workspace",
                           w->host_bytes, c->who);
    c->host_bytes = w->host_bytes;
  }
  /* From here on the routines issue work. */
  c->pending = 1;
  return 0;
}

void *jmg_cuda_call_part(const jmg_cuda_call *c, size_t at) {
  return c->work != NULL ? (char *)c->work + at : NULL;
}

int jmg_cuda_call_buffer(jmg_cuda_call *c, int dev, size_t bytes, void **out,
                         jmg_error *err) {
  *out = NULL;
  if (c->nbuffers == JMG_CUDA_CALL_MAX_BUFFERS)
    return jmg_error_set(err, JMG_EINTERNAL, c->op, c->who,
                         "more than %d buffers in one call",
                         JMG_CUDA_CALL_MAX_BUFFERS);
  if (bytes == 0) bytes = 1;
  int rc = 0;
  if (dev == JMG_HOST) {
    *out = malloc(bytes);
    if (*out == NULL)
      rc = jmg_error_set(err, JMG_ENOMEM, c->op, "malloc",
                         "cannot allocate %zu bytes of host memory", bytes);
  } else {
    rc = c->mem->alloc(&c->group, dev, bytes, out, err);
    if (rc != 0) *out = NULL;
  }
  if (rc != 0) return named(c, rc, err);
  c->buffers[c->nbuffers++] = (jmg_cuda_buffer){dev, *out, bytes};
  if (dev != JMG_HOST) c->pending = 1;
  return 0;
}

int jmg_cuda_call_sync(jmg_cuda_call *c, jmg_error *err) {
  int rc = JMG_CUDA_TRY(cudaStreamSynchronize(c->stream), c->op, err);
  if (rc == 0) c->pending = 0;
  return named(c, rc, err);
}

int jmg_cuda_call_read_info(jmg_cuda_call *c, int *h_info, int count,
                            jmg_error *err) {
  int rc = JMG_CUDA_TRY(
      cudaMemcpyAsync(h_info, c->d_info, (size_t)count * sizeof(int),
                      cudaMemcpyDeviceToHost, c->stream),
      c->op, err);
  if (rc == 0) rc = jmg_cuda_call_sync(c, err);
  return named(c, rc, err);
}

int jmg_cuda_call_info(jmg_cuda_call *c, int rc, int *h_info, int count,
                       const char *const *names, jmg_error *err) {
  if (rc == 0) rc = jmg_cuda_call_read_info(c, h_info, count, err);
  for (int i = 0; i < count; ++i) {
    const int mine = rc == 0 ? h_info[i] : 0;
    if (c->agree != NULL) {
      /* Every rank takes part, whatever failed here. */
      int v = rc != 0 || mine < 0 ? INT_MAX : mine;
      rc = c->agree(c, rc, &v, err);
      if (rc == 0 && v == INT_MAX && mine >= 0)
        rc = jmg_error_set(err, JMG_ECUSOLVER, c->op, names[i],
                           "failed on another rank, or info < 0 (an invalid "
                           "argument) there; this rank's info %d",
                           mine);
      if (rc == 0 && v != INT_MAX) h_info[i] = v;
    }
    if (rc == 0) rc = jmg_cuda_call_check_info(c, mine, names[i], err);
  }
  return named(c, rc, err);
}

int jmg_cuda_call_check_info(const jmg_cuda_call *c, int info, const char *name,
                             jmg_error *err) {
  if (info >= 0) return 0;
  return jmg_error_set(err, JMG_ECUSOLVER, c->op, name,
                       "argument %d was rejected", -info);
}

int jmg_cuda_call_end(jmg_cuda_call *c, int rc, jmg_error *err) {
  if (!c->begun) return named(c, rc, err);
  /* After a failure work may still run on the call's memory. */
  if (c->pending) {
    jmg_error mine;
    jmg_error_clear(&mine);
    const int s =
        c->group.n > 1
            ? c->mem->sync(&c->group, &mine)
            : JMG_CUDA_TRY(cudaStreamSynchronize(c->stream), c->op, &mine);
    if (rc == 0 && s != 0) {
      jmg_error_copy(err, &mine);
      rc = s;
    }
    c->pending = 0;
  }
  for (int i = c->nbuffers - 1; i >= 0; --i) {
    const jmg_cuda_buffer *b = &c->buffers[i];
    if (b->dev == JMG_HOST)
      free(b->ptr);
    else
      c->mem->release(&c->group, b->dev, b->ptr, b->bytes);
  }
  c->nbuffers = 0;
  if (c->work != NULL) c->mem->release(&c->group, 0, c->work, c->alloc_bytes);
  c->work = NULL;
  free(c->host_work);
  c->host_work = NULL;
  if (c->h != NULL) jmg_cuda_handles_release(c->h);
  c->h = NULL;
  if (c->saved_device >= 0) {
    int now = -1;
    if (cudaGetDevice(&now) == cudaSuccess && now != c->saved_device)
      (void)cudaSetDevice(c->saved_device);
  }
  c->begun = 0;
  return named(c, rc, err);
}
