/* test_common.c - checks of the trainers' shared helpers: the PRNG's range,
 * uniformity and determinism, and the option parser's strictness. Run by ctest as examples/common;
 * prints each failed check and exits 1 when any failed. */
#define _POSIX_C_SOURCE 200809L

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
    const ex_arg args[] = {{"n", EX_ARG_INT, &n, "an int"},
                           {"x", EX_ARG_DOUBLE, &x, "a double"},
                           {"s", EX_ARG_STRING, &s, "a string"},
                           {"f", EX_ARG_FLAG, &flag, "a flag"}};
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

int main(void) {
    test_prng();
    test_args();
    if (failures)
        fprintf(stderr, "test_common: %d checks failed\n", failures);
    else
        printf("test_common: all checks passed\n");
    return failures ? 1 : 0;
}
