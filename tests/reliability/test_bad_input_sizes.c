/* SPDX-License-Identifier: MIT */
/* test_bad_input_sizes.c - hostile sizes for every integer argument of the
 * windowed op families (convolutions, pooling) and hostile shapes for
 * attention, table-driven like the other bad-input tests (bad_input.h).
 *
 * The table is a cross: each family lists its integer arguments (one row
 * per argument and axis) with the status each hostile value must give, and
 * the runner tries every value on every row. A new family with integer
 * arguments adds one family entry, and so meets every hostile value by
 * construction. The values are those whose arithmetic wraps: 2^62 (twice
 * it does), INT64_MAX (plus one does), -1 and INT64_MIN. An argument a
 * hostile value leaves valid (a stride of 2^62 gives one output column)
 * expects FC_OK: the call must succeed with a sane shape, not just fail
 * politely. Everything runs under the sanitizers in CI, where a wrapped
 * sum is a report, not a silently wrong size. */
#include "bad_input.h"

#define N_HOSTILE 4
static const int64_t hostile[N_HOSTILE] = {(int64_t)1 << 62, INT64_MAX, -1, INT64_MIN};
static const char *const hostile_name[N_HOSTILE] = {"2^62", "INT64_MAX", "-1", "INT64_MIN"};

/* the family's inputs: x [1, 1, 3, 3] (conv1d: [1, 1, 3]), weights with a
 * kernel of 2, a pooling input [1, 1, 4, 4] */
typedef struct sz_inputs {
    fc_tensor *x4, *w4, *x3, *w3, *xp;
    fc_tensor *x5, *w5, *xp5; /* the 3-D ops: [1, 1, 3, 3, 3], kernel 2, [1, 1, 4, 4, 4] */
} sz_inputs;
static sz_inputs g_in;

typedef fc_tensor *(*sz_call)(fx *f, int slot, int64_t v);

/* One integer argument: its name (for messages) and the status of each
 * hostile value, in the order of hostile[]. */
typedef struct sz_slot {
    const char *arg;
    fc_status want[N_HOSTILE];
} sz_slot;

typedef struct sz_family {
    const char *op; /* the messages must name it */
    sz_call call;
    const sz_slot *slots;
    int n_slots;
} sz_family;

#define OK FC_OK
#define BADARG FC_ERR_INVALID_ARG
#define OVF FC_ERR_OVERFLOW
#define SHAPE FC_ERR_INVALID_SHAPE
#define MISMATCH FC_ERR_SHAPE_MISMATCH

/* ---- convolutions ----------------------------------------------------------------------- */

enum { C_STRIDE_H, C_STRIDE_W, C_PAD_H, C_PAD_W, C_DIL_H, C_DIL_W, C_GROUPS, C_SAME_DIL_W };

static const sz_slot conv2d_slots[] = {
    [C_STRIDE_H] = {"stride[0]", {OK, OK, BADARG, BADARG}},
    [C_STRIDE_W] = {"stride[1]", {OK, OK, BADARG, BADARG}},
    [C_PAD_H] = {"padding[0]", {OVF, OVF, BADARG, BADARG}},
    [C_PAD_W] = {"padding[1]", {OVF, OVF, BADARG, BADARG}},
    /* 2^62 * (2 - 1) + 1 fits and is wider than the padded input */
    [C_DIL_H] = {"dilation[0]", {SHAPE, OVF, BADARG, BADARG}},
    [C_DIL_W] = {"dilation[1]", {SHAPE, OVF, BADARG, BADARG}},
    [C_GROUPS] = {"groups", {MISMATCH, MISMATCH, BADARG, BADARG}},
    /* padding_same pads (extent - 1) / 2 = 2^61 on each side: valid */
    [C_SAME_DIL_W] = {"dilation[1] with padding_same", {OK, OVF, BADARG, BADARG}},
};

static fc_tensor *conv2d_call(fx *f, int slot, int64_t v) {
    fc_conv2d_opts o = fc_conv2d_opts_default();
    int64_t *arg[] = {&o.stride[0],   &o.stride[1],   &o.padding[0], &o.padding[1],
                      &o.dilation[0], &o.dilation[1], &o.groups,     &o.dilation[1]};
    *arg[slot] = v;
    o.padding_same = slot == C_SAME_DIL_W;
    return fc_conv2d(f->ctx, g_in.x4, g_in.w4, NULL, &o);
}

enum { C1_STRIDE, C1_PAD, C1_DIL, C1_GROUPS };
static const sz_slot conv1d_slots[] = {
    [C1_STRIDE] = {"stride", {OK, OK, BADARG, BADARG}},
    [C1_PAD] = {"padding", {OVF, OVF, BADARG, BADARG}},
    [C1_DIL] = {"dilation", {SHAPE, OVF, BADARG, BADARG}},
    [C1_GROUPS] = {"groups", {MISMATCH, MISMATCH, BADARG, BADARG}},
};

static fc_tensor *conv1d_call(fx *f, int slot, int64_t v) {
    fc_conv1d_opts o = fc_conv1d_opts_default();
    int64_t *arg[] = {&o.stride, &o.padding, &o.dilation, &o.groups};
    *arg[slot] = v;
    return fc_conv1d(f->ctx, g_in.x3, g_in.w3, NULL, &o);
}

enum {
    T_STRIDE_H,
    T_STRIDE_W,
    T_PAD_H,
    T_PAD_W,
    T_DIL_H,
    T_DIL_W,
    T_OUTPAD_H,
    T_OUTPAD_W,
    T_GROUPS
};
static const sz_slot convt_slots[] = {
    /* (3 - 1) * stride wraps for 2^62 already */
    [T_STRIDE_H] = {"stride[0]", {OVF, OVF, BADARG, BADARG}},
    [T_STRIDE_W] = {"stride[1]", {OVF, OVF, BADARG, BADARG}},
    [T_PAD_H] = {"padding[0]", {OVF, OVF, BADARG, BADARG}},
    [T_PAD_W] = {"padding[1]", {OVF, OVF, BADARG, BADARG}},
    /* 2^62: an output axis of 2^62 + 3, too many elements; INT64_MAX: the
     * extent wraps */
    [T_DIL_H] = {"dilation[0]", {OVF, OVF, BADARG, BADARG}},
    [T_DIL_W] = {"dilation[1]", {OVF, OVF, BADARG, BADARG}},
    [T_OUTPAD_H] = {"output_padding[0]", {BADARG, BADARG, BADARG, BADARG}},
    [T_OUTPAD_W] = {"output_padding[1]", {BADARG, BADARG, BADARG, BADARG}},
    [T_GROUPS] = {"groups", {MISMATCH, MISMATCH, BADARG, BADARG}},
};

static fc_tensor *convt_call(fx *f, int slot, int64_t v) {
    fc_conv_transpose2d_opts o = fc_conv_transpose2d_opts_default();
    int64_t *arg[] = {&o.stride[0],         &o.stride[1],         &o.padding[0],
                      &o.padding[1],        &o.dilation[0],       &o.dilation[1],
                      &o.output_padding[0], &o.output_padding[1], &o.groups};
    *arg[slot] = v;
    return fc_conv_transpose2d(f->ctx, g_in.x4, g_in.w4, NULL, &o);
}

/* ---- pooling ---------------------------------------------------------------------------- */

enum { P_KERNEL_H, P_KERNEL_W, P_STRIDE_H, P_STRIDE_W, P_PAD_H, P_PAD_W, P_DIL_H, P_DIL_W };
#define P_ALL_BAD                                                                                  \
    { BADARG, BADARG, BADARG, BADARG }
static const sz_slot maxpool_slots[] = {
    [P_KERNEL_H] = {"kernel[0]", P_ALL_BAD}, [P_KERNEL_W] = {"kernel[1]", P_ALL_BAD},
    [P_STRIDE_H] = {"stride[0]", P_ALL_BAD}, [P_STRIDE_W] = {"stride[1]", P_ALL_BAD},
    [P_PAD_H] = {"padding[0]", P_ALL_BAD},   [P_PAD_W] = {"padding[1]", P_ALL_BAD},
    [P_DIL_H] = {"dilation[0]", P_ALL_BAD},  [P_DIL_W] = {"dilation[1]", P_ALL_BAD},
};
/* average pooling: the same rows, plus divisor_override (any positive
 * divisor is valid) */
#define P_DIVISOR 8
static const sz_slot avgpool_slots[] = {
    [P_KERNEL_H] = {"kernel[0]", P_ALL_BAD},
    [P_KERNEL_W] = {"kernel[1]", P_ALL_BAD},
    [P_STRIDE_H] = {"stride[0]", P_ALL_BAD},
    [P_STRIDE_W] = {"stride[1]", P_ALL_BAD},
    [P_PAD_H] = {"padding[0]", P_ALL_BAD},
    [P_PAD_W] = {"padding[1]", P_ALL_BAD},
    [P_DIL_H] = {"dilation[0]", P_ALL_BAD},
    [P_DIL_W] = {"dilation[1]", P_ALL_BAD},
    [P_DIVISOR] = {"divisor_override", {OK, OK, BADARG, BADARG}},
};

static fc_pool2d_opts pool_opts(int slot, int64_t v) {
    fc_pool2d_opts o = {.kernel = {2, 2}};
    int64_t *arg[] = {&o.kernel[0],   &o.kernel[1],   &o.stride[0],
                      &o.stride[1],   &o.padding[0],  &o.padding[1],
                      &o.dilation[0], &o.dilation[1], &o.divisor_override};
    *arg[slot] = v;
    return o;
}
static fc_tensor *maxpool_call(fx *f, int slot, int64_t v) {
    fc_pool2d_opts o = pool_opts(slot, v);
    return fc_max_pool2d(f->ctx, g_in.xp, &o);
}
static fc_tensor *avgpool_call(fx *f, int slot, int64_t v) {
    fc_pool2d_opts o = pool_opts(slot, v);
    return fc_avg_pool2d(f->ctx, g_in.xp, &o);
}

static const sz_slot adaptive_slots[] = {
    {"output_size[0]", P_ALL_BAD},
    {"output_size[1]", P_ALL_BAD},
};
static fc_tensor *adaptive_call(fx *f, int slot, int64_t v) {
    int64_t out[2] = {2, 2};
    out[slot] = v;
    return fc_adaptive_avg_pool2d(f->ctx, g_in.xp, out);
}

/* ---- the 3-D ops (conv3d, max_pool3d, avg_pool3d) ---------------------------------------- */

/* conv3d's rows are conv2d's on three axes; padding_same with a dilation
 * of 2^62 on the depth axis makes every tap read padding: valid (zeros) */
enum { C3_STRIDE, C3_PAD = 3, C3_DIL = 6, C3_GROUPS = 9, C3_SAME_DIL_D, C3_SAME_DIL_W };
static const sz_slot conv3d_slots[] = {
    [C3_STRIDE] = {"stride[0]", {OK, OK, BADARG, BADARG}},
    [C3_STRIDE + 1] = {"stride[1]", {OK, OK, BADARG, BADARG}},
    [C3_STRIDE + 2] = {"stride[2]", {OK, OK, BADARG, BADARG}},
    [C3_PAD] = {"padding[0]", {OVF, OVF, BADARG, BADARG}},
    [C3_PAD + 1] = {"padding[1]", {OVF, OVF, BADARG, BADARG}},
    [C3_PAD + 2] = {"padding[2]", {OVF, OVF, BADARG, BADARG}},
    [C3_DIL] = {"dilation[0]", {SHAPE, OVF, BADARG, BADARG}},
    [C3_DIL + 1] = {"dilation[1]", {SHAPE, OVF, BADARG, BADARG}},
    [C3_DIL + 2] = {"dilation[2]", {SHAPE, OVF, BADARG, BADARG}},
    [C3_GROUPS] = {"groups", {MISMATCH, MISMATCH, BADARG, BADARG}},
    [C3_SAME_DIL_D] = {"dilation[0] with padding_same", {OK, OVF, BADARG, BADARG}},
    [C3_SAME_DIL_W] = {"dilation[2] with padding_same", {OK, OVF, BADARG, BADARG}},
};

static fc_tensor *conv3d_call(fx *f, int slot, int64_t v) {
    fc_conv3d_opts o = fc_conv3d_opts_default();
    int64_t *arg[] = {&o.stride[0],   &o.stride[1],  &o.stride[2],   &o.padding[0],
                      &o.padding[1],  &o.padding[2], &o.dilation[0], &o.dilation[1],
                      &o.dilation[2], &o.groups,     &o.dilation[0], &o.dilation[2]};
    *arg[slot] = v;
    o.padding_same = slot >= C3_SAME_DIL_D;
    return fc_conv3d(f->ctx, g_in.x5, g_in.w5, NULL, &o);
}

/* every pooling argument hostile is refused, per axis; avg adds
 * divisor_override (any positive divisor is valid) */
#define P3_DIVISOR 12
static const sz_slot pool3d_slots[] = {
    {"kernel[0]", P_ALL_BAD},
    {"kernel[1]", P_ALL_BAD},
    {"kernel[2]", P_ALL_BAD},
    {"stride[0]", P_ALL_BAD},
    {"stride[1]", P_ALL_BAD},
    {"stride[2]", P_ALL_BAD},
    {"padding[0]", P_ALL_BAD},
    {"padding[1]", P_ALL_BAD},
    {"padding[2]", P_ALL_BAD},
    {"dilation[0]", P_ALL_BAD},
    {"dilation[1]", P_ALL_BAD},
    {"dilation[2]", P_ALL_BAD},
    [P3_DIVISOR] = {"divisor_override", {OK, OK, BADARG, BADARG}},
};
static fc_pool3d_opts pool3d_opts(int slot, int64_t v) {
    fc_pool3d_opts o = {.kernel = {2, 2, 2}};
    int64_t *arg[] = {&o.kernel[0],       &o.kernel[1],   &o.kernel[2],   &o.stride[0],
                      &o.stride[1],       &o.stride[2],   &o.padding[0],  &o.padding[1],
                      &o.padding[2],      &o.dilation[0], &o.dilation[1], &o.dilation[2],
                      &o.divisor_override};
    *arg[slot] = v;
    return o;
}
static fc_tensor *maxpool3d_call(fx *f, int slot, int64_t v) {
    fc_pool3d_opts o = pool3d_opts(slot, v);
    return fc_max_pool3d(f->ctx, g_in.xp5, &o);
}
static fc_tensor *avgpool3d_call(fx *f, int slot, int64_t v) {
    fc_pool3d_opts o = pool3d_opts(slot, v);
    return fc_avg_pool3d(f->ctx, g_in.xp5, &o);
}

#define FAMILY(op, call, slots)                                                                    \
    { op, call, slots, (int)(sizeof slots / sizeof slots[0]) }
static const sz_family families[] = {
    FAMILY("conv2d", conv2d_call, conv2d_slots),
    FAMILY("conv1d", conv1d_call, conv1d_slots),
    FAMILY("conv_transpose2d", convt_call, convt_slots),
    FAMILY("max_pool2d", maxpool_call, maxpool_slots),
    FAMILY("avg_pool2d", avgpool_call, avgpool_slots),
    FAMILY("adaptive_avg_pool2d", adaptive_call, adaptive_slots),
    FAMILY("conv3d", conv3d_call, conv3d_slots),
    {"max_pool3d", maxpool3d_call, pool3d_slots, P3_DIVISOR}, /* no divisor_override row */
    FAMILY("avg_pool3d", avgpool3d_call, pool3d_slots),
};

/* ---- the cross runner ----------------------------------------------------------------------
 * Failing cases go through bad_run (status, message naming the op, no side
 * effect, a working context); a case expecting FC_OK must return a tensor
 * with every axis >= 1 and leave no error. */

static const sz_family *g_fam;
static int g_slot;
static int64_t g_val;
static fc_tensor *cross_call(fx *f) { return g_fam->call(f, g_slot, g_val); }

static void test_bad_input_sizes_cross(void **state) {
    fx *f = *state;
    int bad = 0, cases = 0;
    for (size_t fi = 0; fi < sizeof families / sizeof families[0]; fi++) {
        g_fam = &families[fi];
        for (int s = 0; s < g_fam->n_slots; s++)
            for (int h = 0; h < N_HOSTILE; h++) {
                g_slot = s, g_val = hostile[h];
                fc_status want = g_fam->slots[s].want[h];
                char what[128];
                snprintf(what, sizeof what, "%s %s = %s", g_fam->op, g_fam->slots[s].arg,
                         hostile_name[h]);
                cases++;
                if (want != FC_OK) {
                    bad_case k = {what, cross_call, NULL, want, g_fam->op};
                    bad += bad_run(f, &k, 1, NULL);
                    continue;
                }
                fc_ctx_clear_error(f->ctx);
                fc_tensor *r = cross_call(f);
                bool sane = r && fc_ctx_status(f->ctx) == FC_OK;
                for (int i = 0; sane && i < fc_tensor_rank(r); i++)
                    sane = fc_tensor_shape(r)[i] >= 1;
                if (!sane) {
                    printf("hostile size: %s: want a tensor, got %s (\"%s\")\n", what,
                           fc_status_name(fc_ctx_status(f->ctx)), fc_ctx_error(f->ctx));
                    bad++;
                }
                fc_release(r);
                fc_ctx_clear_error(f->ctx);
            }
    }
    printf("hostile sizes: %d cases, %d mismatches\n", cases, bad);
    assert_int_equal(bad, 0);
}

/* The exact overflow messages name the op, the axis and the values. */
static void test_bad_input_sizes_messages(void **state) {
    fx *f = *state;
    fc_conv_transpose2d_opts o = fc_conv_transpose2d_opts_default();
    o.padding[1] = INT64_MAX;
    assert_null(fc_conv_transpose2d(f->ctx, g_in.x4, g_in.w4, NULL, &o));
    assert_int_equal(fc_ctx_status(f->ctx), FC_ERR_OVERFLOW);
    const char *m = fc_ctx_error(f->ctx);
    assert_non_null(strstr(m, "conv_transpose2d: twice the padding along the width axis"));
    assert_non_null(strstr(m, "padding 9223372036854775807"));
    fc_ctx_clear_error(f->ctx);
    o = fc_conv_transpose2d_opts_default();
    o.dilation[0] = INT64_MAX;
    assert_null(fc_conv_transpose2d(f->ctx, g_in.x4, g_in.w4, NULL, &o));
    assert_int_equal(fc_ctx_status(f->ctx), FC_ERR_OVERFLOW);
    m = fc_ctx_error(f->ctx);
    assert_non_null(strstr(m, "dilated kernel extent"));
    assert_non_null(strstr(m, "height axis"));
    assert_non_null(strstr(m, "dilation 9223372036854775807"));
    fc_ctx_clear_error(f->ctx);
    fc_conv1d_opts o1 = fc_conv1d_opts_default();
    o1.padding = (int64_t)1 << 62;
    assert_null(fc_conv1d(f->ctx, g_in.x3, g_in.w3, NULL, &o1));
    assert_int_equal(fc_ctx_status(f->ctx), FC_ERR_OVERFLOW);
    assert_non_null(strstr(fc_ctx_error(f->ctx), "conv1d: the padded input size"));
    assert_non_null(strstr(fc_ctx_error(f->ctx), "length axis"));
    fc_ctx_clear_error(f->ctx);
}

/* Extreme arguments that are valid give the right result: the sizes fit
 * int64 though padding + stride or kernel * outputs would not. */
static void test_bad_input_sizes_valid_extremes(void **state) {
    fx *f = *state;
    fc_ctx *c = f->ctx;
    /* width: padding 2^61 and stride 2^62 over 3 columns: output columns
     * start at -2^61 and 2^61, both windows read only padding */
    fc_conv2d_opts o = fc_conv2d_opts_default();
    o.padding[1] = (int64_t)1 << 61;
    o.stride[1] = (int64_t)1 << 62;
    fc_tensor *y = fc_conv2d(c, g_in.x4, g_in.w4, NULL, &o);
    assert_non_null(y);
    assert_int_equal(fc_tensor_shape(y)[2], 2);
    assert_int_equal(fc_tensor_shape(y)[3], 2);
    const float *p = fc_tensor_data(y);
    for (int i = 0; i < 4; i++)
        assert_true(p[i] == 0.0f);
    fc_release(y);
    /* padding_same with dilation 2^62: 2^61 zeros before; column j's two
     * taps are j - 2^61 and j + 2^61, both outside the image: zeros */
    o = fc_conv2d_opts_default();
    o.padding_same = true;
    o.dilation[1] = (int64_t)1 << 62;
    y = fc_conv2d(c, g_in.x4, g_in.w4, NULL, &o);
    assert_non_null(y);
    assert_int_equal(fc_tensor_shape(y)[2], 3);
    assert_int_equal(fc_tensor_shape(y)[3], 3);
    p = fc_tensor_data(y);
    for (int i = 0; i < 9; i++)
        assert_true(p[i] == 0.0f);
    fc_release(y);
    /* max pooling with a kernel of 2^31 - 1 at stride 1: outputs * kernel^2
     * passes int64 (the team's work estimate); each window covers the whole
     * 4x4 image, whose max is 1 */
    fc_pool2d_opts po = {.kernel = {INT32_MAX, INT32_MAX},
                         .stride = {1, 1},
                         .padding = {INT32_MAX / 2, INT32_MAX / 2}};
    y = fc_max_pool2d(c, g_in.xp, &po);
    assert_non_null(y);
    int64_t n = fc_tensor_numel(y);
    assert_true(n >= 1);
    p = fc_tensor_data(y);
    for (int64_t i = 0; i < n; i++)
        assert_true(p[i] == 1.0f);
    fc_release(y);
    assert_int_equal(fc_ctx_status(c), FC_OK);
}

/* ---- attention and adaptive pooling: hostile shapes (broadcast views) ------------------------
 * Each view's element count is checked, but an op can mix two inputs' axes
 * into a shape that is not: attention's output [B, Hq, T, Dv] and its
 * scores [B, Hq, T, S]; adaptive pooling's window bounds out * in. */

static fc_tensor *g_one4;
static fc_tensor *big(fx *f, int64_t a, int64_t b, int64_t c, int64_t d) {
    return fc_expand(f->ctx, g_one4, (const int64_t[]){a, b, c, d}, 4);
}

static fc_tensor *att_output(fx *f) {
    fc_tensor *q = big(f, 1, 1 << 20, 1 << 20, 1), *v = big(f, 1, 1, 1, (int64_t)1 << 40);
    fc_tensor *r = fc_attention(f->ctx, q, g_one4, v, NULL, NULL);
    fc_release(q);
    fc_release(v);
    return r;
}
static fc_tensor *att_scores(fx *f) {
    /* a mask makes the [1, 1, 2^31, 2^31] scores a (broadcast) tensor */
    fc_tensor *q = big(f, 1, 1, (int64_t)1 << 31, 1);
    fc_tensor *m = fc_zeros(f->ctx, FC_F32, (const int64_t[]){1}, 1);
    fc_tensor *r = fc_attention(f->ctx, q, q, q, m, NULL);
    fc_release(q);
    fc_release(m);
    return r;
}
static fc_tensor *adaptive_bounds(fx *f) {
    fc_tensor *x = big(f, 1, 1, (int64_t)1 << 40, 1);
    fc_tensor *r = fc_adaptive_avg_pool2d(f->ctx, x, (const int64_t[]){INT32_MAX, 1});
    fc_release(x);
    return r;
}

static const bad_case shape_cases[] = {
    BAD_T(att_output, FC_ERR_OVERFLOW, "attention: the output"),
    BAD_T(att_scores, FC_ERR_OVERFLOW, "attention: the scores"),
    BAD_T(adaptive_bounds, FC_ERR_OVERFLOW, "adaptive_avg_pool2d"),
};

static void test_bad_input_sizes_shapes(void **state) {
    fx *f = *state;
    assert_int_equal(bad_run(f, shape_cases, sizeof shape_cases / sizeof shape_cases[0], NULL), 0);
}

/* ---- fixture ----------------------------------------------------------------------------------
 */

static int setup(void **state) {
    fx *f = fx_new();
    *state = f;
    fc_ctx *c = f->ctx;
    g_in.x4 = fc_ones(c, FC_F32, (const int64_t[]){1, 1, 3, 3}, 4);
    g_in.w4 = fc_ones(c, FC_F32, (const int64_t[]){1, 1, 2, 2}, 4);
    g_in.x3 = fc_ones(c, FC_F32, (const int64_t[]){1, 1, 3}, 3);
    g_in.w3 = fc_ones(c, FC_F32, (const int64_t[]){1, 1, 2}, 3);
    g_in.xp = fc_ones(c, FC_F32, (const int64_t[]){1, 1, 4, 4}, 4);
    g_one4 = fc_ones(c, FC_F32, (const int64_t[]){1, 1, 1, 1}, 4);
    g_in.x5 = fc_ones(c, FC_F32, (const int64_t[]){1, 1, 3, 3, 3}, 5);
    g_in.w5 = fc_ones(c, FC_F32, (const int64_t[]){1, 1, 2, 2, 2}, 5);
    g_in.xp5 = fc_ones(c, FC_F32, (const int64_t[]){1, 1, 4, 4, 4}, 5);
    return c && fc_ctx_status(c) == FC_OK ? 0 : -1;
}

static int teardown(void **state) {
    fx_free(*state);
    return 0;
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bad_input_sizes_cross),
        cmocka_unit_test(test_bad_input_sizes_messages),
        cmocka_unit_test(test_bad_input_sizes_valid_extremes),
        cmocka_unit_test(test_bad_input_sizes_shapes),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
