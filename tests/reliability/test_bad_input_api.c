/* SPDX-License-Identifier: MIT */
/* test_bad_input_api.c - the public functions of fucina/tensor.h,
 * fucina/autograd.h and fucina/optim.h fed their bad inputs, table-driven
 * (see bad_input.h for what each case checks): creation, data access and
 * casts, in-place writes, autograd and gradcheck, optimizers and clipping,
 * the context and its scopes; and the first-error rule of the error model.
 * (Model files, checkpoints and quantizers: test_bad_input_io.c.) The expected codes are the
 * ones the headers document. Cases that need a temporary (a graph to call
 * backward on) release it before returning, so the "no handle left behind"
 * check still holds. */
#include <math.h>

#include "bad_input.h"

/* ---- creation -------------------------------------------------------------------------------- */

static fc_tensor *zeros_dtype(fx *f) {
    return fc_zeros(f->ctx, (fc_dtype)99, (const int64_t[]){2}, 1);
}
static fc_tensor *zeros_dtype_count(fx *f) {
    return fc_zeros(f->ctx, FC_DTYPE_COUNT, (const int64_t[]){2}, 1);
}
static fc_tensor *zeros_shape_null(fx *f) { return fc_zeros(f->ctx, FC_F32, NULL, 1); }
static fc_tensor *zeros_rank0(fx *f) { return fc_zeros(f->ctx, FC_F32, (const int64_t[]){2}, 0); }
static fc_tensor *zeros_rank9(fx *f) { return fc_zeros(f->ctx, FC_F32, (const int64_t[]){2}, 9); }
static fc_tensor *zeros_rank_neg(fx *f) {
    return fc_zeros(f->ctx, FC_F32, (const int64_t[]){2}, -1);
}
static fc_tensor *zeros_dim_neg(fx *f) {
    return fc_zeros(f->ctx, FC_F32, (const int64_t[]){3, -2}, 2);
}
static fc_tensor *zeros_dim_zero(fx *f) {
    return fc_zeros(f->ctx, FC_F32, (const int64_t[]){0}, 1);
}
static fc_tensor *zeros_numel_overflow(fx *f) {
    return fc_zeros(f->ctx, FC_F32, (const int64_t[]){INT64_MAX / 2, 4}, 2);
}
static fc_tensor *zeros_bytes_overflow(fx *f) {
    return fc_zeros(f->ctx, FC_F64, (const int64_t[]){(int64_t)1 << 61}, 1);
}
static fc_tensor *empty_block_cols(fx *f) {
    return fc_empty(f->ctx, FC_Q8_0, (const int64_t[]){2, 31}, 2);
}
static fc_tensor *ones_block(fx *f) {
    return fc_ones(f->ctx, FC_Q8_0, (const int64_t[]){2, 32}, 2);
}
static fc_tensor *full_block(fx *f) {
    return fc_full(f->ctx, FC_Q4_0, (const int64_t[]){32}, 1, 1);
}
static fc_tensor *full_dim_neg(fx *f) {
    return fc_full(f->ctx, FC_F32, (const int64_t[]){-1}, 1, 1);
}
static fc_tensor *arange_step0(fx *f) { return fc_arange(f->ctx, FC_F32, 0, 1, 0); }
static fc_tensor *arange_empty(fx *f) { return fc_arange(f->ctx, FC_F32, 1, 0, 1); }
static fc_tensor *arange_block(fx *f) { return fc_arange(f->ctx, FC_Q8_0, 0, 4, 1); }
static fc_tensor *arange_huge(fx *f) { return fc_arange(f->ctx, FC_F32, 0, 1e30, 1e-30); }
static fc_tensor *arange_nan(fx *f) { return fc_arange(f->ctx, FC_F32, 0, NAN, 1); }
static fc_tensor *from_data_null(fx *f) {
    return fc_tensor_from_data(f->ctx, FC_F32, (const int64_t[]){2}, 1, NULL);
}
static fc_tensor *from_data_overflow(fx *f) {
    return fc_tensor_from_data(f->ctx, FC_F32, (const int64_t[]){INT64_MAX}, 1, f->ro_data);
}
static fc_tensor *borrowed_null(fx *f) {
    return fc_tensor_from_borrowed(f->ctx, FC_F32, (const int64_t[]){2}, 1, NULL, true);
}
static fc_tensor *borrowed_dim_zero(fx *f) {
    return fc_tensor_from_borrowed(f->ctx, FC_F32, (const int64_t[]){0}, 1, f->ro_data, true);
}
static fc_tensor *rand_int(fx *f) { return fc_rand(f->ctx, FC_I32, (const int64_t[]){2}, 1); }
static fc_tensor *randn_block(fx *f) { return fc_randn(f->ctx, FC_Q8_0, (const int64_t[]){32}, 1); }
static fc_tensor *scalar_block(fx *f) { return fc_scalar(f->ctx, FC_Q8_0, 1); }
static fc_tensor *scalar_dtype(fx *f) { return fc_scalar(f->ctx, (fc_dtype)-1, 1); }
static fc_tensor *param_u8(fx *f) {
    return fc_param_zeros(f->ctx, FC_U8, (const int64_t[]){2}, 1);
}
static fc_tensor *param_int(fx *f) {
    return fc_param_randn(f->ctx, FC_I32, (const int64_t[]){2}, 1, 1.0);
}
static fc_tensor *param_randn_neg(fx *f) {
    return fc_param_randn(f->ctx, FC_F32, (const int64_t[]){2}, 1, -1.0);
}
static fc_tensor *param_randn_nan(fx *f) {
    return fc_param_randn(f->ctx, FC_F32, (const int64_t[]){2}, 1, NAN);
}
static fc_tensor *param_randn_inf(fx *f) {
    return fc_param_randn(f->ctx, FC_BF16, (const int64_t[]){2}, 1, INFINITY);
}
static fc_tensor *param_data_null(fx *f) {
    return fc_param_from_data(f->ctx, FC_F32, (const int64_t[]){2}, 1, NULL);
}

static const bad_case creation_cases[] = {
    BAD_T(zeros_dtype, FC_ERR_DTYPE, "fc_zeros"),
    BAD_T(zeros_dtype_count, FC_ERR_DTYPE, "fc_zeros"),
    BAD_T(zeros_shape_null, FC_ERR_NULL_ARG, "fc_zeros"),
    BAD_T(zeros_rank0, FC_ERR_RANK, "fc_zeros"),
    BAD_T(zeros_rank9, FC_ERR_RANK, "fc_zeros"),
    BAD_T(zeros_rank_neg, FC_ERR_RANK, "fc_zeros"),
    BAD_T(zeros_dim_neg, FC_ERR_INVALID_SHAPE, "fc_zeros"),
    BAD_T(zeros_dim_zero, FC_ERR_INVALID_SHAPE, "fc_zeros"),
    BAD_T(zeros_numel_overflow, FC_ERR_OVERFLOW, "fc_zeros"),
    BAD_T(zeros_bytes_overflow, FC_ERR_OVERFLOW, "fc_zeros"),
    BAD_T(empty_block_cols, FC_ERR_INVALID_SHAPE, "fc_empty"),
    BAD_T(ones_block, FC_ERR_DTYPE, "fc_ones"),
    BAD_T(full_block, FC_ERR_DTYPE, "fc_full"),
    BAD_T(full_dim_neg, FC_ERR_INVALID_SHAPE, "fc_full"),
    BAD_T(arange_step0, FC_ERR_INVALID_ARG, "fc_arange"),
    BAD_T(arange_empty, FC_ERR_EMPTY_SELECTION, "fc_arange"),
    BAD_T(arange_block, FC_ERR_DTYPE, "fc_arange"),
    BAD_T(arange_huge, FC_ERR_OVERFLOW, "fc_arange"),
    BAD_T(arange_nan, FC_ERR_INVALID_ARG, "fc_arange"),
    BAD_T(from_data_null, FC_ERR_NULL_ARG, "fc_tensor_from_data"),
    BAD_T(from_data_overflow, FC_ERR_OVERFLOW, "fc_tensor_from_data"),
    BAD_T(borrowed_null, FC_ERR_NULL_ARG, "fc_tensor_from_borrowed"),
    BAD_T(borrowed_dim_zero, FC_ERR_INVALID_SHAPE, "fc_tensor_from_borrowed"),
    BAD_T(rand_int, FC_ERR_DTYPE, "fc_rand"),
    BAD_T(randn_block, FC_ERR_DTYPE, "fc_randn"),
    BAD_T(scalar_block, FC_ERR_DTYPE, "fc_scalar"),
    BAD_T(scalar_dtype, FC_ERR_DTYPE, "fc_scalar"),
    BAD_T(param_u8, FC_ERR_DTYPE, "grad"),
    BAD_T(param_int, FC_ERR_DTYPE, NULL),
    BAD_T(param_randn_neg, FC_ERR_INVALID_ARG, "fc_param_randn: std -1 "),
    BAD_T(param_randn_nan, FC_ERR_INVALID_ARG, "nan must be finite and >= 0"),
    BAD_T(param_randn_inf, FC_ERR_INVALID_ARG, "fc_param_randn: std inf "),
    BAD_T(param_data_null, FC_ERR_NULL_ARG, NULL),
};

/* ---- data access, casts, copies, in-place writes
 * --------------------------------------------------- */

static double dbuf[8];
static fc_tensor *data_strided(fx *f) { return (fc_tensor *)(void *)fc_tensor_data(f->nc_32); }
static fc_tensor *data_mut_ro(fx *f) { return fc_tensor_data_mut(f->ro_23); }
static fc_status copy_to_len(fx *f) { return fc_tensor_copy_out(dbuf, 5, f->f_23); }
static fc_status copy_to_null(fx *f) { return fc_tensor_copy_out(NULL, 24, f->f_23); }
static fc_status item_many(fx *f) { return fc_tensor_item(f->f_23, dbuf); }
static fc_status item_null(fx *f) { return fc_tensor_item(f->f_1, NULL); }
static fc_status get_range(fx *f) { return fc_tensor_element(f->f_23, (const int64_t[]){2, 0}, dbuf); }
static fc_status get_negative(fx *f) {
    return fc_tensor_element(f->f_23, (const int64_t[]){0, -1}, dbuf);
}
static fc_status get_index_null(fx *f) { return fc_tensor_element(f->f_23, NULL, dbuf); }
static fc_status get_block(fx *f) { return fc_tensor_element(f->q_232, (const int64_t[]){0, 0}, dbuf); }
static fc_tensor *to_dtype(fx *f) { return fc_to(f->ctx, f->f_23, (fc_dtype)77); }
static fc_tensor *to_block_from_f64(fx *f) { return fc_to(f->ctx, f->d_23, FC_Q8_0); }
static fc_tensor *to_block_to_f16(fx *f) { return fc_to(f->ctx, f->q_232, FC_F16); }
static fc_tensor *to_block_cols(fx *f) { return fc_to(f->ctx, f->f_23, FC_Q8_0); }
static fc_tensor *to_null(fx *f) { return fc_to(f->ctx, NULL, FC_F32); }
static fc_tensor *contiguous_null(fx *f) { return fc_contiguous(f->ctx, NULL); }
static fc_tensor *clone_null(fx *f) { return fc_clone(f->ctx, NULL); }
static fc_tensor *detach_null(fx *f) { return fc_detach(f->ctx, NULL); }
static fc_status copy_dtype(fx *f) { return fc_copy_(f->f_23, f->d_23); }
static fc_status copy_shape(fx *f) { return fc_copy_(f->f_23, f->nc_32); }
static fc_status copy_ro(fx *f) { return fc_copy_(f->ro_23, f->f_23); }
static fc_status copy_dst_null(fx *f) { return fc_copy_(NULL, f->f_23); }
static fc_status add__ro(fx *f) { return fc_add_(f->ro_23, f->f_23); }
static fc_status add__grad(fx *f) { return fc_add_(f->p_23, f->f_23); }
static fc_status add__dtype(fx *f) { return fc_add_(f->f_23, f->d_23); }
static fc_status add__bcast(fx *f) { return fc_add_(f->f_3, f->f_23); }
static fc_status add__null(fx *f) { return fc_add_(f->f_23, NULL); }
static fc_status add_out_dtype(fx *f) { return fc_add_out(f->f_23, f->f_23, f->d_23); }
static fc_status add_out_shape(fx *f) { return fc_add_out(f->f_3, f->f_23, f->f_23); }
static fc_status add_out_ro(fx *f) { return fc_add_out(f->ro_23, f->f_23, f->f_23); }
static fc_status mul_scalar__ro(fx *f) { return fc_mul_scalar_(f->ro_23, 2); }
static fc_status mul_scalar__grad(fx *f) { return fc_mul_scalar_(f->p_23, 2); }
static fc_status fill__ro(fx *f) { return fc_fill_(f->ro_23, 1); }
static fc_status fill__grad(fx *f) { return fc_fill_(f->p_23, 1); }
static fc_status fill__block(fx *f) { return fc_fill_(f->q_232, 1); }

static const bad_case access_cases[] = {
    BAD_T(data_strided, FC_ERR_UNSUPPORTED_VIEW, "fc_tensor_data"),
    BAD_T(data_mut_ro, FC_ERR_READ_ONLY, "fc_tensor_data_mut"),
    BAD_S(copy_to_len, FC_ERR_DATA_LENGTH, "fc_tensor_copy_out"),
    BAD_S(copy_to_null, FC_ERR_NULL_ARG, "fc_tensor_copy_out"),
    BAD_S(item_many, FC_ERR_INVALID_SHAPE, "fc_tensor_item"),
    BAD_S(item_null, FC_ERR_NULL_ARG, "fc_tensor_item"),
    BAD_S(get_range, FC_ERR_INDEX, "fc_tensor_element"),
    BAD_S(get_negative, FC_ERR_INDEX, "fc_tensor_element"),
    BAD_S(get_index_null, FC_ERR_NULL_ARG, "fc_tensor_element"),
    BAD_S(get_block, FC_ERR_DTYPE, "fc_tensor_element"),
    BAD_T(to_dtype, FC_ERR_DTYPE, "fc_to"),
    BAD_T(to_block_from_f64, FC_ERR_DTYPE, "fc_to"),
    BAD_T(to_block_to_f16, FC_ERR_DTYPE, "fc_to"),
    BAD_T(to_block_cols, FC_ERR_INVALID_SHAPE, "fc_to"),
    BAD_T(to_null, FC_ERR_NULL_ARG, "fc_to"),
    BAD_T(contiguous_null, FC_ERR_NULL_ARG, "fc_contiguous"),
    BAD_T(clone_null, FC_ERR_NULL_ARG, "fc_clone"),
    BAD_T(detach_null, FC_ERR_NULL_ARG, "fc_detach"),
    BAD_S(copy_dtype, FC_ERR_DTYPE, "fc_copy_"),
    BAD_S(copy_shape, FC_ERR_SHAPE_MISMATCH, "fc_copy_"),
    BAD_S(copy_ro, FC_ERR_READ_ONLY, "fc_copy_"),
    BAD_S(copy_dst_null, FC_ERR_NULL_ARG, "fc_copy_"),
    BAD_S(add__ro, FC_ERR_READ_ONLY, "add_"),
    BAD_S(add__grad, FC_ERR_INVALID_ARG, "add_"),
    BAD_S(add__dtype, FC_ERR_DTYPE, "add_"),
    BAD_S(add__bcast, FC_ERR_SHAPE_MISMATCH, "add_"),
    BAD_S(add__null, FC_ERR_NULL_ARG, "add_"),
    BAD_S(add_out_dtype, FC_ERR_DTYPE, "add_out"),
    BAD_S(add_out_shape, FC_ERR_SHAPE_MISMATCH, "add_out"),
    BAD_S(add_out_ro, FC_ERR_READ_ONLY, "add_out"),
    BAD_S(mul_scalar__ro, FC_ERR_READ_ONLY, "mul_scalar_"),
    BAD_S(mul_scalar__grad, FC_ERR_INVALID_ARG, "mul_scalar_"),
    BAD_S(fill__ro, FC_ERR_READ_ONLY, "fill_"),
    BAD_S(fill__grad, FC_ERR_INVALID_ARG, "fill_"),
    BAD_S(fill__block, FC_ERR_DTYPE, "fill_"),
};

/* ---- autograd
 * ---------------------------------------------------------------------------------------- */

static fc_status rg_int(fx *f) { return fc_requires_grad(f->i_23, true); }
static fc_status rg_block(fx *f) { return fc_requires_grad(f->q_232, true); }
static fc_status rg_non_leaf(fx *f) {
    fc_tensor *m = fc_mul(f->ctx, f->p_23, f->p_23);
    fc_status st = fc_requires_grad(m, true);
    fc_release(m);
    return st;
}
static fc_status bw_non_scalar(fx *f) {
    fc_tensor *m = fc_mul(f->ctx, f->p_23, f->p_23);
    fc_status st = fc_backward(f->ctx, m);
    fc_release(m);
    return st;
}
static fc_status bw_null(fx *f) { return fc_backward(f->ctx, NULL); }
static fc_status bw_no_graph(fx *f) {
    fc_tensor *s = fc_sum(f->ctx, f->f_23, NULL, 0, false);
    fc_status st = fc_backward(f->ctx, s);
    fc_release(s);
    return st;
}
static fc_status bw_twice(fx *f) {
    fc_tensor *sq = fc_square(f->ctx, f->p_23);
    fc_tensor *s = fc_sum(f->ctx, sq, NULL, 0, false);
    fc_status st = fc_backward(f->ctx, s);
    if (st == FC_OK) st = fc_backward(f->ctx, s);
    fc_release(s);
    fc_release(sq);
    fc_zero_grad(&f->p_23, 1);
    return st;
}
static fc_status bw_saved_modified(fx *f) {
    /* a leaf that is not part of the fixture, modified after mul saved it */
    fc_tensor *p = fc_param_zeros(f->ctx, FC_F32, (const int64_t[]){3}, 1);
    fc_tensor *m = fc_mul(f->ctx, p, p);
    fc_tensor *s = fc_sum(f->ctx, m, NULL, 0, false);
    fc_no_grad_begin(f->ctx);
    fc_fill_(p, 2);
    fc_no_grad_end(f->ctx);
    fc_status st = fc_backward(f->ctx, s);
    fc_release(s);
    fc_release(m);
    fc_release(p);
    return st;
}
static fc_status bw_with_shape(fx *f) {
    fc_tensor *m = fc_mul(f->ctx, f->p_23, f->p_23);
    fc_status st = fc_backward_with(f->ctx, m, f->f_3, false);
    fc_release(m);
    return st;
}
static fc_status bw_with_dtype(fx *f) {
    fc_tensor *m = fc_mul(f->ctx, f->p_23, f->p_23);
    fc_status st = fc_backward_with(f->ctx, m, f->i_23, false);
    fc_release(m);
    return st;
}
static fc_status bw_with_null(fx *f) {
    fc_tensor *m = fc_mul(f->ctx, f->p_23, f->p_23);
    fc_status st = fc_backward_with(f->ctx, m, NULL, false);
    fc_release(m);
    return st;
}

static fc_tensor *gc_square(fc_ctx *ctx, fc_tensor *const *in, int n, void *user) {
    (void)n;
    (void)user;
    return fc_square(ctx, in[0]);
}
static fc_status gc_fn_null(fx *f) {
    return fc_gradcheck(f->ctx, NULL, NULL, &f->d_23, 1, NULL, NULL);
}
static fc_status gc_inputs_null(fx *f) {
    return fc_gradcheck(f->ctx, gc_square, NULL, NULL, 1, NULL, NULL);
}
static fc_status gc_n_zero(fx *f) {
    return fc_gradcheck(f->ctx, gc_square, NULL, &f->d_23, 0, NULL, NULL);
}
static fc_status gc_strided(fx *f) {
    fc_tensor *t = fc_transpose(f->ctx, f->d_23, 0, 1);
    fc_status st = fc_gradcheck(f->ctx, gc_square, NULL, &t, 1,
                                &(fc_gradcheck_opts){.check_all_f64 = true}, NULL);
    fc_release(t);
    return st;
}

static const bad_case autograd_cases[] = {
    BAD_S(rg_int, FC_ERR_DTYPE, "fc_requires_grad"),
    BAD_S(rg_block, FC_ERR_DTYPE, "fc_requires_grad"),
    BAD_S(rg_non_leaf, FC_ERR_INVALID_ARG, "fc_requires_grad"),
    BAD_S(bw_non_scalar, FC_ERR_INVALID_SHAPE, "fc_backward"),
    BAD_S(bw_null, FC_ERR_NULL_ARG, "fc_backward"),
    BAD_S(bw_no_graph, FC_ERR_NO_GRAD, "fc_backward"),
    BAD_S(bw_twice, FC_ERR_STATE, "backward of"),
    BAD_S(bw_saved_modified, FC_ERR_SAVED_MODIFIED, "backward of mul"),
    BAD_S(bw_with_shape, FC_ERR_SHAPE_MISMATCH, "fc_backward_with"),
    BAD_S(bw_with_dtype, FC_ERR_DTYPE, "fc_backward_with"),
    BAD_S(bw_with_null, FC_ERR_NULL_ARG, "fc_backward_with"),
    BAD_S(gc_fn_null, FC_ERR_NULL_ARG, "fc_gradcheck"),
    BAD_S(gc_inputs_null, FC_ERR_NULL_ARG, "fc_gradcheck"),
    BAD_S(gc_n_zero, FC_ERR_INVALID_ARG, "fc_gradcheck"),
    BAD_S(gc_strided, FC_ERR_INVALID_ARG, "fc_gradcheck"),
};

/* ---- optimizers
 * ------------------------------------------------------------------------------------------- */

static fc_status optim_try(fx *f, const fc_optim_opts *o, fc_tensor *const *p, int n) {
    fc_optim *opt = fc_optim_new(f->ctx, o, p, n);
    fc_status st = opt ? FC_OK : fc_ctx_status(f->ctx);
    fc_optim_free(opt);
    return st;
}

static fc_optim_opts adam(void) { return (fc_optim_opts){.kind = FC_OPTIM_ADAM, .lr = 0.1}; }

/* fc_optim_new with one field of valid Adam options changed */
enum opt_change { LR_NEG, LR_NAN, BETA1, EPS, WD, KIND, NESTEROV };
static fc_status optim_new_with(fx *f, enum opt_change c) {
    fc_optim_opts o = adam();
    switch (c) {
    case LR_NEG:
        o.lr = -1e-3;
        break;
    case LR_NAN:
        o.lr = NAN;
        break;
    case BETA1:
        o.beta1 = 1.5;
        break;
    case EPS:
        o.eps = -1;
        break;
    case WD:
        o.weight_decay = -1;
        break;
    case KIND:
        o.kind = (fc_optim_kind)9;
        break;
    case NESTEROV:
        o.kind = FC_OPTIM_SGD, o.nesterov = true;
        break;
    }
    return optim_try(f, &o, &f->p_23, 1);
}
static fc_status on_lr_neg(fx *f) { return optim_new_with(f, LR_NEG); }
static fc_status on_lr_nan(fx *f) { return optim_new_with(f, LR_NAN); }
static fc_status on_beta(fx *f) { return optim_new_with(f, BETA1); }
static fc_status on_eps(fx *f) { return optim_new_with(f, EPS); }
static fc_status on_wd(fx *f) { return optim_new_with(f, WD); }
static fc_status on_kind(fx *f) { return optim_new_with(f, KIND); }
static fc_status on_nesterov(fx *f) { return optim_new_with(f, NESTEROV); }
static fc_status on_param_int(fx *f) {
    fc_optim_opts o = adam();
    return optim_try(f, &o, &f->i_23, 1);
}
static fc_status on_param_strided(fx *f) {
    fc_optim_opts o = adam();
    return optim_try(f, &o, &f->nc_32, 1);
}
static fc_status on_param_null(fx *f) {
    fc_optim_opts o = adam();
    return optim_try(f, &o, (fc_tensor *[]){NULL}, 1);
}
static fc_status on_param_twice(fx *f) {
    fc_optim_opts o = adam();
    return optim_try(f, &o, (fc_tensor *[]){f->p_23, f->p_23}, 2);
}
static fc_status on_opts_null(fx *f) { return optim_try(f, NULL, &f->p_23, 1); }
static fc_status on_params_null(fx *f) {
    fc_optim_opts o = adam();
    return optim_try(f, &o, NULL, 1);
}
static fc_status on_n_neg(fx *f) {
    fc_optim_opts o = adam();
    return optim_try(f, &o, &f->p_23, -1);
}

/* one bad call on a valid optimizer, freed before returning */
enum optim_call {
    SET_LR_NEG,
    GROUP_LR_RANGE,
    GROUP_LR_NEG,
    ADD_GROUP_KIND,
    ADD_GROUP_DUP,
    STEP_COUNT_NEG,
    GROUP_OPTS_KIND,
    GROUP_OPTS_LR,
    STATE_NAME,
    STATE_INDEX,
    STATE_NULL,
    SET_LR_NAN,
    GET_GROUP_OPTS_INDEX,
    GET_GROUP_OPTS_NULL
};
static fc_status with_optim(fx *f, enum optim_call c) {
    fc_optim_opts o = adam(), sgd = {.kind = FC_OPTIM_SGD, .lr = 0.1}, bad_lr = adam();
    bad_lr.lr = -1;
    fc_optim *opt = fc_optim_new(f->ctx, &o, &f->p_23, 1);
    if (!opt) return FC_ERR_STATE;
    fc_status st = FC_OK;
    switch (c) {
    case SET_LR_NEG:
        st = fc_optim_set_lr(opt, -1);
        break;
    case GROUP_LR_RANGE:
        st = fc_optim_set_group_lr(opt, 1, 0.1);
        break;
    case GROUP_LR_NEG:
        st = fc_optim_set_group_lr(opt, -1, 0.1);
        break;
    case ADD_GROUP_KIND:
        st = fc_optim_add_group(opt, &sgd, &f->f_3, 1);
        break;
    case ADD_GROUP_DUP:
        st = fc_optim_add_group(opt, &o, &f->p_23, 1);
        break;
    case STEP_COUNT_NEG:
        st = fc_optim_set_step_count(opt, -1);
        break;
    case GROUP_OPTS_KIND:
        st = fc_optim_set_group_opts(opt, 0, &sgd);
        break;
    case GROUP_OPTS_LR:
        st = fc_optim_set_group_opts(opt, 0, &bad_lr);
        break;
    case STATE_NAME:
        st = fc_optim_state(opt, 0, "bogus", true) ? FC_OK : fc_ctx_status(f->ctx);
        break;
    case STATE_INDEX:
        st = fc_optim_state(opt, 1, "exp_avg", true) ? FC_OK : fc_ctx_status(f->ctx);
        break;
    case STATE_NULL:
        st = fc_optim_state(opt, 0, NULL, true) ? FC_OK : fc_ctx_status(f->ctx);
        break;
    case SET_LR_NAN:
        st = fc_optim_set_lr(opt, NAN);
        break;
    case GET_GROUP_OPTS_INDEX: {
        fc_optim_opts out;
        st = fc_optim_group_opts(opt, 1, &out);
        break;
    }
    case GET_GROUP_OPTS_NULL:
        st = fc_optim_group_opts(opt, 0, NULL);
        break;
    }
    fc_optim_free(opt);
    return st;
}
static fc_status o_set_lr(fx *f) { return with_optim(f, SET_LR_NEG); }
static fc_status o_set_lr_nan(fx *f) { return with_optim(f, SET_LR_NAN); }
static fc_status o_get_group_opts_index(fx *f) { return with_optim(f, GET_GROUP_OPTS_INDEX); }
static fc_status o_get_group_opts_null(fx *f) { return with_optim(f, GET_GROUP_OPTS_NULL); }
static fc_status o_group_lr_range(fx *f) { return with_optim(f, GROUP_LR_RANGE); }
static fc_status o_group_lr_neg(fx *f) { return with_optim(f, GROUP_LR_NEG); }
static fc_status o_add_group_kind(fx *f) { return with_optim(f, ADD_GROUP_KIND); }
static fc_status o_add_group_dup(fx *f) { return with_optim(f, ADD_GROUP_DUP); }
static fc_status o_step_count(fx *f) { return with_optim(f, STEP_COUNT_NEG); }
static fc_status o_group_opts_kind(fx *f) { return with_optim(f, GROUP_OPTS_KIND); }
static fc_status o_group_opts_lr(fx *f) { return with_optim(f, GROUP_OPTS_LR); }
static fc_status o_state_name(fx *f) { return with_optim(f, STATE_NAME); }
static fc_status o_state_index(fx *f) { return with_optim(f, STATE_INDEX); }
static fc_status o_state_null(fx *f) { return with_optim(f, STATE_NULL); }
static fc_status clip_norm_neg(fx *f) { return fc_clip_grad_norm(f->ctx, &f->p_23, 1, -1, NULL); }
static fc_status clip_norm_nan(fx *f) { return fc_clip_grad_norm(f->ctx, &f->p_23, 1, NAN, NULL); }
static fc_status clip_params_null(fx *f) { return fc_clip_grad_norm(f->ctx, NULL, 1, 1, NULL); }
static fc_status clip_n_neg(fx *f) { return fc_clip_grad_norm(f->ctx, &f->p_23, -1, 1, NULL); }

static const bad_case optim_cases[] = {
    BAD_S(on_lr_neg, FC_ERR_INVALID_ARG, "fc_optim_new"),
    BAD_S(on_lr_nan, FC_ERR_INVALID_ARG, "fc_optim_new"),
    BAD_S(on_beta, FC_ERR_INVALID_ARG, "fc_optim_new"),
    BAD_S(on_eps, FC_ERR_INVALID_ARG, "fc_optim_new"),
    BAD_S(on_wd, FC_ERR_INVALID_ARG, "fc_optim_new"),
    BAD_S(on_kind, FC_ERR_INVALID_ARG, "fc_optim_new"),
    BAD_S(on_nesterov, FC_ERR_INVALID_ARG, "fc_optim_new"),
    BAD_S(on_param_int, FC_ERR_DTYPE, "fc_optim_new"),
    BAD_S(on_param_strided, FC_ERR_UNSUPPORTED_VIEW, "fc_optim_new"),
    BAD_S(on_param_null, FC_ERR_NULL_ARG, "fc_optim_new"),
    BAD_S(on_param_twice, FC_ERR_INVALID_ARG, "fc_optim_new"),
    BAD_S(on_opts_null, FC_ERR_NULL_ARG, "fc_optim_new"),
    BAD_S(on_params_null, FC_ERR_NULL_ARG, "fc_optim_new"),
    BAD_S(on_n_neg, FC_ERR_INVALID_ARG, "fc_optim_new"),
    BAD_S(o_set_lr, FC_ERR_INVALID_ARG, "fc_optim_set_lr"),
    BAD_S(o_set_lr_nan, FC_ERR_INVALID_ARG, "fc_optim_set_lr"),
    BAD_S(o_get_group_opts_index, FC_ERR_INDEX, "fc_optim_group_opts: group 1 of 1"),
    BAD_S(o_get_group_opts_null, FC_ERR_NULL_ARG, "fc_optim_group_opts"),
    BAD_S(o_group_lr_range, FC_ERR_INDEX, "fc_optim_set_group_lr"),
    BAD_S(o_group_lr_neg, FC_ERR_INDEX, "fc_optim_set_group_lr"),
    BAD_S(o_add_group_kind, FC_ERR_INVALID_ARG, "fc_optim_add_group"),
    BAD_S(o_add_group_dup, FC_ERR_INVALID_ARG, "fc_optim_add_group"),
    BAD_S(o_step_count, FC_ERR_INVALID_ARG, "fc_optim_set_step_count"),
    BAD_S(o_group_opts_kind, FC_ERR_INVALID_ARG, "fc_optim_set_group_opts"),
    BAD_S(o_group_opts_lr, FC_ERR_INVALID_ARG, "fc_optim_set_group_opts"),
    BAD_S(o_state_name, FC_ERR_INVALID_ARG, "fc_optim_state"),
    BAD_S(o_state_index, FC_ERR_INDEX, "fc_optim_state"),
    BAD_S(o_state_null, FC_ERR_NULL_ARG, "fc_optim_state"),
    BAD_S(clip_norm_neg, FC_ERR_INVALID_ARG, "fc_clip_grad_norm"),
    BAD_S(clip_norm_nan, FC_ERR_INVALID_ARG, "fc_clip_grad_norm"),
    BAD_S(clip_params_null, FC_ERR_NULL_ARG, "fc_clip_grad_norm"),
    BAD_S(clip_n_neg, FC_ERR_INVALID_ARG, "fc_clip_grad_norm"),
};

/* ---- the context
 * ------------------------------------------------------------------------------------------ */

static fc_status threads_neg(fx *f) { return fc_ctx_set_threads(f->ctx, -1); }
static fc_status scopes_too_deep(fx *f) {
    for (int i = 0; i < 300; i++)
        fc_scope_begin(f->ctx);
    fc_status st = fc_ctx_status(f->ctx);
    for (int i = 0; i < 300; i++)
        fc_scope_end(f->ctx);
    return st;
}
static fc_status fail_records(fx *f) { return fc_ctx_fail(f->ctx, FC_ERR_FORMAT, "my_op: %d", 7); }

static const bad_case ctx_cases[] = {
    BAD_S(threads_neg, FC_ERR_INVALID_ARG, "fc_ctx_set_threads"),
    BAD_S(scopes_too_deep, FC_ERR_STATE, "fc_scope_begin"),
    BAD_S(fail_records, FC_ERR_FORMAT, "my_op: 7"),
};

static void test_bad_input_api_context(void **state) {
    fx *f = *state;
    assert_int_equal(bad_run(f, ctx_cases, sizeof ctx_cases / sizeof ctx_cases[0], NULL), 0);
    /* no context to record into: the codes alone */
    assert_null(fc_ctx_new(&(fc_ctx_opts){.threads = -1}));
    assert_null(fc_ctx_new(&(fc_ctx_opts){.backend = FC_BACKEND_COUNT}));
    assert_null(fc_ctx_new(&(fc_ctx_opts){.allocator = &(fc_allocator){NULL, NULL, NULL}}));
    assert_int_equal(fc_ctx_status(NULL), FC_ERR_NULL_ARG);
    assert_int_equal(fc_ctx_set_threads(NULL, 1), FC_ERR_NULL_ARG);
    assert_int_equal(fc_ctx_set_backend(NULL, FC_BACKEND_REF), FC_ERR_NULL_ARG);
    assert_null(fc_zeros(NULL, FC_F32, (const int64_t[]){2}, 1));
    assert_int_equal(fc_backward(NULL, f->f_1), FC_ERR_NULL_ARG);
    assert_int_equal(fc_requires_grad(NULL, true), FC_ERR_NULL_ARG);
    assert_int_equal(fc_optim_step(NULL), FC_ERR_NULL_ARG);
    assert_int_equal(fc_fill_(NULL, 1), FC_ERR_NULL_ARG);
    assert_non_null(strstr(fc_ctx_error(NULL), "NULL"));
}

/* The first error is kept: later failures and NULL inputs leave it alone,
 * so a chain of ops reports its root cause. */
static void test_bad_input_api_first_error_kept(void **state) {
    fx *f = *state;
    fc_ctx_clear_error(f->ctx);
    fc_tensor *y = fc_relu(f->ctx, fc_exp(f->ctx, fc_add(f->ctx, f->f_23, f->f_4)));
    assert_null(y);
    assert_int_equal(fc_ctx_status(f->ctx), FC_ERR_SHAPE_MISMATCH);
    assert_non_null(strstr(fc_ctx_error(f->ctx), "add"));
    /* a different failure afterwards does not replace it */
    assert_null(fc_sum(f->ctx, f->f_23, (const int[]){9}, 1, false));
    assert_int_equal(fc_ctx_status(f->ctx), FC_ERR_SHAPE_MISMATCH);
    assert_int_equal(fc_ctx_fail(f->ctx, FC_ERR_IO, "later"), FC_ERR_IO);
    assert_null(strstr(fc_ctx_error(f->ctx), "later"));
    /* until cleared */
    fc_ctx_clear_error(f->ctx);
    assert_int_equal(fc_ctx_status(f->ctx), FC_OK);
    assert_string_equal(fc_ctx_error(f->ctx), "");
    fc_tensor *ok = fc_add(f->ctx, f->f_23, f->f_3);
    assert_non_null(ok);
    fc_release(ok);
}

static void run_table(void **state, const bad_case *cases, size_t n) {
    assert_int_equal(bad_run(*state, cases, n, NULL), 0);
}

static void test_bad_input_api_creation(void **state) {
    run_table(state, creation_cases, sizeof creation_cases / sizeof creation_cases[0]);
}

static void test_bad_input_api_access(void **state) {
    run_table(state, access_cases, sizeof access_cases / sizeof access_cases[0]);
}

static void test_bad_input_api_autograd(void **state) {
    run_table(state, autograd_cases, sizeof autograd_cases / sizeof autograd_cases[0]);
}

static void test_bad_input_api_optim(void **state) {
    run_table(state, optim_cases, sizeof optim_cases / sizeof optim_cases[0]);
}

static int setup(void **state) {
    fx *f = fx_new();
    *state = f;
    return f->ctx && fc_ctx_status(f->ctx) == FC_OK ? 0 : -1;
}

static int teardown(void **state) {
    fx_free(*state);
    return 0;
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bad_input_api_creation),
        cmocka_unit_test(test_bad_input_api_access),
        cmocka_unit_test(test_bad_input_api_autograd),
        cmocka_unit_test(test_bad_input_api_optim),
        cmocka_unit_test(test_bad_input_api_context),
        cmocka_unit_test(test_bad_input_api_first_error_kept),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
