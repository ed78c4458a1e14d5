#!/usr/bin/env bash
# Search benchmark (issue 4): fills a database with N realistic messages in one inbox,
# times `inboxd reindex`, compares the index size with the bodies it covers, and times
# searches end to end over HTTP. Figures go to BENCHMARKS.md with the command and date.
#
#   scripts/bench-search.sh [N]      (default 100000; work files in ${BENCH_DIR:-/tmp/inboxd-searchbench})
#
# QUERIES sets the searches of each kind (default 300); SEARCHBENCH_LOG=1 shows the server's
# warnings and errors. About four minutes for 100,000 messages on the 2-core machine.
set -euo pipefail
cd "$(dirname "$0")/.."
TAGS='sqlite_omit_load_extension osusergo netgo'
N=${1:-100000}
DIR=${BENCH_DIR:-/tmp/inboxd-searchbench}
mkdir -p "$DIR"
go build -tags "$TAGS" -o "$DIR/inboxd" .
go build -tags "$TAGS" -o "$DIR/searchbench" ./scripts/searchbench
echo "== $(date -u +%Y-%m-%dT%H:%MZ) on $(nproc) cores, $(uname -sm), $(go version | cut -d' ' -f3); load average: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "== generate $N messages"
"$DIR/searchbench" -mode gen -n "$N" -db "$DIR/bench.db"
echo "== inboxd reindex"
"$DIR/inboxd" reindex --db "$DIR/bench.db"
echo "== index size"
"$DIR/searchbench" -mode size -db "$DIR/bench.db"
echo "== searches over HTTP (one client, limit 20)"
"$DIR/searchbench" -mode http -db "$DIR/bench.db" -queries "${QUERIES:-300}"
echo "== load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
