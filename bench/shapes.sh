#!/usr/bin/env bash
# shapes.sh [SHAPE...]
#
# Measures `slowstart analyze --json` on captures of several shapes, each against
# its peers in the same run, page cache warm, and prints each figure beside its
# target:
#
#   speed      >= 3x faster than `tcptrace -n -l -r` and >= 40x faster than
#              `tshark -q -z conv,tcp` on the same file, taking turns, best of N;
#              beside it the rate of `cat FILE > /dev/null` (the limit)
#   memory     peak RSS <= 150 MB, and within 20% of that on the same traffic 4x
#              longer (bench/repeat: the capture repeated later in time); the
#              peers' peak RSS (their best turn's) beside it
#   same JSON  at GOMAXPROCS=1 and 2, byte for byte
#   text       `slowstart analyze` (the text people read, the default) within
#              1.5x the time of --json on the same file, best of the turns
#
# Shapes (all by default, in this order):
#   mixed      make-capture.sh: 40,000 short HTTP connections + 4 curl bulk downloads
#   bulk       make-capture.sh --shape bulk: 4 iperf3 streams of 800 Mbit/s for 8 s
#              beside 12,000 short connections
#   lossy      bench/lab capture: 4 iperf3 streams (BBR) for 30 s over an emulated
#              10 ms path with 1% random loss and 300 µs jitter that reorders; SACK
#   edge50k    bench/edgegen (synthetic): 50,000 keep-alive connections open at
#              once, 20 small responses each, at the server
#   edge       make-capture.sh --shape edge: the same shape, real, 5,000 connections
#              (h2load), 60 responses each
#   https      make-capture.sh --shape https: HTTP/2 over TLS, 200 connections of
#              1,000 requests each (h2load)
#   vlan6      make-capture.sh --shape vlan6: IPv6 and IPv4, 802.1Q and QinQ tags
#
# and, only when named, the same traffic captured whole (tcpdump's default
# snaplen, as most captures users bring are taken; files of 2 to 3 GB, 4 times
# that at 4x):
#   bulk-full  make-capture.sh --shape bulk --snaplen 0
#   https-full make-capture.sh --shape https --snaplen 0
#
# Captures are made once (root) and kept in $SLOWSTART_BENCH_DIR (default
# /tmp/slowstart-shapes), with their 4x copies. slowstart, tcptrace and tshark
# take $SLOWSTART_BENCH_RUNS turns each (default 3), each turn starting with the next tool, so that
# a busy moment of the machine falls on all alike; the best of each is kept.
# $SLOWSTART_BENCH_TABLE names a file to which a Markdown row per shape is
# appended. $SLOWSTART_BENCH_BASELINE names another slowstart binary (e.g. one
# built from an earlier commit) timed in the same turns, for before and after. Run by hand on a quiet machine; not part of CI. Exit 1 if a target
# is missed.
set -euo pipefail

bench_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
module_dir=$(dirname "$bench_dir")
dir=${SLOWSTART_BENCH_DIR:-/tmp/slowstart-shapes}
runs=${SLOWSTART_BENCH_RUNS:-3}
table=${SLOWSTART_BENCH_TABLE:-}
baseline=${SLOWSTART_BENCH_BASELINE:-}
all_shapes=(mixed bulk lossy edge50k edge https vlan6)
known_shapes=("${all_shapes[@]}" bulk-full https-full)
shapes=("$@")
((${#shapes[@]})) || shapes=("${all_shapes[@]}")
for s in "${shapes[@]}"; do
	[[ " ${known_shapes[*]} " == *" $s "* ]] || { echo "$0: unknown shape $s (known: ${known_shapes[*]})" >&2; exit 2; }
done

for tool in go tshark tcptrace capinfos /usr/bin/time; do
	if ! command -v "$tool" >/dev/null; then
		echo "$0: $tool is missing: apt-get install -y tshark tcptrace time" >&2
		exit 1
	fi
done

work_dir=$(mktemp -d "${TMPDIR:-/tmp}/slowstart-shapes.XXXXXX")
trap 'rm -rf "$work_dir"' EXIT
mkdir -p "$dir"
failed=0
# shellcheck source=measure.sh
source "$bench_dir/measure.sh"

slowstart=$work_dir/slowstart
echo "building slowstart..."
(cd "$module_dir" && CGO_ENABLED=0 go build -trimpath -o "$slowstart" ./cmd/slowstart)
as_installed "$slowstart"

# make_shape SHAPE OUT: makes the capture of a shape.
make_shape() {
	local shape=$1 out=$2
	if [[ $shape != edge50k && $(id -u) != 0 ]]; then
		echo "$0: making the $shape capture needs root" >&2
		exit 1
	fi
	case $shape in
	lossy)
		(cd "$module_dir" && go build -o "$work_dir/labbench" ./bench/lab)
		"$work_dir/labbench" capture -rtt 10ms -loss 1% -jitter 300us -streams 4 -seconds 30 -out "$out"
		;;
	edge50k)
		(cd "$module_dir" && go run ./bench/edgegen -connections 50000 -requests 20 "$out")
		;;
	*-full)
		"$bench_dir/make-capture.sh" "$out" --shape "${shape%-full}" --snaplen 0
		;;
	*)
		"$bench_dir/make-capture.sh" "$out" --shape "$shape"
		;;
	esac
}

summary=()
for shape in "${shapes[@]}"; do
	capture=$dir/$shape.pcap
	if [[ ! -s $capture ]]; then
		echo "making $capture..."
		make_shape "$shape" "$capture.tmp.pcap"
		mv "$capture.tmp.pcap" "$capture"
	fi
	long4=$dir/$shape-4x.pcap
	if [[ $shape == *-full ]]; then
		long4=$work_dir/$shape-4x.pcap # 8 to 12 GB: made for this run only
	fi
	if [[ ! -s $long4 ]]; then
		(cd "$module_dir" && go run ./bench/repeat -n 4 "$capture" "$long4.tmp")
		mv "$long4.tmp" "$long4"
	fi
	packets=$(packets_of "$capture")
	bytes=$(stat -c %s "$capture")
	echo
	echo "== $shape: $capture, $packets packets, $((bytes / 1048576)) MB"
	cat_s=$(cat_seconds "$capture")
	ss_s= tt_s= ts_s= base_s= base_kb=
	# Each turn starts with the next tool (slowstart, tcptrace, tshark,
	# baseline, then slowstart again...), so that no tool always runs right
	# after tshark (2 GB of memory) or always first.
	tools=(slowstart tcptrace tshark)
	[[ -n $baseline ]] && tools+=(baseline)
	for ((turn = 1; turn <= runs; turn++)); do
		for ((k = 0; k < ${#tools[@]}; k++)); do
			tool=${tools[(turn - 1 + k) % ${#tools[@]}]}
			case $tool in
			slowstart)
				time_run "slowstart (turn $turn)" "$slowstart" analyze --json "$capture"
				if faster "$run_s" "$ss_s"; then ss_s=$run_s ss_kb=$run_kb; fi
				;;
			baseline)
				time_run "baseline (turn $turn)" "$baseline" analyze --json "$capture"
				if faster "$run_s" "$base_s"; then base_s=$run_s base_kb=$run_kb; fi
				;;
			tcptrace)
				time_run "tcptrace (turn $turn)" tcptrace -n -l -r "$capture"
				if faster "$run_s" "$tt_s"; then tt_s=$run_s tt_kb=$run_kb; fi
				;;
			tshark)
				time_run "tshark (turn $turn)" tshark -q -z conv,tcp -r "$capture"
				if faster "$run_s" "$ts_s"; then ts_s=$run_s ts_kb=$run_kb; fi
				;;
			esac
		done
	done
	time_run "slowstart 4x" "$slowstart" analyze --json "$long4"
	long4_s=$run_s long4_kb=$run_kb
	# The text, as many turns as the JSON had and the best kept: timed once, a
	# stall of the machine (a second on mixed, 2026-11-28) read as the text's.
	text_s= text_kb=
	for ((turn = 1; turn <= runs; turn++)); do
		time_run "slowstart text (turn $turn)" "$slowstart" analyze "$capture"
		if faster "$run_s" "$text_s"; then text_s=$run_s text_kb=$run_kb; fi
	done
	[[ $long4 == "$work_dir"/* ]] && rm -f "$long4"
	GOMAXPROCS=1 "$slowstart" analyze --json "$capture" 2>/dev/null | sha256sum >"$work_dir/one"
	GOMAXPROCS=2 "$slowstart" analyze --json "$capture" 2>/dev/null | sha256sum >"$work_dir/two"
	conns=$("$slowstart" analyze --jsonl "$capture" 2>/dev/null | wc -l)

	printf '%-22s %8s %12s %9s %9s\n' tool seconds packets/s MB/s "peak MB"
	row() { awk -v n="$1" -v s="$2" -v kb="$3" -v p="$packets" -v b="$bytes" 'BEGIN {printf "%-22s %8.2f %12.0f %9.0f %9.0f\n", n, s, p / s, b / 1048576 / s, kb / 1024}'; }
	row slowstart "$ss_s" "$ss_kb"
	row "slowstart (text)" "$text_s" "$text_kb"
	[[ -n $baseline ]] && row baseline "$base_s" "$base_kb"
	row tcptrace "$tt_s" "$tt_kb"
	row tshark "$ts_s" "$ts_kb"
	awk -v s="$cat_s" -v p="$packets" -v b="$bytes" 'BEGIN {printf "%-22s %8.3f %12.0f %9.0f %9s\n", "cat (page cache)", s, p / s, b / 1048576 / s, "-"}'
	echo "slowstart found $conns connections"
	vs_tt=$(awk -v a="$tt_s" -v b="$ss_s" 'BEGIN {printf "%.2f", a / b}')
	vs_ts=$(awk -v a="$ts_s" -v b="$ss_s" 'BEGIN {printf "%.1f", a / b}')
	ratio4=$(awk -v a="$long4_kb" -v b="$ss_kb" 'BEGIN {printf "%.2f", a / b}')
	same=$(cmp -s "$work_dir/one" "$work_dir/two" && echo 1 || echo 0)
	text_ratio=$(awk -v a="$text_s" -v b="$ss_s" 'BEGIN {printf "%.2f", a / b}')
	check "$shape vs tcptrace" "$(awk_ok "$vs_tt >= 3")" "${vs_tt}x faster (target >= 3x)"
	check "$shape vs tshark" "$(awk_ok "$vs_ts >= 40")" "${vs_ts}x faster (target >= 40x)"
	check "$shape peak RSS" "$(awk_ok "$ss_kb / 1024 <= 150")" "$((ss_kb / 1024)) MB (target <= 150 MB)"
	check "$shape RSS at 4x length" "$(awk_ok "$ratio4 <= 1.2")" "$((long4_kb / 1024)) MB, ${ratio4}x of 1x (${long4_s}s; target <= 1.2x)"
	check "$shape same JSON at 1 and 2 cores" "$same" "$(cut -c1-12 "$work_dir/one")"
	check "$shape text output" "$(awk_ok "$text_ratio <= 1.5")" "${text_s}s, ${text_ratio}x the JSON's time (target <= 1.5x)"
	line=$(awk -v shape="$shape" -v p="$packets" -v b="$bytes" -v ss="$ss_s" -v tt="$tt_s" -v ts="$ts_s" -v cat="$cat_s" \
		-v kb="$ss_kb" -v kb4="$long4_kb" -v same="$same" -v c="$conns" -v base="$base_s" -v basekb="$base_kb" -v text="$text_s" \
		-v ttkb="$tt_kb" -v tskb="$ts_kb" 'BEGIN {
		before = base == "" ? "" : sprintf(" | %.2f s (%.2f×, %.2f×), %.0f MB", base, tt / base, ts / base, basekb / 1024)
		printf "| %s | %.2f M | %.0f MB | %d | %.2f s | %.2f s | %.2f s (%.2f×) | %.1f s (%.1f×) | %.0f MB | %.0f MB (%.2f×) | %.0f / %.0f MB | %.2f M | %.0f | %.0f MB/s | %s%s |\n",
			shape, p / 1e6, b / 1048576, c, ss, text, tt, tt / ss, ts, ts / ss, kb / 1024, kb4 / 1024, kb4 / kb, ttkb / 1024, tskb / 1024,
			p / ss / 1e6, b / 1048576 / ss, b / 1048576 / cat, same ? "same" : "DIFFERENT", before }')
	summary+=("$line")
done

echo
header='| shape | packets | size | connections | slowstart | text | tcptrace (ratio) | tshark (ratio) | RSS 1× | RSS 4× | tcptrace / tshark RSS | pkt/s | MB/s | page cache | GOMAXPROCS 1/2 |'
rule='|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|'
if [[ -n $baseline ]]; then
	header+=' baseline (ratios to tcptrace, tshark), RSS |'
	rule+='---|'
fi
echo "$header"
echo "$rule"
printf '%s\n' "${summary[@]}"
if [[ -n $table ]]; then
	{
		echo "$(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
		echo
		echo "$header"
		echo "$rule"
		printf '%s\n' "${summary[@]}"
		echo
	} >>"$table"
fi
exit $failed
