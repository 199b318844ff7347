/* args.c - the example trainers' option parser (see args.h). Values are
 * parsed strictly: trailing garbage ("12x"), overflow and missing values
 * are errors that name the option, never silently zero. */
#include "args.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
        char left[96];
        snprintf(left, sizeof left, "--%s%s", a->name, def);
        printf("  %-36s %s\n", left, a->help);
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
