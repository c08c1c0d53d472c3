# Sourced by the CLI tests of optional tools (tests/cli/*.sh).
# optional_tool PATH WHY: exits the test with success, saying it is skipped,
# when PATH is not an executable (a build configured without it, e.g.
# ENGRAM_BUILD_BENCH=OFF for engram-bench).
optional_tool() {
  if [ ! -x "$1" ]; then
    echo "$(basename "$1") not built ($2): skipping"
    exit 0
  fi
}
