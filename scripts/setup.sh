#!/usr/bin/env bash
# Installs every attnc dependency that is missing (Debian packages as root, Python ones into .venv); idempotent.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

# clang-19 and its compiler-rt (libFuzzer, sanitizer runtimes) build `make fuzz`; gcc builds the rest.
# clang-format-19 checks the style (`make format-check`; versions format differently, so it is pinned).
apt_pkgs=(llvm-19-dev libmlir-19-dev mlir-19-tools llvm-19-tools libgtest-dev ninja-build ccache
          g++ python3-venv zlib1g-dev libzstd-dev libedit-dev libcurl4-openssl-dev libxml2-dev
          clang-19 libclang-rt-19-dev clang-format-19)
missing=()
for p in "${apt_pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# python3-venv is only needed when the interpreter lacks ensurepip (Debian's python3 does; pyenv's does not).
if [ ${#missing[@]} -gt 0 ] && [ "${missing[*]}" = "python3-venv" ] && python3 -c 'import ensurepip' 2>/dev/null; then
  missing=()
fi
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing Debian packages: ${missing[*]}"
  sudo_cmd=()
  if [ "$(id -u)" != 0 ]; then
    command -v sudo >/dev/null || { echo "setup: error: need root (or sudo) to install ${missing[*]}" >&2; exit 1; }
    sudo_cmd=(sudo)
  fi
  export DEBIAN_FRONTEND=noninteractive
  "${sudo_cmd[@]}" apt-get update -qq
  "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

req=scripts/requirements.txt
stamp=.venv/.attnc-requirements
if [ ! -f "$stamp" ] || ! cmp -s "$req" "$stamp"; then
  echo "setup: creating .venv from $req"
  [ -x .venv/bin/python ] || python3 -m venv .venv
  .venv/bin/python -m pip install -q --disable-pip-version-check -r "$req"
  cp "$req" "$stamp"
fi

# PyTorch (the PyTorch entry and its tests), then the attnc package itself in editable mode: its
# Python files are used from python/attnc, and it finds the build through build/attnc-python.json.
# `compat` puts python/ on sys.path (a .pth file): with setuptools' default import hook, a build
# directory's attnc/ folder (kernels) in the working directory became a namespace package that
# hid the real one.
req=scripts/requirements-torch.txt
stamp=.venv/.attnc-requirements-torch
if [ ! -f "$stamp" ] || ! cmp -s "$req" "$stamp"; then
  echo "setup: installing $req into .venv (about 5 GB)"
  .venv/bin/python -m pip install -q --disable-pip-version-check -r "$req"
  cp "$req" "$stamp"
fi
if ! (cd / && "$root/.venv/bin/python" -c 'import sys; sys.path.index(sys.argv[1]); import attnc; attnc.config' \
        "$root/python" 2>/dev/null); then
  echo "setup: installing the attnc Python package (editable) into .venv"
  .venv/bin/python -m pip install -q --disable-pip-version-check --no-build-isolation --no-deps \
    --config-settings editable_mode=compat -e python
fi
echo "setup: ok"
