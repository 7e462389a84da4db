// Package survey measures many sites side by side: for each URL of a list, the
// server's exact initial window (probe/exact: the TLS server flight over https,
// the response over http) and a passive page load (probe: rounds, first-round
// bytes, TLS flight, round trips, the page load's own IW verdict), one row per
// URL, several URLs at a time. A URL's failure is recorded in its row and never
// stops the survey.
//
// It is for comparing hosting providers, CDNs or the servers of a fleet by what
// their first round trip carries. It does not measure anything itself (probe and
// probe/exact do) and does not parse flags; Write* render a Result as a text
// table, CSV or JSON.
package survey

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/netip"
	"os"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/slowstart/slowstart/probe"
	"github.com/slowstart/slowstart/probe/exact"
	"github.com/slowstart/slowstart/report"
)

// Schema names the JSON form of a Result.
const Schema = "slowstart.survey/v1"

// DefaultConcurrency is how many URLs are measured at once unless told otherwise.
const DefaultConcurrency = 4

// MaxConcurrency bounds Options.Concurrency.
const MaxConcurrency = 64

// Target is one URL to measure, with what reaching it needs. A target's own
// Netns, Resolve and RootCAs take precedence over the survey's Options, so that
// one survey can measure servers in different places (e.g. lab servers, each in
// its own namespace).
type Target struct {
	// Line is the line of the list the target came from (1-based), 0 otherwise.
	Line int
	// Label names the row (a provider, a region); may be empty.
	Label string
	// URL is http:// or https://.
	URL string
	// Netns is the network namespace (a path such as /run/netns/NAME) to measure
	// from; Options.Netns when empty.
	Netns string
	// Resolve maps "host:port" to an address (curl's --resolve); entries here
	// override Options.Resolve's.
	Resolve map[string]netip.Addr
	// RootCAs verify the server's chain in the page load; Options.RootCAs (or the
	// system's roots) when nil.
	RootCAs *x509.CertPool
}

// Options configure a survey. The zero value measures both ways, 4 URLs at a time.
type Options struct {
	// Concurrency is how many URLs are measured at once (DefaultConcurrency when 0).
	Concurrency int
	// NoExact skips the exact (active) measurement; NoPassive the page load.
	NoExact, NoPassive bool
	// ExactRuns is the number of fresh connections of each exact measurement
	// (exact.DefaultRuns when 0).
	ExactRuns int
	// MSS is the MSS the exact measurement announces (exact.DefaultMSS when 0).
	MSS int
	// Timeout bounds each page load (DNS to last byte) and the connection set-up
	// of each exact run (30 s when 0).
	Timeout time.Duration
	// Netns, Resolve and RootCAs apply to every target that has none of its own.
	Netns   string
	Resolve map[string]netip.Addr
	RootCAs *x509.CertPool
	// Insecure skips the verification of certificates in the page load.
	Insecure bool
	// Tool is the version string written into the Result.
	Tool string
	// OnRow, when set, is called once per finished row (from the measuring
	// goroutines, one call at a time), e.g. to advance a progress bar.
	OnRow func(Row)
	// Logger receives diagnostics; nil discards them.
	Logger *slog.Logger
}

// Row is the outcome of one URL. Fields that were not measured, or could not
// be, are nil (null in JSON, empty in CSV).
type Row struct {
	// Index is the target's 1-based position in the survey; Line its line in the list.
	Index int    `json:"index"`
	Line  int    `json:"line,omitempty"`
	Label string `json:"label"`
	URL   string `json:"url"`

	// ExactPhase is what the exact measurement counted: "tls" (the server's
	// TLS handshake flight) or "http" (the response).
	ExactPhase string `json:"exact_phase,omitempty"`
	// ExactVerdict is exact's verdict: exact, lower_bound, rwnd_limited,
	// inconsistent or none.
	ExactVerdict string `json:"exact_verdict,omitempty"`
	// ExactIWSegments and ExactIWBytes are the window (or its lower bound), in
	// segments and in bytes at the announced MSS.
	ExactIWSegments *int `json:"exact_iw_segments"`
	ExactIWBytes    *int `json:"exact_iw_bytes"`
	// ExactOutcomes lists each exact run's outcome, in order.
	ExactOutcomes []string `json:"exact_outcomes,omitempty"`
	// ExactReason is exact's verdict in a sentence.
	ExactReason string `json:"exact_reason,omitempty"`

	// PassiveVerdict and PassiveIWSegments are the page load's own IW reading
	// (exact, lower_bound, rwnd_limited, ambiguous, none).
	PassiveVerdict    string `json:"passive_verdict,omitempty"`
	PassiveIWSegments *int   `json:"passive_iw_segments"`
	// FirstRoundBytes are the bytes of the response's first data round (after
	// the TLS handshake over https).
	FirstRoundBytes *int `json:"first_round_bytes"`
	// TLSFlightBytes are the bytes of the server's first TLS handshake flight
	// (ServerHello … Certificate …); nil over http.
	TLSFlightBytes *int `json:"tls_flight_bytes"`
	// TLSRoundTrips and RoundTrips count the page load's round trips: TLS
	// handshake, and all (TCP + TLS + HTTP data rounds).
	TLSRoundTrips *int `json:"tls_round_trips"`
	RoundTrips    *int `json:"round_trips"`
	// HandshakeRTTMs is the TCP handshake's round-trip time.
	HandshakeRTTMs *float64 `json:"handshake_rtt_ms"`
	// MSS is the server's segment size in the page load.
	MSS *int `json:"mss"`
	// Status, Protocol and BodyBytes describe the response of the page load.
	Status    *int   `json:"status"`
	Protocol  string `json:"protocol,omitempty"`
	BodyBytes *int64 `json:"body_bytes"`
	// FinalURL is where redirects led, when they did.
	FinalURL string `json:"final_url,omitempty"`
	// LastByteMs is when the page load's last byte came, from its start.
	LastByteMs *float64 `json:"last_byte_ms"`

	// ExactError and PassiveError say why a measurement failed; Error joins them
	// ("exact: …; passive: …"). Empty when the row succeeded.
	ExactError   string `json:"exact_error,omitempty"`
	PassiveError string `json:"passive_error,omitempty"`
	Error        string `json:"error,omitempty"`
	// DurationMs is how long the row's measurements took.
	DurationMs float64 `json:"duration_ms"`

	// ExactErr and PassiveErr are the errors themselves, for callers that map
	// them (e.g. to exit codes); not rendered.
	ExactErr   error `json:"-"`
	PassiveErr error `json:"-"`
}

// Failed says whether a measurement of the row failed.
func (r *Row) Failed() bool { return r.ExactErr != nil || r.PassiveErr != nil }

// PermissionDenied says whether the row failed for want of privileges.
func (r *Row) PermissionDenied() bool {
	return IsPermissionError(r.ExactErr) || IsPermissionError(r.PassiveErr)
}

// IsPermissionError says whether err comes from missing privileges (a live
// capture, nftables or entering a namespace).
func IsPermissionError(err error) bool {
	if err == nil {
		return false
	}
	return probe.KindOf(err) == probe.KindPermission || errors.Is(err, os.ErrPermission) ||
		errors.Is(err, syscall.EPERM) || errors.Is(err, syscall.EACCES)
}

// Result is a survey's outcome.
type Result struct {
	Schema    string    `json:"schema"`
	Tool      string    `json:"tool"`
	StartedAt time.Time `json:"started_at"`
	// Settings are the options the survey ran with.
	Settings Settings `json:"settings"`
	// Total is the number of URLs asked for; Rows holds those measured, in the
	// list's order (fewer than Total when the survey was interrupted).
	Total       int   `json:"total"`
	Interrupted bool  `json:"interrupted"`
	Failed      int   `json:"failed"` // rows with an error
	Rows        []Row `json:"rows"`
}

// Settings are the options of a survey as recorded in its Result.
type Settings struct {
	Concurrency int    `json:"concurrency"`
	Exact       bool   `json:"exact"`
	Passive     bool   `json:"passive"`
	ExactRuns   int    `json:"exact_runs,omitempty"`
	MSS         int    `json:"mss,omitempty"`
	TimeoutMs   int64  `json:"timeout_ms"`
	Netns       string `json:"netns,omitempty"`
}

func (o Options) normalized() (Options, error) {
	if o.Concurrency == 0 {
		o.Concurrency = DefaultConcurrency
	}
	if o.Concurrency < 1 || o.Concurrency > MaxConcurrency {
		return o, fmt.Errorf("concurrency %d: use 1 to %d", o.Concurrency, MaxConcurrency)
	}
	if o.NoExact && o.NoPassive {
		return o, errors.New("both the exact measurement and the page load are turned off: nothing to measure")
	}
	if o.ExactRuns == 0 {
		o.ExactRuns = exact.DefaultRuns
	}
	if o.ExactRuns < 1 || o.ExactRuns > 100 {
		return o, fmt.Errorf("%d exact runs: use 1 to 100", o.ExactRuns)
	}
	if o.MSS == 0 {
		o.MSS = exact.DefaultMSS
	}
	if o.MSS < exact.MinMSS || o.MSS > exact.MaxMSS {
		return o, fmt.Errorf("MSS %d bytes: use %d to %d", o.MSS, exact.MinMSS, exact.MaxMSS)
	}
	if o.Timeout == 0 {
		o.Timeout = 30 * time.Second
	}
	if o.Timeout < 0 {
		return o, errors.New("the timeout must be positive")
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Tool == "" {
		o.Tool = "slowstart"
	}
	return o, nil
}

// OptionsError is an option Run cannot survey with: the caller's mistake.
type OptionsError struct{ Err error }

func (e *OptionsError) Error() string { return e.Err.Error() }
func (e *OptionsError) Unwrap() error { return e.Err }

// Run measures every target, opts.Concurrency at a time, and returns one row
// per target in the targets' order. A target's failure goes into its row; Run
// itself fails only on bad options or a bad target (*OptionsError), or when ctx
// ends: then it waits for the measurements under way to stop (each removes what
// it set up) and returns the rows finished before, with ctx's error.
func Run(ctx context.Context, targets []Target, opts Options) (*Result, error) {
	o, err := opts.normalized()
	if err != nil {
		return nil, &OptionsError{Err: err}
	}
	for i, t := range targets {
		if err := CheckURL(t.URL); err != nil {
			return nil, &OptionsError{Err: fmt.Errorf("target %d: %w", i+1, err)}
		}
	}
	res := &Result{Schema: Schema, Tool: o.Tool, StartedAt: time.Now().UTC(), Total: len(targets), Rows: []Row{},
		Settings: Settings{Concurrency: o.Concurrency, Exact: !o.NoExact, Passive: !o.NoPassive,
			TimeoutMs: o.Timeout.Milliseconds(), Netns: o.Netns}}
	if !o.NoExact {
		res.Settings.ExactRuns, res.Settings.MSS = o.ExactRuns, o.MSS
	}

	jobs := make(chan int)
	var mu sync.Mutex
	var wg sync.WaitGroup
	for range min(o.Concurrency, len(targets)) {
		wg.Go(func() {
			for i := range jobs {
				row := measure(ctx, &o, i+1, targets[i])
				if ctx.Err() != nil && row.Failed() {
					// Cut short by the interruption: not a result.
					continue
				}
				mu.Lock()
				res.Rows = append(res.Rows, row)
				if o.OnRow != nil {
					o.OnRow(row)
				}
				mu.Unlock()
			}
		})
	}
feed:
	for i := range targets {
		select {
		case jobs <- i:
		case <-ctx.Done():
			break feed
		}
	}
	close(jobs)
	wg.Wait()
	sort.Slice(res.Rows, func(a, b int) bool { return res.Rows[a].Index < res.Rows[b].Index })
	for i := range res.Rows {
		if res.Rows[i].Failed() {
			res.Failed++
		}
	}
	if err := ctx.Err(); err != nil {
		res.Interrupted = len(res.Rows) < res.Total
		return res, err
	}
	return res, nil
}

// measure measures one target: the page load first, then the exact window on
// fresh connections (as the demo does).
func measure(ctx context.Context, o *Options, index int, t Target) Row {
	start := time.Now()
	row := Row{Index: index, Line: t.Line, Label: t.Label, URL: t.URL}
	netns := t.Netns
	if netns == "" {
		netns = o.Netns
	}
	resolve := maps.Clone(o.Resolve)
	if resolve == nil {
		resolve = map[string]netip.Addr{}
	}
	maps.Copy(resolve, t.Resolve)
	roots := t.RootCAs
	if roots == nil {
		roots = o.RootCAs
	}
	if !o.NoPassive {
		res, err := probe.Run(ctx, probe.Options{URL: t.URL, Netns: netns, Resolve: resolve, RootCAs: roots,
			Insecure: o.Insecure, Timeout: o.Timeout, Runs: 1, Tool: o.Tool, Logger: o.Logger})
		if res != nil {
			fillPassive(&row, res)
		}
		if err != nil {
			row.PassiveErr, row.PassiveError = err, oneLine(err)
		}
	}
	if !o.NoExact && ctx.Err() == nil && unreachable(row.PassiveErr) {
		row.ExactErr = fmt.Errorf("not measured: the page load could not reach the server (%s)", probe.KindOf(row.PassiveErr))
		row.ExactError = row.ExactErr.Error()
	} else if !o.NoExact && ctx.Err() == nil {
		res, err := exact.Measure(ctx, exact.Options{URL: t.URL, Netns: netns, Resolve: resolve,
			MSS: o.MSS, Runs: o.ExactRuns, Timeout: o.Timeout, Logger: o.Logger})
		if res != nil {
			fillExact(&row, res)
		}
		if err != nil {
			row.ExactErr, row.ExactError = err, oneLine(err)
		}
	}
	var parts []string
	if row.ExactError != "" {
		parts = append(parts, "exact: "+row.ExactError)
	}
	if row.PassiveError != "" {
		parts = append(parts, "passive: "+row.PassiveError)
	}
	row.Error = strings.Join(parts, "; ")
	row.DurationMs = float64(time.Since(start).Microseconds()) / 1000
	o.Logger.Debug("surveyed", "url", t.URL, "exact", row.ExactVerdict, "passive", row.PassiveVerdict, "error", row.Error)
	return row
}

// unreachable says whether a page load's error means the exact measurement
// cannot reach the server either (no name, refused, no route, no answer).
func unreachable(err error) bool {
	switch probe.KindOf(err) {
	case probe.KindDNS, probe.KindRefused, probe.KindUnreach, probe.KindTimeout:
		return true
	}
	return false
}

func fillExact(row *Row, res *exact.Result) {
	row.ExactPhase, row.ExactVerdict, row.ExactReason = res.Phase, res.Verdict, res.Reason
	if res.Verdict != exact.VerdictNone && res.Verdict != exact.VerdictInconsistent {
		row.ExactIWSegments, row.ExactIWBytes = ptr(res.IWSegments), ptr(res.IWBytes)
	}
	for _, run := range res.Runs {
		row.ExactOutcomes = append(row.ExactOutcomes, run.Outcome)
	}
}

func fillPassive(row *Row, res *probe.Result) {
	c := res.Final(0)
	if c == nil {
		return
	}
	if iw := c.InitialWindow; iw != nil {
		row.PassiveVerdict = iw.Verdict
		if iw.Verdict != report.VerdictNone && iw.Verdict != report.VerdictAmbiguous {
			row.PassiveIWSegments = ptr(iw.Segments)
		}
	}
	for _, r := range c.Rounds {
		if r.Phase != report.PhaseTLS {
			row.FirstRoundBytes = ptr(r.Bytes)
			break
		}
	}
	if c.TLS != nil && c.TLS.ServerFlightBytes > 0 {
		row.TLSFlightBytes = ptr(c.TLS.ServerFlightBytes)
	}
	if len(c.Rounds) > 0 || c.HandshakeRTTMs != nil {
		row.TLSRoundTrips, row.RoundTrips = ptr(c.RoundTrips.TLS), ptr(c.RoundTrips.Total)
	}
	if c.HandshakeRTTMs != nil {
		row.HandshakeRTTMs = ptr(*c.HandshakeRTTMs)
	}
	if c.MSS > 0 {
		row.MSS = ptr(c.MSS)
	}
	if ct := c.ClientTiming; ct != nil {
		if ct.Status != 0 {
			row.Status = ptr(ct.Status)
			row.BodyBytes = ptr(ct.BodyBytes)
			row.LastByteMs = ptr(ct.LastByteAtMs)
		}
		row.Protocol = ct.Protocol
		if ct.URL != "" && ct.URL != row.URL {
			row.FinalURL = ct.URL
		}
	}
}

func ptr[T any](v T) *T { return &v }

// oneLine flattens an error's message to one line, for a table cell.
func oneLine(err error) string {
	return strings.Join(strings.Fields(err.Error()), " ")
}
