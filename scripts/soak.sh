#!/usr/bin/env bash
# Soak test (BENCHMARKS.md, "Soak (issue 8)"): builds inboxd and runs it for about ten
# minutes under mixed, concurrent API and SMTP traffic on loopback, then checks that no
# request got a 5xx, no acknowledged message was lost, memory stayed flat after warm-up and
# SIGTERM exits 0. Prints a Markdown report; exits non-zero when a check fails.
#
#   scripts/soak.sh                 # the full run, about 10 minutes of traffic
#   scripts/soak.sh --minutes 0.5   # a smoke run (scripts/test.sh does this)
#
# Other arguments go to the soak program (scripts/soak): -api-clients, -smtp-clients,
# -api-rate, -smtp-rate, -keep.
set -euo pipefail
cd "$(dirname "$0")/.."
TAGS='sqlite_omit_load_extension osusergo netgo'

args=()
while [ $# -gt 0 ]; do
  case "$1" in
    --minutes) args+=(-minutes "$2"); shift 2 ;;
    --minutes=*) args+=(-minutes "${1#--minutes=}"); shift ;;
    *) args+=("$1"); shift ;;
  esac
done

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
go build -tags "$TAGS" -o "$tmp/inboxd" .
go build -tags "$TAGS" -o "$tmp/soak" ./scripts/soak
echo "soak: $(date -u +%Y-%m-%dT%H:%MZ), $("$tmp/inboxd" version), $(nproc) CPUs"
"$tmp/soak" -bin "$tmp/inboxd" "${args[@]}"
