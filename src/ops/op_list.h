/* SPDX-License-Identifier: MIT */
/* ops/op_list.h - FC__OP_LIST(X): every public op, one row each, in the
 * order of docs/ops.md. It sits here, beside the op files, rather than in
 * tests/support: it describes the library's own surface (which header
 * declares an op, which family file a reader opens for it), the op index
 * in the docs is generated from it (scripts/gen_op_index.py), and adding an
 * op means adding its row here next to its source (CONTRIBUTING.md). The
 * library itself does not compile it; tests/meta/test_op_list.c checks the
 * rows against include/fucina and against the suites every op must be in.
 *
 * X(name, family, header, grad, order):
 *   name    the op is fc_<name>;
 *   family  the group it is documented in; its source is src/ops/<family>.c
 *           except where the index says otherwise (activations in unary.c,
 *           norms in norm.c and batch_norm.c, rope in rope.c);
 *   header  fucina/<header>.h declares it;
 *   grad    GRAD: a backward rule, checked by fc_gradcheck;
 *           NOGRAD: no gradient (an integer or bool result);
 *           INPLACE: writes into an existing tensor and refuses inputs
 *           that require grad (autograd does not record in-place ops);
 *   order   how a create_graph walk differentiates the backward again:
 *           CURVED: the gradient depends on the inputs; it is rebuilt from
 *           recorded ops, so every order follows;
 *           CONST: the gradient does not depend on the differentiable
 *           inputs (linear, layout and piecewise-linear ops), so it is a
 *           constant of the new graph and higher orders are zero;
 *           NONE: no gradient.
 * A GRAD op must be in fc_gradcheck's suites, the gradgradcheck suites and
 * the create_graph three-form table; every op in the bad-input tables and
 * an OOM sweep. */
#ifndef FUCINA_OPS_OP_LIST_H
#define FUCINA_OPS_OP_LIST_H

/* clang-format off */
#define FC__OP_LIST(X)                                  \
    /* binary arithmetic (src/ops/binary.c) */          \
    X(add,               binary,     ops,  GRAD,    CONST)  \
    X(sub,               binary,     ops,  GRAD,    CONST)  \
    X(mul,               binary,     ops,  GRAD,    CURVED) \
    X(div,               binary,     ops,  GRAD,    CURVED) \
    X(pow,               binary,     ops,  GRAD,    CURVED) \
    X(maximum,           binary,     ops,  GRAD,    CONST)  \
    X(minimum,           binary,     ops,  GRAD,    CONST)  \
    X(add_scalar,        binary,     ops,  GRAD,    CONST)  \
    X(sub_scalar,        binary,     ops,  GRAD,    CONST)  \
    X(rsub_scalar,       binary,     ops,  GRAD,    CONST)  \
    X(mul_scalar,        binary,     ops,  GRAD,    CONST)  \
    X(div_scalar,        binary,     ops,  GRAD,    CONST)  \
    X(pow_scalar,        binary,     ops,  GRAD,    CURVED) \
    X(maximum_scalar,    binary,     ops,  GRAD,    CONST)  \
    X(minimum_scalar,    binary,     ops,  GRAD,    CONST)  \
    X(add_,              binary,     ops,  INPLACE, NONE)   \
    X(add_out,           binary,     ops,  INPLACE, NONE)   \
    X(mul_scalar_,       binary,     ops,  INPLACE, NONE)   \
    X(fill_,             binary,     ops,  INPLACE, NONE)   \
    /* comparisons, logic and selection by a mask (src/ops/compare.c) */ \
    X(eq,                compare,    ops,  NOGRAD,  NONE)   \
    X(ne,                compare,    ops,  NOGRAD,  NONE)   \
    X(lt,                compare,    ops,  NOGRAD,  NONE)   \
    X(le,                compare,    ops,  NOGRAD,  NONE)   \
    X(gt,                compare,    ops,  NOGRAD,  NONE)   \
    X(ge,                compare,    ops,  NOGRAD,  NONE)   \
    X(eq_scalar,         compare,    ops,  NOGRAD,  NONE)   \
    X(lt_scalar,         compare,    ops,  NOGRAD,  NONE)   \
    X(gt_scalar,         compare,    ops,  NOGRAD,  NONE)   \
    X(logical_and,       compare,    ops,  NOGRAD,  NONE)   \
    X(logical_or,        compare,    ops,  NOGRAD,  NONE)   \
    X(logical_not,       compare,    ops,  NOGRAD,  NONE)   \
    X(where,             compare,    ops,  GRAD,    CONST)  \
    X(masked_fill,       compare,    ops,  GRAD,    CONST)  \
    /* elementwise math (src/ops/unary.c) */            \
    X(neg,               unary,      ops,  GRAD,    CONST)  \
    X(abs,               unary,      ops,  GRAD,    CONST)  \
    X(sign,              unary,      ops,  GRAD,    CONST)  \
    X(square,            unary,      ops,  GRAD,    CURVED) \
    X(sqrt,              unary,      ops,  GRAD,    CURVED) \
    X(rsqrt,             unary,      ops,  GRAD,    CURVED) \
    X(reciprocal,        unary,      ops,  GRAD,    CURVED) \
    X(exp,               unary,      ops,  GRAD,    CURVED) \
    X(log,               unary,      ops,  GRAD,    CURVED) \
    X(log1p,             unary,      ops,  GRAD,    CURVED) \
    X(expm1,             unary,      ops,  GRAD,    CURVED) \
    X(sin,               unary,      ops,  GRAD,    CURVED) \
    X(cos,               unary,      ops,  GRAD,    CURVED) \
    X(tanh,              unary,      ops,  GRAD,    CURVED) \
    X(clamp,             unary,      ops,  GRAD,    CONST)  \
    /* activations (src/ops/unary.c) */                 \
    X(sigmoid,           activation, ops,  GRAD,    CURVED) \
    X(relu,              activation, ops,  GRAD,    CONST)  \
    X(leaky_relu,        activation, ops,  GRAD,    CONST)  \
    X(gelu,              activation, ops,  GRAD,    CURVED) \
    X(silu,              activation, ops,  GRAD,    CURVED) \
    X(swiglu,            activation, ops,  GRAD,    CURVED) \
    X(softplus,          activation, ops,  GRAD,    CURVED) \
    /* reductions (src/ops/reduce.c) */                 \
    X(sum,               reduce,     ops,  GRAD,    CONST)  \
    X(mean,              reduce,     ops,  GRAD,    CONST)  \
    X(prod,              reduce,     ops,  GRAD,    CURVED) \
    X(max,               reduce,     ops,  GRAD,    CONST)  \
    X(min,               reduce,     ops,  GRAD,    CONST)  \
    X(argmax,            reduce,     ops,  NOGRAD,  NONE)   \
    X(argmin,            reduce,     ops,  NOGRAD,  NONE)   \
    X(var,               reduce,     ops,  GRAD,    CURVED) \
    X(std,               reduce,     ops,  GRAD,    CURVED) \
    X(logsumexp,         reduce,     ops,  GRAD,    CURVED) \
    X(all,               reduce,     ops,  NOGRAD,  NONE)   \
    X(any,               reduce,     ops,  NOGRAD,  NONE)   \
    /* scans (src/ops/scan.c) */                        \
    X(cumsum,            scan,       ops,  GRAD,    CONST)  \
    /* softmax (src/ops/softmax.c) */                   \
    X(softmax,           softmax,    ops,  GRAD,    CURVED) \
    X(log_softmax,       softmax,    ops,  GRAD,    CURVED) \
    /* normalisation (src/ops/norm.c, src/ops/batch_norm.c) */ \
    X(layer_norm,        norm,       ops,  GRAD,    CURVED) \
    X(rms_norm,          norm,       ops,  GRAD,    CURVED) \
    X(batch_norm,        norm,       ops,  GRAD,    CURVED) \
    X(group_norm,        norm,       ops,  GRAD,    CURVED) \
    /* losses (src/ops/loss.c) */                       \
    X(cross_entropy,     loss,       ops,  GRAD,    CURVED) \
    X(mse_loss,          loss,       ops,  GRAD,    CURVED) \
    /* views and layout (src/ops/layout.c) */           \
    X(reshape,           layout,     ops,  GRAD,    CONST)  \
    X(view,              layout,     ops,  GRAD,    CONST)  \
    X(permute,           layout,     ops,  GRAD,    CONST)  \
    X(transpose,         layout,     ops,  GRAD,    CONST)  \
    X(narrow,            layout,     ops,  GRAD,    CONST)  \
    X(slice,             layout,     ops,  GRAD,    CONST)  \
    X(expand,            layout,     ops,  GRAD,    CONST)  \
    X(squeeze,           layout,     ops,  GRAD,    CONST)  \
    X(unsqueeze,         layout,     ops,  GRAD,    CONST)  \
    /* joins and splits (src/ops/join.c) */             \
    X(concat,            join,       ops,  GRAD,    CONST)  \
    X(stack,             join,       ops,  GRAD,    CONST)  \
    X(split,             join,       ops,  GRAD,    CONST)  \
    X(pad,               join,       ops,  GRAD,    CONST)  \
    /* indexing (src/ops/index.c) */                    \
    X(index_select,      index,      ops,  GRAD,    CONST)  \
    X(embedding,         index,      ops,  GRAD,    CONST)  \
    X(gather,            index,      ops,  GRAD,    CONST)  \
    X(scatter_add,       index,      ops,  GRAD,    CONST)  \
    X(one_hot,           index,      ops,  NOGRAD,  NONE)   \
    /* sorting (src/ops/sort.c) */                      \
    X(sort,              sort,       ops,  GRAD,    CONST)  \
    X(argsort,           sort,       ops,  NOGRAD,  NONE)   \
    X(topk,              sort,       ops,  GRAD,    CONST)  \
    /* triangle masks (src/ops/mask.c) */               \
    X(triu,              mask,       ops,  GRAD,    CONST)  \
    X(tril,              mask,       ops,  GRAD,    CONST)  \
    /* random ops (src/ops/random.c) */                 \
    X(dropout,           random,     ops,  GRAD,    CONST)  \
    /* the transformer block (src/ops/rope.c, src/ops/attention.c) */ \
    X(rope,              attention,  attention, GRAD, CONST)  \
    X(attention,         attention,  attention, GRAD, CURVED) \
    /* convolutions (src/ops/conv.c) */                 \
    X(conv2d,            conv,       conv, GRAD,    CURVED) \
    X(conv1d,            conv,       conv, GRAD,    CURVED) \
    X(conv_transpose2d,  conv,       conv, GRAD,    CURVED) \
    X(conv3d,            conv,       conv, GRAD,    CURVED) \
    /* matrix products (src/ops/matmul.c) */            \
    X(matmul,            matmul,     matmul, GRAD,  CURVED) \
    X(linear,            matmul,     matmul, GRAD,  CURVED) \
    /* pooling (src/ops/pool.c) */                      \
    X(max_pool2d,        pool,       pool, GRAD,    CONST)  \
    X(avg_pool2d,        pool,       pool, GRAD,    CONST)  \
    X(adaptive_avg_pool2d, pool,     pool, GRAD,    CONST)  \
    X(max_pool3d,        pool,       pool, GRAD,    CONST)  \
    X(avg_pool3d,        pool,       pool, GRAD,    CONST)  \
    /* Einstein summation, lowered to recorded ops (src/ops/einsum.c) */ \
    X(einsum,            einsum,     ops,  GRAD,    CURVED) \
    /* resampling (src/ops/interpolate.c) */            \
    X(interpolate,       interpolate, ops, GRAD,    CONST)
/* clang-format on */

#endif /* FUCINA_OPS_OP_LIST_H */
