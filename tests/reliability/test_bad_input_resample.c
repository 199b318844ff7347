/* SPDX-License-Identifier: MIT */
/* test_bad_input_resample.c - the bad inputs of fc_einsum and
 * fc_interpolate (bad_input.h's table runner: exact status, the op named
 * in the message, no handle left behind, the context still usable),
 * including the hostile sizes of test_bad_input_sizes.c for interpolate's
 * size argument and non-finite or huge scale factors. */
#include <float.h>
#include <math.h>

#include "bad_input.h"

/* ---- einsum ------------------------------------------------------------------------------- */

#define EIN(nm, eq, n, ...)                                                                        \
    static fc_tensor *nm(fx *f) {                                                                  \
        fc_tensor *xs[] = {__VA_ARGS__};                                                           \
        return fc_einsum(f->ctx, eq, xs, n);                                                       \
    }

EIN(ein_bad_char, "ij,j#->i", 2, f->f_23, f->f_32)
EIN(ein_dot, "i.j", 1, f->f_23)
EIN(ein_two_ellipsis, "......", 1, f->f_23)
EIN(ein_too_many_terms, "ij,jk,k", 2, f->f_23, f->f_32)
EIN(ein_too_few_terms, "ij", 2, f->f_23, f->f_32)
EIN(ein_arrow_twice, "ij->j->i", 1, f->f_23)
EIN(ein_comma_in_output, "ij->i,j", 1, f->f_23)
EIN(ein_out_repeated, "ij->ii", 1, f->f_23)
EIN(ein_out_unknown, "ij->k", 1, f->f_23)
EIN(ein_rank_short, "i", 1, f->f_23)
EIN(ein_rank_long, "ijk", 1, f->f_23)
EIN(ein_rank_ellipsis, "ijk...", 1, f->f_23)
EIN(ein_size_mismatch, "ij,jk->ik", 2, f->f_23, f->f_23)
EIN(ein_diag_mismatch, "ii->i", 1, f->f_23)
EIN(ein_dtype_mix, "ij,ij->ij", 2, f->f_23, f->d_23)
EIN(ein_int, "ij->ji", 1, f->i_23)
EIN(ein_bool, "ij->ji", 1, f->b_23)
EIN(ein_block, "ij->ji", 1, f->q_232)
EIN(ein_null_item, "ij,jk->ik", 2, f->f_23, NULL)
EIN(ein_rank9, "abcdefghi", 1, f->f_23)
EIN(ein_wide_output, "a,b,c,d,e,f,g,h,i,j", 10, f->f_1, f->f_1, f->f_1, f->f_1, f->f_1, f->f_1,
    f->f_1, f->f_1, f->f_1, f->f_1)
static fc_tensor *ein_null_eq(fx *f) { return fc_einsum(f->ctx, NULL, &f->f_23, 1); }
static fc_tensor *ein_null_list(fx *f) { return fc_einsum(f->ctx, "ij", NULL, 1); }
static fc_tensor *ein_n_zero(fx *f) { return fc_einsum(f->ctx, "ij", &f->f_23, 0); }
static fc_tensor *ein_n_neg(fx *f) { return fc_einsum(f->ctx, "ij", &f->f_23, -3); }
static fc_tensor *ein_other_ctx(fx *f) {
    fc_ctx *other = fc_ctx_new(NULL);
    fc_tensor *t = fc_ones(other, FC_F32, (const int64_t[]){2, 3}, 2);
    fc_tensor *y = fc_einsum(f->ctx, "ij", &t, 1);
    fc_ctx_free(other);
    return y;
}

static const bad_case einsum_cases[] = {
    BAD_T(ein_bad_char, FC_ERR_INVALID_ARG, "position 4"),
    BAD_T(ein_dot, FC_ERR_INVALID_ARG, "position 1"),
    BAD_T(ein_two_ellipsis, FC_ERR_INVALID_ARG, "position 3"),
    BAD_T(ein_too_many_terms, FC_ERR_INVALID_ARG, "3 operand subscripts for 2 operands"),
    BAD_T(ein_too_few_terms, FC_ERR_INVALID_ARG, "1 operand subscripts for 2 operands"),
    BAD_T(ein_arrow_twice, FC_ERR_INVALID_ARG, "position 5"),
    BAD_T(ein_comma_in_output, FC_ERR_INVALID_ARG, "position 5"),
    BAD_T(ein_out_repeated, FC_ERR_INVALID_ARG, "position 5"),
    BAD_T(ein_out_unknown, FC_ERR_INVALID_ARG, "'k' is in no operand"),
    BAD_T(ein_rank_short, FC_ERR_RANK, "has rank 2 but 1 subscripts"),
    BAD_T(ein_rank_long, FC_ERR_RANK, "\"ijk\""),
    BAD_T(ein_rank_ellipsis, FC_ERR_RANK, "einsum"),
    BAD_T(ein_size_mismatch, FC_ERR_SHAPE_MISMATCH, "label 'j' has size 2 in operand 1"),
    BAD_T(ein_diag_mismatch, FC_ERR_SHAPE_MISMATCH, "repeated in operand 0 with sizes 2"),
    BAD_T(ein_dtype_mix, FC_ERR_DTYPE, "einsum"),
    BAD_T(ein_int, FC_ERR_DTYPE, "einsum"),
    BAD_T(ein_bool, FC_ERR_DTYPE, "einsum"),
    BAD_T(ein_block, FC_ERR_DTYPE, "einsum"),
    BAD_T(ein_null_item, FC_ERR_NULL_ARG, "operand 1"),
    BAD_T(ein_rank9, FC_ERR_RANK, "einsum"),
    BAD_T(ein_wide_output, FC_ERR_RANK, "the output has 10 axes"),
    BAD_T(ein_null_eq, FC_ERR_NULL_ARG, "einsum"),
    BAD_T(ein_null_list, FC_ERR_NULL_ARG, "einsum"),
    BAD_T(ein_n_zero, FC_ERR_INVALID_ARG, "einsum"),
    BAD_T(ein_n_neg, FC_ERR_INVALID_ARG, "einsum"),
    BAD_T(ein_other_ctx, FC_ERR_CONTEXT, "einsum"),
};

static void test_bad_input_resample_einsum(void **state) {
    fx *f = *state;
    assert_int_equal(bad_run(f, einsum_cases, sizeof einsum_cases / sizeof einsum_cases[0], NULL),
                     0);
}

/* ---- interpolate -------------------------------------------------------------------------- */

#define INTERP(nm, x, ...)                                                                         \
    static fc_tensor *nm(fx *f) {                                                                  \
        fc_interpolate_opts o = __VA_ARGS__;                                                       \
        return fc_interpolate(f->ctx, x, &o);                                                      \
    }

INTERP(ip_rank2, f->f_23, {.size = {4, 4}})
INTERP(ip_rank1, f->f_3, {.size = {4}})
INTERP(ip_mode, f->f_234, {.mode = FC_INTERP_MODE_COUNT, .size = {4}})
INTERP(ip_mode_neg, f->f_234, {.mode = (fc_interp_mode)-1, .size = {4}})
INTERP(ip_nearest_ac, f->f_234, {.size = {4}, .align_corners = true})
INTERP(ip_neither, f->f_234, {.mode = FC_INTERP_LINEAR})
INTERP(ip_both, f->f_234, {.size = {4}, .scale = {2}})
INTERP(ip_entry1_3d, f->f_234, {.size = {4, 4}})
INTERP(ip_scale1_3d, f->f_234, {.scale = {2, 2}})
INTERP(ip_4d_size_zero, f->f_345, {.mode = FC_INTERP_LINEAR, .size = {0, 4}})
INTERP(ip_size_big, f->f_234, {.size = {(int64_t)1 << 62}})
INTERP(ip_size_max, f->f_234, {.size = {INT64_MAX}})
INTERP(ip_size_neg, f->f_234, {.size = {-1}})
INTERP(ip_size_min, f->f_234, {.size = {INT64_MIN}})
INTERP(ip_scale_neg, f->f_234, {.scale = {-2}})
INTERP(ip_scale_nan, f->f_234, {.scale = {NAN}})
INTERP(ip_scale_inf, f->f_234, {.scale = {INFINITY}})
INTERP(ip_scale_empty, f->f_234, {.scale = {0.1}})
INTERP(ip_scale_huge, f->f_234, {.scale = {1e300}})
INTERP(ip_scale_denorm, f->f_234, {.scale = {DBL_TRUE_MIN}})
static fc_tensor *ip_int(fx *f) {
    fc_tensor *x = fc_zeros(f->ctx, FC_I32, (const int64_t[]){2, 3, 4}, 3);
    fc_tensor *y = fc_interpolate(f->ctx, x, &(fc_interpolate_opts){.size = {4}});
    fc_release(x);
    return y;
}
static fc_tensor *ip_4d_zero_h(fx *f) {
    fc_tensor *v = fc_reshape(f->ctx, f->f_234, (const int64_t[]){1, 2, 3, 4}, 4);
    fc_tensor *y = fc_interpolate(f->ctx, v, &(fc_interpolate_opts){.size = {0, 5}});
    fc_release(v);
    return y;
}
static fc_tensor *ip_null_x(fx *f) {
    return fc_interpolate(f->ctx, NULL, &(fc_interpolate_opts){.size = {4}});
}
static fc_tensor *ip_null_opts(fx *f) { return fc_interpolate(f->ctx, f->f_234, NULL); }
/* [2, 3, 4] as [1, 2, 3, 4] (a 4-d view) with one 2^31 - 1 axis and a
 * 2^31 - 1 other: the element count passes int64 */
static fc_tensor *ip_output_overflow(fx *f) {
    fc_tensor *v = fc_reshape(f->ctx, f->f_234, (const int64_t[]){1, 2, 3, 4}, 4);
    fc_interpolate_opts o = {.size = {INT32_MAX, INT32_MAX}};
    fc_tensor *y = fc_interpolate(f->ctx, v, &o);
    fc_release(v);
    return y;
}

static const bad_case interp_cases[] = {
    BAD_T(ip_rank2, FC_ERR_RANK, NULL),
    BAD_T(ip_rank1, FC_ERR_RANK, NULL),
    BAD_T(ip_int, FC_ERR_DTYPE, "i32"),
    BAD_T(ip_mode, FC_ERR_INVALID_ARG, "mode 2"),
    BAD_T(ip_mode_neg, FC_ERR_INVALID_ARG, "mode -1"),
    BAD_T(ip_nearest_ac, FC_ERR_INVALID_ARG, "align_corners"),
    BAD_T(ip_neither, FC_ERR_INVALID_ARG, "exactly one"),
    BAD_T(ip_both, FC_ERR_INVALID_ARG, "exactly one"),
    BAD_T(ip_entry1_3d, FC_ERR_INVALID_ARG, "one spatial axis"),
    BAD_T(ip_scale1_3d, FC_ERR_INVALID_ARG, "one spatial axis"),
    BAD_T(ip_size_big, FC_ERR_INVALID_ARG, "size[0]"),
    BAD_T(ip_size_max, FC_ERR_INVALID_ARG, "size[0]"),
    BAD_T(ip_size_neg, FC_ERR_INVALID_ARG, "size[0] = -1"),
    BAD_T(ip_size_min, FC_ERR_INVALID_ARG, "size[0]"),
    BAD_T(ip_scale_neg, FC_ERR_INVALID_ARG, "scale[0] = -2"),
    BAD_T(ip_scale_nan, FC_ERR_INVALID_ARG, "scale[0]"),
    BAD_T(ip_scale_inf, FC_ERR_INVALID_ARG, "scale[0]"),
    BAD_T(ip_scale_empty, FC_ERR_INVALID_SHAPE, "empty axis"),
    BAD_T(ip_scale_huge, FC_ERR_OVERFLOW, "scale[0]"),
    BAD_T(ip_scale_denorm, FC_ERR_INVALID_SHAPE, "empty axis"),
    BAD_T(ip_4d_size_zero, FC_ERR_INVALID_ARG, "one spatial axis"),
    BAD_T(ip_4d_zero_h, FC_ERR_INVALID_ARG, "size[0] = 0"),
    BAD_T(ip_null_x, FC_ERR_NULL_ARG, NULL),
    BAD_T(ip_null_opts, FC_ERR_NULL_ARG, NULL),
    BAD_T(ip_output_overflow, FC_ERR_OVERFLOW, "too large"),
};

/* a valid 3-d call on the same fixture: the table's rows fail for their
 * own reason */
static void test_bad_input_resample_interpolate(void **state) {
    fx *f = *state;
    fc_tensor *ok = fc_interpolate(f->ctx, f->f_234, &(fc_interpolate_opts){.size = {7}});
    assert_non_null(ok);
    fc_release(ok);
    assert_int_equal(
        bad_run(f, interp_cases, sizeof interp_cases / sizeof interp_cases[0], "interpolate"), 0);
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
        cmocka_unit_test(test_bad_input_resample_einsum),
        cmocka_unit_test(test_bad_input_resample_interpolate),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
