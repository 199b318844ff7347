/* SPDX-License-Identifier: MIT */
/* Planted internal include: compiled against the models' include root by
 * ctest (layering/models_internal_include_fails), it must fail, because
 * models/ sees only the public headers. If this compiles, the root no
 * longer keeps models/ above the library. */
#include "core/tensor.h"

int planted_models_include(void);
int planted_models_include(void) { return 0; }
