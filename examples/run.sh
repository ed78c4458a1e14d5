#!/usr/bin/env bash
# Runs the example tests (Go and Node) against a fresh inboxd seeded with
# examples/fixture.json, as a CI job would: start the server in the background, run the
# suite, stop the server. INBOXD_BIN is the binary to use (default: build one).
set -euo pipefail
cd "$(dirname "$0")"
tags='sqlite_omit_load_extension osusergo netgo'
work=$(mktemp -d)
pid=""
trap '[ -n "$pid" ] && kill "$pid" 2>/dev/null; wait 2>/dev/null; rm -rf "$work"' EXIT

bin=${INBOXD_BIN:-}
if [ -z "$bin" ]; then
	bin=$work/inboxd
	(cd .. && go build -tags "$tags" -o "$bin" .)
fi

: >"$work/out.log" # before the server starts: the loop below reads it at once
"$bin" serve --db "$work/inboxd.db" --domain example.test --seed fixture.json --test-controls --dns off \
	--http 127.0.0.1:0 --smtp 127.0.0.1:0 >"$work/out.log" 2>"$work/err.log" &
pid=$!
for _ in $(seq 100); do
	addr=$(sed -n 's/^inboxd .* listening on \([^ ]*\) .*/\1/p' "$work/out.log" | head -1)
	[ -n "$addr" ] && break
	sleep 0.1
done
if [ -z "${addr:-}" ]; then
	echo "inboxd did not start:" >&2
	cat "$work/err.log" >&2
	exit 1
fi

key=$(node -e 'console.log(require("./fixture.json").accounts[0].keys[0].token)')
echo "inboxd at http://$addr"
(cd go && GOSHENEMAIL_BASE_URL=http://$addr GOSHENEMAIL_API_KEY=$key go test -count=1 ./...)
INBOXD_URL=http://$addr INBOXD_KEY=$key node --test node/
