# Sourced by the CLI tests (tests/cli/*.sh) that corrupt a file on purpose.

# invert_byte FILE OFFSET: replaces the byte at OFFSET with its bitwise
# complement. Writing a fixed value instead would leave random data unchanged
# one time in 256, and the corruption check would then fail by chance.
invert_byte() {
  local file=$1 offset=$2 old
  old=$(od -An -tu1 -j "$offset" -N1 "$file" | tr -d ' ')
  [[ -n $old ]] || { echo "invert_byte: $file has no byte at $offset" >&2; return 1; }
  printf "\\x$(printf %02x $(( old ^ 255 )))" |
    dd of="$file" bs=1 seek="$offset" conv=notrunc status=none
}
