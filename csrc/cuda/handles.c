/* Device sets and their handles (cuda/handles.h): a list searched under one
 * mutex, each set with a mutex of its own held through a call. */
#define _POSIX_C_SOURCE 200809L
#include "cuda/handles.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "cuda/check.h"

typedef struct device_set {
  jmg_cuda_handles h; /* first: release finds the set from its handles */
  struct device_set *next;
  pthread_mutex_t mu;
} device_set;

static pthread_mutex_t g_sets_mu = PTHREAD_MUTEX_INITIALIZER;
static device_set *g_sets;

static int enable_peer_access(const int *devices, int ndev, const char *who,
                              jmg_error *err) {
  for (int i = 0; i < ndev; ++i) {
    int rc = JMG_CUDA_TRY(cudaSetDevice(devices[i]), NULL, err);
    if (rc != 0) return rc;
    for (int j = 0; j < ndev; ++j) {
      if (devices[j] == devices[i]) continue;
      int can = 0;
      rc = JMG_CUDA_TRY(cudaDeviceCanAccessPeer(&can, devices[i], devices[j]),
                        NULL, err);
      if (rc != 0) return rc;
      if (!can)
        return jmg_error_set(err, JMG_EUNSUPPORTED, NULL,
                             "cudaDeviceCanAccessPeer",
                             "GPU %d cannot access GPU %d directly; "
                             "%s needs peer access between all GPUs",
                             devices[i], devices[j], who);
      cudaError_t e = cudaDeviceEnablePeerAccess(devices[j], 0);
      if (e == cudaErrorPeerAccessAlreadyEnabled) {
        (void)cudaGetLastError();
        continue;
      }
      rc = jmg_cuda_check(e, NULL, "cudaDeviceEnablePeerAccess", err);
      if (rc != 0) return rc;
    }
  }
  return 0;
}

static void destroy_set(device_set *s) {
  for (int i = 0; i < s->h.ndev; ++i) {
    cudaSetDevice(s->h.devices[i]);
    if (s->h.blas[i]) cublasDestroy(s->h.blas[i]);
    if (s->h.dn[i]) cusolverDnDestroy(s->h.dn[i]);
  }
  if (s->h.dn_params) cusolverDnDestroyParams(s->h.dn_params);
  pthread_mutex_destroy(&s->mu);
  free(s);
}

static int create_set(const int *devices, int ndev, const char *who,
                      device_set **out, jmg_error *err) {
  device_set *s = calloc(1, sizeof *s);
  if (s == NULL)
    return jmg_error_set(err, JMG_ENOMEM, NULL, "malloc",
                         "cannot allocate the %s context", who);
  pthread_mutex_init(&s->mu, NULL);
  s->h.ndev = ndev;
  memcpy(s->h.devices, devices, (size_t)ndev * sizeof *devices);
  int rc = enable_peer_access(devices, ndev, who, err);
  for (int i = 0; rc == 0 && i < ndev; ++i) {
    rc = JMG_CUDA_TRY(cudaSetDevice(devices[i]), NULL, err);
    if (rc == 0) rc = JMG_CUBLAS_TRY(cublasCreate(&s->h.blas[i]), NULL, err);
    if (rc == 0)
      rc = JMG_CUSOLVER_TRY(cusolverDnCreate(&s->h.dn[i]), NULL, err);
  }
  if (rc == 0)
    rc = JMG_CUSOLVER_TRY(cusolverDnCreateParams(&s->h.dn_params), NULL, err);
  if (rc != 0) {
    destroy_set(s);
    return rc;
  }
  *out = s;
  return 0;
}

int jmg_cuda_handles_acquire(void *const *device_ctx, int ndev, const char *who,
                             jmg_cuda_handles **out, jmg_error *err) {
  if (ndev > JMG_CUDA_MAX_DEVICES)
    return jmg_error_set(err, JMG_EUNSUPPORTED, NULL, who,
                         "%d GPUs requested; %s drives at most %d", ndev, who,
                         JMG_CUDA_MAX_DEVICES);
  int devices[JMG_CUDA_MAX_DEVICES];
  for (int d = 0; d < ndev; ++d) {
    devices[d] = ((const jmg_cuda_device *)device_ctx[d])->device;
    for (int e = 0; e < d; ++e)
      if (devices[e] == devices[d])
        return jmg_error_set(err, JMG_EINVAL, NULL, who,
                             "shards %d and %d are both on GPU %d; every "
                             "shard must be on its own GPU",
                             e, d, devices[d]);
  }
  pthread_mutex_lock(&g_sets_mu);
  device_set *s = g_sets;
  while (s != NULL &&
         !(s->h.ndev == ndev &&
           memcmp(s->h.devices, devices, (size_t)ndev * sizeof *devices) == 0))
    s = s->next;
  int rc = 0;
  if (s == NULL) {
    rc = create_set(devices, ndev, who, &s, err);
    if (rc == 0) {
      s->next = g_sets;
      g_sets = s;
    }
  }
  pthread_mutex_unlock(&g_sets_mu);
  if (rc != 0) return rc;
  pthread_mutex_lock(&s->mu);
  *out = &s->h;
  return 0;
}

void jmg_cuda_handles_release(jmg_cuda_handles *h) {
  device_set *s = (device_set *)h;
  pthread_mutex_unlock(&s->mu);
}
