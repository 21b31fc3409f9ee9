#include "layout/cyclic.h"

#include <stdlib.h>
#include <string.h>

static int64_t gcd64(int64_t a, int64_t b) {
  while (b != 0) {
    int64_t r = a % b;
    a = b;
    b = r;
  }
  return a;
}

void jmg_cyclic_locate(int64_t col, int ndev, int64_t tile, int *dev,
                       int64_t *local_col) {
  int64_t k = col / tile; /* global tile */
  *dev = (int)(k % ndev);
  *local_col = (k / ndev) * tile + col % tile;
}

void jmg_cyclic_plan_free(jmg_cyclic_plan *plan) {
  if (plan == NULL) return;
  free(plan->dest);
  free(plan->cycle_start);
  free(plan->cycle_slots);
  memset(plan, 0, sizeof *plan);
}

int jmg_cyclic_plan_init(jmg_cyclic_plan *plan, int64_t n, int ndev,
                         int64_t tile, jmg_error *err) {
  memset(plan, 0, sizeof *plan);
  if (n < 1 || ndev < 1 || tile < 1)
    return jmg_error_set(err, JMG_EINVAL, NULL, "layout",
                         "need n >= 1, ndev >= 1 and T_A >= 1 (got n=%lld, "
                         "ndev=%d, T_A=%lld)",
                         (long long)n, ndev, (long long)tile);
  if (n % ndev != 0)
    return jmg_error_set(err, JMG_EINVAL, NULL, "layout",
                         "N=%lld is not divisible by the %d devices",
                         (long long)n, ndev);
  plan->n = n;
  plan->ndev = ndev;
  plan->tile = tile;
  plan->local_cols = n / ndev;
  plan->unit = gcd64(tile, plan->local_cols);
  plan->nunits = n / plan->unit;
  const int64_t per_dev = plan->local_cols / plan->unit;

  plan->dest = malloc((size_t)plan->nunits * sizeof *plan->dest);
  plan->cycle_slots = malloc((size_t)plan->nunits * sizeof *plan->cycle_slots);
  /* At most nunits / 2 cycles of length >= 2, plus the end marker. */
  plan->cycle_start =
      malloc((size_t)(plan->nunits / 2 + 1) * sizeof *plan->cycle_start);
  unsigned char *seen = calloc((size_t)plan->nunits, 1);
  if (!plan->dest || !plan->cycle_slots || !plan->cycle_start || !seen) {
    free(seen);
    jmg_cyclic_plan_free(plan);
    return jmg_error_set(err, JMG_ENOMEM, NULL, "layout",
                         "cannot allocate the plan for N=%lld", (long long)n);
  }

  /* dest of every unit, checking that the map is a bijection onto the
   * contiguous slots: otherwise some device would hold more columns in the
   * cyclic layout than it has room for. */
  for (int64_t s = 0; s < plan->nunits; ++s) {
    int dev;
    int64_t local_col;
    jmg_cyclic_locate(s * plan->unit, ndev, tile, &dev, &local_col);
    int64_t d = local_col < plan->local_cols
                    ? (int64_t)dev * per_dev + local_col / plan->unit
                    : -1;
    if (d < 0 || seen[d]) {
      free(seen);
      int64_t nplan = n;
      jmg_cyclic_plan_free(plan);
      return jmg_error_set(
          err, JMG_EINVAL, NULL, "layout",
          "T_A=%lld does not fit the shard size %lld: the block-cyclic layout "
          "of N=%lld over %d devices would not give every device the same "
          "number of columns (pad the shard to a multiple of T_A)",
          (long long)tile, (long long)(nplan / ndev), (long long)nplan, ndev);
    }
    seen[d] = 1;
    plan->dest[s] = d;
  }

  /* Cycle decomposition: follow dest from every unvisited slot. */
  memset(seen, 0, (size_t)plan->nunits);
  int64_t nslots = 0;
  for (int64_t s = 0; s < plan->nunits; ++s) {
    if (seen[s] || plan->dest[s] == s) continue;
    plan->cycle_start[plan->ncycles++] = nslots;
    for (int64_t p = s; !seen[p]; p = plan->dest[p]) {
      seen[p] = 1;
      plan->cycle_slots[nslots++] = p;
    }
  }
  plan->cycle_start[plan->ncycles] = nslots;
  free(seen);
  return 0;
}

int jmg_cyclic_apply(const jmg_cyclic_plan *plan, jmg_cyclic_direction dir,
                     int nlanes, jmg_unit_copy_fn copy, void *ctx,
                     jmg_error *err) {
  if (nlanes < 1)
    return jmg_error_set(err, JMG_EINVAL, NULL, "layout",
                         "need at least one copy lane (got %d)", nlanes);
  for (int64_t c = 0; c < plan->ncycles; ++c) {
    const int64_t *p = plan->cycle_slots + plan->cycle_start[c];
    const int64_t len = plan->cycle_start[c + 1] - plan->cycle_start[c];
    const int lane = (int)(c % nlanes);
    const jmg_unit_loc stage = {JMG_STAGE, lane};
    int rc;
    if (dir == JMG_TO_CYCLIC) {
      /* The unit in p[i] goes to p[i+1]: save the last, shift backwards. */
      rc = copy(ctx, lane, stage, jmg_cyclic_slot_loc(plan, p[len - 1]), err);
      for (int64_t i = len - 1; rc == 0 && i > 0; --i)
        rc = copy(ctx, lane, jmg_cyclic_slot_loc(plan, p[i]),
                  jmg_cyclic_slot_loc(plan, p[i - 1]), err);
      if (rc == 0)
        rc = copy(ctx, lane, jmg_cyclic_slot_loc(plan, p[0]), stage, err);
    } else {
      /* The unit in p[i+1] goes back to p[i]: save the first, shift forwards.
       */
      rc = copy(ctx, lane, stage, jmg_cyclic_slot_loc(plan, p[0]), err);
      for (int64_t i = 0; rc == 0 && i < len - 1; ++i)
        rc = copy(ctx, lane, jmg_cyclic_slot_loc(plan, p[i]),
                  jmg_cyclic_slot_loc(plan, p[i + 1]), err);
      if (rc == 0)
        rc = copy(ctx, lane, jmg_cyclic_slot_loc(plan, p[len - 1]), stage, err);
    }
    if (rc != 0) return rc;
  }
  return 0;
}
