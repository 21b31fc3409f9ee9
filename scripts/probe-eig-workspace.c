/* What each eigensolver on one GPU asks for beside A, at the sizes where
 * syevd float64 meets the memory of one H200 (issue 25: cusolverDnXsyevd's
 * ~4 A caps syevd near N = 54,000). Only workspace queries: nothing of
 * size A is allocated. Prints one line per (solver, N): device and host
 * bytes, and the ratio to A's bytes.
 *
 *   scripts/probe-eig-workspace.sh   builds and runs it on a GPU machine
 *
 * Solvers: cusolverDnXsyevd (vectors, values), cusolverDnXsyevdx (range
 * all), cusolverMgSyevd on one GPU (T_A 1024), cuSOLVERMp 0.8 on one rank
 * (syevd, and its parts sytrd, stedc, ormtr; blocks of 1024). Every
 * return code is printed, not assumed. */
#include <cuda_runtime_api.h>
#include <cusolverDn.h>
#define DISABLE_CUSOLVERMG_DEPRECATED /* deprecated in CUDA 13, still jaxmg's (engine/cusolvermg/mg.h) */
#include <cusolverMg.h>
#include <cusolverMp.h>
#include <nccl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

static double a_bytes(int64_t n) { return (double)n * (double)n * 8.0; }

static void line(const char *what, int64_t n, int st, double dev,
                 double host) {
  printf("%-28s N=%7lld status=%d device=%8.2f GiB (%5.2f A) host=%8.2f GiB\n",
         what, (long long)n, st, dev / 1073741824.0, dev / a_bytes(n),
         host / 1073741824.0);
}

static void dn(int64_t n) {
  cusolverDnHandle_t h;
  cusolverDnParams_t p;
  if (cusolverDnCreate(&h) != CUSOLVER_STATUS_SUCCESS ||
      cusolverDnCreateParams(&p) != CUSOLVER_STATUS_SUCCESS) {
    printf("cusolverDnCreate failed\n");
    return;
  }
  for (int v = 1; v >= 0; --v) {
    size_t d = 0, hb = 0;
    cusolverStatus_t st = cusolverDnXsyevd_bufferSize(
        h, p, v ? CUSOLVER_EIG_MODE_VECTOR : CUSOLVER_EIG_MODE_NOVECTOR,
        CUBLAS_FILL_MODE_LOWER, n, CUDA_R_64F, NULL, n, CUDA_R_64F, NULL,
        CUDA_R_64F, &d, &hb);
    line(v ? "Xsyevd vectors" : "Xsyevd values", n, st, (double)d,
         (double)hb);
  }
  {
    size_t d = 0, hb = 0;
    double vl = 0, vu = 0;
    int64_t meig = 0;
    cusolverStatus_t st = cusolverDnXsyevdx_bufferSize(
        h, p, CUSOLVER_EIG_MODE_VECTOR, CUSOLVER_EIG_RANGE_ALL,
        CUBLAS_FILL_MODE_LOWER, n, CUDA_R_64F, NULL, n, &vl, &vu, 1, n, &meig,
        CUDA_R_64F, NULL, CUDA_R_64F, &d, &hb);
    line("Xsyevdx vectors all", n, st, (double)d, (double)hb);
  }
  if (n * n < INT32_MAX) {
    int lw = 0;
    cusolverStatus_t st = cusolverDnDsytrd_bufferSize(
        h, CUBLAS_FILL_MODE_LOWER, (int)n, NULL, (int)n, NULL, NULL, NULL,
        &lw);
    line("Dsytrd (32-bit)", n, st, 8.0 * lw, 0);
  }
  cusolverDnDestroyParams(p);
  cusolverDnDestroy(h);
}

static void mg(int64_t n, void *dummy) {
  cusolverMgHandle_t h;
  cudaLibMgGrid_t grid;
  cudaLibMgMatrixDesc_t desc;
  int dev = 0;
  if (cusolverMgCreate(&h) != CUSOLVER_STATUS_SUCCESS ||
      cusolverMgDeviceSelect(h, 1, &dev) != CUSOLVER_STATUS_SUCCESS ||
      cusolverMgCreateDeviceGrid(&grid, 1, 1, &dev,
                                 CUDALIBMG_GRID_MAPPING_COL_MAJOR) !=
          CUSOLVER_STATUS_SUCCESS ||
      cusolverMgCreateMatrixDesc(&desc, n, n, n, 1024, CUDA_R_64F, grid) !=
          CUSOLVER_STATUS_SUCCESS) {
    printf("cusolverMg set-up failed\n");
    return;
  }
  void *arr[1] = {dummy};
  for (int v = 1; v >= 0; --v) {
    int64_t lw = 0;
    cusolverStatus_t st = cusolverMgSyevd_bufferSize(
        h, v ? CUSOLVER_EIG_MODE_VECTOR : CUSOLVER_EIG_MODE_NOVECTOR,
        CUBLAS_FILL_MODE_LOWER, (int)n, arr, 1, 1, desc, dummy, CUDA_R_64F,
        CUDA_R_64F, &lw);
    line(v ? "MgSyevd vectors (1 GPU)" : "MgSyevd values (1 GPU)", n, st,
         8.0 * (double)lw, 0);
  }
  cusolverMgDestroyMatrixDesc(desc);
  cusolverMgDestroyGrid(grid);
  cusolverMgDestroy(h);
}

static void mp(int64_t n, void *dummy, cusolverMpHandle_t h,
               cusolverMpGrid_t grid) {
  cusolverMpMatrixDescriptor_t desc;
  const int64_t nb = 1024;
  if (cusolverMpCreateMatrixDesc(&desc, grid, CUDA_R_64F, n, n, nb, nb, 0, 0,
                                 n) != CUSOLVER_STATUS_SUCCESS) {
    printf("cusolverMpCreateMatrixDesc failed\n");
    return;
  }
  char compz[2] = {'Z', 0}, compi[2] = {'I', 0};
  size_t d = 0, hb = 0;
  cusolverStatus_t st = cusolverMpSyevd_bufferSize(
      h, compz, CUBLAS_FILL_MODE_LOWER, n, dummy, 1, 1, desc, dummy, dummy, 1,
      1, desc, CUDA_R_64F, &d, &hb);
  line("MpSyevd (1 rank, + Q = A)", n, st, (double)d, (double)hb);
  d = hb = 0;
  st = cusolverMpSytrd_bufferSize(h, CUBLAS_FILL_MODE_LOWER, n, dummy, 1, 1,
                                  desc, dummy, dummy, dummy, CUDA_R_64F, &d,
                                  &hb);
  line("MpSytrd (1 rank)", n, st, (double)d, (double)hb);
  d = hb = 0;
  int iwork = 0;
  st = cusolverMpStedc_bufferSize(h, compi, n, dummy, dummy, dummy, 1, 1, desc,
                                  CUDA_R_64F, &d, &hb, &iwork);
  line("MpStedc (1 rank, + Q = A)", n, st, (double)d, (double)hb);
  d = hb = 0;
  st = cusolverMpOrmtr_bufferSize(h, CUBLAS_SIDE_LEFT, CUBLAS_FILL_MODE_LOWER,
                                  CUBLAS_OP_N, n, n, dummy, 1, 1, desc, dummy,
                                  dummy, 1, 1, desc, CUDA_R_64F, &d, &hb);
  line("MpOrmtr (1 rank)", n, st, (double)d, (double)hb);
  cusolverMpDestroyMatrixDesc(desc);
}

int main(int argc, char **argv) {
  (void)argv;
  static const int64_t sizes[] = {8192, 54272, 65536, 81920, 94208};
  const int with_mp = argc > 1;
  void *dummy = NULL;
  if (cudaSetDevice(0) != cudaSuccess ||
      cudaMalloc(&dummy, 1 << 20) != cudaSuccess) {
    printf("no device\n");
    return 1;
  }
  ncclComm_t comm = NULL;
  cusolverMpHandle_t h = NULL;
  cusolverMpGrid_t grid = NULL;
  cudaStream_t s = NULL;
  if (with_mp) {
    int dev = 0;
    ncclResult_t nr = ncclCommInitAll(&comm, 1, &dev);
    cudaError_t ce = cudaStreamCreate(&s);
    cusolverStatus_t st1 = cusolverMpCreate(&h, 0, s);
    cusolverStatus_t st2 = cusolverMpCreateDeviceGrid(
        h, &grid, comm, 1, 1, CUSOLVERMP_GRID_MAPPING_COL_MAJOR);
    printf("mp set-up: nccl %d stream %d create %d grid %d\n", (int)nr,
           (int)ce, (int)st1, (int)st2);
    if (nr != ncclSuccess || st1 || st2) return 1;
  }
  for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; ++i) {
    dn(sizes[i]);
    mg(sizes[i], dummy);
    if (with_mp) mp(sizes[i], dummy, h, grid);
    fflush(stdout);
  }
  if (with_mp) {
    cusolverMpDestroyGrid(grid);
    cusolverMpDestroy(h);
    ncclCommDestroy(comm);
  }
  cudaFree(dummy);
  return 0;
}
