/* SPDX-License-Identifier: MIT */
/* fucina/version.h - the library's version, at compile time and at run time.
 *
 * Versions follow semantic versioning (CHANGELOG.md states the policy):
 * while FC_VERSION_MAJOR is 0 a minor release may rename public names, each
 * listed in the changelog; from 1.0 on, only a major release changes the
 * API or the ABI. The shared library's SONAME carries the major version.
 * CMake reads the numbers below for the project version, the pkg-config
 * file and the CMake package, so this header is the one place to bump. */
#ifndef FUCINA_VERSION_H
#define FUCINA_VERSION_H

#include "fucina/export.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The version of these headers: major, minor, patch (semantic versioning). */
#define FC_VERSION_MAJOR 0
#define FC_VERSION_MINOR 1
#define FC_VERSION_PATCH 0
/* The three numbers as one integer, for preprocessor comparisons:
 * FC_VERSION_NUMBER >= 100 means 0.1.0 or later. */
#define FC_VERSION_NUMBER (FC_VERSION_MAJOR * 10000 + FC_VERSION_MINOR * 100 + FC_VERSION_PATCH)

/* The version of the library loaded at run time, "MAJOR.MINOR.PATCH" (static
 * storage; never NULL). It can differ from the FC_VERSION_* of the headers a
 * program was compiled with when the shared library was replaced. */
FC_API const char *fc_version(void);

#ifdef __cplusplus
}
#endif

#endif /* FUCINA_VERSION_H */
