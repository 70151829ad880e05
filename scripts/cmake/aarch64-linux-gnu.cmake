# Cross-compiling Ember for 64-bit Arm Linux (aarch64) on an x86-64 Debian machine: the `arm64`
# preset (CMakePresets.json). scripts/setup installs what it needs: the cross compiler
# (g++-aarch64-linux-gnu), qemu-user, and the arm64 builds of the libraries Ember links
# (libhwy-dev:arm64, libspdlog-dev:arm64, ... through `dpkg --add-architecture arm64`).
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)
# find_package and find_library look in /usr/lib/aarch64-linux-gnu (and its cmake/ folders),
# where Debian's multiarch puts the arm64 libraries, not in the x86-64 ones.
set(CMAKE_LIBRARY_ARCHITECTURE aarch64-linux-gnu)
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
# pkg-config (which FindOpenSSL asks first) reads the arm64 .pc files, not the build machine's.
set(ENV{PKG_CONFIG_LIBDIR} /usr/lib/aarch64-linux-gnu/pkgconfig:/usr/share/pkgconfig)
# ctest, and the test discovery at build time, run the arm64 programs under qemu's user-mode
# emulation. They load the arm64 libraries of multiarch (/lib/ld-linux-aarch64.so.1, libc6:arm64,
# libgomp1:arm64, ...), not the cross toolchain's copies: with `-L /usr/aarch64-linux-gnu` (its
# glibc, libc6-arm64-cross 2.36-8cross1) a program that starts a thread hung under qemu 7.2,
# while multiarch's libc6:arm64 2.36-9+deb12u14 runs it.
set(CMAKE_CROSSCOMPILING_EMULATOR qemu-aarch64)
