/* SPDX-License-Identifier: MIT */
/* gen_llama_seeds.c - writes the hostile seeds of fuzz_llama
 * (fuzz/corpus/llama/hostile_*.gguf) with the library's GGUF writer: a
 * small valid Llama (1 layer, dim 8, 2 heads, 1 kv head, ff 16, vocab 10,
 * context 8) with one key changed to a value issue 45 found overflowing
 * or accepted, so the fuzzer starts from those types and values (u64,
 * i64, bool, f64 keys) and mutates around them. Each must be refused by
 * fc_llama_from_gguf with a status (tests/models/test_llama_hostile.c
 * asserts which), except hostile_valid_wide_types.gguf, which loads and
 * runs.
 * The seeds are committed; to rewrite them, from the repository root with
 * a built library (any build directory, here build/):
 *   cc -std=c11 -D_DEFAULT_SOURCE -Iinclude fuzz/gen_llama_seeds.c build/libfucina.a \
 *      -fopenmp -lopenblas -ldnnl -lm -lpthread -o build/gen_llama_seeds
 *   build/gen_llama_seeds fuzz/corpus/llama
 * (link what the build links: without OpenBLAS, oneDNN or OpenMP, drop
 * those). */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "fucina.h"

#define MAX_KV 16

typedef union kv_val {
    uint32_t u32;
    uint64_t u64;
    int64_t i64;
    float f32;
    double f64;
    bool b;
} kv_val;

typedef struct spec {
    fc_gguf_kv kv[MAX_KV];
    kv_val val[MAX_KV];
    int n_kv;
} spec;

static float W[16 * 16];

static kv_val *set_kv(spec *s, const char *key, fc_gguf_type type) {
    int i = 0;
    while (i < s->n_kv && strcmp(s->kv[i].key, key))
        i++;
    if (i == s->n_kv) s->n_kv++;
    s->kv[i] = (fc_gguf_kv){.key = key, .type = type, .data = &s->val[i]};
    memset(&s->val[i], 0, sizeof s->val[i]);
    return &s->val[i];
}

static void add_str(spec *s, const char *key, const char *v) {
    s->kv[s->n_kv++] = (fc_gguf_kv){.key = key, .type = FC_GGUF_STRING, .data = v};
}

static void valid(spec *s) {
    memset(s, 0, sizeof *s);
    add_str(s, "general.architecture", "llama");
    set_kv(s, "llama.block_count", FC_GGUF_U32)->u32 = 1;
    set_kv(s, "llama.context_length", FC_GGUF_U32)->u32 = 8;
    set_kv(s, "llama.embedding_length", FC_GGUF_U32)->u32 = 8;
    set_kv(s, "llama.feed_forward_length", FC_GGUF_U32)->u32 = 16;
    set_kv(s, "llama.attention.head_count", FC_GGUF_U32)->u32 = 2;
    set_kv(s, "llama.attention.head_count_kv", FC_GGUF_U32)->u32 = 1;
    set_kv(s, "llama.rope.freq_base", FC_GGUF_F32)->f32 = 10000.0f;
    set_kv(s, "llama.attention.layer_norm_rms_epsilon", FC_GGUF_F32)->f32 = 1e-5f;
}

static void linear(spec *s) { add_str(s, "llama.rope.scaling.type", "linear"); }

static int write_seed(const char *dir, const char *leaf, const spec *s) {
    static const struct {
        const char *name;
        int64_t d0, d1;
    } T[] = {{"token_embd.weight", 10, 8},    {"blk.0.attn_norm.weight", 8, 0},
             {"blk.0.attn_q.weight", 8, 8},   {"blk.0.attn_k.weight", 4, 8},
             {"blk.0.attn_v.weight", 4, 8},   {"blk.0.attn_output.weight", 8, 8},
             {"blk.0.ffn_norm.weight", 8, 0}, {"blk.0.ffn_gate.weight", 16, 8},
             {"blk.0.ffn_up.weight", 16, 8},  {"blk.0.ffn_down.weight", 8, 16},
             {"output_norm.weight", 8, 0}};
    fc_io_tensor t[sizeof T / sizeof T[0]];
    for (size_t i = 0; i < sizeof T / sizeof T[0]; i++) {
        t[i] =
            (fc_io_tensor){.name = T[i].name, .dtype = FC_F32, .rank = T[i].d1 ? 2 : 1, .data = W};
        t[i].shape[0] = T[i].d0;
        t[i].shape[1] = T[i].d1;
        t[i].nbytes = sizeof(float) * (uint64_t)(T[i].d0 * (T[i].d1 ? T[i].d1 : 1));
    }
    char path[1024], err[256] = "";
    snprintf(path, sizeof path, "%s/%s", dir, leaf);
    fc_io_opts io = {.errbuf = err, .errcap = sizeof err};
    if (fc_gguf_write(path, s->kv, s->n_kv, t, (int64_t)(sizeof T / sizeof T[0]), &io)) {
        fprintf(stderr, "%s: %s\n", path, err);
        return 1;
    }
    printf("%s\n", path);
    return 0;
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s OUT_DIR\n", argv[0]);
        return 2;
    }
    const char *dir = argv[1];
    for (int i = 0; i < 16 * 16; i++) /* small weights of both signs */
        W[i] = (float)((i * 37 % 17) - 8) / 32.0f;
    spec s;
    int rc = 0;
    valid(&s);
    set_kv(&s, "llama.block_count", FC_GGUF_U64)->u64 = (uint64_t)1 << 62;
    rc |= write_seed(dir, "hostile_block_count_u64_2p62.gguf", &s);
    valid(&s);
    set_kv(&s, "llama.block_count", FC_GGUF_I64)->i64 = INT64_MAX;
    rc |= write_seed(dir, "hostile_block_count_i64_max.gguf", &s);
    valid(&s);
    set_kv(&s, "llama.block_count", FC_GGUF_BOOL)->b = true;
    rc |= write_seed(dir, "hostile_block_count_bool.gguf", &s);
    valid(&s);
    set_kv(&s, "llama.expert_count", FC_GGUF_BOOL)->b = true;
    rc |= write_seed(dir, "hostile_expert_count_bool.gguf", &s);
    valid(&s);
    linear(&s);
    set_kv(&s, "llama.rope.scaling.factor", FC_GGUF_F64)->f64 = 1e-308;
    rc |= write_seed(dir, "hostile_rope_factor_f64_tiny.gguf", &s);
    valid(&s);
    linear(&s);
    set_kv(&s, "llama.rope.scaling.factor", FC_GGUF_F32)->f32 = 1e-45f;
    rc |= write_seed(dir, "hostile_rope_factor_f32_subnormal.gguf", &s);
    valid(&s);
    set_kv(&s, "llama.attention.layer_norm_rms_epsilon", FC_GGUF_F64)->f64 = 1e-320;
    rc |= write_seed(dir, "hostile_rms_eps_f64_subnormal.gguf", &s);
    valid(&s);
    set_kv(&s, "llama.rope.freq_base", FC_GGUF_BOOL)->b = true;
    rc |= write_seed(dir, "hostile_freq_base_bool.gguf", &s);
    /* valid, with each of the types above somewhere, for the fuzzer to
     * mutate the values of: loads and runs */
    valid(&s);
    linear(&s);
    set_kv(&s, "llama.rope.scaling.factor", FC_GGUF_F64)->f64 = 2.0;
    set_kv(&s, "llama.block_count", FC_GGUF_U64)->u64 = 1;
    set_kv(&s, "llama.context_length", FC_GGUF_I64)->i64 = INT64_MAX;
    set_kv(&s, "llama.expert_count", FC_GGUF_U32)->u32 = 0;
    rc |= write_seed(dir, "hostile_valid_wide_types.gguf", &s);
    return rc;
}
