#!/usr/bin/env bash
# The one test command: formatting, vet, and every test with the race detector.
# Runs on a fresh machine with only Go and gcc; the first run compiles SQLite (cgo).
set -euo pipefail
cd "$(dirname "$0")/.."

# One tag set for every build and test, so the cgo SQLite build is compiled once and cached.
TAGS='sqlite_omit_load_extension osusergo netgo'

echo "== gofmt"
unformatted=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))
if [ -n "$unformatted" ]; then
  echo "gofmt would change:"; echo "$unformatted"; exit 1
fi

echo "== go vet"
go vet -tags "$TAGS" ./...

echo "== go test -race"
go test -race -tags "$TAGS" -count=1 -timeout 20m ./...

echo "== MCP end-to-end (official TypeScript client)"
if command -v node >/dev/null 2>&1 && command -v npm >/dev/null 2>&1; then
  scripts/mcp-e2e/run.sh
elif [ "${CI:-}" = "true" ]; then
  echo "node and npm are needed for scripts/mcp-e2e; CI must run it"; exit 1
else
  echo "skipped: node and npm are not installed (CI=true makes this a failure)"
fi
