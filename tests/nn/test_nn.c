/* SPDX-License-Identifier: MIT */
/* test_nn.c - fucina/nn.h: layers, the registry, state dicts and PyTorch.
 *
 * The interop test builds the model of scripts/gen_nn_fixtures.py (token
 * embedding, two pre-norm blocks of LayerNorm + GQA/RoPE causal attention +
 * RMSNorm + SwiGLU, an MLP head; a Sequential CNN with BatchNorm; a
 * GroupNorm), loads torch's state_dict strictly and matches torch's outputs
 * (1e-5 absolute: f32 through different kernels); then it saves its own
 * state dict and checks that the names, shapes (num_batches_tracked a
 * scalar) and bytes are those of torch's file. Every test runs on a
 * counting allocator and ends with nothing live. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
/* after setjmp.h and stdarg.h, which it needs */
#include <cmocka.h>

#include "counting_alloc.h"
#include "fucina/nn.h"
#include "oom_sweep.h"

#define TORCH_STATE FUCINA_TEST_DATA_DIR "/nn/torch_state.safetensors"
#define TORCH_IO FUCINA_TEST_DATA_DIR "/nn/torch_io.safetensors"
#define OUT_PRE FUCINA_BINARY_DIR "/tests/nn_state_loaded.safetensors"
#define OUT_POST FUCINA_BINARY_DIR "/tests/nn_state_trained.safetensors"

/* The sizes of scripts/gen_nn_fixtures.py. */
enum { V = 20, E = 16, H = 4, HKV = 2, FF = 32, NCLS = 10, NSTATE = 48 };

typedef struct fixture {
    fct_counting c;
    fc_ctx *ctx;
    fc_nn *nn;
} fixture;

static int setup(void **state) {
    fixture *fx = calloc(1, sizeof *fx);
    fct_counting_init(&fx->c);
    fc_ctx_opts co = {.threads = 1, .seed = 7, .allocator = fct_counting_allocator(&fx->c)};
    fx->ctx = fc_ctx_new(&co);
    fx->nn = fc_nn_new(fx->ctx);
    *state = fx;
    return fx->ctx && fx->nn ? 0 : -1;
}

static int teardown(void **state) {
    fixture *fx = *state;
    fc_nn_free(fx->nn);
    fc_ctx_free(fx->ctx);
    bool clean = fct_counting_clean(&fx->c);
    if (!clean) fct_counting_report(&fx->c, "nn");
    free(fx);
    return clean ? 0 : -1;
}

/* ---- the fixture model ------------------------------------------------------------ */
typedef struct block {
    fc_nn_layer_norm ln1;
    fc_nn_mha attn;
    fc_nn_rms_norm norm2;
    fc_nn_swiglu ffn;
} block;

typedef struct net {
    fc_nn_embedding emb;
    block blocks[2];
    fc_nn_mlp head;
    fc_nn_seq cnn;
    fc_nn_group_norm gn;
    fc_nn_rnn lstm, gru;
    fc_nn_conv1d conv1;
    fc_nn_conv_transpose2d up;
} net;

static void net_init(fc_nn *nn, net *m) {
    assert_int_equal(fc_nn_embedding_init(nn, &m->emb, "emb", V, E), FC_OK);
    fc_nn_mha_opts ao = {.dim = E, .n_heads = H, .n_kv_heads = HKV, .causal = true, .rope = true};
    for (int i = 0; i < 2; i++) {
        char p[64];
        block *b = &m->blocks[i];
        snprintf(p, sizeof p, "blocks.%d.ln1", i);
        assert_int_equal(fc_nn_layer_norm_init(nn, &b->ln1, p, E, 0, true), FC_OK);
        snprintf(p, sizeof p, "blocks.%d.attn", i);
        assert_int_equal(fc_nn_mha_init(nn, &b->attn, p, &ao), FC_OK);
        snprintf(p, sizeof p, "blocks.%d.norm2", i);
        assert_int_equal(fc_nn_rms_norm_init(nn, &b->norm2, p, E, 1e-6), FC_OK);
        snprintf(p, sizeof p, "blocks.%d.ffn", i);
        assert_int_equal(fc_nn_swiglu_init(nn, &b->ffn, p, E, FF), FC_OK);
    }
    assert_int_equal(fc_nn_mlp_init(nn, &m->head, "head", E, 24, NCLS, FC_NN_ACT_GELU, true),
                     FC_OK);
    fc_conv2d_opts co = fc_conv2d_opts_default();
    co.padding[0] = co.padding[1] = 1;
    assert_int_equal(fc_nn_seq_init(nn, &m->cnn, "cnn"), FC_OK);
    assert_int_equal(fc_nn_seq_conv2d(&m->cnn, 2, 4, 3, 3, &co, true), FC_OK);
    assert_int_equal(fc_nn_seq_batch_norm(&m->cnn, 4, 0, 0, true), FC_OK);
    assert_int_equal(fc_nn_seq_act(&m->cnn, FC_NN_ACT_RELU), FC_OK);
    assert_int_equal(fc_nn_seq_flatten(&m->cnn), FC_OK);
    assert_int_equal(fc_nn_seq_linear(&m->cnn, 4 * 5 * 5, 3, true), FC_OK);
    assert_int_equal(fc_nn_group_norm_init(nn, &m->gn, "gn", 2, 4, 0, true), FC_OK);
    assert_int_equal(fc_nn_lstm_init(nn, &m->lstm, "lstm", 6, 8, true), FC_OK);
    assert_int_equal(fc_nn_gru_init(nn, &m->gru, "gru", 6, 8, true), FC_OK);
    fc_conv1d_opts c1 = {.stride = 2, .padding = 1};
    assert_int_equal(fc_nn_conv1d_init(nn, &m->conv1, "conv1", 6, 4, 3, &c1, true), FC_OK);
    fc_conv_transpose2d_opts ct = {.stride = {2, 2}, .padding = {1, 1}, .output_padding = {1, 1}};
    assert_int_equal(fc_nn_conv_transpose2d_init(nn, &m->up, "up", 2, 4, 3, 3, &ct, true), FC_OK);
}

/* The token path: a new reference. */
static fc_tensor *net_tokens(const net *m, fc_ctx *ctx, fc_tensor *ids) {
    fc_scope_begin(ctx);
    fc_tensor *x = fc_nn_embedding_forward(&m->emb, ids);
    for (int i = 0; i < 2; i++) {
        const block *b = &m->blocks[i];
        x = fc_add(ctx, x, fc_nn_mha_forward(&b->attn, fc_nn_layer_norm_forward(&b->ln1, x), NULL));
        x = fc_add(ctx, x, fc_nn_swiglu_forward(&b->ffn, fc_nn_rms_norm_forward(&b->norm2, x)));
    }
    fc_tensor *y = fc_keep(fc_nn_mlp_forward(&m->head, x));
    fc_scope_end(ctx);
    return y;
}

/* max |a - b| over two f32 tensors of the same shape (asserted). */
static double max_diff(fc_tensor *a, fc_tensor *b) {
    assert_non_null(a);
    assert_non_null(b);
    assert_int_equal(fc_tensor_numel(a), fc_tensor_numel(b));
    assert_true(fc_tensor_is_contiguous(a) && fc_tensor_is_contiguous(b));
    const float *pa = fc_tensor_data(a), *pb = fc_tensor_data(b);
    double m = 0;
    for (int64_t i = 0; i < fc_tensor_numel(a); i++)
        m = fmax(m, fabs((double)pa[i] - pb[i]));
    return m;
}

static void test_nn_names_and_shapes(void **state) {
    fixture *fx = *state;
    net m;
    net_init(fx->nn, &m);
    assert_int_equal(fc_nn_count(fx->nn), NSTATE);
    /* registration order is torch's state_dict order */
    fc_st_file *f;
    assert_int_equal(fc_safetensors_open(TORCH_STATE, NULL, &f), FC_OK);
    assert_int_equal(fc_safetensors_tensor_count(f), NSTATE);
    for (int64_t i = 0; i < NSTATE; i++) {
        fc_io_tensor info;
        assert_int_equal(fc_safetensors_tensor_info(f, i, &info), FC_OK);
        assert_string_equal(fc_nn_name_at(fx->nn, i), info.name);
    }
    fc_safetensors_close(f);
    fc_tensor *k = fc_nn_find(fx->nn, "blocks.1.attn.k.weight");
    assert_non_null(k);
    assert_int_equal(fc_tensor_dim(k, 0), HKV * (E / H));
    assert_int_equal(fc_tensor_dim(k, 1), E);
    assert_true(fc_nn_flags_at(fx->nn, 31) == (FC_NN_BUFFER | FC_NN_SCALAR));
    assert_string_equal(fc_nn_name_at(fx->nn, 31), "cnn.1.num_batches_tracked");
    assert_null(fc_nn_find(fx->nn, "blocks.2.attn.k.weight"));

    fc_tensor *ids = fc_zeros(fx->ctx, FC_I64, (int64_t[]){3, 7}, 2);
    fc_tensor *y = net_tokens(&m, fx->ctx, ids);
    assert_non_null(y);
    assert_int_equal(fc_tensor_rank(y), 3);
    assert_int_equal(fc_tensor_dim(y, 0), 3);
    assert_int_equal(fc_tensor_dim(y, 1), 7);
    assert_int_equal(fc_tensor_dim(y, 2), NCLS);
    fc_tensor *img = fc_randn(fx->ctx, FC_F32, (int64_t[]){2, 2, 5, 5}, 4);
    fc_tensor *z = fc_nn_seq_forward(&m.cnn, img);
    assert_non_null(z);
    assert_int_equal(fc_tensor_dim(z, 0), 2);
    assert_int_equal(fc_tensor_dim(z, 1), 3);
    fc_release(ids);
    fc_release(y);
    fc_release(img);
    fc_release(z);
}

static void test_nn_torch_interop(void **state) {
    fixture *fx = *state;
    net m;
    net_init(fx->nn, &m);
    fc_nn_load_report rep;
    assert_int_equal(fc_nn_load(fx->nn, TORCH_STATE, NULL, &rep), FC_OK);
    assert_int_equal(rep.loaded, NSTATE);
    assert_int_equal(rep.missing, 0);
    assert_int_equal(rep.unexpected, 0);
    assert_int_equal(fc_nn_save(fx->nn, OUT_PRE), FC_OK);

    fc_st_file *io;
    assert_int_equal(fc_safetensors_open(TORCH_IO, NULL, &io), FC_OK);
    fc_tensor *ids = fc_safetensors_load(fx->ctx, io, "ids", FC_IO_COPY);
    fc_tensor *img = fc_safetensors_load(fx->ctx, io, "img", FC_IO_COPY);
    fc_tensor *want_tok = fc_safetensors_load(fx->ctx, io, "y_tokens", FC_IO_COPY);
    fc_tensor *want_tr = fc_safetensors_load(fx->ctx, io, "y_cnn_train", FC_IO_COPY);
    fc_tensor *want_ev = fc_safetensors_load(fx->ctx, io, "y_cnn_eval", FC_IO_COPY);
    fc_tensor *want_gn = fc_safetensors_load(fx->ctx, io, "y_gn", FC_IO_COPY);
    fc_tensor *want_rm = fc_safetensors_load(fx->ctx, io, "running_mean", FC_IO_COPY);
    fc_tensor *want_rv = fc_safetensors_load(fx->ctx, io, "running_var", FC_IO_COPY);
    fc_safetensors_close(io);

    fc_tensor *tok = net_tokens(&m, fx->ctx, ids);
    assert_true(max_diff(tok, want_tok) < 1e-5);
    fc_nn_set_training(fx->nn, true);
    fc_tensor *tr = fc_nn_seq_forward(&m.cnn, img);
    assert_true(max_diff(tr, want_tr) < 1e-5);
    const fc_nn_batch_norm *bn = &m.cnn.items[1].u.batch_norm;
    assert_true(max_diff(bn->running_mean, want_rm) < 1e-6);
    assert_true(max_diff(bn->running_var, want_rv) < 1e-6);
    assert_int_equal(((const int64_t *)fc_tensor_data(bn->num_batches_tracked))[0], 1);
    fc_nn_set_training(fx->nn, false);
    fc_tensor *ev = fc_nn_seq_forward(&m.cnn, img);
    assert_true(max_diff(ev, want_ev) < 1e-5);
    fc_tensor *c0 = fc_nn_conv2d_forward(&m.cnn.items[0].u.conv2d, img);
    fc_tensor *gn = fc_nn_group_norm_forward(&m.gn, c0);
    assert_true(max_diff(gn, want_gn) < 1e-5);
    /* the file scripts/gen_nn_fixtures.py --check reads back into torch */
    assert_int_equal(fc_nn_save(fx->nn, OUT_POST), FC_OK);

    /* the state dict written after loading is torch's, name for name */
    fc_st_file *a, *b;
    assert_int_equal(fc_safetensors_open(TORCH_STATE, NULL, &a), FC_OK);
    assert_int_equal(fc_safetensors_open(OUT_PRE, NULL, &b), FC_OK);
    assert_int_equal(fc_safetensors_tensor_count(b), fc_safetensors_tensor_count(a));
    for (int64_t i = 0; i < fc_safetensors_tensor_count(a); i++) {
        fc_io_tensor ta, tb;
        assert_int_equal(fc_safetensors_tensor_info(a, i, &ta), FC_OK);
        int64_t j = fc_safetensors_find(b, ta.name);
        assert_true(j >= 0);
        assert_int_equal(fc_safetensors_tensor_info(b, j, &tb), FC_OK);
        assert_int_equal(ta.dtype, tb.dtype);
        assert_int_equal(ta.rank, tb.rank);
        for (int k = 0; k < ta.rank; k++)
            assert_int_equal(ta.shape[k], tb.shape[k]);
        assert_int_equal(ta.nbytes, tb.nbytes);
        assert_memory_equal(ta.data, tb.data, ta.nbytes);
    }
    fc_safetensors_close(a);
    fc_safetensors_close(b);
    fc_tensor *all[] = {ids,     img, want_tok, want_tr, want_ev, want_gn, want_rm,
                        want_rv, tok, tr,       ev,      c0,      gn};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++)
        fc_release(all[i]);
}

/* Gradients of mean(y^2) through every layer of the token path: torch's. */
static void test_nn_torch_gradients(void **state) {
    fixture *fx = *state;
    static const char *const names[] = {"emb.weight",
                                        "blocks.0.ln1.bias",
                                        "blocks.0.attn.q.weight",
                                        "blocks.0.attn.k.weight",
                                        "blocks.1.attn.v.weight",
                                        "blocks.1.norm2.weight",
                                        "blocks.1.ffn.down.weight",
                                        "head.fc1.bias",
                                        "head.fc2.weight"};
    net m;
    net_init(fx->nn, &m);
    assert_int_equal(fc_nn_load(fx->nn, TORCH_STATE, NULL, NULL), FC_OK);
    fc_st_file *io;
    assert_int_equal(fc_safetensors_open(TORCH_IO, NULL, &io), FC_OK);
    fc_tensor *ids = fc_safetensors_load(fx->ctx, io, "ids", FC_IO_COPY);
    fc_tensor *y = net_tokens(&m, fx->ctx, ids);
    fc_tensor *sq = fc_square(fx->ctx, y);
    fc_tensor *loss = fc_mean(fx->ctx, sq, NULL, 0, false);
    assert_int_equal(fc_backward(fx->ctx, loss), FC_OK);
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
        char key[FC_NN_NAME_MAX + 8];
        snprintf(key, sizeof key, "grad.%s", names[i]);
        fc_tensor *want = fc_safetensors_load(fx->ctx, io, key, FC_IO_COPY);
        fc_tensor *got = fc_grad(fc_nn_find(fx->nn, names[i]));
        double scale = 0;
        const float *pw = fc_tensor_data(want);
        for (int64_t k = 0; k < fc_tensor_numel(want); k++)
            scale = fmax(scale, fabs(pw[k]));
        assert_true(scale > 0); /* every one of them gets a gradient */
        double d = max_diff(got, want);
        if (!(d <= 1e-5 * scale)) fail_msg("%s: max |diff| %g, max |grad| %g", names[i], d, scale);
        fc_release(want);
    }
    fc_safetensors_close(io);
    fc_release(ids);
    fc_release(y);
    fc_release(sq);
    fc_release(loss);
}

/* LSTM with a given state, GRU from zeros: torch's outputs and last states. */
static void test_nn_torch_recurrent(void **state) {
    fixture *fx = *state;
    fc_ctx *ctx = fx->ctx;
    net m;
    net_init(fx->nn, &m);
    assert_int_equal(fc_nn_load(fx->nn, TORCH_STATE, NULL, NULL), FC_OK);
    fc_st_file *io;
    assert_int_equal(fc_safetensors_open(TORCH_IO, NULL, &io), FC_OK);
    static const char *const keys[] = {"seq",    "h0",     "c0",    "y_lstm",
                                       "h_lstm", "c_lstm", "y_gru", "h_gru"};
    fc_tensor *t[8];
    for (int i = 0; i < 8; i++)
        t[i] = fc_safetensors_load(ctx, io, keys[i], FC_IO_COPY);
    fc_safetensors_close(io);
    fc_tensor *h = NULL, *c = NULL, *hg = NULL;
    fc_tensor *y = fc_nn_lstm_forward(&m.lstm, t[0], t[1], t[2], &h, &c);
    assert_true(max_diff(y, t[3]) < 1e-6);
    assert_true(max_diff(h, t[4]) < 1e-6);
    assert_true(max_diff(c, t[5]) < 1e-6);
    fc_tensor *yg = fc_nn_gru_forward(&m.gru, t[0], NULL, &hg);
    assert_true(max_diff(yg, t[6]) < 1e-6);
    assert_true(max_diff(hg, t[7]) < 1e-6);
    /* gradients reach both weight matrices through the unrolled steps */
    fc_tensor *loss = fc_sum(ctx, yg, NULL, 0, false);
    assert_int_equal(fc_backward(ctx, loss), FC_OK);
    assert_non_null(fc_grad(m.gru.weight_hh));
    assert_non_null(fc_grad(m.gru.weight_ih));
    /* bad input names the layer and the sizes */
    assert_null(fc_nn_gru_forward(&m.gru, t[1], NULL, NULL));
    assert_non_null(
        strstr(fc_ctx_error(ctx), "fc_nn_gru_forward: input f32[2,8], needs [B, T, 6]"));
    fc_ctx_clear_error(ctx);
    assert_null(fc_nn_lstm_forward(&m.lstm, t[0], t[0], NULL, NULL, NULL));
    assert_non_null(strstr(fc_ctx_error(ctx), "state f32[2,4,6], needs [2, 8]"));
    fc_ctx_clear_error(ctx);
    assert_null(fc_nn_gru_forward(&m.lstm, t[0], NULL, NULL));
    assert_int_equal(fc_ctx_status(ctx), FC_ERR_INVALID_ARG);
    fc_ctx_clear_error(ctx);
    /* Conv1d over the sequence as [N, C, L], ConvTranspose2d over the image */
    fc_st_file *io2;
    assert_int_equal(fc_safetensors_open(TORCH_IO, NULL, &io2), FC_OK);
    fc_tensor *want1 = fc_safetensors_load(ctx, io2, "y_conv1d", FC_IO_COPY);
    fc_tensor *wantu = fc_safetensors_load(ctx, io2, "y_up", FC_IO_COPY);
    fc_tensor *img = fc_safetensors_load(ctx, io2, "img", FC_IO_COPY);
    fc_safetensors_close(io2);
    fc_tensor *st = fc_transpose(ctx, t[0], 1, 2);
    fc_tensor *y1 = fc_nn_conv1d_forward(&m.conv1, st);
    fc_tensor *y1c = fc_contiguous(ctx, y1);
    assert_int_equal(fc_tensor_dim(y1c, 2), 2);
    assert_true(max_diff(y1c, want1) < 1e-6);
    fc_tensor *yu = fc_nn_conv_transpose2d_forward(&m.up, img);
    fc_tensor *yuc = fc_contiguous(ctx, yu);
    assert_int_equal(fc_tensor_dim(yuc, 2), 10);
    assert_true(max_diff(yuc, wantu) < 1e-6);
    fc_tensor *rel[] = {y, h, c, yg, hg, loss, want1, wantu, img, st, y1, y1c, yu, yuc};
    for (size_t i = 0; i < sizeof rel / sizeof *rel; i++)
        fc_release(rel[i]);
    for (int i = 0; i < 8; i++)
        fc_release(t[i]);
}

static void test_nn_load_missing_unexpected_shape(void **state) {
    fixture *fx = *state;
    /* torch's file has emb, blocks, head, cnn, gn; this model has head and
     * an "extra" Linear, nothing else */
    fc_nn_mlp head;
    fc_nn_linear extra;
    assert_int_equal(fc_nn_mlp_init(fx->nn, &head, "head", E, 24, NCLS, FC_NN_ACT_GELU, true),
                     FC_OK);
    assert_int_equal(fc_nn_linear_init(fx->nn, &extra, "extra", 3, 2, true), FC_OK);
    float before = ((const float *)fc_tensor_data(head.fc1.weight))[0];
    fc_nn_load_report rep;
    assert_int_equal(fc_nn_load(fx->nn, TORCH_STATE, NULL, &rep), FC_ERR_INVALID_ARG);
    assert_int_equal(rep.missing, 2);
    assert_string_equal(rep.missing_names, "extra.weight, extra.bias");
    assert_int_equal(rep.unexpected, NSTATE - 4);
    assert_non_null(strstr(rep.unexpected_names, "emb.weight, blocks.0.ln1.weight"));
    assert_non_null(strstr(fc_ctx_error(fx->ctx), "extra.weight"));
    /* strict failure writes nothing */
    assert_true(((const float *)fc_tensor_data(head.fc1.weight))[0] == before);
    fc_ctx_clear_error(fx->ctx);
    fc_nn_load_opts lo = {.non_strict = true};
    assert_int_equal(fc_nn_load(fx->nn, TORCH_STATE, &lo, &rep), FC_OK);
    assert_int_equal(rep.loaded, 4);
    assert_int_equal(rep.missing, 2);
    assert_true(((const float *)fc_tensor_data(head.fc1.weight))[0] != before);

    /* a shape that differs is refused, strict or not, naming the tensor */
    fc_nn *other = fc_nn_new(fx->ctx);
    fc_nn_linear wrong;
    assert_int_equal(fc_nn_linear_init(other, &wrong, "head.fc1", E, 23, true), FC_OK);
    assert_int_equal(fc_nn_load(other, TORCH_STATE, &lo, &rep), FC_ERR_SHAPE_MISMATCH);
    assert_non_null(strstr(fc_ctx_error(fx->ctx), "\"head.fc1.weight\" is [24, 16] in the file, "
                                                  "[23, 16] in the model"));
    fc_ctx_clear_error(fx->ctx);
    assert_int_equal(fc_nn_load(other, FUCINA_TEST_DATA_DIR "/nn/absent.safetensors", NULL, NULL),
                     FC_ERR_IO);
    fc_nn_free(other);
}

static void test_nn_bad_input_names_the_value(void **state) {
    fixture *fx = *state;
    fc_ctx *ctx = fx->ctx;
    fc_nn_linear l;
    assert_int_equal(fc_nn_linear_init(fx->nn, &l, "a", 0, 4, true), FC_ERR_INVALID_ARG);
    assert_non_null(strstr(fc_ctx_error(ctx), "in = 0"));
    assert_int_equal(fc_nn_count(fx->nn), 0);
    fc_ctx_clear_error(ctx);
    assert_int_equal(fc_nn_linear_init(fx->nn, &l, "a", 8, 4, true), FC_OK);
    fc_nn_linear l2;
    assert_int_equal(fc_nn_linear_init(fx->nn, &l2, "a", 8, 4, true), FC_ERR_INVALID_ARG);
    assert_non_null(strstr(fc_ctx_error(ctx), "\"a.weight\" is already registered"));
    fc_ctx_clear_error(ctx);

    fc_tensor *x = fc_zeros(ctx, FC_F32, (int64_t[]){2, 7}, 2);
    assert_null(fc_nn_linear_forward(&l, x));
    assert_int_equal(fc_ctx_status(ctx), FC_ERR_SHAPE_MISMATCH);
    assert_non_null(strstr(fc_ctx_error(ctx), "f32[2,7], the last axis must be 8"));
    fc_ctx_clear_error(ctx);
    assert_null(fc_nn_linear_forward(&l, NULL)); /* NULL propagates */

    fc_nn_mha a;
    fc_nn_mha_opts ao = {.dim = 12, .n_heads = 4, .n_kv_heads = 3};
    assert_int_equal(fc_nn_mha_init(fx->nn, &a, "attn", &ao), FC_ERR_INVALID_ARG);
    assert_non_null(strstr(fc_ctx_error(ctx), "n_kv_heads = 3"));
    fc_ctx_clear_error(ctx);
    ao.n_kv_heads = 2;
    assert_int_equal(fc_nn_mha_init(fx->nn, &a, "attn", &ao), FC_OK);
    assert_null(fc_nn_mha_forward(&a, x, NULL));
    assert_non_null(strstr(fc_ctx_error(ctx), "needs [B, T, 12]"));
    fc_ctx_clear_error(ctx);

    fc_nn_group_norm g;
    assert_int_equal(fc_nn_group_norm_init(fx->nn, &g, "gn", 3, 4, 0, true), FC_ERR_INVALID_ARG);
    assert_non_null(strstr(fc_ctx_error(ctx), "groups = 3 does not divide channels = 4"));
    fc_ctx_clear_error(ctx);
    fc_nn_dropout d;
    assert_int_equal(fc_nn_dropout_init(fx->nn, &d, 1.0), FC_ERR_INVALID_ARG);
    assert_non_null(strstr(fc_ctx_error(ctx), "p = 1"));
    fc_ctx_clear_error(ctx);
    fc_nn_batch_norm bn;
    assert_int_equal(fc_nn_batch_norm_init(fx->nn, &bn, "bn", 4, 0, 0, true), FC_OK);
    assert_null(fc_nn_batch_norm_forward(&bn, x));
    assert_non_null(strstr(fc_ctx_error(ctx), "axis 1 must be 4 channels"));
    fc_ctx_clear_error(ctx);
    char longname[FC_NN_NAME_MAX + 8];
    memset(longname, 'x', sizeof longname - 1);
    longname[sizeof longname - 1] = '\0';
    assert_int_equal(fc_nn_rms_norm_init(fx->nn, &(fc_nn_rms_norm){0}, longname, 4, 0),
                     FC_ERR_INVALID_ARG);
    assert_non_null(strstr(fc_ctx_error(ctx), "the limit is 255"));
    fc_ctx_clear_error(ctx);
    fc_nn_seq s;
    assert_int_equal(fc_nn_seq_init(fx->nn, &s, "s"), FC_OK);
    assert_int_equal(fc_nn_seq_act(&s, FC_NN_ACT_COUNT), FC_ERR_INVALID_ARG);
    assert_int_equal(s.n, 0);
    fc_ctx_clear_error(ctx);
    assert_int_equal(fc_nn_init_kaiming_uniform_(l.bias, 0), FC_ERR_RANK);
    assert_non_null(strstr(fc_ctx_error(ctx), "rank 1"));
    fc_ctx_clear_error(ctx);
    fc_release(x);
}

/* min and max of an f32 tensor, and its mean and standard deviation */
static void stats(fc_tensor *t, double *lo, double *hi, double *mean, double *sd) {
    const float *p = fc_tensor_data(t);
    int64_t n = fc_tensor_numel(t);
    double s = 0, s2 = 0;
    *lo = INFINITY;
    *hi = -INFINITY;
    for (int64_t i = 0; i < n; i++) {
        *lo = fmin(*lo, p[i]);
        *hi = fmax(*hi, p[i]);
        s += p[i];
        s2 += (double)p[i] * p[i];
    }
    *mean = s / (double)n;
    *sd = sqrt(s2 / (double)n - *mean * *mean);
}

static void test_nn_init_schemes(void **state) {
    fixture *fx = *state;
    double lo, hi, mean, sd;
    fc_nn_linear l;
    assert_int_equal(fc_nn_linear_init(fx->nn, &l, "fc", 64, 256, true), FC_OK);
    stats(l.weight, &lo, &hi, &mean, &sd);
    double b = 1.0 / 8.0; /* 1 / sqrt(64): kaiming_uniform(a = sqrt(5)) */
    assert_true(lo >= -b && hi < b && lo < -0.98 * b && hi > 0.98 * b);
    assert_true(fabs(sd - b / sqrt(3.0)) < 0.01); /* U(-b, b) has sd b / sqrt(3) */
    stats(l.bias, &lo, &hi, &mean, &sd);
    assert_true(lo >= -b && hi < b);
    assert_true(fc_tensor_requires_grad(l.weight));

    fc_nn_embedding e;
    assert_int_equal(fc_nn_embedding_init(fx->nn, &e, "emb", 100, 100), FC_OK);
    stats(e.weight, &lo, &hi, &mean, &sd);
    assert_true(fabs(mean) < 0.03 && fabs(sd - 1) < 0.03);

    fc_nn_conv2d c;
    assert_int_equal(fc_nn_conv2d_init(fx->nn, &c, "conv", 8, 32, 3, 3, NULL, true), FC_OK);
    stats(c.weight, &lo, &hi, &mean, &sd);
    b = 1.0 / sqrt(8.0 * 9.0);
    assert_true(lo >= -b && hi < b && hi > 0.95 * b);

    fc_nn_conv_transpose2d ct;
    assert_int_equal(fc_nn_conv_transpose2d_init(fx->nn, &ct, "ct", 32, 8, 3, 3, NULL, true),
                     FC_OK);
    stats(ct.weight, &lo, &hi, &mean, &sd);
    b = 1.0 / sqrt(8.0 * 9.0); /* torch's fan_in: the weight's axis 1 (cout) times kh kw */
    assert_true(lo >= -b && hi < b && hi > 0.95 * b);

    fc_nn_layer_norm ln;
    assert_int_equal(fc_nn_layer_norm_init(fx->nn, &ln, "ln", 5, 0, true), FC_OK);
    stats(ln.weight, &lo, &hi, &mean, &sd);
    assert_true(lo == 1 && hi == 1);
    stats(ln.bias, &lo, &hi, &mean, &sd);
    assert_true(lo == 0 && hi == 0);

    /* the alternatives, in place on a leaf that requires grad */
    assert_int_equal(fc_nn_init_xavier_uniform_(l.weight, 1.0), FC_OK);
    stats(l.weight, &lo, &hi, &mean, &sd);
    b = sqrt(6.0 / (64 + 256));
    assert_true(lo >= -b && hi < b && hi > 0.98 * b);
    assert_int_equal(fc_nn_init_xavier_normal_(l.weight, 2.0), FC_OK);
    stats(l.weight, &lo, &hi, &mean, &sd);
    assert_true(fabs(sd - 2.0 * sqrt(2.0 / 320)) < 0.01);
    assert_int_equal(fc_nn_init_kaiming_normal_(l.weight, 0), FC_OK);
    stats(l.weight, &lo, &hi, &mean, &sd);
    assert_true(fabs(sd - sqrt(2.0 / 64)) < 0.01);
    assert_int_equal(fc_nn_init_normal_(l.weight, 3, 0.5), FC_OK);
    stats(l.weight, &lo, &hi, &mean, &sd);
    assert_true(fabs(mean - 3) < 0.02 && fabs(sd - 0.5) < 0.02);
    assert_int_equal(fc_nn_init_constant_(l.bias, 0), FC_OK);
    stats(l.bias, &lo, &hi, &mean, &sd);
    assert_true(lo == 0 && hi == 0);
    assert_int_equal(fc_nn_init_uniform_(l.bias, 2, 1), FC_ERR_INVALID_ARG);
    assert_non_null(strstr(fc_ctx_error(fx->ctx), "lo = 2 is not <= hi = 1"));
    fc_ctx_clear_error(fx->ctx);
    assert_true(fc_tensor_requires_grad(l.weight) && fc_tensor_is_leaf(l.weight));
}

/* Conv3d: names, shapes and init bound, the forward is fc_conv3d with its
 * parameters, and bad sizes are refused naming the value. */
static void test_nn_conv3d(void **state) {
    fixture *fx = *state;
    fc_ctx *ctx = fx->ctx;
    fc_nn_conv3d c;
    fc_conv3d_opts o = {.stride = {1, 2, 2}, .padding = {1, 1, 1}, .groups = 2};
    assert_int_equal(fc_nn_conv3d_init(fx->nn, &c, "c3", 4, 6, 3, 3, 2, &o, true), FC_OK);
    assert_ptr_equal(fc_nn_find(fx->nn, "c3.weight"), c.weight);
    assert_ptr_equal(fc_nn_find(fx->nn, "c3.bias"), c.bias);
    assert_memory_equal(fc_tensor_shape(c.weight), ((const int64_t[]){6, 2, 3, 3, 2}), 40);
    double lo, hi, mean, sd, b = 1.0 / sqrt(2.0 * 18.0);
    stats(c.weight, &lo, &hi, &mean, &sd);
    assert_true(lo >= -b && hi < b && hi > 0.8 * b);

    fc_tensor *x = fc_randn(ctx, FC_F32, (int64_t[]){2, 4, 3, 5, 4}, 5);
    fc_tensor *y = fc_nn_conv3d_forward(&c, x);
    fc_tensor *want = fc_conv3d(ctx, x, c.weight, c.bias, &o);
    assert_non_null(y);
    assert_non_null(want);
    assert_memory_equal(fc_tensor_shape(y), ((const int64_t[]){2, 6, 3, 3, 3}), 40);
    assert_memory_equal(fc_tensor_data(y), fc_tensor_data(want), sizeof(float) * 162);

    fc_tensor *x3 = fc_randn(ctx, FC_F32, (int64_t[]){2, 3, 3, 5, 4}, 5);
    assert_null(fc_nn_conv3d_forward(&c, x3));
    assert_int_equal(fc_ctx_status(ctx), FC_ERR_SHAPE_MISMATCH);
    assert_non_null(strstr(fc_ctx_error(ctx), "fc_nn_conv3d_forward"));
    fc_ctx_clear_error(ctx);
    fc_nn_conv3d c2;
    assert_int_equal(fc_nn_conv3d_init(fx->nn, &c2, "bad", 4, 6, 3, 0, 2, NULL, true),
                     FC_ERR_INVALID_ARG);
    assert_non_null(strstr(fc_ctx_error(ctx), "kh = 0"));
    fc_ctx_clear_error(ctx);
    o.groups = 4;
    assert_int_equal(fc_nn_conv3d_init(fx->nn, &c2, "bad", 4, 6, 3, 3, 2, &o, true),
                     FC_ERR_INVALID_ARG);
    fc_ctx_clear_error(ctx);
    assert_null(fc_nn_find(fx->nn, "bad.weight"));
    fc_release(x);
    fc_release(x3);
    fc_release(y);
    fc_release(want);
}

static void test_nn_modes_freezing_and_groups(void **state) {
    fixture *fx = *state;
    fc_ctx *ctx = fx->ctx;
    net m;
    net_init(fx->nn, &m);
    fc_nn_dropout d;
    assert_int_equal(fc_nn_dropout_init(fx->nn, &d, 0.5), FC_OK);
    fc_tensor *ones = fc_ones(ctx, FC_F32, (int64_t[]){256}, 1);
    fc_tensor *y = fc_nn_dropout_forward(&d, ones);
    assert_true(max_diff(y, ones) > 0.5); /* training: some zeroed, the rest doubled */
    fc_release(y);
    fc_nn_set_training(fx->nn, false);
    assert_false(fc_nn_training(fx->nn));
    y = fc_nn_dropout_forward(&d, ones);
    assert_true(max_diff(y, ones) == 0);
    fc_release(y);
    fc_nn_set_training(fx->nn, true);

    assert_true(fc_nn_name_matches("blocks.*.attn.*", "blocks.1.attn.q.weight"));
    assert_false(fc_nn_name_matches("blocks.*.attn.*", "blocks.1.ffn.up.weight"));
    assert_true(fc_nn_name_matches("*.bias", "head.fc1.bias"));
    assert_true(fc_nn_name_matches("cnn.?.weight", "cnn.4.weight"));
    assert_false(fc_nn_name_matches("cnn.?.weight", "cnn.10.weight"));

    int64_t all = fc_nn_trainable(fx->nn, NULL, 0);
    assert_int_equal(all, NSTATE - 3); /* the three BatchNorm buffers are not parameters */
    int64_t matched;
    assert_int_equal(fc_nn_set_frozen(fx->nn, "blocks.0.*", true, &matched), FC_OK);
    assert_int_equal(matched, 10);
    assert_false(fc_tensor_requires_grad(fc_nn_find(fx->nn, "blocks.0.attn.q.weight")));
    assert_int_equal(fc_nn_trainable(fx->nn, NULL, 0), all - 10);
    assert_int_equal(fc_nn_set_frozen(fx->nn, "blocks.9.*", true, &matched), FC_ERR_INVALID_ARG);
    assert_non_null(strstr(fc_ctx_error(ctx), "\"blocks.9.*\" matches no parameter"));
    fc_ctx_clear_error(ctx);

    /* a layer made inside a scope keeps its tensors past the scope's end */
    fc_nn_linear scoped;
    fc_scope_begin(ctx);
    assert_int_equal(fc_nn_linear_init(fx->nn, &scoped, "scoped", 3, 2, true), FC_OK);
    fc_scope_end(ctx);
    fc_tensor *x3 = fc_ones(ctx, FC_F32, (int64_t[]){1, 3}, 2);
    fc_tensor *y3 = fc_nn_linear_forward(&scoped, x3);
    assert_non_null(y3);
    fc_release(x3);
    fc_release(y3);
    assert_int_equal(fc_nn_set_frozen(fx->nn, "scoped.*", true, &matched), FC_OK);
    assert_int_equal(matched, 2);

    fc_optim_opts oo = {.kind = FC_OPTIM_ADAMW, .lr = 1e-2, .weight_decay = 0.1};
    const char *no_decay[] = {"emb.*"};
    fc_optim *opt = fc_nn_optim_new(fx->nn, &oo, no_decay, 1);
    assert_non_null(opt);
    assert_int_equal(fc_optim_group_count(opt), 2);
    assert_int_equal(fc_optim_param_count(opt), all - 10);
    fc_optim_opts g1;
    assert_int_equal(fc_optim_group_opts(opt, 1, &g1), FC_OK);
    assert_true(g1.weight_decay == 0);
    /* biases, norm weights and the pattern's embedding in group 1; the rest in 0 */
    for (int i = 0; i < fc_optim_param_count(opt); i++) {
        fc_tensor *p = fc_optim_param(opt, i);
        const char *name = NULL;
        for (int64_t k = 0; k < fc_nn_count(fx->nn); k++)
            if (fc_nn_tensor_at(fx->nn, k) == p) name = fc_nn_name_at(fx->nn, k);
        assert_non_null(name);
        bool nd = strstr(name, "bias") || strstr(name, "ln1") || strstr(name, "norm2") ||
                  strstr(name, "cnn.1.") || strstr(name, "gn.") || strstr(name, "emb.");
        assert_int_equal(fc_optim_param_group(opt, i), nd ? 1 : 0);
    }
    /* one step trains the unfrozen parameters and leaves the frozen ones */
    fc_tensor *ids = fc_zeros(ctx, FC_I64, (int64_t[]){2, 4}, 2);
    fc_tensor *out = net_tokens(&m, ctx, ids);
    fc_tensor *sq = fc_square(ctx, out);
    fc_tensor *loss = fc_mean(ctx, sq, NULL, 0, false);
    assert_int_equal(fc_backward(ctx, loss), FC_OK);
    assert_null(fc_grad(fc_nn_find(fx->nn, "blocks.0.attn.q.weight")));
    assert_non_null(fc_grad(fc_nn_find(fx->nn, "blocks.1.attn.q.weight")));
    assert_int_equal(fc_optim_step(opt), FC_OK);
    fc_optim_free(opt);
    fc_release(ids);
    fc_release(out);
    fc_release(sq);
    fc_release(loss);
    fc_release(ones);
    assert_int_equal(fc_ctx_status(ctx), FC_OK);
}

/* Init, forward, backward, save and load of a small model on a context
 * whose allocator fails: every failure is FC_ERR_OOM and leaks nothing. */
static fc_status oom_model(fc_ctx *ctx) {
    fc_nn *nn = fc_nn_new(ctx);
    if (!nn) return fc_ctx_status(ctx);
    fc_nn_mha a;
    fc_nn_seq s;
    fc_nn_mha_opts ao = {.dim = 8, .n_heads = 2, .n_kv_heads = 1, .causal = true, .rope = true};
    fc_status st = fc_nn_mha_init(nn, &a, "attn", &ao);
    if (st == FC_OK) st = fc_nn_seq_init(nn, &s, "seq");
    if (st == FC_OK) st = fc_nn_seq_layer_norm(&s, 8, 0, true);
    if (st == FC_OK) st = fc_nn_seq_batch_norm(&s, 3, 0, 0, true);
    if (st == FC_OK) st = fc_nn_seq_linear(&s, 8, 4, true);
    if (st == FC_OK) {
        fc_scope_begin(ctx);
        fc_tensor *x = fc_randn(ctx, FC_F32, (int64_t[]){2, 3, 8}, 3);
        fc_tensor *y = fc_nn_seq_forward(&s, fc_nn_mha_forward(&a, x, NULL));
        fc_tensor *loss = fc_sum(ctx, y, NULL, 0, false);
        st = loss ? fc_backward(ctx, loss) : fc_ctx_status(ctx);
        fc_scope_end(ctx);
    }
    if (st == FC_OK) st = fc_nn_save(nn, FUCINA_BINARY_DIR "/tests/nn_oom.safetensors");
    if (st == FC_OK) st = fc_nn_load(nn, FUCINA_BINARY_DIR "/tests/nn_oom.safetensors", NULL, NULL);
    fc_nn_free(nn);
    return st;
}

static void test_nn_oom_sweep(void **state) {
    (void)state;
    oom_result r = oom_sweep(&(oom_scenario){"nn model", oom_model});
    assert_true(r.failures > 10);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_nn_names_and_shapes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_nn_torch_interop, setup, teardown),
        cmocka_unit_test_setup_teardown(test_nn_torch_gradients, setup, teardown),
        cmocka_unit_test_setup_teardown(test_nn_torch_recurrent, setup, teardown),
        cmocka_unit_test_setup_teardown(test_nn_load_missing_unexpected_shape, setup, teardown),
        cmocka_unit_test_setup_teardown(test_nn_bad_input_names_the_value, setup, teardown),
        cmocka_unit_test_setup_teardown(test_nn_init_schemes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_nn_modes_freezing_and_groups, setup, teardown),
        cmocka_unit_test_setup_teardown(test_nn_conv3d, setup, teardown),
        cmocka_unit_test(test_nn_oom_sweep),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
