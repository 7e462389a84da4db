package main

import (
	"github.com/spf13/cobra"

	"github.com/slowstart/slowstart/lab/reproduce"
)

func newLabReproduceCommand() *cobra.Command {
	var o reproduce.Options
	cmd := &cobra.Command{
		Use:   "reproduce",
		Short: "Re-run the published IW experiments (Dukkipati et al. 2010, CS244 2012) and write a report",
		Long: `Run, in the lab, the experiments of "An Argument for Increasing TCP's Initial
Congestion Window" (Dukkipati et al., 2010) and of the Stanford CS244 reproduction:
1. the IW sweep (IW 3 to 42, 27 and 29 segments, RTT 140 ms);
2. the improvement of IW 10 over IW 3 by response size at 70 ms and 1.2 Mbit/s
   (the paper's Fig. 7);
3. an RTT sweep and 4. a bandwidth sweep (CS244), 5. a BDP sweep;
6. IW 3, 10 and 32 under 0-5% random loss, with retransmission counts;
7. TCP and QUIC side by side: the same page on the same path over HTTP/2
   and over HTTP/3, with the round trips each took (no published numbers).

OUT receives a CSV per experiment (every trial, and a summary per point with the
model's prediction), plots (SVG and PNG) and report.md / report.html, which set
the published numbers beside the lab's and explain the differences. The full run
takes under 10 minutes; --quick runs fewer points and trials in under 2.`,
		Example: `  slowstart lab reproduce --out repro
  slowstart lab reproduce --out repro-quick --quick`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return reproduce.Print(cmd.Context(), o, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	cmd.Flags().StringVarP(&o.OutDir, "out", "o", "", "directory for the CSVs, plots and report (required)")
	cmd.Flags().BoolVar(&o.Quick, "quick", false, "fewer points and trials (under 2 minutes)")
	cmd.Flags().IntVar(&o.Parallel, "parallel", 12, "trials run at once")
	return cmd
}
