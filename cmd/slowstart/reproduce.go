package main

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/slowstart/slowstart/internal/hoststeal"
	"github.com/slowstart/slowstart/internal/outpath"
	"github.com/slowstart/slowstart/internal/progress"
	"github.com/slowstart/slowstart/lab"
	"github.com/slowstart/slowstart/lab/reproduce"
)

func newLabReproduceCommand() *cobra.Command {
	var out string
	var quick bool
	var parallel int
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
			if out == "" {
				return withCode(exitUsage, errors.New("--out DIR is required"))
			}
			if parallel < 1 {
				return withCode(exitUsage, errors.New("--parallel must be 1 or more"))
			}
			if err := outpath.CheckDir("out", out); err != nil {
				return err
			}
			ctx, stop, err := labContext(cmd.Context())
			if err != nil {
				return err
			}
			defer stop()
			stderr := cmd.ErrOrStderr()
			var bar *progress.Count
			meter := hoststeal.Start()
			res, err := reproduce.Run(ctx, lab.NewEnv(), reproduce.Options{
				OutDir: out, Quick: quick, Parallel: parallel,
				Stage: func(s string) {
					if bar != nil {
						bar.Finish()
						bar = nil
					}
					fmt.Fprintln(stderr, s)
				},
				Progress: func(done, total int) {
					if bar == nil {
						bar = progress.NewCount(total, "trials", "trials")
					}
					bar.Set(done, 50)
				},
			})
			if bar != nil {
				bar.Finish()
			}
			if err != nil && ctx.Err() != nil {
				return interrupted("interrupted; the lab's namespaces were removed, what was finished is in %s", out)
			}
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			fmt.Fprintf(w, "%d trials (%d failed) in %s:\n", res.Trials, res.Failed, res.Elapsed.Round(1e9))
			for i, s := range res.Sections {
				headline := s.Headline
				if headline == "" {
					headline = "no result (its trials failed)"
				}
				fmt.Fprintf(w, "  %d. %s: %s.\n", i+1, s.Title, headline)
			}
			if len(res.Files) > 0 {
				fmt.Fprintf(w, "The report, with the tables, plots and what matches the papers: %s (%d files in %s).\n", res.Files[0], len(res.Files), out)
			}
			for _, n := range res.Notes {
				fmt.Fprintf(w, "note: %s\n", n)
			}
			if warning := lab.StealWarning(lab.NewHostSteal(meter.Read())); warning != "" {
				fmt.Fprintf(w, "warning: %s\n", warning)
			}
			if res.Failed*10 > res.Trials {
				return fmt.Errorf("%d of %d trials failed: see the error column of the CSVs", res.Failed, res.Trials)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&out, "out", "", "directory for the CSVs, plots and report (required)")
	cmd.Flags().BoolVar(&quick, "quick", false, "fewer points and trials (under 2 minutes)")
	cmd.Flags().IntVar(&parallel, "parallel", 12, "trials run at once")
	return cmd
}
