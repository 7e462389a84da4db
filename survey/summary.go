package survey

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"

	"github.com/slowstart/slowstart/probe/exact"
	"github.com/slowstart/slowstart/report"
	"github.com/slowstart/slowstart/stats"
)

// SummarySchema names the JSON form of a Summary (docs/schemas/survey-summary.json).
const SummarySchema = "slowstart.survey-summary/v1"

// Summary sums up a survey's rows the way the field's tables do: the initial
// windows found and how sure each is, by provider (a label, or an ASN), and
// the share that gave no answer, with why.
type Summary struct {
	Schema string `json:"schema"`
	// Rows counts the rows summed up; Vantages the vantage points among them.
	Rows     int      `json:"rows"`
	Vantages []string `json:"vantages"`
	// Failed counts the rows with an error, Errors them by kind.
	Failed int     `json:"failed"`
	Errors []Count `json:"errors"`
	// Exact is the exact measurement's readings, Passive the page loads'.
	Exact   *MethodSummary `json:"exact"`
	Passive *MethodSummary `json:"passive"`
	// GroupBy is what Groups are: "label", "asn", or "" (no groups).
	GroupBy string         `json:"group_by,omitempty"`
	Groups  []GroupSummary `json:"groups"`
}

// Count is how many rows have something, and their share of the rows it is
// counted among.
type Count struct {
	Name  string  `json:"name"`
	Count int     `json:"count"`
	Share float64 `json:"share"`
}

// IWCount is how many rows read one initial window: exactly Segments
// (verdict exact), at least Segments (lower_bound, rwnd_limited), or between
// Segments and SegmentsMax (range, page loads only).
type IWCount struct {
	Segments    int     `json:"segments"`
	SegmentsMax int     `json:"segments_max,omitempty"`
	Verdict     string  `json:"verdict"`
	Count       int     `json:"count"`
	Share       float64 `json:"share"`
}

// Text is the reading as the tables write it: 10, ≥ 5, 12-16.
func (c IWCount) Text() string {
	switch c.Verdict {
	case report.VerdictExact:
		return fmt.Sprint(c.Segments)
	case report.VerdictRange:
		return fmt.Sprintf("%d-%d", c.Segments, c.SegmentsMax)
	}
	return fmt.Sprintf("≥ %d", c.Segments)
}

// MethodSummary is one method's readings over the rows it measured.
type MethodSummary struct {
	// Measured counts the rows where the method ran; Answered those with a
	// reading (an exact window, a bound or a range); NoAnswer the others.
	Measured int `json:"measured"`
	Answered int `json:"answered"`
	NoAnswer int `json:"no_answer"`
	// Verdicts counts the rows by verdict (shares of Measured).
	Verdicts []Count `json:"verdicts"`
	// IW is the distribution of the readings, most frequent first (shares of
	// Measured).
	IW []IWCount `json:"iw"`
	// NoAnswerWhy says why rows gave no reading (shares of Measured): the
	// kind of error that stopped the measurement, "inconsistent" (runs
	// disagreed), or the runs' outcome ("timeout", "rst", "fin", "loss").
	NoAnswerWhy []Count `json:"no_answer_why"`
	// Retries counts the exact readings that took a retry (long_path,
	// small_mss).
	Retries []Count `json:"retries,omitempty"`
}

// GroupSummary is one provider's line of the table.
type GroupSummary struct {
	Name     string `json:"name"`
	Rows     int    `json:"rows"`
	Answered int    `json:"answered"`
	// Method is the measurement Answered, IW and NoAnswerWhy count:
	// "exact" when the survey measured the exact window, "page_load" (the
	// page load's own reading) when it did not (--no-exact).
	Method string `json:"method"`
	// IW are the readings of Method (shares of Rows), most frequent first.
	IW []IWCount `json:"iw"`
	// NoAnswerWhy is why the others gave none.
	NoAnswerWhy []Count `json:"no_answer_why"`
	// FirstRoundBytesMedian and TLSFlightBytesMedian are the page loads'
	// medians; nil without any.
	FirstRoundBytesMedian *int `json:"first_round_bytes_median"`
	TLSFlightBytesMedian  *int `json:"tls_flight_bytes_median"`
}

// What a group's readings are (GroupSummary.Method).
const (
	MethodExact    = "exact"
	MethodPageLoad = "page_load"
)

// Summarizer sums up rows as they come (a store of any size is read once).
type Summarizer struct {
	groupBy func(*Row) string
	by      string

	rows     int
	failed   int
	vantages map[string]bool
	errors   map[string]int
	exact    *methodCounter
	passive  *methodCounter
	groups   map[string]*groupCounter
}

type methodCounter struct {
	measured, answered int
	verdicts           map[string]int
	iw                 map[IWCount]int
	why                map[string]int
	retries            map[string]int
}

func newMethodCounter() *methodCounter {
	return &methodCounter{verdicts: map[string]int{}, iw: map[IWCount]int{}, why: map[string]int{}, retries: map[string]int{}}
}

type groupCounter struct {
	method          string
	rows, answered  int
	iw              map[IWCount]int
	why             map[string]int
	firstRound, tls []int
}

// NewSummarizer sums rows up, grouped by groupBy's name of each row ("label"
// for the rows' labels, "asn" for the ASN of their address in asns).
func NewSummarizer(groupBy string, asns *PrefixTable) (*Summarizer, error) {
	s := &Summarizer{by: groupBy, vantages: map[string]bool{}, errors: map[string]int{},
		exact: newMethodCounter(), passive: newMethodCounter(), groups: map[string]*groupCounter{}}
	switch groupBy {
	case "":
	case "label":
		s.groupBy = func(r *Row) string {
			if r.Label == "" {
				return "(no label)"
			}
			return r.Label
		}
	case "asn":
		if asns == nil {
			return nil, fmt.Errorf("grouping by ASN needs a table of prefixes (--asn FILE)")
		}
		s.groupBy = func(r *Row) string { return asns.NameOf(r.Address) }
	default:
		return nil, fmt.Errorf("group by %q: use label or asn", groupBy)
	}
	return s, nil
}

// Add counts one row.
func (s *Summarizer) Add(r Row) {
	s.rows++
	if r.Vantage != "" {
		s.vantages[r.Vantage] = true
	}
	if r.Failed() {
		s.failed++
		kind := r.ErrorKind
		if kind == "" {
			kind = "other"
		}
		s.errors[kind]++
	}
	exactIW, exactWhy, exactRan := exactReading(&r)
	if exactRan {
		s.exact.add(r.ExactVerdict, exactIW, exactWhy)
		if r.ExactRetry != "" && exactIW != nil {
			s.exact.retries[r.ExactRetry]++
		}
	}
	passiveIW, passiveWhy, passiveRan := passiveReading(&r)
	if passiveRan {
		s.passive.add(r.PassiveVerdict, passiveIW, passiveWhy)
	}
	if s.groupBy == nil {
		return
	}
	name := s.groupBy(&r)
	g := s.groups[name]
	if g == nil {
		g = &groupCounter{iw: map[IWCount]int{}, why: map[string]int{}}
		s.groups[name] = g
	}
	g.rows++
	// The exact reading when the survey measured it, else the page load's:
	// a survey without the exact method has its page loads' readings.
	iw, why, method := exactIW, exactWhy, MethodExact
	if !exactRan {
		iw, why, method = passiveIW, passiveWhy, MethodPageLoad
		if !passiveRan {
			why = "not_measured"
		}
	}
	if g.method != MethodExact {
		g.method = method
	}
	if iw != nil {
		g.answered++
		g.iw[*iw]++
	} else {
		g.why[why]++
	}
	if r.FirstRoundBytes != nil {
		g.firstRound = append(g.firstRound, *r.FirstRoundBytes)
	}
	if r.TLSFlightBytes != nil {
		g.tls = append(g.tls, *r.TLSFlightBytes)
	}
}

func (m *methodCounter) add(verdict string, iw *IWCount, why string) {
	m.measured++
	if verdict == "" {
		verdict = "not_measured"
	}
	m.verdicts[verdict]++
	if iw != nil {
		m.answered++
		m.iw[*iw]++
		return
	}
	m.why[why]++
}

// exactReading is the row's exact reading (nil without one), or why there is
// none; ran is false when the survey did not try the exact method.
func exactReading(r *Row) (iw *IWCount, why string, ran bool) {
	if r.ExactVerdict == "" && r.ExactError == "" {
		return nil, "", false
	}
	switch {
	case r.ExactIWSegments != nil && (r.ExactVerdict == exact.VerdictExact || r.ExactVerdict == exact.VerdictLowerBound || r.ExactVerdict == exact.VerdictRwndLimited):
		return &IWCount{Segments: *r.ExactIWSegments, Verdict: r.ExactVerdict}, "", true
	case r.ExactVerdict == "":
		if r.ErrorKind != "" {
			return nil, r.ErrorKind, true
		}
		return nil, "exact", true
	case r.ExactVerdict == exact.VerdictInconsistent:
		return nil, "inconsistent", true
	}
	return nil, dominantOutcome(r.ExactOutcomes), true
}

// dominantOutcome is the most frequent outcome of runs that gave no reading.
func dominantOutcome(outcomes []string) string {
	counts := map[string]int{}
	best := ""
	for _, o := range outcomes {
		counts[o]++
		if best == "" || counts[o] > counts[best] || (counts[o] == counts[best] && o < best) {
			best = o
		}
	}
	if best == "" {
		return "no_runs"
	}
	return best
}

// passiveReading is the page load's reading, as exactReading.
func passiveReading(r *Row) (iw *IWCount, why string, ran bool) {
	if r.PassiveVerdict == "" && r.PassiveError == "" {
		return nil, "", false
	}
	switch {
	case r.PassiveIWSegments != nil && r.PassiveVerdict == report.VerdictRange && r.PassiveIWSegmentsMax != nil:
		return &IWCount{Segments: *r.PassiveIWSegments, SegmentsMax: *r.PassiveIWSegmentsMax, Verdict: report.VerdictRange}, "", true
	case r.PassiveIWSegments != nil && (r.PassiveVerdict == report.VerdictExact || r.PassiveVerdict == report.VerdictLowerBound || r.PassiveVerdict == report.VerdictRwndLimited):
		return &IWCount{Segments: *r.PassiveIWSegments, Verdict: r.PassiveVerdict}, "", true
	case r.PassiveVerdict == "":
		if kind := r.ErrorKind; kind != "" && kind != "exact" {
			return nil, kind, true
		}
		return nil, "error", true
	}
	return nil, r.PassiveVerdict, true
}

// Summary returns the sums so far.
func (s *Summarizer) Summary() Summary {
	out := Summary{Schema: SummarySchema, Rows: s.rows, Failed: s.failed, Vantages: sortedKeys(s.vantages),
		Errors: counts(s.errors, s.rows), GroupBy: s.by, Groups: []GroupSummary{}}
	if s.exact.measured > 0 {
		out.Exact = s.exact.summary()
	}
	if s.passive.measured > 0 {
		out.Passive = s.passive.summary()
	}
	for name, g := range s.groups {
		gs := GroupSummary{Name: name, Rows: g.rows, Answered: g.answered, Method: g.method, IW: iwCounts(g.iw, g.rows), NoAnswerWhy: counts(g.why, g.rows),
			FirstRoundBytesMedian: median(g.firstRound), TLSFlightBytesMedian: median(g.tls)}
		out.Groups = append(out.Groups, gs)
	}
	sort.Slice(out.Groups, func(i, j int) bool {
		if out.Groups[i].Rows != out.Groups[j].Rows {
			return out.Groups[i].Rows > out.Groups[j].Rows
		}
		return out.Groups[i].Name < out.Groups[j].Name
	})
	return out
}

func (m *methodCounter) summary() *MethodSummary {
	return &MethodSummary{Measured: m.measured, Answered: m.answered, NoAnswer: m.measured - m.answered,
		Verdicts: counts(m.verdicts, m.measured), IW: iwCounts(m.iw, m.measured), NoAnswerWhy: counts(m.why, m.measured),
		Retries: counts(m.retries, m.measured)}
}

func counts(m map[string]int, total int) []Count {
	out := []Count{}
	for k, v := range m {
		out = append(out, Count{Name: k, Count: v, Share: share(v, total)})
	}
	slices.SortFunc(out, func(a, b Count) int {
		if c := cmp.Compare(b.Count, a.Count); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})
	return out
}

func iwCounts(m map[IWCount]int, total int) []IWCount {
	out := []IWCount{}
	for k, v := range m {
		k.Count, k.Share = v, share(v, total)
		out = append(out, k)
	}
	slices.SortFunc(out, func(a, b IWCount) int {
		if c := cmp.Compare(b.Count, a.Count); c != 0 {
			return c
		}
		if c := cmp.Compare(a.Segments, b.Segments); c != 0 {
			return c
		}
		if c := cmp.Compare(a.SegmentsMax, b.SegmentsMax); c != 0 {
			return c
		}
		return strings.Compare(a.Verdict, b.Verdict)
	})
	return out
}

func share(n, total int) float64 {
	if total == 0 {
		return 0
	}
	return float64(n) / float64(total)
}

// median of byte counts (stats.Median), rounded down to a whole byte; nil for none.
func median(xs []int) *int {
	if len(xs) == 0 {
		return nil
	}
	values := make([]float64, len(xs))
	for i, x := range xs {
		values[i] = float64(x)
	}
	m := int(math.Floor(stats.Median(values)))
	return &m
}

func sortedKeys(m map[string]bool) []string {
	out := []string{}
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
