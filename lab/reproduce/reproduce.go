package reproduce

import (
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/slowstart/slowstart/lab"
)

// Options control a reproduction.
type Options struct {
	OutDir   string
	Quick    bool
	Parallel int // trials at once; 0: 12
	// Progress, when set, is called after every trial with the trials done and the total.
	Progress func(done, total int)
	// Stage, when set, is told what the reproduction is doing ("running 1042 trials").
	Stage func(string)
}

// Result is what a reproduction produced.
type Result struct {
	Sections []Section
	Files    []string // every file written, report first
	// Notes say what the plots could not show (points a log axis can't draw).
	Notes   []string
	Trials  int
	Failed  int
	Elapsed time.Duration
}

// Run runs every experiment in the lab, then writes the CSVs, plots and the report to
// opts.OutDir.
func Run(ctx context.Context, env *lab.Env, opts Options) (*Result, error) {
	if opts.OutDir == "" {
		return nil, errors.New("reproduce: an output directory is required")
	}
	if err := os.MkdirAll(opts.OutDir, 0o755); err != nil {
		return nil, fmt.Errorf("making the output directory: %w", err)
	}
	if opts.Parallel <= 0 {
		opts.Parallel = 12
	}
	stage := opts.Stage
	if stage == nil {
		stage = func(string) {}
	}
	start := time.Now()
	exps := Experiments(opts.Quick)
	jobs := Jobs(exps)
	stage(fmt.Sprintf("running %d trials of %d experiments, %d at once", len(jobs), len(exps), opts.Parallel))
	done := 0
	rows, err := env.RunJobs(ctx, jobs, lab.RunOptions{Parallel: opts.Parallel, DistortedReruns: lab.DefaultDistortedReruns, OnResult: func(lab.Job, lab.Row, error) {
		done++
		if opts.Progress != nil {
			opts.Progress(done, len(jobs))
		}
	}})
	if err != nil {
		return nil, fmt.Errorf("running the trials (nothing was written): %w", err)
	}
	byKey := map[string]lab.Row{}
	for i, j := range jobs {
		byKey[j.Key()] = rows[i]
	}
	stage("writing CSVs, plots and the report")
	res := &Result{Trials: len(jobs)}
	for _, r := range rows {
		if r.Error != "" {
			res.Failed++
		}
	}
	for _, e := range exps {
		var expRows []lab.Row
		points := map[string]Point{}
		for _, s := range e.Specs {
			var pr []lab.Row
			for t := 1; t <= e.Trials; t++ {
				pr = append(pr, byKey[lab.Job{Spec: s, Trial: t}.Key()])
			}
			expRows = append(expRows, pr...)
			points[s.Label()] = summarize(s, pr)
		}
		csvPath := filepath.Join(opts.OutDir, e.Name+".csv")
		if err := writeRowsCSV(csvPath, expRows); err != nil {
			return nil, err
		}
		sumPath := filepath.Join(opts.OutDir, e.Name+"_summary.csv")
		if err := writeSummaryCSV(sumPath, e, points); err != nil {
			return nil, err
		}
		sec, figs := analyze(e, points)
		for _, f := range figs {
			notes, err := f.render(opts.OutDir)
			if err != nil {
				return nil, err
			}
			res.Notes = append(res.Notes, notes...)
			res.Files = append(res.Files, filepath.Join(opts.OutDir, f.Name+".svg"), filepath.Join(opts.OutDir, f.Name+".png"))
		}
		res.Files = append(res.Files, csvPath, sumPath)
		res.Sections = append(res.Sections, sec)
	}
	res.Elapsed = time.Since(start)
	md, html, err := writeReport(opts.OutDir, res, opts.Quick)
	if err != nil {
		return nil, err
	}
	res.Files = append([]string{md, html}, res.Files...)
	return res, nil
}

func writeRowsCSV(path string, rows []lab.Row) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := lab.WriteCSV(f, rows); err != nil {
		f.Close()
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return f.Close()
}

// writeSummaryCSV writes one line per point: the medians, 95% intervals and the model.
func writeSummaryCSV(path string, e Experiment, points map[string]Point) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	w := csv.NewWriter(f)
	_ = w.Write([]string{"point", "rtt_ms", "rate_mbps", "iw", "size_bytes", "loss_percent", "trials", "failed",
		"fct_paper_median_ms", "fct_paper_mean_ms", "fct_paper_ci95_ms", "fct_user_median_ms", "fct_user_mean_ms", "fct_user_ci95_ms",
		"data_packets_lost_mean", "model_fct_paper_ms", "model_fct_user_ms", "model_http_rounds"})
	ff := func(x float64) string { return strconv.FormatFloat(x, 'f', 3, 64) }
	for _, s := range e.Specs {
		p := points[s.Label()]
		_ = w.Write([]string{s.Label(), ff(float64(s.RTTNs) / 1e6), ff(float64(s.RateBitsPerSecond) / 1e6), strconv.Itoa(s.IW),
			strconv.FormatInt(s.SizeBytes, 10), ff(s.LossRate * 100), strconv.Itoa(len(p.Rows)), strconv.Itoa(p.Failed),
			ff(p.Paper.Median), ff(p.Paper.Mean), ff(p.PaperCI), ff(p.User.Median), ff(p.User.Mean), ff(p.UserCI),
			ff(p.DataLostMean), ff(p.Model.FCTPaperMs), ff(p.Model.FCTUserMs), strconv.Itoa(p.Model.RoundTrips.HTTP)})
	}
	w.Flush()
	if err := w.Error(); err != nil {
		f.Close()
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return f.Close()
}
