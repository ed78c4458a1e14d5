#!/usr/bin/env bash
# Quality and speed of the built-in triage model (issue 7), on the held-out split of the
# labelled corpus in fixtures/triage/: accuracy of each head, confusion matrices,
# calibration, baselines, hand-written messages, throughput on one core and memory.
#
#   scripts/triage-eval.sh               # the figures of BENCHMARKS.md "Triage"
#   scripts/triage-eval.sh --unseen      # also: kinds of mail the model never saw (retrains 5 models, ~1 min)
#   scripts/triage-eval.sh --reproduce   # first regenerate corpus and model into a temp dir and
#                                        # check they equal the committed files byte for byte
set -euo pipefail
cd "$(dirname "$0")/.."
TAGS='sqlite_omit_load_extension osusergo netgo'

args=()
reproduce=0
for a in "$@"; do
  case "$a" in
    --reproduce) reproduce=1 ;;
    *) args+=("$a") ;;
  esac
done

echo "== triage eval, $(date -u +%Y-%m-%dT%H:%M:%SZ), $(go version | cut -d' ' -f3-4), $(nproc) cores"
if [ "$reproduce" = 1 ]; then
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  echo "== regenerating the corpus and retraining the model in $tmp"
  go run -tags "$TAGS" ./fixtures/triage/gen -out "$tmp/corpus.jsonl" 2>/dev/null
  cmp fixtures/triage/corpus.jsonl "$tmp/corpus.jsonl"
  go run -tags "$TAGS" ./mail/triage/train -corpus "$tmp/corpus.jsonl" -out "$tmp/model.json" 2>/dev/null
  cmp mail/triage/model.json "$tmp/model.json"
  echo "corpus and model are reproduced byte for byte"
  echo
fi
go run -tags "$TAGS" ./mail/triage/eval "${args[@]}"
