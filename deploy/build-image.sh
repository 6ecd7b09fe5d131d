#!/usr/bin/env bash
# Builds Annal's container image (deploy/Containerfile) from a statically linked binary.
#
#   deploy/build-image.sh [--binary FILE] [--engine podman|docker] [TAG]
#
# Without --binary it compiles the binary first:
#   RUSTFLAGS='-C target-feature=+crt-static' \
#     cargo build --release --locked -p annal --bin annal --target x86_64-unknown-linux-gnu
# then assembles a build context under target/image-context/ (the binary and an empty data
# directory) and builds the image with podman, or docker when podman is absent. The image is
# FROM scratch, so the build pulls nothing.
set -euo pipefail

usage() {
  cat <<'EOF'
Usage: deploy/build-image.sh [options] [TAG]

Builds the Annal container image from deploy/Containerfile.

  TAG                 image name and tag (default: localhost/annal:latest)

Options:
  --binary FILE       use this statically linked annal binary instead of running cargo
  --engine NAME       podman or docker (default: podman when installed, otherwise docker)
  --context DIR       where to assemble the build context (default: target/image-context)
  -h, --help          show this help

Environment:
  CARGO               the cargo to run (default: cargo)
  ENGINE_FLAGS        extra flags put before the engine's subcommand, e.g. '--runtime runc'
  BUILD_FLAGS         extra flags for the engine's build subcommand, e.g. '--no-cache'
EOF
}

die() {
  printf 'build-image: %s\n' "$*" >&2
  exit 1
}

repo=$(cd "$(dirname "$0")/.." && pwd)
target=x86_64-unknown-linux-gnu
tag=localhost/annal:latest
binary=
engine=
context=

while [ $# -gt 0 ]; do
  case "$1" in
    -h | --help) usage; exit 0 ;;
    --binary) [ $# -ge 2 ] || die "--binary needs a file"; binary=$2; shift 2 ;;
    --engine) [ $# -ge 2 ] || die "--engine needs podman or docker"; engine=$2; shift 2 ;;
    --context) [ $# -ge 2 ] || die "--context needs a directory"; context=$2; shift 2 ;;
    -*) usage >&2; die "unknown option: $1" ;;
    *) tag=$1; shift ;;
  esac
done
[ -n "$context" ] || context="$repo/target/image-context"

# The engine: podman by default (daemonless, rootless-capable), docker as the fallback.
if [ -z "$engine" ]; then
  if command -v podman >/dev/null 2>&1; then
    engine=podman
  elif command -v docker >/dev/null 2>&1; then
    engine=docker
  else
    die "neither podman nor docker is installed (Debian: apt-get install podman)"
  fi
fi
case "$engine" in
  podman | docker) command -v "$engine" >/dev/null 2>&1 || die "$engine is not installed" ;;
  *) die "--engine must be podman or docker, not '$engine'" ;;
esac

# The binary.
if [ -z "$binary" ]; then
  cargo=${CARGO:-cargo}
  command -v "$cargo" >/dev/null 2>&1 || die "cargo not found (set CARGO, or pass --binary FILE)"
  echo "build-image: compiling annal (release, static glibc, $target)"
  (cd "$repo" && RUSTFLAGS='-C target-feature=+crt-static' \
    "$cargo" build --release --locked -p annal --bin annal --target "$target") \
    || die "cargo build failed"
  binary="$repo/target/$target/release/annal"
fi
[ -f "$binary" ] || die "no binary at $binary"
[ -x "$binary" ] || die "$binary is not executable"

# FROM scratch has no dynamic loader: refuse a binary that needs one.
if command -v readelf >/dev/null 2>&1; then
  if readelf -l "$binary" 2>/dev/null | grep -q 'program interpreter'; then
    die "$binary is dynamically linked (it names a program interpreter); build it with RUSTFLAGS='-C target-feature=+crt-static'"
  fi
else
  echo "build-image: note: readelf not found, not checking that the binary is static" >&2
fi

# The context: only what the image needs, so nothing else of the tree is sent to the engine.
rm -rf "$context"
mkdir -p "$context/data"
cp "$binary" "$context/annal"
# The release profile keeps debug information for profiling; the image does not need it (the
# symbols stay, so a backtrace still names functions).
if command -v strip >/dev/null 2>&1; then
  strip --strip-debug "$context/annal" || die "strip failed on $context/annal"
else
  echo "build-image: note: strip not found, the image keeps the binary's debug information" >&2
fi
chmod 0555 "$context/annal"
chmod 0750 "$context/data"
cp "$repo/deploy/Containerfile" "$context/Containerfile"

version=$(sed -n 's/^version = "\(.*\)"/\1/p' "$repo/Cargo.toml" | head -n 1)
revision=$(git -C "$repo" rev-parse HEAD 2>/dev/null || echo unknown)
created=$(date -u +%Y-%m-%dT%H:%M:%SZ)

# podman writes OCI images by default, which drop HEALTHCHECK: ask for the docker format.
format_flags=()
[ "$engine" = podman ] && format_flags=(--format docker)

# ENGINE_FLAGS and BUILD_FLAGS are split on spaces on purpose.
# shellcheck disable=SC2086
"$engine" ${ENGINE_FLAGS:-} build "${format_flags[@]}" ${BUILD_FLAGS:-} \
  --build-arg "VERSION=${version:-dev}" \
  --build-arg "REVISION=$revision" \
  --build-arg "CREATED=$created" \
  -f "$context/Containerfile" -t "$tag" "$context" \
  || die "$engine build failed"

echo "build-image: built $tag"
echo "build-image: try it: $engine run --rm -p 127.0.0.1:2113:2113 $tag --insecure"
