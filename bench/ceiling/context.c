/* The device set: peer access, the cuSOLVERMg handle and its 1 x G grid, one
 * cuBLAS handle and one cuRAND generator per device. Created once per
 * process, in the order NVIDIA's cuSOLVERMg samples and jaxmg's engine use. */
#include <stdio.h>
#include <string.h>

#include "ceiling.h"

static int enable_peer_access(const ctx_t *c) {
  for (int i = 0; i < c->ndev; ++i) {
    if (CUDA(cudaSetDevice(c->dev[i]))) return -1;
    for (int j = 0; j < c->ndev; ++j) {
      if (j == i) continue;
      int can = 0;
      if (CUDA(cudaDeviceCanAccessPeer(&can, c->dev[i], c->dev[j]))) return -1;
      if (!can) {
        fprintf(stderr,
                "ceiling: GPU %d cannot access GPU %d directly; cuSOLVERMg "
                "needs peer access between all GPUs\n",
                c->dev[i], c->dev[j]);
        return -1;
      }
      cudaError_t e = cudaDeviceEnablePeerAccess(c->dev[j], 0);
      if (e == cudaErrorPeerAccessAlreadyEnabled) {
        (void)cudaGetLastError();
        continue;
      }
      if (check_cuda(e, "cudaDeviceEnablePeerAccess")) return -1;
    }
  }
  return 0;
}

int ctx_init(ctx_t *c, int ndev, unsigned long long seed) {
  memset(c, 0, sizeof *c);
  c->ndev = ndev;
  for (int d = 0; d < ndev; ++d) c->dev[d] = d;
  if (enable_peer_access(c)) return -1;
  if (SOLVER(cusolverMgCreate(&c->mg))) return -1;
  if (SOLVER(cusolverMgDeviceSelect(c->mg, ndev, c->dev))) return -1;
  if (SOLVER(cusolverMgCreateDeviceGrid(&c->grid, 1, ndev, c->dev,
                                        CUDALIBMG_GRID_MAPPING_COL_MAJOR)))
    return -1;
  for (int d = 0; d < ndev; ++d) {
    if (CUDA(cudaSetDevice(c->dev[d]))) return -1;
    if (BLAS(cublasCreate(&c->blas[d]))) return -1;
    /* A generator belongs to the device current at its creation. */
    if (RAND(
            curandCreateGenerator(&c->rng[d], CURAND_RNG_PSEUDO_PHILOX4_32_10)))
      return -1;
    if (RAND(curandSetPseudoRandomGeneratorSeed(c->rng[d], seed + 7919u * d)))
      return -1;
  }
  return CUDA(cudaSetDevice(c->dev[0]));
}

void ctx_destroy(ctx_t *c) {
  for (int d = 0; d < c->ndev; ++d) {
    if (cudaSetDevice(c->dev[d]) != cudaSuccess) continue;
    if (c->rng[d]) (void)RAND(curandDestroyGenerator(c->rng[d]));
    if (c->blas[d]) (void)BLAS(cublasDestroy(c->blas[d]));
  }
  if (c->grid) (void)SOLVER(cusolverMgDestroyGrid(c->grid));
  if (c->mg) (void)SOLVER(cusolverMgDestroy(c->mg));
  memset(c, 0, sizeof *c);
}

int sync_all(const ctx_t *c) {
  for (int d = c->ndev - 1; d >= 0; --d) {
    if (CUDA(cudaSetDevice(c->dev[d]))) return -1;
    if (CUDA(cudaDeviceSynchronize())) return -1;
  }
  return 0;
}
