#!/usr/bin/env bash
# lab-throughput.sh
#
# Goodput of one TCP transfer (iperf3 -R: server→client, 10 s measured after 2 s of
# warm-up, cubic) through the lab's link emulator with no rate limit, at 0 ms and at
# 20 ms RTT, against the same transfer over a plain veth pair between two network
# namespaces with no emulator (the ceiling: once with the kernel's offloads, once
# with GSO/TSO/GRO off so that every packet is at most 1500 bytes, as on the
# emulator's TUN devices). All in the same run; prints Gbit/s and the ratios.
#
# Target: at least 1 Gbit/s through the emulator at 20 ms RTT, set up as
# `slowstart lab` sets it up (mahimahi's users report about 300 Mbit/s).
#
# Socket buffers: the bandwidth-delay product at 20 ms and 1+ Gbit/s is 2.5 MB and
# more, and the kernel's default autotuning limits (tcp_rmem 6 MB, tcp_wmem 4 MB)
# would cap the window near it, so every namespace here gets tcp_rmem and tcp_wmem
# up to 32 MB. These sysctls are per namespace: the host's are not touched.
#
# "As the lab runs it": a bulk transfer on a path with no rate limit runs on timers
# even alone (polling is for timed transfers; see lab.pollMaxUnlimitedBytes). It is
# also run polling, with the TUN devices' txqueuelen raised to 10000, and spinning
# before deadlines, for comparison (not targets). Exits 1 if the target is
# missed. Needs root, iperf3, ethtool, jq. Run by hand on a quiet machine.
set -euo pipefail

bench_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
module_dir=$(dirname "$bench_dir")
seconds=${SLOWSTART_BENCH_SECONDS:-10}
target_gbps=1

if [[ $(id -u) != 0 ]]; then
	echo "$0: needs root (network namespaces)" >&2
	exit 1
fi
for tool in go jq iperf3 ethtool ip; do
	if ! command -v "$tool" >/dev/null; then
		echo "$0: $tool is missing: apt-get install -y jq iperf3 ethtool iproute2" >&2
		exit 1
	fi
done

work_dir=$(mktemp -d "${TMPDIR:-/tmp}/slowstart-lab-throughput.XXXXXX")
veth_ns="ssbench-$$"
iperf_server_pid=
cleanup() {
	[[ -n $iperf_server_pid ]] && kill "$iperf_server_pid" 2>/dev/null || true
	ip netns del "$veth_ns-c" 2>/dev/null || true
	ip netns del "$veth_ns-s" 2>/dev/null || true
	rm -rf "$work_dir"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

echo "building the lab bench helper..."
(cd "$module_dir" && go build -o "$work_dir/labbench" ./bench/lab)
labbench=$work_dir/labbench

# veth_goodput OFFLOADS(on|off): iperf3 -R over a fresh veth pair; prints bit/s.
veth_goodput() {
	local offloads=$1 ns
	for ns in "$veth_ns-c" "$veth_ns-s"; do
		ip netns add "$ns"
		ip netns exec "$ns" sysctl -q -w net.ipv4.tcp_rmem="4096 131072 33554432" net.ipv4.tcp_wmem="4096 65536 33554432" net.ipv4.tcp_congestion_control=cubic
		ip -n "$ns" link set lo up
	done
	ip -n "$veth_ns-c" link add veth0 type veth peer name veth0 netns "$veth_ns-s"
	ip -n "$veth_ns-c" addr add 198.19.254.1/30 dev veth0
	ip -n "$veth_ns-s" addr add 198.19.254.2/30 dev veth0
	for ns in "$veth_ns-c" "$veth_ns-s"; do
		ip -n "$ns" link set veth0 up
		if [[ $offloads == off ]]; then
			ip netns exec "$ns" ethtool -K veth0 gso off tso off gro off >/dev/null 2>&1
		fi
	done
	ip netns exec "$veth_ns-s" iperf3 -s -1 -B 198.19.254.2 >/dev/null 2>&1 &
	iperf_server_pid=$!
	local tries=0
	# Wait until the server listens: a client that finds no server may still
	# exit 0 with -J (the error is in the JSON).
	until ip -n "$veth_ns-s" -o addr show >/dev/null && ip netns exec "$veth_ns-s" ss -Hltn 'sport = :5201' | grep -q LISTEN; do
		tries=$((tries + 1))
		if ((tries > 200)); then
			echo "$0: the iperf3 server in $veth_ns-s did not listen" >&2
			exit 1
		fi
		sleep 0.02
	done
	ip netns exec "$veth_ns-c" iperf3 -c 198.19.254.2 -R -J -t "$seconds" -O 2 >"$work_dir/veth.json" 2>/dev/null || true
	if [[ $(jq -r '.error // empty' "$work_dir/veth.json") != "" ]]; then
		echo "$0: iperf3 over the veth pair failed: $(jq -r .error "$work_dir/veth.json")" >&2
		exit 1
	fi
	kill "$iperf_server_pid" 2>/dev/null || true
	wait "$iperf_server_pid" 2>/dev/null || true
	iperf_server_pid=
	ip netns del "$veth_ns-c"
	ip netns del "$veth_ns-s"
	jq '[.intervals[].sum | select((.omitted | not) and .bytes > 0 and .seconds > 0.5 and .seconds < 1.5)] | (map(.bytes) | add) * 8 / (map(.seconds) | add)' "$work_dir/veth.json"
}

# emulator_goodput ARGS...: iperf3 -R through one lab trial; prints bit/s.
emulator_goodput() {
	"$labbench" iperf -seconds "$seconds" "$@" >"$work_dir/emulator.json"
	jq .goodput_bps "$work_dir/emulator.json"
}
gbps() { awk -v b="$1" 'BEGIN { printf "%.3f", b / 1e9 }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a / b }'; }

echo "measuring ($seconds s each, after 2 s of warm-up)..."
veth_on=$(veth_goodput on)
veth_off=$(veth_goodput off)
emulator_0=$(emulator_goodput -rtt 0ms)
emulator_0_retrans=$(jq .kernel_counters.server_retransmitted_segments "$work_dir/emulator.json")
emulator_20=$(emulator_goodput -rtt 20ms)
emulator_20_retrans=$(jq .kernel_counters.server_retransmitted_segments "$work_dir/emulator.json")
emulator_20_tundrops=$(jq .kernel_counters.server_tun_tx_dropped "$work_dir/emulator.json")
emulator_20_late=$(jq .release_lateness_max_ms "$work_dir/emulator.json")
emulator_20_poll=$(emulator_goodput -rtt 20ms -poll)
emulator_20_txq=$(emulator_goodput -rtt 20ms -txqueuelen 10000)
emulator_20_txq_late=$(jq .release_lateness_max_ms "$work_dir/emulator.json")
emulator_20_spin=$(emulator_goodput -rtt 20ms -spin -txqueuelen 10000)

echo
printf "  %-58s %10s %12s\n" path Gbit/s "vs veth 1500"
printf "  %-58s %10s %12s\n" "veth pair, kernel offloads on (the kernel's ceiling)" "$(gbps "$veth_on")" "$(ratio "$veth_on" "$veth_off")"
printf "  %-58s %10s %12s\n" "veth pair, GSO/TSO/GRO off (1500-byte packets)" "$(gbps "$veth_off")" 1.00
printf "  %-58s %10s %12s\n" "emulator, 0 ms (retransmitted segments: $emulator_0_retrans)" "$(gbps "$emulator_0")" "$(ratio "$emulator_0" "$veth_off")"
printf "  %-58s %10s %12s\n" "emulator, 20 ms RTT, as the lab runs it" "$(gbps "$emulator_20")" "$(ratio "$emulator_20" "$veth_off")"
printf "  %-58s %10s %12s\n" "emulator, 20 ms RTT, polling (a timed lone trial)" "$(gbps "$emulator_20_poll")" "$(ratio "$emulator_20_poll" "$veth_off")"
printf "  %-58s %10s %12s\n" "emulator, 20 ms RTT, timers, TUN txqueuelen 10000" "$(gbps "$emulator_20_txq")" "$(ratio "$emulator_20_txq" "$veth_off")"
printf "  %-58s %10s %12s\n" "emulator, 20 ms RTT, timers, txqueuelen 10000, spinning" "$(gbps "$emulator_20_spin")" "$(ratio "$emulator_20_spin" "$veth_off")"
echo
echo "  20 ms as the lab runs it: $emulator_20_retrans segments retransmitted, $emulator_20_tundrops dropped by the"
echo "  server's TUN device before the emulator read them (txqueuelen full); latest packet release ${emulator_20_late} ms"
echo "  (timers, txqueuelen 10000: ${emulator_20_txq_late} ms)."
echo "  mahimahi's users report about 0.3 Gbit/s through mm-delay on a comparable machine."
echo
if awk -v b="$emulator_20" -v t="$target_gbps" 'BEGIN { exit !(b >= t * 1e9) }'; then
	echo "  PASS  at least $target_gbps Gbit/s through the emulator at 20 ms RTT ($(gbps "$emulator_20"))"
else
	echo "  FAIL  at least $target_gbps Gbit/s through the emulator at 20 ms RTT ($(gbps "$emulator_20"))"
	exit 1
fi
