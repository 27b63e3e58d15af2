#!/usr/bin/env bash
# check_package.sh: installs attnc into a fresh prefix and builds and runs examples/ against it.
# Usage: check_package.sh BUILD_DIR SOURCE_DIR CMAKE [PYTHON] — the ctest package_example runs it, so the
# CMake package (find_package(attnc), attnc_add_library) is checked the way a user consumes it.
set -euo pipefail
build=$1 src=$2 cmake=$3 python=${4:-}
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
# An attnc built with PyTorch also gave the example an operator module: load it and call it.
module="$tmp/build/attnc/softcap_attention/softcap_attention_torch.so"
if [ -f "$build/attnc-python.json" ]; then
  [ -f "$module" ] || { echo "check_package: attnc was built with PyTorch, but the example has no $module" >&2; exit 1; }
  "$python" - "$module" <<'PY'
import sys, torch
torch.ops.load_library(sys.argv[1])
q = torch.randn(1, 2, 5, 8)
o = torch.ops.attnc.softcap_attention(q, q, q)
assert o.shape == q.shape and torch.isfinite(o).all(), o
print("softcap_attention as torch.ops.attnc.softcap_attention: ok")
PY
  # attnc.compile from the installed tree alone (its share/attnc/attnc-python.json).
  ATTNC_BUILD_DIR= ATTNC_PREFIX="$tmp/prefix" ATTNC_CACHE_DIR="$tmp/cache" "$python" - "$tmp/example/softcap_attention.attn" "$module" <<'PY'
import sys, torch, attnc
assert attnc.config()["_path"].endswith("share/attnc/attnc-python.json"), attnc.config()["_path"]
k = attnc.compile(sys.argv[1])
attnc.load(sys.argv[2])
q = torch.randn(1, 2, 5, 8)
torch.testing.assert_close(k(q, q, q), torch.ops.attnc.softcap_attention(q, q, q))
print("attnc.compile with the installed attnc: ok")
PY
fi
