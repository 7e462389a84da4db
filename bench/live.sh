#!/usr/bin/env bash
# live.sh [RATE_MBIT...]
#
# Measures slowstart's live packet path (capture.OpenLive and live.Watch, what
# `view --live` and the probe's own capture run) on mixed traffic over a veth
# pair: for each rate (default 1000, then 2000 and 3000 Mbit/s), make-capture.sh
# --shape bulk sends iperf3 streams at that rate in all for 8 s beside 12,000
# short nginx connections, captured at the client by tcpdump -s 96 and, on the
# same interface at the same time, by bench/livecap (snap length 82: the same
# bytes from the IP header on). It prints the kernel drops of both, and compares
# livecap's reports with `analyze --jsonl` of tcpdump's file, line by line.
#
# Targets, at 1000 Mbit/s: 0 kernel drops, every report the same. The higher
# rates say how far the path goes before it drops. Needs root and what
# make-capture.sh needs. Exit 1 if a target is missed.
set -euo pipefail

bench_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
module_dir=$(dirname "$bench_dir")
rates=("$@")
((${#rates[@]})) || rates=(1000 2000 3000)
if [[ $(id -u) != 0 ]]; then
	echo "$0: needs root (it makes network namespaces)" >&2
	exit 1
fi
work_dir=$(mktemp -d "${TMPDIR:-/tmp}/slowstart-live.XXXXXX")
trap 'rm -rf "$work_dir"' EXIT
failed=0
# shellcheck source=measure.sh
source "$bench_dir/measure.sh"

echo "building slowstart and livecap..."
(cd "$module_dir" && CGO_ENABLED=0 go build -trimpath -o "$work_dir/slowstart" ./cmd/slowstart &&
	go build -o "$work_dir/livecap" ./bench/livecap)

for rate in "${rates[@]}"; do
	echo
	echo "== $rate Mbit/s"
	pcap=$work_dir/live-$rate.pcap
	"$bench_dir/make-capture.sh" "$pcap" --shape bulk --rate-mbit "$rate" \
		--tap "$work_dir/livecap -i \$CAPTURE_IFACE -snaplen 82 -out $work_dir/live-$rate.jsonl" | tee "$work_dir/make.log"
	tcpdump_drops=$(grep -o '[0-9]* packets dropped by kernel' "$work_dir/make.log" | cut -d' ' -f1)
	stats=$(tail -1 "$pcap.tap.log")
	live_drops=$(sed -n 's/.*"KernelDrops":\([0-9]*\).*/\1/p' <<<"$stats")
	live_packets=$(sed -n 's/.*"Packets":\([0-9]*\).*/\1/p' <<<"$stats")
	"$work_dir/slowstart" analyze --jsonl "$pcap" >"$work_dir/analyze-$rate.jsonl" 2>/dev/null || true
	total=$(wc -l <"$work_dir/analyze-$rate.jsonl")
	live=$(wc -l <"$work_dir/live-$rate.jsonl")
	same=$(comm -12 <(sort "$work_dir/analyze-$rate.jsonl") <(sort "$work_dir/live-$rate.jsonl") | wc -l)
	echo "live path: $live_packets packets, $live_drops dropped by the kernel; tcpdump: $tcpdump_drops dropped"
	echo "reports: analyze of the tcpdump file $total, live $live, the same $same"
	if ((same != total || live != total)); then
		diff <(sort "$work_dir/analyze-$rate.jsonl") <(sort "$work_dir/live-$rate.jsonl") | head -4 | cut -c1-300
	fi
	if ((rate <= 1000)); then
		check "$rate Mbit/s live kernel drops" "$(awk_ok "$live_drops == 0 && $tcpdump_drops == 0")" "live $live_drops, tcpdump $tcpdump_drops (target 0)"
		check "$rate Mbit/s same reports" "$(awk_ok "$same == $total && $live == $total")" "$same of $total"
	fi
	rm -f "$pcap"
done
exit $failed
