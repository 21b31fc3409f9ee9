/* The driver's virtual-memory entry points through the runtime (see
 * cuda_driver.h). */
#define _POSIX_C_SOURCE 200809L
#include "share/cuda_driver.h"

#include <cuda_runtime_api.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

static jmg_cu_driver g_driver;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static const char *g_missing; /* the first entry not found, or NULL */
static int g_missing_why;     /* cudaError_t, or the query result */

/* Every entry exists since CUDA 10.2 in this form (version 12000 asks for the
 * ABI of CUDA 12, the oldest runtime this library is built with). */
static void lookup(void **slot, const char *name) {
  if (g_missing != NULL) return;
  enum cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSuccess;
  cudaError_t e = cudaGetDriverEntryPointByVersion(name, slot, 12000,
                                                   cudaEnableDefault, &found);
  if (e != cudaSuccess || found != cudaDriverEntryPointSuccess ||
      *slot == NULL) {
    g_missing = name;
    g_missing_why = e != cudaSuccess ? (int)e : (int)found;
  }
}

#define LOOKUP(field, name) lookup((void **)&g_driver.field, name)

static void load(void) {
  LOOKUP(get_error_name, "cuGetErrorName");
  LOOKUP(pointer_get_attribute, "cuPointerGetAttribute");
  LOOKUP(mem_get_address_range, "cuMemGetAddressRange");
  LOOKUP(mem_retain_allocation_handle, "cuMemRetainAllocationHandle");
  LOOKUP(mem_export_to_shareable_handle, "cuMemExportToShareableHandle");
  LOOKUP(mem_import_from_shareable_handle, "cuMemImportFromShareableHandle");
  LOOKUP(mem_release, "cuMemRelease");
  LOOKUP(mem_address_reserve, "cuMemAddressReserve");
  LOOKUP(mem_address_free, "cuMemAddressFree");
  LOOKUP(mem_map, "cuMemMap");
  LOOKUP(mem_unmap, "cuMemUnmap");
  LOOKUP(mem_set_access, "cuMemSetAccess");
}

int jmg_cu_driver_get(const char *op, const jmg_cu_driver **out,
                      jmg_error *err) {
  pthread_once(&g_once, load);
  if (g_missing != NULL)
    return jmg_error_set(err, JMG_ECUDA, op, "cudaGetDriverEntryPointByVersion",
                         "the CUDA driver has no %s (error or query result "
                         "%d)",
                         g_missing, g_missing_why);
  *out = &g_driver;
  return 0;
}

int jmg_cu_check(const jmg_cu_driver *d, CUresult r, const char *op,
                 const char *call, jmg_error *err) {
  if (r == CUDA_SUCCESS) return 0;
  const char *name = NULL;
  if (d->get_error_name(r, &name) != CUDA_SUCCESS || name == NULL)
    name = "unknown CUresult";
  return jmg_error_set(err,
                       r == CUDA_ERROR_OUT_OF_MEMORY ? JMG_ENOMEM : JMG_ECUDA,
                       op, call, "%s (%d)", name, (int)r);
}
