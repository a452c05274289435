#!/usr/bin/env bash
# Prints the directory holding the real kube-apiserver, etcd and kubectl the tests run, building them once from
# the Go module in scripts/k8s-reference/ into <repo>/.cache/k8s/<version>/ if they are not there yet.
# The version is the k8s.io/kubernetes that module requires. The first build takes about 7 minutes on 2 cores.
# Override with $NODENS_K8S_DIR=/path/to/dir holding the three binaries (printed as is, after a check).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
MOD="$ROOT/scripts/k8s-reference"
BINS=(kube-apiserver etcd kubectl)

if [[ -n "${NODENS_K8S_DIR:-}" ]]; then
  for b in "${BINS[@]}"; do
    [[ -x "$NODENS_K8S_DIR/$b" ]] || { echo "k8s-reference: \$NODENS_K8S_DIR=$NODENS_K8S_DIR has no executable $b" >&2; exit 1; }
  done
  echo "$NODENS_K8S_DIR"
  exit 0
fi

VERSION="$(awk '$1 == "k8s.io/kubernetes" && $2 ~ /^v/ { print $2; exit }' "$MOD/go.mod")"
[[ -n "$VERSION" ]] || { echo "k8s-reference: no k8s.io/kubernetes version in $MOD/go.mod" >&2; exit 1; }
DIR="$ROOT/.cache/k8s/$VERSION"
# The stamp names the wrapper module's content: a changed go.mod, go.sum or main rebuilds.
STAMP="$(cat "$MOD/go.mod" "$MOD/go.sum" "$MOD"/*/main.go | sha256sum | cut -c1-16)"

built() {
  local b
  for b in "${BINS[@]}"; do [[ -x "$DIR/$b" ]] || return 1; done
  [[ "$(cat "$DIR/stamp" 2>/dev/null)" == "$STAMP" ]] || return 1
  [[ "$("$DIR/kube-apiserver" --version 2>/dev/null)" == "Kubernetes $VERSION" ]]
}

if built; then echo "$DIR"; exit 0; fi

command -v go >/dev/null 2>&1 || { echo "k8s-reference: 'go' is not on PATH; cannot build Kubernetes $VERSION" >&2; exit 1; }
mkdir -p "$DIR"
# One build at a time: a second caller waits for the first and then finds the binaries built.
exec 9>"$DIR.lock"
flock 9
if built; then echo "$DIR"; exit 0; fi

echo "k8s-reference: building kube-apiserver, etcd and kubectl $VERSION into $DIR (once; takes about 7 minutes)" >&2
# Build in a private temp dir so that no caller ever sees a half-written binary.
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
# Without the version stamped in, the binaries report v0.0.0-master and kubectl warns about version skew.
ldflags="-s -w -X k8s.io/component-base/version.gitVersion=$VERSION -X k8s.io/client-go/pkg/version.gitVersion=$VERSION"
ldflags+=" -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$(cut -d. -f2 <<<"$VERSION")"
( cd "$MOD" && CGO_ENABLED=0 go build -mod=readonly -trimpath -ldflags "$ldflags" -o "$tmp/" ./kube-apiserver ./etcd ./kubectl ) >&2
[[ "$("$tmp/kube-apiserver" --version)" == "Kubernetes $VERSION" ]] || { echo "k8s-reference: built kube-apiserver does not report $VERSION" >&2; exit 1; }
for b in "${BINS[@]}"; do mv -f "$tmp/$b" "$DIR/$b"; done
echo "$STAMP" >"$DIR/stamp"
echo "$DIR"
