#!/usr/bin/env bash
# exact-grid.sh
#
# Runs the exact (active) initial-window measurement over the whole lab grid and
# prints one line per point and a summary:
#
#   IW 1, 2, 3, 4, 10, 16, 32, 64 × RTT 20 and 150 ms
#   × cleartext HTTP/1.1, TLS 1.2 with HTTP/1.1, TLS 1.3 with HTTP/2
#   × the built-in server and nginx (skipped when nginx is not installed)
#
# Each point measures 3 fresh connections and must report the route's initcwnd
# as an exact, consistent window. The suite (go test ./probe/exact) runs a
# subset of this grid, the short-response cases and the loss cases; this script
# runs the grid in full through the same test with SLOWSTART_EXACT_GRID=full.
# Needs root (network namespaces, nf_tables, packet capture); takes about 10
# minutes. Exits 1 if a point misses.
set -euo pipefail

bench_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
module_dir=$(dirname "$bench_dir")
cd "$module_dir"

if [ "$(id -u)" -ne 0 ]; then
	echo "exact-grid.sh needs root: network namespaces, nf_tables and packet capture" >&2
	exit 2
fi

log=$(mktemp /tmp/slowstart-exact-grid.XXXXXX)
trap 'rm -f "$log"' EXIT
status=0
SLOWSTART_EXACT_GRID=full go test ./probe/exact -run 'TestExactGrid$' -count=1 -v -timeout 30m >"$log" 2>&1 || status=$?

grep -E 'GRID ' "$log" | sed -E 's/^ *[a-z_]+\.go:[0-9]+: //'
grep -E -- '--- (FAIL|SKIP)' "$log" || true
if [ "$status" -ne 0 ]; then
	echo "FAIL: see the failures above" >&2
	grep -E 'want exact' -A4 "$log" >&2 || tail -30 "$log" >&2
	exit 1
fi
echo PASS
