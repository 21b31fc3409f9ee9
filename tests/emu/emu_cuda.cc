// An emulation, on the CPU, of the CUDA runtime and cuBLAS calls that the
// multi-GPU eigensolver makes (csrc/engine/eig_mgpu/sytrd.c, ormtr.c,
// kernels.c), and of its kernels (kernels.cu compiled as C++ here), so that
// its host logic and its kernels' index arithmetic run without a GPU
// (tests/emu/run.sh). Every "device" pointer is host memory; every call
// runs at once, in the order the host issues it: a valid order for work
// that streams and events order, since an event is always recorded before
// it is waited for (or, for the tiled Cholesky's and inverse's test,
// deferred and run in a random order that streams and events allow:
// emu_streams.h). Each kernel block runs its threads as POSIX threads
// (__syncthreads a barrier, shuffles a barrier per warp), blocks one
// after another, so __shared__ (made static) is the block's. What this
// cannot show: races between GPUs, speed.
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <pthread.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "emu_streams.h"

// ---- streams and events (emu_streams.h) ------------------------------------
namespace {
// An event's record: whether it ran, and when (the count of deferred
// operations run before it: a logical clock, for cudaEventElapsedTime).
struct record {
  bool done = false;
  unsigned long at = 0;
};
struct queued {
  std::function<void()> run;
  std::shared_ptr<record> after; // a wait: runs once its record ran
};
struct emu_event {
  std::shared_ptr<record> last; // the latest record
};
bool g_defer = false;
unsigned long long g_rng = 0;
unsigned long g_choices = 0, g_clock = 0;
std::map<cudaStream_t, std::deque<queued>> g_queues;
std::map<cudaStream_t, unsigned long long> g_priority;
std::map<const void *, cudaStream_t> g_bound;

unsigned long long next_rand() { // xorshift64
  g_rng ^= g_rng << 13;
  g_rng ^= g_rng >> 7;
  g_rng ^= g_rng << 17;
  return g_rng;
}

bool can_run(const queued &q) { return !q.after || q.after->done; }

// Runs queued operations until stream s has none left (every stream's,
// with all).
void drain(cudaStream_t s, bool all) {
  for (;;) {
    bool done = true;
    int ready = 0;
    cudaStream_t pick = nullptr;
    for (auto &e : g_queues) {
      if (e.second.empty()) continue;
      if (all || e.first == s) done = false;
      if (!can_run(e.second.front())) continue;
      auto p = g_priority.find(e.first);
      if (p == g_priority.end()) p = g_priority.emplace(e.first, next_rand()).first;
      if (ready++ == 0 || p->second > g_priority[pick]) pick = e.first;
    }
    if (done) return;
    if (ready == 0) {
      std::fprintf(stderr, "emu: streams wait for events whose records can never run\n");
      std::abort();
    }
    if (ready > 1) ++g_choices;
    // The stream of the highest priority runs; now and then it draws a new
    // one, so that a stream runs far ahead of or behind the others.
    if (next_rand() % 8 == 0) g_priority[pick] = next_rand();
    std::deque<queued> *q = &g_queues[pick];
    queued op = std::move(q->front());
    q->pop_front();
    ++g_clock;
    if (op.run) op.run();
  }
}
} // namespace

void emu_submit(cudaStream_t s, std::function<void()> f) {
  if (!g_defer) {
    f();
    return;
  }
  g_queues[s].push_back({std::move(f), nullptr});
}

void emu_bind(const void *handle, cudaStream_t s) { g_bound[handle] = s; }

cudaStream_t emu_stream_of(const void *handle) {
  auto it = g_bound.find(handle);
  if (it == g_bound.end()) {
    std::fprintf(stderr, "emu: a handle used before a stream was set on it\n");
    std::abort();
  }
  return it->second;
}

extern "C" void emu_streams_defer(unsigned seed) {
  for (auto &e : g_queues)
    if (!e.second.empty()) {
      std::fprintf(stderr, "emu: emu_streams_defer with work queued\n");
      std::abort();
    }
  g_defer = seed != 0;
  g_priority.clear();
  g_rng = 0x9E3779B97F4A7C15ULL ^ seed;
}

extern "C" unsigned long emu_streams_choices(void) { return g_choices; }

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
static pthread_barrier_t g_bar;
static pthread_barrier_t g_warp_bar[32]; // one a warp: shuffles are per warp
static double g_xchg[1024];
static std::mutex g_atomic;

static void __syncthreads() { pthread_barrier_wait(&g_bar); }
static unsigned lin() { return threadIdx.x + threadIdx.y * blockDim.x; }
static double __shfl_down_sync(unsigned, double v, int off) {
  const unsigned t = lin();
  g_xchg[t] = v;
  pthread_barrier_wait(&g_warp_bar[t / 32]);
  const double r = (t % 32) + (unsigned)off < 32 ? g_xchg[t + off] : v;
  pthread_barrier_wait(&g_warp_bar[t / 32]);
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
typedef void (*invoker)(void **a);
struct kernel_entry {
  const char *name;
  invoker run;
  bool sync; /* has __syncthreads or shuffles: its threads run at once */
};
#define A(i, T) (*(T *)a[i])
static void k_symv(void **a) {
  jmg_trd_symv(A(0, const double *), A(1, long long), A(2, long long), A(3, long long),
               A(4, long long), A(5, int), A(6, int), A(7, long long), A(8, long long),
               A(9, int), A(10, const double *), A(11, double *));
}
static void k_update_col(void **a) {
  jmg_trd_update_col(A(0, double *), A(1, const double *), A(2, double *), A(3, long long),
                     A(4, long long), A(5, long long), A(6, int), A(7, const double *),
                     A(8, const double *), A(9, double *), A(10, double *), A(11, double *));
}
static void k_house(void **a) {
  jmg_trd_house(A(0, double *), A(1, long long), A(2, long long), A(3, const double *),
                A(4, const double *), A(5, double *), A(6, double *), A(7, struct ptrs),
                A(8, struct ptrs), A(9, int));
}
static void k_finish_w(void **a) {
  jmg_trd_finish_w(A(0, const double *), A(1, struct ptrs), A(2, int), A(3, const double *),
                   A(4, double *), A(5, long long), A(6, long long), A(7, long long), A(8, int),
                   A(9, const double *), A(10, const double *), A(11, const double *),
                   A(12, const double *), A(13, long long), A(14, double *));
}
static void k_fix_w(void **a) {
  jmg_trd_fix_w(A(0, double *), A(1, const double *), A(2, long long), A(3, long long),
                A(4, const double *), A(5, const double *));
}
static void k_col_start(void **a) {
  jmg_trd_col_start(A(0, double *), A(1, const double *), A(2, double *), A(3, long long),
                    A(4, long long), A(5, long long), A(6, int), A(7, double *), A(8, double *),
                    A(9, double *), A(10, double *), A(11, const double *), A(12, double *),
                    A(13, double *), A(14, unsigned *), A(15, double *));
}
static void k_col_finish(void **a) {
  jmg_trd_col_finish(A(0, double *), A(1, const double *), A(2, double *), A(3, long long),
                     A(4, long long), A(5, long long), A(6, int), A(7, struct ptrs), A(8, int),
                     A(9, const double *), A(10, const double *), A(11, const double *),
                     A(12, double *), A(13, double *), A(14, unsigned *));
}
static void k_gather_rows(void **a) {
  jmg_trd_gather_rows(A(0, const double *), A(1, const double *), A(2, long long),
                      A(3, double *), A(4, double *), A(5, long long), A(6, int),
                      A(7, long long), A(8, long long), A(9, int), A(10, int));
}
static void k_make_v(void **a) {
  jmg_trd_make_v(A(0, double *), A(1, long long), A(2, int), A(3, long long), A(4, long long),
                 A(5, struct ptrs), A(6, long long), A(7, int));
}
static void k_larft(void **a) {
  jmg_trd_larft(A(0, const double *), A(1, const double *), A(2, long long), A(3, int),
                A(4, double *));
}
#undef A
static kernel_entry g_kernels[] = {
    {"jmg_trd_symv", k_symv, true},          {"jmg_trd_update_col", k_update_col, true},
    {"jmg_trd_house", k_house, false},       {"jmg_trd_finish_w", k_finish_w, true},
    {"jmg_trd_fix_w", k_fix_w, false},       {"jmg_trd_gather_rows", k_gather_rows, false},
    {"jmg_trd_make_v", k_make_v, false},     {"jmg_trd_larft", k_larft, true},
    {"jmg_trd_col_start", k_col_start, true}, {"jmg_trd_col_finish", k_col_finish, true},
};

struct thread_arg {
  invoker run;
  void **args;
  uint3 t, b;
  dim3 bd, gd;
};
static void *thread_main(void *p) {
  thread_arg *x = (thread_arg *)p;
  threadIdx = x->t;
  blockIdx = x->b;
  blockDim = x->bd;
  gridDim = x->gd;
  x->run(x->args);
  return nullptr;
}

long emu_launches = 0;

extern "C" {

cudaError_t cudaLaunchKernel(const void *func, dim3 grid, dim3 block, void **args, size_t,
                             cudaStream_t) {
  if (g_defer) return cudaErrorNotSupported; // args would have to be copied
  const kernel_entry *k = (const kernel_entry *)func;
  const unsigned nt = block.x * block.y * block.z;
  if (nt == 0 || nt > 1024 || nt % 32 != 0 || block.z != 1)
    return cudaErrorInvalidConfiguration;
  ++emu_launches;
  std::vector<pthread_t> th(nt);
  std::vector<thread_arg> xs(nt);
  for (unsigned by = 0; by < grid.y; ++by)
    for (unsigned bx = 0; bx < grid.x; ++bx) {
      if (!k->sync) { /* no barrier: its threads one after another */
        for (unsigned i = 0; i < nt; ++i) {
          xs[i] = {k->run, args, {i % block.x, i / block.x, 0}, {bx, by, 0}, block, grid};
          thread_main(&xs[i]);
        }
        continue;
      }
      pthread_barrier_init(&g_bar, nullptr, nt);
      for (unsigned w = 0; w < nt / 32; ++w) pthread_barrier_init(&g_warp_bar[w], nullptr, 32);
      for (unsigned i = 0; i < nt; ++i) {
        xs[i] = {k->run, args, {i % block.x, i / block.x, 0}, {bx, by, 0}, block, grid};
        pthread_create(&th[i], nullptr, thread_main, &xs[i]);
      }
      for (unsigned i = 0; i < nt; ++i) pthread_join(th[i], nullptr);
      pthread_barrier_destroy(&g_bar);
      for (unsigned w = 0; w < nt / 32; ++w) pthread_barrier_destroy(&g_warp_bar[w]);
    }
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

static int g_device = 0;
cudaError_t cudaSetDevice(int d) {
  g_device = d;
  return cudaSuccess;
}
cudaError_t cudaGetDevice(int *d) {
  *d = g_device;
  return cudaSuccess;
}
cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t n, cudaMemcpyKind,
                            cudaStream_t s) {
  emu_submit(s, [=] { std::memmove(dst, src, n); });
  return cudaSuccess;
}
cudaError_t cudaMemcpyPeerAsync(void *dst, int, const void *src, int, size_t n,
                                cudaStream_t s) {
  emu_submit(s, [=] { std::memmove(dst, src, n); });
  return cudaSuccess;
}
cudaError_t cudaMemsetAsync(void *p, int v, size_t n, cudaStream_t s) {
  emu_submit(s, [=] { std::memset(p, v, n); });
  return cudaSuccess;
}
cudaError_t cudaEventCreateWithFlags(cudaEvent_t *e, unsigned int) {
  *e = (cudaEvent_t) new emu_event();
  return cudaSuccess;
}
cudaError_t cudaEventCreate(cudaEvent_t *e) { return cudaEventCreateWithFlags(e, 0); }
cudaError_t cudaEventDestroy(cudaEvent_t e) {
  delete (emu_event *)e; // a queued record or wait keeps its record alive
  return cudaSuccess;
}
cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s) {
  auto rec = std::make_shared<record>();
  ((emu_event *)e)->last = rec;
  emu_submit(s, [rec] {
    rec->done = true;
    rec->at = g_clock;
  });
  return cudaSuccess;
}
// Both events' records must have run (CUDA's cudaErrorNotReady otherwise);
// the "milliseconds" are deferred operations run between them (0 when
// every call runs at once).
cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t a, cudaEvent_t b) {
  const emu_event *x = (const emu_event *)a, *y = (const emu_event *)b;
  if (!x->last || !x->last->done || !y->last || !y->last->done) return cudaErrorNotReady;
  *ms = (float)y->last->at - (float)x->last->at;
  return cudaSuccess;
}
// Waits for the record the event names now; none (never recorded): no wait.
cudaError_t cudaStreamWaitEvent(cudaStream_t s, cudaEvent_t e, unsigned int) {
  const std::shared_ptr<record> rec = ((emu_event *)e)->last;
  if (g_defer && rec) g_queues[s].push_back({nullptr, rec});
  return cudaSuccess;
}
cudaError_t cudaStreamSynchronize(cudaStream_t s) {
  if (g_defer) drain(s, false);
  return cudaSuccess;
}
cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, unsigned int) {
  *s = (cudaStream_t)std::malloc(1);
  return cudaSuccess;
}
// CUDA lets the stream's work finish after this returns; here it runs
// first (its queue is keyed by the pointer, which malloc may reuse).
cudaError_t cudaStreamDestroy(cudaStream_t s) {
  if (g_defer) drain(s, false);
  g_queues.erase(s);
  g_priority.erase(s);
  std::free((void *)s);
  return cudaSuccess;
}
cudaError_t cudaGetLastError(void) { return cudaSuccess; }
const char *cudaGetErrorString(cudaError_t) { return "emulated error"; }
const char *cudaGetErrorName(cudaError_t) { return "cudaErrorEmulated"; }

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
cublasStatus_t cublasDgemv_v2_64(cublasHandle_t h, cublasOperation_t op, int64_t m,
                                 int64_t n, const double *alpha_, const double *a,
                                 int64_t lda, const double *x, int64_t incx,
                                 const double *beta_, double *y, int64_t incy) {
  const double alpha = *alpha_, beta = *beta_;
  emu_submit(g_defer ? emu_stream_of(h) : nullptr, [=] {
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
                                 int64_t m, int64_t n, int64_t k, const double *alpha_,
                                 const double *a, int64_t lda, const double *b, int64_t ldb,
                                 const double *beta_, double *c, int64_t ldc) {
  const double alpha = *alpha_, beta = *beta_;
  emu_submit(g_defer ? emu_stream_of(h) : nullptr, [=] {
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
