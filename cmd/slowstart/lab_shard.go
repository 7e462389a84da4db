package main

import (
	"github.com/spf13/cobra"

	"github.com/slowstart/slowstart/lab"
	"github.com/slowstart/slowstart/survey"
)

// shardJobs keeps the jobs of one shard of a sweep (lab.ShardJobs).
func shardJobs(jobs []lab.Job, s survey.Shard) []lab.Job {
	return lab.ShardJobs(jobs, s.Index, s.Count)
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
			return lab.MergeSweeps(args[0], args[1:], cmd.OutOrStdout())
		},
	}
	return cmd
}
