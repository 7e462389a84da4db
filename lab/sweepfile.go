package lab

import (
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"

	"github.com/slowstart/slowstart/internal/fault"
	"github.com/slowstart/slowstart/internal/outpath"
)

// A sweep's directory holds SweepJSONL, one row per trial appended as it ends (so
// that an interrupted sweep resumes where it stopped), and SweepCSV, the latest
// row of every trial, written at the end.
const (
	SweepJSONL = "results.jsonl"
	SweepCSV   = "results.csv"
)

// ShardJobs keeps the jobs of shard index of count: a trial falls in shard
// FNV-1a(point label + "#" + trial) mod count, so every process given the same
// grid and count agrees, and the shards together run the whole grid once. A count
// of 0 or 1 keeps every job.
func ShardJobs(jobs []Job, index, count int) []Job {
	if count <= 1 {
		return jobs
	}
	var out []Job
	for _, j := range jobs {
		h := fnv.New64a()
		h.Write([]byte(j.Key()))
		if int(h.Sum64()%uint64(count)) == index {
			out = append(out, j)
		}
	}
	return out
}

// PendingJobs are the jobs the rows of a sweep's SweepJSONL at path (none when it
// does not exist) do not already hold a successful trial of.
func PendingJobs(jobs []Job, path string) ([]Job, error) {
	previous, err := ReadRows(path)
	if err != nil {
		return nil, err
	}
	done := DoneKeys(previous)
	var todo []Job
	for _, j := range jobs {
		if !done[j.Key()] {
			todo = append(todo, j)
		}
	}
	return todo, nil
}

// FinishSweep writes dir's SweepCSV from its SweepJSONL and returns the rows in
// it: the latest of each trial.
func FinishSweep(dir string) ([]Row, error) {
	all, err := ReadRows(filepath.Join(dir, SweepJSONL))
	if err != nil {
		return nil, err
	}
	latest := LatestRows(all)
	return latest, writeCSVFile(filepath.Join(dir, SweepCSV), latest)
}

func writeCSVFile(path string, rows []Row) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := WriteCSV(f, rows); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// OverlapError is MergeSweeps' refusal of a trial found in two shards.
type OverlapError struct {
	Trial, First, Second string
}

func (e *OverlapError) Error() string {
	return fmt.Sprintf("trial %s is in both %s and %s: shards of one sweep never overlap", e.Trial, e.First, e.Second)
}

// ReadShards reads the SweepJSONL of each sweep directory (the shards of one
// sweep) and returns the latest row of every trial, sorted by point and trial; a
// trial in two directories is an *OverlapError.
func ReadShards(dirs []string) ([]Row, error) {
	var all []Row
	from := map[string]string{}
	for _, dir := range dirs {
		path := filepath.Join(dir, SweepJSONL)
		if _, err := os.Stat(path); err != nil {
			return nil, fmt.Errorf("reading the shard %s: %w", dir, err)
		}
		rows, err := ReadRows(path)
		if err != nil {
			return nil, fmt.Errorf("reading %s: %w", path, err)
		}
		seenHere := map[string]bool{}
		for _, r := range LatestRows(rows) {
			k := r.Point + "#" + strconv.Itoa(r.Trial)
			if other, dup := from[k]; dup && !seenHere[k] {
				return nil, &OverlapError{Trial: k, First: other, Second: dir}
			}
			from[k], seenHere[k] = dir, true
		}
		all = append(all, rows...)
	}
	merged := LatestRows(all)
	sort.SliceStable(merged, func(i, j int) bool {
		if merged[i].Point != merged[j].Point {
			return merged[i].Point < merged[j].Point
		}
		return merged[i].Trial < merged[j].Trial
	})
	return merged, nil
}

// WriteSweep writes rows as sweep directory dir's SweepJSONL (appended) and SweepCSV.
func WriteSweep(dir string, rows []Row) error {
	w, err := OpenJSONL(filepath.Join(dir, SweepJSONL))
	if err != nil {
		return err
	}
	for _, r := range rows {
		if err := w.Write(r); err != nil {
			w.Close()
			return err
		}
	}
	if err := w.Close(); err != nil {
		return err
	}
	return writeCSVFile(filepath.Join(dir, SweepCSV), rows)
}

// MergeSweeps joins the results.jsonl of sweep directories (the shards of one
// sweep) into dir's results.jsonl and results.csv, and says so on w. A trial
// found in two directories fails; nothing is written then.
func MergeSweeps(dir string, sweeps []string, w io.Writer) error {
	jsonl := filepath.Join(dir, SweepJSONL)
	if _, err := os.Stat(jsonl); err == nil {
		return fault.Usagef("%s exists: merge into a new directory", jsonl)
	}
	merged, err := ReadShards(sweeps)
	var overlap *OverlapError
	if errors.As(err, &overlap) {
		return fault.Mark(fault.Failed, err)
	}
	if err != nil {
		return fault.Mark(fault.File, err)
	}
	if err := outpath.CheckDir("out", dir); err != nil {
		return err
	}
	if err := WriteSweep(dir, merged); err != nil {
		return fault.Mark(fault.File, err)
	}
	fmt.Fprintf(w, "%d trials from %d sweeps into %s, %s\n", len(merged), len(sweeps), jsonl, filepath.Join(dir, SweepCSV))
	return nil
}
