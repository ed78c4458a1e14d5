#!/usr/bin/env bash
# End-to-end test of POST /mcp with the official MCP TypeScript client
# (@modelcontextprotocol/sdk, pinned by package-lock.json): installs it with npm ci, builds
# and starts the real inboxd on a loopback port with a seeded account and keys, runs
# e2e.test.mjs with node's test runner (POST /mcp, and `inboxd mcp` on stdio), and stops
# the server.
# Needs Go, gcc, Node 18+ and npm.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
TAGS='sqlite_omit_load_extension osusergo netgo'

cd "$here"
npm ci --no-audit --no-fund --loglevel=error

tmp="$(mktemp -d)"
pid=""
cleanup() {
  if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
    kill "$pid"
    wait "$pid" 2>/dev/null || true
  fi
  rm -rf "$tmp"
}
trap cleanup EXIT

(cd "$root" && go build -tags "$TAGS" -o "$tmp/inboxd" .)

# Keys shaped like the ones the server issues: bze_<uuid>.<43 base64url characters>.
newkey() { node -e 'const c=require("crypto");console.log("bze_"+c.randomUUID()+"."+c.randomBytes(32).toString("base64url"))'; }
key="$(newkey)"
readonly_key="$(newkey)"
inbox="support@inboxd.test"
attachment="$(printf 'attached text\n' | base64)"
cat >"$tmp/fixture.json" <<EOF
{
  "accounts": [
    {
      "id": "e2e",
      "plan": "developer",
      "keys": [
        {"token": "$key", "scopes": ["inboxes:read", "inboxes:write", "messages:read", "messages:send", "messages:write"]},
        {"token": "$readonly_key", "scopes": ["inboxes:read", "messages:read"]}
      ],
      "inboxes": [
        {
          "address": "$inbox",
          "displayName": "Support",
          "messages": [
            {
              "messageId": "<welcome-1@customer.example>",
              "from": "ann@customer.example",
              "subject": "Welcome",
              "text": "Hello from the fixture.",
              "timestamp": "2026-11-02T09:00:00Z",
              "attachments": [{"filename": "note.txt", "contentType": "text/plain", "content": "$attachment"}]
            }
          ]
        }
      ]
    }
  ]
}
EOF

"$tmp/inboxd" serve --db "$tmp/e2e.db" --http 127.0.0.1:0 --domain inboxd.test --seed "$tmp/fixture.json" \
  >"$tmp/stdout" 2>"$tmp/stderr" &
pid=$!

addr=""
for _ in $(seq 1 100); do
  addr="$(sed -n 's/.* listening on \([0-9.]*:[0-9]*\) .*/\1/p' "$tmp/stdout" | head -n 1)"
  [ -n "$addr" ] && break
  if ! kill -0 "$pid" 2>/dev/null; then
    echo "inboxd exited early:" >&2
    cat "$tmp/stdout" "$tmp/stderr" >&2
    exit 1
  fi
  sleep 0.1
done
if [ -z "$addr" ]; then
  echo "inboxd did not start listening within 10 s" >&2
  cat "$tmp/stdout" "$tmp/stderr" >&2
  exit 1
fi

status=0
INBOXD_BIN="$tmp/inboxd" INBOXD_URL="http://$addr" INBOXD_API_KEY="$key" INBOXD_READONLY_KEY="$readonly_key" INBOXD_INBOX="$inbox" \
  node --test --test-reporter=spec "$here/e2e.test.mjs" || status=$?

# The MCP Inspector commands the README gives, as a user runs them: the Inspector needs
# Node 22, which npx fetches as the node package beside it (both pinned here and there).
inspect() { npx -y -p node@22.23.3 -p @modelcontextprotocol/inspector@2.12.0 mcp-inspector --cli "$@" 2>"$tmp/inspector.err"; }
if [ "$status" -eq 0 ]; then
  out=$(inspect "http://$addr/mcp" --transport http --header "Authorization: Bearer $key" --method tools/list) || status=$?
  case "$out" in *'"name": "list_inboxes"'*) echo "ok - MCP Inspector over HTTP lists the tools" ;; *) status=1; echo "MCP Inspector over HTTP: $out" ;; esac
  out=$(inspect -e INBOXD_API_KEY="$key" "$tmp/inboxd" mcp --base-url "http://$addr" --method tools/call --tool-name list_inboxes) || status=$?
  case "$out" in *"$inbox"*) echo "ok - MCP Inspector over stdio calls list_inboxes" ;; *) status=1; echo "MCP Inspector over stdio: $out" ;; esac
  [ "$status" -eq 0 ] || cat "$tmp/inspector.err" >&2
fi
if [ "$status" -ne 0 ]; then
  echo "--- inboxd log" >&2
  tail -n 50 "$tmp/stderr" >&2
fi
exit "$status"
