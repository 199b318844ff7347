/* SPDX-License-Identifier: MIT */
/* fucina/backend.h - the matmul providers a context can be asked to use.
 *
 * A provider is chosen per context (fc_ctx_opts.backend, or
 * fc_ctx_set_backend in fucina/matmul.h) or, with FC_BACKEND_AUTO, per
 * product by dtype and size; fucina/matmul.h states the automatic rule.
 * Which providers exist depends on the build: selecting one that was not
 * built is FC_ERR_BACKEND. */
#ifndef FUCINA_BACKEND_H
#define FUCINA_BACKEND_H

#ifdef __cplusplus
extern "C" {
#endif

/* The matmul providers a context may use (fc_ctx_opts.backend). */
typedef enum fc_backend {
    FC_BACKEND_AUTO,   /* FUCINA_BACKEND from the environment, else by dtype and size */
    FC_BACKEND_REF,    /* portable C, every float dtype */
    FC_BACKEND_BLAS,   /* OpenBLAS, f32 and f64 */
    FC_BACKEND_ONEDNN, /* oneDNN, f32, bf16, f16 */
    FC_BACKEND_COUNT
} fc_backend;

#ifdef __cplusplus
}
#endif

#endif /* FUCINA_BACKEND_H */
