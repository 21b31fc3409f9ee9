/* The 1D block-cyclic layout, and moving a matrix into it in place.
 *
 * A matrix of n columns is split over ndev devices. In the contiguous layout
 * (what a row-sharded JAX array gives us, read column-major thanks to
 * symmetry) device d holds global columns [d*n/ndev, (d+1)*n/ndev). In the
 * 1D block-cyclic layout cuSOLVERMg wants, column tiles of width t go
 * round-robin: tile k sits on device k % ndev, in that device's local tile
 * slot k / ndev.
 *
 * The planner is pure: it computes the column permutation between the two
 * layouts and decomposes it into disjoint cycles. Columns always move in runs
 * of `unit` = gcd(t, n/ndev) columns, which never split: with t dividing the
 * shard size, a unit is a whole tile and each move is one large copy.
 *
 * The executor applies the cycles in place through a copy callback (memcpy on
 * CPU, cudaMemcpyPeerAsync on GPU). Cycles are disjoint, so they are spread
 * over independent lanes (on GPUs, one stream each: copies between different
 * pairs of GPUs then share the NVLink fabric at once); each lane has one
 * staging buffer of one unit. The inverse brings back outputs that return to
 * the user. */
#ifndef JMG_LAYOUT_CYCLIC_H
#define JMG_LAYOUT_CYCLIC_H

#include <stdint.h>

#include "common/error.h"

typedef struct jmg_cyclic_plan {
  int64_t n;          /* global number of columns */
  int ndev;           /* devices */
  int64_t tile;       /* T_A */
  int64_t local_cols; /* n / ndev: columns each device holds in both layouts */
  int64_t unit;       /* columns moved together: gcd(tile, local_cols) */
  int64_t nunits;     /* n / unit */
  /* dest[s]: the slot (in units, global contiguous numbering: device
   * s / (local_cols/unit), local unit s % (local_cols/unit)) that the unit now
   * in slot s must move to in the cyclic layout. */
  int64_t *dest;
  /* Cycles of length >= 2, concatenated: cycle c is
   * cycle_slots[cycle_start[c] .. cycle_start[c+1]), and the unit in
   * cycle_slots[i] moves to cycle_slots[i+1] (the last to the first). */
  int64_t ncycles;
  int64_t *cycle_start; /* ncycles + 1 entries */
  int64_t *cycle_slots;
} jmg_cyclic_plan;

/* Where a column lives in the cyclic layout: the device and the local column
 * index on it. The direct definition, used by the planner and by tests. */
void jmg_cyclic_locate(int64_t col, int ndev, int64_t tile, int *dev,
                       int64_t *local_col);

/* Builds the plan. Fails with JMG_EINVAL when n is not divisible by ndev or
 * when the cyclic layout would not give every device exactly n/ndev columns
 * (then the caller must pad: see jaxmg's `pad` argument). */
int jmg_cyclic_plan_init(jmg_cyclic_plan *plan, int64_t n, int ndev,
                         int64_t tile, jmg_error *err);
void jmg_cyclic_plan_free(jmg_cyclic_plan *plan);

/* A place a unit of columns can be: a device's buffer at a unit offset, or a
 * lane's staging buffer (dev = JMG_STAGE, unit = the lane). */
enum { JMG_STAGE = -1 };
typedef struct jmg_unit_loc {
  int dev;
  int64_t unit; /* local unit index on dev; the lane for JMG_STAGE */
} jmg_unit_loc;

/* Copies one unit of columns from src to dst on a lane. Copies on one lane
 * must take effect in the order they are issued; copies on different lanes
 * never touch the same unit. Returns 0 or a negative status with err filled.
 */
typedef int (*jmg_unit_copy_fn)(void *ctx, int lane, jmg_unit_loc dst,
                                jmg_unit_loc src, jmg_error *err);

typedef enum {
  JMG_TO_CYCLIC = 0,   /* contiguous -> block-cyclic */
  JMG_FROM_CYCLIC = 1, /* block-cyclic -> contiguous (the inverse) */
} jmg_cyclic_direction;

/* Applies the permutation in place. Cycle c runs on lane c % nlanes (nlanes
 * >= 1): it saves its last unit in the lane's staging buffer, shifts the
 * others, and restores the saved unit; a cycle of length L costs L + 1 unit
 * copies. Stops at the first failing copy. */
int jmg_cyclic_apply(const jmg_cyclic_plan *plan, jmg_cyclic_direction dir,
                     int nlanes, jmg_unit_copy_fn copy, void *ctx,
                     jmg_error *err);

/* Splits a global slot number (in units) into device and local unit. */
static inline jmg_unit_loc jmg_cyclic_slot_loc(const jmg_cyclic_plan *plan,
                                               int64_t slot) {
  int64_t per_dev = plan->local_cols / plan->unit;
  jmg_unit_loc loc = {(int)(slot / per_dev), slot % per_dev};
  return loc;
}

#endif
