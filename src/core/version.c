/* SPDX-License-Identifier: MIT */
/* version.c - fc_version: the numbers of fucina/version.h, as the library
 * was built with them. */
#include "fucina/version.h"

#define STR_(x) #x
#define STR(x) STR_(x)

const char *fc_version(void) {
    return STR(FC_VERSION_MAJOR) "." STR(FC_VERSION_MINOR) "." STR(FC_VERSION_PATCH);
}
