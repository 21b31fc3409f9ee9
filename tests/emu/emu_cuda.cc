// An emulation, on the CPU, of the CUDA runtime and cuBLAS calls that the
// multi-GPU eigensolver makes (csrc/engine/eig_mgpu/sytrd.c, ormtr.c,
// kernels.c), and of its kernels (kernels.cu compiled as C++ here), so that
// its host logic and its kernels' index arithmetic run without a GPU
// (tests/emu/run.sh); and the runtime under jaxmg's tiled Cholesky and
// inverse (tests/emu/tiles_main.c, with emu_tiles.cc). Every "device"
// pointer is host memory. By default every call runs at once, in the order
// the host issues it (a valid order for work that streams and events
// order, since an event is always recorded before it is waited for);
// deferred (emu_streams.h: tiles_main.c's cases, main.c's EMU_ASYNC) work
// is queued on its stream and run in a random order that keeps each
// stream's order and the event waits (below: streams and events), which
// shows a missing wait between streams or GPUs. Each kernel block runs its
// threads as coroutines on one thread (POSIX threads with EMU_PTHREADS, the
// sanitizers' build), __syncthreads a barrier and shuffles a barrier per
// warp, blocks one after another, so __shared__ (made static) is the
// block's. What this cannot show: races between the blocks of one kernel,
// finer interleavings than whole kernels and copies, speed.
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <pthread.h>
#include <ucontext.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "emu_streams.h"

// ---- the kernels ------------------------------------------------------------
#undef __global__
#undef __device__
#undef __forceinline__
#undef __shared__
#undef __launch_bounds__
#define __global__
#define __device__
#define __forceinline__ inline
#define __shared__ static
#define __launch_bounds__(...)

static thread_local uint3 threadIdx, blockIdx;
static thread_local dim3 blockDim, gridDim;
static double g_xchg[1024];
static std::mutex g_atomic;

static unsigned lin() { return threadIdx.x + threadIdx.y * blockDim.x; }
#ifdef EMU_PTHREADS
static pthread_barrier_t g_bar;
static pthread_barrier_t g_warp_bar[32]; // one a warp: shuffles are per warp
static void block_barrier() { pthread_barrier_wait(&g_bar); }
static void warp_barrier(unsigned w) { pthread_barrier_wait(&g_warp_bar[w]); }
#else
static void block_barrier();
static void warp_barrier(unsigned w);
#endif
static void __syncthreads() { block_barrier(); }
static double __shfl_down_sync(unsigned, double v, int off) {
  const unsigned t = lin();
  g_xchg[t] = v;
  warp_barrier(t / 32);
  const double r = (t % 32) + (unsigned)off < 32 ? g_xchg[t + off] : v;
  warp_barrier(t / 32);
  return r;
}
static double atomicAdd(double *p, double v) {
  std::lock_guard<std::mutex> l(g_atomic);
  const double old = *p;
  *p = old + v;
  return old;
}
static unsigned atomicAdd(unsigned *p, unsigned v) {
  std::lock_guard<std::mutex> l(g_atomic);
  const unsigned old = *p;
  *p = old + v;
  return old;
}
// Blocks run one after another: every write is visible to later ones.
static void __threadfence() {}
static double __ldcg(const double *p) { return *p; }
using std::fabs;
using std::sqrt;

#include "engine/eig_mgpu/kernels.cu"

// ---- launching ------------------------------------------------------------
// A launch's arguments are read when it is issued (as cudaLaunchKernel does):
// each kernel's parameters, by its signature, into a closure run later.
typedef std::function<void()> closure;
template <typename... T, size_t... I>
static closure bind_impl(void (*fn)(T...), void **a, std::index_sequence<I...>) {
  std::tuple<std::decay_t<T>...> v{*(std::decay_t<T> *)a[I]...};
  return [fn, v] { std::apply(fn, v); };
}
template <typename... T> static closure bind(void (*fn)(T...), void **a) {
  return bind_impl(fn, a, std::index_sequence_for<T...>{});
}
struct kernel_entry {
  const char *name;
  closure (*capture)(void **a);
  bool sync; /* has __syncthreads or shuffles: its threads run at once */
};
#define K(f, sync) {#f, [](void **a) { return bind(f, a); }, sync}
static kernel_entry g_kernels[] = {
    K(jmg_trd_symv, true),       K(jmg_trd_update_col, true),  K(jmg_trd_house, false),
    K(jmg_trd_finish_w, true),   K(jmg_trd_fix_w, false),      K(jmg_trd_gather_rows, false),
    K(jmg_trd_make_v, false),    K(jmg_trd_larft, true),       K(jmg_trd_col_start, true),
    K(jmg_trd_col_finish, true),
};
#undef K

struct thread_arg {
  const closure *run;
  uint3 t, b;
  dim3 bd, gd;
};
static void set_thread(const thread_arg *x) {
  threadIdx = x->t;
  blockIdx = x->b;
  blockDim = x->bd;
  gridDim = x->gd;
}
static void *thread_main(void *p) {
  thread_arg *x = (thread_arg *)p;
  set_thread(x);
  (*x->run)();
  return nullptr;
}

#ifdef EMU_PTHREADS
// A block's threads as POSIX threads (the sanitizers' build: they follow
// threads, not switched stacks).
static void run_block(unsigned nt, thread_arg *xs) {
  std::vector<pthread_t> th(nt);
  pthread_barrier_init(&g_bar, nullptr, nt);
  for (unsigned w = 0; w < nt / 32; ++w) pthread_barrier_init(&g_warp_bar[w], nullptr, 32);
  for (unsigned i = 0; i < nt; ++i) pthread_create(&th[i], nullptr, thread_main, &xs[i]);
  for (unsigned i = 0; i < nt; ++i) pthread_join(th[i], nullptr);
  pthread_barrier_destroy(&g_bar);
  for (unsigned w = 0; w < nt / 32; ++w) pthread_barrier_destroy(&g_warp_bar[w]);
}
#else
// A block's threads as coroutines on this thread (ucontext), switched at
// the barriers: a thread waiting at __syncthreads runs on when every thread
// of the block has reached one, a thread waiting at a shuffle's barrier when
// its warp has. Much faster than a POSIX thread per CUDA thread (the
// kernel's threads then wait on futexes, most of the run's time).
enum { RUNNABLE, AT_BLOCK, AT_WARP, DONE };
struct coro {
  ucontext_t ctx;
  int state;
  thread_arg *arg;
};
static ucontext_t g_sched;
static std::vector<coro> g_co;
static std::vector<char> g_stacks;
static const size_t STACK = 256 << 10;
static unsigned g_nt, g_at_block, g_at_warp[32], g_cur;

static void coro_entry() {
  coro &c = g_co[g_cur];
  (*c.arg->run)();
  c.state = DONE;
} // returns to uc_link: the scheduler
static void block_barrier() {
  g_co[g_cur].state = AT_BLOCK;
  if (++g_at_block == g_nt) {
    g_at_block = 0;
    for (unsigned i = 0; i < g_nt; ++i)
      if (g_co[i].state == AT_BLOCK) g_co[i].state = RUNNABLE;
  }
  swapcontext(&g_co[g_cur].ctx, &g_sched);
}
static void warp_barrier(unsigned w) {
  g_co[g_cur].state = AT_WARP;
  if (++g_at_warp[w] == 32) {
    g_at_warp[w] = 0;
    for (unsigned i = w * 32; i < w * 32 + 32; ++i)
      if (g_co[i].state == AT_WARP) g_co[i].state = RUNNABLE;
  }
  swapcontext(&g_co[g_cur].ctx, &g_sched);
}
static void run_block(unsigned nt, thread_arg *xs) {
  if (g_co.size() < nt) {
    g_co.resize(nt);
    g_stacks.resize((size_t)nt * STACK);
  }
  g_nt = nt;
  g_at_block = 0;
  for (unsigned w = 0; w < 32; ++w) g_at_warp[w] = 0;
  for (unsigned i = 0; i < nt; ++i) {
    coro &c = g_co[i];
    c.state = RUNNABLE;
    c.arg = &xs[i];
    getcontext(&c.ctx);
    c.ctx.uc_stack.ss_sp = &g_stacks[(size_t)i * STACK];
    c.ctx.uc_stack.ss_size = STACK;
    c.ctx.uc_link = &g_sched;
    makecontext(&c.ctx, coro_entry, 0);
  }
  for (unsigned done = 0; done < nt;) {
    bool ran = false;
    done = 0;
    for (unsigned i = 0; i < nt; ++i) {
      if (g_co[i].state == DONE) {
        ++done;
        continue;
      }
      if (g_co[i].state != RUNNABLE) continue;
      g_cur = i;
      set_thread(&xs[i]);
      swapcontext(&g_sched, &g_co[i].ctx);
      ran = true;
    }
    if (!ran && done < nt) {
      std::fprintf(stderr, "emu: a block's threads wait at different barriers\n");
      std::abort();
    }
  }
}
#endif

// ---- streams and events (emu_streams.h) ------------------------------------
// One mechanism for both tests. By default every call runs when it is
// issued (a valid order: an event is always recorded before it is waited
// for). Deferred (emu_streams_defer(seed): tiles_main.c, a case at a time;
// emu_set_async(seed): main.c's EMU_ASYNC) work issued on a stream is queued
// there instead, and runs when the host waits for it (cudaStreamSynchronize,
// cudaStreamDestroy, a copy to the host): one item at a time, the head of
// the stream of the highest priority among those whose head may run (a wait
// runs once the record it names has run). Each stream draws a random
// priority (the seed's) and, now and then after it ran an item, draws again:
// so a stream, a GPU, may run far ahead of the others or starve behind them,
// as far as stream order and events allow and no further. A missing event
// between streams then shows as a wrong or non-finite result under some
// seed. Each item (a kernel, a copy, a gemm) runs whole: finer interleavings
// are not tried. Work left queued that can never run aborts.
static unsigned long g_seed = 0;              // 0: every call at once
static unsigned long long g_rng = 1;          // xorshift64, the seed's
static unsigned long g_choices = 0, g_clock = 0; // clock: items run deferred
static unsigned long long next_rand() {
  g_rng ^= g_rng << 13;
  g_rng ^= g_rng >> 7;
  g_rng ^= g_rng << 17;
  return g_rng;
}
static unsigned rnd_below(unsigned n) { return (unsigned)(next_rand() % n); }

struct emu_event {
  int device;
  unsigned recorded = 0;            // records issued
  std::vector<bool> done;           // done[g]: record g (1-based) has run
  std::vector<unsigned long> at;    // at[g]: the clock when it ran
  unsigned queued = 0;              // records and waits of it still queued
  bool destroyed = false;           // cudaEventDestroy'd: freed when none is
};
struct item {
  closure run;                      // work, or a record (ev, gen)
  emu_event *ev = nullptr;
  unsigned gen = 0;
  bool wait = false;                // a wait for record gen of ev
};
struct emu_stream {
  int device; // -1: a stream not made by cudaStreamCreateWithFlags (any GPU's)
  std::deque<item> q;
  unsigned long long prio = 0;
  bool has_prio = false;
};
static std::map<cudaStream_t, emu_stream> g_streams;
static int g_device = 0;

static emu_stream &stream_of(cudaStream_t s) {
  auto it = g_streams.find(s);
  if (it == g_streams.end()) it = g_streams.emplace(s, emu_stream{-1, {}}).first;
  return it->second;
}
static bool runnable(const item &x) {
  return !x.wait || x.gen == 0 || (x.gen <= x.ev->done.size() && x.ev->done[x.gen - 1]);
}
static void run_item(item &x) {
  emu_event *ev = x.ev;
  if (ev == nullptr) {
    x.run();
    return;
  }
  if (!x.wait) {
    if (ev->done.size() < x.gen) {
      ev->done.resize(x.gen, false);
      ev->at.resize(x.gen, 0);
    }
    ev->done[x.gen - 1] = true;
    ev->at[x.gen - 1] = g_clock;
  }
  if (--ev->queued == 0 && ev->destroyed) delete ev;
}
// Runs queued items until stream s's queue is empty (every stream's with
// all).
static void drain(const emu_stream *s, bool all = false) {
  for (;;) {
    if (!all && s->q.empty()) return;
    emu_stream *pick = nullptr;
    unsigned ready = 0;
    bool any = false;
    for (auto &kv : g_streams) {
      emu_stream &t = kv.second;
      if (t.q.empty()) continue;
      any = true;
      if (!runnable(t.q.front())) continue;
      if (!t.has_prio) {
        t.prio = next_rand();
        t.has_prio = true;
      }
      if (ready++ == 0 || t.prio > pick->prio) pick = &t;
    }
    if (!any) return;
    if (ready == 0) {
      std::fprintf(stderr, "emu: streams wait for events whose records can never run\n");
      std::abort();
    }
    if (ready > 1) ++g_choices;
    // Now and then the stream that runs draws a new priority.
    if (next_rand() % 8 == 0) pick->prio = next_rand();
    item x = std::move(pick->q.front());
    pick->q.pop_front();
    ++g_clock;
    run_item(x);
  }
}
static void issue(cudaStream_t s, item x) {
  emu_stream &t = stream_of(s);
  if (x.ev != nullptr) ++x.ev->queued;
  if (g_seed == 0) {
    if (!runnable(x)) {
      std::fprintf(stderr, "emu: a wait for an event not yet run\n");
      std::abort();
    }
    run_item(x);
    return;
  }
  t.q.push_back(std::move(x));
}
static void work(cudaStream_t s, closure f) {
  item x;
  x.run = std::move(f);
  issue(s, std::move(x));
}

void emu_submit(cudaStream_t s, std::function<void()> f) { work(s, std::move(f)); }

// A cuBLAS or cuSOLVER handle's stream (cublasSetStream, cusolverDnSetStream).
static std::map<const void *, cudaStream_t> g_bound;
void emu_bind(const void *handle, cudaStream_t s) { g_bound[handle] = s; }
cudaStream_t emu_stream_of(const void *handle) {
  auto it = g_bound.find(handle);
  if (it == g_bound.end()) {
    std::fprintf(stderr, "emu: a handle used before a stream was set on it\n");
    std::abort();
  }
  return it->second;
}

long emu_launches = 0;

extern "C" {

void emu_streams_defer(unsigned seed) {
  for (auto &kv : g_streams)
    if (!kv.second.q.empty()) {
      std::fprintf(stderr, "emu: emu_streams_defer with work queued\n");
      std::abort();
    }
  g_seed = seed;
  for (auto &kv : g_streams) kv.second.has_prio = false;
  g_rng = 0x9E3779B97F4A7C15ULL ^ seed;
}
unsigned long emu_streams_choices(void) { return g_choices; }
// main.c's EMU_ASYNC=seed: the same, for the whole run.
void emu_set_async(unsigned long seed) { emu_streams_defer((unsigned)seed); }

cudaError_t cudaLaunchKernel(const void *func, dim3 grid, dim3 block, void **args, size_t,
                             cudaStream_t stream) {
  const kernel_entry *k = (const kernel_entry *)func;
  const unsigned nt = block.x * block.y * block.z;
  if (nt == 0 || nt > 1024 || nt % 32 != 0 || block.z != 1)
    return cudaErrorInvalidConfiguration;
  // A stream of another GPU than the current one is refused.
  if (stream_of(stream).device >= 0 && stream_of(stream).device != g_device)
    return cudaErrorInvalidResourceHandle;
  ++emu_launches;
  closure f = k->capture(args);
  const bool sync = k->sync;
  work(stream, [f, grid, block, nt, sync] {
    // The blocks one after another: in index order, or (EMU_ASYNC) in a
    // random one, as a GPU may schedule them.
    std::vector<dim3> order;
    for (unsigned by = 0; by < grid.y; ++by)
      for (unsigned bx = 0; bx < grid.x; ++bx) order.push_back(dim3(bx, by, 0));
    if (g_seed != 0)
      for (size_t i = order.size(); i > 1; --i) std::swap(order[i - 1], order[rnd_below((unsigned)i)]);
    std::vector<thread_arg> xs(nt);
    for (const dim3 &b : order) {
      for (unsigned i = 0; i < nt; ++i)
        xs[i] = {&f, {i % block.x, i / block.x, 0}, {b.x, b.y, 0}, block, grid};
      if (!sync) { /* no barrier: its threads one after another */
        for (unsigned i = 0; i < nt; ++i) thread_main(&xs[i]);
        continue;
      }
      run_block(nt, xs.data());
    }
  });
  return cudaSuccess;
}

cudaError_t cudaLibraryLoadData(cudaLibrary_t *lib, const void *, cudaJitOption *, void **,
                                unsigned int, cudaLibraryOption *, void **, unsigned int) {
  *lib = (cudaLibrary_t)g_kernels;
  return cudaSuccess;
}
cudaError_t cudaLibraryGetKernel(cudaKernel_t *k, cudaLibrary_t, const char *name) {
  for (auto &e : g_kernels)
    if (std::strcmp(e.name, name) == 0) {
      *k = (cudaKernel_t)&e;
      return cudaSuccess;
    }
  return cudaErrorSymbolNotFound;
}

cudaError_t cudaSetDevice(int d) {
  g_device = d;
  return cudaSuccess;
}
cudaError_t cudaGetDevice(int *d) {
  *d = g_device;
  return cudaSuccess;
}
// To the host (pageable memory): returns when the copy is done, so after
// the stream's earlier work. From the host: the source is read at once
// (staged), the copy to the device queued. Between devices: queued.
cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t n, cudaMemcpyKind kind,
                            cudaStream_t s) {
  if (kind == cudaMemcpyHostToDevice) {
    auto staged = std::make_shared<std::vector<char>>((const char *)src, (const char *)src + n);
    work(s, [dst, staged, n] { std::memcpy(dst, staged->data(), n); });
    return cudaSuccess;
  }
  work(s, [dst, src, n] { std::memmove(dst, src, n); });
  if (kind == cudaMemcpyDeviceToHost) drain(&stream_of(s));
  return cudaSuccess;
}
cudaError_t cudaMemcpyPeerAsync(void *dst, int, const void *src, int, size_t n,
                                cudaStream_t s) {
  work(s, [dst, src, n] { std::memmove(dst, src, n); });
  return cudaSuccess;
}
cudaError_t cudaMemsetAsync(void *p, int v, size_t n, cudaStream_t s) {
  work(s, [p, v, n] { std::memset(p, v, n); });
  return cudaSuccess;
}
cudaError_t cudaEventCreateWithFlags(cudaEvent_t *e, unsigned int) {
  emu_event *x = new emu_event;
  x->device = g_device;
  *e = (cudaEvent_t)x;
  return cudaSuccess;
}
cudaError_t cudaEventCreate(cudaEvent_t *e) { return cudaEventCreateWithFlags(e, 0); }
// Freed when no queued record or wait names it (CUDA defers the release).
cudaError_t cudaEventDestroy(cudaEvent_t e) {
  emu_event *x = (emu_event *)e;
  if (x->queued == 0)
    delete x;
  else
    x->destroyed = true;
  return cudaSuccess;
}
cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s) {
  emu_event *x = (emu_event *)e;
  const int sd = stream_of(s).device;
  if (x->device != g_device || (sd >= 0 && sd != g_device)) return cudaErrorInvalidResourceHandle;
  item it;
  it.ev = x;
  it.gen = ++x->recorded;
  issue(s, std::move(it));
  return cudaSuccess;
}
// Both events' latest records must have run (CUDA's cudaErrorNotReady
// otherwise); the "milliseconds" are the deferred items run between them
// (0 when every call runs at once).
cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t a, cudaEvent_t b) {
  const emu_event *x = (const emu_event *)a, *y = (const emu_event *)b;
  auto ran = [](const emu_event *e) {
    return e->recorded > 0 && e->done.size() >= e->recorded && e->done[e->recorded - 1];
  };
  if (!ran(x) || !ran(y)) return cudaErrorNotReady;
  *ms = (float)y->at[y->recorded - 1] - (float)x->at[x->recorded - 1];
  return cudaSuccess;
}
// Waits for the event's latest record as of this call (none: no wait).
cudaError_t cudaStreamWaitEvent(cudaStream_t s, cudaEvent_t e, unsigned int) {
  emu_event *x = (emu_event *)e;
  item it;
  it.ev = x;
  it.gen = x->recorded;
  it.wait = true;
  issue(s, std::move(it));
  return cudaSuccess;
}
cudaError_t cudaStreamSynchronize(cudaStream_t s) {
  drain(&stream_of(s));
  return cudaSuccess;
}
cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, unsigned int) {
  *s = (cudaStream_t)std::malloc(1);
  g_streams.emplace(*s, emu_stream{g_device, {}});
  return cudaSuccess;
}
cudaError_t cudaStreamDestroy(cudaStream_t s) {
  drain(&stream_of(s)); // its work completes (CUDA lets it finish)
  g_streams.erase(s);
  std::free((void *)s);
  return cudaSuccess;
}
cudaError_t cudaGetLastError(void) { return cudaSuccess; }
const char *cudaGetErrorString(cudaError_t) { return "emulated error"; }
const char *cudaGetErrorName(cudaError_t) { return "cudaErrorEmulated"; }

// cuBLAS: each handle's stream (cublasSetStream); alpha and beta read when
// the call is issued (pointer mode host), the product queued there.
cublasStatus_t cublasSetStream_v2(cublasHandle_t h, cudaStream_t s) {
  emu_bind(h, s);
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasSetPointerMode_v2(cublasHandle_t, cublasPointerMode_t m) {
  return m == CUBLAS_POINTER_MODE_HOST ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_NOT_SUPPORTED;
}
const char *cublasGetStatusString(cublasStatus_t) { return "emulated cuBLAS status"; }

static double at(const double *a, int64_t lda, cublasOperation_t op, int64_t i, int64_t j) {
  return op == CUBLAS_OP_N ? a[i + j * lda] : a[j + i * lda];
}
cublasStatus_t cublasDgemv_v2_64(cublasHandle_t h, cublasOperation_t op, int64_t m, int64_t n,
                                 const double *alpha_p, const double *a, int64_t lda,
                                 const double *x, int64_t incx, const double *beta_p, double *y,
                                 int64_t incy) {
  const double alpha = *alpha_p, beta = *beta_p;
  work(emu_stream_of(h), [=] {
    const int64_t ylen = op == CUBLAS_OP_N ? m : n, xlen = op == CUBLAS_OP_N ? n : m;
    std::vector<double> out((size_t)ylen);
    for (int64_t i = 0; i < ylen; ++i) {
      double s = 0.0;
      for (int64_t k = 0; k < xlen; ++k)
        s += (op == CUBLAS_OP_N ? a[i + k * lda] : a[k + i * lda]) * x[k * incx];
      out[(size_t)i] = alpha * s + (beta == 0.0 ? 0.0 : beta * y[i * incy]);
    }
    for (int64_t i = 0; i < ylen; ++i) y[i * incy] = out[(size_t)i];
  });
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasDgemm_v2_64(cublasHandle_t h, cublasOperation_t oa, cublasOperation_t ob,
                                 int64_t m, int64_t n, int64_t k, const double *alpha_p,
                                 const double *a, int64_t lda, const double *b, int64_t ldb,
                                 const double *beta_p, double *c, int64_t ldc) {
  const double alpha = *alpha_p, beta = *beta_p;
  work(emu_stream_of(h), [=] {
    std::vector<double> out((size_t)(m * n));
    for (int64_t j = 0; j < n; ++j)
      for (int64_t i = 0; i < m; ++i) {
        double s = 0.0;
        for (int64_t l = 0; l < k; ++l) s += at(a, lda, oa, i, l) * at(b, ldb, ob, l, j);
        out[(size_t)(i + j * m)] = alpha * s + (beta == 0.0 ? 0.0 : beta * c[i + j * ldc]);
      }
    for (int64_t j = 0; j < n; ++j)
      for (int64_t i = 0; i < m; ++i) c[i + j * ldc] = out[(size_t)(i + j * m)];
  });
  return CUBLAS_STATUS_SUCCESS;
}
}
