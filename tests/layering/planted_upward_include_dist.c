/* SPDX-License-Identifier: MIT */
/* Planted upward include: compiled against the ops layer's include root by
 * ctest (layering/upward_include_dist_fails), it must fail, because ops
 * (and every layer below it) may not see src/dist, the optional MPI layer
 * on top. */
#include "dist/dist.h"

int planted_upward_include_dist(void);
int planted_upward_include_dist(void) { return (int)sizeof(struct fc_dist); }
