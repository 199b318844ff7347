/* SPDX-License-Identifier: MIT */
/* fucina/export.h - symbol visibility. The library is built with hidden
 * visibility; only declarations marked FC_API are exported. */
#ifndef FUCINA_EXPORT_H
#define FUCINA_EXPORT_H

#if defined(_WIN32)
#define FC_API
#elif defined(__GNUC__) || defined(__clang__)
#define FC_API __attribute__((visibility("default")))
#else
#define FC_API
#endif

#endif /* FUCINA_EXPORT_H */
