// The conversion kernels of the CUDA engines' mixed-precision solves
// (cuda/convert.h), kept as CUDA C++ source beside the PTX that the library
// loads at run time (cuda/convert_ptx.h, made from this file by
// scripts/gen-convert-ptx.sh with the toolkit's nvcc). The library itself is
// C built by the host compiler: nvcc is not part of its build.
//
// Every kernel is a grid-stride loop over `count` reals (a complex element is
// two), so that any launch size covers any count.

extern "C" __global__ void jmg_narrow(const double *src, float *dst,
                                      unsigned long long count,
                                      int *overflow) {
  const unsigned long long stride =
      (unsigned long long)blockDim.x * gridDim.x;
  for (unsigned long long i =
           (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
       i < count; i += stride) {
    const double v = src[i];
    // Past float32's largest finite value: the copy holds an Inf there.
    if (fabs(v) > 3.4028234663852886e38) *overflow = 1;
    dst[i] = __double2float_rn(v);
  }
}

extern "C" __global__ void jmg_widen(const float *src, double *dst,
                                     unsigned long long count, int add) {
  const unsigned long long stride =
      (unsigned long long)blockDim.x * gridDim.x;
  for (unsigned long long i =
           (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
       i < count; i += stride) {
    const double v = (double)src[i];
    dst[i] = add ? dst[i] + v : v;
  }
}

// A square n x n column-major matrix transposed in place (not conjugated),
// for lu_solve's TF32 route (engine/cusolverdn/mixed.c): block (x, y) of
// 32 x 8 threads swaps tile (y, x) with tile (x, y) through shared memory,
// both read and written a column at a time (coalesced); blocks above the
// diagonal (y < x) have nothing to do. A diagonal tile is transposed alone.
template <typename T>
__device__ void transpose_square(T *a, unsigned long long n) {
  __shared__ T t1[32][33];
  __shared__ T t2[32][33];
  const unsigned long long bx = blockIdx.x, by = blockIdx.y;
  if (by < bx) return;
  const unsigned long long r0 = by * 32, c0 = bx * 32, tx = threadIdx.x;
  for (unsigned long long k = threadIdx.y; k < 32; k += blockDim.y) {
    // t1[j][i] = A(r0 + i, c0 + j), t2[j][i] = A(c0 + i, r0 + j).
    if (r0 + tx < n && c0 + k < n) t1[k][tx] = a[(r0 + tx) + (c0 + k) * n];
    if (c0 + tx < n && r0 + k < n) t2[k][tx] = a[(c0 + tx) + (r0 + k) * n];
  }
  __syncthreads();
  for (unsigned long long k = threadIdx.y; k < 32; k += blockDim.y) {
    // A(c0 + i, r0 + j) = old A(r0 + j, c0 + i); A(r0 + i, c0 + j) = old
    // A(c0 + j, r0 + i).
    if (c0 + tx < n && r0 + k < n) a[(c0 + tx) + (r0 + k) * n] = t1[tx][k];
    if (by != bx && r0 + tx < n && c0 + k < n)
      a[(r0 + tx) + (c0 + k) * n] = t2[tx][k];
  }
}

extern "C" __global__ void jmg_transpose_d(double *a, unsigned long long n) {
  transpose_square<double>(a, n);
}

extern "C" __global__ void jmg_transpose_z(double2 *a, unsigned long long n) {
  transpose_square<double2>(a, n);
}
