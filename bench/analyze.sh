#!/usr/bin/env bash
# analyze.sh [CAPTURE]
#
# Times `slowstart analyze --json` against its peers on the same large capture in the
# same run: `tshark -q -z conv,tcp` (per-connection totals, single pass) and
# `tcptrace -n -l` (per-connection long statistics: RTT, retransmissions, windows;
# the mode closest to what analyze computes). Prints wall seconds, packets per
# second and peak RSS of each, the ratios, and PASS/FAIL against the targets:
#
#   slowstart at least 30x faster than tshark and 2x faster than tcptrace,
#   peak memory under 200 MB.
#
# Without CAPTURE it makes one with make-capture.sh (needs root) and keeps it at
# $SLOWSTART_BENCH_CAPTURE (default /tmp/slowstart-bench.pcap) for later runs.
# slowstart and tcptrace run 3 times (best kept), tshark once (it is slow).
# Run by hand on a quiet machine; not part of CI.
set -euo pipefail

bench_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
module_dir=$(dirname "$bench_dir")
capture=${1:-${SLOWSTART_BENCH_CAPTURE:-/tmp/slowstart-bench.pcap}}
runs=${SLOWSTART_BENCH_RUNS:-3}

target_vs_tshark=30
target_vs_tcptrace=2
target_peak_mb=200

for tool in go tshark tcptrace capinfos jq /usr/bin/time; do
	if ! command -v "$tool" >/dev/null; then
		echo "$0: $tool is missing: apt-get install -y tshark tcptrace jq time" >&2
		exit 1
	fi
done

work_dir=$(mktemp -d "${TMPDIR:-/tmp}/slowstart-bench.XXXXXX")
trap 'rm -rf "$work_dir"' EXIT

slowstart=$work_dir/slowstart
echo "building slowstart..."
(cd "$module_dir" && CGO_ENABLED=0 go build -trimpath -o "$slowstart" ./cmd/slowstart)

if [[ ! -s $capture ]]; then
	if [[ $# -ge 1 ]]; then
		echo "$0: $capture does not exist or is empty" >&2
		exit 1
	fi
	echo "making $capture (kept for later runs)..."
	"$bench_dir/make-capture.sh" "$capture.tmp"
	mv "$capture.tmp" "$capture"
fi

packets=$(capinfos -c -M "$capture" | awk -F': *' '/Number of packets/ {print $2}')
echo "capture: $capture, $packets packets, $(du -h "$capture" | cut -f1)"
echo "reading it once to have it in the page cache..."
cat "$capture" >/dev/null

# time_best NAME RUNS CMD...: runs CMD (stdout to /dev/null) RUNS times and sets
# best_s and best_kb to the fastest run's wall seconds and that run's peak RSS.
time_best() {
	local name=$1 n=$2
	shift 2
	best_s= best_kb=
	local i s kb
	for ((i = 1; i <= n; i++)); do
		if ! /usr/bin/time -f '%e %M' -o "$work_dir/time" "$@" >/dev/null 2>"$work_dir/stderr"; then
			echo "$0: $name failed:" >&2
			tail -5 "$work_dir/stderr" >&2
			exit 1
		fi
		read -r s kb <"$work_dir/time"
		echo "  $name run $i: ${s}s, $((kb / 1024)) MB"
		if [[ -z $best_s ]] || awk -v a="$s" -v b="$best_s" 'BEGIN {exit !(a < b)}'; then
			best_s=$s best_kb=$kb
		fi
	done
}

echo "timing..."
time_best slowstart "$runs" "$slowstart" analyze --json "$capture"
slowstart_s=$best_s slowstart_kb=$best_kb
time_best tcptrace "$runs" tcptrace -n -l -r "$capture"
tcptrace_s=$best_s tcptrace_kb=$best_kb
time_best tshark 1 tshark -q -z conv,tcp -r "$capture"
tshark_s=$best_s tshark_kb=$best_kb

# What each tool found, as a check that they read the same file the same way.
slowstart_conns=$("$slowstart" analyze --json "$capture" 2>/dev/null | jq '.connections | length' || echo '?')

awk -v packets="$packets" \
	-v ss="$slowstart_s" -v ss_kb="$slowstart_kb" \
	-v tt="$tcptrace_s" -v tt_kb="$tcptrace_kb" \
	-v ts="$tshark_s" -v ts_kb="$tshark_kb" \
	-v want_ts="$target_vs_tshark" -v want_tt="$target_vs_tcptrace" -v want_mb="$target_peak_mb" \
	-v conns="$slowstart_conns" '
function rate(s) { return s > 0 ? packets / s : 0 }
function verdict(ok) { return ok ? "PASS" : "FAIL" }
BEGIN {
	printf "\n%-10s %9s %14s %9s\n", "tool", "seconds", "packets/s", "peak MB"
	printf "%-10s %9.2f %14.0f %9.1f\n", "slowstart", ss, rate(ss), ss_kb / 1024
	printf "%-10s %9.2f %14.0f %9.1f\n", "tcptrace", tt, rate(tt), tt_kb / 1024
	printf "%-10s %9.2f %14.0f %9.1f\n", "tshark", ts, rate(ts), ts_kb / 1024
	vs_ts = ss > 0 ? ts / ss : 0
	vs_tt = ss > 0 ? tt / ss : 0
	printf "\nslowstart found %s connections in %d packets\n", conns, packets
	printf "slowstart vs tshark:   %6.1fx faster (target >= %dx)  %s\n", vs_ts, want_ts, verdict(vs_ts >= want_ts)
	printf "slowstart vs tcptrace: %6.2fx faster (target >= %dx)   %s\n", vs_tt, want_tt, verdict(vs_tt >= want_tt)
	printf "slowstart peak memory: %6.1f MB (target < %d MB)   %s\n", ss_kb / 1024, want_mb, verdict(ss_kb / 1024 < want_mb)
	exit !(vs_ts >= want_ts && vs_tt >= want_tt && ss_kb / 1024 < want_mb)
}'
