/* SPDX-License-Identifier: MIT */
/* test_checkpoint.c - exact resume, no data lost on a failed save, a
 * checkpoint restores exactly the optimizer state it describes or is
 * refused (one saved before the first step resets the moments; one with its
 * state stripped is refused), metadata numbers are range-checked before any
 * conversion, and a file truncated under the loader is refused, not a
 * SIGBUS.
 *
 * The training loop here uses a synthetic gradient computed in C from the
 * parameters and the context RNG (fc_randn), so the test exercises every
 * piece of state a real loop depends on: parameter bytes (f32 and bf16),
 * Adam moments with amsgrad, the step count and the RNG position. */
#define _DEFAULT_SOURCE
#include <math.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
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
    for (int i = 0; i < 24; i++)
        w[i] = (float)sin(i * 0.7);
    for (int i = 0; i < 6; i++)
        b[i] = fc_f32_to_bf16((float)i / 7);
    m->p[0] = fc_param_from_data(m->ctx, FC_F32, (const int64_t[]){4, 6}, 2, w);
    m->p[1] = fc_param_from_data(m->ctx, FC_BF16, (const int64_t[]){6}, 1, b);
    m->opt = fc_optim_new(
        m->ctx,
        &(fc_optim_opts){.kind = FC_OPTIM_ADAM, .lr = 0.05, .amsgrad = true, .weight_decay = 0.01},
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
            for (int64_t i = 0; i < fc_tensor_numel(p); i++)
                gg[i] = 0.5f * pp[i] - 0.3f + 0.1f * nn[i];
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
    assert_string_equal(fc_safetensors_meta_find(f, "epoch"), "3");
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
        fc_io_fault fault = {
            .step = FC_IO_FAULT_WRITE, .after_bytes = n, .errnum = 28 /* ENOSPC */};
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

/* ---- rewriting a checkpoint: drop tensors, set or remove metadata ---------- */

/* Copies src to dst without the tensors whose names start with drop (NULL:
 * none) and without the metadata keys starting with drop_key (NULL: none);
 * then sets key to value (value NULL: removes key; key NULL: nothing). */
static void rewrite(const char *src, const char *dst, const char *drop, const char *drop_key,
                    const char *key, const char *value) {
    fc_st_file *f = NULL;
    assert_int_equal(fc_safetensors_open(src, NULL, &f), FC_OK);
    int64_t nt = fc_safetensors_tensor_count(f), nm = fc_safetensors_meta_count(f);
    fc_io_tensor *t = calloc((size_t)nt + 1, sizeof *t);
    const char **mk = calloc((size_t)nm + 1, sizeof *mk), **mv = calloc((size_t)nm + 1, sizeof *mv);
    assert_true(t && mk && mv);
    int64_t kt = 0, km = 0;
    for (int64_t i = 0; i < nt; i++) {
        assert_int_equal(fc_safetensors_tensor_info(f, i, &t[kt]), FC_OK);
        if (!drop || strncmp(t[kt].name, drop, strlen(drop))) kt++;
    }
    bool set = false;
    for (int64_t i = 0; i < nm; i++) {
        assert_int_equal(fc_safetensors_meta_at(f, i, &mk[km], &mv[km]), FC_OK);
        if (drop_key && !strncmp(mk[km], drop_key, strlen(drop_key))) continue;
        if (key && !strcmp(mk[km], key)) {
            set = true;
            if (!value) continue;
            mv[km] = value;
        }
        km++;
    }
    if (key && value && !set) mk[km] = key, mv[km++] = value;
    assert_int_equal(fc_safetensors_write(dst, t, kt, mk, mv, km, NULL), FC_OK);
    free(t);
    free(mk);
    free(mv);
    fc_safetensors_close(f);
}

/* A version 1 file, as the saver wrote before it listed each parameter's
 * states: fucina.checkpoint "1" and no optim.param.<i>.states. */
static void to_v1(const char *src, const char *dst) {
    char tmp[600];
    snprintf(tmp, sizeof tmp, "%s.tmp", dst);
    rewrite(src, tmp, NULL, NULL, "optim.param.0.states", NULL);
    rewrite(tmp, dst, NULL, NULL, "optim.param.1.states", NULL);
    rewrite(dst, tmp, NULL, NULL, "fucina.checkpoint", "1");
    rewrite(tmp, dst, NULL, NULL, NULL, NULL);
    unlink(tmp);
}

/* The parameters' bytes and generations, and the optimizer's step count, to
 * show that a refused load wrote nothing. */
typedef struct snapshot {
    unsigned char w[96], b[12];
    uint32_t gen[2];
    int64_t steps;
    uint64_t seed, offset;
} snapshot;
static snapshot snap(const model *m) {
    snapshot s;
    memcpy(s.w, fc_tensor_data(m->p[0]), 96);
    memcpy(s.b, fc_tensor_data(m->p[1]), 12);
    s.gen[0] = fc_tensor_generation(m->p[0]);
    s.gen[1] = fc_tensor_generation(m->p[1]);
    s.steps = fc_optim_step_count(m->opt);
    fc_ctx_get_rng(m->ctx, &s.seed, &s.offset);
    return s;
}
static void assert_unchanged(const model *m, const snapshot *s) {
    snapshot now = snap(m);
    assert_memory_equal(now.w, s->w, 96);
    assert_memory_equal(now.b, s->b, 12);
    assert_int_equal(now.gen[0], s->gen[0]);
    assert_int_equal(now.gen[1], s->gen[1]);
    assert_int_equal(now.steps, s->steps);
    assert_true(now.seed == s->seed && now.offset == s->offset);
}

/* Loads path into m and expects status want with a message containing
 * every one of the (NULL-terminated) words; a refusal must write nothing. */
static void expect_load(model *m, const char *path, fc_status want, const char *const *words) {
    snapshot s = snap(m);
    fc_status st = fc_checkpoint_load(m->ctx, path, names, m->p, 2, m->opt);
    if (st != want)
        fail_msg("load returned %s, want %s (%s)", fc_status_name(st), fc_status_name(want),
                 fc_ctx_error(m->ctx) ? fc_ctx_error(m->ctx) : "");
    if (want == FC_OK) return;
    for (const char *const *w = words; *w; w++)
        if (!strstr(fc_ctx_error(m->ctx), *w))
            fail_msg("message '%s' does not name '%s'", fc_ctx_error(m->ctx), *w);
    assert_unchanged(m, &s);
    fc_ctx_clear_error(m->ctx);
}

/* Saved before the first step, loaded into an optimizer that has stepped
 * since: the moments are reset and the step count is 0, so the next step
 * equals a fresh optimizer's first step bit for bit. */
static void test_checkpoint_resume_before_first_step(void **state) {
    (void)state;
    char path[512];
    path_for(path, sizeof path, "step0.safetensors");
    model a, b;
    model_new(&a, 21);
    assert_int_equal(fc_checkpoint_save(a.ctx, path, names, a.p, 2, a.opt, NULL, NULL, 0), FC_OK);
    train(&a, 3); /* a now has moments and t = 3 */
    assert_int_equal(fc_checkpoint_load(a.ctx, path, names, a.p, 2, a.opt), FC_OK);
    assert_int_equal(fc_optim_step_count(a.opt), 0);
    const char *st_names[3] = {"exp_avg", "exp_avg_sq", "max_exp_avg_sq"};
    for (int i = 0; i < 2; i++)
        for (int k = 0; k < 3; k++) {
            fc_tensor *t = fc_optim_state(a.opt, i, st_names[k], false);
            const float *v = t ? fc_tensor_data(t) : NULL;
            for (int64_t j = 0; v && j < fc_tensor_numel(t); j++)
                if (v[j] != 0)
                    fail_msg("param %d %s[%d] = %g after loading step 0", i, st_names[k], (int)j,
                             (double)v[j]);
        }
    train(&a, 2);
    model_new(&b, 77);
    assert_int_equal(fc_checkpoint_load(b.ctx, path, names, b.p, 2, b.opt), FC_OK);
    train(&b, 2);
    for (int k = 0; k < 2; k++)
        assert_memory_equal(fc_tensor_data(a.p[k]), fc_tensor_data(b.p[k]),
                            fc_tensor_nbytes(a.p[k]));
    model_free(&a);
    model_free(&b);

    /* SGD with momentum and dampening: a buffer that merely exists is not
     * "set"; after the load the first step must start it from the gradient */
    fc_optim_opts sgd = {.kind = FC_OPTIM_SGD, .lr = 0.1, .momentum = 0.9, .dampening = 0.5};
    model c, d;
    model_new(&c, 5);
    model_new(&d, 6);
    fc_optim_free(c.opt);
    fc_optim_free(d.opt);
    c.opt = fc_optim_new(c.ctx, &sgd, c.p, 2);
    d.opt = fc_optim_new(d.ctx, &sgd, d.p, 2);
    assert_int_equal(fc_checkpoint_save(c.ctx, path, names, c.p, 2, c.opt, NULL, NULL, 0), FC_OK);
    train(&c, 3);
    assert_int_equal(fc_checkpoint_load(c.ctx, path, names, c.p, 2, c.opt), FC_OK);
    assert_int_equal(fc_checkpoint_load(d.ctx, path, names, d.p, 2, d.opt), FC_OK);
    train(&c, 2);
    train(&d, 2);
    for (int k = 0; k < 2; k++)
        assert_memory_equal(fc_tensor_data(c.p[k]), fc_tensor_data(d.p[k]),
                            fc_tensor_nbytes(c.p[k]));
    /* after steps, a file without a buffer cannot be loaded into an SGD
     * optimizer that has one (the public API cannot drop it): refused */
    char p2[512];
    path_for(p2, sizeof p2, "sgd-nobuf.safetensors");
    assert_int_equal(fc_checkpoint_save(c.ctx, path, names, c.p, 2, c.opt, NULL, NULL, 0), FC_OK);
    rewrite(path, p2, "optim.1.", NULL, "optim.param.1.states", "0");
    expect_load(&c, p2, FC_ERR_STATE, (const char *[]){"fc_checkpoint_load", "parameter 1", NULL});
    model_free(&c);
    model_free(&d);
    unlink(path);
    unlink(p2);
}

/* A checkpoint whose optimizer state is missing or partial while its
 * metadata says steps were taken is refused, naming the missing tensor,
 * and writes nothing. */
static void test_checkpoint_stripped_state_refused(void **state) {
    (void)state;
    char path[512], bad[512];
    path_for(path, sizeof path, "full.safetensors");
    path_for(bad, sizeof bad, "stripped.safetensors");
    model a, b;
    model_new(&a, 31);
    train(&a, 3);
    assert_int_equal(fc_checkpoint_save(a.ctx, path, names, a.p, 2, a.opt, NULL, NULL, 0), FC_OK);
    model_new(&b, 32);
    train(&b, 1);

    rewrite(path, bad, "optim.", NULL, NULL, NULL); /* every state tensor removed */
    expect_load(&b, bad, FC_ERR_FORMAT,
                (const char *[]){"fc_checkpoint_load", "optim.0.exp_avg", NULL});
    rewrite(path, bad, "optim.1.exp_avg_sq", NULL, NULL, NULL); /* one removed */
    expect_load(&b, bad, FC_ERR_FORMAT,
                (const char *[]){"fc_checkpoint_load", "optim.1.exp_avg_sq", NULL});
    rewrite(path, bad, "optim.0.max_exp_avg_sq", NULL, NULL, NULL);
    expect_load(&b, bad, FC_ERR_FORMAT,
                (const char *[]){"fc_checkpoint_load", "optim.0.max_exp_avg_sq", NULL});
    /* the list of states removed too, as a version 1 file */
    char v1[512];
    path_for(v1, sizeof v1, "v1.safetensors");
    to_v1(path, v1);
    rewrite(v1, bad, "optim.", NULL, NULL, NULL);
    expect_load(&b, bad, FC_ERR_FORMAT,
                (const char *[]){"fc_checkpoint_load", "optim.0.exp_avg", NULL});
    /* a version 1 file with half an Adam pair */
    rewrite(v1, bad, "optim.1.exp_avg_sq", NULL, NULL, NULL);
    expect_load(&b, bad, FC_ERR_FORMAT,
                (const char *[]){"fc_checkpoint_load", "optim.1.exp_avg_sq", NULL});
    /* a complete version 1 file still loads and resumes exactly */
    expect_load(&b, v1, FC_OK, NULL);
    assert_int_equal(fc_optim_step_count(b.opt), 3);
    /* a missing list is refused in a version 2 file */
    rewrite(path, bad, NULL, NULL, "optim.param.0.states", NULL);
    expect_load(&b, bad, FC_ERR_FORMAT,
                (const char *[]){"fc_checkpoint_load", "optim.param.0.states", NULL});
    /* the untouched file loads */
    expect_load(&b, path, FC_OK, NULL);
    model_free(&a);
    model_free(&b);
    unlink(path);
    unlink(bad);
    unlink(v1);
}

/* Metadata numbers are checked before they are converted: out of range,
 * non-integral or not plain decimal is refused with the key and value. */
static void test_checkpoint_metadata_numbers(void **state) {
    (void)state;
    char path[512], bad[512];
    path_for(path, sizeof path, "meta.safetensors");
    path_for(bad, sizeof bad, "meta-bad.safetensors");
    model a, b;
    model_new(&a, 41);
    train(&a, 2);
    assert_int_equal(fc_checkpoint_save(a.ctx, path, names, a.p, 2, a.opt, NULL, NULL, 0), FC_OK);
    model_new(&b, 42);
    static const struct {
        const char *key, *value;
    } cases[] = {
        {"optim.kind", "1e300"},
        {"optim.kind", "nan"},
        {"optim.kind", "1.5"},
        {"optim.kind", "-1"},
        {"optim.params", "3000000000"},
        {"optim.groups", "inf"},
        {"optim.steps", "1e5"},
        {"optim.steps", "-1"},
        {"optim.steps", "9223372036854775808"},
        {"optim.param.1.group", "1e300"},
        {"optim.param.1.group", "1"},
        {"optim.param.0.states", "8"},
        {"optim.group.0.amsgrad", "nan"},
        {"optim.group.0.lr", "nan"},
        {"optim.group.0.beta1", "1e999"},
        {"rng.seed", "1e5"},
        {"rng.seed", "-1"},
        {"rng.seed", " 5"},
        {"rng.seed", "5 "},
        {"rng.seed", "+5"},
        {"rng.seed", ""},
        {"rng.seed", "18446744073709551616"},
        {"rng.offset", "0x10"},
        {"fucina.checkpoint", "3"},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        rewrite(path, bad, NULL, NULL, cases[c].key, cases[c].value);
        snapshot s = snap(&b);
        fc_status st = fc_checkpoint_load(b.ctx, bad, names, b.p, 2, b.opt);
        if (st != FC_ERR_FORMAT)
            fail_msg("%s = '%s': load returned %s (%s)", cases[c].key, cases[c].value,
                     fc_status_name(st), fc_ctx_error(b.ctx) ? fc_ctx_error(b.ctx) : "");
        const char *msg = fc_ctx_error(b.ctx);
        if (!strstr(msg, "fc_checkpoint_load") || !strstr(msg, cases[c].key))
            fail_msg("%s = '%s': message '%s' does not name the key", cases[c].key, cases[c].value,
                     msg);
        char quoted[64];
        snprintf(quoted, sizeof quoted, "'%s'", cases[c].value);
        if (!strstr(msg, quoted))
            fail_msg("%s = '%s': message '%s' does not name the value", cases[c].key,
                     cases[c].value, msg);
        assert_unchanged(&b, &s);
        fc_ctx_clear_error(b.ctx);
    }
    /* options the optimizer refuses (found by fuzz_checkpoint: the refusal
     * carried only fc_optim_set_group_opts's message and its
     * FC_ERR_INVALID_ARG): the loader's FC_ERR_FORMAT, naming the file and
     * the group, quoting the reason; nothing changed */
    rewrite(path, bad, NULL, NULL, "optim.group.0.beta2", "3.999");
    expect_load(&b, bad, FC_ERR_FORMAT,
                (const char *[]){"fc_checkpoint_load", "meta-bad.safetensors", "optimizer group 0",
                                 "3.999", NULL});
    /* the largest seed and offset read back exactly */
    rewrite(path, bad, NULL, NULL, "rng.seed", "18446744073709551615");
    char p2[512];
    path_for(p2, sizeof p2, "meta-max.safetensors");
    rewrite(bad, p2, NULL, NULL, "rng.offset", "18446744073709551615");
    assert_int_equal(fc_checkpoint_load(b.ctx, p2, names, b.p, 2, b.opt), FC_OK);
    uint64_t seed = 0, offset = 0;
    fc_ctx_get_rng(b.ctx, &seed, &offset);
    assert_true(seed == UINT64_MAX && offset == UINT64_MAX);
    model_free(&a);
    model_free(&b);
    unlink(path);
    unlink(bad);
    unlink(p2);
}

/* ---- a file truncated under the loader ------------------------------------------- */

/* An allocator that, once armed, truncates `trunc_path` to 0 bytes at its
 * first call. fc_checkpoint_load's first allocation is the file handle's,
 * made after the file was opened and its size taken and before its bytes
 * are read: exactly the window in which another program's truncation turns
 * a mapped reader's first access into SIGBUS. */
static const char *trunc_path;
static int trunc_armed;
static void *trunc_alloc(void *user, size_t size, size_t align) {
    (void)user;
    if (trunc_armed) {
        trunc_armed = 0;
        if (truncate(trunc_path, 0) != 0) return NULL;
    }
    void *p = NULL;
    if (align < sizeof(void *)) align = sizeof(void *);
    return posix_memalign(&p, align, size ? size : 1) == 0 ? p : NULL;
}
static void trunc_free(void *user, void *p, size_t size) {
    (void)user;
    (void)size;
    free(p);
}

/* Runs in a child process, so the failure before the fix (SIGBUS) is
 * reported rather than taking the test program down. */
static void test_checkpoint_truncated_under_loader(void **state) {
    (void)state;
    char path[512];
    path_for(path, sizeof path, "trunc.safetensors");
    trunc_path = path;
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        fc_allocator al = {.alloc = trunc_alloc, .free = trunc_free};
        fc_ctx *ctx = fc_ctx_new(&(fc_ctx_opts){.threads = 1, .allocator = &al});
        /* 256 KiB: the data spans many pages past the header's */
        fc_tensor *w = fc_param_zeros(ctx, FC_F32, (const int64_t[]){256, 256}, 2);
        const char *nm[1] = {"big"};
        int code = 1;
        if (w && fc_checkpoint_save(ctx, path, nm, &w, 1, NULL, NULL, NULL, 0) == FC_OK) {
            uint32_t gen = fc_tensor_generation(w);
            trunc_armed = 1;
            fc_status st = fc_checkpoint_load(ctx, path, nm, &w, 1, NULL);
            const char *msg = fc_ctx_error(ctx);
            code = st == FC_ERR_IO && msg && strstr(msg, "fc_checkpoint_load") &&
                           strstr(msg, "trunc.safetensors") && fc_tensor_generation(w) == gen
                       ? 0
                       : 2;
            if (code) fprintf(stderr, "load: %s: %s\n", fc_status_name(st), msg ? msg : "");
        }
        fc_release(w);
        fc_ctx_free(ctx);
        _exit(code);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    unlink(path);
    if (WIFSIGNALED(status))
        fail_msg("the load was killed by signal %d (%s)", WTERMSIG(status),
                 WTERMSIG(status) == SIGBUS ? "SIGBUS: the file was mapped" : "?");
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_checkpoint_exact_resume),
        cmocka_unit_test(test_checkpoint_failed_save_keeps_old),
        cmocka_unit_test(test_checkpoint_errors),
        cmocka_unit_test(test_checkpoint_resume_before_first_step),
        cmocka_unit_test(test_checkpoint_stripped_state_refused),
        cmocka_unit_test(test_checkpoint_metadata_numbers),
        cmocka_unit_test(test_checkpoint_truncated_under_loader),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
