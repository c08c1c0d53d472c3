#!/usr/bin/env bash
# CLI test of engram-served: --help, the bad inputs it refuses at start (exit
# 2 with a clear message, no socket left behind), a stale socket removed,
# readiness on stdout, and SIGTERM ending it with exit 0 and its socket gone.
# Usage: served_cli.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build=$(cd "$1" && pwd)
src=$(cd "$2" && pwd)
served=$build/engram-served
work=$(mktemp -d)
trap 'kill -9 $(jobs -p) 2>/dev/null || true; rm -rf "$work"' EXIT
cd "$work"
# fail, expect_error
source "$src/tests/cli/lib/expect_error.bash"

"$served" --help >help.txt
grep -q -- "--socket" help.txt || fail "--help does not list --socket"
grep -q -- "--group" help.txt || fail "--help does not list --group"
"$build/engram-gen" --rows 1000 --seed 3 t.engram >/dev/null 2>&1

expect_error nonzero "no socket" "socket" "$served" --table t.engram
expect_error 2 "no tables" "no tables" "$served" --socket s.sock
expect_error 2 "missing table" "t-missing.engram" "$served" --socket s.sock --table t-missing.engram
expect_error 2 "bad cache size" "--cache-bytes" "$served" --socket s.sock --table t.engram --cache-bytes lots
expect_error 2 "unknown group" "no group named" "$served" --socket s.sock --table t.engram --group no-such-group-x
[[ ! -e s.sock ]] || fail "a refused start left its socket behind"
echo "not a socket" >file.sock
expect_error 2 "a file in the way" "not a socket" "$served" --socket file.sock --table t.engram
[[ -f file.sock ]] || fail "a file that is not a socket was removed"

# A stale socket (bound, nobody listening) is removed; readiness on stdout.
python3 -c 'import socket; s = socket.socket(socket.AF_UNIX); s.bind("s.sock")'
[[ -S s.sock ]] || fail "could not make a stale socket"
"$served" --socket s.sock --table t.engram --cache-bytes 8MiB --log-level warn >ready.txt &
pid=$!
for _ in $(seq 1 300); do grep -q "ready" ready.txt 2>/dev/null && break; sleep 0.1; done
grep -q "engram-served: ready on s.sock" ready.txt || fail "no readiness line: $(cat ready.txt)"
[[ $(stat -c %a s.sock) == 660 ]] || fail "socket mode $(stat -c %a s.sock), want 660"
kill -TERM "$pid"
set +e
wait "$pid"
rc=$?
set -e
[[ $rc -eq 0 ]] || fail "SIGTERM: exit $rc, want 0"
[[ ! -e s.sock ]] || fail "the socket outlived the service"
echo "served_cli: OK"
