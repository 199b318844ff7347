/* SPDX-License-Identifier: MIT */
/* test_common.c - checks of the trainers' shared helpers: the PRNG's range,
 * uniformity and determinism, and the option parser's strictness. Run by ctest as examples/common;
 * prints each failed check and exits 1 when any failed. */
#define _POSIX_C_SOURCE 200809L

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/args.h"
#include "common/progress.h"

static int failures;
#define CHECK(cond)                                                                                \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond);               \
            failures++;                                                                            \
        }                                                                                          \
    } while (0)

static void test_prng(void) {
    uint64_t s1 = 17, s2 = 17;
    int counts[7] = {0};
    for (int i = 0; i < 7000; i++) {
        uint64_t x = ex_rand_below(&s1, 7);
        CHECK(x < 7);
        if (x < 7) counts[x]++;
        CHECK(ex_rand_below(&s2, 7) == x); /* same seed, same stream */
    }
    for (int k = 0; k < 7; k++)
        CHECK(counts[k] > 800 && counts[k] < 1200);
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
    const ex_arg args[] = {{"n", EX_ARG_INT, &n, "an int", EX_ANY},
                           {"x", EX_ARG_DOUBLE, &x, "a double", EX_ANY},
                           {"s", EX_ARG_STRING, &s, "a string", EX_ANY},
                           {"f", EX_ARG_FLAG, &flag, "a flag", EX_ANY}};
    char *ok[] = {"prog", "--n", "12", "--x=2.5", "file.txt", "--s", "b", "--f"};
    CHECK(ex_args_parse(8, ok, args, 4, &pos, "") == EX_ARGS_OK);
    CHECK(n == 12 && x == 2.5 && strcmp(s, "b") == 0 && flag && pos &&
          strcmp(pos, "file.txt") == 0);
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

/* ranges: a value out of its option's range is an error and is not stored */
static void test_args_range(void) {
    int64_t n = 3;
    double p = 0.5, t = 1;
    const ex_arg args[] = {{"n", EX_ARG_INT, &n, "a count", EX_MIN(1), EX_MAX(8)},
                           {"p", EX_ARG_DOUBLE, &p, "a probability", EX_POS, EX_MAX(1)},
                           {"t", EX_ARG_DOUBLE, &t, "a temperature", EX_MIN(0)}};
    char *ok[] = {"prog", "--n", "8", "--p=1", "--t", "0"};
    CHECK(ex_args_parse(6, ok, args, 3, NULL, "") == EX_ARGS_OK);
    CHECK(n == 8 && p == 1 && t == 0);
    char *n_low[] = {"prog", "--n", "0"};
    char *n_high[] = {"prog", "--n=9"};
    char *p_zero[] = {"prog", "--p", "0"};
    char *p_two[] = {"prog", "--p", "2"};
    char *p_nan[] = {"prog", "--p", "nan"};
    char *t_neg[] = {"prog", "--t", "-0.5"};
    fprintf(stderr, "(the six messages below are expected)\n");
    CHECK(ex_args_parse(3, n_low, args, 3, NULL, "") == EX_ARGS_ERROR && n == 8);
    CHECK(ex_args_parse(2, n_high, args, 3, NULL, "") == EX_ARGS_ERROR && n == 8);
    CHECK(ex_args_parse(3, p_zero, args, 3, NULL, "") == EX_ARGS_ERROR && p == 1);
    CHECK(ex_args_parse(3, p_two, args, 3, NULL, "") == EX_ARGS_ERROR && p == 1);
    CHECK(ex_args_parse(3, p_nan, args, 3, NULL, "") == EX_ARGS_ERROR && p == 1);
    CHECK(ex_args_parse(3, t_neg, args, 3, NULL, "") == EX_ARGS_ERROR && t == 0);
}

/* ex_csv_resume keeps the header and the rows up to the step resumed */
static void test_csv_resume(void) {
    char path[] = "/tmp/test_common_csv_XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    if (fd < 0) return;
    close(fd);
    FILE *f = fopen(path, "w");
    CHECK(f != NULL);
    if (!f) return;
    fputs("step,loss\n0,,1.5\n1,2.0\n2,1.9\n3,1.8\n3,,1.7\n4,1.6\n", f);
    fclose(f);
    int64_t last = 0;
    f = ex_csv_resume(path, "step,loss", 2, &last);
    CHECK(last == 2);
    CHECK(f != NULL);
    if (f) {
        fputs("3,1.75\n", f);
        fclose(f);
    }
    char buf[256] = "";
    f = fopen(path, "r");
    size_t n = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
    buf[n] = '\0';
    if (f) fclose(f);
    CHECK(strcmp(buf, "step,loss\n0,,1.5\n1,2.0\n2,1.9\n3,1.75\n") == 0);
    remove(path);
    /* a missing file starts with the header */
    f = ex_csv_resume(path, "step,loss", 5, &last);
    CHECK(last == -1);
    CHECK(f != NULL);
    if (f) fclose(f);
    f = fopen(path, "r");
    n = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
    buf[n] = '\0';
    if (f) fclose(f);
    CHECK(strcmp(buf, "step,loss\n") == 0);
    remove(path);
}

int main(void) {
    test_prng();
    test_args();
    test_args_range();
    test_csv_resume();
    if (failures)
        fprintf(stderr, "test_common: %d checks failed\n", failures);
    else
        printf("test_common: all checks passed\n");
    return failures ? 1 : 0;
}
