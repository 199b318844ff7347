/* SPDX-License-Identifier: MIT */
/* test_bad_input_io.c - the model-file readers and writers, the tensor
 * loaders and savers, checkpoints and the byte-level quantizers fed their
 * bad inputs, table-driven (see bad_input.h for what each case checks).
 * Byte-level io calls report through fc_io_opts.errbuf (the fixture's io
 * options), tensor-level ones through the context; the quantizers have no
 * message channel, so only their codes are checked.
 *
 * A failing writer must not leave the target behind: every write case
 * targets one path, which must still not exist after the table. A failing
 * checkpoint load must not have written any parameter (the fixture's
 * generation check). */
#define _DEFAULT_SOURCE
#include <math.h>
#include <unistd.h>

#include "bad_input.h"

#define ST_REF FUCINA_TEST_DATA_DIR "/io/st_reference.safetensors"
#define GGUF_REF FUCINA_TEST_DATA_DIR "/io/gguf_reference_v3.gguf"

static char never[512];    /* no failing writer may create it */
static char ckpt[512];     /* a valid checkpoint: param "w" f32 [2, 3], Adam state */
static char empty[512];    /* a 0-byte file */
static fc_st_file *st_ref; /* the safetensors reference, open */
static fc_tensor *ck_w;    /* the checkpoint's parameter (also in a valid optimizer) */

/* ---- opening
 * --------------------------------------------------------------------------------------- */

static fc_st_file *st_out;
static fc_gguf_file *gguf_out;
static fc_status st_open_null(fx *f) { return fc_safetensors_open(NULL, &f->io, &st_out); }
static fc_status st_open_out_null(fx *f) { return fc_safetensors_open(ST_REF, &f->io, NULL); }
static fc_status st_open_missing(fx *f) {
    return fc_safetensors_open("/nonexistent/x.safetensors", &f->io, &st_out);
}
static fc_status st_open_dir(fx *f) {
    return fc_safetensors_open(FUCINA_TEST_DATA_DIR, &f->io, &st_out);
}
static fc_status st_open_gguf(fx *f) { return fc_safetensors_open(GGUF_REF, &f->io, &st_out); }
static fc_status st_mem_null(fx *f) {
    return fc_safetensors_open_memory(NULL, 16, &f->io, &st_out);
}
static fc_status st_mem_short(fx *f) {
    return fc_safetensors_open_memory("abc", 3, &f->io, &st_out);
}
static fc_status gguf_open_null(fx *f) { return fc_gguf_open(NULL, &f->io, &gguf_out); }
static fc_status gguf_open_missing(fx *f) {
    return fc_gguf_open("/nonexistent/x.gguf", &f->io, &gguf_out);
}
static fc_status gguf_open_st(fx *f) { return fc_gguf_open(ST_REF, &f->io, &gguf_out); }
static fc_status gguf_mem_short(fx *f) { return fc_gguf_open_memory("GGUF", 4, &f->io, &gguf_out); }
/* 0-byte inputs: a file (its bytes have no address) and NULL memory of size
 * 0; the readers once did pointer arithmetic on that NULL (UB, reported by
 * clang's UBSan: see also the fuzz targets' empty input) */
static fc_status gguf_open_empty(fx *f) { return fc_gguf_open(empty, &f->io, &gguf_out); }
static fc_status gguf_open_empty_read(fx *f) {
    fc_io_opts o = f->io;
    o.flags = FC_IO_NO_MMAP;
    return fc_gguf_open(empty, &o, &gguf_out);
}
static fc_status gguf_mem_empty(fx *f) { return fc_gguf_open_memory(NULL, 0, &f->io, &gguf_out); }
static fc_status st_open_empty(fx *f) { return fc_safetensors_open(empty, &f->io, &st_out); }
static fc_status st_mem_empty(fx *f) {
    return fc_safetensors_open_memory(NULL, 0, &f->io, &st_out);
}

static const bad_case open_cases[] = {
    BAD_S(st_open_null, FC_ERR_NULL_ARG, "safetensors_open"),
    BAD_S(st_open_out_null, FC_ERR_NULL_ARG, "safetensors_open"),
    BAD_S(st_open_missing, FC_ERR_IO, "safetensors_open"),
    BAD_S(st_open_dir, FC_ERR_IO, "safetensors_open"),
    BAD_S(st_open_gguf, FC_ERR_FORMAT, "safetensors_open"),
    BAD_S(st_mem_null, FC_ERR_NULL_ARG, "safetensors_open"),
    BAD_S(st_mem_short, FC_ERR_FORMAT, "safetensors_open"),
    BAD_S(gguf_open_null, FC_ERR_NULL_ARG, "gguf_open"),
    BAD_S(gguf_open_missing, FC_ERR_IO, "gguf_open"),
    BAD_S(gguf_open_st, FC_ERR_FORMAT, "gguf_open"),
    BAD_S(gguf_mem_short, FC_ERR_FORMAT, "gguf_open"),
    BAD_S(gguf_open_empty, FC_ERR_FORMAT, "gguf_open"),
    BAD_S(gguf_open_empty_read, FC_ERR_FORMAT, "gguf_open"),
    BAD_S(gguf_mem_empty, FC_ERR_FORMAT, "gguf_open"),
    BAD_S(st_open_empty, FC_ERR_FORMAT, "safetensors_open"),
    BAD_S(st_mem_empty, FC_ERR_FORMAT, "safetensors_open"),
};

/* ---- byte-level writers
 * ------------------------------------------------------------------------------- */

static const float two[2] = {1, 2};

static fc_io_tensor io_t(void) {
    return (fc_io_tensor){
        .name = "a", .dtype = FC_F32, .rank = 1, .shape = {2}, .data = two, .nbytes = 8};
}

enum wr_change { W_NBYTES, W_BLOCK, W_RANK, W_DIM, W_NAME_NULL, W_NAME_UTF8 };
static fc_status st_write_with(fx *f, enum wr_change c) {
    fc_io_tensor t = io_t();
    switch (c) {
    case W_NBYTES:
        t.nbytes = 4;
        break;
    case W_BLOCK:
        t.dtype = FC_Q8_0;
        break;
    case W_RANK:
        t.rank = 9;
        break;
    case W_DIM:
        t.shape[0] = -2;
        break;
    case W_NAME_NULL:
        t.name = NULL;
        break;
    case W_NAME_UTF8:
        t.name = "\xff";
        break;
    }
    return fc_safetensors_write(never, &t, 1, NULL, NULL, 0, &f->io);
}
static fc_status stw_nbytes(fx *f) { return st_write_with(f, W_NBYTES); }
static fc_status stw_block(fx *f) { return st_write_with(f, W_BLOCK); }
static fc_status stw_rank(fx *f) { return st_write_with(f, W_RANK); }
static fc_status stw_dim(fx *f) { return st_write_with(f, W_DIM); }
static fc_status stw_name_null(fx *f) { return st_write_with(f, W_NAME_NULL); }
static fc_status stw_name_utf8(fx *f) { return st_write_with(f, W_NAME_UTF8); }
static fc_status stw_path_null(fx *f) {
    fc_io_tensor t = io_t();
    return fc_safetensors_write(NULL, &t, 1, NULL, NULL, 0, &f->io);
}
static fc_status stw_n_neg(fx *f) {
    fc_io_tensor t = io_t();
    return fc_safetensors_write(never, &t, -1, NULL, NULL, 0, &f->io);
}
static fc_status stw_array_null(fx *f) {
    return fc_safetensors_write(never, NULL, 1, NULL, NULL, 0, &f->io);
}
static fc_status stw_dup(fx *f) {
    fc_io_tensor t[2] = {io_t(), io_t()};
    return fc_safetensors_write(never, t, 2, NULL, NULL, 0, &f->io);
}
static fc_status stw_reserved(fx *f) {
    fc_io_tensor t = io_t();
    t.name = "__metadata__";
    return fc_safetensors_write(never, &t, 1, NULL, NULL, 0, &f->io);
}
static fc_status stw_meta_null(fx *f) {
    fc_io_tensor t = io_t();
    return fc_safetensors_write(never, &t, 1, (const char *[]){"k"}, NULL, 1, &f->io);
}
static fc_status stw_meta_utf8(fx *f) {
    fc_io_tensor t = io_t();
    return fc_safetensors_write(never, &t, 1, (const char *[]){"k"}, (const char *[]){"\xc3"}, 1,
                                &f->io);
}
static fc_status stw_no_dir(fx *f) {
    fc_io_tensor t = io_t();
    return fc_safetensors_write("/nonexistent/dir/x.safetensors", &t, 1, NULL, NULL, 0, &f->io);
}

static const uint32_t bad_align = 3;
static fc_status gguf_write_kv(fx *f, fc_gguf_kv kv) {
    fc_io_tensor t = io_t();
    return fc_gguf_write(never, &kv, 1, &t, 1, &f->io);
}
static fc_status gw_align(fx *f) {
    return gguf_write_kv(f, (fc_gguf_kv){"general.alignment", FC_GGUF_U32, 0, 0, &bad_align});
}
static fc_status gw_type(fx *f) {
    return gguf_write_kv(f, (fc_gguf_kv){"k", (fc_gguf_type)77, 0, 0, &bad_align});
}
static fc_status gw_key_null(fx *f) {
    return gguf_write_kv(f, (fc_gguf_kv){NULL, FC_GGUF_U32, 0, 0, &bad_align});
}
static fc_status gw_array_type(fx *f) {
    return gguf_write_kv(f, (fc_gguf_kv){"k", FC_GGUF_ARRAY, (fc_gguf_type)77, 1, &bad_align});
}
static fc_status gw_path_null(fx *f) {
    fc_io_tensor t = io_t();
    return fc_gguf_write(NULL, NULL, 0, &t, 1, &f->io);
}
static fc_status gw_n_neg(fx *f) {
    fc_io_tensor t = io_t();
    return fc_gguf_write(never, NULL, -1, &t, 1, &f->io);
}
static fc_status gw_bool(fx *f) {
    fc_io_tensor t = io_t();
    t.dtype = FC_BOOL;
    t.nbytes = 2;
    return fc_gguf_write(never, NULL, 0, &t, 1, &f->io);
}
static fc_status gw_rank(fx *f) {
    fc_io_tensor t = io_t();
    t.rank = 5;
    return fc_gguf_write(never, NULL, 0, &t, 1, &f->io);
}
static fc_status gw_long_name(fx *f) {
    fc_io_tensor t = io_t();
    t.name = "a_name_of_sixty_four_bytes_which_ggml_cannot_load_0123456789abcd";
    return fc_gguf_write(never, NULL, 0, &t, 1, &f->io);
}

static const bad_case write_cases[] = {
    BAD_S(stw_nbytes, FC_ERR_DATA_LENGTH, "safetensors_write"),
    BAD_S(stw_block, FC_ERR_DTYPE, "safetensors_write"),
    BAD_S(stw_rank, FC_ERR_RANK, "safetensors_write"),
    BAD_S(stw_dim, FC_ERR_INVALID_SHAPE, "safetensors_write"),
    BAD_S(stw_name_null, FC_ERR_INVALID_ARG, "safetensors_write"),
    BAD_S(stw_name_utf8, FC_ERR_INVALID_ARG, "safetensors_write"),
    BAD_S(stw_path_null, FC_ERR_NULL_ARG, "safetensors_write"),
    BAD_S(stw_n_neg, FC_ERR_INVALID_ARG, "safetensors_write"),
    BAD_S(stw_array_null, FC_ERR_NULL_ARG, "safetensors_write"),
    BAD_S(stw_dup, FC_ERR_INVALID_ARG, "safetensors_write"),
    BAD_S(stw_reserved, FC_ERR_INVALID_ARG, "safetensors_write"),
    BAD_S(stw_meta_null, FC_ERR_NULL_ARG, "safetensors_write"),
    BAD_S(stw_meta_utf8, FC_ERR_INVALID_ARG, "safetensors_write"),
    BAD_S(stw_no_dir, FC_ERR_IO, "safetensors_write"),
    BAD_S(gw_align, FC_ERR_INVALID_ARG, "gguf_write"),
    BAD_S(gw_type, FC_ERR_INVALID_ARG, "gguf_write"),
    BAD_S(gw_key_null, FC_ERR_INVALID_ARG, "gguf_write"),
    BAD_S(gw_array_type, FC_ERR_INVALID_ARG, "gguf_write"),
    BAD_S(gw_path_null, FC_ERR_NULL_ARG, "gguf_write"),
    BAD_S(gw_n_neg, FC_ERR_INVALID_ARG, "gguf_write"),
    BAD_S(gw_bool, FC_ERR_DTYPE, "gguf_write"),
    BAD_S(gw_rank, FC_ERR_RANK, "gguf_write"),
    BAD_S(gw_long_name, FC_ERR_INVALID_ARG, "gguf_write"),
};

/* ---- tensor-level load and save
 * ------------------------------------------------------------------------ */

static fc_io_tensor info_out;
static const char *meta_k, *meta_v;
static fc_tensor *load_missing(fx *f) { return fc_safetensors_load(f->ctx, st_ref, "missing", 0); }
static fc_tensor *load_file_null(fx *f) { return fc_safetensors_load(f->ctx, NULL, "f32", 0); }
static fc_tensor *load_name_null(fx *f) { return fc_safetensors_load(f->ctx, st_ref, NULL, 0); }
static fc_tensor *gguf_load_null(fx *f) { return fc_gguf_load(f->ctx, NULL, "x", FC_IO_COPY); }
static fc_status info_range(fx *f) {
    (void)f;
    return fc_safetensors_tensor_info(st_ref, 999, &info_out);
}
static fc_status info_neg(fx *f) {
    (void)f;
    return fc_safetensors_tensor_info(st_ref, -1, &info_out);
}
static fc_status info_null(fx *f) {
    (void)f;
    return fc_safetensors_tensor_info(st_ref, 0, NULL);
}
static fc_status meta_range(fx *f) {
    (void)f;
    return fc_safetensors_meta_at(st_ref, 999, &meta_k, &meta_v);
}
static const char *one_name[1] = {"a"};
static fc_status save_n_neg(fx *f) {
    return fc_safetensors_save(f->ctx, never, one_name, &f->f_23, -1, NULL, NULL, 0);
}
static fc_status save_names_null(fx *f) {
    return fc_safetensors_save(f->ctx, never, NULL, &f->f_23, 1, NULL, NULL, 0);
}
static fc_status save_tensor_null(fx *f) {
    return fc_safetensors_save(f->ctx, never, one_name, (fc_tensor *[]){NULL}, 1, NULL, NULL, 0);
}
static fc_status save_block(fx *f) {
    return fc_safetensors_save(f->ctx, never, one_name, &f->q_232, 1, NULL, NULL, 0);
}
static fc_status save_dup(fx *f) {
    return fc_safetensors_save(f->ctx, never, (const char *[]){"a", "a"},
                               (fc_tensor *[]){f->f_23, f->f_3}, 2, NULL, NULL, 0);
}
static fc_status save_path_null(fx *f) {
    return fc_safetensors_save(f->ctx, NULL, one_name, &f->f_23, 1, NULL, NULL, 0);
}
static fc_status save_no_dir(fx *f) {
    return fc_safetensors_save(f->ctx, "/nonexistent/dir/x.st", one_name, &f->f_23, 1, NULL, NULL,
                               0);
}
static fc_status gguf_save_bool(fx *f) {
    return fc_gguf_save(f->ctx, never, NULL, 0, one_name, &f->b_23, 1);
}
static fc_status gguf_save_n_neg(fx *f) {
    return fc_gguf_save(f->ctx, never, NULL, 0, one_name, &f->f_23, -1);
}

static const bad_case tensor_io_cases[] = {
    BAD_T(load_missing, FC_ERR_INDEX, "fc_safetensors_load"),
    BAD_T(load_file_null, FC_ERR_NULL_ARG, "fc_safetensors_load"),
    BAD_T(load_name_null, FC_ERR_NULL_ARG, "fc_safetensors_load"),
    BAD_T(gguf_load_null, FC_ERR_NULL_ARG, "fc_gguf_load"),
    BAD_S(info_range, FC_ERR_INDEX, NULL),
    BAD_S(info_neg, FC_ERR_INDEX, NULL),
    BAD_S(info_null, FC_ERR_NULL_ARG, NULL),
    BAD_S(meta_range, FC_ERR_INDEX, NULL),
    BAD_S(save_n_neg, FC_ERR_INVALID_ARG, "fc_safetensors_save"),
    BAD_S(save_names_null, FC_ERR_NULL_ARG, "fc_safetensors_save"),
    BAD_S(save_tensor_null, FC_ERR_NULL_ARG, "fc_safetensors_save"),
    BAD_S(save_block, FC_ERR_DTYPE, "fc_safetensors_save"),
    BAD_S(save_dup, FC_ERR_INVALID_ARG, "fc_safetensors_save"),
    BAD_S(save_path_null, FC_ERR_NULL_ARG, "fc_safetensors_save"),
    BAD_S(save_no_dir, FC_ERR_IO, "fc_safetensors_save"),
    BAD_S(gguf_save_bool, FC_ERR_DTYPE, "fc_gguf_save"),
    BAD_S(gguf_save_n_neg, FC_ERR_INVALID_ARG, "fc_gguf_save"),
};

/* ---- checkpoints
 * --------------------------------------------------------------------------------------- */

static const char *w_name[1] = {"w"};
static fc_status cs_reserved(fx *f) {
    return fc_checkpoint_save(f->ctx, never, w_name, &f->p_23, 1, NULL, (const char *[]){"rng.x"},
                              (const char *[]){"1"}, 1);
}
static fc_status cs_name_empty(fx *f) {
    return fc_checkpoint_save(f->ctx, never, (const char *[]){""}, &f->p_23, 1, NULL, NULL, NULL,
                              0);
}
static fc_status cs_name_dup(fx *f) {
    return fc_checkpoint_save(f->ctx, never, (const char *[]){"w", "w"},
                              (fc_tensor *[]){f->p_23, f->f_3}, 2, NULL, NULL, NULL, 0);
}
static fc_status cs_block(fx *f) {
    return fc_checkpoint_save(f->ctx, never, w_name, &f->q_232, 1, NULL, NULL, NULL, 0);
}
static fc_status cs_n_neg(fx *f) {
    return fc_checkpoint_save(f->ctx, never, w_name, &f->p_23, -1, NULL, NULL, NULL, 0);
}
static fc_status cs_path_null(fx *f) {
    return fc_checkpoint_save(f->ctx, NULL, w_name, &f->p_23, 1, NULL, NULL, NULL, 0);
}
static fc_status cs_param_null(fx *f) {
    return fc_checkpoint_save(f->ctx, never, w_name, (fc_tensor *[]){NULL}, 1, NULL, NULL, NULL, 0);
}
static fc_status cl_not_checkpoint(fx *f) {
    return fc_checkpoint_load(f->ctx, ST_REF, w_name, &f->p_23, 1, NULL);
}
static fc_status cl_missing_file(fx *f) {
    return fc_checkpoint_load(f->ctx, "/nonexistent/ck", w_name, &f->p_23, 1, NULL);
}
static fc_status cl_missing_name(fx *f) {
    return fc_checkpoint_load(f->ctx, ckpt, (const char *[]){"zz"}, &f->p_23, 1, NULL);
}
static fc_status cl_shape(fx *f) {
    return fc_checkpoint_load(f->ctx, ckpt, w_name, &f->f_32, 1, NULL);
}
static fc_status cl_dtype(fx *f) {
    return fc_checkpoint_load(f->ctx, ckpt, w_name, &f->h_23, 1, NULL);
}
static fc_status cl_read_only(fx *f) {
    return fc_checkpoint_load(f->ctx, ckpt, w_name, &f->ro_23, 1, NULL);
}
static fc_status cl_strided(fx *f) {
    fc_tensor *t = fc_transpose(f->ctx, f->f_32, 0, 1); /* [2, 3], not contiguous */
    fc_status st = fc_checkpoint_load(f->ctx, ckpt, w_name, &t, 1, NULL);
    fc_release(t);
    return st;
}
/* "w" loads, then "zz" is missing: nothing may have been written */
static fc_status cl_partial(fx *f) {
    return fc_checkpoint_load(f->ctx, ckpt, (const char *[]){"w", "zz"},
                              (fc_tensor *[]){f->p_23, f->f_3}, 2, NULL);
}
static fc_status cl_optim_kind(fx *f) {
    fc_optim *o = fc_optim_new(f->ctx, &(fc_optim_opts){.kind = FC_OPTIM_SGD, .lr = 0.1}, &ck_w, 1);
    fc_status st = o ? fc_checkpoint_load(f->ctx, ckpt, w_name, &f->p_23, 1, o) : FC_ERR_STATE;
    fc_optim_free(o);
    return st;
}

static const bad_case checkpoint_cases[] = {
    BAD_S(cs_reserved, FC_ERR_INVALID_ARG, "fc_checkpoint_save"),
    BAD_S(cs_name_empty, FC_ERR_INVALID_ARG, "fc_checkpoint_save"),
    BAD_S(cs_name_dup, FC_ERR_INVALID_ARG, "fc_checkpoint_save"),
    BAD_S(cs_block, FC_ERR_DTYPE, "fc_checkpoint_save"),
    BAD_S(cs_n_neg, FC_ERR_INVALID_ARG, "fc_checkpoint_save"),
    BAD_S(cs_path_null, FC_ERR_NULL_ARG, "fc_checkpoint_save"),
    BAD_S(cs_param_null, FC_ERR_NULL_ARG, "fc_checkpoint_save"),
    BAD_S(cl_not_checkpoint, FC_ERR_FORMAT, "fc_checkpoint_load"),
    BAD_S(cl_missing_file, FC_ERR_IO, "fc_checkpoint_load"),
    BAD_S(cl_missing_name, FC_ERR_INDEX, "fc_checkpoint_load"),
    BAD_S(cl_shape, FC_ERR_SHAPE_MISMATCH, "fc_checkpoint_load"),
    BAD_S(cl_dtype, FC_ERR_DTYPE, "fc_checkpoint_load"),
    BAD_S(cl_read_only, FC_ERR_READ_ONLY, "fc_checkpoint_load"),
    BAD_S(cl_strided, FC_ERR_UNSUPPORTED_VIEW, "fc_checkpoint_load"),
    BAD_S(cl_partial, FC_ERR_INDEX, "fc_checkpoint_load"),
    BAD_S(cl_optim_kind, FC_ERR_FORMAT, "fc_checkpoint_load"),
};

/* ---- byte-level quantizers (no message channel)
 * ------------------------------------------------------------ */

static float qsrc[64];
static uint8_t qdst[512];
static int8_t qcodes[64];
static float qscales[8];
static fc_status q_src_null(fx *f) {
    (void)f;
    return fc_quantize(FC_Q8_0, NULL, qdst, 1, 32);
}
static fc_status q_dst_null(fx *f) {
    (void)f;
    return fc_quantize(FC_Q8_0, qsrc, NULL, 1, 32);
}
static fc_status q_scalar(fx *f) {
    (void)f;
    return fc_quantize(FC_F32, qsrc, qdst, 1, 32);
}
static fc_status q_cols(fx *f) {
    (void)f;
    return fc_quantize(FC_Q8_0, qsrc, qdst, 1, 31);
}
static fc_status q_rows(fx *f) {
    (void)f;
    return fc_quantize(FC_Q8_0, qsrc, qdst, 0, 32);
}
static fc_status q_rows_neg(fx *f) {
    (void)f;
    return fc_quantize(FC_Q8_0, qsrc, qdst, -1, 32);
}
static fc_status q_overflow(fx *f) {
    (void)f;
    return fc_quantize(FC_Q8_0, qsrc, qdst, INT64_MAX, 32);
}
static fc_status q_needs_imatrix(fx *f) {
    (void)f;
    return fc_quantize(FC_IQ2_XXS, qsrc, qdst, 1, 256);
}
static fc_status q_nan(fx *f) {
    (void)f;
    qsrc[3] = NAN;
    fc_status st = fc_quantize(FC_Q8_0, qsrc, qdst, 1, 32);
    qsrc[3] = 0;
    return st;
}
static fc_status q_flags(fx *f) {
    (void)f;
    return fc_quantize_ex(FC_Q8_0, qsrc, qdst, 1, 32, NULL, 8);
}
static fc_status q_flag_dtype(fx *f) {
    (void)f;
    return fc_quantize_ex(FC_Q8_0, qsrc, qdst, 1, 32, NULL, FC_QUANT_IQ4NL_REF);
}
static fc_status q_imatrix_neg(fx *f) {
    (void)f;
    float im[32] = {-1};
    return fc_quantize_ex(FC_Q4_0, qsrc, qdst, 1, 32, im, 0);
}
static fc_status dq_src_null(fx *f) {
    (void)f;
    return fc_dequantize(FC_Q8_0, NULL, qsrc, 1, 32);
}
static fc_status dq_dtype(fx *f) {
    (void)f;
    return fc_dequantize((fc_dtype)99, qdst, qsrc, 1, 32);
}
static fc_status bq_kind(fx *f) {
    (void)f;
    return fc_blockq_quantize((fc_blockq_kind)5, qsrc, 8, 4, qcodes, qscales);
}
static fc_status bq_n_zero(fx *f) {
    (void)f;
    return fc_blockq_quantize(FC_BLOCKQ_INT8, qsrc, 0, 4, qcodes, qscales);
}
static fc_status bq_block_zero(fx *f) {
    (void)f;
    return fc_blockq_quantize(FC_BLOCKQ_NF4, qsrc, 8, 0, qcodes, qscales);
}
static fc_status bq_null(fx *f) {
    (void)f;
    return fc_blockq_quantize(FC_BLOCKQ_INT4, NULL, 8, 4, qcodes, qscales);
}
static fc_status bdq_code(fx *f) {
    (void)f;
    const int8_t codes[8] = {9};
    return fc_blockq_dequantize(FC_BLOCKQ_INT4, codes, (const float[]){1, 1}, 8, 4, qsrc);
}
static fc_status bdq_scale(fx *f) {
    (void)f;
    return fc_blockq_dequantize(FC_BLOCKQ_INT8, qcodes, (const float[]){-1, 1}, 8, 4, qsrc);
}
static fc_status pack_code(fx *f) {
    (void)f;
    return fc_pack_int4((const int8_t[]){8, 0}, 2, qdst);
}
static fc_status pack_null(fx *f) {
    (void)f;
    return fc_pack_int4(NULL, 2, qdst);
}
static fc_status unpack_null(fx *f) {
    (void)f;
    return fc_unpack_int4(NULL, 2, qcodes);
}

static const bad_case quant_cases[] = {
    BAD_S(q_src_null, FC_ERR_NULL_ARG, NULL),
    BAD_S(q_dst_null, FC_ERR_NULL_ARG, NULL),
    BAD_S(q_scalar, FC_ERR_DTYPE, NULL),
    BAD_S(q_cols, FC_ERR_INVALID_SHAPE, NULL),
    BAD_S(q_rows, FC_ERR_INVALID_SHAPE, NULL),
    BAD_S(q_rows_neg, FC_ERR_INVALID_SHAPE, NULL),
    BAD_S(q_overflow, FC_ERR_OVERFLOW, NULL),
    BAD_S(q_needs_imatrix, FC_ERR_INVALID_ARG, NULL),
    BAD_S(q_nan, FC_ERR_NON_FINITE, NULL),
    BAD_S(q_flags, FC_ERR_INVALID_ARG, NULL),
    BAD_S(q_flag_dtype, FC_ERR_INVALID_ARG, NULL),
    BAD_S(q_imatrix_neg, FC_ERR_INVALID_ARG, NULL),
    BAD_S(dq_src_null, FC_ERR_NULL_ARG, NULL),
    BAD_S(dq_dtype, FC_ERR_DTYPE, NULL),
    BAD_S(bq_kind, FC_ERR_INVALID_ARG, NULL),
    BAD_S(bq_n_zero, FC_ERR_INVALID_SHAPE, NULL),
    BAD_S(bq_block_zero, FC_ERR_INVALID_SHAPE, NULL),
    BAD_S(bq_null, FC_ERR_NULL_ARG, NULL),
    BAD_S(bdq_code, FC_ERR_INVALID_ARG, NULL),
    BAD_S(bdq_scale, FC_ERR_INVALID_ARG, NULL),
    BAD_S(pack_code, FC_ERR_INVALID_ARG, NULL),
    BAD_S(pack_null, FC_ERR_NULL_ARG, NULL),
    BAD_S(unpack_null, FC_ERR_NULL_ARG, NULL),
};

/* ---- driver
 * ---------------------------------------------------------------------------------------------- */

static void run_table(void **state, const bad_case *cases, size_t n) {
    assert_int_equal(bad_run(*state, cases, n, NULL), 0);
}

static void test_bad_input_io_open(void **state) {
    run_table(state, open_cases, sizeof open_cases / sizeof open_cases[0]);
}

static void test_bad_input_io_write(void **state) {
    run_table(state, write_cases, sizeof write_cases / sizeof write_cases[0]);
    assert_int_equal(access(never, F_OK), -1); /* no failing writer left the file */
}

static void test_bad_input_io_tensors(void **state) {
    run_table(state, tensor_io_cases, sizeof tensor_io_cases / sizeof tensor_io_cases[0]);
    assert_int_equal(access(never, F_OK), -1);
}

static void test_bad_input_io_checkpoint(void **state) {
    run_table(state, checkpoint_cases, sizeof checkpoint_cases / sizeof checkpoint_cases[0]);
    assert_int_equal(access(never, F_OK), -1);
}

static void test_bad_input_io_quantizers(void **state) {
    run_table(state, quant_cases, sizeof quant_cases / sizeof quant_cases[0]);
}

static int setup(void **state) {
    fx *f = fx_new();
    *state = f;
    snprintf(never, sizeof never, "%s/bad-input-%d-never.safetensors", FUCINA_BINARY_DIR,
             (int)getpid());
    snprintf(ckpt, sizeof ckpt, "%s/bad-input-%d-ckpt.safetensors", FUCINA_BINARY_DIR,
             (int)getpid());
    snprintf(empty, sizeof empty, "%s/bad-input-%d-empty.bin", FUCINA_BINARY_DIR, (int)getpid());
    FILE *ef = fopen(empty, "wb");
    if (!ef || fclose(ef) != 0) return -1;
    /* a checkpoint of one f32 [2, 3] parameter "w" with Adam state */
    ck_w = fc_param_zeros(f->ctx, FC_F32, (const int64_t[]){2, 3}, 2);
    fc_optim *o =
        fc_optim_new(f->ctx, &(fc_optim_opts){.kind = FC_OPTIM_ADAM, .lr = 0.1}, &ck_w, 1);
    if (!o || fc_checkpoint_save(f->ctx, ckpt, w_name, &ck_w, 1, o, NULL, NULL, 0) != FC_OK)
        return -1;
    fc_optim_free(o);
    if (fc_safetensors_open(ST_REF, NULL, &st_ref) != FC_OK) return -1;
    return fc_ctx_status(f->ctx) == FC_OK ? 0 : -1;
}

static int teardown(void **state) {
    fc_safetensors_close(st_ref);
    fc_release(ck_w);
    unlink(ckpt);
    unlink(empty);
    unlink(never);
    fx_free(*state);
    return 0;
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bad_input_io_open),
        cmocka_unit_test(test_bad_input_io_write),
        cmocka_unit_test(test_bad_input_io_tensors),
        cmocka_unit_test(test_bad_input_io_checkpoint),
        cmocka_unit_test(test_bad_input_io_quantizers),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
