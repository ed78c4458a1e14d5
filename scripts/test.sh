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
