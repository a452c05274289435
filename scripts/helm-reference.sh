#!/usr/bin/env bash
# Prints the directory holding the real `helm` the chart tests run, building it once from the Go module in
# scripts/helm-reference/ (helm.sh/helm/v3's cmd/helm as a `tool`) into <repo>/.cache/helm/<version>/.
# Override with $NODENS_HELM_DIR=/path/to/dir holding an executable helm (printed as is, after a check).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
MOD="$ROOT/scripts/helm-reference"

if [[ -n "${NODENS_HELM_DIR:-}" ]]; then
  [[ -x "$NODENS_HELM_DIR/helm" ]] || { echo "helm-reference: \$NODENS_HELM_DIR=$NODENS_HELM_DIR has no executable helm" >&2; exit 1; }
  echo "$NODENS_HELM_DIR"
  exit 0
fi

VERSION="$(awk '$1 == "helm.sh/helm/v3" && $2 ~ /^v/ { print $2; exit }' "$MOD/go.mod")"
[[ -n "$VERSION" ]] || { echo "helm-reference: no helm.sh/helm/v3 version in $MOD/go.mod" >&2; exit 1; }
DIR="$ROOT/.cache/helm/$VERSION"
STAMP="$(cat "$MOD/go.mod" "$MOD/go.sum" | sha256sum | cut -c1-16)"

built() {
  [[ -x "$DIR/helm" ]] || return 1
  [[ "$(cat "$DIR/stamp" 2>/dev/null)" == "$STAMP" ]] || return 1
  "$DIR/helm" version --template '{{.Version}}' 2>/dev/null | grep -qx "$VERSION"
}

if built; then echo "$DIR"; exit 0; fi

command -v go >/dev/null 2>&1 || { echo "helm-reference: 'go' is not on PATH; cannot build helm $VERSION" >&2; exit 1; }
mkdir -p "$DIR"
# One build at a time: a second caller waits for the first and then finds the binary built.
exec 9>"$DIR.lock"
flock 9
if built; then echo "$DIR"; exit 0; fi

echo "helm-reference: building helm $VERSION into $DIR (once; a few minutes)" >&2
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
# Without the version stamped in, `helm version` says v3.x-unreleased and charts' kubeVersion checks differ.
ldflags="-s -w -X helm.sh/helm/v3/internal/version.version=$VERSION"
( cd "$MOD" && CGO_ENABLED=0 go build -mod=readonly -trimpath -ldflags "$ldflags" -o "$tmp/helm" helm.sh/helm/v3/cmd/helm ) >&2
"$tmp/helm" version --template '{{.Version}}' | grep -qx "$VERSION" || { echo "helm-reference: built helm does not report $VERSION" >&2; exit 1; }
mv -f "$tmp/helm" "$DIR/helm"
echo "$STAMP" >"$DIR/stamp"
echo "$DIR"
