package reproduce

import (
	"context"
	"fmt"
	"io"

	"github.com/slowstart/slowstart/internal/fault"
	"github.com/slowstart/slowstart/internal/hoststeal"
	"github.com/slowstart/slowstart/internal/outpath"
	"github.com/slowstart/slowstart/internal/progress"
	"github.com/slowstart/slowstart/lab"
)

// Print runs the reproduction as slowstart lab reproduce does (o's Stage and
// Progress are set here: the stages and a progress bar on errOut) and prints
// its headline results to out. Errors are marked with their fault kind; more
// than a tenth of the trials failing is a failure.
func Print(ctx context.Context, o Options, out, errOut io.Writer) error {
	switch {
	case o.OutDir == "":
		return fault.Usagef("--out DIR is required")
	case o.Parallel < 1:
		return fault.Usagef("--parallel must be 1 or more")
	}
	if err := outpath.CheckDir("out", o.OutDir); err != nil {
		return err
	}
	ctx, stop, err := lab.Context(ctx)
	if err != nil {
		return err
	}
	defer stop()
	var bar *progress.Count
	meter := hoststeal.Start()
	o.Stage = func(s string) {
		if bar != nil {
			bar.Finish()
			bar = nil
		}
		fmt.Fprintln(errOut, s)
	}
	o.Progress = func(done, total int) {
		if bar == nil {
			bar = progress.NewCount(total, "trials", "trials")
		}
		bar.Set(done, 50)
	}
	res, err := Run(ctx, lab.NewEnv(), o)
	if bar != nil {
		bar.Finish()
	}
	if err != nil && ctx.Err() != nil {
		return fault.Interruptedf("interrupted; the lab's namespaces were removed, what was finished is in %s", o.OutDir)
	}
	if err != nil {
		return err
	}
	writeHeadlines(out, res, o.OutDir)
	if warning := lab.StealWarning(lab.NewHostSteal(meter.Read())); warning != "" {
		fmt.Fprintf(out, "warning: %s\n", warning)
	}
	if res.Failed*10 > res.Trials {
		return fmt.Errorf("%d of %d trials failed: see the error column of the CSVs", res.Failed, res.Trials)
	}
	return nil
}

// writeHeadlines says each experiment's result in a line, and where the
// report is.
func writeHeadlines(w io.Writer, res *Result, dir string) {
	fmt.Fprintf(w, "%d trials (%d failed) in %s:\n", res.Trials, res.Failed, res.Elapsed.Round(1e9))
	for i, s := range res.Sections {
		headline := s.Headline
		if headline == "" {
			headline = "no result (its trials failed)"
		}
		fmt.Fprintf(w, "  %d. %s: %s.\n", i+1, s.Title, headline)
	}
	if len(res.Files) > 0 {
		fmt.Fprintf(w, "The report, with the tables, plots and what matches the papers: %s (%d files in %s).\n", res.Files[0], len(res.Files), dir)
	}
	for _, n := range res.Notes {
		fmt.Fprintf(w, "note: %s\n", n)
	}
}
