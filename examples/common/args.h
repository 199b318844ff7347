/* args.h - a table-driven command-line parser for the example trainers.
 *
 * Each option is one row: its long name (without "--"), its kind, the
 * variable it writes, and a help line. "--name value" and "--name=value"
 * are both accepted; flags take no value. --help prints the table with
 * the current (default) values. */
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
} ex_arg;

typedef enum ex_args_result { EX_ARGS_OK, EX_ARGS_HELP, EX_ARGS_ERROR } ex_args_result;

/* Parses argv[1..argc-1]. A bare argument (not starting with "--") is
 * stored in *positional when that is not NULL (at most one). Prints the
 * usage for --help (EX_ARGS_HELP) and a message naming the bad option or
 * value otherwise (EX_ARGS_ERROR). */
ex_args_result ex_args_parse(int argc, char **argv, const ex_arg *args, int nargs,
                             const char **positional, const char *usage);

#endif /* EX_ARGS_H */
