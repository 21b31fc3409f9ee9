/* cuSOLVERMp as jaxmg calls it: our own declarations of exactly the
 * functions we use, so that libjaxmg_cuda.so builds without cuSOLVERMp's
 * header and loads the library at run time (loader.c).
 *
 * The opaque types carry the library's own struct tags, and the grid
 * mapping is passed as the unsigned int gcc makes of the library's enum, so
 * that api_check.c (built only where cmake finds cusolverMp.h) can assign
 * every real function to our pointer type: any difference between these
 * declarations and the real header fails that build under -Werror.
 * Checked against cuSOLVERMp 0.8.0's header; the calls below are the same
 * in 0.9. */
#ifndef JMG_ENGINE_CUSOLVERMP_API_H
#define JMG_ENGINE_CUSOLVERMP_API_H

#include <cublas_api.h>
#include <cuda_runtime_api.h>
#include <cusolver_common.h>
#include <library_types.h>
#include <nccl.h>
#include <stddef.h>
#include <stdint.h>

struct cusolverMpHandle;
struct cusolverMpGrid;
struct cusolverMpMatrixDescriptor;
typedef struct cusolverMpHandle *jmg_mp_handle_t;
typedef struct cusolverMpGrid *jmg_mp_grid_t;
typedef struct cusolverMpMatrixDescriptor *jmg_mp_desc_t;

/* cusolverMpGridMapping_t's values. */
enum { JMG_MP_GRID_COL_MAJOR = 0, JMG_MP_GRID_ROW_MAJOR = 1 };

typedef cusolverStatus_t (*jmg_mp_create_fn)(jmg_mp_handle_t *handle,
                                             int device, cudaStream_t stream);
typedef cusolverStatus_t (*jmg_mp_destroy_fn)(jmg_mp_handle_t handle);
typedef cusolverStatus_t (*jmg_mp_set_stream_fn)(jmg_mp_handle_t handle,
                                                 cudaStream_t stream);
typedef cusolverStatus_t (*jmg_mp_get_version_fn)(jmg_mp_handle_t handle,
                                                  int *version);
typedef cusolverStatus_t (*jmg_mp_create_grid_fn)(
    jmg_mp_handle_t handle, jmg_mp_grid_t *grid, const ncclComm_t comm,
    int32_t num_row_devices, int32_t num_col_devices,
    const unsigned int mapping);
typedef cusolverStatus_t (*jmg_mp_destroy_grid_fn)(jmg_mp_grid_t grid);
typedef cusolverStatus_t (*jmg_mp_create_desc_fn)(
    jmg_mp_desc_t *desc, jmg_mp_grid_t grid, cudaDataType data_type,
    int64_t m, int64_t n, int64_t mb, int64_t nb, uint32_t rsrc,
    uint32_t csrc, int64_t lld);
typedef cusolverStatus_t (*jmg_mp_destroy_desc_fn)(jmg_mp_desc_t desc);

typedef cusolverStatus_t (*jmg_mp_potrf_buffer_size_fn)(
    jmg_mp_handle_t handle, cublasFillMode_t uplo, int64_t n, const void *a,
    int64_t ia, int64_t ja, jmg_mp_desc_t desc_a, cudaDataType_t compute_type,
    size_t *device_bytes, size_t *host_bytes);
typedef cusolverStatus_t (*jmg_mp_potrf_fn)(
    jmg_mp_handle_t handle, cublasFillMode_t uplo, int64_t n, void *a,
    int64_t ia, int64_t ja, jmg_mp_desc_t desc_a, cudaDataType_t compute_type,
    void *d_work, size_t device_bytes, void *h_work, size_t host_bytes,
    int *info);
typedef cusolverStatus_t (*jmg_mp_potrs_buffer_size_fn)(
    jmg_mp_handle_t handle, cublasFillMode_t uplo, int64_t n, int64_t nrhs,
    const void *a, int64_t ia, int64_t ja, jmg_mp_desc_t desc_a,
    const void *b, int64_t ib, int64_t jb, jmg_mp_desc_t desc_b,
    cudaDataType_t compute_type, size_t *device_bytes, size_t *host_bytes);
typedef cusolverStatus_t (*jmg_mp_potrs_fn)(
    jmg_mp_handle_t handle, cublasFillMode_t uplo, int64_t n, int64_t nrhs,
    const void *a, int64_t ia, int64_t ja, jmg_mp_desc_t desc_a, void *b,
    int64_t ib, int64_t jb, jmg_mp_desc_t desc_b, cudaDataType_t compute_type,
    void *d_work, size_t device_bytes, void *h_work, size_t host_bytes,
    int *info);
typedef cusolverStatus_t (*jmg_mp_getrf_buffer_size_fn)(
    jmg_mp_handle_t handle, int64_t m, int64_t n, void *a, int64_t ia,
    int64_t ja, jmg_mp_desc_t desc_a, int64_t *ipiv,
    cudaDataType_t compute_type, size_t *device_bytes, size_t *host_bytes);
typedef cusolverStatus_t (*jmg_mp_getrf_fn)(
    jmg_mp_handle_t handle, int64_t m, int64_t n, void *a, int64_t ia,
    int64_t ja, jmg_mp_desc_t desc_a, int64_t *ipiv,
    cudaDataType_t compute_type, void *d_work, size_t device_bytes,
    void *h_work, size_t host_bytes, int *info);
typedef cusolverStatus_t (*jmg_mp_getrs_buffer_size_fn)(
    jmg_mp_handle_t handle, cublasOperation_t trans, int64_t n, int64_t nrhs,
    const void *a, int64_t ia, int64_t ja, jmg_mp_desc_t desc_a,
    const int64_t *ipiv, void *b, int64_t ib, int64_t jb,
    jmg_mp_desc_t desc_b, cudaDataType_t compute_type, size_t *device_bytes,
    size_t *host_bytes);
typedef cusolverStatus_t (*jmg_mp_getrs_fn)(
    jmg_mp_handle_t handle, cublasOperation_t trans, int64_t n, int64_t nrhs,
    const void *a, int64_t ia, int64_t ja, jmg_mp_desc_t desc_a,
    const int64_t *ipiv, void *b, int64_t ib, int64_t jb,
    jmg_mp_desc_t desc_b, cudaDataType_t compute_type, void *d_work,
    size_t device_bytes, void *h_work, size_t host_bytes, int *info);
typedef cusolverStatus_t (*jmg_mp_syevd_buffer_size_fn)(
    jmg_mp_handle_t handle, char *compz, cublasFillMode_t uplo, int64_t n,
    void *a, int64_t ia, int64_t ja, jmg_mp_desc_t desc_a, void *d,
    void *q, int64_t iq, int64_t jq, jmg_mp_desc_t desc_q,
    cudaDataType_t compute_type, size_t *device_bytes, size_t *host_bytes);
typedef cusolverStatus_t (*jmg_mp_syevd_fn)(
    jmg_mp_handle_t handle, char *compz, cublasFillMode_t uplo, int64_t n,
    void *a, int64_t ia, int64_t ja, jmg_mp_desc_t desc_a, void *d, void *q,
    int64_t iq, int64_t jq, jmg_mp_desc_t desc_q, cudaDataType_t compute_type,
    void *d_work, size_t device_bytes, void *h_work, size_t host_bytes,
    int *info);
typedef cusolverStatus_t (*jmg_mp_sygvd_buffer_size_fn)(
    jmg_mp_handle_t handle, cusolverEigType_t ibtype, cusolverEigMode_t jobz,
    cublasFillMode_t uplo, int64_t m, int64_t ia, int64_t ja,
    jmg_mp_desc_t desc_a, int64_t ib, int64_t jb, jmg_mp_desc_t desc_b,
    int64_t iz, int64_t jz, jmg_mp_desc_t desc_z, cudaDataType_t compute_type,
    size_t *device_bytes, size_t *host_bytes);
typedef cusolverStatus_t (*jmg_mp_sygvd_fn)(
    jmg_mp_handle_t handle, cusolverEigType_t ibtype, cusolverEigMode_t jobz,
    cublasFillMode_t uplo, int64_t m, void *a, int64_t ia, int64_t ja,
    jmg_mp_desc_t desc_a, void *b, int64_t ib, int64_t jb,
    jmg_mp_desc_t desc_b, void *w, void *z, int64_t iz, int64_t jz,
    jmg_mp_desc_t desc_z, cudaDataType_t compute_type, void *d_work,
    size_t device_bytes, void *h_work, size_t host_bytes, int *info);
typedef cusolverStatus_t (*jmg_mp_gels_buffer_size_fn)(
    jmg_mp_handle_t handle, cublasOperation_t trans, int64_t m, int64_t n,
    int64_t nrhs, void *a, int64_t ia, int64_t ja, jmg_mp_desc_t desc_a,
    void *b, int64_t ib, int64_t jb, jmg_mp_desc_t desc_b,
    cudaDataType_t compute_type, size_t *device_bytes, size_t *host_bytes);
typedef cusolverStatus_t (*jmg_mp_gels_fn)(
    jmg_mp_handle_t handle, cublasOperation_t trans, int64_t m, int64_t n,
    int64_t nrhs, void *a, int64_t ia, int64_t ja, jmg_mp_desc_t desc_a,
    void *b, int64_t ib, int64_t jb, jmg_mp_desc_t desc_b,
    cudaDataType_t compute_type, void *d_work, size_t device_bytes,
    void *h_work, size_t host_bytes, int *info);
typedef cusolverStatus_t (*jmg_mp_laset_fn)(
    jmg_mp_handle_t handle, cublasFillMode_t uplo, int64_t m, int64_t n,
    const void *alpha, const void *beta, void *a, int64_t ia, int64_t ja,
    jmg_mp_desc_t desc_a, int *info);

typedef cusolverStatus_t (*jmg_mp_geqrf_buffer_size_fn)(
    jmg_mp_handle_t handle, int64_t m, int64_t n, void *a, int64_t ia,
    int64_t ja, jmg_mp_desc_t desc_a, cudaDataType_t compute_type,
    size_t *device_bytes, size_t *host_bytes);
typedef cusolverStatus_t (*jmg_mp_geqrf_fn)(
    jmg_mp_handle_t handle, int64_t m, int64_t n, void *a, int64_t ia,
    int64_t ja, jmg_mp_desc_t desc_a, void *tau, cudaDataType_t compute_type,
    void *d_work, size_t device_bytes, void *h_work, size_t host_bytes,
    int *info);
typedef cusolverStatus_t (*jmg_mp_orgqr_buffer_size_fn)(
    jmg_mp_handle_t handle, int64_t m, int64_t n, int64_t k, const void *a,
    int64_t ia, int64_t ja, jmg_mp_desc_t desc_a, const void *tau,
    cudaDataType_t compute_type, size_t *device_bytes, size_t *host_bytes);
typedef cusolverStatus_t (*jmg_mp_orgqr_fn)(
    jmg_mp_handle_t handle, int64_t m, int64_t n, int64_t k, void *a,
    int64_t ia, int64_t ja, jmg_mp_desc_t desc_a, const void *tau,
    cudaDataType_t compute_type, void *d_work, size_t device_bytes,
    void *h_work, size_t host_bytes, int *info);

typedef cusolverStatus_t (*jmg_mp_stedc_buffer_size_fn)(
    jmg_mp_handle_t handle, char *compz, int64_t n, void *d, void *e, void *q,
    int64_t iq, int64_t jq, jmg_mp_desc_t desc_q, cudaDataType_t compute_type,
    size_t *device_bytes, size_t *host_bytes, int *iwork);
typedef cusolverStatus_t (*jmg_mp_stedc_fn)(
    jmg_mp_handle_t handle, char *compz, int64_t n, void *d, void *e, void *q,
    int64_t iq, int64_t jq, jmg_mp_desc_t desc_q, cudaDataType_t compute_type,
    void *d_work, size_t device_bytes, void *h_work, size_t host_bytes,
    int *info);

/* Every function jaxmg calls: X(field, library name). loader.c looks each
 * up; api_check.c assigns each real one to its field. */
#define JMG_MP_FUNCTIONS(X)                                 \
  X(create, cusolverMpCreate)                               \
  X(destroy, cusolverMpDestroy)                             \
  X(set_stream, cusolverMpSetStream)                        \
  X(get_version, cusolverMpGetVersion)                      \
  X(create_grid, cusolverMpCreateDeviceGrid)                \
  X(destroy_grid, cusolverMpDestroyGrid)                    \
  X(create_desc, cusolverMpCreateMatrixDesc)                \
  X(destroy_desc, cusolverMpDestroyMatrixDesc)              \
  X(potrf_buffer_size, cusolverMpPotrf_bufferSize)          \
  X(potrf, cusolverMpPotrf)                                 \
  X(potrs_buffer_size, cusolverMpPotrs_bufferSize)          \
  X(potrs, cusolverMpPotrs)                                 \
  X(getrf_buffer_size, cusolverMpGetrf_bufferSize)          \
  X(getrf, cusolverMpGetrf)                                 \
  X(getrs_buffer_size, cusolverMpGetrs_bufferSize)          \
  X(getrs, cusolverMpGetrs)                                 \
  X(syevd_buffer_size, cusolverMpSyevd_bufferSize)          \
  X(syevd, cusolverMpSyevd)                                 \
  X(sygvd_buffer_size, cusolverMpSygvd_bufferSize)          \
  X(sygvd, cusolverMpSygvd)                                 \
  X(gels_buffer_size, cusolverMpGels_bufferSize)            \
  X(gels, cusolverMpGels)                                   \
  X(laset, cusolverMpLaset)                                 \
  X(geqrf_buffer_size, cusolverMpGeqrf_bufferSize)          \
  X(geqrf, cusolverMpGeqrf)                                 \
  X(orgqr_buffer_size, cusolverMpOrgqr_bufferSize)          \
  X(orgqr, cusolverMpOrgqr)                                  \
  X(stedc_buffer_size, cusolverMpStedc_bufferSize)          \
  X(stedc, cusolverMpStedc)

typedef struct jmg_mp_api {
  jmg_mp_create_fn create;
  jmg_mp_destroy_fn destroy;
  jmg_mp_set_stream_fn set_stream;
  jmg_mp_get_version_fn get_version;
  jmg_mp_create_grid_fn create_grid;
  jmg_mp_destroy_grid_fn destroy_grid;
  jmg_mp_create_desc_fn create_desc;
  jmg_mp_destroy_desc_fn destroy_desc;
  jmg_mp_potrf_buffer_size_fn potrf_buffer_size;
  jmg_mp_potrf_fn potrf;
  jmg_mp_potrs_buffer_size_fn potrs_buffer_size;
  jmg_mp_potrs_fn potrs;
  jmg_mp_getrf_buffer_size_fn getrf_buffer_size;
  jmg_mp_getrf_fn getrf;
  jmg_mp_getrs_buffer_size_fn getrs_buffer_size;
  jmg_mp_getrs_fn getrs;
  jmg_mp_syevd_buffer_size_fn syevd_buffer_size;
  jmg_mp_syevd_fn syevd;
  jmg_mp_sygvd_buffer_size_fn sygvd_buffer_size;
  jmg_mp_sygvd_fn sygvd;
  jmg_mp_gels_buffer_size_fn gels_buffer_size;
  jmg_mp_gels_fn gels;
  jmg_mp_laset_fn laset;
  jmg_mp_geqrf_buffer_size_fn geqrf_buffer_size;
  jmg_mp_geqrf_fn geqrf;
  jmg_mp_orgqr_buffer_size_fn orgqr_buffer_size;
  jmg_mp_orgqr_fn orgqr;
  jmg_mp_stedc_buffer_size_fn stedc_buffer_size;
  jmg_mp_stedc_fn stedc;
} jmg_mp_api;

/* loader.c: the library, loaded once per process (after NCCL, RTLD_GLOBAL).
 * Returns the table, or NULL with the reason (which names the extra:
 * pip install "jaxmg[cuda13]") in why. */
const jmg_mp_api *jmg_mp_load(char *why, size_t len);

/* Sets the path libcusolverMp is loaded from (NULL or "": the soname
 * libcusolverMp.so.0). Before the first load; 0, or -1 when already loaded
 * from elsewhere or too long. */
int jmg_cusolvermp_set_path(const char *path);

/* 1 when the library loads (loading it on the first call), else 0 and the
 * reason in why (jaxmg_cusolvermp_available). */
int jmg_cusolvermp_available(char *why, size_t len);

/* What was loaded, for traces and the docs: "0.8" (no 0.9 symbol),
 * ">= 0.9", or "" before a successful load; and the exact version
 * (cusolverMpGetVersion, e.g. 800 for 0.8.0) once a handle exists, else 0. */
const char *jmg_cusolvermp_series(void);
int jmg_cusolvermp_version(void);
void jmg_cusolvermp_note_version(int version);

#endif
