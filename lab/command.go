package lab

// This file runs the lab verbs as slowstart lab run, sweep and sweep merge
// do: the lab's context, the trials with their progress on standard error,
// the results written and printed. Errors are marked with their fault kind
// (package fault).

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/slowstart/slowstart/internal/fault"
	"github.com/slowstart/slowstart/internal/hoststeal"
	"github.com/slowstart/slowstart/internal/jsonout"
	"github.com/slowstart/slowstart/internal/outpath"
	"github.com/slowstart/slowstart/internal/progress"
	"github.com/slowstart/slowstart/lab/netlab"
)

// Context is the context a lab verb runs its trials in: it removes every live
// trial on Ctrl-C or SIGTERM (stop ends that), after removing what a killed
// run left behind. It needs root (fault.Permission).
func Context(parent context.Context) (ctx context.Context, stop func(), err error) {
	if os.Geteuid() != 0 {
		return nil, nil, fault.Permissionf("the lab creates network namespaces, which needs root (CAP_SYS_ADMIN and CAP_NET_ADMIN): run it with sudo")
	}
	ctx, stop = netlab.HandleSignals(parent)
	if _, err := netlab.Clean(ctx, false); err != nil {
		stop()
		return nil, nil, fmt.Errorf("removing a previous run's leftovers: %w", err)
	}
	return ctx, stop, nil
}

// begin checks, in order, that the directories the flags name (flag, dir,
// flag, dir...) can be written, then opens the lab's context (Context).
func begin(ctx context.Context, flagDirs ...string) (context.Context, func(), error) {
	for i := 0; i+1 < len(flagDirs); i += 2 {
		if err := outpath.CheckDir(flagDirs[i], flagDirs[i+1]); err != nil {
			return nil, nil, err
		}
	}
	return Context(ctx)
}

// BatchOptions are the trials of lab run and lab sweep: the grid's points
// (Specs, from Grid.Specs), Parallel at once, each trial's captures into
// CaptureDir when set.
type BatchOptions struct {
	Grid       Grid
	Specs      []Spec
	Parallel   int
	CaptureDir string
}

// RunPoint runs the trials of one point (with Grid.HTTP3, the point and its
// HTTP/3 twin) and prints them (text, or JSON) to out, their progress to
// errOut. A signal prints the trials finished (fault.Interrupted).
func RunPoint(ctx context.Context, o BatchOptions, asJSON bool, out, errOut io.Writer) error {
	specs := o.Specs
	if len(specs) != 1 && !(o.Grid.HTTP3 && len(specs) == 2) {
		return fault.Usagef("lab run takes one value per flag; use lab sweep for lists")
	}
	ctx, stop, err := begin(ctx, "capture", o.CaptureDir)
	if err != nil {
		return err
	}
	defer stop()
	trials := "trials"
	if o.Grid.Trials == 1 {
		trials = "trial"
	}
	what := specs[0].Label()
	if o.Grid.HTTP3 {
		what += ", over TCP and over HTTP/3 (each)"
	}
	fmt.Fprintf(errOut, "Running %d %s of %s...\n", o.Grid.Trials, trials, what)
	meter := hoststeal.Start()
	total := o.Grid.Trials * len(specs)
	bar := progress.NewCount(total, "trials", "trials")
	var finished []Row
	rows, err := NewEnv().RunJobs(ctx, o.Grid.Jobs(specs), RunOptions{Parallel: o.Parallel, CaptureDir: o.CaptureDir, DistortedReruns: DefaultDistortedReruns,
		OnResult: func(_ Job, r Row, _ error) {
			finished = append(finished, r)
			bar.Add(1)
		}})
	bar.Finish()
	if err != nil {
		// Interrupted: the trials that ended are the result so far.
		if !asJSON && len(finished) > 0 {
			if werr := WriteRunText(out, specs, finished, NewHostSteal(meter.Read())); werr != nil {
				return werr
			}
		}
		return fault.Interruptedf("interrupted; %d of %d trials finished (above); the lab's namespaces were removed", len(finished), total)
	}
	steal := NewHostSteal(meter.Read())
	if asJSON {
		return jsonout.Write(out, NewRunOutput(specs, rows, steal))
	}
	if err := WriteRunText(out, specs, rows, steal); err != nil {
		return err
	}
	if o.CaptureDir != "" {
		fmt.Fprintf(out, "captures: %s (analyze them with: slowstart analyze FILE; an HTTP/3 trial's with --keylog FILE.keys)\n", o.CaptureDir)
	}
	if failed := FailedPoints(specs, rows); failed > 0 {
		return fmt.Errorf("every trial of %d of the %d points failed", failed, len(specs))
	}
	return nil
}

// Sweep runs every trial of the grid's points (those of shard index of count
// when count > 1) not yet in dir's results.jsonl, appending each as it ends,
// then writes results.csv and prints the points' summaries to out. A signal
// keeps what was written, for the same command to resume (fault.Interrupted).
func Sweep(ctx context.Context, o BatchOptions, dir string, index, count int, out, errOut io.Writer) error {
	ctx, stop, err := begin(ctx, "out", dir, "capture", o.CaptureDir)
	if err != nil {
		return err
	}
	defer stop()
	jsonl := filepath.Join(dir, SweepJSONL)
	jobs := ShardJobs(o.Grid.Jobs(o.Specs), index, count)
	todo, err := PendingJobs(jobs, jsonl)
	if err != nil {
		return fault.Filef("reading %s to resume: %w", jsonl, err)
	}
	if skipped := len(jobs) - len(todo); skipped > 0 {
		fmt.Fprintf(errOut, "resuming: %d of %d trials already done in %s\n", skipped, skipped+len(todo), jsonl)
	}
	w, err := OpenJSONL(jsonl)
	if err != nil {
		return fault.Mark(fault.File, err)
	}
	defer w.Close()
	bar := progress.NewCount(len(todo), fmt.Sprintf("%d points", len(o.Specs)), "trials")
	meter := hoststeal.Start()
	var writeErr error
	_, runErr := NewEnv().RunJobs(ctx, todo, RunOptions{Parallel: o.Parallel, CaptureDir: o.CaptureDir, DistortedReruns: DefaultDistortedReruns,
		OnResult: func(_ Job, r Row, _ error) {
			if err := w.Write(r); err != nil && writeErr == nil {
				writeErr = err
			}
			bar.Add(1)
		}})
	bar.Finish()
	if writeErr != nil {
		return fault.Filef("writing %s: %w", jsonl, writeErr)
	}
	rows, err := FinishSweep(dir)
	if err != nil {
		return fault.Mark(fault.File, err)
	}
	if runErr != nil {
		return fault.Interruptedf("interrupted; %d trials are in %s: run the same command again to resume", len(rows), jsonl)
	}
	if err := WriteSweepText(out, o.Specs, rows, NewHostSteal(meter.Read())); err != nil {
		return err
	}
	fmt.Fprintf(out, "results: %s, %s\n", jsonl, filepath.Join(dir, SweepCSV))
	return nil
}
