/* SPDX-License-Identifier: MIT */
/* Planted upward call for the symbol check's self-test: an "exec" object that
 * calls a function only the "ops" object defines. */
int planted_op(int x);
int planted_kernel(int x);
int planted_kernel(int x) { return planted_op(x) + 1; }
