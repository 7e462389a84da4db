#!/usr/bin/env bash
# instructions.sh CAPTURE [BIN...]
#
# Counts the instructions `slowstart analyze --json CAPTURE` executes, for
# slowstart built from this tree and for each BIN given (an earlier build, say),
# and prints each count and its ratio to the first. A count of the work, not a
# time: on a shared or virtual machine the wall and CPU seconds of one program
# move by 10 to 30% from one minute to the next, and a change worth 2% is lost in
# that; instructions executed are the same from run to run to within 0.1%.
#
# It runs each binary under valgrind's cachegrind (some 50 times slower than
# natively: about a minute for the 1.8 M-packet edge shape) with GOGC=off, so that
# the collector, whose runs depend on wall-clock readings (internal/gctune), adds
# no work of its own, and GOMAXPROCS=1. What the count does not see: cache misses
# (run cachegrind with --cache-sim=yes for those), the collector, and how the
# work spreads over two cores. So a change is measured here first, then timed
# with shapes.sh. With SLOWSTART_IR_ANNOTATE=1 the per-function counts of each
# binary are kept (cg_annotate FILE lists them).
set -euo pipefail

if (($# < 1)); then
	echo "usage: $0 CAPTURE [BIN...]" >&2
	exit 2
fi
capture=$1
shift
if ! command -v valgrind >/dev/null; then
	echo "$0: valgrind is missing: apt-get install -y valgrind" >&2
	exit 1
fi
bench_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
module_dir=$(dirname "$bench_dir")
work_dir=$(mktemp -d "${TMPDIR:-/tmp}/slowstart-ir.XXXXXX")
trap 'rm -rf "$work_dir"' EXIT

echo "building slowstart..."
(cd "$module_dir" && CGO_ENABLED=0 go build -trimpath -o "$work_dir/slowstart" ./cmd/slowstart)

first=
for bin in "$work_dir/slowstart" "$@"; do
	name=$bin
	[[ $bin == "$work_dir/slowstart" ]] && name="slowstart (this tree)"
	out=/dev/null
	if [[ ${SLOWSTART_IR_ANNOTATE:-} == 1 ]]; then
		out=$(mktemp "${TMPDIR:-/tmp}/slowstart-ir-$(basename "$bin").XXXXXX")
	fi
	if ! GOGC=off GOMAXPROCS=1 valgrind --tool=cachegrind --cache-sim=no --cachegrind-out-file="$out" \
		"$bin" analyze --json "$capture" >/dev/null 2>"$work_dir/log"; then
		echo "$0: $name failed:" >&2
		tail -5 "$work_dir/log" >&2
		exit 1
	fi
	count=$(awk '/I +refs:/ {gsub(",", "", $NF); print $NF}' "$work_dir/log")
	[[ -n $first ]] || first=$count
	awk -v n="$name" -v c="$count" -v f="$first" 'BEGIN {printf "%-40s %16.0f instructions  %.4f\n", n, c, c / f}'
	[[ $out == /dev/null ]] || echo "  per function: cg_annotate $out"
done
