#!/usr/bin/env bash
# survey-scale.sh
#
# Surveys 100,000 targets (2,000 server addresses × 50 paths) of an emulated fleet on
# this machine with the slowstart binary (bench/survey, package survey/surveylab): the
# whole list killed at random moments 5 times and resumed, then 4,000 targets whole and in
# 4 shards run as 4 processes, merged and compared. Prints targets per minute, peak RSS and
# CPU of the survey processes, and the checks: every target measured exactly once, the
# merged shards = the unsharded survey, every reading = the server's configured IW (or a
# lower bound below it, with its reason), no nftables table left. Exits 1 if one fails.
#
# Targets: peak RSS ≤ 300 MB at the concurrency given (300 by default); every check passes.
# Needs root, Go and nginx (apt-get install -y nginx-light). About 20 to 30 minutes on two
# cores. Extra arguments go to the benchmark (e.g. -addresses 200 -paths 10 for a short run).
set -euo pipefail

bench_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
module_dir=$(dirname "$bench_dir")
if [[ $(id -u) != 0 ]]; then
	echo "$0: needs root (network namespaces, nftables, captures)" >&2
	exit 1
fi
if ! command -v nginx >/dev/null; then
	echo "$0: nginx is missing: apt-get install -y nginx-light" >&2
	exit 1
fi
work_dir=$(mktemp -d "${TMPDIR:-/tmp}/slowstart-survey-scale.XXXXXX")
trap 'rm -rf "$work_dir"' EXIT
trap 'exit 130' INT TERM

echo "building slowstart and the benchmark..."
(cd "$module_dir" && CGO_ENABLED=0 go build -trimpath -o "$work_dir/slowstart" ./cmd/slowstart &&
	go build -o "$work_dir/survey-bench" ./bench/survey)
"$work_dir/survey-bench" -bin "$work_dir/slowstart" -work "$work_dir/run" \
	-addresses 2000 -paths 50 -concurrency 300 -page-loads 32 -exact-runs 2 -kills 5 \
	-shards 4 -shard-targets 4000 "$@"
