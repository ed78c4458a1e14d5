#!/usr/bin/env bash
# Whole-server benchmark (BENCHMARKS.md, "Whole server (issue 9)"): builds inboxd and
# scripts/bench, generates a 200,000-message data set, starts the server on loopback and
# measures it under concurrent load, then rewrites that section of BENCHMARKS.md and
# docs/bench-latency.png. About 5 minutes on the quiet 2-core machine, up to ~13 when other
# sessions keep its cores busy.
#   --quick        small data set, short runs (under a minute); writes nothing in the repo:
#                  the smoke test of scripts/test.sh (it checks every operation answers)
#   --profile DIR  also CPU profiles of the server (reads, sends, ingest), its heap, and of the
#                  data set generation
#   --wait-load X  first wait until the 1-minute load average is below X
#   --keep         keep the working directory (database, server log)
# GOGC, GOMEMLIMIT and GOMAXPROCS in the environment apply to the server it starts; the
# load generator keeps Go's defaults (benchkit.OwnRuntime).
set -euo pipefail
cd "$(dirname "$0")/.."
TAGS='sqlite_omit_load_extension osusergo netgo'
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
go build -tags "$TAGS" -o "$tmp/inboxd" .
go build -tags "$TAGS" -o "$tmp/bench" ./scripts/bench
"$tmp/bench" -bin "$tmp/inboxd" -cmdline "scripts/bench.sh${*:+ $*}" "$@"
