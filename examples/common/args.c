/* SPDX-License-Identifier: MIT */
/* args.c - the example trainers' option parser (see args.h). Values are
 * parsed strictly: trailing garbage ("12x"), overflow, missing values and
 * values out of the option's range are errors that name the option, never
 * silently zero or clamped. */
#include "args.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* "[1, 8]", "(0, 1]", ">= 0", "> 0", "<= 4"; "" without a range */
static const char *range_text(const ex_arg *a, char *buf, size_t cap) {
    buf[0] = '\0';
    if (a->kind != EX_ARG_INT && a->kind != EX_ARG_DOUBLE) return buf;
    if (a->has_lo && a->has_hi)
        snprintf(buf, cap, "%c%.15g, %.15g%c", a->lo_open ? '(' : '[', a->lo, a->hi,
                 a->hi_open ? ')' : ']');
    else if (a->has_lo)
        snprintf(buf, cap, "%s %.15g", a->lo_open ? ">" : ">=", a->lo);
    else if (a->has_hi)
        snprintf(buf, cap, "%s %.15g", a->hi_open ? "<" : "<=", a->hi);
    return buf;
}

static bool in_range(const ex_arg *a, double x) {
    if (a->has_lo && !(a->lo_open ? x > a->lo : x >= a->lo)) return false;
    if (a->has_hi && !(a->hi_open ? x < a->hi : x <= a->hi)) return false;
    return x == x; /* NaN is in no range */
}

static void usage_print(const char *prog, const ex_arg *args, int nargs, const char *usage) {
    printf("usage: %s %s\n\noptions:\n", prog, usage);
    for (int i = 0; i < nargs; i++) {
        const ex_arg *a = &args[i];
        char def[64] = "";
        switch (a->kind) {
        case EX_ARG_INT:
            snprintf(def, sizeof def, " N (default %lld)", (long long)*(int64_t *)a->dst);
            break;
        case EX_ARG_DOUBLE:
            snprintf(def, sizeof def, " X (default %g)", *(double *)a->dst);
            break;
        case EX_ARG_STRING: {
            const char *s = *(const char **)a->dst;
            snprintf(def, sizeof def, " S (default %s)", s ? s : "none");
            break;
        }
        case EX_ARG_FLAG:
            break;
        }
        char left[96], range[80];
        snprintf(left, sizeof left, "--%s%s", a->name, def);
        range_text(a, range, sizeof range);
        printf("  %-36s %s%s%s%s\n", left, a->help, range[0] ? " [" : "", range,
               range[0] ? "]" : "");
    }
    printf("  %-36s %s\n", "--help", "print this and exit");
}

static bool set_value(const ex_arg *a, const char *v) {
    char *end = NULL;
    errno = 0;
    switch (a->kind) {
    case EX_ARG_INT: {
        long long x = strtoll(v, &end, 10);
        if (errno || end == v || *end) return false;
        *(int64_t *)a->dst = x;
        return true;
    }
    case EX_ARG_DOUBLE: {
        double x = strtod(v, &end);
        if (errno || end == v || *end) return false;
        *(double *)a->dst = x;
        return true;
    }
    case EX_ARG_STRING:
        *(const char **)a->dst = v;
        return true;
    case EX_ARG_FLAG:
        return false;
    }
    return false;
}

ex_args_result ex_args_parse(int argc, char **argv, const ex_arg *args, int nargs,
                             const char **positional, const char *usage) {
    const char *prog = argc > 0 ? argv[0] : "trainer";
    bool have_positional = false;
    for (int i = 1; i < argc; i++) {
        const char *s = argv[i];
        if (strncmp(s, "--", 2) != 0) {
            if (!positional || have_positional) {
                fprintf(stderr, "%s: unexpected argument '%s' (see --help)\n", prog, s);
                return EX_ARGS_ERROR;
            }
            *positional = s;
            have_positional = true;
            continue;
        }
        s += 2;
        if (strcmp(s, "help") == 0) {
            usage_print(prog, args, nargs, usage);
            return EX_ARGS_HELP;
        }
        const char *eq = strchr(s, '=');
        size_t len = eq ? (size_t)(eq - s) : strlen(s);
        const ex_arg *a = NULL;
        for (int k = 0; k < nargs && !a; k++)
            if (strlen(args[k].name) == len && strncmp(args[k].name, s, len) == 0) a = &args[k];
        if (!a) {
            fprintf(stderr, "%s: unknown option --%.*s (see --help)\n", prog, (int)len, s);
            return EX_ARGS_ERROR;
        }
        if (a->kind == EX_ARG_FLAG) {
            if (eq) {
                fprintf(stderr, "%s: --%s takes no value\n", prog, a->name);
                return EX_ARGS_ERROR;
            }
            *(bool *)a->dst = true;
            continue;
        }
        const char *v = eq ? eq + 1 : (i + 1 < argc ? argv[++i] : NULL);
        if (v && (a->kind == EX_ARG_INT || a->kind == EX_ARG_DOUBLE)) {
            /* parse into a copy first: an out-of-range value is not stored */
            int64_t iv = 0;
            double dv = 0;
            ex_arg tmp = *a;
            tmp.dst = a->kind == EX_ARG_INT ? (void *)&iv : (void *)&dv;
            if (set_value(&tmp, v)) {
                double x = a->kind == EX_ARG_INT ? (double)iv : dv;
                if (!in_range(a, x)) {
                    char range[80];
                    fprintf(stderr, "%s: --%s must be %s%s, got %s\n", prog, a->name,
                            a->has_lo && a->has_hi ? "in " : "", range_text(a, range, sizeof range),
                            v);
                    return EX_ARGS_ERROR;
                }
                if (a->kind == EX_ARG_INT)
                    *(int64_t *)a->dst = iv;
                else
                    *(double *)a->dst = dv;
                continue;
            }
        }
        if (!v || !set_value(a, v)) {
            fprintf(stderr, "%s: --%s needs a%s value, got '%s'\n", prog, a->name,
                    a->kind == EX_ARG_INT      ? "n integer"
                    : a->kind == EX_ARG_DOUBLE ? " numeric"
                                               : "",
                    v ? v : "nothing");
            return EX_ARGS_ERROR;
        }
    }
    return EX_ARGS_OK;
}
