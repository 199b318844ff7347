/* SPDX-License-Identifier: MIT */
/* test_profile.c - the op profiler (fucina/profile.h): the events of a
 * small forward + backward, the Chrome trace read back by a small JSON
 * parser that checks the trace event schema, the table, the off state,
 * every bad input's status and the OOM sweep. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "fucina.h"
#include "oom_sweep.h"

enum { M = 3, K = 4, N = 5 };

/* x[M,K] @ w[K,N] -> relu -> sum: three ops forward, three rules backward */
static fc_status step(fc_ctx *ctx, fc_tensor *x, fc_tensor *w) {
    fc_scope_begin(ctx);
    fc_tensor *loss = fc_sum(ctx, fc_relu(ctx, fc_matmul(ctx, x, w)), NULL, 0, false);
    fc_status st = loss ? fc_backward(ctx, loss) : fc_ctx_status(ctx);
    fc_scope_end(ctx);
    return st;
}

static fc_ctx *new_ctx(void) {
    fc_ctx *ctx = fc_ctx_new(&(fc_ctx_opts){.threads = 1});
    assert_non_null(ctx);
    return ctx;
}

static void make_params(fc_ctx *ctx, fc_tensor **x, fc_tensor **w) {
    *x = fc_param_randn(ctx, FC_F32, (const int64_t[]){M, K}, 2, 1.0);
    *w = fc_param_randn(ctx, FC_F32, (const int64_t[]){K, N}, 2, 1.0);
    assert_non_null(*x);
    assert_non_null(*w);
}

static void test_forward_backward_events(void **state) {
    (void)state;
    fc_ctx *ctx = new_ctx();
    fc_tensor *x, *w;
    make_params(ctx, &x, &w);
    assert_int_equal(fc_profile_begin(ctx, NULL), FC_OK);
    assert_true(fc_profile_running(ctx));
    assert_int_equal(step(ctx, x, w), FC_OK);
    assert_int_equal(fc_profile_end(ctx), FC_OK);
    assert_false(fc_profile_running(ctx));

    const char *names[6] = {"matmul", "relu", "sum", "sum", "relu", "matmul"};
    fc_profile_phase phases[6] = {FC_PROFILE_FORWARD,  FC_PROFILE_FORWARD,  FC_PROFILE_FORWARD,
                                  FC_PROFILE_BACKWARD, FC_PROFILE_BACKWARD, FC_PROFILE_BACKWARD};
    assert_int_equal(fc_profile_event_count(ctx), 6);
    assert_int_equal(fc_profile_dropped_count(ctx), 0);
    int64_t last_end = 0;
    for (int i = 0; i < 6; i++) {
        fc_profile_event e;
        assert_int_equal(fc_profile_get_event(ctx, i, &e), FC_OK);
        assert_string_equal(e.name, names[i]);
        assert_int_equal(e.phase, phases[i]);
        assert_true(e.start_ns >= 0);
        assert_true(e.dur_ns >= 0);
        /* the events of this graph do not nest: each begins after the last ended */
        assert_true(e.start_ns >= last_end);
        last_end = e.start_ns + e.dur_ns;
        if (i == 0) {
            assert_int_equal(e.flops, 2 * M * N * K);
            assert_int_equal(e.bytes, M * N * (int64_t)sizeof(float));
        }
        if (i == 1) assert_int_equal(e.bytes, M * N * (int64_t)sizeof(float));
        if (i == 2) {
            assert_int_equal(e.flops, 0);
            assert_int_equal(e.bytes, (int64_t)sizeof(float));
        }
        if (e.phase == FC_PROFILE_BACKWARD) assert_int_equal(e.bytes, 0);
        /* the matmul rule's two products, dA = g w^T and dW = x^T g, run as
         * matmuls inside the rule: their FLOPs are the rule's */
        if (i == 5) assert_int_equal(e.flops, 2 * 2 * M * N * K);
        if (i == 3 || i == 4) assert_int_equal(e.flops, 0);
    }
    /* after the end nothing more is recorded; the events stay */
    assert_int_equal(step(ctx, x, w), FC_OK);
    assert_int_equal(fc_profile_event_count(ctx), 6);
    /* a second recording starts afresh */
    assert_int_equal(fc_profile_begin(ctx, NULL), FC_OK);
    assert_int_equal(fc_profile_event_count(ctx), 0);
    assert_int_equal(step(ctx, x, w), FC_OK);
    assert_int_equal(step(ctx, x, w), FC_OK);
    assert_int_equal(fc_profile_event_count(ctx), 12);
    assert_int_equal(fc_profile_end(ctx), FC_OK);
    fc_release(x);
    fc_release(w);
    fc_ctx_free(ctx);
}

/* conv2d's FLOPs: 2 per weight of one output channel per output element,
 * groups dividing the input channels */
static void test_conv_flops(void **state) {
    (void)state;
    fc_ctx *ctx = new_ctx();
    fc_tensor *x = fc_randn(ctx, FC_F32, (const int64_t[]){2, 4, 6, 5}, 4);
    fc_tensor *w = fc_randn(ctx, FC_F32, (const int64_t[]){6, 2, 3, 2}, 4);
    fc_conv2d_opts o = fc_conv2d_opts_default();
    o.groups = 2;
    assert_int_equal(fc_profile_begin(ctx, NULL), FC_OK);
    fc_tensor *y = fc_conv2d(ctx, x, w, NULL, &o);
    assert_int_equal(fc_profile_end(ctx), FC_OK);
    assert_non_null(y);
    /* y [2, 6, 4, 4]: 192 elements, each 2 * 3 * 2 input channels' taps */
    fc_profile_event e;
    int64_t n = fc_profile_event_count(ctx);
    assert_true(n >= 1);
    assert_int_equal(fc_profile_get_event(ctx, n - 1, &e), FC_OK);
    assert_string_equal(e.name, "conv2d");
    assert_int_equal(e.flops, 2 * 192 * (2 * 3 * 2));
    assert_int_equal(e.bytes, 192 * (int64_t)sizeof(float));
    fc_release(y);
    fc_release(x);
    fc_release(w);
    fc_ctx_free(ctx);
}

static void test_off_records_nothing(void **state) {
    (void)state;
    fc_ctx *ctx = new_ctx();
    fc_tensor *x, *w;
    make_params(ctx, &x, &w);
    assert_int_equal(step(ctx, x, w), FC_OK);
    assert_false(fc_profile_running(ctx));
    assert_int_equal(fc_profile_event_count(ctx), 0);
    fc_profile_event e;
    assert_int_equal(fc_profile_get_event(ctx, 0, &e), FC_ERR_INDEX);
    assert_int_equal(fc_profile_write_table(ctx, stdout), FC_ERR_STATE);
    fc_ctx_clear_error(ctx);
    fc_release(x);
    fc_release(w);
    fc_ctx_free(ctx);
}

static void test_dropped_past_max_events(void **state) {
    (void)state;
    fc_ctx *ctx = new_ctx();
    fc_tensor *x, *w;
    make_params(ctx, &x, &w);
    assert_int_equal(fc_profile_begin(ctx, &(fc_profile_opts){.max_events = 4}), FC_OK);
    assert_int_equal(step(ctx, x, w), FC_OK);
    assert_int_equal(fc_profile_end(ctx), FC_OK);
    assert_int_equal(fc_profile_event_count(ctx), 4);
    assert_int_equal(fc_profile_dropped_count(ctx), 2);
    fc_profile_event e;
    assert_int_equal(fc_profile_get_event(ctx, 3, &e), FC_OK);
    assert_string_equal(e.name, "sum");
    assert_int_equal(e.phase, FC_PROFILE_BACKWARD);
    fc_release(x);
    fc_release(w);
    fc_ctx_free(ctx);
}

static void test_bad_input(void **state) {
    (void)state;
    fc_profile_event e;
    assert_int_equal(fc_profile_begin(NULL, NULL), FC_ERR_NULL_ARG);
    assert_int_equal(fc_profile_end(NULL), FC_ERR_NULL_ARG);
    assert_false(fc_profile_running(NULL));
    assert_int_equal(fc_profile_event_count(NULL), 0);
    assert_int_equal(fc_profile_dropped_count(NULL), 0);
    assert_int_equal(fc_profile_get_event(NULL, 0, &e), FC_ERR_NULL_ARG);
    assert_int_equal(fc_profile_write_trace(NULL, "x.json"), FC_ERR_NULL_ARG);
    assert_int_equal(fc_profile_write_table(NULL, stdout), FC_ERR_NULL_ARG);

    fc_ctx *ctx = new_ctx();
    assert_int_equal(fc_profile_end(ctx), FC_ERR_STATE);
    assert_int_equal(fc_ctx_status(ctx), FC_ERR_STATE);
    assert_non_null(strstr(fc_ctx_error(ctx), "fc_profile_end"));
    fc_ctx_clear_error(ctx);
    assert_int_equal(fc_profile_write_trace(ctx, "never.json"), FC_ERR_STATE);
    fc_ctx_clear_error(ctx);
    assert_int_equal(fc_profile_begin(ctx, &(fc_profile_opts){.max_events = -1}),
                     FC_ERR_INVALID_ARG);
    assert_false(fc_profile_running(ctx));
    fc_ctx_clear_error(ctx);
    assert_int_equal(fc_profile_begin(ctx, &(fc_profile_opts){.max_events = INT64_MAX}),
                     FC_ERR_OVERFLOW);
    fc_ctx_clear_error(ctx);

    assert_int_equal(fc_profile_begin(ctx, NULL), FC_OK);
    assert_int_equal(fc_profile_begin(ctx, NULL), FC_ERR_STATE); /* nested */
    assert_true(fc_profile_running(ctx));                        /* the first goes on */
    fc_ctx_clear_error(ctx);
    assert_int_equal(fc_profile_get_event(ctx, 0, NULL), FC_ERR_NULL_ARG);
    assert_int_equal(fc_profile_get_event(ctx, 0, &e), FC_ERR_INDEX);
    fc_ctx_clear_error(ctx);
    assert_int_equal(fc_profile_get_event(ctx, -1, &e), FC_ERR_INDEX);
    fc_ctx_clear_error(ctx);
    assert_int_equal(fc_profile_write_trace(ctx, NULL), FC_ERR_NULL_ARG);
    fc_ctx_clear_error(ctx);
    assert_int_equal(fc_profile_write_table(ctx, NULL), FC_ERR_NULL_ARG);
    fc_ctx_clear_error(ctx);
    assert_int_equal(fc_profile_write_trace(ctx, FUCINA_BINARY_DIR "/no-such-dir/t.json"),
                     FC_ERR_IO);
    fc_ctx_clear_error(ctx);
    assert_int_equal(fc_profile_end(ctx), FC_OK);
    assert_int_equal(fc_profile_end(ctx), FC_ERR_STATE); /* ended twice */
    fc_ctx_clear_error(ctx);
    fc_ctx_free(ctx); /* frees the recording (checked under ASan) */
}

/* ---- a small JSON parser, enough to check the trace ------------------------------------ */

typedef struct jp {
    const char *s;
    bool ok;
} jp;

static void ws(jp *p) {
    while (*p->s == ' ' || *p->s == '\n' || *p->s == '\t' || *p->s == '\r') p->s++;
}

static bool lit(jp *p, const char *w) {
    ws(p);
    size_t n = strlen(w);
    if (strncmp(p->s, w, n) != 0) return p->ok = false;
    p->s += n;
    return true;
}

/* a string into buf (escapes checked, \" and \\ kept as their character) */
static bool str(jp *p, char *buf, size_t cap) {
    ws(p);
    if (*p->s != '"') return p->ok = false;
    p->s++;
    size_t n = 0;
    while (*p->s != '"') {
        char c = *p->s++;
        if ((unsigned char)c < 0x20 || c == '\0') return p->ok = false;
        if (c == '\\') {
            c = *p->s++;
            if (c == 'u') {
                for (int i = 0; i < 4; i++)
                    if (!strchr("0123456789abcdefABCDEF", *p->s++)) return p->ok = false;
                c = '?';
            } else if (!strchr("\"\\/bfnrt", c)) {
                return p->ok = false;
            }
        }
        if (n + 1 < cap) buf[n++] = c;
    }
    p->s++;
    buf[n] = '\0';
    return true;
}

/* a JSON number (the grammar checked strictly) */
static bool num(jp *p, double *out) {
    ws(p);
    const char *b = p->s;
    if (*p->s == '-') p->s++;
    if (*p->s == '0')
        p->s++;
    else if (*p->s >= '1' && *p->s <= '9')
        while (*p->s >= '0' && *p->s <= '9') p->s++;
    else
        return p->ok = false;
    if (*p->s == '.') {
        p->s++;
        if (!(*p->s >= '0' && *p->s <= '9')) return p->ok = false;
        while (*p->s >= '0' && *p->s <= '9') p->s++;
    }
    if (*p->s == 'e' || *p->s == 'E') {
        p->s++;
        if (*p->s == '+' || *p->s == '-') p->s++;
        if (!(*p->s >= '0' && *p->s <= '9')) return p->ok = false;
        while (*p->s >= '0' && *p->s <= '9') p->s++;
    }
    *out = strtod(b, NULL);
    return true;
}

static bool value(jp *p, int depth);

static bool skip_object(jp *p, int depth) {
    if (!lit(p, "{")) return false;
    ws(p);
    if (*p->s == '}') return lit(p, "}");
    char key[64];
    do {
        if (!str(p, key, sizeof key) || !lit(p, ":") || !value(p, depth + 1)) return false;
        ws(p);
    } while (*p->s == ',' && lit(p, ","));
    return lit(p, "}");
}

static bool value(jp *p, int depth) {
    if (depth > 16) return p->ok = false;
    ws(p);
    char buf[64];
    double d;
    switch (*p->s) {
    case '{': return skip_object(p, depth);
    case '[':
        lit(p, "[");
        ws(p);
        if (*p->s == ']') return lit(p, "]");
        do {
            if (!value(p, depth + 1)) return false;
            ws(p);
        } while (*p->s == ',' && lit(p, ","));
        return lit(p, "]");
    case '"': return str(p, buf, sizeof buf);
    case 't': return lit(p, "true");
    case 'f': return lit(p, "false");
    case 'n': return lit(p, "null");
    default: return num(p, &d);
    }
}

typedef struct trace_ev {
    char name[64], cat[16], ph[8];
    double ts, dur, pid, tid, flops;
    unsigned seen; /* bit per required key */
} trace_ev;

/* One trace event object, checked against the complete-event schema:
 * name, cat, ph strings; ts, dur, pid, tid numbers; args an object. */
static bool event(jp *p, trace_ev *e) {
    memset(e, 0, sizeof *e);
    if (!lit(p, "{")) return false;
    char key[64];
    do {
        if (!str(p, key, sizeof key) || !lit(p, ":")) return false;
        if (!strcmp(key, "name")) e->seen |= 1u << 0, str(p, e->name, sizeof e->name);
        else if (!strcmp(key, "cat")) e->seen |= 1u << 1, str(p, e->cat, sizeof e->cat);
        else if (!strcmp(key, "ph")) e->seen |= 1u << 2, str(p, e->ph, sizeof e->ph);
        else if (!strcmp(key, "ts")) e->seen |= 1u << 3, num(p, &e->ts);
        else if (!strcmp(key, "dur")) e->seen |= 1u << 4, num(p, &e->dur);
        else if (!strcmp(key, "pid")) e->seen |= 1u << 5, num(p, &e->pid);
        else if (!strcmp(key, "tid")) e->seen |= 1u << 6, num(p, &e->tid);
        else if (!strcmp(key, "args")) {
            e->seen |= 1u << 7;
            const char *at = p->s;
            if (!skip_object(p, 1)) return false;
            const char *f = strstr(at, "\"flops\":");
            if (f && f < p->s) e->flops = strtod(f + 8, NULL);
        } else if (!value(p, 1)) return false;
        if (!p->ok) return false;
        ws(p);
    } while (*p->s == ',' && lit(p, ","));
    return lit(p, "}");
}

static char *slurp(const char *path) {
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *s = malloc((size_t)n + 1);
    assert_non_null(s);
    assert_int_equal(fread(s, 1, (size_t)n, f), (size_t)n);
    s[n] = '\0';
    fclose(f);
    return s;
}

static void test_trace_is_chrome_json(void **state) {
    (void)state;
    fc_ctx *ctx = new_ctx();
    fc_tensor *x, *w;
    make_params(ctx, &x, &w);
    assert_int_equal(fc_profile_begin(ctx, NULL), FC_OK);
    assert_int_equal(step(ctx, x, w), FC_OK);
    assert_int_equal(fc_profile_end(ctx), FC_OK);
    const char *path = FUCINA_BINARY_DIR "/test_profile_trace.json";
    assert_int_equal(fc_profile_write_trace(ctx, path), FC_OK);
    char *text = slurp(path);

    jp p = {text, true};
    trace_ev evs[8];
    int n = 0;
    bool got_events = false;
    assert_true(lit(&p, "{"));
    char key[64];
    do {
        assert_true(str(&p, key, sizeof key));
        assert_true(lit(&p, ":"));
        if (!strcmp(key, "traceEvents")) {
            got_events = true;
            assert_true(lit(&p, "["));
            ws(&p);
            if (*p.s != ']') {
                do {
                    assert_true(n < 8);
                    assert_true(event(&p, &evs[n]));
                    n++;
                    ws(&p);
                } while (*p.s == ',' && lit(&p, ","));
            }
            assert_true(lit(&p, "]"));
        } else {
            assert_true(value(&p, 1));
        }
        ws(&p);
    } while (*p.s == ',' && lit(&p, ","));
    assert_true(lit(&p, "}"));
    ws(&p);
    assert_int_equal(*p.s, '\0'); /* nothing after the object */
    assert_true(p.ok);
    assert_true(got_events);

    assert_int_equal(n, fc_profile_event_count(ctx));
    assert_int_equal(n, 6);
    for (int i = 0; i < n; i++) {
        fc_profile_event e;
        assert_int_equal(fc_profile_get_event(ctx, i, &e), FC_OK);
        assert_int_equal(evs[i].seen, 0xffu); /* every key of the schema present */
        assert_string_equal(evs[i].name, e.name);
        assert_string_equal(evs[i].cat, e.phase == FC_PROFILE_BACKWARD ? "backward" : "forward");
        assert_string_equal(evs[i].ph, "X");
        assert_true(evs[i].ts >= 0 && evs[i].dur >= 0);
        /* microseconds with three decimals: the nanoseconds exactly */
        assert_true(evs[i].ts * 1000.0 - (double)e.start_ns < 0.5 &&
                    (double)e.start_ns - evs[i].ts * 1000.0 < 0.5);
        assert_true(evs[i].dur * 1000.0 - (double)e.dur_ns < 0.5 &&
                    (double)e.dur_ns - evs[i].dur * 1000.0 < 0.5);
        assert_true(evs[i].pid == 1 && evs[i].tid == 1);
        assert_true(evs[i].flops == (double)e.flops);
    }
    free(text);
    remove(path);
    fc_release(x);
    fc_release(w);
    fc_ctx_free(ctx);
}

static void test_table(void **state) {
    (void)state;
    fc_ctx *ctx = new_ctx();
    fc_tensor *x, *w;
    make_params(ctx, &x, &w);
    assert_int_equal(fc_profile_begin(ctx, NULL), FC_OK);
    for (int i = 0; i < 3; i++) assert_int_equal(step(ctx, x, w), FC_OK);
    assert_int_equal(fc_profile_end(ctx), FC_OK);
    FILE *f = tmpfile();
    assert_non_null(f);
    assert_int_equal(fc_profile_write_table(ctx, f), FC_OK);
    rewind(f);
    char line[256], name[64];
    assert_non_null(fgets(line, sizeof line, f));
    assert_non_null(strstr(line, "calls"));
    assert_non_null(strstr(line, "GFLOP/s"));
    double prev_total = 1e300;
    int rows = 0;
    bool saw_matmul = false;
    while (fgets(line, sizeof line, f)) {
        long calls;
        double total, mean, share, fwd, bwd;
        char gf[32];
        if (sscanf(line, "%63s %ld %lf %lf %lf %lf %lf %31s", name, &calls, &total, &mean, &share,
                   &fwd, &bwd, gf) != 8)
            break; /* the summary line */
        rows++;
        assert_int_equal(calls, 6); /* 3 forward + 3 backward of each op */
        assert_true(total <= prev_total);  /* sorted by total time */
        assert_true(share >= 0 && share <= 100.0);
        assert_true(fwd >= 0 && bwd >= 0);
        prev_total = total;
        if (!strcmp(name, "matmul")) {
            saw_matmul = true;
            assert_true(strcmp(gf, "-") != 0);
        }
        if (!strcmp(name, "relu")) assert_string_equal(gf, "-");
    }
    assert_int_equal(rows, 3);
    assert_true(saw_matmul);
    assert_non_null(strstr(line, "18 events"));
    fclose(f);
    fc_release(x);
    fc_release(w);
    fc_ctx_free(ctx);
}

/* ---- OOM sweep: begin, a recorded step and the table under failing allocations ---------- */

static fc_status sc_profile(fc_ctx *ctx) {
    fc_status st = fc_profile_begin(ctx, &(fc_profile_opts){.max_events = 64});
    if (st != FC_OK) return st;
    fc_scope_begin(ctx);
    fc_tensor *x = fc_param_randn(ctx, FC_F32, (const int64_t[]){M, K}, 2, 1.0);
    fc_tensor *w = fc_param_randn(ctx, FC_F32, (const int64_t[]){K, N}, 2, 1.0);
    st = x && w ? step(ctx, x, w) : fc_ctx_status(ctx);
    fc_scope_end(ctx);
    fc_status end = fc_profile_end(ctx);
    if (st == FC_OK) st = end;
    if (st != FC_OK) return st;
    FILE *f = tmpfile();
    if (!f) return FC_ERR_IO;
    st = fc_profile_write_table(ctx, f);
    fclose(f);
    return st;
}

static void test_oom_sweep(void **state) {
    (void)state;
    oom_result r = oom_sweep(&(oom_scenario){"profile", sc_profile});
    assert_true(r.failures > 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_forward_backward_events),
        cmocka_unit_test(test_conv_flops),
        cmocka_unit_test(test_off_records_nothing),
        cmocka_unit_test(test_dropped_past_max_events),
        cmocka_unit_test(test_bad_input),
        cmocka_unit_test(test_trace_is_chrome_json),
        cmocka_unit_test(test_table),
        cmocka_unit_test(test_oom_sweep),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
