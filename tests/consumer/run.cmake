# SPDX-License-Identifier: MIT
# Installs the build tree into WORK/prefix, then configures and builds the
# consumer (and consumer_models, on fucina::models) with
# find_package(fucina CONFIG), runs them, and compiles them once more with
# the flags pkg-config gives for fucina.pc (and fucina-models.pc).
# In a cross build, TOOLCHAIN is the toolchain file the consumer is configured
# with too, and EMULATOR (a space-separated command line, qemu-user say) runs
# the programs it builds.
separate_arguments(emu UNIX_COMMAND "${EMULATOR}")
set(toolchain)
if(TOOLCHAIN)
  set(toolchain -DCMAKE_TOOLCHAIN_FILE=${TOOLCHAIN})
endif()
file(REMOVE_RECURSE ${WORK})
execute_process(COMMAND ${CMAKE_COMMAND} --install ${BIN} --prefix ${WORK}/prefix
                RESULT_VARIABLE rc)
if(rc)
  message(FATAL_ERROR "install failed")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} -S ${SRC} -B ${WORK}/build
                ${toolchain} -DCMAKE_PREFIX_PATH=${WORK}/prefix -DCMAKE_C_COMPILER=${C_COMPILER}
                -DHELLO_SRC=${HELLO}
                RESULT_VARIABLE rc)
if(rc)
  message(FATAL_ERROR "consumer configure failed")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} --build ${WORK}/build RESULT_VARIABLE rc)
if(rc)
  message(FATAL_ERROR "consumer build failed")
endif()
execute_process(COMMAND ${emu} ${WORK}/build/consumer RESULT_VARIABLE rc)
if(rc)
  message(FATAL_ERROR "consumer (find_package) failed: ${rc}")
endif()
execute_process(COMMAND ${emu} ${WORK}/build/consumer_models RESULT_VARIABLE rc)
if(rc)
  message(FATAL_ERROR "consumer_models (find_package) failed: ${rc}")
endif()
execute_process(COMMAND ${emu} ${WORK}/build/hello RESULT_VARIABLE rc)
if(rc)
  message(FATAL_ERROR "README hello (find_package) failed: ${rc}")
endif()
find_program(PKGCONF pkg-config)
if(PKGCONF)
  set(ENV{PKG_CONFIG_PATH} ${WORK}/prefix/lib/pkgconfig:${WORK}/prefix/lib64/pkgconfig)
  execute_process(COMMAND ${PKGCONF} --cflags --libs fucina OUTPUT_VARIABLE flags
                  RESULT_VARIABLE rc OUTPUT_STRIP_TRAILING_WHITESPACE)
  if(rc)
    message(FATAL_ERROR "pkg-config does not know fucina")
  endif()
  separate_arguments(flags UNIX_COMMAND "${flags}")
  execute_process(COMMAND ${C_COMPILER} ${SRC}/main.c ${flags} -o ${WORK}/consumer_pc
                  RESULT_VARIABLE rc)
  if(rc)
    message(FATAL_ERROR "consumer (pkg-config) build failed")
  endif()
  execute_process(COMMAND ${CMAKE_COMMAND} -E env LD_LIBRARY_PATH=${WORK}/prefix/lib
                  ${emu} ${WORK}/consumer_pc RESULT_VARIABLE rc)
  if(rc)
    message(FATAL_ERROR "consumer (pkg-config) failed: ${rc}")
  endif()
  execute_process(COMMAND ${PKGCONF} --cflags --libs fucina-models OUTPUT_VARIABLE mflags
                  RESULT_VARIABLE rc OUTPUT_STRIP_TRAILING_WHITESPACE)
  if(rc)
    message(FATAL_ERROR "pkg-config does not know fucina-models")
  endif()
  separate_arguments(mflags UNIX_COMMAND "${mflags}")
  execute_process(COMMAND ${C_COMPILER} ${SRC}/models.c ${mflags} -o ${WORK}/consumer_models_pc
                  RESULT_VARIABLE rc)
  if(rc)
    message(FATAL_ERROR "consumer_models (pkg-config) build failed")
  endif()
  execute_process(COMMAND ${CMAKE_COMMAND} -E env LD_LIBRARY_PATH=${WORK}/prefix/lib
                  ${emu} ${WORK}/consumer_models_pc RESULT_VARIABLE rc)
  if(rc)
    message(FATAL_ERROR "consumer_models (pkg-config) failed: ${rc}")
  endif()
  # the README's line: cc hello.c $(pkg-config --cflags --libs fucina) -o hello
  execute_process(COMMAND ${C_COMPILER} ${HELLO} ${flags} -o ${WORK}/hello_pc
                  RESULT_VARIABLE rc)
  if(rc)
    message(FATAL_ERROR "README hello (pkg-config) build failed")
  endif()
  execute_process(COMMAND ${CMAKE_COMMAND} -E env LD_LIBRARY_PATH=${WORK}/prefix/lib
                  ${emu} ${WORK}/hello_pc RESULT_VARIABLE rc)
  if(rc)
    message(FATAL_ERROR "README hello (pkg-config) failed: ${rc}")
  endif()
endif()
