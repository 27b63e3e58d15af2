#!/usr/bin/env bash
# check_package.sh: installs attnc into a fresh prefix and builds and runs examples/ against it.
# Usage: check_package.sh BUILD_DIR SOURCE_DIR CMAKE — the ctest package_example runs it, so the
# CMake package (find_package(attnc), attnc_add_library) is checked the way a user consumes it.
set -euo pipefail
build=$1 src=$2 cmake=$3
tmp=$(mktemp -d "${TMPDIR:-/tmp}/attnc-package.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
"$cmake" --install "$build" --prefix "$tmp/prefix" > "$tmp/install.log"
# The example must not see the source tree: copy it, as a user's project would be elsewhere.
cp -r "$src/examples" "$tmp/example"
generator=()
command -v ninja > /dev/null && generator=(-G Ninja)
"$cmake" -S "$tmp/example" -B "$tmp/build" "${generator[@]}" -DCMAKE_PREFIX_PATH="$tmp/prefix" > "$tmp/configure.log"
"$cmake" --build "$tmp/build" > "$tmp/build.log"
"$tmp/build/softcap_demo"
