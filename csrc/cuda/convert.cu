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
