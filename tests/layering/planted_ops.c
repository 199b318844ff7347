/* SPDX-License-Identifier: MIT */
/* Planted op for the symbol check's self-test (see planted_exec.c). */
int planted_op(int x);
int planted_op(int x) { return 2 * x; }
