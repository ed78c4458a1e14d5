#!/usr/bin/env bash
# Checks /openapi.json as a user of it would: Redocly's linter (redocly.yaml), then a
# TypeScript client generated from it with openapi-typescript, compiled with tsc and run
# against an inboxd seeded with examples/fixture.json. INBOXD_BIN is the binary to use
# (default: build one).
set -euo pipefail
cd "$(dirname "$0")"
work=$(mktemp -d)
pid=""
trap '[ -n "$pid" ] && kill "$pid" 2>/dev/null; wait 2>/dev/null; rm -rf "$work" build schema.d.ts' EXIT

npm ci --no-audit --no-fund --loglevel=error

bin=${INBOXD_BIN:-}
if [ -z "$bin" ]; then
  bin=$work/inboxd
  (cd ../.. && go build -tags 'sqlite_omit_load_extension osusergo netgo' -o "$bin" .)
fi
: >"$work/out.log" # before the server starts: the loop below reads it at once
"$bin" serve --db "$work/inboxd.db" --domain example.test --seed ../../examples/fixture.json \
  --http 127.0.0.1:0 --dns off >"$work/out.log" 2>"$work/err.log" &
pid=$!
addr=""
for _ in $(seq 100); do
  addr=$(sed -n 's/^inboxd .* listening on \([^ ]*\) .*/\1/p' "$work/out.log" | head -1)
  [ -n "$addr" ] && break
  sleep 0.1
done
[ -n "$addr" ] || { echo "inboxd did not start:"; cat "$work/err.log"; exit 1; }

curl -fsS "http://$addr/openapi.json" -o "$work/openapi.json"
npx --no-install redocly lint --config redocly.yaml "$work/openapi.json"
npx --no-install openapi-typescript "$work/openapi.json" -o schema.d.ts
npx --no-install tsc -p tsconfig.json
INBOXD_URL="http://$addr" INBOXD_KEY=$(node -e 'console.log(require("../../examples/fixture.json").accounts[0].keys[0].token)') \
  node build/client.js
