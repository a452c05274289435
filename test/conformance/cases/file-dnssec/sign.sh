#!/bin/sh
# Regenerates db.signed.example (NSEC, ECDSAP256SHA256, signatures valid 2024-01-01 .. 2044-01-01) from
# db.signed.example.unsigned with bind9-utils. Run in this folder; the output is committed.
set -eu
tmp=$(mktemp -d)
cp db.signed.example.unsigned "$tmp/db"
cd "$tmp"
zsk=$(dnssec-keygen -q -a ECDSAP256SHA256 signed.example)
ksk=$(dnssec-keygen -q -a ECDSAP256SHA256 -f KSK signed.example)
cat "$zsk.key" "$ksk.key" >> db
dnssec-signzone -q -o signed.example -s 20240101000000 -e 20440101000000 -f db.signed -k "$ksk" db "$zsk"
cd - >/dev/null
cp "$tmp/db.signed" db.signed.example
rm -rf "$tmp"
