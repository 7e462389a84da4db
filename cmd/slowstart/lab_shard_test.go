package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/slowstart/slowstart/lab"
	"github.com/slowstart/slowstart/survey"
)

// TestShardJobs: the shards of a sweep's grid are disjoint and together the
// whole grid, and the same in every call.
func TestShardJobs(t *testing.T) {
	var jobs []lab.Job
	for _, iw := range []int{3, 10, 32} {
		for _, size := range []int64{10000, 50000, 100000, 150000} {
			s := lab.Spec{IW: iw, SizeBytes: size, RTTNs: 70e6, Server: lab.ServerBuiltin, Client: lab.ClientBuiltin, CC: "cubic"}
			for trial := 1; trial <= 5; trial++ {
				jobs = append(jobs, lab.Job{Spec: s, Trial: trial})
			}
		}
	}
	const n = 4
	seen := map[string]int{}
	for i := range n {
		part := shardJobs(jobs, survey.Shard{Index: i, Count: n})
		again := shardJobs(jobs, survey.Shard{Index: i, Count: n})
		if len(part) != len(again) {
			t.Fatalf("shard %d: %d then %d jobs", i, len(part), len(again))
		}
		if len(part) == 0 || len(part) == len(jobs) {
			t.Errorf("shard %d holds %d of %d jobs", i, len(part), len(jobs))
		}
		for _, j := range part {
			seen[j.Key()]++
		}
	}
	if len(seen) != len(jobs) {
		t.Errorf("the shards hold %d of %d jobs", len(seen), len(jobs))
	}
	for k, c := range seen {
		if c != 1 {
			t.Errorf("%s in %d shards", k, c)
		}
	}
	if got := shardJobs(jobs, survey.Shard{}); len(got) != len(jobs) {
		t.Errorf("no shard: %d of %d jobs", len(got), len(jobs))
	}
}

// TestLabSweepMerge joins two shards' results into one sweep's, and refuses
// shards that overlap.
func TestLabSweepMerge(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, trials ...int) string {
		d := filepath.Join(dir, name)
		w, err := lab.OpenJSONL(filepath.Join(d, "results.jsonl"))
		if err != nil {
			t.Fatal(err)
		}
		for _, trial := range trials {
			if err := w.Write(lab.Row{Point: "rtt70-iw10", IW: 10, TrialResult: lab.TrialResult{Trial: trial, FCTUserMs: float64(100 + trial)}}); err != nil {
				t.Fatal(err)
			}
		}
		w.Close()
		return d
	}
	a, b := write("a", 1, 3), write("b", 2, 4)
	out := filepath.Join(dir, "all")
	if code, stdout, errOut := runCLI(t, "lab", "sweep", "merge", out, a, b); code != exitOK || !strings.Contains(stdout, "4 trials from 2 sweeps") {
		t.Fatalf("merge: exit %d, %q %q", code, stdout, errOut)
	}
	rows, err := lab.ReadRows(filepath.Join(out, "results.jsonl"))
	if err != nil || len(rows) != 4 {
		t.Fatalf("%d merged rows, %v", len(rows), err)
	}
	for i, r := range rows {
		if r.Trial != i+1 || r.FCTUserMs != float64(101+i) {
			t.Errorf("row %d: trial %d, FCT %v", i, r.Trial, r.FCTUserMs)
		}
	}
	if _, err := os.Stat(filepath.Join(out, "results.csv")); err != nil {
		t.Error("no results.csv")
	}
	c := write("c", 3)
	if code, _, errOut := runCLI(t, "lab", "sweep", "merge", filepath.Join(dir, "again"), a, c); code != exitFailure || !strings.Contains(errOut, "rtt70-iw10#3") {
		t.Errorf("overlapping shards: exit %d, %q", code, errOut)
	}
}
