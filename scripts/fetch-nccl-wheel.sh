#!/usr/bin/env bash
# Fetch the real libnccl.so.2 of an nvidia-nccl wheel from PyPI into target/nccl-wheel, for
# the test that loads it without a GPU (tests/it/gpu_backend.rs): ncclGetVersion, and every
# entry point ringlab resolves. Only the library and the version are kept. Never fails the
# caller: without network the test says it was skipped.
#
# Pinned to NCCL 2.28.9, the release the emulation, the stand-ins and the FFI review target, in
# the cu12 wheel (nvidia-nccl-cu13 on PyPI has 2.28.9 too, from 2.27.7 on: the release torch
# 2.11.0 pins; the library's C API is the same, so either serves this test).
#
#   scripts/fetch-nccl-wheel.sh [REQUIREMENT]     (default nvidia-nccl-cu12==2.28.9)
set -uo pipefail
cd "$(dirname "$0")/.."
PKG="${1:-nvidia-nccl-cu12==2.28.9}"
WANT="${PKG##*==}"
[ "$WANT" = "$PKG" ] && WANT=""
DEST=target/nccl-wheel
if [ -s "$DEST/nvidia/nccl/lib/libnccl.so.2" ] && [ -s "$DEST/VERSION" ] &&
   { [ -z "$WANT" ] || [ "$(cat "$DEST/VERSION")" = "$WANT" ]; }; then
  echo "nccl wheel: have $(cat "$DEST/VERSION") in $DEST"
  exit 0
fi
rm -rf "$DEST"
PY=$(command -v python3 || true)
if [ -z "$PY" ]; then
  echo "nccl wheel: no python3 to fetch it with; the wheel test will be skipped" >&2
  exit 0
fi
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
if ! timeout 600 "$PY" -m pip download --quiet --no-deps --only-binary=:all: \
    --platform manylinux_2_18_x86_64 --platform manylinux_2_27_x86_64 --python-version 3.11 -d "$TMP" "$PKG" >&2; then
  echo "nccl wheel: could not download $PKG; the wheel test will be skipped" >&2
  exit 0
fi
mkdir -p "$DEST"
"$PY" - "$TMP" "$DEST" <<'PY'
import glob, os, sys, zipfile
tmp, dest = sys.argv[1], sys.argv[2]
whl = glob.glob(os.path.join(tmp, "*.whl"))[0]
version = os.path.basename(whl).split("-")[1]
with zipfile.ZipFile(whl) as z:
    z.extract("nvidia/nccl/lib/libnccl.so.2", dest)
with open(os.path.join(dest, "VERSION"), "w") as f:
    f.write(version + "\n")
print(f"nccl wheel: {os.path.basename(whl)} -> {dest}")
PY
