package compare

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"strings"

	"github.com/slowstart/slowstart/report"
)

// Kinds of input.
const (
	KindProbe = "probe" // slowstart probe --json: a Report with client timings
	KindLab   = "lab"   // lab run --json, lab sweep results.jsonl or results.csv
	KindStore = "store" // rows of a watch store
	KindField = "field" // connections of a field store (slowstart field)
)

// Sample is one side of a comparison: values of one metric.
type Sample struct {
	// Source says where the values came from, for people.
	Source string
	Kind   string
	Metric string // canonical metric name, e.g. "last_byte", "fct_user"
	Unit   string // "ms", "segments", "round trips", "bytes"
	Values []float64
	// Skipped counts measurements that had no value (failed trials or probes).
	Skipped int
	Notes   []string
	// Drops counts the lab emulator's packet drops over the trials that gave a
	// value; nil for probes and stores, which do not know them.
	Drops *Drops
}

// Drops are the packets a lab sample lost on its emulated path.
type Drops struct {
	Trials int `json:"trials"`
	// TrialsWithDrops lost at least one data packet.
	TrialsWithDrops int `json:"trials_with_drops"`
	// Queue and Loss are the data packets dropped by the full bottleneck queue and
	// by the random loss, over all trials; Unknown those of files written before
	// the two were told apart.
	Queue   int64 `json:"data_packets_dropped_queue"`
	Loss    int64 `json:"data_packets_dropped_loss"`
	Unknown int64 `json:"data_packets_dropped_unknown"`
}

// Total is every data packet dropped.
func (d *Drops) Total() int64 { return d.Queue + d.Loss + d.Unknown }

// PerTrial is the data packets dropped per trial.
func (d *Drops) PerTrial() float64 {
	if d.Trials == 0 {
		return 0
	}
	return float64(d.Total()) / float64(d.Trials)
}

// Metric is a metric that can be compared (report.Metrics holds them all).
type Metric = report.Metric

// kindMetrics names the metrics each kind of input offers, from report.Metrics;
// the first is the kind's default.
var kindMetrics = map[string][]string{
	KindProbe: {"last_byte", "first_byte", "connect", "tls", "handshake_rtt", "rounds", "iw"},
	KindLab:   {"fct_user", "fct_paper", "first_byte", "last_byte", "connect", "tls"},
	KindStore: {"last_byte", "first_byte", "tls", "handshake_rtt", "rounds", "iw", "bytes"},
	// Those of a field store's connections (package field reads them).
	KindField: {"round_trips", "response", "handshake_rtt", "round1_bytes", "iw"},
}

// Metrics returns the metrics of a kind of input, its default first.
func Metrics(kind string) []Metric {
	var out []Metric
	for _, name := range kindMetrics[kind] {
		m, _ := report.MetricNamed(name)
		out = append(out, m)
	}
	return out
}

// ResolveMetric maps what a user typed (e.g. "fct", "last_byte_ms", "FCT-paper")
// onto a metric of the kind's list; "" gives the kind's default. "fct" means the
// time until the last byte: fct_user for lab results, last_byte for probes.
func ResolveMetric(kind, name string) (Metric, error) {
	list := Metrics(kind)
	if len(list) == 0 {
		list = Metrics(KindProbe)
	}
	n := strings.ToLower(strings.TrimSpace(name))
	n = strings.ReplaceAll(n, "-", "_")
	n = strings.TrimSuffix(n, "_ms")
	n = strings.TrimSuffix(n, "_at")
	if kind == KindField {
		switch n {
		case "rounds":
			n = "round_trips"
		case "fct", "total", "load", "last_byte":
			n = "response"
		}
	}
	switch n {
	case "", "fct", "total", "load":
		return list[0], nil
	case "ttfb":
		n = "first_byte"
	case "rtt":
		n = "handshake_rtt"
	}
	var names []string
	for _, m := range list {
		if m.Name == n {
			return m, nil
		}
		names = append(names, m.Name)
	}
	return Metric{}, fmt.Errorf("%w: metric %q is not known for %s input: use one of %s", ErrBadArgument, name, kind, strings.Join(names, ", "))
}

// ErrUnknownFormat is returned for a file that is none of the formats Load reads.
var ErrUnknownFormat = errors.New("not a slowstart probe Report (probe --json) or lab results (lab run --json, results.jsonl, results.csv)")

// ErrBadArgument marks errors in what the user asked for (a metric or a filter)
// rather than in the file.
var ErrBadArgument = errors.New("bad argument")

// Load reads a sample of metric (see ResolveMetric; "" for the default) from a
// file written by slowstart, recognized by its content:
//   - a Report from slowstart probe --json (one value per run, from the final hop),
//     or several such Reports one after the other;
//   - slowstart lab run --json, or the results.jsonl or results.csv of lab sweep
//     (one value per successful trial).
//
// A file holding several lab points must be narrowed with a filter: spec may end
// in "@key=value,key=value" with keys of the row (iw, rtt_ms, size_bytes, point...),
// e.g. "results.jsonl@iw=10".
func Load(spec, metric string) (*Sample, error) {
	path, filter, err := splitFilter(spec)
	if err != nil {
		return nil, err
	}
	data, err := readBounded(path)
	if err != nil {
		return nil, err
	}
	return Parse(data, path, metric, filter)
}

// Limits of what Load and Parse read (docs/security.md).
const (
	// MaxInputBytes is the largest file Load reads: a lab sweep's results of a
	// hundred thousand trials are some 60 MB.
	MaxInputBytes = 64 << 20
	// MaxNesting is how deep Parse follows arrays and "trials" into each
	// other: lab results are at most an array of run outputs of trials (3).
	MaxNesting = 8
)

// ErrTooLarge is returned for a file longer than MaxInputBytes (or endless,
// such as /dev/zero): it is not read further.
var ErrTooLarge = errors.New("too large to be slowstart results")

// readBounded reads the file at path, at most MaxInputBytes of it.
func readBounded(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	tooLarge := fmt.Errorf("%s: %w: it holds more than %d MiB (probe --json and lab results are far smaller)", path, ErrTooLarge, MaxInputBytes>>20)
	if info, err := f.Stat(); err == nil && info.Mode().IsRegular() && info.Size() > MaxInputBytes {
		return nil, tooLarge
	}
	data, err := io.ReadAll(io.LimitReader(f, MaxInputBytes+1))
	if err != nil {
		return nil, err
	}
	if len(data) > MaxInputBytes {
		return nil, tooLarge
	}
	return data, nil
}

// splitFilter separates "FILE@k=v,k=v"; a path that exists is taken whole.
func splitFilter(spec string) (string, map[string]string, error) {
	if _, err := os.Stat(spec); err == nil {
		return spec, nil, nil
	}
	i := strings.LastIndex(spec, "@")
	if i < 0 {
		return spec, nil, nil
	}
	filter := map[string]string{}
	for _, kv := range strings.Split(spec[i+1:], ",") {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || strings.TrimSpace(k) == "" {
			return "", nil, fmt.Errorf("%w: %q: a filter is @key=value[,key=value], e.g. results.jsonl@iw=10", ErrBadArgument, spec)
		}
		filter[strings.TrimSpace(k)] = strings.TrimSpace(v)
	}
	return spec[:i], filter, nil
}

// Parse is Load on bytes already read; name is used in messages.
func Parse(data []byte, name, metric string, filter map[string]string) (*Sample, error) {
	trimmed := bytes.TrimSpace(data)
	if len(trimmed) == 0 {
		return nil, fmt.Errorf("%s is empty", name)
	}
	if trimmed[0] == '{' || trimmed[0] == '[' {
		return parseJSON(trimmed, name, metric, filter)
	}
	if bytes.HasPrefix(trimmed, []byte("point,")) {
		return parseCSV(trimmed, name, metric, filter)
	}
	return nil, fmt.Errorf("%s: %w", name, ErrUnknownFormat)
}

// parseJSON reads a stream of JSON values: Reports, lab run outputs, lab rows, or
// arrays of them.
func parseJSON(data []byte, name, metric string, filter map[string]string) (*Sample, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	var reports []*report.Report
	var rows []rowFields
	// add reads one value at the given depth. Each level decodes its value
	// whole, so the depth is bounded: without a bound, values nested n deep
	// took n passes over their bytes (40 lines of "trials" 4,500 deep took
	// minutes).
	var add func(raw json.RawMessage, depth int) error
	add = func(raw json.RawMessage, depth int) error {
		if depth > MaxNesting {
			return fmt.Errorf("%w: arrays or trials nested more than %d deep", ErrUnknownFormat, MaxNesting)
		}
		raw = bytes.TrimSpace(raw)
		if len(raw) > 0 && raw[0] == '[' {
			var items []json.RawMessage
			if err := json.Unmarshal(raw, &items); err != nil {
				return err
			}
			for _, it := range items {
				if err := add(it, depth+1); err != nil {
					return err
				}
			}
			return nil
		}
		var probeShape struct {
			Schema  string          `json:"schema"`
			Summary json.RawMessage `json:"summary"`
			Trials  json.RawMessage `json:"trials"`
			Point   *string         `json:"point"`
		}
		if err := json.Unmarshal(raw, &probeShape); err != nil {
			return err
		}
		switch {
		case probeShape.Schema == report.Schema:
			var rep report.Report
			if err := json.Unmarshal(raw, &rep); err != nil {
				return err
			}
			reports = append(reports, &rep)
		case probeShape.Schema != "" && probeShape.Schema != LabSchema:
			return fmt.Errorf("schema %q is neither %s nor %s", probeShape.Schema, report.Schema, LabSchema)
		case probeShape.Trials != nil:
			var trials []json.RawMessage
			if err := json.Unmarshal(probeShape.Trials, &trials); err != nil {
				return err
			}
			for _, t := range trials {
				if err := add(t, depth+1); err != nil {
					return err
				}
			}
		case probeShape.Point != nil:
			r, err := rowFromJSON(raw)
			if err != nil {
				return err
			}
			rows = append(rows, r)
		default:
			return ErrUnknownFormat
		}
		return nil
	}
	for {
		var raw json.RawMessage
		err := dec.Decode(&raw)
		if err == io.EOF {
			break
		}
		if err != nil {
			// A last line cut by an interrupted sweep: keep what was read.
			if len(rows) > 0 && (errors.Is(err, io.ErrUnexpectedEOF) || strings.Contains(err.Error(), "unexpected EOF")) {
				break
			}
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		if err := add(raw, 1); err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
	}
	switch {
	case len(reports) > 0 && len(rows) > 0:
		return nil, fmt.Errorf("%s mixes probe Reports and lab results", name)
	case len(reports) > 0:
		if len(filter) > 0 {
			return nil, fmt.Errorf("%w: %s: filters (@key=value) apply to lab results only", ErrBadArgument, name)
		}
		return fromReports(reports, name, metric)
	case len(rows) > 0:
		return fromRows(rows, name, metric, filter)
	}
	return nil, fmt.Errorf("%s: %w", name, ErrUnknownFormat)
}

// LabSchema is the schema of the lab's run output (lab.Schema, slowstart.lab/v1),
// named here so that compare reads lab results without depending on the lab.
const LabSchema = "slowstart.lab/v1"

// rowFields is a lab row as its JSON keys and values (strings, as in the CSV).
type rowFields map[string]string

func rowFromJSON(raw []byte) (rowFields, error) {
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, err
	}
	out := rowFields{}
	for k, v := range m {
		switch x := v.(type) {
		case string:
			out[k] = x
		case float64:
			out[k] = strconv.FormatFloat(x, 'f', -1, 64)
		case bool:
			out[k] = strconv.FormatBool(x)
		case nil:
			out[k] = ""
		default:
			b, _ := json.Marshal(x)
			out[k] = string(b)
		}
	}
	return out, nil
}

func parseCSV(data []byte, name, metric string, filter map[string]string) (*Sample, error) {
	recs, err := csv.NewReader(bytes.NewReader(data)).ReadAll()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	header := recs[0]
	var rows []rowFields
	for _, rec := range recs[1:] {
		r := rowFields{}
		for i, h := range header {
			if i < len(rec) {
				r[h] = rec[i]
			}
		}
		rows = append(rows, r)
	}
	return fromRows(rows, name, metric, filter)
}

func fromRows(rows []rowFields, name, metric string, filter map[string]string) (*Sample, error) {
	m, err := ResolveMetric(KindLab, metric)
	if err != nil {
		return nil, err
	}
	s := &Sample{Source: name, Kind: KindLab, Metric: m.Name, Unit: m.Unit, Values: []float64{}, Drops: &Drops{}}
	points := map[string]int{}
	key := m.Column
	for _, r := range rows {
		if !matches(r, filter) {
			continue
		}
		points[r["point"]]++
		if r["error"] != "" {
			s.Skipped++
			continue
		}
		v, err := strconv.ParseFloat(r[key], 64)
		if err != nil {
			return nil, fmt.Errorf("%s: trial %s of %s: %s is %q, not a number", name, r["trial"], r["point"], key, r[key])
		}
		s.Values = append(s.Values, v)
		s.Drops.add(r)
	}
	if len(filter) > 0 && len(points) == 0 {
		return nil, fmt.Errorf("%s: no row matches the filter %s", name, formatFilter(filter))
	}
	if len(points) > 1 {
		var names []string
		for p := range points {
			names = append(names, p)
		}
		sort.Strings(names)
		return nil, fmt.Errorf("%s holds %d lab points (%s): pick one with FILE@key=value, e.g. %s@iw=10 or %s@point=%s",
			name, len(points), strings.Join(names, "; "), name, name, names[0])
	}
	for p := range points {
		s.Source = fmt.Sprintf("%s (%s)", name, p)
	}
	if s.Skipped > 0 {
		s.Notes = append(s.Notes, fmt.Sprintf("%s: %d failed trials left out", name, s.Skipped))
	}
	return s, nil
}

// add counts one trial's data drops.
func (d *Drops) add(r rowFields) {
	count := func(key string) (int64, bool) {
		n, err := strconv.ParseInt(r[key], 10, 64)
		return n, err == nil
	}
	d.Trials++
	queue, okQueue := count("data_packets_dropped_queue")
	loss, okLoss := count("data_packets_dropped_loss")
	total, _ := count("data_packets_lost")
	if okQueue && okLoss {
		d.Queue += queue
		d.Loss += loss
		total = queue + loss
	} else {
		d.Unknown += total
	}
	if total > 0 {
		d.TrialsWithDrops++
	}
}

func matches(r rowFields, filter map[string]string) bool {
	for k, want := range filter {
		got, ok := r[k]
		if !ok {
			return false
		}
		if got == want {
			continue
		}
		g, err1 := strconv.ParseFloat(got, 64)
		w, err2 := strconv.ParseFloat(want, 64)
		if err1 != nil || err2 != nil || g != w {
			return false
		}
	}
	return true
}

func formatFilter(f map[string]string) string {
	var parts []string
	for k, v := range f {
		parts = append(parts, k+"="+v)
	}
	sort.Strings(parts)
	return strings.Join(parts, ",")
}

// fromReports takes one value per run: the final hop's connection of each run.
func fromReports(reports []*report.Report, name, metric string) (*Sample, error) {
	m, err := ResolveMetric(KindProbe, metric)
	if err != nil {
		return nil, err
	}
	s := &Sample{Source: name, Kind: KindProbe, Metric: m.Name, Unit: m.Unit, Values: []float64{}}
	urls := map[string]bool{}
	for ri, rep := range reports {
		final := map[int]*report.Connection{}
		var runs []int
		for i := range rep.Connections {
			c := &rep.Connections[i]
			t := c.ClientTiming
			if t == nil {
				continue
			}
			prev, seen := final[t.Run]
			if !seen {
				runs = append(runs, t.Run)
			}
			if !seen || t.Hop > prev.ClientTiming.Hop {
				final[t.Run] = c
			}
		}
		if len(runs) == 0 {
			return nil, fmt.Errorf("%s: Report %d has no client timings: it comes from a capture (analyze), not from slowstart probe --json", name, ri+1)
		}
		if rep.Runs != nil && rep.Runs.Runs > len(runs) {
			s.Skipped += rep.Runs.Runs - len(runs)
		}
		for _, run := range runs {
			c := final[run]
			urls[c.ClientTiming.URL] = true
			// The summary row watch stores: the initial window counts only
			// when exact, as a bound or a range is not a value to take a
			// median of.
			v, ok := m.Value(report.Summary(c))
			if !ok {
				s.Skipped++
				continue
			}
			s.Values = append(s.Values, v)
		}
	}
	if len(urls) > 1 {
		s.Notes = append(s.Notes, fmt.Sprintf("%s: the runs fetched %d different URLs", name, len(urls)))
	}
	if s.Skipped > 0 {
		s.Notes = append(s.Notes, fmt.Sprintf("%s: %d runs without a %s value left out", name, s.Skipped, m.Name))
	}
	return s, nil
}
