/* Loading the multi-GPU eigensolver's kernels (kernels.h). */
#include "engine/eig_mgpu/kernels.h"

#include "engine/eig_mgpu/kernels_ptx.h"

static const char *const g_names[] = {
    [JMG_TRD_SYMV] = "jmg_trd_symv",
    [JMG_TRD_UPDATE_COL] = "jmg_trd_update_col",
    [JMG_TRD_HOUSE] = "jmg_trd_house",
    [JMG_TRD_FINISH_W] = "jmg_trd_finish_w",
    [JMG_TRD_FIX_W] = "jmg_trd_fix_w",
    [JMG_TRD_GATHER_ROWS] = "jmg_trd_gather_rows",
    [JMG_TRD_MAKE_V] = "jmg_trd_make_v",
    [JMG_TRD_LARFT] = "jmg_trd_larft",
    [JMG_TRD_COL_START] = "jmg_trd_col_start",
    [JMG_TRD_COL_FINISH] = "jmg_trd_col_finish"};
_Static_assert(sizeof g_names / sizeof g_names[0] == JMG_TRD_KERNELS,
               "a name for every kernel");
static cudaKernel_t g_kernels[JMG_TRD_KERNELS];
static jmg_ptx_set g_set = JMG_PTX_SET(
    jmg_eig_mgpu_ptx, "jaxmg's eigensolver kernels", g_names, g_kernels);

int jmg_trd_kernels_get(const char *op, jmg_error *err) {
  return jmg_ptx_get(&g_set, op, err);
}

int jmg_trd_launch(jmg_trd_kernel which, dim3 grid, dim3 block, void **args,
                   cudaStream_t stream, const char *op, jmg_error *err) {
  return jmg_ptx_launch(&g_set, (int)which, grid, block, args, stream, op, err);
}
