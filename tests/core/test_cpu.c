/* SPDX-License-Identifier: MIT */
/* test_cpu.c - the one CPU-feature module: level names, the level against
 * the detected features, the test cap, the FUCINA_ISA cap (ctest also runs
 * this executable under FUCINA_ISA=portable and FUCINA_ISA=bogus), and the
 * public fc_cpu_name / fc_cpu_isa. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "core/cpu.h"
#include "fucina.h"

static void test_cpu_level_names_round_trip(void **state) {
    (void)state;
    const char *want[] = {"portable", "avx2", "avx512"};
    assert_int_equal(sizeof want / sizeof want[0], FC__ISA_COUNT);
    for (int i = 0; i < FC__ISA_COUNT; i++) {
        assert_string_equal(fc__isa_name((fc__isa)i), want[i]);
        fc__isa back = FC__ISA_COUNT;
        assert_true(fc__isa_from_name(want[i], &back));
        assert_int_equal(back, i);
    }
    assert_string_equal(fc__isa_name(FC__ISA_COUNT), "invalid");
    assert_string_equal(fc__isa_name((fc__isa)-1), "invalid");
    fc__isa untouched = FC__ISA_AVX2;
    assert_false(fc__isa_from_name("AVX2", &untouched)); /* exact spelling only */
    assert_false(fc__isa_from_name("", &untouched));
    assert_false(fc__isa_from_name(NULL, &untouched));
    assert_int_equal(untouched, FC__ISA_AVX2);
}

/* The detected level is exactly what the feature flags allow. */
static void test_cpu_level_matches_features(void **state) {
    (void)state;
    const fc__cpu_info *c = fc__cpu();
    assert_non_null(c);
    assert_ptr_equal(c, fc__cpu()); /* detected once, one copy */
    const bool v3 = c->avx2 && c->fma && c->f16c;
    const bool v4 = v3 && c->avx512f && c->avx512bw && c->avx512vl && c->avx512dq;
    const fc__isa want = v4 ? FC__ISA_AVX512 : v3 ? FC__ISA_AVX2 : FC__ISA_PORTABLE;
    assert_int_equal(fc__isa_detected(), want);
#if !defined(__x86_64__)
    assert_false(c->x86);
    assert_int_equal(fc__isa_detected(), FC__ISA_PORTABLE);
#endif
    /* the AVX-512 extensions are never reported without AVX-512F */
    if (!c->avx512f)
        assert_false(c->avx512bw || c->avx512vl || c->avx512dq || c->avx512vnni || c->avx512bf16 ||
                     c->avx512fp16);
    print_message("cpu: %s, detected %s, in use %s\n", c->name, fc__isa_name(fc__isa_detected()),
                  fc__isa_name(fc__isa_level()));
}

static void test_cpu_test_cap_narrows_and_restores(void **state) {
    (void)state;
    const fc__isa level = fc__isa_level();
    assert_true(level <= fc__isa_detected());
    assert_true(level <= fc__isa_env_cap());
    assert_true(fc__isa_enabled(FC__ISA_PORTABLE));
    assert_false(fc__isa_enabled(FC__ISA_COUNT));
    assert_false(fc__isa_enabled((fc__isa)-1));
    for (int cap = FC__ISA_PORTABLE; cap < FC__ISA_COUNT; cap++) {
        const fc__isa prev = fc__isa_set_cap((fc__isa)cap);
        assert_int_equal(fc__isa_level(), cap < (int)level ? cap : (int)level);
        for (int i = 0; i < FC__ISA_COUNT; i++)
            assert_int_equal(fc__isa_enabled((fc__isa)i), i <= (int)fc__isa_level());
        assert_string_equal(fc_cpu_isa(), fc__isa_name(fc__isa_level()));
        assert_int_equal(fc__isa_set_cap(prev), cap);
    }
    assert_int_equal(fc__isa_level(), level);
    /* a cap out of range removes the cap; it never widens past detection */
    const fc__isa prev = fc__isa_set_cap(FC__ISA_COUNT);
    assert_int_equal(fc__isa_level(), level);
    fc__isa_set_cap(prev);
}

/* FUCINA_ISA caps every family and is the level the public call reports. */
static void test_cpu_env_cap(void **state) {
    (void)state;
    const char *env = getenv("FUCINA_ISA");
    fc__isa named = FC__ISA_COUNT - 1;
    const bool valid = env && fc__isa_from_name(env, &named);
    assert_int_equal(fc__isa_env_cap(), valid ? named : FC__ISA_COUNT - 1);
    const fc__isa d = fc__isa_detected();
    assert_int_equal(fc__isa_level(), named < d ? named : d);
    if (valid && named == FC__ISA_PORTABLE) {
        assert_false(fc__isa_enabled(FC__ISA_AVX2));
        assert_string_equal(fc_cpu_isa(), "portable");
    }
    print_message("FUCINA_ISA=%s: level %s\n", env ? env : "(unset)", fc_cpu_isa());
}

static void test_cpu_public_queries(void **state) {
    (void)state;
    const char *name = fc_cpu_name();
    assert_non_null(name);
    assert_true(strlen(name) > 0 && strlen(name) < 64);
    assert_true(name[0] != ' ' && name[strlen(name) - 1] != ' ');
    const char *isa = fc_cpu_isa();
    assert_true(!strcmp(isa, "portable") || !strcmp(isa, "avx2") || !strcmp(isa, "avx512"));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cpu_level_names_round_trip),
        cmocka_unit_test(test_cpu_level_matches_features),
        cmocka_unit_test(test_cpu_test_cap_narrows_and_restores),
        cmocka_unit_test(test_cpu_env_cap),
        cmocka_unit_test(test_cpu_public_queries),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
