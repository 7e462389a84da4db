package main

import (
	"errors"
	"fmt"
	"hash/fnv"
	"os"
	"path/filepath"
	"sort"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/slowstart/slowstart/lab"
	"github.com/slowstart/slowstart/survey"
)

// shardJobs keeps the jobs of one shard of a sweep: a trial falls in shard
// FNV-1a(point label + "#" + trial) mod N, so every process given the same
// grid and N agrees, and the N shards together run the whole grid once.
func shardJobs(jobs []lab.Job, s survey.Shard) []lab.Job {
	if s.Count <= 1 {
		return jobs
	}
	var out []lab.Job
	for _, j := range jobs {
		h := fnv.New64a()
		h.Write([]byte(j.Key()))
		if int(h.Sum64()%uint64(s.Count)) == s.Index {
			out = append(out, j)
		}
	}
	return out
}

func newLabSweepMergeCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "merge OUT DIR...",
		Short: "Join the results of a sweep's shards (lab sweep --shard I/N) into OUT",
		Long: `Join the results.jsonl of sweep directories (the shards of one sweep, run with
--shard I/N, on one machine or many) into OUT/results.jsonl and OUT/results.csv, as
one unsharded sweep would have written them. A trial (a point and its number) found
in two directories is an error, and nothing is written.`,
		Example:     `  slowstart lab sweep merge sweep-all sweep-0 sweep-1 sweep-2 sweep-3`,
		Args:        cobra.MinimumNArgs(2),
		Annotations: abandonOnInterrupt,
		RunE: func(cmd *cobra.Command, args []string) error {
			out := args[0]
			jsonl := filepath.Join(out, "results.jsonl")
			if _, err := os.Stat(jsonl); err == nil {
				return withCode(exitUsage, fmt.Errorf("%s exists: merge into a new directory", jsonl))
			}
			var all []lab.Row
			from := map[string]string{}
			for _, dir := range args[1:] {
				path := filepath.Join(dir, "results.jsonl")
				if _, err := os.Stat(path); err != nil {
					return fileError(fmt.Errorf("reading the shard %s: %w", dir, err))
				}
				rows, err := lab.ReadRows(path)
				if err != nil {
					return fileError(fmt.Errorf("reading %s: %w", path, err))
				}
				seenHere := map[string]bool{}
				for _, r := range lab.LatestRows(rows) {
					k := r.Point + "#" + strconv.Itoa(r.Trial)
					if other, dup := from[k]; dup && !seenHere[k] {
						return withCode(exitFailure, fmt.Errorf("trial %s is in both %s and %s: shards of one sweep never overlap", k, other, dir))
					}
					from[k], seenHere[k] = dir, true
				}
				all = append(all, rows...)
			}
			if err := checkOutputDir("out", out); err != nil {
				return err
			}
			merged := lab.LatestRows(all)
			sort.SliceStable(merged, func(i, j int) bool {
				if merged[i].Point != merged[j].Point {
					return merged[i].Point < merged[j].Point
				}
				return merged[i].Trial < merged[j].Trial
			})
			w, err := lab.OpenJSONL(jsonl)
			if err != nil {
				return fileError(err)
			}
			for _, r := range merged {
				if err := w.Write(r); err != nil {
					w.Close()
					return fileError(err)
				}
			}
			if err := w.Close(); err != nil {
				return fileError(err)
			}
			csvPath := filepath.Join(out, "results.csv")
			cf, err := os.Create(csvPath)
			if err != nil {
				return fileError(err)
			}
			if err := errors.Join(lab.WriteCSV(cf, merged), cf.Close()); err != nil {
				return fileError(err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%d trials from %d sweeps into %s, %s\n", len(merged), len(args)-1, jsonl, csvPath)
			return nil
		},
	}
	return cmd
}
