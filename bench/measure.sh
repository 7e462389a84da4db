# measure.sh: helpers the benchmark scripts source (not run on its own). The
# caller sets work_dir (a temporary directory) before calling time_run.

# check NAME OK(0/1) TEXT: prints a target's line with PASS or FAIL; a FAIL sets
# failed=1.
check() {
	if [[ $2 == 1 ]]; then
		printf '%-60s PASS\n' "$1: $3"
	else
		printf '%-60s FAIL\n' "$1: $3"
		failed=1
	fi
}
# awk_ok EXPR: 1 when the awk expression holds, else 0.
awk_ok() { awk "BEGIN {exit !($1)}" && echo 1 || echo 0; }

# time_run NAME CMD...: runs CMD once (stdout to /dev/null) and sets run_s and
# run_kb to its wall seconds and peak RSS.
time_run() {
	local name=$1
	shift
	if ! /usr/bin/time -f '%e %M' -o "$work_dir/time" "$@" >/dev/null 2>"$work_dir/stderr"; then
		# analyze exits 3 on a damaged capture after its report: not here.
		echo "$0: $name failed:" >&2
		tail -5 "$work_dir/stderr" >&2
		exit 1
	fi
	read -r run_s run_kb <"$work_dir/time"
	echo "  $name: ${run_s}s, $((run_kb / 1024)) MB"
}
# faster A B: whether A seconds beat B (B empty: no run yet).
faster() { [[ -z $2 ]] || awk -v a="$1" -v b="$2" 'BEGIN {exit !(a < b)}'; }

# cat_seconds FILE: the wall seconds of reading FILE from the page cache (read
# once before, so it is there), best of three, timed to the microsecond.
cat_seconds() {
	cat "$1" >/dev/null
	local best= i start end s
	for i in 1 2 3; do
		start=$(date +%s%N)
		cat "$1" >/dev/null
		end=$(date +%s%N)
		s=$(awk -v a="$start" -v b="$end" 'BEGIN {printf "%.4f", (b - a) / 1e9}')
		if faster "$s" "$best"; then best=$s; fi
	done
	echo "$best"
}

# packets_of FILE: the packet count capinfos reads.
packets_of() { capinfos -c -M "$1" | awk -F': *' '/Number of packets/ {print $2}'; }

# as_installed BIN rewrites a binary the linker just wrote as a copy of itself:
# run from the linker's own file, a process maps 4-5 MB more of it (RssFile
# 30 against 25 MB on the https shape, the same bytes copied), which its peak
# RSS would count against it and not against a baseline built earlier.
as_installed() { cp "$1" "$1.copy" && mv "$1.copy" "$1"; }
