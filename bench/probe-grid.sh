#!/bin/sh
# probe-grid.sh: the passive probe against the built-in lab server over the whole
# grid: IW 1, 2, 3, 4, 10, 16, 32, 64 x RTT 20, 150 ms x {HTTP/1.1, TLS 1.2 +
# HTTP/1.1, TLS 1.3 + HTTP/2}, a 150 KB body. Each point checks the verdict: exact
# with the true IW where the response is at least twice the IW, lower_bound
# elsewhere, never a wrong exact. Prints one line per point and a tally. Needs root.
set -eu
cd "$(dirname "$0")/.."
parallel=${PARALLEL:-4}
out=$(SLOWSTART_PROBE_GRID=1 go test ./probe/ -run 'TestProbeGrid' -count=1 -v -parallel "$parallel" -timeout 20m 2>&1) || status=$?
echo "$out" | grep -o 'GRID .*' | sort
echo "$out" | grep -E -- '--- FAIL|lab_test.go.*(verdict|bound|want)' || true
pass=$(echo "$out" | grep -c -- '--- PASS: TestProbeGrid/' || true)
fail=$(echo "$out" | grep -c -- '--- FAIL: TestProbeGrid/' || true)
echo "points: $pass passed, $fail failed"
exit "${status:-0}"
