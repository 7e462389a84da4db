package main

import (
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
