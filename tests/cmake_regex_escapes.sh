#!/bin/sh
# cmake_regex_escapes.sh FILE... - the ctest files' regular expressions
# (expect_pass.sh / expect_fail.sh / expect_all_ranks.sh patterns, grep -E;
# PASS_REGULAR_EXPRESSION) are CMake arguments first. CMake reads `\(` as a
# plain `(`: a single backslash before a character that is not a letter, a
# digit or `;` is dropped, so the regex gets a group where a literal
# parenthesis was meant ("all-reduce \(NCCL, device buffers\)" then never
# matched the line it was written for: preflight_gpu on the first GPU run).
# A literal metacharacter needs `\\(` in the .cmake file. This reports every
# single backslash before ( ) . [ ] { } * + ? | ^ outside comment lines.
# Exit 0 clean, 1 with findings (file:line: text).
if [ "$#" -eq 0 ]; then
  echo "usage: cmake_regex_escapes.sh FILE.cmake..."
  exit 2
fi
awk '
  /^[ \t]*#/ { next }
  {
    line = $0
    n = length(line)
    for (i = 1; i <= n; i++) {
      c = substr(line, i, 1)
      if (c != "\\") continue
      d = substr(line, i + 1, 1)
      if (d == "\\") { i++; continue }
      if (index("().[]{}*+?|^", d) > 0) {
        printf "%s:%d: \\%s is a plain %s to CMake (write \\\\%s for a literal one): %s\n", FILENAME, FNR, d, d, d, line
        bad++
      }
    }
  }
  END {
    if (bad) { printf "cmake_regex_escapes: %d single backslash%s before a regex metacharacter\n", bad, bad == 1 ? "" : "es"; exit 1 }
    print "cmake_regex_escapes: clean"
  }
' "$@"
