/* SPDX-License-Identifier: MIT */
/* backend/conv.h - a provider library's own convolution primitives (oneDNN's
 * direct convolution kernels), on raw contiguous f32 NCHW data, for
 * exec/kernels/conv.c.
 *
 * One call is one product of one chunk of images on ONE thread (the caller
 * shares chunks over its team): the calling thread's OpenMP count is set
 * to 1 while a primitive is created and while it runs, so the library's
 * work split, and with it the result bits, never depend on the team size.
 * The data stays in the caller's plain layouts; the primitives run on the
 * blocked layouts their kernels want, reordered from and to the plain ones
 * inside the call (in the cache's workspace, so a steady stream of calls
 * allocates nothing once the cache holds its primitives).
 *
 * Geometry as in exec/kernels/conv.h (x the image side, y the filtered
 * side, w [cy, cx/groups, kh, kw]); padding after the last row / column is
 * implied by the sizes. */
#ifndef FUCINA_BACKEND_CONV_H
#define FUCINA_BACKEND_CONV_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "backend/backend.h"

typedef enum fc__conv_kind {
    FC__CONV_FORWARD, /* y = conv(x, w) [+ bias] */
    FC__CONV_DGRAD,   /* gx = conv^T(gy, w) */
    FC__CONV_WGRAD    /* gw = sum over the call's images of gy (x) x */
} fc__conv_kind;

typedef struct fc__conv_call {
    fc__conv_kind kind;
    int64_t n, groups; /* images in this call */
    int64_t cx, hx, wx;
    int64_t cy, hy, wy;
    int64_t kh, kw, sh, sw, ph, pw, dh, dw;
    const float *x;    /* [n, cx, hx, wx]: FORWARD, WGRAD */
    const float *gy;   /* [n, cy, hy, wy]: DGRAD, WGRAD */
    const float *w;    /* [cy, cx/groups, kh, kw]: FORWARD, DGRAD */
    const float *bias; /* [cy] or NULL: FORWARD only */
    float *out;        /* y, gx or gw, contiguous */
    /* w holds the same values as at this cache's previous call (a later
     * chunk of the same product): its blocked copy may be reused when that
     * call left it in the workspace */
    bool w_unchanged;
    fc__backend_cache *cache; /* non-NULL: primitives and workspace */
} fc__conv_call;

/* Whether fc__conv_direct takes c's geometry on this CPU with a direct
 * (JIT) kernel: built with oneDNN 2.x, the padding after the last row and
 * column not negative, and oneDNN choosing a JIT implementation for it
 * (it is asked once per geometry; the primitive stays in c->cache). The
 * answer depends on the shapes and the CPU only. False also when asking
 * fails (out of memory): the caller then takes its portable path. */
bool fc__conv_direct_takes(const fc__conv_call *c);

/* Runs c. FC_OK; FC_ERR_OOM / FC_ERR_BACKEND with a message in err. */
fc_status fc__conv_direct(const fc__conv_call *c, char *err, size_t errcap);

#endif /* FUCINA_BACKEND_CONV_H */
