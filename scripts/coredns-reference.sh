#!/usr/bin/env bash
# Prints the path of the reference CoreDNS binary (the version in <repo>/coredns.version), building it once into
# <repo>/.cache/coredns/v<version>/ with `go install` if it is not there yet.
# Override with $NODENS_COREDNS=/path/to/coredns (printed as is, after a check that it runs), or build another
# release with $NODENS_COREDNS_VERSION=v1.x.y.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VERSION="${NODENS_COREDNS_VERSION:-v$(tr -d '[:space:]' <"$ROOT/coredns.version")}"

if [[ -n "${NODENS_COREDNS:-}" ]]; then
  if [[ ! -x "$NODENS_COREDNS" ]]; then
    echo "coredns-reference: \$NODENS_COREDNS=$NODENS_COREDNS is not an executable file" >&2
    exit 1
  fi
  echo "$NODENS_COREDNS"
  exit 0
fi

DIR="$ROOT/.cache/coredns/$VERSION"
BIN="$DIR/coredns"
want="CoreDNS-${VERSION#v}"

# The first line of `coredns -version` names the version. (Read it whole: `| grep -q` under pipefail would fail
# whenever grep exits before coredns has written its second line.)
reports() { local out; out="$("$1" -version 2>/dev/null || true)"; [[ "$(head -n1 <<<"$out")" == "$want" ]]; }

if [[ -x "$BIN" ]] && reports "$BIN"; then
  echo "$BIN"
  exit 0
fi

command -v go >/dev/null 2>&1 || { echo "coredns-reference: 'go' is not on PATH; cannot build CoreDNS $VERSION" >&2; exit 1; }
mkdir -p "$DIR"
echo "coredns-reference: building CoreDNS $VERSION into $DIR (once; takes a few minutes)" >&2
# Build in a private temp dir so that concurrent callers never see a half-written binary.
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
( cd "$tmp" && GOBIN="$tmp" go install "github.com/coredns/coredns@$VERSION" ) >&2
reports "$tmp/coredns" || { echo "coredns-reference: built binary does not report $want" >&2; exit 1; }
mv -f "$tmp/coredns" "$BIN"
echo "$BIN"
