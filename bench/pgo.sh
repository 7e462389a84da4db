#!/usr/bin/env bash
# pgo.sh [SHAPE...]
#
# Makes cmd/slowstart/default.pgo, the CPU profile `go build` optimizes the
# slowstart binary with (profile-guided optimization: the compiler inlines the
# calls the profile shows hot and calls the usual type of an interface
# directly). It runs bench/profile (the analyze pipeline, each connection
# rendered as JSON as `analyze --json` does) over the captures of
# bench/shapes.sh, the 4x copies where they exist (more samples), and once
# more each with the text of `analyze`, and merges the profiles into one.
#
# The profile holds function names and line offsets within them, not
# addresses: code changed since it was taken is compiled as without it, and
# nothing is ever compiled wrong for a stale profile, only less well. Take it
# again when the hot path changed (bench/instructions.sh shows what it
# gains: on 2026-11-28, 9 to 10% fewer instructions on mixed and https).
#
# Shapes: those of shapes.sh (default: all whose captures exist in
# $SLOWSTART_BENCH_DIR, default /tmp/slowstart-shapes; run shapes.sh first to
# make them).
set -euo pipefail
bench_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
module_dir=$(dirname "$bench_dir")
dir=${SLOWSTART_BENCH_DIR:-/tmp/slowstart-shapes}
shapes=("$@")
((${#shapes[@]})) || shapes=(mixed bulk lossy edge50k edge https vlan6)

work_dir=$(mktemp -d "${TMPDIR:-/tmp}/slowstart-pgo.XXXXXX")
trap 'rm -rf "$work_dir"' EXIT
(cd "$module_dir" && go build -o "$work_dir/profile" ./bench/profile)

profiles=()
for shape in "${shapes[@]}"; do
	# The 4x copy where one is kept, for more samples; edge50k at 1x (some 7 s
	# alone, as long as another shape's 4x copy) and bulk at 1x (its path is
	# that of mixed's bulk downloads, which mixed's profile holds already).
	capture=$dir/$shape-4x.pcap
	[[ -s $capture && $shape != edge50k && $shape != bulk ]] || capture=$dir/$shape.pcap
	if [[ ! -s $capture ]]; then
		echo "$0: no capture of $shape in $dir (bench/shapes.sh $shape makes it)" >&2
		continue
	fi
	echo "profiling $shape ($capture)..."
	"$work_dir/profile" -cpu "$work_dir/$shape.pprof" "$capture"
	profiles+=("$work_dir/$shape.pprof")
	# And the text people read (`analyze`), once on the capture itself: its
	# own writer is hot too, and must not fall behind the JSON's.
	"$work_dir/profile" -cpu "$work_dir/$shape-text.pprof" -render text "$dir/$shape.pcap"
	profiles+=("$work_dir/$shape-text.pprof")
done
if ((${#profiles[@]} == 0)); then
	echo "$0: no capture to profile" >&2
	exit 1
fi
out=$module_dir/cmd/slowstart/default.pgo
(cd "$module_dir" && go tool pprof -proto "${profiles[@]}" >"$work_dir/merged.pprof")
mv "$work_dir/merged.pprof" "$out"
echo "wrote $out ($(stat -c %s "$out") bytes, ${#profiles[@]} profiles)"
