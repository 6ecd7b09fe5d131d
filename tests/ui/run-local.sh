#!/usr/bin/env bash
# Runs the Admin UI browser tests (tests/ui/browser.mjs) against real nodes started here:
#   single   one node (in memory, projections on)
#   cluster  three nodes: the follower scenario on one follower, then the cluster scenario (the
#            leader is shut down)
#
#   tests/ui/run-local.sh [single|cluster|all]        (default: all)
#
# Environment:
#   UI_NODE_BIN           the node binary (default target/release/annal)
#   UI_SERVE            devserver (default): the UI files come from tests/ui/devserver.mjs in front
#                       of each node; embedded: the nodes serve /web themselves
#   UI_SCREENSHOTS      where the PNGs go (default target/ui-screenshots/<scenario>)
#   UI_PORT_BASE        first of the ports used (default 24100; uses base+1 … base+43)
#   PLAYWRIGHT_CORE     path to the playwright-core package (default
#                       target/ui-tools/node_modules/playwright-core, installed here if missing)
#   CHROMIUM            the browser (default /usr/bin/chromium)
# Needs node (20+), curl, chromium. Exits non-zero when a scenario fails.

set -euo pipefail
cd "$(dirname "$0")/../.."

WHAT=${1:-all}
ANNAL=${UI_NODE_BIN:-target/release/annal}
SERVE=${UI_SERVE:-devserver}
OUT=${UI_SCREENSHOTS:-target/ui-screenshots}
BASE=${UI_PORT_BASE:-24100}
CHROMIUM=${CHROMIUM:-/usr/bin/chromium}
PW=${PLAYWRIGHT_CORE:-target/ui-tools/node_modules/playwright-core}
USER_NAME="admin"
PASSWORD=changeit

[ -x "$ANNAL" ] || { echo "FAIL: no node binary at $ANNAL (cargo build --release)"; exit 1; }
[ -x "$CHROMIUM" ] || { echo "FAIL: no browser at $CHROMIUM (apt-get install -y chromium)"; exit 1; }
if [ ! -d "$PW" ]; then
  echo "installing playwright-core into target/ui-tools (no browser download)"
  npm install --prefix target/ui-tools --no-audit --no-fund playwright-core@1 >/dev/null
  PW=target/ui-tools/node_modules/playwright-core
fi
PLAYWRIGHT_CORE=$(cd "$PW" && pwd)
export PLAYWRIGHT_CORE

WORK=$(mktemp -d "${TMPDIR:-/tmp}/annal-ui.XXXXXX")
LOGS="$OUT/logs"
mkdir -p "$LOGS"
PIDS=()

cleanup() {
  for pid in "${PIDS[@]:-}"; do
    [ -n "$pid" ] && kill "$pid" 2>/dev/null || true
  done
  for pid in "${PIDS[@]:-}"; do
    [ -n "$pid" ] && wait "$pid" 2>/dev/null || true
  done
  rm -rf "$WORK"
}
trap cleanup EXIT

wait_http() { # url what
  for _ in $(seq 1 240); do
    if curl -fsS -o /dev/null -u "$USER_NAME:$PASSWORD" "$1" 2>/dev/null; then return 0; fi
    sleep 0.25
  done
  echo "FAIL: $2 did not answer at $1"
  return 1
}

start_node() { # name http-port args...
  local name=$1 port=$2
  shift 2
  "$ANNAL" --http-port "$port" "$@" >"$LOGS/$name.log" 2>&1 &
  PIDS+=($!)
  wait_http "http://127.0.0.1:$port/info" "node $name"
}

# Sets URL to where the UI of the node on node-port is served (a dev server on dev-port if needed).
serve() { # name node-port dev-port
  if [ "$SERVE" = embedded ]; then
    URL="http://127.0.0.1:$2/"
    return
  fi
  node tests/ui/devserver.mjs --node "http://127.0.0.1:$2" --port "$3" >"$LOGS/dev-$1.log" 2>&1 &
  PIDS+=($!)
  wait_http "http://127.0.0.1:$3/web/index.html" "dev server $1"
  URL="http://127.0.0.1:$3/"
}

FAILED=0
PASSED=0
run() { # scenario args...
  local sc=$1
  shift
  echo "=== scenario $sc"
  rm -rf "${OUT:?}/$sc"
  if node tests/ui/browser.mjs --scenario "$sc" --chromium "$CHROMIUM" --screenshots "$OUT/$sc" "$@"; then
    PASSED=$((PASSED + 1))
  else
    FAILED=$((FAILED + 1))
  fi
}

if [ "$WHAT" = single ] || [ "$WHAT" = all ]; then
  start_node single $((BASE + 1)) --mem-db --run-projections All --start-standard-projections
  serve single $((BASE + 1)) $((BASE + 11))
  run single --url "$URL"
fi

if [ "$WHAT" = cluster ] || [ "$WHAT" = all ]; then
  urls=()
  for i in 1 2 3; do
    seeds=""
    for j in 1 2 3; do [ "$j" = "$i" ] || seeds="$seeds,127.0.0.1:$((BASE + 30 + j))"; done
    mkdir -p "$WORK/db$i"
    "$ANNAL" --db "$WORK/db$i" --http-port $((BASE + 20 + i)) --replication-port $((BASE + 30 + i)) \
      --cluster-size 3 --gossip-seed "${seeds#,}" --run-projections All --start-standard-projections \
      >"$LOGS/member$i.log" 2>&1 &
    PIDS+=($!)
  done
  for i in 1 2 3; do
    wait_http "http://127.0.0.1:$((BASE + 20 + i))/info" "member $i"
    serve "member$i" $((BASE + 20 + i)) $((BASE + 40 + i))
    urls+=("$URL")
  done
  # Wait for one leader and two followers.
  follower=""
  for _ in $(seq 1 240); do
    leaders=0
    follower=""
    for i in 1 2 3; do
      st=$(curl -fsS -u "$USER_NAME:$PASSWORD" "http://127.0.0.1:$((BASE + 20 + i))/info" 2>/dev/null | tr -d ' \n' | sed -n 's/.*"state":"\([^"]*\)".*/\1/p')
      case "$st" in
        master | leader) leaders=$((leaders + 1)) ;;
        slave | follower) [ -n "$follower" ] || follower=${urls[$((i - 1))]} ;;
      esac
    done
    [ "$leaders" = 1 ] && [ -n "$follower" ] && break
    sleep 0.25
  done
  [ -n "$follower" ] || { echo "FAIL: the cluster elected no leader"; exit 1; }
  run follower --url "$follower"
  run cluster --members "$(IFS=,; echo "${urls[*]}")"
fi

echo "UI scenarios: $PASSED passed, $FAILED failed (screenshots under $OUT, logs under $LOGS)"
[ "$FAILED" = 0 ]
