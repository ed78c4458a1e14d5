#!/usr/bin/env bash
# The one test command: formatting, vet, and every test with the race detector, fuzzing,
# a short soak and the end-to-end checks. Runs on a fresh machine with only Go, gcc and
# Node; the first run compiles SQLite (cgo) and, as root on Debian, installs Chromium and
# SpamAssassin for the protection tests. The run ends with a table of each stage's time.
# --quick runs gofmt, vet and the tests only (a developer's loop; CI runs
# everything).
set -euo pipefail
cd "$(dirname "$0")/.."

# One tag set for every build and test, so the cgo SQLite build is compiled once and cached.
TAGS='sqlite_omit_load_extension osusergo netgo'

quick=false
[ "${1:-}" = "--quick" ] && quick=true

stage_name="" stage_start=$SECONDS times=""
# stage ends the stage before (noting its time) and starts the next.
stage() {
  if [ -n "$stage_name" ]; then
    times+=$(printf '%5ds  %s' $((SECONDS - stage_start)) "$stage_name")$'\n'
  fi
  stage_name=$1 stage_start=$SECONDS
  [ -n "$1" ] && echo "== $1"
  return 0
}
# done_stages prints the time of every stage.
done_stages() {
  stage ""
  printf '== stage times\n%s%5ds  in all\n' "$times" "$SECONDS"
}

stage "gofmt"
unformatted=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))
if [ -n "$unformatted" ]; then
  echo "gofmt would change:"; echo "$unformatted"; exit 1
fi

stage "go vet"
go vet -tags "$TAGS" ./...

stage "chromium and spamd for the protection tests"
# Debian's chromium drives the dashboard's browser test (server/dashboard_browser_test.go);
# Debian's spamd is the real SpamAssassin of mail/protect's end-to-end test. Installed when
# missing; without them those tests skip, except with CI=true, where they fail.
need=()
command -v chromium >/dev/null 2>&1 || need+=(chromium)
command -v spamd >/dev/null 2>&1 || need+=(spamd spamassassin)
if [ ${#need[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "installing ${need[*]}"
    apt-get update -qq >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
  else
    echo "cannot install ${need[*]}: that needs root and apt-get"
  fi
fi
if command -v spamd >/dev/null 2>&1; then
  spamd_port=17830
  while (exec 3<>"/dev/tcp/127.0.0.1/$spamd_port") 2>/dev/null; do spamd_port=$((spamd_port + 1)); done
  spamd_log=$(mktemp)
  spamd_user=()
  [ "$(id -u)" = 0 ] && spamd_user=(--username=nobody)
  spamd --local --listen="127.0.0.1:$spamd_port" --allowed-ips=127.0.0.1 --nouser-config \
    --min-children=1 --max-children=2 --syslog=stderr "${spamd_user[@]}" >"$spamd_log" 2>&1 &
  spamd_pid=$!
  trap 'kill "$spamd_pid" 2>/dev/null || true; rm -f "$spamd_log"' EXIT
  for _ in $(seq 1 120); do
    if (exec 3<>"/dev/tcp/127.0.0.1/$spamd_port") 2>/dev/null; then
      export INBOXD_TEST_SPAMD="127.0.0.1:$spamd_port"
      echo "spamd listening on $INBOXD_TEST_SPAMD"
      break
    fi
    kill -0 "$spamd_pid" 2>/dev/null || break
    sleep 0.5
  done
  [ -n "${INBOXD_TEST_SPAMD:-}" ] || { echo "spamd did not start:"; tail -20 "$spamd_log"; }
fi

stage "go test -race"
# The PostgreSQL store's packages, and the end-to-end tests named OnPostgres, run in the
# next stage, against a cluster of their own.
go test -race -tags "$TAGS" -count=1 -timeout 20m -skip 'OnPostgres' $(go list ./... | grep -v '/db/postgres')

stage "PostgreSQL: the store's tests on a throwaway cluster"
# Debian's postgresql is installed when missing; the cluster (scripts/pg-cluster.sh) lives
# in a temp dir on a free loopback port for this stage only. Without PostgreSQL the tests
# skip, except with CI=true, where they fail (db/postgres/pgtest).
if ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 && ! command -v initdb >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "installing postgresql"
    apt-get update -qq >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends postgresql >/dev/null
  else
    echo "cannot install postgresql: that needs root and apt-get"
  fi
fi
pg_dir=""
if ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || command -v initdb >/dev/null 2>&1; then
  pg_dir=$(mktemp -u /tmp/inboxd-pg.XXXXXX)
  INBOXD_TEST_POSTGRES=$(scripts/pg-cluster.sh start "$pg_dir")
  export INBOXD_TEST_POSTGRES
  echo "PostgreSQL listening at $INBOXD_TEST_POSTGRES"
fi
pg_status=0
go test -race -tags "$TAGS" -count=1 -timeout 20m ./db/postgres/... || pg_status=$?
if [ "$pg_status" = 0 ]; then
  # The end-to-end tests named OnPostgres, and the whole server suite again, every test on
  # a PostgreSQL database of its own, run side by side: both wait much of their time (on
  # webhook leases, on the server's own timers), so on two cores together they take
  # little longer than the longer of the two. The server suite runs without the race
  # detector here: its code is the same on either store and ran with -race above, and the
  # PostgreSQL store's own concurrency runs with -race in ./db/postgres/... and in the
  # OnPostgres tests (crash loops of several processes included).
  go test -race -tags "$TAGS" -count=1 -timeout 20m -run 'OnPostgres' . &
  e2e_pid=$!
  INBOXD_TEST_STORE=postgres go test -tags "$TAGS" -count=1 -timeout 20m ./server/ || pg_status=$?
  wait "$e2e_pid" || pg_status=$?
fi
[ -n "$pg_dir" ] && scripts/pg-cluster.sh stop "$pg_dir"
unset INBOXD_TEST_POSTGRES
[ "$pg_status" = 0 ] || exit "$pg_status"

if $quick; then
  done_stages
  exit 0
fi

stage "fuzz: every parser, about 10 s each"
# MIME, request bodies and query strings, search queries, page tokens, fixture files, and
# the search segment builder (checked byte for byte against zapx). A failing input is saved
# under the package's testdata/fuzz/<target>/ and from then on runs with every go test as a
# regression case: commit it with the fix.
# Budgets are counts of runs (about 10 s each on an idle 2-core machine), not durations: with
# a duration, Go 1.26's fuzzing coordinator can fail a target with a bare "context deadline
# exceeded" when the time runs out while a worker is busy (golang/go#75804, fixed in Go
# 1.27); a count never races a clock. FUZZTIME, when set (e.g. 60s or 10000x), applies to all.
for target in mail:FuzzParse:5000x schema:FuzzBody:100000x schema:FuzzQuery:100000x schema:FuzzDuplicateKey:60000x search:FuzzParse:60000x \
  search:FuzzSegment:1500x db/sqlite:FuzzPageToken:200000x fixtures:FuzzFixture:20000x; do
  IFS=: read -r pkg name budget <<<"$target"
  go test -tags "$TAGS" -run '^$' -fuzz "^${name}\$" -fuzztime "${FUZZTIME:-$budget}" -fuzzminimizetime 1s "./${pkg}" |
    sed '/^fuzz: elapsed/d' || { echo "fuzzing ${pkg}:${name} failed"; exit 1; }
done

# govulncheck is not run: it needs the vulnerability database at vuln.go.dev, which the
# network of this project's machines and CI cannot reach (see issue 8). Run it where it can:
#   go run golang.org/x/vuln/cmd/govulncheck@v1.1.4 -tags "$TAGS" ./...

stage "soak, short (the full 10-minute run: scripts/soak.sh; results in BENCHMARKS.md)"
scripts/soak.sh --minutes 0.5

# with_node runs a script that needs Node and npm; without them it is skipped, except under
# CI=true, where that is a failure.
with_node() {
  if command -v node >/dev/null 2>&1 && command -v npm >/dev/null 2>&1; then
    "$1"
  elif [ "${CI:-}" = "true" ]; then
    echo "node and npm are needed for $1; CI must run it"; exit 1
  else
    echo "skipped: node and npm are not installed (CI=true makes this a failure)"
  fi
}

stage "MCP end-to-end (official TypeScript client)"
with_node scripts/mcp-e2e/run.sh

stage "OpenAPI: Redocly's lint, and a TypeScript client generated from /openapi.json calling inboxd"
with_node scripts/openapi-check/run.sh

stage "examples: the Go and Node tests of examples/ against a running inboxd"
with_node examples/run.sh

stage "whole-server benchmark smoke test (scripts/bench.sh --quick: every operation answers; no targets)"
scripts/bench.sh --quick

done_stages
