// The replicated column's kernels (engine/eig_mgpu/sytrd_replicated.c),
// part of kernels.cu (included there, after its helpers and struct ptrs):
// one PTX, one load.
// ---- the replicated column (sytrd_replicated.c): every GPU runs a column's
// steps on its own copy of the panel, V and W, so that one exchange a column
// (the partial products y) is left. Two kernels a column beside the symv:
//   col_start   update_col's update, then (its last block) the reflector,
//               and the panel corrections p1 = W^T u, p2 = V^T u;
//   col_finish  y summed over the GPUs, w, v scaled, dot(c) = w . v.
// u is the reflector before its scaling: u = (1 / scale; x), v = scale u,
// so that the product may start before the column is scaled (y = scale S u).
// Every sum is formed in a fixed order (per block, then over the blocks by
// the last block), so that every GPU computes the same bits from the same
// inputs: the copies of V and W stay identical.
#define CR 32              // a tile's rows: a warp's lanes
#ifndef JMG_TRD_CS         // the panel's columns split over CS warps (the
#define JMG_TRD_CS 8       // CPU emulation, tests/emu, takes 2: fewer
#endif                     // threads, the same code)
#define CS JMG_TRD_CS
#define RNB 64             // the widest panel of this path
#define CQ (RNB / CS)      // a warp's columns at most

static __device__ double warp_sum(double s) {
  for (int off = 16; off > 0; off >>= 1) s += __shfl_down_sync(0xffffffffu, s, off);
  return s; // in lane 0
}

// Whether this block is the last of the grid to get here: every thread's
// writes before are visible to it (each thread fences; one ticket a block).
static __device__ bool last_block(unsigned *count) {
  __shared__ int is_last;
  __threadfence();
  __syncthreads();
  if (threadIdx.x == 0) is_last = atomicAdd(count, 1u) == gridDim.x - 1;
  __syncthreads();
  if (is_last) __threadfence();
  return is_last;
}

// Sum over the grid's blocks of nv values, block b's value i at part[i *
// gridDim.x + b]; into tot[i]. Fixed order. By the last block only.
static __device__ void sum_parts(const double *part, int nv, double *tot) {
  const int lane = threadIdx.x % CR, warp = threadIdx.x / CR;
  const int g = (int)gridDim.x;
  for (int i = warp; i < nv; i += CS) {
    double s = 0.0;
    for (int b = lane; b < g; b += CR) s += __ldcg(part + (long long)i * g + b);
    s = warp_sum(s);
    if (lane == 0) tot[i] = s;
  }
  __syncthreads();
}

// Column c (the panel's k-th) on one GPU: acol its copy, vp (the panel's
// earlier columns, v's) and wp (W) with ld. Rows c .. n-1 in tiles of CR, a
// block of CR x CS threads (lane: row, warp: a slice of the k columns),
// grid-stride over the tiles. As update_col: W's column k-1 completed
// first (a2 v); A(c:n, c) -= V W(c, :)^T + W V(c, :)^T; d(c). y zeroed
// over rows c+1 .. n-1. The last block: beta, tau(c), e(c), scale(c), u's
// first entry into acol(c+1), and p = (W^T u, V^T u) (p[0..k), p[RNB ..
// RNB+k)). k < RNB. part: (2 RNB + 1) x gridDim.x scratch (kernels.h
// JMG_TRD_GMAX), count: 0 between launches.
extern "C" __global__ void __launch_bounds__(CR * CS)
    jmg_trd_col_start(double *acol, const double *vp, double *wp, long long ld,
                      long long n, long long c, int k, double *tau, double *e,
                      double *d, double *scale, const double *dot, double *y,
                      double *part, unsigned *count, double *p) {
  __shared__ double wc[RNB], vc[RNB], tot[2 * RNB + 1];
  __shared__ double red[CS][CR], xs[CR];
  const int lane = threadIdx.x % CR, warp = threadIdx.x / CR;
  const double a2 = k > 0 ? -0.5 * tau[c - 1] * dot[c - 1] : 0.0;
  for (int q = threadIdx.x; q < k; q += blockDim.x) {
    vc[q] = vp[c + (long long)q * ld];
    wc[q] = wp[c + (long long)q * ld] + (q == k - 1 ? a2 * vc[q] : 0.0);
  }
  __syncthreads();
  double p1[CQ], p2[CQ], s2 = 0.0;
#pragma unroll
  for (int i = 0; i < CQ; ++i) p1[i] = p2[i] = 0.0;
  const long long tiles = (n - c + CR - 1) / CR;
  for (long long t = blockIdx.x; t < tiles; t += gridDim.x) {
    const long long r = c + t * CR + lane;
    const bool in = r < n;
    double vr[CQ], wr[CQ], s = 0.0;
#pragma unroll
    for (int i = 0; i < CQ; ++i) {
      const int q = warp + CS * i;
      vr[i] = wr[i] = 0.0;
      if (in && q < k) {
        vr[i] = vp[r + (long long)q * ld];
        wr[i] = wp[r + (long long)q * ld];
        if (q == k - 1) {
          wr[i] += a2 * vr[i];
          if (r > c) wp[r + (long long)q * ld] = wr[i];
        }
        s += vr[i] * wc[q] + wr[i] * vc[q];
      }
    }
    red[warp][lane] = s;
    __syncthreads();
    if (warp == 0) {
      double x = 0.0;
      if (in) {
        x = acol[r];
        for (int i = 0; i < CS; ++i) x -= red[i][lane];
        if (k > 0) acol[r] = x;
        if (r == c) d[c] = x;
        if (r > c) y[r] = 0.0;
      }
      // Row c+1 (alpha) counts in neither sum: the last block takes it.
      if (!(in && r > c + 1)) x = 0.0;
      s2 += x * x;
      xs[lane] = x;
    }
    __syncthreads();
#pragma unroll
    for (int i = 0; i < CQ; ++i) {
      p1[i] += wr[i] * xs[lane];
      p2[i] += vr[i] * xs[lane];
    }
    __syncthreads();
  }
  // The block's partial sums: p's over its rows (each column's lanes in
  // shared memory, added in lane order by one thread), |x|^2 by warp 0.
  const long long g = gridDim.x;
  __shared__ double pl[2 * RNB][CR + 1];
#pragma unroll
  for (int i = 0; i < CQ; ++i) {
    const int q = warp + CS * i;
    if (q < k) {
      pl[q][lane] = p1[i];
      pl[RNB + q][lane] = p2[i];
    }
  }
  if (warp == 0) {
    s2 = warp_sum(s2);
    if (lane == 0) part[blockIdx.x] = s2;
  }
  __syncthreads();
  for (int v = threadIdx.x; v < 2 * k; v += blockDim.x) {
    const double *row = pl[v < k ? v : RNB + v - k];
    double sum = 0.0;
    for (int l = 0; l < CR; ++l) sum += row[l];
    part[(1 + v) * g + blockIdx.x] = sum; // p1 at 1 + q, p2 at 1 + k + q
  }
  if (!last_block(count)) return;
  __shared__ double u1;
  if (c + 1 < n) {
    sum_parts(part, 2 * k + 1, tot);
    if (threadIdx.x == 0) {
      const double al = __ldcg(acol + c + 1);
      double beta, t, sc;
      reflector(al, tot[0], &beta, &t, &sc);
      tau[c] = t;
      e[c] = beta;
      scale[c] = sc;
      u1 = t != 0.0 ? al - beta : 1.0;
      acol[c + 1] = u1;
    }
    __syncthreads();
    for (int q = threadIdx.x; q < k; q += blockDim.x) {
      p[q] = tot[1 + q] + __ldcg(wp + c + 1 + (long long)q * ld) * u1;
      p[RNB + q] = tot[1 + k + q] + __ldcg(vp + c + 1 + (long long)q * ld) * u1;
    }
  }
  if (threadIdx.x == 0) *count = 0;
}

// The rest of column c (k-th of its panel) on one GPU, rows j = c+1 .. n-1
// as col_start's tiles: y = sum of every GPU's product (y.p[0 .. ndev), in
// that order) less V p1 + W p2 (p from col_start); w = tau scale y into
// W(:, k); v = scale u (1 at row j) into acol; dot(c) = w . v.
extern "C" __global__ void __launch_bounds__(CR * CS)
    jmg_trd_col_finish(double *acol, const double *vp, double *wp, long long ld,
                       long long n, long long c, int k, struct ptrs y, int ndev,
                       const double *p, const double *tau, const double *scale,
                       double *dot, double *part, unsigned *count) {
  __shared__ double s1[RNB], s2[RNB], red[CS][CR], ys[MAXDEV][CR];
  const int lane = threadIdx.x % CR, warp = threadIdx.x / CR;
  for (int q = threadIdx.x; q < k; q += blockDim.x) {
    s1[q] = p[q];
    s2[q] = p[RNB + q];
  }
  __syncthreads();
  const long long j = c + 1;
  const double sc = scale[c], ts = tau[c] * sc;
  double dsum = 0.0;
  const long long tiles = (n - j + CR - 1) / CR;
  for (long long t = blockIdx.x; t < tiles; t += gridDim.x) {
    const long long r = j + t * CR + lane;
    const bool in = r < n;
    for (int q = warp; q < ndev; q += CS) ys[q][lane] = in ? y.p[q][r] : 0.0;
    double s = 0.0;
#pragma unroll
    for (int i = 0; i < CQ; ++i) {
      const int q = warp + CS * i;
      if (in && q < k)
        s += vp[r + (long long)q * ld] * s1[q] + wp[r + (long long)q * ld] * s2[q];
    }
    red[warp][lane] = s;
    __syncthreads();
    if (warp == 0 && in) {
      double yv = 0.0;
      for (int q = 0; q < ndev; ++q) yv += ys[q][lane];
      for (int i = 0; i < CS; ++i) yv -= red[i][lane];
      const double w = ts * yv, v = r == j ? 1.0 : sc * acol[r];
      acol[r] = v;
      wp[r + (long long)k * ld] = w;
      dsum += w * v;
    }
    __syncthreads();
  }
  if (warp == 0) {
    dsum = warp_sum(dsum);
    if (lane == 0) part[blockIdx.x] = dsum;
  }
  if (!last_block(count)) return;
  __shared__ double tot1[1];
  sum_parts(part, 1, tot1);
  if (threadIdx.x == 0) {
    dot[c] = tot1[0];
    *count = 0;
  }
}
