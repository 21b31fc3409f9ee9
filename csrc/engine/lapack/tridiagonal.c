/* The host tridiagonal eigensolver (tridiagonal.h): dsterf for the
 * eigenvalues alone; for the eigenvectors, chunks planned from the
 * eigenvalues near their boundaries (dstebz), dstemr (RANGE='I') on threads
 * of this process for each chunk (dstebz and dstein where it fails), each
 * chunk handed to the caller's sink on the calling thread. */
#include "engine/lapack/tridiagonal.h"

#include <float.h>
#include <limits.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/lapack/lapack.h"
#include "engine/lapack/table.h"

/* Chunk buffers (a chunk's n x k Z on every thread) stay near this. */
#define CHUNK_BUDGET_BYTES ((int64_t)1 << 30)
/* Chunks per thread where n allows it: dstemr's cost per vector varies with
 * the clusters it meets, and more, smaller chunks even the threads out... */
#define CHUNKS_PER_THREAD 4
/* ...but not below this many vectors, where the O(n) set-up of each dstemr
 * call would begin to count. */
#define MIN_AUTO_CHUNK 256
#define MAX_THREADS 64

static int check_args(const char *op, int64_t n, const double *d,
                      const double *e, const double *w, int *info,
                      jmg_error *err) {
  if (n < 0 || info == NULL || (n > 0 && (d == NULL || w == NULL)) ||
      (n > 1 && e == NULL))
    return jmg_error_set(err, JMG_EINVAL, op, "tridiagonal",
                         "bad arguments (n=%lld, d, e, w or info NULL)",
                         (long long)n);
  return 0;
}

/* dsterf on w (a copy of d) and a copy of e. */
static int sterf(const char *op, int n, const double *d, const double *e,
                 double *w, int *info, jmg_error *err) {
  const jmg_lapack_routines *r = jmg_lapack_routines_for(JMG_F64);
  int rc =
      jmg_lapack_require((const void *)r->sterf, JMG_F64, "sterf", op, err);
  if (rc != 0) return rc;
  *info = 0;
  if (n == 0) return 0;
  double *ec = malloc((size_t)n * sizeof *ec);
  if (ec == NULL)
    return jmg_error_set(err, JMG_ENOMEM, op, "malloc",
                         "cannot allocate %d doubles for dsterf's E", n);
  memcpy(w, d, (size_t)n * sizeof *w);
  if (n > 1) memcpy(ec, e, (size_t)(n - 1) * sizeof *ec);
  r->sterf(&n, w, ec, info);
  free(ec);
  if (*info < 0)
    return jmg_error_set(err, JMG_ELAPACK, op, "LAPACK dsterf",
                         "argument %d was rejected", -*info);
  return 0;
}

int jmg_tridiagonal_eigenvalues(const char *op, int64_t n, const double *d,
                                const double *e, double *w, int *info,
                                jmg_error *err) {
  int n_int;
  int rc = check_args(op, n, d, e, w, info, err);
  if (rc == 0) rc = jmg_lapack_int(n, "N", op, &n_int, err);
  if (rc != 0) return rc;
  return sterf(op, n_int, d, e, w, info, err);
}

/* What every chunk shares. */
typedef struct {
  const char *op;
  jmg_stemr_fn stemr;
  jmg_stebz_fn stebz;
  jmg_stein_fn stein;
  int n, lwork, liwork;
  const double *d, *e;
  jmg_dtype dtype;
  int fallback_only; /* tests: dstebz and dstein for every chunk */
} stemr_common;

/* dstebz's buffers: one thread's. */
typedef struct {
  double *w, *work;
  int *iblock, *isplit, *iwork;
} stebz_bufs;

static void stebz_bufs_free(stebz_bufs *s) {
  free(s->w);
  free(s->work);
  free(s->iblock);
  free(s->isplit);
  free(s->iwork);
  memset(s, 0, sizeof *s);
}

static int stebz_bufs_alloc(stebz_bufs *s, int n) {
  const size_t nn = (size_t)n;
  s->w = malloc(nn * sizeof *s->w);
  s->work = malloc(4 * nn * sizeof *s->work);
  s->iblock = malloc(nn * sizeof *s->iblock);
  s->isplit = malloc(nn * sizeof *s->isplit);
  s->iwork = malloc(3 * nn * sizeof *s->iwork);
  if (s->w && s->work && s->iblock && s->isplit && s->iwork) return 0;
  stebz_bufs_free(s);
  return -1;
}

/* Eigenvalues il .. iu (1-based) of T into out (dstebz, the best accuracy:
 * ABSTOL 2 * the underflow threshold), ascending (order 'E'), or by T's
 * blocks as dstein wants them (order 'B', the blocks in buf). 0, or
 * dstebz's info (> 0) in *info, or an error. */
static int stebz_range(const char *op, jmg_stebz_fn stebz, int n,
                       const double *d, const double *e, int il, int iu,
                       char order, stebz_bufs *buf, double *out, int *info,
                       jmg_error *err) {
  char range = 'I';
  double vl = 0.0, vu = 0.0, abstol = 2.0 * DBL_MIN;
  int m = 0, nsplit = 0;
  *info = 0;
  stebz(&range, &order, &n, &vl, &vu, &il, &iu, &abstol, d, e, &m, &nsplit,
        buf->w, buf->iblock, buf->isplit, buf->work, buf->iwork, info);
  if (*info < 0)
    return jmg_error_set(err, JMG_ELAPACK, op, "LAPACK dstebz",
                         "argument %d was rejected", -*info);
  if (*info == 0 && m != iu - il + 1)
    return jmg_error_set(err, JMG_ELAPACK, op, "LAPACK dstebz",
                         "returned %d eigenvalues for IL=%d..IU=%d", m, il, iu);
  if (*info == 0) memcpy(out, buf->w, (size_t)m * sizeof *out);
  return 0;
}

struct queue;

/* One worker's buffers and the chunk it holds. */
typedef struct {
  const stemr_common *c;
  struct queue *q;
  double *d, *e, *w, *work; /* n each, but work: lwork */
  double *col;              /* n: one column, for the fallback's sort */
  int *iwork, *isuppz;      /* liwork, 2n */
  stebz_bufs sb;            /* the fallback's dstebz */
  int *ifail, *order;       /* max_count each: dstein's, the sort's */
  void *z;                  /* n x max_count elements of max(8, dtype) bytes */
  int first, count;         /* 0-based first index, number of vectors */
  int64_t chunk;            /* which chunk (the queue's index), while ready */
  int ready; /* computed, not yet handed over (under the queue's lock) */
  int rc, info;
  jmg_error err;
  pthread_t thread;
  int spawned;
} slot;

/* The chunks' queue: workers take chunks in order, compute one into their
 * slot, mark it ready and wait until the calling thread has handed it to
 * the sink (in order: the sink makes CUDA calls, which belong to the
 * calling thread, and w is kept ascending across chunks). The worker that
 * holds the chunk handed over next never waits before it is ready, so the
 * queue cannot stall; a worker that finishes early waits with its chunk. */
typedef struct queue {
  pthread_mutex_t lock;
  pthread_cond_t ready, taken;
  const int64_t *b; /* the chunks' boundaries */
  int64_t nchunks, next;
  int stop; /* an error, or the sink's: no more chunks */
} queue;

/* z's n x count doubles, rewritten in place as dtype's elements. Each
 * element is read before the bytes it lies on are written: floats (4 bytes)
 * and complex64 (8) front to back, complex128 (16) back to front. */
static void convert(void *z, size_t len, jmg_dtype dtype) {
  char *b = z;
  if (dtype == JMG_F64) return;
  if (dtype == JMG_F32 || dtype == JMG_C64) {
    const size_t step = jmg_dtype_size(dtype);
    const float zero = 0.0f;
    for (size_t i = 0; i < len; ++i) {
      double v;
      memcpy(&v, b + 8 * i, 8);
      const float f = (float)v;
      memcpy(b + step * i, &f, 4);
      if (dtype == JMG_C64) memcpy(b + step * i + 4, &zero, 4);
    }
    return;
  }
  const double zero = 0.0;
  for (size_t i = len; i-- > 0;) {
    double v;
    memcpy(&v, b + 8 * i, 8);
    memcpy(b + 16 * i, &v, 8);
    memcpy(b + 16 * i + 8, &zero, 8);
  }
}

/* LAPACK's own fallback where dstemr fails (dsyevr's): the chunk's
 * eigenvalues by bisection (dstebz, RANGE='I', to the best accuracy,
 * ABSTOL 2 * the underflow threshold), its eigenvectors by inverse iteration
 * (dstein, which reorthogonalizes those of close eigenvalues within the
 * chunk), sorted ascending (dstebz orders them by T's blocks). */
static void stebz_stein(slot *s) {
  const stemr_common *c = s->c;
  int n = c->n, m = s->count, info = 0;
  s->rc = stebz_range(c->op, c->stebz, n, c->d, c->e, s->first + 1,
                      s->first + s->count, 'B', &s->sb, s->w, &info, &s->err);
  if (s->rc != 0 || info != 0) {
    s->info = info;
    return;
  }
  double *z = s->z;
  c->stein(&n, c->d, c->e, &m, s->w, s->sb.iblock, s->sb.isplit, z, &n, s->work,
           s->iwork, s->ifail, &info);
  if (info < 0) {
    s->rc = jmg_error_set(&s->err, JMG_ELAPACK, c->op, "LAPACK dstein",
                          "argument %d was rejected", -info);
    return;
  }
  s->info = info;
  if (info != 0) return;
  /* Ascending: an insertion sort of the indices (a chunk is short), then
   * the columns moved along the permutation's cycles through col. */
  for (int i = 0; i < m; ++i) s->order[i] = i;
  for (int i = 1; i < m; ++i) {
    const int v = s->order[i];
    int j = i;
    for (; j > 0 && s->w[s->order[j - 1]] > s->w[v]; --j)
      s->order[j] = s->order[j - 1];
    s->order[j] = v;
  }
  const size_t len = (size_t)n * sizeof(double);
  for (int i = 0; i < m; ++i) {
    if (s->order[i] < 0 || s->order[i] == i) continue;
    /* Column i takes column order[i], which takes column order[order[i]],
     * ... until the cycle comes back to i. */
    const double wi = s->w[i];
    memcpy(s->col, z + (size_t)i * (size_t)n, len);
    int j = i;
    while (s->order[j] != i) {
      const int from = s->order[j];
      memcpy(z + (size_t)j * (size_t)n, z + (size_t)from * (size_t)n, len);
      s->w[j] = s->w[from];
      s->order[j] = -1;
      j = from;
    }
    memcpy(z + (size_t)j * (size_t)n, s->col, len);
    s->w[j] = wi;
    s->order[j] = -1;
  }
}

/* dstemr for eigenvectors first+1 .. first+count (LAPACK's 1-based IL..IU)
 * on the slot's copies of d and e (dstemr overwrites both); where it fails
 * (info > 0: its representation tree could not be built, which tight
 * clusters can cause), dstebz and dstein. */
static void run_chunk(slot *s) {
  const stemr_common *c = s->c;
  int n = c->n, il = s->first + 1, iu = s->first + s->count, m = 0;
  int nzc = s->count, lwork = c->lwork, liwork = c->liwork;
  char jobz = 'V', range = 'I';
  double vl = 0.0, vu = 0.0;
  /* TRYRAC false: T comes from a Householder reduction, whose backward
   * error (eps ||A||) already rules out eigenvalues to high relative
   * accuracy; with .FALSE. dstemr (its documentation says) need not
   * guarantee them and may use its fastest techniques, while the vectors
   * keep their accuracy (residual and orthogonality O(n eps ||T||)). It is
   * in/out: each call has its own. */
  int tryrac = 0;
  s->info = 0;
  if (!c->fallback_only) {
    memcpy(s->d, c->d, (size_t)n * sizeof *s->d);
    if (n > 1) memcpy(s->e, c->e, (size_t)(n - 1) * sizeof *s->e);
    s->e[n - 1] = 0.0; /* dstemr's workspace, set for determinism */
    c->stemr(&jobz, &range, &n, s->d, s->e, &vl, &vu, &il, &iu, &m, s->w,
             (double *)s->z, &n, &nzc, s->isuppz, &tryrac, s->work, &lwork,
             s->iwork, &liwork, &s->info);
    if (s->info < 0) {
      s->rc = jmg_error_set(&s->err, JMG_ELAPACK, c->op, "LAPACK dstemr",
                            "argument %d was rejected", -s->info);
      return;
    }
    if (s->info == 0 && m != s->count) {
      s->rc = jmg_error_set(&s->err, JMG_ELAPACK, c->op, "LAPACK dstemr",
                            "returned %d eigenpairs for IL=%d..IU=%d (%d "
                            "asked)",
                            m, il, iu, s->count);
      return;
    }
  }
  if (c->fallback_only || s->info > 0) {
    s->info = 0;
    stebz_stein(s);
    if (s->rc != 0 || s->info != 0) return;
  }
  convert(s->z, (size_t)n * (size_t)s->count, c->dtype);
}

static void set_chunk(slot *s, const int64_t *b, int64_t j) {
  s->chunk = j;
  s->first = (int)b[j];
  s->count = (int)(b[j + 1] - b[j]);
  s->rc = 0;
  jmg_error_clear(&s->err);
}

static void *worker(void *arg) {
  slot *s = arg;
  queue *q = s->q;
  pthread_mutex_lock(&q->lock);
  while (!q->stop && q->next < q->nchunks) {
    set_chunk(s, q->b, q->next++);
    pthread_mutex_unlock(&q->lock);
    run_chunk(s);
    pthread_mutex_lock(&q->lock);
    s->ready = 1;
    pthread_cond_broadcast(&q->ready);
    while (s->ready && !q->stop) pthread_cond_wait(&q->taken, &q->lock);
  }
  pthread_mutex_unlock(&q->lock);
  return NULL;
}

static void slot_free(slot *s) {
  free(s->col);
  stebz_bufs_free(&s->sb);
  free(s->ifail);
  free(s->order);
  free(s->d);
  free(s->e);
  free(s->w);
  free(s->work);
  free(s->iwork);
  free(s->isuppz);
  free(s->z);
}

static int slot_alloc(slot *s, const stemr_common *c, int max_count) {
  const size_t n = (size_t)c->n;
  const size_t zsize = jmg_dtype_size(c->dtype) > 8 ? 16 : 8;
  memset(s, 0, sizeof *s);
  s->c = c;
  s->d = malloc(n * sizeof *s->d);
  s->e = malloc(n * sizeof *s->e);
  s->w = malloc(n * sizeof *s->w);
  s->work = malloc((size_t)c->lwork * sizeof *s->work);
  s->iwork = malloc((size_t)c->liwork * sizeof *s->iwork);
  s->isuppz = malloc(2 * n * sizeof *s->isuppz);
  s->z = malloc(n * (size_t)max_count * zsize);
  s->col = malloc(n * sizeof *s->col);
  s->ifail = malloc((size_t)max_count * sizeof *s->ifail);
  s->order = malloc((size_t)max_count * sizeof *s->order);
  if (s->d && s->e && s->w && s->work && s->iwork && s->isuppz && s->z &&
      s->col && s->ifail && s->order && stebz_bufs_alloc(&s->sb, c->n) == 0)
    return 0;
  slot_free(s);
  return -1;
}

/* The chunk boundaries b[0] = 0 < b[1] < ... < b[nchunks] = n: one about
 * every k indices, each moved within h = min(k/4, WINDOW_HALF) of its
 * target to where the gap between consecutive eigenvalues is largest, so
 * that a cluster of close eigenvalues falls in one chunk. Where even that
 * gap is below a quarter of the mean spacing (the spread of T's spectrum
 * over 4n), the window lies inside a cluster wider than itself (an
 * eigenvalue of multiplicity 500, say: two dstemr calls would give vectors
 * of it that are not orthogonal), and the boundary moves on to the
 * cluster's end, however far: the chunk takes the whole cluster. The
 * eigenvalues looked at are only those of the windows (and of a cluster's
 * extent), by dstebz's bisection, the windows on threads: no O(n^2) serial
 * step (dsterf for all of them was a large part of the host's time:
 * bench/results/2026-11-26-s14-h200-syevd-largest). */
#define WINDOW_HALF 8
#define EXTEND_STEP 64

/* The windows' eigenvalues, on threads: window j is eigenvalues
 * lo[j] .. lo[j] + width - 1 (0-based), into vals + j * width. */
typedef struct {
  const char *op;
  jmg_stebz_fn stebz;
  int n;
  const double *d, *e;
  const int64_t *lo;
  int64_t nwin, width;
  double *vals;
  int tid, nthreads;
  int rc, info;
  jmg_error err;
  stebz_bufs buf;
  pthread_t thread;
  int spawned;
} window_job;

static void *window_worker(void *arg) {
  window_job *j = arg;
  for (int64_t i = j->tid; i < j->nwin && j->rc == 0 && j->info == 0;
       i += j->nthreads)
    j->rc = stebz_range(j->op, j->stebz, j->n, j->d, j->e, (int)j->lo[i] + 1,
                        (int)(j->lo[i] + j->width), 'E', &j->buf,
                        j->vals + i * j->width, &j->info, &j->err);
  return NULL;
}

/* The windows' eigenvalues, on the threads of jobs (jobs[i].buf allocated
 * for nthreads of them; the rest of each job filled here): the first on
 * this thread, the others on threads of their own (or here, where one
 * cannot be made). The first failure is the error; else the first nonzero
 * info is *info. */
static int run_windows(window_job *jobs, int nthreads, const window_job *proto,
                       int *info, jmg_error *err) {
  for (int i = 0; i < nthreads; ++i) {
    const stebz_bufs buf = jobs[i].buf;
    jobs[i] = *proto;
    jobs[i].tid = i;
    jobs[i].nthreads = nthreads;
    jobs[i].buf = buf;
    jmg_error_clear(&jobs[i].err);
    jobs[i].spawned = i > 0 && pthread_create(&jobs[i].thread, NULL,
                                              window_worker, &jobs[i]) == 0;
  }
  if (nthreads > 0) window_worker(&jobs[0]);
  for (int i = 1; i < nthreads; ++i) {
    if (jobs[i].spawned)
      pthread_join(jobs[i].thread, NULL);
    else
      window_worker(&jobs[i]);
  }
  for (int i = 0; i < nthreads && *info == 0; ++i) {
    if (jobs[i].rc != 0) {
      jmg_error_copy(err, &jobs[i].err);
      return jobs[i].rc;
    }
    if (jobs[i].info != 0) *info = jobs[i].info;
  }
  return 0;
}

/* Inside a cluster (the window's gaps all below small): the boundary past
 * its end, EXTEND_STEP eigenvalues at a time from the last one seen (at,
 * 0-based; its value seen). *best n where the cluster runs to the end. */
static int past_cluster(const char *op, jmg_stebz_fn stebz, int n,
                        const double *d, const double *e, int64_t at,
                        double seen, double small, stebz_bufs *seq, double *ext,
                        int64_t *best, int *info, jmg_error *err) {
  int rc = 0;
  *best = n;
  while (rc == 0 && *info == 0 && at + 1 < n && *best == n) {
    const int64_t upto = at + EXTEND_STEP < n - 1 ? at + EXTEND_STEP : n - 1;
    rc = stebz_range(op, stebz, n, d, e, (int)at + 2, (int)upto + 1, 'E', seq,
                     ext, info, err);
    for (int64_t q = 0; rc == 0 && *info == 0 && q <= upto - at - 1; ++q) {
      if (ext[q] - seen >= small) {
        *best = at + 1 + q;
        break;
      }
      seen = ext[q];
    }
    at = upto;
  }
  return rc;
}

/* The boundary in a window of width eigenvalues v (v[q] the eigenvalue
 * lo + q): after its widest gap, *gap (none found: target). */
static int64_t widest_gap(const double *v, int64_t width, int64_t lo,
                          int64_t target, double *gap) {
  int64_t best = target;
  *gap = -1.0;
  for (int64_t q = 1; q < width; ++q)
    if (v[q] - v[q - 1] > *gap) {
      *gap = v[q] - v[q - 1];
      best = lo + q;
    }
  return best;
}

/* The boundaries b[1 ..] of chunks of about k vectors, in order, from the
 * windows' eigenvalues w->vals (window i: eigenvalues w->lo[i] .. +
 * w->width - 1, of half width h): each after its window's widest gap, or
 * where that gap is below small, past its cluster (past_cluster). Targets
 * that an earlier cluster carried the boundary to within k/2 of are passed
 * over. *nchunks gets their number (the last boundary is n). */
static int place_boundaries(const window_job *w, int64_t k, int64_t h,
                            double small, stebz_bufs *seq, double *ext,
                            int64_t *b, int64_t *nchunks, int *info,
                            jmg_error *err) {
  const int n = w->n;
  int rc = 0;
  int64_t prev = 0, nb = 0;
  for (int64_t i = 0; i < w->nwin && rc == 0 && *info == 0; ++i) {
    const int64_t t = (i + 1) * k;
    if (t <= prev + k / 2) continue;
    if (n - prev <= k + h) break;
    const double *v = w->vals + i * w->width; /* v[q]: eigenvalue lo[i] + q */
    double gap = -1.0;
    int64_t best = widest_gap(v, w->width, w->lo[i], t, &gap);
    if (gap < small) {
      rc = past_cluster(w->op, w->stebz, n, w->d, w->e, t + h,
                        v[w->width - 1], small, seq, ext, &best, info, err);
      if (best >= n) break; /* the cluster runs to the end */
    }
    b[++nb] = best;
    prev = best;
  }
  b[++nb] = n;
  *nchunks = nb;
  return rc;
}

/* b has room for n / (k - k/4) + 3 entries; *nchunks gets their number.
 * The windows' eigenvalues (run_windows), then each boundary from its
 * window, or past its cluster (place_boundaries). */
static int plan_chunks(const char *op, jmg_stebz_fn stebz, int n,
                       const double *d, const double *e, int64_t k, int threads,
                       int64_t *b, int64_t *nchunks, int *info,
                       jmg_error *err) {
  const int64_t h = k / 4 < WINDOW_HALF ? k / 4 : WINDOW_HALF;
  const int64_t width = 2 * h + 2; /* eigenvalues t-h-1 .. t+h */
  int64_t nwin = 0;
  b[0] = 0;
  *nchunks = 1;
  b[1] = n;
  *info = 0;
  if (n <= k + h) return 0;
  for (int64_t t = k; t + h < n; t += k) ++nwin;
  int64_t *lo = malloc((size_t)nwin * sizeof *lo);
  double *vals = malloc((size_t)(nwin * width) * sizeof *vals);
  double *ext = malloc((EXTEND_STEP + 1) * sizeof *ext);
  if (threads > nwin) threads = (int)nwin;
  window_job *jobs = calloc((size_t)threads, sizeof *jobs);
  stebz_bufs seq;
  memset(&seq, 0, sizeof seq);
  int rc = 0;
  if (lo == NULL || vals == NULL || ext == NULL || jobs == NULL ||
      stebz_bufs_alloc(&seq, n) != 0)
    rc = jmg_error_set(err, JMG_ENOMEM, op, "malloc",
                       "cannot allocate the eigenvalues of %lld windows",
                       (long long)nwin);
  for (int64_t i = 0; i < nwin && rc == 0; ++i) lo[i] = (i + 1) * k - h - 1;
  /* The spectrum's spread: its extreme eigenvalues. */
  double first = 0.0, last = 0.0;
  if (rc == 0)
    rc = stebz_range(op, stebz, n, d, e, 1, 1, 'E', &seq, &first, info, err);
  if (rc == 0 && *info == 0)
    rc = stebz_range(op, stebz, n, d, e, n, n, 'E', &seq, &last, info, err);
  const double small = (last - first) / (4.0 * (double)n);
  int nthreads = 0;
  while (rc == 0 && *info == 0 && nthreads < threads &&
         stebz_bufs_alloc(&jobs[nthreads].buf, n) == 0)
    ++nthreads;
  const window_job proto = {.op = op,
                            .stebz = stebz,
                            .n = n,
                            .d = d,
                            .e = e,
                            .lo = lo,
                            .nwin = nwin,
                            .width = width,
                            .vals = vals};
  int wrc = run_windows(jobs, nthreads, &proto, info, err);
  if (rc == 0) rc = wrc;
  if (rc == 0 && *info == 0 && nthreads == 0)
    rc = jmg_error_set(err, JMG_ENOMEM, op, "malloc",
                       "cannot allocate dstebz's workspace (N=%d)", n);
  if (rc == 0 && *info == 0)
    rc = place_boundaries(&proto, k, h, small, &seq, ext, b, nchunks, info,
                          err);
  for (int i = 0; i < nthreads; ++i) stebz_bufs_free(&jobs[i].buf);
  stebz_bufs_free(&seq);
  free(jobs);
  free(ext);
  free(vals);
  free(lo);
  return rc;
}

/* The vectors per chunk: chunk > 0 as asked (tests), else so that the
 * threads' chunk buffers stay near CHUNK_BUDGET_BYTES and each thread gets
 * CHUNKS_PER_THREAD chunks where n is large. Within n, and small enough
 * that a chunk (at most 1.5 k vectors) of n-long vectors is indexed by
 * LAPACK's int. */
static int64_t chunk_size(int64_t n, int threads, jmg_dtype dtype,
                          int64_t chunk) {
  int64_t k = chunk;
  if (k <= 0) {
    const int64_t zsize = jmg_dtype_size(dtype) > 8 ? 16 : 8;
    k = CHUNK_BUDGET_BYTES / ((int64_t)threads * n * zsize);
    const int64_t spread =
        (n + CHUNKS_PER_THREAD * threads - 1) / (CHUNKS_PER_THREAD * threads);
    const int64_t want = spread > MIN_AUTO_CHUNK ? spread : MIN_AUTO_CHUNK;
    if (k > want) k = want;
  }
  const int64_t int_cap = (int64_t)INT_MAX / n * 2 / 3;
  if (k > int_cap) k = int_cap;
  if (k > n) k = n;
  return k < 1 ? 1 : k;
}

static int resolve_threads(int threads) {
  if (threads <= 0) {
    const long online = sysconf(_SC_NPROCESSORS_ONLN);
    threads = online > 0 && online < MAX_THREADS ? (int)online
              : online > 0                       ? MAX_THREADS
                                                 : 1;
  }
  return threads < MAX_THREADS ? threads : MAX_THREADS;
}

/* Hands chunk s over: its eigenvalues into w, then its vectors to the sink.
 * Eigenvalues of two chunks come from two dstemr calls; where they are
 * equal to rounding, the later chunk's first may fall an ulp below the
 * earlier's last, so each is raised to its predecessor (a change within
 * dstemr's own error) to keep w ascending. */
static int hand_over(slot *s, double *w, jmg_tridiagonal_sink sink, void *ctx,
                     const char *op, jmg_error *err) {
  for (int i = 0; i < s->count; ++i) {
    const int64_t g = (int64_t)s->first + i;
    w[g] = s->w[i];
    if (g > 0 && w[g] < w[g - 1]) w[g] = w[g - 1];
  }
  jmg_error_clear(err);
  int rc = sink(ctx, s->first, s->count, s->z, err);
  if (rc != 0 && err->code == JMG_OK)
    jmg_error_set(err, JMG_EINTERNAL, op, "tridiagonal sink",
                  "the sink failed (%d) without saying why", rc);
  return rc;
}

/* The chunked solver's arguments (as check_args, and a sink and a dtype),
 * n in LAPACK's int, and the LAPACK routines it calls. */
static int check_chunked_args(const char *op, int64_t n64, const double *d,
                              const double *e, const double *w, jmg_dtype dtype,
                              jmg_tridiagonal_sink sink,
                              const jmg_lapack_routines *r, int *n, int *info,
                              jmg_error *err) {
  int rc = check_args(op, n64, d, e, w, info, err);
  if (rc == 0 && (sink == NULL || (unsigned)dtype >= JMG_NUM_DTYPES))
    rc = jmg_error_set(err, JMG_EINVAL, op, "tridiagonal",
                       "bad arguments (no sink, or dtype %d)", (int)dtype);
  if (rc == 0) rc = jmg_lapack_int(n64, "N", op, n, err);
  if (rc == 0)
    rc = jmg_lapack_require((const void *)r->stemr, JMG_F64, "stemr", op, err);
  if (rc == 0)
    rc = jmg_lapack_require((const void *)r->stebz, JMG_F64, "stebz", op, err);
  if (rc == 0)
    rc = jmg_lapack_require((const void *)r->stein, JMG_F64, "stein", op, err);
  return rc;
}

/* The most eigenvalues of one chunk (of the nchunks between boundaries b),
 * whose n x count Z must be indexed within LAPACK's int (a cluster that
 * long is extreme: at n = 90,000, over 23,000 eigenvalues). */
static int largest_chunk(const char *op, const int64_t *b, int64_t nchunks,
                         int64_t n64, int64_t *max_count, jmg_error *err) {
  *max_count = 1;
  for (int64_t j = 0; j < nchunks; ++j)
    if (b[j + 1] - b[j] > *max_count) *max_count = b[j + 1] - b[j];
  if (*max_count > (int64_t)INT_MAX / n64)
    return jmg_error_set(err, JMG_EUNSUPPORTED, op, "tridiagonal",
                         "a cluster of %lld close eigenvalues (N=%lld): its "
                         "eigenvectors, which one dstemr call must compute, "
                         "pass LAPACK's 32-bit indices",
                         (long long)*max_count, (long long)n64);
  return 0;
}

/* dstemr's workspace for chunks of up to max_count eigenvectors: LAPACK's
 * minimum for JOBZ='V' (18 N and 10 N), or the query's answer where
 * larger. */
static int stemr_workspace(const jmg_lapack_routines *r, int64_t n64,
                           int64_t max_count, stemr_common *c, jmg_error *err) {
  const char *op = c->op;
  int n = c->n;
  int rc = jmg_lapack_int(18 * n64, "LWORK", op, &c->lwork, err);
  if (rc == 0) rc = jmg_lapack_int(10 * n64, "LIWORK", op, &c->liwork, err);
  if (rc != 0) return rc;
  char jobz = 'V', range = 'I';
  double vl = 0.0, vu = 0.0, qwork = 0.0, dummy = 0.0;
  int il = 1, iu = (int)max_count, m = 0, nzc = iu, tryrac = 0;
  int qiwork = 0, minus1 = -1, isuppz[2] = {0, 0}, qinfo = 0;
  r->stemr(&jobz, &range, &n, &dummy, &dummy, &vl, &vu, &il, &iu, &m, &dummy,
           &dummy, &n, &nzc, isuppz, &tryrac, &qwork, &minus1, &qiwork, &minus1,
           &qinfo);
  if (qinfo != 0)
    return jmg_error_set(err, JMG_ELAPACK, op, "LAPACK dstemr",
                         "workspace query failed with info=%d", qinfo);
  if (qwork > c->lwork && qwork < INT_MAX) c->lwork = (int)qwork + 1;
  if (qiwork > c->liwork) c->liwork = qiwork;
  return 0;
}

/* Up to threads slots, each with a thread's buffers for chunks of up to
 * max_count eigenvectors; where memory runs short past the first, fewer
 * (*nslots). */
static int slots_alloc(const stemr_common *c, int threads, int64_t max_count,
                       slot **slots, int *nslots, jmg_error *err) {
  *slots = calloc((size_t)threads, sizeof **slots);
  if (*slots == NULL)
    return jmg_error_set(err, JMG_ENOMEM, c->op, "malloc",
                         "cannot allocate %d thread slots", threads);
  while (*nslots < threads &&
         slot_alloc(&(*slots)[*nslots], c, (int)max_count) == 0)
    ++*nslots;
  if (*nslots == 0)
    return jmg_error_set(err, JMG_ENOMEM, c->op, "malloc",
                         "cannot allocate the buffers of one %d x %lld chunk "
                         "and dstemr's workspace",
                         c->n, (long long)max_count);
  return 0;
}

/* The chunks in order: the workers take them from the queue and the
 * calling thread hands each over to the sink as it is ready; where no
 * worker could be started (started 0), the calling thread computes them
 * itself, one after the other. A failure, or an info, stops the workers.
 * Returns when every worker has ended. */
static int hand_over_in_order(slot *slots, int nslots, int started, queue *q,
                              int64_t nchunks, double *w,
                              jmg_tridiagonal_sink sink, void *ctx,
                              const char *op, int *info, jmg_error *err) {
  int rc = 0;
  for (int64_t j = 0; rc == 0 && *info == 0 && j < nchunks; ++j) {
    slot *s = NULL;
    if (started == 0) {
      s = &slots[0];
      set_chunk(s, q->b, j);
      run_chunk(s);
    } else {
      pthread_mutex_lock(&q->lock);
      for (;;) {
        for (int i = 0; i < nslots && s == NULL; ++i)
          if (slots[i].spawned && slots[i].ready && slots[i].chunk == j)
            s = &slots[i];
        if (s != NULL) break;
        pthread_cond_wait(&q->ready, &q->lock);
      }
      pthread_mutex_unlock(&q->lock);
    }
    if (s->rc != 0) {
      jmg_error_copy(err, &s->err);
      rc = s->rc;
    } else if (s->info != 0) {
      *info = s->info;
    } else {
      rc = hand_over(s, w, sink, ctx, op, err);
    }
    if (started > 0) {
      pthread_mutex_lock(&q->lock);
      s->ready = 0;
      if (rc != 0 || *info != 0) q->stop = 1;
      pthread_cond_broadcast(&q->taken);
      pthread_mutex_unlock(&q->lock);
    }
  }
  if (started == 0) return rc;
  if (rc != 0) {
    pthread_mutex_lock(&q->lock);
    q->stop = 1;
    pthread_cond_broadcast(&q->taken);
    pthread_mutex_unlock(&q->lock);
  }
  for (int i = 0; i < nslots; ++i)
    if (slots[i].spawned) pthread_join(slots[i].thread, NULL);
  return rc;
}

int jmg_tridiagonal_eigenvectors_chunked(
    const char *op, int64_t n64, const double *d, const double *e, double *w,
    jmg_dtype dtype, int threads, int64_t chunk, int fallback_only,
    jmg_tridiagonal_sink sink, void *ctx, int *info, jmg_error *err) {
  int n = 0;
  const jmg_lapack_routines *r = jmg_lapack_routines_for(JMG_F64);
  int rc = check_chunked_args(op, n64, d, e, w, dtype, sink, r, &n, info, err);
  *info = 0;
  if (rc != 0 || n == 0) return rc;

  threads = resolve_threads(threads);
  const int64_t k = chunk_size(n64, threads, dtype, chunk);
  int64_t *b = malloc((size_t)(n64 / (k - k / 4) + 3) * sizeof *b);
  if (b == NULL)
    return jmg_error_set(err, JMG_ENOMEM, op, "malloc",
                         "cannot allocate %lld chunk boundaries",
                         (long long)(n64 / (k - k / 4) + 3));
  int64_t nchunks = 0;
  rc = plan_chunks(op, r->stebz, n, d, e, k, threads, b, &nchunks, info, err);
  if (rc != 0 || *info != 0) {
    free(b);
    return rc;
  }
  if (threads > nchunks) threads = (int)nchunks;
  int64_t max_count = 1;
  rc = largest_chunk(op, b, nchunks, n64, &max_count, err);
  if (rc != 0) {
    free(b);
    return rc;
  }

  stemr_common c = {.op = op,
                    .stemr = r->stemr,
                    .stebz = r->stebz,
                    .stein = r->stein,
                    .n = n,
                    .d = d,
                    .e = e,
                    .dtype = dtype,
                    .fallback_only = fallback_only};
  rc = stemr_workspace(r, n64, max_count, &c, err);
  slot *slots = NULL;
  int nslots = 0;
  if (rc == 0) rc = slots_alloc(&c, threads, max_count, &slots, &nslots, err);

  /* The workers take the chunks from the queue (hand_over_in_order). */
  queue q = {.b = b, .nchunks = nchunks};
  int started = 0;
  if (rc == 0) {
    pthread_mutex_init(&q.lock, NULL);
    pthread_cond_init(&q.ready, NULL);
    pthread_cond_init(&q.taken, NULL);
    for (int i = 0; i < nslots; ++i) {
      slots[i].q = &q;
      slots[i].spawned =
          pthread_create(&slots[i].thread, NULL, worker, &slots[i]) == 0;
      started += slots[i].spawned;
    }
    rc = hand_over_in_order(slots, nslots, started, &q, nchunks, w, sink, ctx,
                            op, info, err);
  }
  if (started > 0 || nslots > 0) {
    pthread_mutex_destroy(&q.lock);
    pthread_cond_destroy(&q.ready);
    pthread_cond_destroy(&q.taken);
  }
  for (int s = 0; s < nslots; ++s) slot_free(&slots[s]);
  free(slots);
  free(b);
  return rc;
}

int jmg_tridiagonal_eigenvectors(const char *op, int64_t n, const double *d,
                                 const double *e, double *w, jmg_dtype dtype,
                                 int threads, jmg_tridiagonal_sink sink,
                                 void *ctx, int *info, jmg_error *err) {
  return jmg_tridiagonal_eigenvectors_chunked(op, n, d, e, w, dtype, threads, 0,
                                              0, sink, ctx, info, err);
}
