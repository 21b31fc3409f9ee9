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
  csrc/cuda/call.c
  csrc/cuda/handles.c
  csrc/cuda/mem.c
  csrc/engine/cuda_hermitian.c
  csrc/engine/cusolverdn/context.c
  csrc/engine/cusolverdn/cholesky.c
  csrc/engine/cusolverdn/potrs.c
  csrc/engine/cusolverdn/potri.c
  csrc/engine/cusolverdn/syevd.c
  csrc/engine/cusolverdn/syevd_tridiagonal.c
  csrc/engine/cusolverdn/sygvd.c
  csrc/cuda/blas.c
  csrc/engine/cusolvermg/context.c
  csrc/engine/cusolvermg/cholesky.c
  csrc/engine/cusolvermg/potrs.c
  csrc/engine/cusolvermg/potri.c
  csrc/engine/cusolvermg/syevd.c
  csrc/engine/cusolvermg/tiles.c
  csrc/engine/cusolvermg/cuda_potrf.c
  csrc/engine/cusolvermg/cuda_potri.c
  csrc/engine/cusolvermg/cuda_lu.c
  csrc/engine/cusolvermg/lu_solve.c
  csrc/engine/cusolverdn/lu_solve.c
  csrc/engine/cusolverdn/gesvd.c
  csrc/engine/cusolverdn/qr.c
  csrc/engine/cusolverdn/workspace.c
  csrc/engine/cusolverdn/mixed.c
  csrc/engine/cusolverdn/tf32_potrf.c
  csrc/engine/cusolverdn/tri_solve.c
  csrc/cuda/convert.c
  csrc/cuda/ptx.c
  csrc/engine/eig_mgpu/context.c
  csrc/engine/eig_mgpu/syevd.c
  csrc/engine/eig_mgpu/sytrd.c
  csrc/engine/eig_mgpu/sytrd_replicated.c
  csrc/engine/eig_mgpu/sytrd_owner.c
  csrc/engine/eig_mgpu/ormtr.c
  csrc/engine/eig_mgpu/stedc.c
  csrc/engine/eig_mgpu/kernels.c
  csrc/engine/gather/context.c
  csrc/engine/gather/potrs.c
  csrc/engine/gather/potri.c
  csrc/engine/gather/syevd.c
  csrc/engine/gather/sygvd.c
  csrc/engine/gather/lu_solve.c
  csrc/engine/gather/gesvd.c
  csrc/engine/gather/qr.c
  csrc/engine/gather/mixed.c
  csrc/engine/gather/workspace.c
  csrc/share/cuda_share.c
  csrc/share/cuda_driver.c
  csrc/cuda/comm_nccl.c
  csrc/engine/cusolvermp/loader.c
  csrc/engine/cusolvermp/context.c
  csrc/engine/cusolvermp/transpose.c
  csrc/engine/cusolvermp/potrs.c
  csrc/engine/cusolvermp/potri.c
  csrc/engine/cusolvermp/syevd.c
  csrc/engine/cusolvermp/sygvd.c
  csrc/engine/cusolvermp/lu_solve.c
  csrc/engine/cusolvermp/qr.c
  csrc/engine/cusolvermp/cholesky.c
  csrc/engine/cusolvermp/one_gpu.c
  csrc/engine/cusolverdn_local/context.c)
# NCCL and cuSOLVERMp are dlopen'ed (cuda/comm_nccl.c,
# engine/cusolvermp/loader.c): no link to either, only -ldl. Their headers:
# nccl.h from the toolkit; cusolverMp.h is not needed (engine/cusolvermp/
# api.h declares what jaxmg calls).
target_link_libraries(jaxmg_cuda PRIVATE jaxmg_core CUDA::cudart CUDA::cublas CUDA::cusolver
                      "${JAXMG_CUSOLVERMG_LIBRARY}" ${CMAKE_DL_LIBS})

# Where cuSOLVERMp's header is found (-DJAXMG_CUSOLVERMP_INCLUDE=DIR, or the
# nvidia-cusolvermp wheel in the Python environment), api.h is checked
# against it: engine/cusolvermp/api_check.c assigns every real function to
# our pointer types, so a mismatch fails the build. The object is built with
# the library and linked into nothing.
set(JAXMG_CUSOLVERMP_HINTS "${JAXMG_CUSOLVERMP_INCLUDE}")
if(Python_EXECUTABLE)
  execute_process(
    COMMAND "${Python_EXECUTABLE}" -c "import sysconfig; print(sysconfig.get_paths()['purelib'])"
    OUTPUT_VARIABLE _jaxmg_purelib OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
  if(_jaxmg_purelib)
    list(APPEND JAXMG_CUSOLVERMP_HINTS "${_jaxmg_purelib}/nvidia/cu13/include"
         "${_jaxmg_purelib}/nvidia/cusolvermp/include")
  endif()
endif()
find_path(JAXMG_CUSOLVERMP_HEADER_DIR cusolverMp.h HINTS ${JAXMG_CUSOLVERMP_HINTS}
          NO_DEFAULT_PATH)
if(JAXMG_CUSOLVERMP_HEADER_DIR)
  message(STATUS "Checking engine/cusolvermp/api.h against ${JAXMG_CUSOLVERMP_HEADER_DIR}/cusolverMp.h")
  add_library(jaxmg_cusolvermp_api_check OBJECT csrc/engine/cusolvermp/api_check.c)
  target_include_directories(jaxmg_cusolvermp_api_check PRIVATE csrc
                             "${JAXMG_CUSOLVERMP_HEADER_DIR}")
  target_link_libraries(jaxmg_cusolvermp_api_check PRIVATE CUDA::cudart CUDA::cublas
                        CUDA::cusolver)
  add_dependencies(jaxmg_cuda jaxmg_cusolvermp_api_check)
else()
  message(STATUS "cusolverMp.h not found: engine/cusolvermp/api.h is not checked (set JAXMG_CUSOLVERMP_INCLUDE)")
endif()
# Found at run time from the NVIDIA wheels that jax[cuda13] installs
# (nvidia-cuda-runtime, nvidia-cublas, nvidia-cusolver put them in
# site-packages/nvidia/cu13/lib, beside site-packages/jaxmg), else from the
# toolkit it was built against. The Python layer also loads them from those
# wheels wherever they are on sys.path (_native.py), for installs where
# jaxmg is not beside them (pip install --target).
# JAXMG_CUDA_FALLBACK_RPATH: the toolkit's folder on the machines that will
# run it (scripts/build-wheel.sh: /usr/local/cuda/lib64); by default the
# one built against.
set(JAXMG_CUDA_FALLBACK_RPATH "${CUDAToolkit_LIBRARY_DIR}" CACHE STRING
    "The CUDA toolkit's library folder libjaxmg_cuda.so falls back on")
set_target_properties(jaxmg_cuda PROPERTIES
  INSTALL_RPATH "\$ORIGIN/../nvidia/cu13/lib;${JAXMG_CUDA_FALLBACK_RPATH}"
  BUILD_RPATH "${CUDAToolkit_LIBRARY_DIR}")
install(TARGETS jaxmg_cuda LIBRARY DESTINATION jaxmg)
