#!/usr/bin/env bash
# Prints the path of the Zipkin server jar (io.zipkin:zipkin-server, the exec jar from Maven Central) the trace
# plugin's tests run as their collector, fetching it once into <repo>/.cache/zipkin/ with Maven.
# Needs java (17 or later) to run it and mvn to fetch it; fails loudly without them.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VERSION="${NODENS_ZIPKIN_VERSION:-3.5.1}"
DIR="$ROOT/.cache/zipkin"
JAR="$DIR/zipkin-server-$VERSION-exec.jar"

command -v java >/dev/null 2>&1 || { echo "zipkin-server: 'java' is not on PATH (apt-get install openjdk-17-jre-headless)" >&2; exit 1; }

if [[ -s "$JAR" ]]; then
  echo "$JAR"
  exit 0
fi

command -v mvn >/dev/null 2>&1 || { echo "zipkin-server: 'mvn' is not on PATH (apt-get install maven); cannot fetch $JAR" >&2; exit 1; }
mkdir -p "$DIR"
echo "zipkin-server: fetching io.zipkin:zipkin-server:$VERSION:jar:exec into $DIR (once)" >&2
# Into a private temp dir first, so that concurrent callers never see a half-written jar.
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
mvn -B -q dependency:copy "-Dartifact=io.zipkin:zipkin-server:$VERSION:jar:exec" "-DoutputDirectory=$tmp" >&2
[[ -s "$tmp/zipkin-server-$VERSION-exec.jar" ]] || { echo "zipkin-server: mvn left no jar in $tmp" >&2; exit 1; }
mv "$tmp/zipkin-server-$VERSION-exec.jar" "$JAR"
echo "$JAR"
