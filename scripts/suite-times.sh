#!/usr/bin/env bash
# Runs each make target named on the command line in order, timing each, and prints a table of
# the times at the end (also when a suite fails: the table so far, the failed suite named).
# `make test` runs its suites through this, so CI's log always ends with where the time went.
# SUITE_TIMES_KEEP_GOING=1 goes on past a failed suite (to measure them all).
# SUITE_TIMES_OUT=file also appends "target seconds status" lines to that file.
set -uo pipefail
make_cmd=${MAKE:-make}
rows=()
total_start=$(date +%s)
status=0
for t in "$@"; do
  start=$(date +%s)
  echo "==== suite $t"
  if "$make_cmd" --no-print-directory "$t"; then st=ok; else st=FAILED; status=1; fi
  secs=$(( $(date +%s) - start ))
  rows+=("$(printf '%-24s %6d s  %s' "$t" "$secs" "$st")")
  [ -n "${SUITE_TIMES_OUT:-}" ] && echo "$t $secs $st" >> "$SUITE_TIMES_OUT"
  [ $st = ok ] || [ -n "${SUITE_TIMES_KEEP_GOING:-}" ] || break
done
echo
echo "suite times (wall clock, in order; a suite's first build counts in its own time)"
printf '%s\n' "${rows[@]}"
printf '%-24s %6d s\n' "total" "$(( $(date +%s) - total_start ))"
exit $status
