/* The CUDA driver's virtual-memory entry points, reached through the runtime
 * (cudaGetDriverEntryPointByVersion) instead of linking libcuda: a library
 * linked to libcuda cannot even be loaded where no driver is installed (build
 * machines, CPU-only CI), and the Python layer must be able to load
 * libjaxmg_cuda.so there to say "no CUDA here". Used to share XLA's buffers
 * between processes (share/cuda_share.c). */
#ifndef JMG_SHARE_CUDA_DRIVER_H
#define JMG_SHARE_CUDA_DRIVER_H

#include <cuda.h>

#include "common/error.h"

typedef struct jmg_cu_driver {
  CUresult (*get_error_name)(CUresult, const char **);
  CUresult (*pointer_get_attribute)(void *, CUpointer_attribute, CUdeviceptr);
  CUresult (*mem_get_address_range)(CUdeviceptr *, size_t *, CUdeviceptr);
  CUresult (*mem_retain_allocation_handle)(CUmemGenericAllocationHandle *,
                                           void *);
  CUresult (*mem_export_to_shareable_handle)(void *,
                                             CUmemGenericAllocationHandle,
                                             CUmemAllocationHandleType,
                                             unsigned long long);
  CUresult (*mem_import_from_shareable_handle)(CUmemGenericAllocationHandle *,
                                               void *,
                                               CUmemAllocationHandleType);
  CUresult (*mem_release)(CUmemGenericAllocationHandle);
  CUresult (*mem_address_reserve)(CUdeviceptr *, size_t, size_t, CUdeviceptr,
                                  unsigned long long);
  CUresult (*mem_address_free)(CUdeviceptr, size_t);
  CUresult (*mem_map)(CUdeviceptr, size_t, size_t, CUmemGenericAllocationHandle,
                      unsigned long long);
  CUresult (*mem_unmap)(CUdeviceptr, size_t);
  CUresult (*mem_set_access)(CUdeviceptr, size_t, const CUmemAccessDesc *,
                             size_t);
} jmg_cu_driver;

/* The table, looked up once per process; fails naming the missing entry. */
int jmg_cu_driver_get(const char *op, const jmg_cu_driver **out,
                      jmg_error *err);

/* 0, or fills err with the driver's error name for call (the entry's name,
 * "cuMemMap") and returns its negative code. */
int jmg_cu_check(const jmg_cu_driver *d, CUresult r, const char *op,
                 const char *call, jmg_error *err);

#endif
