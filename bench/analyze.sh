#!/usr/bin/env bash
# analyze.sh [CAPTURE]
#
# Measures `slowstart analyze` on a large capture against its peers in the same run,
# page cache warm, and prints each figure beside its target:
#
#   speed      >= 3x faster than `tcptrace -n -l -r` and >= 40x faster than
#              `tshark -q -z conv,tcp` (same file, same run), beside the rate of
#              `cat FILE > /dev/null` (the limit: reading the file from memory)
#   memory     peak RSS <= 150 MB, and flat (within 20%) on the same traffic made 4x
#              longer (the capture repeated later in time) and, as root, on a capture
#              whose bulk transfer is one connection 4x longer
#   same JSON  at GOMAXPROCS=1 and 2, byte for byte
#   SYN flood  1,000,000 unanswered SYNs: under 10 s and 500 MB
#   view       `view --html` of the capture: peak RSS <= 400 MB, file <= 25 MB, and
#              Chromium renders it (its charts appear)
#
# Without CAPTURE it makes one with make-capture.sh (needs root) and keeps it at
# $SLOWSTART_BENCH_CAPTURE (default /tmp/slowstart-bench.pcap) for later runs; the
# derived captures are made next to it and kept too. slowstart and tcptrace run
# $SLOWSTART_BENCH_RUNS times each (default 5), taking turns, best kept; tshark
# once (it is slow).
# Run by hand on a quiet machine; not part of CI. Exit 1 if a target is missed.
set -euo pipefail

bench_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
module_dir=$(dirname "$bench_dir")
capture=${1:-${SLOWSTART_BENCH_CAPTURE:-/tmp/slowstart-bench.pcap}}
runs=${SLOWSTART_BENCH_RUNS:-5}

for tool in go tshark tcptrace capinfos /usr/bin/time; do
	if ! command -v "$tool" >/dev/null; then
		echo "$0: $tool is missing: apt-get install -y tshark tcptrace time" >&2
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

failed=0
# shellcheck source=measure.sh
source "$bench_dir/measure.sh"
as_installed "$slowstart"

packets=$(packets_of "$capture")
bytes=$(stat -c %s "$capture")
mb=$(awk -v b="$bytes" 'BEGIN {printf "%.0f", b / 1048576}')
echo "capture: $capture, $packets packets, $mb MB"
cat_s=$(cat_seconds "$capture")

echo "timing analyze and its peers..."
# slowstart and tcptrace take turns, so that a busy moment of the machine falls
# on both alike; each keeps its best run.
ss_s= tt_s=
for ((turn = 1; turn <= runs; turn++)); do
	time_run "slowstart (turn $turn)" "$slowstart" analyze --json "$capture"
	if faster "$run_s" "$ss_s"; then ss_s=$run_s ss_kb=$run_kb; fi
	time_run "tcptrace (turn $turn)" tcptrace -n -l -r "$capture"
	if faster "$run_s" "$tt_s"; then tt_s=$run_s tt_kb=$run_kb; fi
done
time_run tshark tshark -q -z conv,tcp -r "$capture"
ts_s=$run_s ts_kb=$run_kb

echo "the same JSON at GOMAXPROCS=1 and 2..."
GOMAXPROCS=1 "$slowstart" analyze --json "$capture" 2>/dev/null | sha256sum >"$work_dir/one"
GOMAXPROCS=2 "$slowstart" analyze --json "$capture" 2>/dev/null | sha256sum >"$work_dir/two"
conns=$("$slowstart" analyze --jsonl "$capture" 2>/dev/null | wc -l)

echo "the same traffic 4x longer..."
long4=${capture%.pcap}-4x.pcap
if [[ ! -s $long4 ]]; then
	# Three copies later in time, each with sequence numbers of its own: new
	# connections on the same four-tuples, not the old ones going on.
	(cd "$module_dir" && go run ./bench/repeat -n 4 "$capture" "$long4.tmp")
	mv "$long4.tmp" "$long4"
fi
time_run "slowstart 4x" "$slowstart" analyze --json "$long4"
long4_s=$run_s long4_kb=$run_kb

bulk_kb=
bulk1=${capture%.pcap}-longbulk.pcap
if [[ ! -s $bulk1 && $(id -u) == 0 ]]; then
	echo "making a capture whose bulk transfer is one connection 4x longer..."
	"$bench_dir/make-capture.sh" "$bulk1.tmp" --bulk-streams 1 >/dev/null
	mv "$bulk1.tmp" "$bulk1"
fi
if [[ -s $bulk1 ]]; then
	time_run "slowstart long bulk" "$slowstart" analyze --json "$bulk1"
	bulk_kb=$run_kb
fi

echo "a SYN flood of 1,000,000 SYNs..."
flood=/tmp/slowstart-synflood.pcap
[[ -s $flood ]] || (cd "$module_dir" && go run ./bench/synflood -n 1000000 "$flood")
time_run "slowstart SYN flood" "$slowstart" analyze --jsonl "$flood"
flood_s=$run_s flood_kb=$run_kb

echo "view --html of the capture..."
time_run "view --html" "$slowstart" view --html "$work_dir/view.html" "$capture"
view_kb=$run_kb
view_mb=$(awk -v b="$(stat -c %s "$work_dir/view.html")" 'BEGIN {printf "%.1f", b / 1048576}')
svgs=0
if command -v chromium >/dev/null; then
	svgs=$(timeout 120 chromium --headless --no-sandbox --disable-gpu --virtual-time-budget=10000 \
		--dump-dom "file://$work_dir/view.html" 2>/dev/null | grep -o '<svg' | wc -l || true)
fi

echo
printf '%-22s %8s %12s %9s %9s\n' tool seconds packets/s MB/s "peak MB"
row() { awk -v n="$1" -v s="$2" -v kb="$3" -v p="$packets" -v b="$bytes" 'BEGIN {printf "%-22s %8.2f %12.0f %9.0f %9.0f\n", n, s, p / s, b / 1048576 / s, kb / 1024}'; }
row slowstart "$ss_s" "$ss_kb"
row tcptrace "$tt_s" "$tt_kb"
row tshark "$ts_s" "$ts_kb"
awk -v s="$cat_s" -v p="$packets" -v b="$bytes" 'BEGIN {printf "%-22s %8.2f %12.0f %9.0f %9s\n", "cat (page cache)", s, p / s, b / 1048576 / s, "-"}'
echo
echo "slowstart found $conns connections"
vs_tt=$(awk -v a="$tt_s" -v b="$ss_s" 'BEGIN {printf "%.2f", a / b}')
vs_ts=$(awk -v a="$ts_s" -v b="$ss_s" 'BEGIN {printf "%.1f", a / b}')
check "vs tcptrace" "$(awk_ok "$vs_tt >= 3")" "${vs_tt}x faster (target >= 3x)"
check "vs tshark" "$(awk_ok "$vs_ts >= 40")" "${vs_ts}x faster (target >= 40x)"
check "peak RSS" "$(awk_ok "$ss_kb / 1024 <= 150")" "$((ss_kb / 1024)) MB (target <= 150 MB)"
ratio4=$(awk -v a="$long4_kb" -v b="$ss_kb" 'BEGIN {printf "%.2f", a / b}')
check "RSS at 4x length" "$(awk_ok "$ratio4 <= 1.2")" "$((long4_kb / 1024)) MB, ${ratio4}x of 1x (${long4_s}s; target <= 1.2x)"
if [[ -n $bulk_kb ]]; then
	ratiob=$(awk -v a="$bulk_kb" -v b="$ss_kb" 'BEGIN {printf "%.2f", a / b}')
	check "RSS, one bulk 4x longer" "$(awk_ok "$ratiob <= 1.2")" "$((bulk_kb / 1024)) MB, ${ratiob}x of 1x (target <= 1.2x)"
else
	echo "RSS, one bulk 4x longer: not measured (needs root to make $bulk1)"
fi
check "same JSON at 1 and 2 cores" "$(cmp -s "$work_dir/one" "$work_dir/two" && echo 1 || echo 0)" "$(cut -c1-12 "$work_dir/one")"
check "SYN flood time" "$(awk_ok "$flood_s < 10")" "${flood_s}s (target < 10 s)"
check "SYN flood RSS" "$(awk_ok "$flood_kb / 1024 < 500")" "$((flood_kb / 1024)) MB (target < 500 MB)"
check "view --html RSS" "$(awk_ok "$view_kb / 1024 <= 400")" "$((view_kb / 1024)) MB (target <= 400 MB)"
check "view --html size" "$(awk_ok "$view_mb <= 25")" "$view_mb MB (target <= 25 MB)"
check "view --html in Chromium" "$(awk_ok "$svgs > 0")" "$svgs charts rendered"
exit $failed
