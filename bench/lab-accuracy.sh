#!/usr/bin/env bash
# lab-accuracy.sh
#
# Checks the lab's link emulator against what it was told to emulate, through the
# real TUN path, and prints each number beside a peer measured in the same run:
#
#   delay  the TCP handshake RTT of 200 `slowstart lab run` trials over a 70 ms path
#          (35 ms each way), from the client-side and server-side captures analyzed
#          with `slowstart analyze --json`; and 200 ICMP echoes, one every 50 ms,
#          from the client namespace to the server: p99 within 0.1 ms of 70 ms.
#          Peers: the same echoes through the emulator with no delay (its own cost)
#          and over a plain veth pair (the kernel's), with iputils ping.
#          Then, independently of the emulator's own timestamps: 200 handshakes
#          captured on both ends' interfaces with kernel timestamps (AF_PACKET),
#          through the emulator and over a veth pair in the same run: the client's
#          handshake RTT, the server kernel's turnaround (SYN in → SYN/ACK out), the
#          path RTT (the two less the turnaround), every packet's one-way error and
#          its parts (read, hold, write). The veth row is this machine's floor: no
#          emulator can give a handshake RTT closer to the configured one than the
#          kernels at both ends give with no emulator at all. The CPU time the
#          hypervisor took from this machine during each part ("steal", from
#          /proc/stat) is printed beside it: its preemptions are the tail.
#   rate   an iperf3 transfer server→client for 10 s (after 2 s of warm-up) over a
#          1.2 Mbit/s and a 100 Mbit/s path: the IP bit rate the emulator wrote into
#          the client namespace, and the receiver's goodput plus 52 bytes of headers
#          per 1448-byte segment, within 1% of the rate.
#   loss   100000 UDP datagrams server→client through 1% loss: the count inside the
#          binomial 99% interval, the same drops with the same seed, other drops
#          with another seed, and nothing lost outside the emulator.
#
# The emulator runs as `slowstart lab` runs it: polling for a trial that runs alone (the
# delay checks, `lab run --parallel 1`), timers only for trials in parallel (printed
# beside it), and spinning before deadlines (link's own default) for comparison. Exits 1 if a target is missed. Needs root, iperf3, iputils-ping, jq.
# Run by hand on a quiet machine; not part of CI.
set -euo pipefail

bench_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
module_dir=$(dirname "$bench_dir")
trials=${SLOWSTART_BENCH_TRIALS:-200}

if [[ $(id -u) != 0 ]]; then
	echo "$0: needs root (network namespaces)" >&2
	exit 1
fi
for tool in go jq iperf3 ping ip; do
	if ! command -v "$tool" >/dev/null; then
		echo "$0: $tool is missing: apt-get install -y jq iperf3 iputils-ping iproute2" >&2
		exit 1
	fi
done

work_dir=$(mktemp -d "${TMPDIR:-/tmp}/slowstart-lab-accuracy.XXXXXX")
veth_ns="ssbench-$$"
cleanup() {
	ip netns del "$veth_ns-a" 2>/dev/null || true
	ip netns del "$veth_ns-b" 2>/dev/null || true
	rm -rf "$work_dir"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

echo "building slowstart and the lab bench helper..."
(cd "$module_dir" && go build -o "$work_dir/slowstart" ./cmd/slowstart && go build -o "$work_dir/labbench" ./bench/lab)
slowstart=$work_dir/slowstart
labbench=$work_dir/labbench
failed=0
verdict() { # verdict OK_EXPRESSION_RESULT DESCRIPTION
	if [[ $1 == 1 ]]; then echo "  PASS  $2"; else echo "  FAIL  $2"; failed=1; fi
}
# percentiles FILE: prints "min p50 p99 max" of the numbers in FILE (one a line).
percentiles() {
	sort -g "$1" | awk '
		function q(p,   pos, lo, hi) { pos = p * (NR - 1) + 1; lo = int(pos); hi = (lo < NR) ? lo + 1 : lo; return x[lo] + (x[hi] - x[lo]) * (pos - lo) }
		{ x[NR] = $1 }
		END { printf "%.3f %.3f %.3f %.3f\n", x[1], q(0.5), q(0.99), x[NR] }'
}
within() { awk -v a="$1" -v b="$2" -v tol="$3" 'BEGIN { d = a - b; if (d < 0) d = -d; print (d <= tol) ? 1 : 0 }'; }

# steal_ticks: the machine's CPU time taken by the hypervisor so far (USER_HZ ticks).
steal_ticks() { awk '/^cpu /{ print $9 }' /proc/stat; }

echo
echo "== delay: handshake RTT of $trials trials over 70 ms (slowstart lab run --capture, analyze --json)"
steal_before=$(steal_ticks)
"$slowstart" lab run --rtt 70ms --size 1 --runs "$trials" --parallel 1 --capture "$work_dir/captures" --json >"$work_dir/run.json"
for side in client server; do
	for pcap in "$work_dir"/captures/*."$side".pcap; do
		"$slowstart" analyze --json "$pcap" | jq -r '.connections[0].handshake_rtt_ms'
	done >"$work_dir/handshake-$side.txt"
	read -r lo p50 p99 hi < <(percentiles "$work_dir/handshake-$side.txt")
	printf "  %-6s side: n=%d min %s  median %s  p99 %s  max %s ms\n" "$side" "$(wc -l <"$work_dir/handshake-$side.txt")" "$lo" "$p50" "$p99" "$hi"
	verdict "$(within "$p99" 70 0.1)" "handshake RTT p99 at the $side within 0.1 ms of 70 ms ($p99 ms)"
done
echo "  hypervisor steal during these trials: $(($(steal_ticks) - steal_before)) ticks of 10 ms over 2 CPUs"

echo
echo "== delay: 200 ICMP echoes every 50 ms from the client namespace"
printf "  %-44s %9s %9s %9s %9s   %s\n" path min median p99 max "iputils ping: min/avg/max/mdev"
ping_row() { # ping_row LABEL ARGS...
	local label=$1
	shift
	"$labbench" ping "$@" >"$work_dir/ping.json"
	jq -r --arg l "$label" '[$l, (.min_ms, .median_ms, .p99_ms, .max_ms | . * 1000 | round / 1000), (.ping_summary | sub("rtt min/avg/max/mdev = "; ""))] | @tsv' "$work_dir/ping.json" |
		awk -F'\t' '{ printf "  %-44s %9s %9s %9s %9s   %s\n", $1, $2, $3, $4, $5, $6 }'
}
steal_before=$(steal_ticks)
ping_row "emulator 70 ms, timers only (parallel trials)" -rtt 70ms
ping_timer_p99=$(jq .p99_ms "$work_dir/ping.json")
ping_row "emulator 70 ms, spinning before deadlines" -rtt 70ms -spin
ping_row "emulator 70 ms, polling (a trial alone)" -rtt 70ms -poll
ping_p99=$(jq .p99_ms "$work_dir/ping.json")
ping_row "emulator 0 ms, polling (its own cost)" -rtt 0ms -poll
ip netns add "$veth_ns-a"
ip netns add "$veth_ns-b"
ip -n "$veth_ns-a" link add veth0 type veth peer name veth0 netns "$veth_ns-b"
ip -n "$veth_ns-a" addr add 198.19.255.1/30 dev veth0
ip -n "$veth_ns-b" addr add 198.19.255.2/30 dev veth0
ip -n "$veth_ns-a" link set veth0 up
ip -n "$veth_ns-b" link set veth0 up
veth_summary=$(ip netns exec "$veth_ns-a" ping -q -c 200 -i 0.05 198.19.255.2 | grep '^rtt' | sed 's/rtt min\/avg\/max\/mdev = //')
printf "  %-44s %9s %9s %9s %9s   %s\n" "veth pair, no emulator (the kernel's cost)" - - - - "$veth_summary"
verdict "$(within "$ping_p99" 70 0.1)" "echo RTT p99 through the emulator as a lone trial runs it (polling) within 0.1 ms of 70 ms ($ping_p99 ms)"
echo "        (timers only, as parallel trials run: p99 $ping_timer_p99 ms)"
echo "  hypervisor steal during the echoes: $(($(steal_ticks) - steal_before)) ticks"

echo
echo "== delay: 200 handshakes every 50 ms, both ends captured with kernel timestamps (AF_PACKET)"
steal_before=$(steal_ticks)
"$labbench" handshake -rtt 70ms -poll -count 200 >"$work_dir/handshake.json"
echo "  hypervisor steal during the handshakes: $(($(steal_ticks) - steal_before)) ticks"
printf "  %-46s %10s %10s %10s %10s\n" "" min median p99 max
handshake_row() { # handshake_row LABEL JQ_PATH UNIT
	jq -r --arg l "$1" --arg u "$3" "$2 | [\$l + \" (\" + \$u + \")\", (.min, .median, .p99, .max | . * 1000 | round / 1000)] | @tsv" "$work_dir/handshake.json" |
		awk -F'\t' '{ printf "  %-46s %10s %10s %10s %10s\n", $1, $2, $3, $4, $5 }'
}
handshake_row "emulator: client handshake RTT" .emulator.client_handshake_ms ms
handshake_row "veth, no emulator: client handshake RTT" .veth.client_handshake_ms ms
handshake_row "emulator: server kernel turnaround" .emulator.server_turnaround_ms ms
handshake_row "veth: server kernel turnaround" .veth.server_turnaround_ms ms
handshake_row "emulator: path RTT (handshake − turnaround)" .emulator.path_rtt_ms ms
handshake_row "veth: path RTT" .veth.path_rtt_ms ms
handshake_row "emulator: one-way error per packet" .emulator.one_way_error_us µs
handshake_row "  of it: kernel hands over → emulator reads" .emulator.read_latency_us µs
handshake_row "  of it: emulator holds − 35 ms" .emulator.hold_error_us µs
handshake_row "  of it: emulator writes → kernel receives" .emulator.write_latency_us µs
handshake_row "veth: one-way time per packet" .veth.one_way_error_us µs
handshake_p99=$(jq .emulator.client_handshake_ms.p99 "$work_dir/handshake.json")
veth_p99=$(jq .veth.client_handshake_ms.p99 "$work_dir/handshake.json")
verdict "$(within "$handshake_p99" 70 0.1)" "kernel-timestamped handshake RTT p99 within 0.1 ms of 70 ms ($handshake_p99 ms)"
echo "        (the floor, a veth pair with no emulator: p99 $veth_p99 ms above 0)"

echo
echo "== rate: iperf3 server→client, 10 s after 2 s of warm-up, 20 ms RTT, default queue"
echo "   IP rate = goodput × (1448 + 52) / 1448: each full segment carries 52 bytes of IPv4 (20),"
echo "   TCP (20) and timestamp option (12) headers; the TUN has no link layer and the emulator's"
echo "   rate counts IP bytes. 'delivered' is what the emulator wrote into the client namespace."
printf "  %-34s %12s %12s %12s %10s %10s\n" path goodput "IP rate" delivered "IP/rate" "deliv/rate"
rate_row() { # rate_row LABEL ARGS... ; leaves the JSON in rate.json
	local label=$1
	shift
	"$labbench" rate "$@" >"$work_dir/rate.json"
	jq -r --arg l "$label" '[$l, (.goodput_bps, .ip_rate_bps, .delivered_ip_bps | . / 1e6 * 1000 | round / 1000 | tostring + " M"), (.ip_rate_over_configured, .delivered_over_configured | . * 10000 | round / 10000)] | @tsv' "$work_dir/rate.json" |
		awk -F'\t' '{ printf "  %-34s %12s %12s %12s %10s %10s\n", $1, $2, $3, $4, $5, $6 }'
}
for rate in 1.2mbit 100mbit; do
	rate_row "$rate, as the lab runs it" -rate "$rate" -seconds 10
	ip_ratio=$(jq .ip_rate_over_configured "$work_dir/rate.json")
	delivered_ratio=$(jq .delivered_over_configured "$work_dir/rate.json")
	verdict "$(within "$ip_ratio" 1 0.01)" "$rate: goodput + headers within 1% of the rate (ratio $ip_ratio)"
	verdict "$(within "$delivered_ratio" 1 0.01)" "$rate: delivered IP rate within 1% of the rate (ratio $delivered_ratio)"
done
rate_row "100mbit, spinning" -rate 100mbit -seconds 10 -spin

echo
echo "== loss: 100000 UDP datagrams server→client through 1% loss"
"$labbench" loss -loss 1% -packets 100000 -seed 7 >"$work_dir/loss.json"
jq -r '"  99% binomial interval: \(.binomial_99_low)..\(.binomial_99_high) lost", (.runs[] | "  seed \(.seed): sent \(.sent), received \(.received), emulator lost \(.emulator_packets_lost), lost elsewhere \(.lost_outside_emulator), drops \(.lost_sequence_hash)")' "$work_dir/loss.json"
jq -e '[.runs[] | .emulator_packets_lost >= $lo and .emulator_packets_lost <= $hi] | all' --argjson lo "$(jq .binomial_99_low "$work_dir/loss.json")" --argjson hi "$(jq .binomial_99_high "$work_dir/loss.json")" "$work_dir/loss.json" >/dev/null && ok=1 || ok=0
verdict "$ok" "every run's losses inside the binomial 99% interval"
verdict "$(jq '[.runs[] | .lost_outside_emulator == 0 and .emulator_packets_in == .sent] | all | if . then 1 else 0 end' "$work_dir/loss.json")" "nothing lost outside the emulator (every datagram reached it; sent = received + emulator's drops)"
verdict "$(jq 'if .same_seed_same_drops then 1 else 0 end' "$work_dir/loss.json")" "the same seed drops the same datagrams"
verdict "$(jq 'if .other_seed_different_drops then 1 else 0 end' "$work_dir/loss.json")" "another seed drops other datagrams"

echo
if [[ $failed != 0 ]]; then
	echo "some targets were missed"
	exit 1
fi
echo "all targets met"
