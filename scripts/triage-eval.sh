#!/usr/bin/env bash
# Quality and speed of the built-in triage model (issues 7 and 29): how it does on mail it
# was never trained on, how sure it is, and its speed and memory on one core.
# fixtures/triage/README.md says what each file is; BENCHMARKS.md "Triage" has the figures.
#
#   scripts/triage-eval.sh               # hand-written test sets, the generator's held-out
#                                        # split, speed and memory (~20 s)
#   scripts/triage-eval.sh --folds       # also: unseen kinds (5 folds) and unseen writers (one
#                                        # fold per writer): retrains eleven models (~10 min)
#   scripts/triage-eval.sh --reproduce   # first regenerate corpus and model into a temp dir and
#                                        # check they equal the committed files byte for byte
set -euo pipefail
cd "$(dirname "$0")/.."
TAGS='sqlite_omit_load_extension osusergo netgo'
WRITTEN='fixtures/triage/written/*.jsonl'

args=()
reproduce=0
for a in "$@"; do
  case "$a" in
    --reproduce) reproduce=1 ;;
    --folds) args+=(-folds) ;;
    *) args+=("$a") ;;
  esac
done

echo "== triage eval, $(date -u +%Y-%m-%dT%H:%M:%SZ), $(go version | cut -d' ' -f3-4), $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
if [ "$reproduce" = 1 ]; then
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  echo "== regenerating the corpus and retraining the model in $tmp"
  go run -tags "$TAGS" ./fixtures/triage/gen -out "$tmp/corpus.jsonl" 2>/dev/null
  cmp fixtures/triage/corpus.jsonl "$tmp/corpus.jsonl"
  go run -tags "$TAGS" ./mail/triage/train -corpus "$tmp/corpus.jsonl" -written "$WRITTEN" -out "$tmp/model.json" 2>/dev/null
  cmp mail/triage/model.json "$tmp/model.json"
  echo "corpus and model are reproduced byte for byte"
  echo
fi
go run -tags "$TAGS" ./mail/triage/eval -written "$WRITTEN" "${args[@]}"
echo "== load at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
