#!/usr/bin/env bash
# make-capture.sh OUT.pcap [--shape SHAPE] [--connections N] [--bulk-mb M] [--bulk-streams K]
#                 [--rate-mbit R] [--seconds S] [--requests R] [--snaplen B] [--tap CMD]
#
# Makes a large real capture for the analyze benchmark, of one of several shapes,
# all over a veth pair between two network namespaces with GRO/GSO/TSO off (so
# every segment is at most one MSS, as on a real wire), captured by tcpdump at the
# client with a 96-byte snaplen (--snaplen: 0 keeps whole packets, as tcpdump
# does by default and as most captures users bring are taken):
#
#   mixed   (default) thousands of short HTTP/1.0 connections to nginx (ab) plus a
#           few curl bulk downloads: --connections (40000), --bulk-mb (3000) in
#           --bulk-streams (4)
#   bulk    bulk-dominated: iperf3, 4 streams (--bulk-streams) at 3200 Mbit/s in
#           all (--rate-mbit) for 8 s (--seconds), beside 12000 short nginx
#           connections (--connections)
#   edge    long-lived keep-alive connections carrying many small responses:
#           h2load (HTTP/1.1) with 5000 clients (--connections) open at once, 60
#           requests each (--requests), 600 B and 2 KB bodies from nginx
#   https   HTTPS with HTTP/2, many requests per connection: h2load over TLS to
#           nginx, 200 clients (--connections), 10 streams at a time, 1000
#           requests each (--requests), bodies of 600 B to 70 KB
#   vlan6   IPv6 and VLAN tags: short connections, half over IPv6 and half over
#           IPv4 (--connections in total, 30000), and a curl bulk download
#           (--bulk-mb, 1000) over IPv6; this kernel has no 8021q module, so the
#           802.1Q and QinQ tags are put into the frames afterwards, by server port
#           (bench/vlantag says which)
#
# --tap CMD runs CMD (through bash) in the client namespace beside tcpdump, with
# CAPTURE_IFACE naming the interface: it is started before the traffic, must
# print a line containing "capturing" on stderr once ready, and gets SIGINT
# after the traffic, like tcpdump; its stderr is kept in OUT.tap.log.
#
# The lossy shape (loss and reordering on an emulated path) is made by
# `bench/lab capture`, the synthetic edge of 50000 connections by bench/edgegen.
#
# Everything it makes (namespaces, the veth pair, nginx, tcpdump, a temp dir) is
# removed on exit, on error and on Ctrl-C. It needs root and the Debian packages
# nginx-light, apache2-utils (ab), curl, tcpdump, ethtool, iproute2, and for the
# shapes that use them iperf3, nghttp2-client (h2load) and openssl.
set -euo pipefail

usage() {
	echo "usage: $0 OUT.pcap [--shape mixed|bulk|edge|https|vlan6] [--connections N] [--bulk-mb M] [--bulk-streams K] [--rate-mbit R] [--seconds S] [--requests R] [--snaplen B] [--tap CMD]" >&2
	exit 2
}

[[ $# -ge 1 ]] || usage
out=$1
shift
shape=mixed
connections= bulk_mb= bulk_streams=
rate_mbit=3200 seconds=8 tap= per_connection= snaplen=96
while [[ $# -gt 0 ]]; do
	case $1 in
	--shape) shape=${2:?}; shift 2 ;;
	--connections) connections=${2:?}; shift 2 ;;
	--bulk-mb) bulk_mb=${2:?}; shift 2 ;;
	--bulk-streams) bulk_streams=${2:?}; shift 2 ;;
	--rate-mbit) rate_mbit=${2:?}; shift 2 ;;
	--seconds) seconds=${2:?}; shift 2 ;;
	--requests) per_connection=${2:?}; shift 2 ;;
	--snaplen) snaplen=${2:?}; shift 2 ;;
	--tap) tap=${2:?}; shift 2 ;;
	*) usage ;;
	esac
done
case $shape in
mixed) : "${connections:=40000}" "${bulk_mb:=3000}" "${bulk_streams:=4}" ;;
bulk) : "${connections:=12000}" "${bulk_mb:=0}" "${bulk_streams:=4}" ;;
edge) : "${connections:=5000}" "${bulk_mb:=0}" "${bulk_streams:=1}" ;;
https) : "${connections:=200}" "${bulk_mb:=0}" "${bulk_streams:=1}" ;;
vlan6) : "${connections:=30000}" "${bulk_mb:=1000}" "${bulk_streams:=1}" ;;
*) usage ;;
esac
[[ $connections =~ ^[0-9]+$ && $bulk_mb =~ ^[0-9]+$ && $bulk_streams =~ ^[1-9][0-9]*$ &&
	$rate_mbit =~ ^[1-9][0-9]*$ && $seconds =~ ^[1-9][0-9]*$ ]] || usage

if [[ $(id -u) != 0 ]]; then
	echo "$0: needs root (it makes network namespaces)" >&2
	exit 1
fi
tools=(ip ethtool nginx ab curl tcpdump)
case $shape in
bulk) tools+=(iperf3) ;;
edge) tools+=(h2load) ;;
https) tools+=(h2load openssl) ;;
esac
for tool in "${tools[@]}"; do
	if ! command -v "$tool" >/dev/null; then
		echo "$0: $tool is missing: apt-get install -y iproute2 ethtool nginx-light apache2-utils curl tcpdump iperf3 nghttp2-client openssl" >&2
		exit 1
	fi
done

# Short connections are spread over several server ports so that no client port is
# reused toward the same server port (each port keeps its own ephemeral range): a
# capture with reused 4-tuples would make the tools disagree on what a connection is.
short_ports=(8001 8002 8003 8004)
bulk_port=8000
if ((connections > ${#short_ports[@]} * 60000)); then
	echo "$0: at most $((${#short_ports[@]} * 60000)) connections (unique 4-tuples)" >&2
	exit 2
fi

run_id=ssb$$
server_ns=$run_id-srv
client_ns=$run_id-cli
server_if=${run_id}s
client_if=${run_id}c
server_addr=10.77.0.1
client_addr=10.77.0.2
work_dir=$(mktemp -d "${TMPDIR:-/tmp}/slowstart-capture.XXXXXX")
chmod 755 "$work_dir"
nginx_pid=
tcpdump_pid=
tap_pid=
iperf_pid=
client_pids=()

cleanup() {
	local status=$?
	trap - EXIT INT TERM
	local pid
	for pid in "${client_pids[@]}"; do
		kill "$pid" 2>/dev/null || true
	done
	if [[ -n $tap_pid ]] && kill -0 "$tap_pid" 2>/dev/null; then
		kill -INT "$tap_pid" 2>/dev/null || true
		wait "$tap_pid" 2>/dev/null || true
	fi
	if [[ -n $tcpdump_pid ]] && kill -0 "$tcpdump_pid" 2>/dev/null; then
		kill -INT "$tcpdump_pid" 2>/dev/null || true
		wait "$tcpdump_pid" 2>/dev/null || true
	fi
	if [[ -n $nginx_pid ]] && kill -0 "$nginx_pid" 2>/dev/null; then
		kill -QUIT "$nginx_pid" 2>/dev/null || true
		wait "$nginx_pid" 2>/dev/null || true
	fi
	if [[ -n $iperf_pid ]] && kill -0 "$iperf_pid" 2>/dev/null; then
		kill "$iperf_pid" 2>/dev/null || true
		wait "$iperf_pid" 2>/dev/null || true
	fi
	# Deleting a namespace deletes the veth end in it, and with it the pair.
	ip netns del "$client_ns" 2>/dev/null || true
	ip netns del "$server_ns" 2>/dev/null || true
	rm -rf "$work_dir"
	if ((status != 0)); then
		rm -f "$out" # a partial capture is not what was asked for
	fi
	exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

in_server() { ip netns exec "$server_ns" "$@"; }
in_client() { ip netns exec "$client_ns" "$@"; }

# --- topology ---------------------------------------------------------------
ip netns add "$server_ns"
ip netns add "$client_ns"
ip link add "$client_if" netns "$client_ns" type veth peer name "$server_if" netns "$server_ns"
in_server ip addr add "$server_addr/24" dev "$server_if"
in_client ip addr add "$client_addr/24" dev "$client_if"
for ns in "$server_ns" "$client_ns"; do
	ip -n "$ns" link set lo up
done
in_server ip link set "$server_if" up
in_client ip link set "$client_if" up
# VLAN offload off too: the tags are in the frames tcpdump sees.
in_server ethtool -K "$server_if" gro off gso off tso off rxvlan off txvlan off >/dev/null
in_client ethtool -K "$client_if" gro off gso off tso off rxvlan off txvlan off >/dev/null
# A wide ephemeral range: no client port is reused within a run.
in_client sysctl -qw net.ipv4.ip_local_port_range="1024 65000"
in_server sysctl -qw net.core.somaxconn=8192 net.ipv4.tcp_max_syn_backlog=8192

# vlan6: IPv6 beside IPv4 on the same link. This kernel has no 8021q module, so
# the VLAN tags are put in afterwards, by server port (bench/vlantag).
v6_server=fd77::1 v6_client=fd77::2
if [[ $shape == vlan6 ]]; then
	in_server ip addr add "$v6_server/64" dev "$server_if" nodad
	in_client ip addr add "$v6_client/64" dev "$client_if" nodad
fi

# --- nginx --------------------------------------------------------------------
www=$work_dir/www
mkdir -p "$www" "$work_dir/nginx"
# Response sizes of the short connections: one to several dozen segments each, so
# rounds 1 to 4 of slow start all occur.
short_sizes=(600 5000 20000 70000)
for size in "${short_sizes[@]}" 2000; do
	head -c "$size" /dev/urandom >"$www/$size"
done
bulk_bytes=0
if ((bulk_mb > 0)); then
	bulk_bytes=$(((bulk_mb * 1048576 + bulk_streams - 1) / bulk_streams))
	truncate -s "$bulk_bytes" "$www/bulk" # sparse: no disk, nginx sends zeros
fi
listen_lines="listen $server_addr:$bulk_port backlog=8192;"
for port in "${short_ports[@]}"; do
	listen_lines+=" listen $server_addr:$port backlog=8192;"
	if [[ $shape == vlan6 ]]; then
		listen_lines+=" listen [$v6_server]:$port backlog=8192;"
	fi
done
[[ $shape == vlan6 ]] && listen_lines+=" listen [$v6_server]:$bulk_port backlog=8192;"
keepalive="keepalive_timeout 0;"
if [[ $shape == edge || $shape == https ]]; then
	keepalive="keepalive_timeout 600s; keepalive_requests 100000;"
fi
tls_server=
if [[ $shape == https ]]; then
	openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 -subj /CN=bench.test \
		-keyout "$work_dir/nginx/key.pem" -out "$work_dir/nginx/cert.pem" 2>/dev/null
	tls_server="server { listen $server_addr:443 ssl http2 backlog=8192; ssl_certificate $work_dir/nginx/cert.pem; ssl_certificate_key $work_dir/nginx/key.pem; root $www; }"
fi
cat >"$work_dir/nginx/nginx.conf" <<EOF
user root;
worker_processes 1;
worker_rlimit_nofile 19000;
daemon off;
pid $work_dir/nginx/nginx.pid;
error_log $work_dir/nginx/error.log warn;
events { worker_connections 18000; }
http {
	access_log off;
	sendfile on;
	$keepalive
	client_body_temp_path $work_dir/nginx/body;
	default_type application/octet-stream;
	server {
		$listen_lines
		root $www;
	}
	$tls_server
}
EOF
# Background jobs start ip-netns-exec directly (not through a shell function) so that
# $! is the pid of the process itself, which then gets the signals.
ip netns exec "$server_ns" nginx -p "$work_dir/nginx" -c "$work_dir/nginx/nginx.conf" &
nginx_pid=$!
for _ in $(seq 100); do
	if in_client curl -fsS -o /dev/null "http://$server_addr:${short_ports[0]}/${short_sizes[0]}" 2>/dev/null; then
		break
	fi
	sleep 0.1
done
in_client curl -fsS -o /dev/null "http://$server_addr:${short_ports[0]}/${short_sizes[0]}" ||
	{ echo "$0: nginx did not come up: $(cat "$work_dir/nginx/error.log")" >&2; exit 1; }
if [[ $shape == bulk ]]; then
	ip netns exec "$server_ns" iperf3 -s -B "$server_addr" -p 5201 >"$work_dir/iperf3-server.log" 2>&1 &
	iperf_pid=$!
fi

# --- capture --------------------------------------------------------------------
ip netns exec "$client_ns" tcpdump -i "$client_if" -s "$snaplen" -B 262144 --immediate-mode --time-stamp-precision nano -n -Z root -w "$out" tcp \
	2>"$work_dir/tcpdump.log" &
tcpdump_pid=$!
for _ in $(seq 100); do
	grep -q "listening on" "$work_dir/tcpdump.log" && break
	sleep 0.1
done
grep -q "listening on" "$work_dir/tcpdump.log" ||
	{ echo "$0: tcpdump did not start: $(cat "$work_dir/tcpdump.log")" >&2; exit 1; }
if [[ -n $tap ]]; then
	CAPTURE_IFACE=$client_if ip netns exec "$client_ns" bash -c "exec $tap" 2>"$out.tap.log" &
	tap_pid=$!
	for _ in $(seq 100); do
		grep -q "capturing" "$out.tap.log" && break
		sleep 0.1
	done
	grep -q "capturing" "$out.tap.log" ||
		{ echo "$0: the tap did not start: $(cat "$out.tap.log")" >&2; exit 1; }
fi

start_s=$SECONDS
# short_connections ADDR N: ab makes N short HTTP/1.0 connections (a new TCP
# connection per request, no -k) to ADDR, spread over the short ports.
short_connections() {
	local addr=$1 total=$2 i n port size
	local per_port=$(((total + ${#short_ports[@]} - 1) / ${#short_ports[@]}))
	for i in "${!short_ports[@]}"; do
		n=$per_port
		((i == ${#short_ports[@]} - 1)) && n=$((total - per_port * (${#short_ports[@]} - 1)))
		((n > 0)) || continue
		port=${short_ports[$i]}
		size=${short_sizes[$((i % ${#short_sizes[@]}))]}
		ip netns exec "$client_ns" ab -q -r -n "$n" -c 8 "http://$addr:$port/$size" >"$work_dir/ab-$addr-$port.log" 2>&1 &
		client_pids+=($!)
	done
}
summary=
case $shape in
mixed)
	# Bulk streams, rate-limited so that tcpdump keeps up while the short connections run.
	for ((i = 0; i < bulk_streams; i++)); do
		ip netns exec "$client_ns" curl -fsS -o /dev/null --limit-rate 60M "http://$server_addr:$bulk_port/bulk?stream=$i" &
		client_pids+=($!)
	done
	short_connections "$server_addr" "$connections"
	summary="$connections short (sizes ${short_sizes[*]} bytes) + $bulk_streams bulk of $((bulk_bytes / 1048576)) MB"
	;;
bulk)
	# The server sends (-R), the rate shared among the streams.
	ip netns exec "$client_ns" iperf3 -c "$server_addr" -p 5201 -R -P "$bulk_streams" -b "$((rate_mbit / bulk_streams))M" -t "$seconds" >"$work_dir/iperf3.log" 2>&1 &
	client_pids+=($!)
	short_connections "$server_addr" "$connections"
	summary="$connections short (sizes ${short_sizes[*]} bytes) + $bulk_streams iperf3 streams of $((rate_mbit / bulk_streams)) Mbit/s for $seconds s"
	;;
edge)
	requests=$((connections * ${per_connection:-60}))
	ip netns exec "$client_ns" bash -c "ulimit -n $(ulimit -Hn) && exec h2load --h1 -c $connections -n $requests http://$server_addr:${short_ports[0]}/600 http://$server_addr:${short_ports[0]}/2000" \
		>"$work_dir/h2load.log" 2>&1 &
	client_pids+=($!)
	summary="$connections keep-alive connections at once, $requests HTTP/1.1 requests (600 B and 2 KB)"
	;;
https)
	requests=$((connections * ${per_connection:-1000}))
	ip netns exec "$client_ns" bash -c "ulimit -n $(ulimit -Hn) && exec h2load -c $connections -m 10 -n $requests https://$server_addr/600 https://$server_addr/5000 https://$server_addr/20000 https://$server_addr/600 https://$server_addr/70000" \
		>"$work_dir/h2load.log" 2>&1 &
	client_pids+=($!)
	summary="$connections HTTP/2 connections over TLS, $requests requests (600 B to 70 KB), 10 streams at a time"
	;;
vlan6)
	ip netns exec "$client_ns" curl -fsS -o /dev/null --limit-rate 60M "http://[$v6_server]:$bulk_port/bulk" &
	client_pids+=($!)
	half=$((connections / 2))
	short_connections "[$v6_server]" "$half"
	short_connections "$server_addr" "$((connections - half))"
	summary="$connections short, half over IPv6, half over IPv4, + 1 bulk of $((bulk_bytes / 1048576)) MB over IPv6; VLAN tags by server port (bench/vlantag)"
	;;
esac
failed=0
for pid in "${client_pids[@]}"; do
	wait "$pid" || failed=1
done
client_pids=()
sleep 0.2 # the last FIN/ACKs
if [[ -n $tap_pid ]]; then
	kill -INT "$tap_pid"
	wait "$tap_pid" || failed=1
	tap_pid=
fi
kill -INT "$tcpdump_pid"
wait "$tcpdump_pid" || true
tcpdump_pid=
elapsed_s=$((SECONDS - start_s))
if ((failed)); then
	echo "$0: a client or the tap failed:" >&2
	cat "$work_dir"/*.log >&2
	exit 1
fi
if [[ $shape == vlan6 ]]; then
	bench_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
	(cd "$bench_dir/.." && go run ./bench/vlantag "$out" "$work_dir/tagged.pcap")
	mv "$work_dir/tagged.pcap" "$out"
fi

failed_requests=0
for log in "$work_dir"/ab-*.log; do
	[[ -e $log ]] || continue
	n=$(awk '/^Failed requests:/ {print $3}' "$log")
	failed_requests=$((failed_requests + ${n:-0}))
done
drop_line=$(grep "dropped by kernel" "$work_dir/tcpdump.log" || true)
captured=$(grep -o '^[0-9]* packets captured' "$work_dir/tcpdump.log" | cut -d' ' -f1 || true)
echo "capture: $out ($shape)"
echo "  packets:     ${captured:-?} (${drop_line:-drops unknown})"
echo "  connections: $summary; $failed_requests short requests failed"
[[ -e $work_dir/iperf3.log ]] && grep -E 'receiver$' "$work_dir/iperf3.log" | tail -1 | sed 's/^/  iperf3 /'
[[ -e $work_dir/h2load.log ]] && grep -E '^(requests|traffic):' "$work_dir/h2load.log" | sed 's/^/  h2load /'
echo "  file size:   $(du -h "$out" | cut -f1)"
echo "  generated in ${elapsed_s}s"
