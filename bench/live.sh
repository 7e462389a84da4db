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
# livecap's reports with `analyze --jsonl` of tcpdump's file, line by line, and
# with `analyze --jsonl` of the packets livecap itself read (written as it read
# them, as view --live --pcap does): those must be the same, times and all. A
# second run at each rate takes the live view's own settings (whole packets,
# per-packet lists, the packet ring) and counts its drops.
#
# Targets, at 1000 Mbit/s: 0 kernel drops, every report the same (as
# tcpdump's without times; as its own packets' with them). The higher
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
		--tap "$work_dir/livecap -i \$CAPTURE_IFACE -snaplen 82 -pcap $work_dir/live-$rate.tee.pcap -out $work_dir/live-$rate.jsonl" | tee "$work_dir/make.log"
	tcpdump_drops=$(grep -o '[0-9]* packets dropped by kernel' "$work_dir/make.log" | cut -d' ' -f1)
	stats=$(tail -1 "$pcap.tap.log")
	live_drops=$(sed -n 's/.*"KernelDrops":\([0-9]*\).*/\1/p' <<<"$stats")
	live_packets=$(sed -n 's/.*"Packets":\([0-9]*\).*/\1/p' <<<"$stats")
	"$work_dir/slowstart" analyze --jsonl "$pcap" >"$work_dir/analyze-$rate.jsonl" 2>/dev/null || true
	total=$(wc -l <"$work_dir/analyze-$rate.jsonl")
	live=$(wc -l <"$work_dir/live-$rate.jsonl")
	same=$(comm -12 <(sort "$work_dir/analyze-$rate.jsonl") <(sort "$work_dir/live-$rate.jsonl") | wc -l)
	# The two taps' timestamps differ: each packet socket stamps an incoming
	# packet as it is handed to it (tcpdump's stamps came 0.5 to 0.8 µs after
	# the live path's; outgoing ones are the same), and where the kernel's
	# stamps go back the live path raises such a stamp to the one before while
	# a file keeps it. So the reports are compared without their times and
	# notes, and without the times the verdict's reasons quote ("the path's
	# round trip (0.009 ms)"); a few connections' round boundaries still move
	# with those microseconds.
	untimed() { sed -E 's/"[a-z_]+(_ms|_rtts)":[-0-9.eE+]+,?//g; s/"notes":\[[^]]*\],?//g; s/[0-9]+(\.[0-9]+)? ms/N ms/g' "$1" | sort; }
	same_untimed=$(comm -12 <(untimed "$work_dir/analyze-$rate.jsonl") <(untimed "$work_dir/live-$rate.jsonl") | wc -l)
	clamped=$(sed -n 's/.*"ClampedTimestamps":\([0-9]*\).*/\1/p' <<<"$stats")
	# The live path against analyze of the very packets it read (livecap
	# -pcap, as view --live --pcap writes them): the same stamps, so the same
	# reports, times and all.
	"$work_dir/slowstart" analyze --jsonl "$work_dir/live-$rate.tee.pcap" >"$work_dir/tee-$rate.jsonl" 2>/dev/null || true
	tee_total=$(wc -l <"$work_dir/tee-$rate.jsonl")
	tee_same=$(comm -12 <(sort "$work_dir/tee-$rate.jsonl") <(sort "$work_dir/live-$rate.jsonl") | wc -l)
	rm -f "$work_dir/live-$rate.tee.pcap"
	echo "live path: $live_packets packets, $live_drops dropped by the kernel, $clamped stamps raised; tcpdump: $tcpdump_drops dropped"
	echo "reports: analyze of the tcpdump file $total, live $live; the same: $same, without times $same_untimed"
	echo "reports: analyze of the live path's own packets $tee_total, the same as live (times and all): $tee_same"
	if ((rate <= 1000)); then
		check "$rate Mbit/s live kernel drops" "$(awk_ok "$live_drops == 0 && $tcpdump_drops == 0")" "live $live_drops, tcpdump $tcpdump_drops (target 0)"
		check "$rate Mbit/s same reports (without times)" "$(awk_ok "$same_untimed == $total && $live == $total")" "$same_untimed of $total ($same with times)"
		check "$rate Mbit/s same reports as analyze of the packets it read" "$(awk_ok "$tee_same == $tee_total && $live == $tee_total")" "$tee_same of $tee_total"
	fi
	rm -f "$pcap"
	# The live view's own settings: whole packets, per-packet lists, the
	# packet ring.
	"$bench_dir/make-capture.sh" "$pcap" --shape bulk --rate-mbit "$rate" \
		--tap "$work_dir/livecap -i \$CAPTURE_IFACE -packets -ring -out $work_dir/view-$rate.jsonl" >/dev/null
	stats=$(tail -1 "$pcap.tap.log")
	view_drops=$(sed -n 's/.*"KernelDrops":\([0-9]*\).*/\1/p' <<<"$stats")
	view_packets=$(sed -n 's/.*"KernelPackets":\([0-9]*\).*/\1/p' <<<"$stats")
	echo "as view --live (whole packets, per-packet lists, packet ring): $view_drops of $view_packets dropped by the kernel"
	rm -f "$pcap" "$pcap.tap.log"
done
echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
exit $failed
