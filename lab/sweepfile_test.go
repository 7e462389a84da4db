package lab

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// TestSweepResume: a sweep's results.jsonl decides what a rerun still has to do
// (failed trials again, done ones not), and FinishSweep writes the CSV of the
// latest row of each trial.
func TestSweepResume(t *testing.T) {
	dir := t.TempDir()
	g := defaultGrid()
	g.IW, g.Trials = "3,10", 3
	specs := mustSpecs(t, g)
	jobs := g.Jobs(specs)
	todo, err := PendingJobs(jobs, filepath.Join(dir, SweepJSONL))
	if err != nil || len(todo) != len(jobs) {
		t.Fatalf("a new sweep: %d of %d jobs to do (%v)", len(todo), len(jobs), err)
	}
	w, err := OpenJSONL(filepath.Join(dir, SweepJSONL))
	if err != nil {
		t.Fatal(err)
	}
	// Trial 1 of both points done, trial 2 of the first failed.
	rows := []Row{NewRow(specs[0], TrialResult{Trial: 1, FCTUserMs: 100}), NewRow(specs[1], TrialResult{Trial: 1, FCTUserMs: 90}),
		NewRow(specs[0], TrialResult{Trial: 2, Error: "reset"})}
	for _, r := range rows {
		if err := w.Write(r); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	todo, err = PendingJobs(jobs, filepath.Join(dir, SweepJSONL))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{}
	for _, j := range jobs {
		want[j.Key()] = true
	}
	delete(want, jobs[0].Key()) // point 0, trial 1
	delete(want, jobs[3].Key()) // point 1, trial 1
	if len(todo) != len(want) {
		t.Fatalf("%d jobs to do, want %d", len(todo), len(want))
	}
	for _, j := range todo {
		if !want[j.Key()] {
			t.Errorf("%s is done but would run again", j.Key())
		}
	}
	// The failed trial, run again and done: the CSV keeps that row.
	w, _ = OpenJSONL(filepath.Join(dir, SweepJSONL))
	w.Write(NewRow(specs[0], TrialResult{Trial: 2, FCTUserMs: 110}))
	w.Close()
	latest, err := FinishSweep(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(latest) != 3 || latest[2].Error != "" || latest[2].FCTUserMs != 110 {
		t.Errorf("latest rows %+v", latest)
	}
	var wantCSV bytes.Buffer
	WriteCSV(&wantCSV, latest)
	if got, err := os.ReadFile(filepath.Join(dir, SweepCSV)); err != nil || !bytes.Equal(got, wantCSV.Bytes()) {
		t.Errorf("results.csv (%v):\n%s\nwant:\n%s", err, got, wantCSV.Bytes())
	}
}

// TestReadShardsOverlap: two shards holding one trial are refused with an
// *OverlapError naming both.
func TestReadShardsOverlap(t *testing.T) {
	specs := mustSpecs(t, defaultGrid())
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	if err := WriteSweep(a, []Row{NewRow(specs[0], TrialResult{Trial: 1}), NewRow(specs[0], TrialResult{Trial: 2})}); err != nil {
		t.Fatal(err)
	}
	if err := WriteSweep(b, []Row{NewRow(specs[0], TrialResult{Trial: 2})}); err != nil {
		t.Fatal(err)
	}
	_, err := ReadShards([]string{a, b})
	var overlap *OverlapError
	if !errors.As(err, &overlap) || overlap.First != a || overlap.Second != b {
		t.Fatalf("error %v, want an overlap of %s and %s", err, a, b)
	}
	if err := os.Remove(filepath.Join(b, SweepJSONL)); err != nil {
		t.Fatal(err)
	}
	if err := WriteSweep(b, []Row{NewRow(specs[0], TrialResult{Trial: 3})}); err != nil {
		t.Fatal(err)
	}
	rows, err := ReadShards([]string{b, a})
	if err != nil || len(rows) != 3 || rows[0].Trial != 1 || rows[2].Trial != 3 {
		t.Fatalf("merged %d rows (%v), want trials 1, 2, 3 in order", len(rows), err)
	}
}
