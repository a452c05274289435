#!/usr/bin/env bash
# Regenerates the geoip plugin's test databases (src/plugin/geoip/testdata/*.mmdb) with MaxMind's writer
# (github.com/maxmind/mmdbwriter, test/fixtures/geoip). The output is committed; run this after changing
# the generator, and commit both.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
out="$PWD/src/plugin/geoip/testdata"
mkdir -p "$out"
(cd test/fixtures/geoip && go run . "$out")
ls -l "$out"
