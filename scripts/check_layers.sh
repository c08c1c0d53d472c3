#!/usr/bin/env bash
# Fails when an #include goes where its layer may not (docs/ARCHITECTURE.md).
# Run by CTest (layering_includes) and so by CI; tests/layering/check_layers_test.sh
# runs it on small fake trees.
#
# Every folder of C/C++ code belongs to one layer, and each layer lists what it
# MAY include of the project. A project include is one in quotes (written from
# the source root, e.g. "storage/table_file.h"; a relative path is allowed
# nowhere) or in angle brackets naming a project folder (<src/...>). System and
# third-party headers, in angle brackets, are free except in the public API.
#
# An allowed item ending in / admits everything under that folder; any other
# item admits that one file. For system headers, "std" admits the C++ and C
# standard library (<vector>, <stdint.h>) and "any" admits every header.
#
# Usage: check_layers.sh [SOURCE_ROOT]   (default: this script's project)
set -euo pipefail
root=${1:-$(cd "$(dirname "$0")/.." && pwd)}
cd "$root"

# The tooling layer (engram_tools): code only tools, benchmarks and tests use.
tool_folders=(src/replay src/workload src/stress src/tablegen src/iobench src/common)

c_standard_headers=(assert complex ctype errno fenv float inttypes iso646 limits locale math setjmp signal
  stdalign stdarg stdatomic stdbool stddef stdint stdio stdlib stdnoreturn string tgmath threads time uchar wchar
  wctype)

failed=0
covered=()

# to_regex ITEMS: an anchored ERE admitting the items as described above.
to_regex() {
  local item alternatives=()
  for item in $1; do
    case $item in
      any) alternatives+=('.*') ;;
      std) alternatives+=('[a-z_]+' "($(IFS='|'; echo "${c_standard_headers[*]}"))\\.h") ;;
      */) alternatives+=("${item//./\\.}.*") ;;
      *) alternatives+=("${item//./\\.}") ;;
    esac
  done
  local IFS='|'
  echo "^(${alternatives[*]})\$"
}

# layer NAME PROJECT_ITEMS SYSTEM_ITEMS PATH...: every include in the C/C++
# files under PATHs must be allowed by PROJECT_ITEMS (a project include) or by
# SYSTEM_ITEMS (any other angle-bracket include).
layer() {
  local name=$1 project=$2 system=$3; shift 3
  local path files=()
  for path in "$@"; do
    if [[ ! -e $path ]]; then
      echo "layering: $path does not exist, yet the layer $name lists it: update scripts/check_layers.sh"
      failed=1
      continue
    fi
    covered+=("$path")
    while IFS= read -r -d '' f; do files+=("$f"); done < <(
      find "$path" -type f \( -name '*.h' -o -name '*.cc' -o -name '*.c' -o -name '*.hpp' -o -name '*.cpp' \) -print0 | sort -z)
  done
  [[ ${#files[@]} -eq 0 ]] && return 0
  local hits
  # Through the environment: awk -v would take the regexes' backslashes as escapes.
  hits=$(PROJECT_RE=$(to_regex "$project") SYSTEM_RE=$(to_regex "$system") awk '
    BEGIN { allowed_project = ENVIRON["PROJECT_RE"]; allowed_system = ENVIRON["SYSTEM_RE"] }
    /^[ \t]*#[ \t]*include/ {
      line = $0
      sub(/^[ \t]*#[ \t]*include[ \t]*/, "", line)
      ok = 0
      if (line ~ /^"[^"]*"/) {
        split(line, part, "\""); ok = part[2] ~ allowed_project
      } else if (line ~ /^<[^>]*>/) {
        path = substr(line, 2, index(line, ">") - 2)
        if (path ~ /^(engram|src|storage|tests|bench|tools|python)\//) ok = path ~ allowed_project
        else ok = path ~ allowed_system
      }
      if (!ok) printf "  %s:%d: %s\n", FILENAME, FNR, $0
    }' "${files[@]}")
  if [[ -n $hits ]]; then
    echo "layering: $name may include only: $project; system headers: $system. Not allowed:"
    echo "$hits"
    failed=1
  fi
}

# The public API: itself and the standard library; Boost only in asio.h.
public_headers=()
for header in include/engram/*.h; do [[ $header == */asio.h ]] || public_headers+=("$header"); done
layer "include/engram/ (the public API)" 'engram/' 'std' "${public_headers[@]}"
layer "include/engram/asio.h (the Asio adapter)" 'engram/' 'std boost/' include/engram/asio.h
# engram_storage, a leaf: of the public API only the two headers its format
# speaks (Status, the hasher's layout).
layer "storage/ (the leaf)" 'engram/status.h engram/hasher.h storage/' 'any' storage
# The core (libengram): the public API, its own folders and storage/; never
# src/common or another tool folder. The cache is a pure in-memory structure
# (of storage/ it uses only the annotated mutex), and the C API and the Python binding stand on the public API alone.
layer "src/cache/ (no I/O)" \
  'engram/cache_policy.h engram/cache_stats.h engram/status.h src/cache/ storage/mutex.h storage/thread_annotations.h' \
  'any' src/cache
layer "src/ngram/" 'engram/ src/ngram/ storage/' 'any' src/ngram
# The metrics endpoint logs through storage/log.h and uses nothing else of storage/.
layer "src/metrics/" 'engram/ src/metrics/ storage/log.h' 'any' src/metrics
layer "src/store/" 'engram/ src/store/ src/cache/ src/metrics/ src/ngram/ storage/' 'any' src/store
layer "src/node/ (the node service and its client)" 'engram/ src/node/ src/store/ src/cache/ src/metrics/ storage/' 'any' src/node
layer "src/capi/ (the C API)" 'engram/' 'any' src/capi
layer "python/ (the binding)" 'engram/ python/' 'any' python
# engram_tools and what stands on it: anything below, but never tests/ (a
# benchmark or tool shares code with tests through the tooling library).
layer "the tooling library (${tool_folders[*]})" 'engram/ src/ storage/' 'any' "${tool_folders[@]}"
layer "tools/" 'engram/ src/ storage/' 'any' tools
layer "bench/" 'engram/ src/ storage/ bench/' 'any' bench
layer "tests/" 'engram/ src/ storage/ tests/' 'any' tests

# A folder or file of src/ that no layer names would go unchecked.
for path in src/*; do
  [[ " ${covered[*]} " == *" $path "* ]] && continue
  if [[ -d $path ]]; then
    echo "layering: $path/ belongs to no layer: add it to one in scripts/check_layers.sh"
  else
    echo "layering: $path is in no layer's folder: src/ holds only the layers' folders"
  fi
  failed=1
done

if [[ $failed -ne 0 ]]; then exit 1; fi
echo "layering: every include goes the allowed way"
