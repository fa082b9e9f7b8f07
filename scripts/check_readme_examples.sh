#!/usr/bin/env bash
# Checks that every code block the README marks as a copy of a file (between
# "<!-- begin PATH -->" and "<!-- end PATH -->") equals that file.
set -euo pipefail
root=${1:-$(dirname "$0")/..}
status=0
for path in $(sed -n 's/^<!-- begin \(.*\) -->$/\1/p' "$root/README.md"); do
  if ! diff -u "$root/$path" <(sed -n "\|^<!-- begin $path -->\$|,\|^<!-- end $path -->\$|p" "$root/README.md" | sed '1,2d;$d' | sed '$d'); then
    echo "README.md's copy of $path differs from the file" >&2
    status=1
  else
    echo "README.md's copy of $path matches"
  fi
done
exit $status
