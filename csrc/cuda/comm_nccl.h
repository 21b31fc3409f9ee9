/* NCCL as loaded at run time (cuda/comm_nccl.c): what besides the
 * communicator table (comm/comm.h, jmg_nccl_comm) the rest of
 * libjaxmg_cuda.so needs: where to load libnccl from, loading it (the
 * cuSOLVERMp loader needs it loaded RTLD_GLOBAL first, since libcusolverMp
 * links against libnccl.so.2), and a new id for the Python layer. */
#ifndef JMG_CUDA_COMM_NCCL_H
#define JMG_CUDA_COMM_NCCL_H

#include <stddef.h>
#include <stdint.h>

#include "common/error.h"

/* Sets the path libnccl is loaded from (NULL or "": its soname,
 * libnccl.so.2). Effective only before the first load; returns 0, or -1
 * when NCCL is already loaded (from another path) or the path is too long. */
int jmg_nccl_set_path(const char *path);

/* Loads libnccl (once per process, RTLD_NOW | RTLD_GLOBAL) and looks up
 * every function jaxmg calls. 0, or fills err (naming op, the path and
 * dlerror's reason; the same reason on every later call). */
int jmg_nccl_load(const char *op, jmg_error *err);

/* A new unique id (ncclGetUniqueId) into out[0 .. len), len >= 128 (the
 * rest zeroed). 0, or -1 with the reason in err_msg (jaxmg_comm_new_id). */
int jmg_nccl_new_id(uint8_t *out, size_t len, char *err_msg, size_t errlen);

/* A communicator of one rank on CUDA device `device` (ncclCommInitRank
 * with a fresh id), made on first use and kept for the life of the
 * process, one per device: for a library call that needs a communicator on
 * one GPU (cuSOLVERMp's stedc in engine/eig_mgpu/stedc.c). *out is an
 * ncclComm_t. Makes `device` current. 0, or fills err naming op. */
int jmg_nccl_comm_self(int device, void **out, const char *op, jmg_error *err);

#endif
