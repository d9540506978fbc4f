#!/usr/bin/env bash
# Shared by the PHASE scripts of make real-gpu-check (trust_real.sh, quality_real.sh): run one
# playbook, time it, keep its output in the record folder and show the lines that matter.
#   phase_run PREFIX PATTERN NAME playbook-args...
# Reads AP (the ansible-playbook argv) and REC (the record folder) from the calling script;
# writes "$REC/PREFIX_NAME.out" and prints "PREFIX NAME: rc N S s" and up to 12 matching lines.
phase_run() {
  local prefix=$1 pattern=$2 name=$3
  shift 3
  local t0 rc
  t0=$(date +%s.%N)
  "${AP[@]}" "$@" > "$REC/${prefix}_$name.out" 2>&1; rc=$?
  echo "$prefix $name: rc $rc $(python3 -c "print(round($(date +%s.%N) - $t0, 1))") s"
  grep -E "$pattern" "$REC/${prefix}_$name.out" | grep -v RETRYING | head -12 | cut -c1-220 | sed 's/^/   /'
}
