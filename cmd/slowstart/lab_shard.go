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
	var out string
	cmd := &cobra.Command{
		Use:   "merge -o OUT DIR...",
		Short: "Join the results of a sweep's shards (lab sweep --shard I/N) into OUT",
		Long: `Join the results.jsonl of sweep directories (the shards of one sweep, run with
--shard I/N, on one machine or many) into OUT/results.jsonl and OUT/results.csv (-o OUT), as
one unsharded sweep would have written them. A trial (a point and its number) found
in two directories is an error, and nothing is written.`,
		Example:     `  slowstart lab sweep merge -o sweep-all sweep-0 sweep-1 sweep-2 sweep-3`,
		Args:        cobra.MinimumNArgs(1),
		Annotations: abandonOnInterrupt,
		RunE: func(cmd *cobra.Command, args []string) error {
			out, sweeps, err := mergeArgs(cmd, "out", out, args)
			if err != nil {
				return err
			}
			return lab.MergeSweeps(out, sweeps, cmd.OutOrStdout())
		},
	}
	cmd.Flags().StringVarP(&out, "out", "o", "", "the directory for the merged results.jsonl and results.csv (required)")
	return cmd
}
