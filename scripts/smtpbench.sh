#!/usr/bin/env bash
# Mail throughput benchmark (BENCHMARKS.md, "SMTP ingest and local delivery"): builds
# inboxd, starts it on a fresh database with the SMTP listener, and measures
#   1. SMTP ingest of ~2 KB messages over 8 concurrent connections, and
#   2. 1,000 API sends to a local inbox until every one is delivered.
# With -search-loop, 1 runs again beside a client searching in a loop (as scripts/bench.sh).
# Extra arguments go to the benchmark program, e.g. -n 50000 -conns 16 -keep.
# GOGC, GOMEMLIMIT and GOMAXPROCS in the environment apply to the server it starts; the
# load generator keeps Go's defaults (benchkit.OwnRuntime).
set -euo pipefail
cd "$(dirname "$0")/.."
TAGS='sqlite_omit_load_extension osusergo netgo'
bin=$(mktemp -d)/inboxd
go build -tags "$TAGS" -o "$bin" .
go run -tags "$TAGS" ./scripts/smtpbench -bin "$bin" "$@"
rm -rf "$(dirname "$bin")"
