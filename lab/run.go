package lab

import (
	"bufio"
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"sync"

	"github.com/slowstart/slowstart/stats"
)

// Row is one trial's result with every parameter of its point, as written to a
// sweep's JSONL and CSV files.
type Row struct {
	Point           string  `json:"point"`
	RTTMs           float64 `json:"rtt_ms"`
	RateMbps        float64 `json:"rate_mbps"` // 0: unlimited
	QueueBytes      int64   `json:"queue_bytes"`
	LossPercent     float64 `json:"loss_percent"`
	IW              int     `json:"iw"`
	InitRwnd        int     `json:"initrwnd"`
	SizeBytes       int64   `json:"size_bytes"`
	TLS             string  `json:"tls"`
	HTTP2           bool    `json:"http2"`
	HTTP3           bool    `json:"http3"`
	Server          string  `json:"server"`
	Client          string  `json:"client"`
	CC              string  `json:"cc"`
	ThinkAfterBytes int64   `json:"think_after_bytes"`
	ThinkMs         float64 `json:"think_ms"`
	Seed            uint64  `json:"seed"`
	TrialResult
}

// NewRow combines a point and one of its trials' results.
func NewRow(s Spec, r TrialResult) Row {
	return Row{
		Point: s.Label(), RTTMs: float64(s.RTTNs) / 1e6, RateMbps: float64(s.RateBitsPerSecond) / 1e6,
		QueueBytes: s.QueueBytes, LossPercent: s.LossRate * 100, IW: s.IW, InitRwnd: s.InitRwnd,
		SizeBytes: s.SizeBytes, TLS: s.TLS, HTTP2: s.HTTP2, HTTP3: s.HTTP3, Server: s.Server, Client: s.Client, CC: s.CC,
		ThinkAfterBytes: s.ThinkAfterBytes, ThinkMs: float64(s.ThinkNs) / 1e6, Seed: s.Seed,
		TrialResult: r,
	}
}

// Job is one trial of one point.
type Job struct {
	Spec  Spec
	Trial int // 1-based
	// Name, when set, names the trial's captures ("NAME-trialN") instead of the
	// spec's label, for jobs whose specs differ only in what Label leaves out
	// (server, client, congestion control).
	Name string
	// RoundTrips asks for the transfer's round trips (TrialResult.RoundTrips): a TCP
	// trial is captured at the client and its capture analyzed.
	RoundTrips bool
}

// Key identifies a job across runs (for resuming).
func (j Job) Key() string { return j.Spec.Label() + "#" + strconv.Itoa(j.Trial) }

func rowKey(r Row) string { return r.Point + "#" + strconv.Itoa(r.Trial) }

// RunOptions control a batch of trials.
type RunOptions struct {
	Parallel   int                   // trials at once (default 1)
	CaptureDir string                // write each trial's pcaps here
	OnResult   func(Job, Row, error) // called as each trial ends (serialized)
	// DistortedReruns is how many times a trial whose path the host distorted
	// (PathCheck) is run again; a trial still distorted after them is kept and
	// marked Excluded (SummarizePoints leaves it out of the statistics). 0:
	// distorted trials are marked (PathCheck) but neither run again nor
	// excluded. The commands use DefaultDistortedReruns.
	DistortedReruns int
}

// DefaultDistortedReruns: lab run, sweep and reproduce run a distorted trial
// again twice at most.
const DefaultDistortedReruns = 2

// RunJobs runs jobs with up to opts.Parallel at once and returns their rows in job
// order. A failed trial gives a row with Error set; RunJobs itself fails only when
// ctx is done.
func (e *Env) RunJobs(ctx context.Context, jobs []Job, opts RunOptions) ([]Row, error) {
	par := max(opts.Parallel, 1)
	reruns := max(opts.DistortedReruns, 0)
	rows := make([]Row, len(jobs))
	next := make(chan int)
	var mu sync.Mutex
	var wg sync.WaitGroup
	for w := 0; w < par; w++ {
		wg.Go(func() {
			for i := range next {
				j := jobs[i]
				spec := j.Spec
				spec.Seed += uint64(j.Trial)
				name := j.Name
				if name == "" {
					name = j.Spec.Label()
				}
				prefix := fmt.Sprintf("%s-trial%d", name, j.Trial)
				res, err := e.runTrial(ctx, spec, j.Trial, opts.CaptureDir, prefix, par == 1, j.RoundTrips)
				// A trial the host distorted is run again (the same seed: the
				// same losses), and left out of the statistics if it stays so.
				distortedBy := ""
				for n := 1; reruns > 0 && err == nil && res.PathCheck != nil && res.PathCheck.Distorted && ctx.Err() == nil; n++ {
					if distortedBy == "" {
						distortedBy = res.PathCheck.Reason
					}
					if n > reruns {
						res.Excluded = true
						break
					}
					res, err = e.runTrial(ctx, spec, j.Trial, opts.CaptureDir, prefix, par == 1, j.RoundTrips)
					res.Reruns = n
				}
				res.DistortedBy = distortedBy
				if err != nil && res.Error == "" {
					res.Error = err.Error()
				}
				row := NewRow(spec, res)
				row.Point = j.Spec.Label()
				mu.Lock()
				rows[i] = row
				if opts.OnResult != nil && ctx.Err() == nil {
					opts.OnResult(j, row, err)
				}
				mu.Unlock()
			}
		})
	}
	for i := range jobs {
		select {
		case next <- i:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
	}
	close(next)
	wg.Wait()
	return rows, ctx.Err()
}

// Stats summarizes a sample (package stats computes it).
type Stats = stats.Summary

// Summarize computes Stats of xs (which it sorts).
func Summarize(xs []float64) Stats {
	sort.Float64s(xs)
	return stats.SummarizeSorted(xs)
}

// ReadRows reads a JSONL results file; a missing file gives no rows. A last line cut
// by an interrupted run is ignored.
func ReadRows(path string) ([]Row, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var rows []Row
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var r Row
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			continue
		}
		rows = append(rows, r)
	}
	return rows, sc.Err()
}

// DoneKeys returns the keys of trials that completed without error.
func DoneKeys(rows []Row) map[string]bool {
	done := map[string]bool{}
	for _, r := range rows {
		if r.Error == "" {
			done[rowKey(r)] = true
		}
	}
	return done
}

// JSONLWriter appends rows to a JSONL file, one line each, flushed per row so that an
// interrupted sweep can be resumed.
type JSONLWriter struct {
	f *os.File
}

// OpenJSONL opens path for appending.
func OpenJSONL(path string) (*JSONLWriter, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return nil, err
	}
	return &JSONLWriter{f: f}, nil
}

// Write appends one row.
func (w *JSONLWriter) Write(r Row) error {
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	_, err = w.f.Write(append(b, '\n'))
	return err
}

// Close closes the file.
func (w *JSONLWriter) Close() error { return w.f.Close() }

// CSVHeader lists the CSV columns, in order.
var CSVHeader = []string{"point", "rtt_ms", "rate_mbps", "queue_bytes", "loss_percent", "iw", "initrwnd", "size_bytes", "tls", "http2", "http3", "server", "client", "cc", "think_after_bytes", "think_ms", "seed",
	"trial", "connect_ms", "tls_ms", "first_byte_ms", "last_byte_ms", "fct_paper_ms", "fct_user_ms", "bytes", "protocol", "tls_version", "data_packets_lost", "ack_packets_lost",
	"data_packets_dropped_queue", "data_packets_dropped_loss", "ack_packets_dropped_queue", "ack_packets_dropped_loss",
	"round_trips_handshake", "round_trips_data", "round_trips_total", "handshake_expected_ms", "emulator_late_max_ms", "path_distorted", "reruns", "excluded", "error"}

// WriteCSV writes rows as CSV with CSVHeader.
func WriteCSV(w io.Writer, rows []Row) error {
	cw := csv.NewWriter(w)
	if err := cw.Write(CSVHeader); err != nil {
		return err
	}
	f := func(x float64) string { return strconv.FormatFloat(x, 'f', -1, 64) }
	for _, r := range rows {
		var rtHandshake, rtData, rtTotal string // empty: not counted
		if rt := r.RoundTrips; rt != nil {
			rtHandshake, rtData, rtTotal = strconv.Itoa(rt.Handshake), strconv.Itoa(rt.Data), strconv.Itoa(rt.Total)
		}
		rec := []string{r.Point, f(r.RTTMs), f(r.RateMbps), strconv.FormatInt(r.QueueBytes, 10), f(r.LossPercent), strconv.Itoa(r.IW), strconv.Itoa(r.InitRwnd),
			strconv.FormatInt(r.SizeBytes, 10), r.TLS, strconv.FormatBool(r.HTTP2), strconv.FormatBool(r.HTTP3), r.Server, r.Client, r.CC, strconv.FormatInt(r.ThinkAfterBytes, 10), f(r.ThinkMs),
			strconv.FormatUint(r.Seed, 10), strconv.Itoa(r.Trial), f(r.ConnectMs), f(r.TLSMs), f(r.FirstByteMs), f(r.LastByteMs), f(r.FCTPaperMs), f(r.FCTUserMs),
			strconv.FormatInt(r.Bytes, 10), r.Protocol, r.TLSVersion, strconv.FormatInt(r.DataPacketsLost, 10), strconv.FormatInt(r.AckPacketsLost, 10),
			strconv.FormatInt(r.DataPacketsDroppedQueue, 10), strconv.FormatInt(r.DataPacketsDroppedLoss, 10),
			strconv.FormatInt(r.AckPacketsDroppedQueue, 10), strconv.FormatInt(r.AckPacketsDroppedLoss, 10), rtHandshake, rtData, rtTotal}
		var expected, late, distorted string // empty: not checked (a failed trial)
		if pc := r.PathCheck; pc != nil {
			expected, late, distorted = f(pc.ExpectedHandshakeMs), f(pc.EmulatorLateMaxMs), strconv.FormatBool(pc.Distorted)
		}
		rec = append(rec, expected, late, distorted, strconv.Itoa(r.Reruns), strconv.FormatBool(r.Excluded), r.Error)
		if err := cw.Write(rec); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}

// LatestRows keeps one row per trial: the last successful one, else the last one.
func LatestRows(rows []Row) []Row {
	idx := map[string]int{}
	var out []Row
	for _, r := range rows {
		k := rowKey(r)
		i, seen := idx[k]
		switch {
		case !seen:
			idx[k] = len(out)
			out = append(out, r)
		case r.Error == "" || out[i].Error != "":
			out[i] = r
		}
	}
	return out
}
