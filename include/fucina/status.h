/* SPDX-License-Identifier: MIT */
/* fucina/status.h - the one status vocabulary of the library.
 *
 * Every fallible function that does not return a tensor returns an fc_status:
 * FC_OK (0) on success, a negative code on failure. Tensor-producing functions
 * return NULL instead and record the code plus a detailed message in their
 * context (see fc_ctx_status / fc_ctx_error in fucina/tensor.h).
 *
 * The list below is the single source of truth: it generates the enum,
 * fc_strerror (static text) and fc_status_name (the enum identifier).
 * New codes go at the end so existing values never change.
 */
#ifndef FUCINA_STATUS_H
#define FUCINA_STATUS_H

#include "fucina/export.h"

#ifdef __cplusplus
extern "C" {
#endif

/* X(name, value, static description) */
#define FC_STATUS_LIST(X)                                                                          \
    X(FC_OK, 0, "success")                                                                         \
    X(FC_ERR_OOM, -1, "out of memory")                                                             \
    X(FC_ERR_INVALID_ARG, -2, "invalid argument")                                                  \
    X(FC_ERR_SHAPE_MISMATCH, -3, "shapes do not match or do not broadcast")                        \
    X(FC_ERR_INVALID_SHAPE, -4, "invalid shape (a dimension is < 1 or the size does not fit)")     \
    X(FC_ERR_RANK, -5, "rank out of range or not what the operation needs")                        \
    X(FC_ERR_DTYPE, -6, "dtype not allowed here, or operand dtypes differ")                        \
    X(FC_ERR_OVERFLOW, -7, "size arithmetic overflows")                                            \
    X(FC_ERR_UNSUPPORTED_VIEW, -8, "operation needs a layout this view does not have")             \
    X(FC_ERR_INDEX, -9, "index out of bounds")                                                     \
    X(FC_ERR_READ_ONLY, -10, "storage is read-only")                                               \
    X(FC_ERR_DIV_ZERO, -11, "integer division by zero")                                            \
    X(FC_ERR_SAVED_MODIFIED, -12, "a value saved for backward was modified in place")              \
    X(FC_ERR_NON_FINITE, -13, "non-finite value (NaN or infinity) met in check_finite mode")       \
    X(FC_ERR_IO, -14, "input/output error")                                                        \
    X(FC_ERR_FORMAT, -15, "malformed or unsupported file format")                                  \
    X(FC_ERR_BACKEND, -16, "backend unavailable")                                                  \
    X(FC_ERR_EMPTY_SELECTION, -17, "empty selection")                                              \
    X(FC_ERR_NULL_ARG, -18, "a required handle or pointer is NULL")                                \
    X(FC_ERR_DATA_LENGTH, -19, "data length does not match the shape")                             \
    X(FC_ERR_AXIS, -20, "axis out of range")                                                       \
    X(FC_ERR_STATE, -21, "object is not in a state that allows this call")                         \
    X(FC_ERR_NO_GRAD, -22, "tensor has no gradient path")                                          \
    X(FC_ERR_CONTEXT, -23, "tensors of different contexts met in one call")                        \
    X(FC_ERR_COMM, -24, "communication between processes failed (MPI)")                          \
    X(FC_ERR_UNSUPPORTED, -25, "operation not supported in this mode")

/* Status codes: FC_OK (0) or a negative error, one per row of FC_STATUS_LIST above. */
typedef enum fc_status {
#define FC__STATUS_ENUM(name, value, text) name = value,
    FC_STATUS_LIST(FC__STATUS_ENUM)
#undef FC__STATUS_ENUM
} fc_status;

/* Number of distinct codes in FC_STATUS_LIST. */
#define FC_STATUS_COUNT 26

/* Static, human-readable text for a code ("out of memory"). Never NULL:
 * an unknown code gives "unknown status". The string is static storage. */
FC_API const char *fc_strerror(fc_status status);

/* The enum identifier as a string ("FC_ERR_OOM"); "FC_UNKNOWN" for an
 * unknown code. Static storage. */
FC_API const char *fc_status_name(fc_status status);

#ifdef __cplusplus
}
#endif
#endif /* FUCINA_STATUS_H */
