#!/usr/bin/env bash
# make-capture.sh OUT.pcap [--connections N] [--bulk-mb M] [--bulk-streams K]
#
# Makes a large real capture for the analyze benchmark: thousands of short HTTP
# connections to nginx plus a few bulk transfers, all over a veth pair between two
# network namespaces with GRO/GSO/TSO off (so every segment is at most one MSS, as on
# a real wire), captured by tcpdump at the client with a 96-byte snaplen.
#
# Everything it makes (namespaces, the veth pair, nginx, tcpdump, a temp dir) is
# removed on exit, on error and on Ctrl-C. It needs root and the Debian packages
# nginx-light, apache2-utils (ab), curl, tcpdump, ethtool and iproute2.
#
# Defaults (40000 connections, 3000 MB in 4 bulk streams) give about 3.8 million
# packets in about 15 seconds on a 2-core machine.
set -euo pipefail

usage() {
	echo "usage: $0 OUT.pcap [--connections N] [--bulk-mb M] [--bulk-streams K]" >&2
	exit 2
}

[[ $# -ge 1 ]] || usage
out=$1
shift
connections=40000
bulk_mb=3000
bulk_streams=4
while [[ $# -gt 0 ]]; do
	case $1 in
	--connections) connections=${2:?}; shift 2 ;;
	--bulk-mb) bulk_mb=${2:?}; shift 2 ;;
	--bulk-streams) bulk_streams=${2:?}; shift 2 ;;
	*) usage ;;
	esac
done
[[ $connections =~ ^[0-9]+$ && $bulk_mb =~ ^[0-9]+$ && $bulk_streams =~ ^[1-9][0-9]*$ ]] || usage

if [[ $(id -u) != 0 ]]; then
	echo "$0: needs root (it makes network namespaces)" >&2
	exit 1
fi
for tool in ip ethtool nginx ab curl tcpdump; do
	if ! command -v "$tool" >/dev/null; then
		echo "$0: $tool is missing: apt-get install -y iproute2 ethtool nginx-light apache2-utils curl tcpdump" >&2
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
client_pids=()

cleanup() {
	local status=$?
	trap - EXIT INT TERM
	local pid
	for pid in "${client_pids[@]}"; do
		kill "$pid" 2>/dev/null || true
	done
	if [[ -n $tcpdump_pid ]] && kill -0 "$tcpdump_pid" 2>/dev/null; then
		kill -INT "$tcpdump_pid" 2>/dev/null || true
		wait "$tcpdump_pid" 2>/dev/null || true
	fi
	if [[ -n $nginx_pid ]] && kill -0 "$nginx_pid" 2>/dev/null; then
		kill -QUIT "$nginx_pid" 2>/dev/null || true
		wait "$nginx_pid" 2>/dev/null || true
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
in_server ethtool -K "$server_if" gro off gso off tso off >/dev/null
in_client ethtool -K "$client_if" gro off gso off tso off >/dev/null
# A wide ephemeral range: no client port is reused within a run.
in_client sysctl -qw net.ipv4.ip_local_port_range="1024 65000"
in_server sysctl -qw net.core.somaxconn=4096 net.ipv4.tcp_max_syn_backlog=4096

# --- nginx --------------------------------------------------------------------
www=$work_dir/www
mkdir -p "$www" "$work_dir/nginx"
# Response sizes of the short connections: one to several dozen segments each, so
# rounds 1 to 4 of slow start all occur.
short_sizes=(600 5000 20000 70000)
for size in "${short_sizes[@]}"; do
	head -c "$size" /dev/urandom >"$www/$size"
done
bulk_bytes=$(((bulk_mb * 1048576 + bulk_streams - 1) / bulk_streams))
truncate -s "$bulk_bytes" "$www/bulk" # sparse: no disk, nginx sends zeros
listen_lines="listen $server_addr:$bulk_port backlog=4096;"
for port in "${short_ports[@]}"; do
	listen_lines+=" listen $server_addr:$port backlog=4096;"
done
cat >"$work_dir/nginx/nginx.conf" <<EOF
user root;
worker_processes 1;
daemon off;
pid $work_dir/nginx/nginx.pid;
error_log $work_dir/nginx/error.log warn;
events { worker_connections 4096; }
http {
	access_log off;
	sendfile on;
	keepalive_timeout 0;
	client_body_temp_path $work_dir/nginx/body;
	default_type application/octet-stream;
	server {
		$listen_lines
		root $www;
	}
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

# --- capture --------------------------------------------------------------------
ip netns exec "$client_ns" tcpdump -i "$client_if" -s 96 -B 262144 --immediate-mode -n -Z root -w "$out" tcp \
	2>"$work_dir/tcpdump.log" &
tcpdump_pid=$!
for _ in $(seq 100); do
	grep -q "listening on" "$work_dir/tcpdump.log" && break
	sleep 0.1
done
grep -q "listening on" "$work_dir/tcpdump.log" ||
	{ echo "$0: tcpdump did not start: $(cat "$work_dir/tcpdump.log")" >&2; exit 1; }

start_s=$SECONDS
# Bulk streams, rate-limited so that tcpdump keeps up while the short connections run.
for ((i = 0; i < bulk_streams; i++)); do
	ip netns exec "$client_ns" curl -fsS -o /dev/null --limit-rate 60M "http://$server_addr:$bulk_port/bulk?stream=$i" &
	client_pids+=($!)
done
# Short connections: ab opens a new TCP connection per request (no -k), HTTP/1.0.
per_port=$(((connections + ${#short_ports[@]} - 1) / ${#short_ports[@]}))
for i in "${!short_ports[@]}"; do
	n=$per_port
	((i == ${#short_ports[@]} - 1)) && n=$((connections - per_port * (${#short_ports[@]} - 1)))
	((n > 0)) || continue
	port=${short_ports[$i]}
	size=${short_sizes[$((i % ${#short_sizes[@]}))]}
	ip netns exec "$client_ns" ab -q -r -n "$n" -c 8 "http://$server_addr:$port/$size" >"$work_dir/ab-$port.log" 2>&1 &
	client_pids+=($!)
done
failed=0
for pid in "${client_pids[@]}"; do
	wait "$pid" || failed=1
done
sleep 0.2 # the last FIN/ACKs
kill -INT "$tcpdump_pid"
wait "$tcpdump_pid" || true
tcpdump_pid=
elapsed_s=$((SECONDS - start_s))
if ((failed)); then
	echo "$0: a client failed:" >&2
	cat "$work_dir"/ab-*.log >&2
	exit 1
fi

completed=0 failed_requests=0
for log in "$work_dir"/ab-*.log; do
	n=$(awk '/^Complete requests:/ {print $3}' "$log")
	completed=$((completed + ${n:-0}))
	n=$(awk '/^Failed requests:/ {print $3}' "$log")
	failed_requests=$((failed_requests + ${n:-0}))
done
drop_line=$(grep "dropped by kernel" "$work_dir/tcpdump.log" || true)
captured=$(grep -o '^[0-9]* packets captured' "$work_dir/tcpdump.log" | cut -d' ' -f1 || true)
echo "capture: $out"
echo "  packets:     ${captured:-?} (${drop_line:-drops unknown})"
echo "  connections: $completed short (sizes ${short_sizes[*]} bytes; $failed_requests failed) + $bulk_streams bulk of $((bulk_bytes / 1048576)) MB"
echo "  file size:   $(du -h "$out" | cut -f1)"
echo "  generated in ${elapsed_s}s"
