/* SPDX-License-Identifier: MIT */
/* Compiled by ctest with only include/ on the path. The raw tensor is
 * internal: naming it through the public header must fail to compile
 * (core/compile_fail_raw has WILL_FAIL). With -DFUCINA_COMPILE_OK the
 * forbidden line is left out and the file must compile (core/compile_ok_public),
 * proving the failure comes from that line alone. */
#include <fucina.h>

int main(void) {
    fc_ctx_opts opts = {0};
    (void)opts;
#ifndef FUCINA_COMPILE_OK
    fc_raw raw;
    (void)raw;
#endif
    return 0;
}
