/* test_checkpoint.c - exact resume, and no data lost on a failed save.
 *
 * The training loop here uses a synthetic gradient computed in C from the
 * parameters and the context RNG (fc_randn), so the test exercises every
 * piece of state a real loop depends on: parameter bytes (f32 and bf16),
 * Adam moments with amsgrad, the step count and the RNG position. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "fucina.h"
#include "io/io.h"

fc_status fc__checkpoint_save_faulty(fc_ctx *ctx, const char *path, const char *const *names,
                                     fc_tensor *const *params, int n, const fc_optim *opt,
                                     const char *const *meta_keys, const char *const *meta_values,
                                     int n_meta, const void *fault);

static const char *names[2] = {"w", "b16"};

typedef struct model {
    fc_ctx *ctx;
    fc_tensor *p[2];
    fc_optim *opt;
} model;

static void model_new(model *m, uint64_t seed) {
    m->ctx = fc_ctx_new(&(fc_ctx_opts){.threads = 2, .seed = seed});
    float w[24];
    uint16_t b[6];
    for (int i = 0; i < 24; i++) w[i] = (float)sin(i * 0.7);
    for (int i = 0; i < 6; i++) b[i] = fc_f32_to_bf16((float)i / 7);
    m->p[0] = fc_param_from_data(m->ctx, FC_F32, (const int64_t[]){4, 6}, 2, w);
    m->p[1] = fc_param_from_data(m->ctx, FC_BF16, (const int64_t[]){6}, 1, b);
    m->opt = fc_optim_new(m->ctx, &(fc_optim_opts){.kind = FC_OPTIM_ADAM, .lr = 0.05,
                                                    .amsgrad = true, .weight_decay = 0.01},
                          m->p, 2);
    assert_non_null(m->opt);
}

static void model_free(model *m) {
    fc_optim_free(m->opt);
    fc_release(m->p[0]);
    fc_release(m->p[1]);
    fc_ctx_free(m->ctx);
}

/* g = 0.5 * p - 0.3 + 0.1 * noise (noise from the context RNG) */
static void train(model *m, int steps) {
    for (int s = 0; s < steps; s++) {
        fc_scope_begin(m->ctx);
        fc_optim_zero_grad(m->opt);
        for (int k = 0; k < 2; k++) {
            fc_tensor *p = m->p[k];
            fc_tensor *pf = fc_to(m->ctx, p, FC_F32);
            fc_tensor *noise = fc_randn(m->ctx, FC_F32, fc_tensor_shape(p), fc_tensor_rank(p));
            fc_tensor *g = fc_empty(m->ctx, FC_F32, fc_tensor_shape(p), fc_tensor_rank(p));
            assert_non_null(g);
            const float *pp = fc_tensor_data(pf), *nn = fc_tensor_data(noise);
            float *gg = fc_tensor_data_mut(g);
            for (int64_t i = 0; i < fc_tensor_numel(p); i++) gg[i] = 0.5f * pp[i] - 0.3f + 0.1f * nn[i];
            assert_int_equal(fc_backward_with(m->ctx, p, g, false), FC_OK);
        }
        assert_int_equal(fc_optim_step(m->opt), FC_OK);
        fc_scope_end(m->ctx);
    }
}

static void path_for(char *buf, size_t cap, const char *leaf) {
    snprintf(buf, cap, "%s/fucina-ckpt-%d-%s", FUCINA_BINARY_DIR, (int)getpid(), leaf);
}

/* Train 5, save, train 4 more; a fresh context (and a fresh process)
 * loads the checkpoint and trains the same 4: identical bytes. */
static void test_checkpoint_exact_resume(void **state) {
    (void)state;
    char path[512];
    path_for(path, sizeof path, "resume.safetensors");
    model a;
    model_new(&a, 11);
    train(&a, 5);
    const char *mk[1] = {"epoch"}, *mv[1] = {"3"};
    assert_int_equal(fc_checkpoint_save(a.ctx, path, names, a.p, 2, a.opt, mk, mv, 1), FC_OK);
    train(&a, 4);

    /* same process, fresh context with a different seed and fresh state */
    model b;
    model_new(&b, 999);
    assert_int_equal(fc_checkpoint_load(b.ctx, path, names, b.p, 2, b.opt), FC_OK);
    assert_int_equal(fc_optim_step_count(b.opt), 5);
    train(&b, 4);
    for (int k = 0; k < 2; k++)
        assert_memory_equal(fc_tensor_data(a.p[k]), fc_tensor_data(b.p[k]),
                            fc_tensor_nbytes(a.p[k]));
    model_free(&b);

    /* a fresh process does the same and reports its bytes through a pipe */
    int fds[2];
    assert_int_equal(pipe(fds), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        close(fds[0]);
        model c;
        model_new(&c, 5);
        int ok = fc_checkpoint_load(c.ctx, path, names, c.p, 2, c.opt) == FC_OK;
        train(&c, 4);
        ssize_t w1 = write(fds[1], fc_tensor_data(c.p[0]), fc_tensor_nbytes(c.p[0]));
        ssize_t w2 = write(fds[1], fc_tensor_data(c.p[1]), fc_tensor_nbytes(c.p[1]));
        model_free(&c);
        _exit(ok && w1 > 0 && w2 > 0 ? 0 : 1);
    }
    close(fds[1]);
    unsigned char got[24 * 4 + 6 * 2];
    size_t have = 0;
    while (have < sizeof got) {
        ssize_t r = read(fds[0], got + have, sizeof got - have);
        if (r <= 0) break;
        have += (size_t)r;
    }
    close(fds[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    assert_int_equal(have, sizeof got);
    assert_memory_equal(got, fc_tensor_data(a.p[0]), 96);
    assert_memory_equal(got + 96, fc_tensor_data(a.p[1]), 12);

    /* caller metadata is in the file */
    fc_st_file *f = NULL;
    assert_int_equal(fc_safetensors_open(path, NULL, &f), FC_OK);
    assert_string_equal(fc_safetensors_meta_get(f, "epoch"), "3");
    fc_safetensors_close(f);
    model_free(&a);
    unlink(path);
}

/* A save that fails after N bytes, for many N, leaves the previous
 * checkpoint loadable bit for bit. */
static void test_checkpoint_failed_save_keeps_old(void **state) {
    (void)state;
    char path[512];
    path_for(path, sizeof path, "atomic.safetensors");
    model a;
    model_new(&a, 3);
    train(&a, 2);
    assert_int_equal(fc_checkpoint_save(a.ctx, path, names, a.p, 2, a.opt, NULL, NULL, 0), FC_OK);
    unsigned char w0[96], b0[12];
    memcpy(w0, fc_tensor_data(a.p[0]), 96);
    memcpy(b0, fc_tensor_data(a.p[1]), 12);
    train(&a, 3); /* the state now differs from the file */
    int failures = 0;
    for (uint64_t n = 0; n < 4000; n += 97) {
        fc_io_fault fault = {.step = FC_IO_FAULT_WRITE, .after_bytes = n, .errnum = 28 /* ENOSPC */};
        fc_status st =
            fc__checkpoint_save_faulty(a.ctx, path, names, a.p, 2, a.opt, NULL, NULL, 0, &fault);
        if (st == FC_OK) break; /* the whole file fit before the fault */
        assert_int_equal(st, FC_ERR_IO);
        assert_non_null(strstr(fc_ctx_error(a.ctx), "atomic.safetensors"));
        fc_ctx_clear_error(a.ctx);
        failures++;
        model b;
        model_new(&b, 1);
        assert_int_equal(fc_checkpoint_load(b.ctx, path, names, b.p, 2, b.opt), FC_OK);
        assert_memory_equal(fc_tensor_data(b.p[0]), w0, 96);
        assert_memory_equal(fc_tensor_data(b.p[1]), b0, 12);
        assert_int_equal(fc_optim_step_count(b.opt), 2);
        model_free(&b);
    }
    assert_true(failures > 5);
    model_free(&a);
    unlink(path);
}

static void test_checkpoint_errors(void **state) {
    (void)state;
    char path[512];
    path_for(path, sizeof path, "errors.safetensors");
    model a;
    model_new(&a, 3);
    assert_int_equal(fc_checkpoint_save(a.ctx, path, names, a.p, 2, NULL, NULL, NULL, 0), FC_OK);
    /* an optimizer with no state in the file */
    assert_int_equal(fc_checkpoint_load(a.ctx, path, names, a.p, 2, a.opt), FC_ERR_FORMAT);
    fc_ctx_clear_error(a.ctx);
    /* a missing name, a wrong shape, a wrong dtype */
    const char *other[2] = {"w", "nope"};
    assert_int_equal(fc_checkpoint_load(a.ctx, path, other, a.p, 2, NULL), FC_ERR_INDEX);
    assert_non_null(strstr(fc_ctx_error(a.ctx), "param.nope"));
    fc_ctx_clear_error(a.ctx);
    fc_tensor *wrong = fc_zeros(a.ctx, FC_F32, (const int64_t[]){6, 4}, 2);
    fc_tensor *ps[2] = {wrong, a.p[1]};
    assert_int_equal(fc_checkpoint_load(a.ctx, path, names, ps, 2, NULL), FC_ERR_SHAPE_MISMATCH);
    fc_ctx_clear_error(a.ctx);
    fc_tensor *wd = fc_zeros(a.ctx, FC_F64, (const int64_t[]){4, 6}, 2);
    ps[0] = wd;
    assert_int_equal(fc_checkpoint_load(a.ctx, path, names, ps, 2, NULL), FC_ERR_DTYPE);
    fc_ctx_clear_error(a.ctx);
    /* duplicate names, reserved metadata, missing file */
    const char *dup[2] = {"w", "w"};
    assert_int_equal(fc_checkpoint_save(a.ctx, path, dup, a.p, 2, NULL, NULL, NULL, 0),
                     FC_ERR_INVALID_ARG);
    fc_ctx_clear_error(a.ctx);
    const char *rk[1] = {"optim.steps"}, *rv[1] = {"1"};
    assert_int_equal(fc_checkpoint_save(a.ctx, path, names, a.p, 2, NULL, rk, rv, 1),
                     FC_ERR_INVALID_ARG);
    fc_ctx_clear_error(a.ctx);
    assert_int_equal(fc_checkpoint_load(a.ctx, "/nonexistent/x.ckpt", names, a.p, 2, NULL),
                     FC_ERR_IO);
    fc_ctx_clear_error(a.ctx);
    fc_release(wrong);
    fc_release(wd);
    model_free(&a);
    unlink(path);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_checkpoint_exact_resume),
        cmocka_unit_test(test_checkpoint_failed_save_keeps_old),
        cmocka_unit_test(test_checkpoint_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
