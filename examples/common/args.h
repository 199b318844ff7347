/* SPDX-License-Identifier: MIT */
/* args.h - a table-driven command-line parser for the example trainers.
 *
 * Each option is one row: its long name (without "--"), its kind, the
 * variable it writes, a help line, and optionally the range a number must
 * lie in (EX_MIN, EX_MAX, EX_POS below). "--name value" and "--name=value"
 * are both accepted; flags take no value. A value out of its range is an
 * error naming the option, the range and the value given, so no program
 * repeats these checks with a vaguer message. --help prints the table with
 * the current (default) values and the ranges, on stdout. */
#ifndef EX_ARGS_H
#define EX_ARGS_H

#include <stdbool.h>
#include <stdint.h>

typedef enum ex_arg_kind { EX_ARG_INT, EX_ARG_DOUBLE, EX_ARG_STRING, EX_ARG_FLAG } ex_arg_kind;

typedef struct ex_arg {
    const char *name;
    ex_arg_kind kind;
    void *dst; /* int64_t *, double *, const char **, bool * by kind */
    const char *help;
    /* the range of an EX_ARG_INT or EX_ARG_DOUBLE (ignored for the others):
     * value >= lo (> lo when lo_open) when has_lo, value <= hi (< hi when
     * hi_open) when has_hi; filled by the macros below */
    bool has_lo, lo_open, has_hi, hi_open;
    double lo, hi;
} ex_arg;

/* Range fields for an ex_arg row, after its help line; every row names
 * one (EX_ANY for none), so that none is left out by accident (and
 * -Wmissing-field-initializers stays quiet: the fields are designated):
 *   {"top-p", EX_ARG_DOUBLE, &p, "nucleus", EX_POS, EX_MAX(1)}  -> (0, 1]
 *   {"steps", EX_ARG_INT, &n, "steps", EX_MIN(1)}               -> [1, inf)
 *   {"out", EX_ARG_STRING, &dir, "output directory", EX_ANY}    -> no range */
#define EX_ANY .has_lo = false
#define EX_MIN(x) .has_lo = true, .lo = (x)
#define EX_MAX(x) .has_hi = true, .hi = (x)
#define EX_POS .has_lo = true, .lo_open = true, .lo = 0

typedef enum ex_args_result { EX_ARGS_OK, EX_ARGS_HELP, EX_ARGS_ERROR } ex_args_result;

/* Parses argv[1..argc-1]. A bare argument (not starting with "--") is
 * stored in *positional when that is not NULL (at most one). Prints
 * "usage: <argv[0]> <usage>" and the options on stdout for --help
 * (EX_ARGS_HELP; usage must not repeat the program's name), and on stderr
 * a message naming the bad option, what it accepts and the value given
 * otherwise (EX_ARGS_ERROR). The variables of the options parsed before
 * an error keep their new values. */
ex_args_result ex_args_parse(int argc, char **argv, const ex_arg *args, int nargs,
                             const char **positional, const char *usage);

#endif /* EX_ARGS_H */
