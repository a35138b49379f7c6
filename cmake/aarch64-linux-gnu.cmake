# Cross-compiling ork for 64-bit ARM (Cortex-A76/A55 class) on Debian:
# g++-aarch64-linux-gnu with the arm64 libraries installed through multiarch
# (scripts/install-deps.sh --arm64); tests run under qemu-aarch64.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)
set(CMAKE_FIND_ROOT_PATH /usr/aarch64-linux-gnu /usr/lib/aarch64-linux-gnu)
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE BOTH)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE BOTH)
set(CMAKE_LIBRARY_ARCHITECTURE aarch64-linux-gnu)
set(ENV{PKG_CONFIG_LIBDIR} "/usr/lib/aarch64-linux-gnu/pkgconfig:/usr/share/pkgconfig")
# Tests run as on a Cortex-A76 (RK3588's big core: NEON and the dot
# product, so both NEON kernel paths are tested); tests/CMakeLists.txt runs
# the kernels once more as on a Cortex-A53 (no dot product).
set(CMAKE_CROSSCOMPILING_EMULATOR qemu-aarch64 -cpu cortex-a76 -L /usr/aarch64-linux-gnu)
