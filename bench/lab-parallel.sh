#!/usr/bin/env bash
# lab-parallel.sh
#
# Runs the same 160 trials (8 response sizes × IW 3 and 10 × 10 trials, over 70 ms
# RTT and 1.2 Mbit/s, as in Dukkipati et al.'s buckets) with `slowstart lab sweep`
# three times in the same run: --parallel 1, 8 and 16. Prints the median flow
# completion time of every point side by side and the wall-clock speed-ups.
#
# Targets, for --parallel 16 against --parallel 1: every point's median FCT (both as
# the paper measures it and as a user waits) within 2%, and at least 5× faster.
# --parallel 8 is printed for comparison. Exits 1 if a target is missed.
# Needs root and jq. The serial sweep takes a few minutes. Run by hand.
set -euo pipefail

bench_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
module_dir=$(dirname "$bench_dir")
target_speedup=5
target_median_percent=2
sizes=3x1448,4x1448,7x1448,10x1448,15x1448,30x1448,50x1448,100x1448

if [[ $(id -u) != 0 ]]; then
	echo "$0: needs root (network namespaces)" >&2
	exit 1
fi
for tool in go jq; do
	if ! command -v "$tool" >/dev/null; then
		echo "$0: $tool is missing: apt-get install -y jq" >&2
		exit 1
	fi
done
work_dir=$(mktemp -d "${TMPDIR:-/tmp}/slowstart-lab-parallel.XXXXXX")
trap 'rm -rf "$work_dir"' EXIT
trap 'exit 130' INT TERM

echo "building slowstart..."
(cd "$module_dir" && go build -o "$work_dir/slowstart" ./cmd/slowstart)

# sweep PARALLEL: runs the sweep into $work_dir/pPARALLEL and prints its wall seconds.
sweep() {
	local start end
	start=$(date +%s.%N)
	"$work_dir/slowstart" lab sweep --rtt 70ms --rate 1.2mbit --iw 3,10 --size "$sizes" \
		--runs 10 --parallel "$1" --out "$work_dir/p$1" >"$work_dir/p$1.log" 2>&1 ||
		{ echo "$0: sweep --parallel $1 failed:" >&2; cat "$work_dir/p$1.log" >&2; exit 1; }
	end=$(date +%s.%N)
	awk -v a="$start" -v b="$end" 'BEGIN { printf "%.1f", b - a }'
}
# medians PARALLEL: one line per point: point, successful trials, median paper FCT, median user FCT.
medians() {
	jq -rs 'def median: sort | if length == 0 then null elif length % 2 == 1 then .[length / 2 | floor] else (.[length / 2 - 1] + .[length / 2]) / 2 end;
		map(select(.error == null or .error == "")) | group_by(.point) | sort_by(.[0].iw, .[0].size_bytes)[] |
		[.[0].point, length, (map(.fct_paper_ms) | median), (map(.fct_user_ms) | median)] | @tsv' "$work_dir/p$1/results.jsonl"
}

echo "sweeping 160 trials with --parallel 1, 8 and 16..."
seconds_1=$(sweep 1)
seconds_8=$(sweep 8)
seconds_16=$(sweep 16)
medians 1 >"$work_dir/m1"
medians 8 >"$work_dir/m8"
medians 16 >"$work_dir/m16"

echo
printf "  %-34s %5s | %9s %9s %9s %7s | %9s %9s %9s %7s\n" "" "" "paper FCT" "median ms" "" "" "user FCT" "median ms" "" ""
printf "  %-34s %5s | %9s %9s %9s %7s | %9s %9s %9s %7s\n" point n "par 1" "par 8" "par 16" "16 vs 1" "par 1" "par 8" "par 16" "16 vs 1"
paste "$work_dir/m1" "$work_dir/m8" "$work_dir/m16" | awk -F'\t' -v tol="$target_median_percent" '
	function pct(a, b) { return b == 0 ? 0 : (a - b) / b * 100 }
	function abs(x) { return x < 0 ? -x : x }
	{
		if ($1 != $5 || $1 != $9) { print "  points differ between runs: " $1 " " $5 " " $9; bad = 1; next }
		n = $2 "/" $6 "/" $10
		dp = pct($11, $3); du = pct($12, $4)
		printf "  %-34s %5s | %9.1f %9.1f %9.1f %+6.2f%% | %9.1f %9.1f %9.1f %+6.2f%%\n", $1, $2, $3, $7, $11, dp, $4, $8, $12, du
		if (abs(dp) > tol || abs(du) > tol || $2 != $10) bad = 1
		worst = abs(dp) > worst ? abs(dp) : worst; worst = abs(du) > worst ? abs(du) : worst
		w8 = abs(pct($7, $3)) > w8 ? abs(pct($7, $3)) : w8; w8 = abs(pct($8, $4)) > w8 ? abs(pct($8, $4)) : w8
	}
	END { printf "  largest difference of a median, --parallel 16 vs 1: %.2f%% (--parallel 8 vs 1: %.2f%%)\n", worst, w8; exit bad }' &&
	medians_ok=1 || medians_ok=0
echo
speedup_16=$(awk -v a="$seconds_1" -v b="$seconds_16" 'BEGIN { printf "%.1f", a / b }')
speedup_8=$(awk -v a="$seconds_1" -v b="$seconds_8" 'BEGIN { printf "%.1f", a / b }')
echo "  wall time: --parallel 1 ${seconds_1} s, --parallel 8 ${seconds_8} s (${speedup_8}×), --parallel 16 ${seconds_16} s (${speedup_16}×)"
failed=0
if [[ $medians_ok == 1 ]]; then
	echo "  PASS  every median within ${target_median_percent}% with --parallel 16 (and every trial succeeded)"
else
	echo "  FAIL  every median within ${target_median_percent}% with --parallel 16 (and every trial succeeded)"
	failed=1
fi
if awk -v s="$speedup_16" -v t="$target_speedup" 'BEGIN { exit !(s >= t) }'; then
	echo "  PASS  --parallel 16 at least ${target_speedup}× faster than --parallel 1 (${speedup_16}×)"
else
	echo "  FAIL  --parallel 16 at least ${target_speedup}× faster than --parallel 1 (${speedup_16}×)"
	failed=1
fi
exit "$failed"
