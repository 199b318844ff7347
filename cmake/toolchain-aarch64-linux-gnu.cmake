# SPDX-License-Identifier: MIT
# Cross build for aarch64 Linux on a Debian x86-64 host: Debian's
# gcc-aarch64-linux-gnu, the target's libraries from dpkg multiarch
# (libcmocka-dev:arm64 and friends, in /usr/lib/aarch64-linux-gnu) and
# qemu-user to run what was built. scripts/test_aarch64.sh installs all of it.
#   cmake -S . -B build-aarch64 -DCMAKE_TOOLCHAIN_FILE=cmake/toolchain-aarch64-linux-gnu.cmake
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)

set(FUCINA_CROSS_TRIPLE aarch64-linux-gnu)
set(CMAKE_C_COMPILER ${FUCINA_CROSS_TRIPLE}-gcc)

# Two places hold target files: the cross libc (libc6-dev-arm64-cross) under
# /usr/aarch64-linux-gnu, and the :arm64 packages in the multiarch
# directories of the host's own /usr. The latter cannot be a find root (that
# would be the host's /), so the multiarch triple names them instead: CMake
# then searches /usr/lib/aarch64-linux-gnu and /usr/include/aarch64-linux-gnu
# before the plain /usr/lib and /usr/include, and never the host's
# x86_64-linux-gnu directories. Libraries, headers and packages are therefore
# looked up both under the root and in the host prefixes; programs only on
# the host (they run here, not on the target).
set(CMAKE_FIND_ROOT_PATH /usr/${FUCINA_CROSS_TRIPLE})
set(CMAKE_LIBRARY_ARCHITECTURE ${FUCINA_CROSS_TRIPLE})
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY BOTH)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE BOTH)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE BOTH)

# add_test(COMMAND <target>) and try_run then run the target's programs
# through qemu-user, so ctest works without binfmt_misc.
# qemu's -L prefix decides which dynamic loader those programs get. The
# :arm64 packages bring Debian's libc6:arm64 (/lib/aarch64-linux-gnu), and
# the loader finds that libc.so.6 first whatever the prefix (it is on the
# loader's default path). Under -L /usr/aarch64-linux-gnu the loader itself
# would be the cross toolchain's (libc6-arm64-cross), a different glibc
# build, and the pair does not work together: with 2.36-8cross1 against
# 2.36-9+deb12u14 the first pthread_create spins forever. So where
# libc6:arm64 is installed its own loader runs ("-L /": no path rewriting);
# the cross root serves only a machine without it.
find_program(FUCINA_QEMU_AARCH64 qemu-aarch64)
if(EXISTS /lib/ld-linux-aarch64.so.1)
  set(FUCINA_QEMU_PREFIX /)
else()
  set(FUCINA_QEMU_PREFIX /usr/${FUCINA_CROSS_TRIPLE})
endif()
if(FUCINA_QEMU_AARCH64)
  set(CMAKE_CROSSCOMPILING_EMULATOR ${FUCINA_QEMU_AARCH64} -L ${FUCINA_QEMU_PREFIX})
endif()
