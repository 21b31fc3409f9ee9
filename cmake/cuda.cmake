# libjaxmg_cuda.so: the same ops for platform "CUDA", on cuSOLVERDn (one GPU)
# and cuSOLVERMg (several).
# Included from CMakeLists.txt when the CUDA toolkit is found. The library is C:
# it calls the CUDA runtime, cuBLAS, cuSOLVER and cuSOLVERMg through their C
# APIs.
find_library(JAXMG_CUSOLVERMG_LIBRARY cusolverMg
  HINTS "${CUDAToolkit_LIBRARY_DIR}" "${CUDAToolkit_LIBRARY_ROOT}/lib64")
if(NOT JAXMG_CUSOLVERMG_LIBRARY)
  message(WARNING "CUDA toolkit found but not libcusolverMg: building libjaxmg_cpu.so only")
  return()
endif()
message(STATUS "Building libjaxmg_cuda.so (CUDA ${CUDAToolkit_VERSION}, ${JAXMG_CUSOLVERMG_LIBRARY})")

add_library(jaxmg_cuda SHARED
  csrc/ffi/cuda_targets.c
  csrc/cuda/check.c
  csrc/cuda/handles.c
  csrc/cuda/mem.c
  csrc/cuda/hermitian.c
  csrc/engine/cusolverdn/context.c
  csrc/engine/cusolverdn/cholesky.c
  csrc/engine/cusolverdn/potrs.c
  csrc/engine/cusolverdn/potri.c
  csrc/engine/cusolverdn/syevd.c
  csrc/cuda/blas.c
  csrc/engine/cusolvermg/context.c
  csrc/engine/cusolvermg/cholesky.c
  csrc/engine/cusolvermg/potrs.c
  csrc/engine/cusolvermg/potri.c
  csrc/engine/cusolvermg/syevd.c
  csrc/engine/cusolvermg/tiles.c
  csrc/engine/cusolvermg/cuda_potrf.c
  csrc/engine/cusolvermg/cuda_lu.c
  csrc/engine/cusolvermg/lu_solve.c
  csrc/engine/cusolverdn/lu_solve.c
  csrc/engine/gather/context.c
  csrc/engine/gather/potrs.c
  csrc/engine/gather/potri.c
  csrc/engine/gather/syevd.c
  csrc/engine/gather/lu_solve.c
  csrc/share/cuda_share.c
  csrc/share/cuda_driver.c)
target_link_libraries(jaxmg_cuda PRIVATE jaxmg_core CUDA::cudart CUDA::cublas CUDA::cusolver
                      "${JAXMG_CUSOLVERMG_LIBRARY}")
# Found at run time from JAX's own nvidia-* wheels (preloaded by the Python
# layer) or, failing that, from the toolkit it was built against.
set_target_properties(jaxmg_cuda PROPERTIES
  INSTALL_RPATH "${CUDAToolkit_LIBRARY_DIR}"
  BUILD_RPATH "${CUDAToolkit_LIBRARY_DIR}")
install(TARGETS jaxmg_cuda LIBRARY DESTINATION jaxmg)
