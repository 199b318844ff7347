/* test_common.c - checks of the trainers' shared helpers that need no op
 * kernels: the checkpoint file (exact round trip of parameters, optimizer
 * state, step count, RNG position and user values; refusal of damaged,
 * missing and mismatched files), the PRNG's range and determinism, and the
 * option parser's strictness. Run by ctest as examples/common; prints each
 * failed check and exits 1 when any failed. */
#define _POSIX_C_SOURCE 200809L

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <fucina.h>

#include "common/args.h"
#include "common/checkpoint.h"
#include "common/progress.h"

static int failures;
#define CHECK(cond)                                                                                \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond);               \
            failures++;                                                                            \
        }                                                                                          \
    } while (0)

/* a model of two parameters with Adam state, in its own context */
typedef struct toy {
    fc_ctx *ctx;
    fc_tensor *p[2];
    fc_optim *opt;
} toy;

static void toy_make(toy *t, uint64_t seed, int64_t rows) {
    t->ctx = fc_ctx_new(&(fc_ctx_opts){.seed = seed, .threads = 1});
    t->p[0] = fc_param_randn(t->ctx, FC_F32, (const int64_t[]){rows, 4}, 2, 1.0);
    t->p[1] = fc_param_randn(t->ctx, FC_F32, (const int64_t[]){5}, 1, 1.0);
    t->opt = fc_optim_new(t->ctx, &(fc_optim_opts){.kind = FC_OPTIM_ADAMW, .lr = 1e-3}, t->p, 2);
}

static void toy_free(toy *t) {
    fc_optim_free(t->opt);
    fc_release(t->p[0]);
    fc_release(t->p[1]);
    fc_ctx_free(t->ctx);
}

static bool same_data(fc_tensor *a, fc_tensor *b) {
    return a && b && fc_tensor_numel(a) == fc_tensor_numel(b) &&
           memcmp(fc_tensor_data(a), fc_tensor_data(b), sizeof(float) * fc_tensor_numel(a)) == 0;
}

static void test_checkpoint(const char *dir) {
    char path[4096];
    snprintf(path, sizeof path, "%s/test_common.ckpt", dir);
    const char *names[2] = {"w", "b"};
    fprintf(stderr, "(the four checkpoint messages below are expected)\n");
    toy a, b;
    toy_make(&a, 5, 3);
    CHECK(a.opt != NULL);
    float *m = fc_tensor_data_mut(fc_optim_state(a.opt, 0, "exp_avg", true));
    float *v = fc_tensor_data_mut(fc_optim_state(a.opt, 1, "exp_avg_sq", true));
    CHECK(m && v);
    for (int i = 0; i < 12; i++) m[i] = 0.25f * (float)i - 1;
    for (int i = 0; i < 5; i++) v[i] = 1e-3f * (float)(i + 1);
    CHECK(fc_optim_set_step_count(a.opt, 42) == FC_OK);
    fc_ctx_rng_set(a.ctx, 5, 1234);
    ex_ckpt_value saved[2] = {{"step", 99}, {"big", UINT64_MAX - 7}};
    CHECK(ex_ckpt_save(path, a.ctx, a.opt, names, saved, 2) == FC_OK);

    toy_make(&b, 6, 3); /* different initial values and RNG */
    ex_ckpt_value got[2] = {{"step", 0}, {"big", 0}};
    CHECK(ex_ckpt_load(path, b.ctx, b.opt, names, got, 2) == FC_OK);
    CHECK(same_data(a.p[0], b.p[0]) && same_data(a.p[1], b.p[1]));
    CHECK(same_data(fc_optim_state(a.opt, 0, "exp_avg", false),
                    fc_optim_state(b.opt, 0, "exp_avg", false)));
    CHECK(same_data(fc_optim_state(a.opt, 1, "exp_avg_sq", false),
                    fc_optim_state(b.opt, 1, "exp_avg_sq", false)));
    CHECK(fc_optim_state(b.opt, 0, "exp_avg_sq", false) == NULL); /* absent stays absent */
    CHECK(fc_optim_step_count(b.opt) == 42);
    uint64_t seed, offset;
    fc_ctx_rng_get(b.ctx, &seed, &offset);
    CHECK(seed == 5 && offset == 1234);
    CHECK(got[0].value == 99 && got[1].value == UINT64_MAX - 7);
    ex_ckpt_value missing[1] = {{"nope", 0}};
    CHECK(ex_ckpt_load(path, b.ctx, b.opt, names, missing, 1) == FC_ERR_FORMAT);
    toy_free(&b);

    toy_make(&b, 6, 2); /* a parameter of another shape */
    CHECK(ex_ckpt_load(path, b.ctx, b.opt, names, got, 2) == FC_ERR_FORMAT);
    toy_free(&b);

    /* one flipped byte anywhere is caught by the checksum */
    FILE *f = fopen(path, "r+b");
    CHECK(f != NULL);
    if (f) {
        fseek(f, 40, SEEK_SET);
        int c = fgetc(f);
        fseek(f, 40, SEEK_SET);
        fputc(c ^ 0x10, f);
        fclose(f);
    }
    toy_make(&b, 6, 3);
    CHECK(ex_ckpt_load(path, b.ctx, b.opt, names, got, 2) == FC_ERR_FORMAT);
    remove(path);
    CHECK(ex_ckpt_load(path, b.ctx, b.opt, names, got, 2) == FC_ERR_IO);
    toy_free(&b);
    toy_free(&a);
}

static void test_prng(void) {
    uint64_t s1 = 17, s2 = 17;
    int counts[7] = {0};
    for (int i = 0; i < 7000; i++) {
        uint64_t x = ex_rand_below(&s1, 7);
        CHECK(x < 7);
        if (x < 7) counts[x]++;
        CHECK(ex_rand_below(&s2, 7) == x); /* same seed, same stream */
    }
    for (int k = 0; k < 7; k++) CHECK(counts[k] > 800 && counts[k] < 1200);
    for (int i = 0; i < 1000; i++) {
        double u = ex_rand_unit(&s1);
        CHECK(u >= 0 && u < 1);
    }
    CHECK(ex_rand_below(&s1, 1) == 0);
}

static void test_args(void) {
    int64_t n = 3;
    double x = 0.5;
    const char *s = "a";
    bool flag = false;
    const char *pos = NULL;
    const ex_arg args[] = {{"n", EX_ARG_INT, &n, "an int"},
                           {"x", EX_ARG_DOUBLE, &x, "a double"},
                           {"s", EX_ARG_STRING, &s, "a string"},
                           {"f", EX_ARG_FLAG, &flag, "a flag"}};
    char *ok[] = {"prog", "--n", "12", "--x=2.5", "file.txt", "--s", "b", "--f"};
    CHECK(ex_args_parse(8, ok, args, 4, &pos, "") == EX_ARGS_OK);
    CHECK(n == 12 && x == 2.5 && strcmp(s, "b") == 0 && flag && pos && strcmp(pos, "file.txt") == 0);
    char *bad_int[] = {"prog", "--n", "12x"};
    char *unknown[] = {"prog", "--nope"};
    char *no_value[] = {"prog", "--x"};
    char *flag_value[] = {"prog", "--f=1"};
    char *two_pos[] = {"prog", "a", "b"};
    fprintf(stderr, "(the five messages below are expected)\n");
    CHECK(ex_args_parse(3, bad_int, args, 4, &pos, "") == EX_ARGS_ERROR && n == 12);
    CHECK(ex_args_parse(2, unknown, args, 4, &pos, "") == EX_ARGS_ERROR);
    CHECK(ex_args_parse(2, no_value, args, 4, &pos, "") == EX_ARGS_ERROR);
    CHECK(ex_args_parse(2, flag_value, args, 4, &pos, "") == EX_ARGS_ERROR);
    CHECK(ex_args_parse(3, two_pos, args, 4, &pos, "") == EX_ARGS_ERROR);
}

int main(int argc, char **argv) {
    const char *dir = argc > 1 ? argv[1] : ".";
    test_checkpoint(dir);
    test_prng();
    test_args();
    if (failures) fprintf(stderr, "test_common: %d checks failed\n", failures);
    else printf("test_common: all checks passed\n");
    return failures ? 1 : 0;
}
