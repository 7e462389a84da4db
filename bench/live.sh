#!/usr/bin/env bash
# live.sh [RATE_MBIT...]
#
# Measures slowstart's live packet path (capture.OpenLive and live.Watch, what
# `view --live` and the probe's own capture run) on mixed traffic over a veth
# pair: for each rate (default 1000, then 2000 and 3000 Mbit/s), make-capture.sh
# --shape bulk sends iperf3 streams at that rate in all for 8 s beside 12,000
# short nginx connections, captured at the client by tcpdump -s 96 and, on the
# same interface at the same time, by bench/livecap (snap length 82: the same
# bytes from the IP header on). It prints the kernel drops of both; compares
# the packets livecap read (written as it read them, as view --live --pcap
# does) with tcpdump's, packet by packet (bench/samepackets); compares
# livecap's reports with `analyze --jsonl` of those packets, times and all,
# and with `analyze --jsonl` of tcpdump's file, line by line. A second run at
# each rate takes the live view's own settings (whole packets, per-packet
# lists, the packet ring) and counts its drops.
#
# Two packet sockets on one interface do not see the same packets quite the
# same way: each stamps an incoming packet as the kernel hands it over (the
# veth's packets carry no receive stamp of their own), and packets received
# on both cores at once reach the two in either order. So the reports of
# tcpdump's file may differ from the live path's where the two taps ordered
# a connection's packets differently or stamped them microseconds apart: a
# round boundary moves with them on these 0.03 ms paths.
#
# Targets, at 1000 Mbit/s: 0 kernel drops; tcpdump's packets, every one,
# byte for byte; the same reports as analyze of the packets it read, times
# and all. Those two say that the live path reports what analyze of
# tcpdump's file reports, given the stamps and order the live path's own
# socket saw; the script counts the reports of tcpdump's file that differ
# without times and says for each what the two taps did with its packets.
# The higher rates say how far the path goes before it drops. Needs root and
# what make-capture.sh needs. Exit 1 if a target is missed.
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
	go build -o "$work_dir/livecap" ./bench/livecap &&
	go build -o "$work_dir/samepackets" ./bench/samepackets)

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
	# Reports are compared without their times and notes, and without the
	# times the verdict's reasons quote ("the path's round trip (0.009 ms)").
	untimed() { sed -E 's/"[a-z_]+(_ms|_rtts)":[-0-9.eE+]+,?//g; s/"notes":\[[^]]*\],?//g; s/[0-9]+(\.[0-9]+)? ms/N ms/g' "$1" | sort; }
	untimed "$work_dir/analyze-$rate.jsonl" >"$work_dir/analyze-$rate.untimed"
	untimed "$work_dir/live-$rate.jsonl" >"$work_dir/live-$rate.untimed"
	same_untimed=$(comm -12 "$work_dir/analyze-$rate.untimed" "$work_dir/live-$rate.untimed" | wc -l)
	clamped=$(sed -n 's/.*"ClampedTimestamps":\([0-9]*\).*/\1/p' <<<"$stats")
	# The live path against analyze of the very packets it read (livecap
	# -pcap, as view --live --pcap writes them): the same stamps, so the same
	# reports, times and all.
	"$work_dir/slowstart" analyze --jsonl "$work_dir/live-$rate.tee.pcap" >"$work_dir/tee-$rate.jsonl" 2>/dev/null || true
	tee_total=$(wc -l <"$work_dir/tee-$rate.jsonl")
	tee_same=$(comm -12 <(sort "$work_dir/tee-$rate.jsonl") <(sort "$work_dir/live-$rate.jsonl") | wc -l)
	# Those packets against tcpdump's: every one, byte for byte, in each
	# direction of each connection; and for each connection, whether the two
	# taps ordered its packets the same and how far apart they stamped them.
	echo "packets: tcpdump's file against those the live path read"
	packets_rc=0
	"$work_dir/samepackets" -connections "$work_dir/connections-$rate.txt" "$pcap" "$work_dir/live-$rate.tee.pcap" |
		tee "$work_dir/samepackets-$rate.log" || packets_rc=$?
	rm -f "$work_dir/live-$rate.tee.pcap"
	# Each connection whose report (without times) differs from tcpdump's,
	# with what the two taps did with its packets. analyze is a function of
	# the packets, their order and their stamps; the packets are the same
	# (the check below), and so are the reports of the same stamps (the
	# check after it): what differs is the order or the stamps.
	comm -23 "$work_dir/analyze-$rate.untimed" "$work_dir/live-$rate.untimed" |
		sed -nE 's/.*"client":"([^"]+)","server":"([^"]+)".*/\1 \2/p' | sort -u >"$work_dir/differ-$rate.txt"
	reordered=$(awk '$3 == "other"' "$work_dir/connections-$rate.txt" | wc -l)
	awk -v list="$work_dir/differ-$rate.txt" '
		BEGIN {
			while ((getline line < list) > 0) {
				split(line, e, " ")
				want[e[1] " " e[2]] = want[e[2] " " e[1]] = line
				labels[line] = 1
			}
		}
		($1 " " $2) in want {
			label = want[$1 " " $2]
			printf "  %s: packets in the %s order, stamps up to %.1f us apart\n", label, $3, $4 / 1000
			delete labels[label]
		}
		END { for (label in labels) print "  " label ": not among the packets" }' "$work_dir/connections-$rate.txt" >"$work_dir/differ-$rate.log"
	echo "live path: $live_packets packets, $live_drops dropped by the kernel, $clamped stamps raised; tcpdump: $tcpdump_drops dropped"
	echo "reports: analyze of the tcpdump file $total, live $live; the same: $same, without times $same_untimed"
	echo "reports: analyze of the live path's own packets $tee_total, the same as live (times and all): $tee_same"
	echo "connections whose packets the two taps ordered differently: $reordered of $(wc -l <"$work_dir/connections-$rate.txt"); reports of tcpdump's file that differ from the live path's without times:"
	cat "$work_dir/differ-$rate.log"
	if ((rate <= 1000)); then
		check "$rate Mbit/s live kernel drops" "$(awk_ok "$live_drops == 0 && $tcpdump_drops == 0")" "live $live_drops, tcpdump $tcpdump_drops (target 0)"
		check "$rate Mbit/s the same packets as tcpdump's" "$(awk_ok "$packets_rc == 0")" "$(grep '^directions' "$work_dir/samepackets-$rate.log" || echo "samepackets exit $packets_rc")"
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
