/* SPDX-License-Identifier: MIT */
/* Planted upward include: compiled against the exec layer's include root by
 * ctest (layering/upward_include_fails), it must fail, because exec may not
 * see the autograd tape. If this compiles, the include roots no longer
 * enforce the floors. */
#include "ag/tape.h"

int planted_upward_include(void);
int planted_upward_include(void) { return FC__AG_MAX_IN; }
