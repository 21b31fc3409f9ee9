// The kernels of the multi-GPU Householder tridiagonal reduction and its
// back-transformation (engine/eig_mgpu/trd.h), float64, kept as CUDA C++
// source beside the PTX that the library loads at run time
// (engine/eig_mgpu/kernels_ptx.h, made from this file and the one it
// includes, kernels_replicated.cuh, by scripts/gen-eig-mgpu-ptx.sh with the
// toolkit's nvcc). The library itself is C built by the host compiler.
//
// A is held 1D block-cyclically by columns (tile columns round-robin over
// ndev GPUs, each GPU's columns column-major with leading dimension n, rows
// indexed globally); only its lower triangle is read. Global column c of
// GPU dev's local column lc: ((lc / tile) * ndev + dev) * tile + lc % tile.
//
// One column c of a panel (LAPACK's ?latrd, lower) is, on the panel's
// owner unless said otherwise:
//   update_col  A(c:n, c) -= V W(c, :)^T + W V(c, :)^T over the panel's
//               earlier columns (the previous column's w completed first);
//               T's diagonal d(c); alpha = A(c+1, c) and |A(c+2:n, c)|^2
//   house       the reflector (beta, tau; v = (1; x / (alpha - beta))),
//               written into A(c+1:n, c) and into every GPU's v buffer
//               (peer stores); every GPU's y buffer zeroed
//   symv        on every GPU: y += (its columns' part of the trailing
//               lower triangle) v, each element of the lower triangle read
//               once, by the GPU that owns its column
//   finish_w    y summed over the GPUs (peer loads), less V (W^T v) + W
//               (V^T v); w = tau y; W(:, k) = w and dot(c) = w . v
// and the next column's update_col completes w += (-tau/2 dot) v (fix_w
// does it for a panel's last column).

#define TS 64 // symv's tile: TS rows (TS threads a block) ...
#define TC 32 // ... by TC local columns
#define MAXDEV 16
#define MAXNB 128 // the widest panel

struct ptrs {
  double *p[MAXDEV];
};

static __device__ __forceinline__ long long global_col(long long lc,
                                                       long long tile,
                                                       int ndev, int dev) {
  return ((lc / tile) * ndev + dev) * tile + lc % tile;
}

// Sum of s over the block (blockDim.x a multiple of 32, at most 1024);
// the result in thread 0.
static __device__ double block_sum(double s) {
  __shared__ double part[32];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  for (int off = 16; off > 0; off >>= 1) s += __shfl_down_sync(0xffffffffu, s, off);
  __syncthreads(); // part may still be read by an earlier call
  if (lane == 0) part[warp] = s;
  __syncthreads();
  s = 0.0;
  if (warp == 0) {
    const int nw = (blockDim.x + 31) >> 5;
    s = lane < nw ? part[lane] : 0.0;
    for (int off = 16; off > 0; off >>= 1) s += __shfl_down_sync(0xffffffffu, s, off);
  }
  return s;
}

// y += S v, S this GPU's part of the trailing lower triangle A(j:n, j:n):
// the elements (r, gc) with r >= gc >= j of its columns gc. The diagonal
// is counted once: y(r) += A(r, gc) v(gc) for r >= gc, y(gc) += A(r, gc)
// v(r) for r > gc. Block (x, y): TC local columns from lc_first + x * TC,
// rows from j + y * rt * TS, rt tiles of TS rows; thread tx takes one row
// of each tile and all TC columns (coalesced: the TS threads read a
// column's TS rows). y is summed into with atomics (zeroed by house).
extern "C" __global__ void __launch_bounds__(TS)
    jmg_trd_symv(const double *a, long long lda, long long n, long long nloc,
                 long long tile, int ndev, int dev, long long j,
                 long long lc_first, int rt, const double *v, double *y) {
  __shared__ long long gcs[TC];
  __shared__ double xv[TC];
  __shared__ double red[TS / 32][TC];
  const int tx = threadIdx.x;
  const long long lc0 = lc_first + (long long)blockIdx.x * TC;
  const long long INVALID = 0x7fffffffffffffffLL;
  if (tx < TC) {
    const long long lc = lc0 + tx;
    long long gc = INVALID;
    if (lc < nloc) {
      gc = global_col(lc, tile, ndev, dev);
      if (gc < j) gc = INVALID;
    }
    gcs[tx] = gc;
    xv[tx] = gc != INVALID ? v[gc] : 0.0;
  }
  __syncthreads();
  // The columns are in increasing order, invalid ones (before j, past nloc)
  // at either end.
  long long gmin = INVALID, gmax = -1;
  int all = 1;
  for (int c = 0; c < TC; ++c) {
    const long long g = gcs[c];
    if (g == INVALID) {
      all = 0;
    } else {
      gmin = g < gmin ? g : gmin;
      gmax = g > gmax ? g : gmax;
    }
  }
  if (gmin == INVALID) return;
  const long long rbeg = j + (long long)blockIdx.y * rt * TS;
  long long rend = rbeg + (long long)rt * TS;
  if (rend > n) rend = n;
  if (rend <= gmin) return; // every row above every column's diagonal
  double acc[TC];
#pragma unroll
  for (int c = 0; c < TC; ++c) acc[c] = 0.0;
  const double *base = a + lc0 * lda;
  for (long long r0 = rbeg; r0 < rend; r0 += TS) {
    if (r0 + TS <= gmin) continue;
    const long long r = r0 + tx;
    if (r < n) {
      const double vr = v[r];
      double yn = 0.0;
      const double *ap = base + r;
      // Whole tiles (below every column's diagonal) load without masks.
      if (all && r0 > gmax) {
#pragma unroll
        for (int c = 0; c < TC; ++c) {
          const double x = ap[(long long)c * lda];
          yn += x * xv[c];
          acc[c] += x * vr;
        }
      } else {
#pragma unroll
        for (int c = 0; c < TC; ++c) {
          const long long g = gcs[c];
          const double x = r >= g ? ap[(long long)c * lda] : 0.0;
          yn += x * xv[c];
          acc[c] += r > g ? x * vr : 0.0;
        }
      }
      if (yn != 0.0) atomicAdd(&y[r], yn);
    }
  }
  // acc[c]: this thread's rows' part of y(gcs[c]); summed over the block.
  const int lane = tx & 31, warp = tx >> 5;
#pragma unroll
  for (int c = 0; c < TC; ++c) {
    double s = acc[c];
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) s += __shfl_down_sync(0xffffffffu, s, off);
    if (lane == 0) red[warp][c] = s;
  }
  __syncthreads();
  if (tx < TC && gcs[tx] != INVALID) {
    double s = 0.0;
    for (int w = 0; w < TS / 32; ++w) s += red[w][tx];
    if (s != 0.0) atomicAdd(&y[gcs[tx]], s);
  }
}

// Column c (the panel's column k, k >= 0) of the owner: A(c:n, c) -= V
// W(c, 0:k)^T + W V(c, 0:k)^T, where V (the panel's reflectors, A's local
// columns from the panel's first: vp, ld) and W (wp, ld) hold k columns;
// W's column k-1 is first completed, w += a2 v with a2 = -tau(c-1)/2
// dot(c-1), and written back below row c. Then d(c) = A(c, c), alpha(c) =
// A(c+1, c), sumsq(c) += |A(c+2:n, c)|^2. Grid-stride over rows c .. n-1.
extern "C" __global__ void jmg_trd_update_col(double *acol, const double *vp,
                                              double *wp, long long ld,
                                              long long n, long long c, int k,
                                              const double *tau,
                                              const double *dot, double *d,
                                              double *alpha, double *sumsq) {
  __shared__ double wc[MAXNB], vc[MAXNB];
  const double a2 = k > 0 ? -0.5 * tau[c - 1] * dot[c - 1] : 0.0;
  for (int q = threadIdx.x; q < k; q += blockDim.x) {
    vc[q] = vp[c + (long long)q * ld];
    wc[q] = wp[c + (long long)q * ld] + (q == k - 1 ? a2 * vc[q] : 0.0);
  }
  __syncthreads();
  double s2 = 0.0;
  const long long stride = (long long)blockDim.x * gridDim.x;
  for (long long r = c + (long long)blockIdx.x * blockDim.x + threadIdx.x;
       r < n; r += stride) {
    double acc = acol[r];
    if (k > 0) {
      const long long last = (long long)(k - 1) * ld;
      const double wprev = wp[r + last] + a2 * vp[r + last];
      if (r > c) wp[r + last] = wprev;
      for (int q = 0; q < k - 1; ++q)
        acc -= vp[r + (long long)q * ld] * wc[q] +
               wp[r + (long long)q * ld] * vc[q];
      acc -= vp[r + last] * wc[k - 1] + wprev * vc[k - 1];
      acol[r] = acc;
    }
    if (r == c)
      d[c] = acc;
    else if (r == c + 1)
      alpha[c] = acc;
    else
      s2 += acc * acc;
  }
  s2 = block_sum(s2);
  if (threadIdx.x == 0 && s2 != 0.0) atomicAdd(&sumsq[c], s2);
}

// The reflector of a column (LAPACK's ?larfg) from its alpha and |x|^2:
// beta = -sign(alpha) |(alpha, x)|, tau = (beta - alpha) / beta, v = (1; x
// / (alpha - beta)), so scale = 1 / (alpha - beta); a column whose norm is
// below the smallest normal number, or whose x is zero, gets tau 0 (H = I,
// beta = alpha, scale 1).
static __device__ void reflector(double al, double x2, double *beta,
                                 double *tau, double *scale) {
  const double norm = sqrt(al * al + x2);
  *beta = al;
  *tau = 0.0;
  *scale = 1.0;
  if (x2 > 0.0 && norm >= 2.2250738585072014e-308) {
    *beta = al >= 0.0 ? -norm : norm;
    *tau = (*beta - al) / *beta;
    *scale = 1.0 / (al - *beta);
  }
}

// The reflector of column c (reflector, on A(c+1:n, c), from alpha(c) and
// sumsq(c)): v into A(c+1:n, c) and into v[d] of every GPU d; y[d] zeroed
// over the same rows.
extern "C" __global__ void jmg_trd_house(double *acol, long long n,
                                         long long c, const double *alpha,
                                         const double *sumsq, double *tau,
                                         double *e, struct ptrs v,
                                         struct ptrs y, int ndev) {
  double beta, t, scale;
  reflector(alpha[c], sumsq[c], &beta, &t, &scale);
  if (blockIdx.x == 0 && threadIdx.x == 0) {
    tau[c] = t;
    e[c] = beta;
  }
  const long long stride = (long long)blockDim.x * gridDim.x;
  for (long long r = c + 1 + (long long)blockIdx.x * blockDim.x + threadIdx.x;
       r < n; r += stride) {
    const double val = r == c + 1 ? 1.0 : acol[r] * scale;
    acol[r] = val;
    for (int q = 0; q < ndev; ++q) {
      v.p[q][r] = val;
      y.p[q][r] = 0.0;
    }
  }
}

// w = tau(c) (y_own + sum of the other GPUs' y - V p1 - W p2) over rows j
// .. n-1 (j = c + 1), p1 = W^T v and p2 = V^T v (k each, from gemv), into
// W(:, k); dot(c) += w . v.
extern "C" __global__ void jmg_trd_finish_w(const double *yown,
                                            struct ptrs ypeer, int npeer,
                                            const double *vp, double *wp,
                                            long long ld, long long n,
                                            long long j, int k,
                                            const double *p1, const double *p2,
                                            const double *v, const double *tau,
                                            long long c, double *dot) {
  __shared__ double s1[MAXNB], s2[MAXNB];
  for (int q = threadIdx.x; q < k; q += blockDim.x) {
    s1[q] = p1[q];
    s2[q] = p2[q];
  }
  __syncthreads();
  const double t = tau[c];
  double s = 0.0;
  const long long stride = (long long)blockDim.x * gridDim.x;
  for (long long r = j + (long long)blockIdx.x * blockDim.x + threadIdx.x;
       r < n; r += stride) {
    double yv = yown[r];
    for (int q = 0; q < npeer; ++q) yv += ypeer.p[q][r];
    for (int q = 0; q < k; ++q)
      yv -= vp[r + (long long)q * ld] * s1[q] + wp[r + (long long)q * ld] * s2[q];
    const double w = t * yv;
    wp[r + (long long)k * ld] = w;
    s += w * v[r];
  }
  s = block_sum(s);
  if (threadIdx.x == 0 && s != 0.0) atomicAdd(&dot[c], s);
}

// A panel's last column k: W(j:n, k) += a2 v with a2 = -tau(c)/2 dot(c),
// v = A(j:n, c) (vcol), j = c + 1.
extern "C" __global__ void jmg_trd_fix_w(double *wcol, const double *vcol,
                                         long long n, long long c,
                                         const double *tau, const double *dot) {
  const double a2 = -0.5 * tau[c] * dot[c];
  const long long stride = (long long)blockDim.x * gridDim.x;
  for (long long r = c + 1 + (long long)blockIdx.x * blockDim.x + threadIdx.x;
       r < n; r += stride)
    wcol[r] += a2 * vcol[r];
}

#include "kernels_replicated.cuh"

// The rows of V and W (ld each) at this GPU's local columns lc_first ..
// nloc-1 (their global indices), nb columns: vg, wg (cnt x nb, ld cnt).
extern "C" __global__ void jmg_trd_gather_rows(const double *vsrc,
                                               const double *wsrc, long long ld,
                                               double *vg, double *wg,
                                               long long cnt, int nb,
                                               long long lc_first,
                                               long long tile, int ndev,
                                               int dev) {
  const long long total = cnt * nb;
  const long long stride = (long long)blockDim.x * gridDim.x;
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
       i < total; i += stride) {
    const long long row = i % cnt, q = i / cnt;
    const long long g = global_col(lc_first + row, tile, ndev, dev);
    vg[i] = vsrc[g + q * ld];
    wg[i] = wsrc[g + q * ld];
  }
}

// The back-transformation's block of kb reflectors from global column j0:
// vb (mm x kb, ld mm, mm = n - j0 - 1; row i is A's row j0 + 1 + i), column
// q: 0 above row j0 + q + 1, 1 there, A(r, j0 + q) below, read from the
// column's owner (peer loads: a.p[d] is GPU d's local columns).
extern "C" __global__ void jmg_trd_make_v(double *vb, long long mm, int kb,
                                          long long n, long long j0,
                                          struct ptrs a, long long tile,
                                          int ndev) {
  const long long total = mm * kb;
  const long long stride = (long long)blockDim.x * gridDim.x;
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
       i < total; i += stride) {
    const long long row = i % mm, q = i / mm;
    const long long r = j0 + 1 + row, cq = j0 + q;
    double val = 0.0;
    if (r == cq + 1) {
      val = 1.0;
    } else if (r > cq + 1) {
      const int od = (int)((cq / tile) % ndev);
      const long long lc = (cq / (tile * ndev)) * tile + cq % tile;
      val = a.p[od][r + lc * n];
    }
    vb[i] = val;
  }
}

// T (kb x kb, ld kb, upper) of a block of reflectors (LAPACK's ?larft,
// forward, columnwise) from G = V^T V (kb x kb, ld kb, its upper part) and
// tau(j0 ..): T(c, c) = tau_c, T(0:c, c) = -tau_c T(0:c, 0:c) G(0:c, c).
// One block of at least kb threads.
extern "C" __global__ void jmg_trd_larft(const double *g, const double *tau,
                                         long long j0, int kb, double *t) {
  // T is built in place, column after column; a column's entries are read
  // by the block only after the __syncthreads that follows their writes.
  const int r = threadIdx.x;
  for (int c = 0; c < kb; ++c) {
    const double tc = tau[j0 + c];
    if (r < c) {
      double s = 0.0;
      for (int q = r; q < c; ++q)
        s += t[r + (long long)q * kb] * g[q + (long long)c * kb];
      t[r + (long long)c * kb] = -tc * s;
    } else if (r < kb) {
      t[r + (long long)c * kb] = r == c ? tc : 0.0;
    }
    __syncthreads();
  }
}
