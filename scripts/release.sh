#!/usr/bin/env bash
# Builds fully static inboxd binaries for linux/amd64 and linux/arm64 into dist/, stamps the
# version, and writes SHA-256 checksums. SQLite is cgo, so each target needs a C compiler:
# gcc for the host and Debian's gcc-aarch64-linux-gnu for arm64 (installed when missing).
#
#   scripts/release.sh [VERSION]      (default: git describe)
set -euo pipefail
cd "$(dirname "$0")/.."

TAGS='sqlite_omit_load_extension osusergo netgo'
VERSION=${1:-$(git describe --tags --always --dirty 2>/dev/null || echo dev)}
COMMIT=$(git rev-parse HEAD 2>/dev/null || echo unknown)
OUT=dist
mkdir -p "$OUT"

need_cc() { # need_cc COMPILER PACKAGE
  command -v "$1" >/dev/null 2>&1 && return 0
  echo "== installing $2 for $1"
  if [ "$(id -u)" = 0 ]; then SUDO=; else SUDO=sudo; fi
  $SUDO apt-get update -qq && $SUDO apt-get install -y -qq "$2" >/dev/null
}

build() { # build GOARCH CC
  local arch=$1 cc=$2 bin="$OUT/inboxd-linux-$1"
  echo "== $bin ($VERSION)"
  CGO_ENABLED=1 GOOS=linux GOARCH="$arch" CC="$cc" \
    go build -trimpath -tags "$TAGS" \
      -ldflags "-s -w -X main.version=$VERSION -X main.commitID=$COMMIT -linkmode external -extldflags '-static'" \
      -o "$bin" .
  # A static binary has no program interpreter; refuse to ship anything else.
  if readelf -l "$bin" | grep -q 'Requesting program interpreter'; then
    echo "$bin is dynamically linked" >&2; exit 1
  fi
}

need_cc gcc gcc
build amd64 gcc
need_cc aarch64-linux-gnu-gcc gcc-aarch64-linux-gnu
build arm64 aarch64-linux-gnu-gcc

(cd "$OUT" && sha256sum inboxd-linux-amd64 inboxd-linux-arm64 > SHA256SUMS)
cat "$OUT/SHA256SUMS"
