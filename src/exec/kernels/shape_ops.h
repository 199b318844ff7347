/* exec/kernels/shape_ops.h - internal pieces shared by four op families and
 * their backward rules: layout (views), join (concat/stack/split/pad), index
 * (index_select/embedding/gather/scatter_add/one_hot) and mask
 * (triu/tril/dropout).
 *
 * Forward files live in src/exec/kernels/{layout,join,index,mask}.c; the
 * matching rules in src/ag/grad_{layout,join,index,mask}.c, in the same
 * order. A rule follows the contract of src/ag/tape.h: it runs with grad
 * mode off inside a scope, releases nothing and sets gin[k] for every input
 * with node->in[k].needs. Rules only call ops of these families plus the
 * internal kernels below, so they do not depend on other op families. */
#ifndef FUCINA_EXEC_KERNELS_SHAPE_OPS_H
#define FUCINA_EXEC_KERNELS_SHAPE_OPS_H

#include "ag/tape.h"
#include "exec/tensor.h"

#include "exec/kernels/layout.h"

/* ---- integer index tensors (index.c) -------------------------------------------------------- */

/* The values of an integer index tensor as int64, in row-major order: a
 * pointer into the tensor itself when it is contiguous i64, else into a
 * pooled scratch buffer. */
typedef struct fc__index {
    const int64_t *v;
    int64_t n;
    fc_buffer *scratch; /* NULL when v points into the tensor */
} fc__index;

/* Reads index (any integer dtype, any layout). FC_ERR_DTYPE for other
 * dtypes, FC_ERR_OOM; false after recording the error. */
bool fc__index_load(fc_ctx *ctx, const char *op, const fc_tensor *index, fc__index *out);
/* Every value in [0, bound)? Otherwise records FC_ERR_INDEX naming the
 * first bad value, its position in index and `what` (e.g. "axis 0 of
 * f32[5,3]"), and returns false. */
bool fc__index_check(fc_ctx *ctx, const char *op, const fc__index *ix, const fc_tensor *index,
                     int64_t bound, const char *what);
void fc__index_free(fc__index *ix);

/* ---- kernels that backward rules call directly ---------------------------------------------- */

/* out = zeros(shape of x) with out[o, idx[j], i] += g[o, j, i], where the
 * gradient g (f32 or f64, contiguous) has x's shape with `axis` replaced by
 * the index's shape. Deterministic: each destination element receives its
 * contributions in index order, whatever the thread count. */
fc_tensor *fc__index_add_rows(fc_ctx *ctx, fc_tensor *g, const int64_t *xshape, int xrank, int axis,
                              fc_tensor *index);
/* g * mask * scale for a contiguous f32/f64 gradient and a u8 mask of the
 * same element count. */
fc_tensor *fc__dropout_apply(fc_ctx *ctx, fc_tensor *g, fc_tensor *mask, double scale);

/* ---- backward rules (src/ag/grad_*.c) ------------------------------------------------------- */



fc_status fc__bw_index_select(fc_ctx *ctx, fc_node *node, fc_tensor *gout, fc_tensor **gin);
fc_status fc__bw_gather(fc_ctx *ctx, fc_node *node, fc_tensor *gout, fc_tensor **gin);
fc_status fc__bw_scatter_add(fc_ctx *ctx, fc_node *node, fc_tensor *gout, fc_tensor **gin);

fc_status fc__bw_triangle(fc_ctx *ctx, fc_node *node, fc_tensor *gout, fc_tensor **gin);
fc_status fc__bw_dropout(fc_ctx *ctx, fc_node *node, fc_tensor *gout, fc_tensor **gin);

#endif /* FUCINA_EXEC_KERNELS_SHAPE_OPS_H */
