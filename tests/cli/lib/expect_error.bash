# Sourced by the CLI tests (tests/cli/*.sh): failing checks of a tool's bad
# input. Runs in the current directory; leaves the command's stdout in
# out.txt and stderr in err.txt.

fail() { echo "FAIL: $*" >&2; exit 1; }

# expect_error WANT WHAT NEEDLE CMD...: CMD must exit with status WANT (a
# number, or "nonzero": any failure that is not a signal), within 60 s, with
# NEEDLE in its stderr.
expect_error() {
  local want=$1 what=$2 needle=$3
  shift 3
  set +e
  timeout 60 "$@" >out.txt 2>err.txt
  local rc=$?
  set -e
  [[ $rc -ne 124 ]] || fail "$what: hung"
  if [[ $want == nonzero ]]; then
    [[ $rc -ne 0 ]] || fail "$what: exit 0"
    [[ $rc -lt 128 ]] || fail "$what: killed by a signal (rc $rc)"
  else
    [[ $rc -eq $want ]] || fail "$what: exit status $rc, want $want: $(cat err.txt)"
  fi
  grep -q -- "$needle" err.txt || fail "$what: stderr lacks '$needle': $(cat err.txt)"
}
