#!/usr/bin/env bash
# Builds and runs `annal-bench peers` (arguments passed on, e.g. --smoke). The peer client crates
# compile UmaDB's gRPC definitions with protoc, so a fresh machine gets Debian's protobuf-compiler
# first (install.sh protoc); without it the `peers` feature does not build.
set -euo pipefail
cd "$(dirname "$0")/../.."  # the repository root
bash bench/peers/install.sh protoc
exec cargo run --release -p annal-bench --features peers -- peers "$@"
