# SPDX-License-Identifier: MIT
# Checks the examples' command lines as a new user meets them: --help on
# stdout with exit 0 and the program's name once; a bad value exits 2 with
# a message naming the option, the range it accepts and the value given;
# an unknown dtype names itself and the valid ones; train_llama refuses an
# export its sizes cannot give in the dtype asked (unless told to fall back).
# Run as: cmake -DBIN=<dir of the example programs> -DMODEL=<a GGUF Llama>
#               [-DEMULATOR="<command line>"] -DDIR=<scratch dir> -P args_test.cmake
separate_arguments(emu UNIX_COMMAND "${EMULATOR}")
set(failed 0)

# run(<name> <want rc> <stream: out|err> <regex> <program> args...)
function(run name want stream regex prog)
  execute_process(COMMAND ${emu} ${BIN}/${prog} ${ARGN} OUTPUT_VARIABLE o ERROR_VARIABLE e
                  RESULT_VARIABLE rc)
  if(stream STREQUAL "out")
    set(text "${o}")
  else()
    set(text "${e}")
  endif()
  if(NOT rc EQUAL want OR NOT text MATCHES "${regex}")
    message(SEND_ERROR "${name}: ${prog} ${ARGN}: want exit ${want} and std${stream} "
                       "matching [${regex}], got exit ${rc}\nstdout:\n${o}\nstderr:\n${e}")
  else()
    message(STATUS "ok: ${name}")
  endif()
endfunction()

# --help: usage on stdout, the program's name once on its line
foreach(prog generate hvp train_wgan_gp train_gpt train_llama finetune_llama train_cnn train_mlp
        llama_convert)
  execute_process(COMMAND ${emu} ${BIN}/${prog} --help OUTPUT_VARIABLE o ERROR_VARIABLE e
                  RESULT_VARIABLE rc)
  string(REGEX MATCH "^usage: [^\n]*" line "${o}")
  string(REGEX MATCHALL "${prog}" names "${line}")
  list(LENGTH names n)
  if(NOT rc EQUAL 0 OR NOT n EQUAL 1)
    message(SEND_ERROR "${prog} --help: want exit 0 and the name once on a usage line on "
                       "stdout, got exit ${rc}, usage line [${line}]\nstderr:\n${e}")
  else()
    message(STATUS "ok: ${prog} --help")
  endif()
endforeach()

# values out of range, each naming the option, the range and the value
run(top_p 2 err "--top-p must be in \\(0, 1\\], got 2" generate ${MODEL} --text a --top-p 2)
run(top_p_zero 2 err "--top-p must be in \\(0, 1\\], got 0" generate ${MODEL} --prompt 1 --top-p 0)
run(temp 2 err "--temp must be >= 0, got -1" generate ${MODEL} --prompt 1 --temp -1)
run(top_k 2 err "--top-k must be >= 0, got -3" generate ${MODEL} --prompt 1 --top-k -3)
run(bad_prompt 2 err "--prompt wants token ids[^\n]*got '1,x'" generate ${MODEL} --prompt 1,x)
run(gpt_heads 2 err "--heads must be >= 1, got 0" train_gpt --heads 0)
run(gpt_divide 2 err "--heads 3 must divide --d-model 128" train_gpt --heads 3)
run(gpt_lr 2 err "--lr must be > 0, got 0" train_gpt --lr 0)
run(llama_kv 2 err "--kv-heads 3 must divide --heads 8" train_llama --kv-heads 3)
run(llama_temperature 2 err "--temperature must be >= 0, got -0.5" train_llama --temperature -0.5)
run(finetune_dropout 2 err "--dropout must be in \\[0, 1\\), got 1" finetune_llama --dropout 1)
run(cnn_batch 2 err "--batch must be >= 1, got 0" train_cnn --batch 0)
run(mlp_hidden 2 err "--hidden must be >= 1, got 0" train_mlp --hidden 0)
run(hvp_n 2 err "--n must be >= 2, got 1" hvp --n 1)
run(wgan_batch 2 err "--batch must be >= 2, got 1" train_wgan_gp --batch 1)

# dtypes: the bad one named, the valid ones listed
run(convert_help 0 out "usage: .*Dtypes:.* q4_k" llama_convert --help)
run(convert_dtype 2 err "unknown dtype 'q9_9'; valid: .*q4_k" llama_convert a.gguf b.gguf q9_9)
run(convert_fallback 2 err "FALLBACK: unknown dtype 'nope'" llama_convert a.gguf b.gguf q8_0 nope)
run(export_dtype 2 err "unknown dtype 'q9_9'; valid: .*q4_k" train_llama --export-dtype f32,q9_9)
run(merge_type 2 err "--merge-type: unknown dtype 'q7'; valid: keep .*q4_k"
    finetune_llama --base x.gguf --merge-type q7)
run(export_fallback 2 err "--export-fallback: unknown dtype 'x'" train_llama --export-fallback x)

# dim 64 has no whole q4_k block (256) in any row: refused before training,
# naming a weight and the way out; with --export-fallback f16 it trains
# and says that every weight fell back
set(tiny --layers 1 --heads 2 --kv-heads 1 --ff 64 --block 8 --batch 2 --steps 1 --warmup 0
    --eval-every 1 --sample-len 0 --minutes 0 --threads 1 --out ${DIR}/q4k)
file(REMOVE_RECURSE ${DIR}/q4k)
run(q4k_refused 2 err "--export-dtype q4_k cannot be written: [^\n]*rows of 64[^\n]*--export-fallback"
    train_llama --dim 64 --export-dtype q4_k ${tiny})
if(EXISTS ${DIR}/q4k/model-q4_k.gguf)
  message(SEND_ERROR "q4k_refused: model-q4_k.gguf was written")
endif()
run(q4k_fallback 0 out "note: 9 of the 9 2-D weights will be exported in f16, not q4_k"
    train_llama --dim 64 --export-dtype q4_k --export-fallback f16 ${tiny})
