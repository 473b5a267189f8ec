#!/usr/bin/env bash
# Formats filkit's C++ sources (src/, include/, cli/, python/src/, tests/, bench/, fuzz/) with
# Debian's clang-format-14 and the checkout's .clang-format (docs/development.md, "Formatting").
#   bash scripts/format.sh                   format every source in place
#   bash scripts/format.sh --check           change nothing; list the sources that differ from the
#                                            format and exit 1 if there are any
#   bash scripts/format.sh [--check] FILE... only these files
#   CLANG_FORMAT  the program (default: clang-format-14; scripts/setup.sh installs Debian's clang-format)
set -euo pipefail
cd "$(dirname "$0")/.."
clang_format="${CLANG_FORMAT:-clang-format-14}"
if ! command -v "$clang_format" > /dev/null; then
  echo "format.sh: $clang_format not found: apt-get install clang-format (scripts/setup.sh installs it)" >&2
  exit 2
fi
check=0
if [ "${1:-}" = --check ]; then
  check=1
  shift
fi
if (($#)); then
  files=("$@")
else
  mapfile -t files < <(git ls-files -- src include cli python/src tests bench fuzz | grep -E '\.(cpp|hpp|h)$')
fi
if ((check == 0)); then
  printf '%s\0' "${files[@]}" | xargs -0 -n 32 "$clang_format" --style=file -i
  exit 0
fi
differ=0
for file in "${files[@]}"; do
  if ! "$clang_format" --style=file "$file" | cmp -s - "$file"; then
    echo "$file"
    differ=$((differ + 1))
  fi
done
if ((differ)); then
  echo "format.sh: $differ of ${#files[@]} files differ from .clang-format (bash scripts/format.sh formats them)" >&2
  exit 1
fi
