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
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/slowstart/slowstart/internal/redact"
	"github.com/slowstart/slowstart/probe"
	"github.com/slowstart/slowstart/probe/exact"
	"github.com/slowstart/slowstart/report"
)

// Schema names the JSON form of a Result.
const Schema = "slowstart.survey/v1"

// DefaultConcurrency is how many URLs are measured at once unless told otherwise.
const DefaultConcurrency = 4

// MaxConcurrency bounds Options.Concurrency. Most of a measurement is waiting
// (for the server's retransmission, for round trips), so thousands fit one
// machine; what bounds them is the sockets, the captures and the rate limits.
const MaxConcurrency = 4096

// DefaultPageLoads bounds the page loads under way at once when
// Options.PageLoads is 0: each holds a capture with a buffer of its own (about
// 2 MB), so they, not the exact measurements, set a survey's memory.
const DefaultPageLoads = 32

// DefaultDNSConcurrency is how many names are looked up at once.
const DefaultDNSConcurrency = 16

// Target is one URL to measure, with what reaching it needs. A target's own
// Netns, Resolve and RootCAs take precedence over the survey's Options, so that
// one survey can measure servers in different places (e.g. lab servers, each in
// its own namespace).
type Target struct {
	// Index is the target's 1-based position among the list's targets (all of
	// them, whatever the shard); Line the line of the list it came from, 0
	// otherwise.
	Index int
	Line  int
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
	// PageLoads bounds the page loads under way at once (min(Concurrency,
	// DefaultPageLoads) when 0).
	PageLoads int
	// DNSConcurrency is how many names are looked up at once
	// (DefaultDNSConcurrency when 0). Answers are cached for the survey's life.
	DNSConcurrency int
	// Lookup resolves a host name; net.DefaultResolver (inside Netns) when nil.
	Lookup func(ctx context.Context, host string) ([]netip.Addr, error)
	// ConnectionsPerSecond and PacketsPerSecond limit the survey as a whole: new
	// connections wait for their turn (0: no limit). Packets are those the
	// measurements' captures saw, both ways, charged when a measurement ends.
	ConnectionsPerSecond, PacketsPerSecond float64
	// Pause is waited between two connections to the same server address (one
	// target's page load and its exact runs, and the next target on that
	// address), on top of measuring one target at a time per address.
	Pause time.Duration
	// NoExact skips the exact (active) measurement; NoPassive the page load.
	NoExact, NoPassive bool
	// ExactRuns is the number of fresh connections of each exact measurement
	// (exact.DefaultRuns when 0).
	ExactRuns int
	// MSS is the MSS the exact measurement announces (exact.DefaultMSS when 0).
	MSS int
	// NoRetries turns off what raises the exact measurement's answer rate when a
	// first answer is too short to fill the window: asking again for a long
	// made-up path (over http, whose error page or redirect is often longer),
	// then announcing the smallest MSS (exact.MinMSS).
	NoRetries bool
	// Timeout bounds each page load (DNS to last byte) and the connection set-up
	// of each exact run (30 s when 0).
	Timeout time.Duration
	// Netns, Resolve and RootCAs apply to every target that has none of its own.
	Netns   string
	Resolve map[string]netip.Addr
	RootCAs *x509.CertPool
	// Insecure skips the verification of certificates in the page load.
	Insecure bool
	// Shard holds the survey to one part of the list (the whole list when zero).
	Shard Shard
	// Vantage names where the survey runs from (a region, a host); written in
	// every row, so that surveys of one list from several places can be merged.
	Vantage string
	// Done, when set, says whether a target was measured before (a resumed
	// survey): it is skipped.
	Done func(Target) (bool, error)
	// Tool is the version string written into the Result.
	Tool string
	// OnRow, when set, is called once per finished row (from the measuring
	// goroutines, one call at a time), e.g. to advance a progress bar.
	OnRow func(Row)
	// Progress, when set, is kept up to date while the survey runs.
	Progress *Progress
	// Logger receives diagnostics; nil discards them.
	Logger *slog.Logger

	// measure replaces the measurements (tests of the engine).
	measure func(ctx context.Context, t *task) Row
	// pcapDir, when set, keeps each page load's capture there as INDEX.pcap
	// (tests: an independent reading of what the page load saw).
	pcapDir string
}

// Row is the outcome of one URL. Fields that were not measured, or could not
// be, are nil (null in JSON, empty in CSV).
type Row struct {
	// Index is the target's 1-based position in the list; Line its line.
	Index int    `json:"index"`
	Line  int    `json:"line,omitempty"`
	Label string `json:"label"`
	URL   string `json:"url"`
	// Vantage is where the survey ran from (Options.Vantage); Shard the part of
	// the list ("I/N") the row was measured in.
	Vantage string `json:"vantage,omitempty"`
	Shard   string `json:"shard,omitempty"`
	// Address is the server address the survey measured (after DNS).
	Address string `json:"address,omitempty"`

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
	// ExactMSS is the MSS announced in the measurement that gave the reading.
	ExactMSS int `json:"exact_mss,omitempty"`
	// ExactRetry says what the reading took beyond the first measurement:
	// "long_path" (a long made-up path, over http), "small_mss" (the smallest
	// MSS), both ("long_path+small_mss"), or "" (none).
	ExactRetry string `json:"exact_retry,omitempty"`
	// ExactOutcomes lists each exact run's outcome, in order (the runs of every
	// measurement, retries included).
	ExactOutcomes []string `json:"exact_outcomes,omitempty"`
	// ExactReason is exact's verdict in a sentence.
	ExactReason string `json:"exact_reason,omitempty"`

	// PassiveVerdict and PassiveIWSegments are the page load's own IW reading
	// (exact, range, lower_bound, rwnd_limited, ambiguous, none); a range ends
	// at PassiveIWSegmentsMax, and is exactly that end under the congestion
	// control PassiveIWExactIf names.
	PassiveVerdict       string `json:"passive_verdict,omitempty"`
	PassiveIWSegments    *int   `json:"passive_iw_segments"`
	PassiveIWSegmentsMax *int   `json:"passive_iw_segments_max,omitempty"`
	PassiveIWExactIf     string `json:"passive_iw_exact_if,omitempty"`
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
	// ("exact: …; passive: …"). Empty when the row succeeded. ErrorKind names
	// the failure for summaries: the page load's kind (dns, refused, timeout,
	// tls, status, …) or "exact".
	ExactError   string `json:"exact_error,omitempty"`
	PassiveError string `json:"passive_error,omitempty"`
	Error        string `json:"error,omitempty"`
	ErrorKind    string `json:"error_kind,omitempty"`
	// DurationMs is how long the row's measurements took; FinishedAt when they
	// ended (UTC).
	DurationMs float64    `json:"duration_ms"`
	FinishedAt *time.Time `json:"finished_at,omitempty"`

	// ExactErr and PassiveErr are the errors themselves, for callers that map
	// them (e.g. to exit codes); not rendered.
	ExactErr   error `json:"-"`
	PassiveErr error `json:"-"`
	// packets are the packets the measurements' captures saw (rate limiting).
	packets int
}

// Failed says whether a measurement of the row failed.
func (r *Row) Failed() bool {
	return r.ExactErr != nil || r.PassiveErr != nil || r.ExactError != "" || r.PassiveError != ""
}

// PermissionDenied says whether the row failed for want of privileges.
func (r *Row) PermissionDenied() bool {
	return IsPermissionError(r.ExactErr) || IsPermissionError(r.PassiveErr) || r.ErrorKind == probe.KindPermission
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

// Settings are the options of a survey as recorded in its Result (and in a
// store).
type Settings struct {
	Concurrency          int     `json:"concurrency"`
	PageLoads            int     `json:"page_loads,omitempty"`
	Exact                bool    `json:"exact"`
	Passive              bool    `json:"passive"`
	ExactRuns            int     `json:"exact_runs,omitempty"`
	MSS                  int     `json:"mss,omitempty"`
	Retries              bool    `json:"retries,omitempty"`
	TimeoutMs            int64   `json:"timeout_ms"`
	PauseMs              int64   `json:"pause_ms,omitempty"`
	ConnectionsPerSecond float64 `json:"connections_per_second,omitempty"`
	PacketsPerSecond     float64 `json:"packets_per_second,omitempty"`
	Netns                string  `json:"netns,omitempty"`
	Shard                string  `json:"shard,omitempty"`
	Vantage              string  `json:"vantage,omitempty"`
}

// Settings returns the options as a Result records them (defaults filled in).
func (o Options) Settings() (Settings, error) {
	n, err := o.normalized()
	if err != nil {
		return Settings{}, err
	}
	st := Settings{Concurrency: n.Concurrency, PageLoads: n.PageLoads, Exact: !n.NoExact, Passive: !n.NoPassive,
		TimeoutMs: n.Timeout.Milliseconds(), PauseMs: n.Pause.Milliseconds(), Netns: n.Netns,
		ConnectionsPerSecond: n.ConnectionsPerSecond, PacketsPerSecond: n.PacketsPerSecond,
		Shard: n.Shard.String(), Vantage: n.Vantage}
	if !n.NoExact {
		st.ExactRuns, st.MSS, st.Retries = n.ExactRuns, n.MSS, !n.NoRetries
	}
	if n.NoPassive {
		st.PageLoads = 0
	}
	return st, nil
}

func (o Options) normalized() (Options, error) {
	if o.Concurrency == 0 {
		o.Concurrency = DefaultConcurrency
	}
	if o.Concurrency < 1 || o.Concurrency > MaxConcurrency {
		return o, fmt.Errorf("concurrency %d: use 1 to %d", o.Concurrency, MaxConcurrency)
	}
	if o.PageLoads == 0 {
		o.PageLoads = min(o.Concurrency, DefaultPageLoads)
	}
	if o.PageLoads < 1 || o.PageLoads > MaxConcurrency {
		return o, fmt.Errorf("%d page loads at once: use 1 to %d", o.PageLoads, MaxConcurrency)
	}
	if o.DNSConcurrency == 0 {
		o.DNSConcurrency = DefaultDNSConcurrency
	}
	if o.DNSConcurrency < 1 || o.DNSConcurrency > 1024 {
		return o, fmt.Errorf("%d DNS lookups at once: use 1 to 1024", o.DNSConcurrency)
	}
	if o.ConnectionsPerSecond < 0 || o.PacketsPerSecond < 0 {
		return o, errors.New("rate limits must be positive (or 0 for none)")
	}
	if o.Pause < 0 {
		return o, errors.New("the pause must be positive (or 0 for none)")
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
// per target in the targets' order, in memory: for a list too long to hold,
// use Stream with a store. A target's failure goes into its row; Run itself
// fails only on bad options or a bad target (*OptionsError), or when ctx ends:
// then it waits for the measurements under way to stop (each removes what it
// set up) and returns the rows finished before, with ctx's error.
func Run(ctx context.Context, targets []Target, opts Options) (*Result, error) {
	settings, err := opts.Settings()
	if err != nil {
		return nil, &OptionsError{Err: err}
	}
	for i, t := range targets {
		if err := CheckURL(t.URL); err != nil {
			return nil, &OptionsError{Err: fmt.Errorf("target %d: %w", i+1, err)}
		}
	}
	res := &Result{Schema: Schema, Tool: opts.Tool, StartedAt: time.Now().UTC(), Total: len(targets), Rows: []Row{},
		Settings: settings}
	if res.Tool == "" {
		res.Tool = "slowstart"
	}
	if opts.Shard.Count > 1 {
		res.Total = 0
		for _, t := range targets {
			if opts.Shard.Contains(t.URL) {
				res.Total++
			}
		}
	}
	var mu sync.Mutex
	sink := SinkFunc(func(r Row) error {
		mu.Lock()
		defer mu.Unlock()
		res.Rows = append(res.Rows, r)
		return nil
	})
	_, err = Stream(ctx, &SliceSource{Targets: targets}, sink, opts)
	var oe *OptionsError
	if errors.As(err, &oe) {
		return nil, err
	}
	sort.Slice(res.Rows, func(a, b int) bool { return res.Rows[a].Index < res.Rows[b].Index })
	for i := range res.Rows {
		if res.Rows[i].Failed() {
			res.Failed++
		}
	}
	if err != nil {
		res.Interrupted = len(res.Rows) < res.Total
		return res, err
	}
	return res, nil
}

// measure measures one target: the page load first, then the exact window on
// fresh connections (as the demo does), with the limits and the pauses of the
// survey between the connections.
func (e *engine) measure(ctx context.Context, t *task) Row {
	o := &e.opts
	start := time.Now()
	// Printed and stored: the URL without its credentials or query values,
	// and every error through oneLine, which redacts the URLs in it.
	row := Row{Index: t.target.Index, Line: t.target.Line, Label: t.target.Label, URL: redact.URL(t.target.URL),
		Vantage: o.Vantage, Shard: o.Shard.String()}
	if t.addr.IsValid() {
		row.Address = t.addr.String()
	}
	netns := t.target.Netns
	if netns == "" {
		netns = o.Netns
	}
	resolve := maps.Clone(o.Resolve)
	if resolve == nil {
		resolve = map[string]netip.Addr{}
	}
	maps.Copy(resolve, t.target.Resolve)
	if t.addr.IsValid() && t.hostPort != "" {
		if _, given := resolve[t.hostPort]; !given {
			resolve[t.hostPort] = t.addr
		}
	}
	roots := t.target.RootCAs
	if roots == nil {
		roots = o.RootCAs
	}
	if !o.NoPassive {
		err := e.pageLoads.acquire(ctx)
		if err == nil {
			if err = e.limits.waitConnections(ctx, 1); err == nil {
				var res *probe.Result
				popts := probe.Options{URL: t.target.URL, Netns: netns, Resolve: resolve, RootCAs: roots,
					Insecure: o.Insecure, Timeout: o.Timeout, Runs: 1, Tool: o.Tool, Logger: o.Logger}
				if o.pcapDir != "" {
					popts.PcapPath = filepath.Join(o.pcapDir, strconv.Itoa(t.target.Index)+".pcap")
				}
				res, err = probe.Run(ctx, popts)
				if res != nil {
					fillPassive(&row, res)
					if res.Report != nil {
						row.packets += int(res.Report.Source.Packets)
					}
				}
			}
			e.pageLoads.release()
		}
		if err != nil {
			row.PassiveErr, row.PassiveError = err, oneLine(err)
		}
		e.limits.chargePackets(row.packets)
	}
	if !o.NoExact && ctx.Err() == nil && unreachable(row.PassiveErr) {
		row.ExactErr = fmt.Errorf("not measured: the page load could not reach the server (%s)", probe.KindOf(row.PassiveErr))
		row.ExactError = row.ExactErr.Error()
	} else if !o.NoExact && ctx.Err() == nil {
		if !o.NoPassive {
			sleep(ctx, o.Pause)
		}
		e.measureExact(ctx, &row, t.target.URL, netns, resolve)
	}
	var parts []string
	if row.ExactError != "" {
		parts = append(parts, "exact: "+row.ExactError)
	}
	if row.PassiveError != "" {
		parts = append(parts, "passive: "+row.PassiveError)
	}
	row.Error = strings.Join(parts, "; ")
	switch {
	case row.PassiveErr != nil:
		row.ErrorKind = probe.KindOf(row.PassiveErr)
		if row.ErrorKind == "" {
			row.ErrorKind = "other"
		}
	case row.ExactErr != nil:
		row.ErrorKind = "exact"
		if IsPermissionError(row.ExactErr) {
			row.ErrorKind = probe.KindPermission
		}
	}
	row.DurationMs = float64(time.Since(start).Microseconds()) / 1000
	now := time.Now().UTC().Truncate(time.Millisecond)
	row.FinishedAt = &now
	o.Logger.Debug("surveyed", "url", row.URL, "exact", row.ExactVerdict, "passive", row.PassiveVerdict, "error", row.Error)
	return row
}

// measureExact measures the exact window, and when the answer was too short
// to fill it, measures again for a long made-up path (over http), then with the
// smallest MSS: more segments for the same server, the window unchanged. The
// reading kept is the best one (an exact window over a lower bound, a higher
// bound over a lower one); every run's outcome is listed.
func (e *engine) measureExact(ctx context.Context, row *Row, rawURL, netns string, resolve map[string]netip.Addr) {
	o := &e.opts
	attempt := func(u string, mss int) (*exact.Result, error) {
		if err := e.limits.waitConnections(ctx, o.ExactRuns); err != nil {
			return nil, err
		}
		res, err := exact.Measure(ctx, exact.Options{URL: u, Netns: netns, Resolve: resolve,
			MSS: mss, Runs: o.ExactRuns, Timeout: o.Timeout, Pause: o.Pause, Logger: o.Logger})
		if res != nil {
			packets := 0
			for _, run := range res.Runs {
				packets += run.Packets
				row.ExactOutcomes = append(row.ExactOutcomes, run.Outcome)
			}
			row.packets += packets
			e.limits.chargePackets(packets)
		}
		return res, err
	}
	best, err := attempt(rawURL, o.MSS)
	if err != nil {
		row.ExactErr, row.ExactError = err, oneLine(err)
		if best == nil {
			return
		}
	}
	retry := ""
	if err == nil && !o.NoRetries {
		bestURL := rawURL
		if best.Verdict == exact.VerdictLowerBound && best.Phase == exact.PhaseHTTP {
			if long, ok := longPathURL(rawURL); ok {
				sleep(ctx, o.Pause)
				res, err := attempt(long, o.MSS)
				if err == nil && better(res, best) {
					best, retry, bestURL = res, "long_path", long
				}
			}
		}
		if best.Verdict == exact.VerdictLowerBound && o.MSS > exact.MinMSS && ctx.Err() == nil {
			sleep(ctx, o.Pause)
			res, err := attempt(bestURL, exact.MinMSS)
			if err == nil && better(res, best) {
				best = res
				retry = strings.TrimPrefix(retry+"+small_mss", "+")
			}
		}
	}
	fillExact(row, best)
	row.ExactRetry = retry
}

// better says whether a's reading beats b's: an exact window beats any bound,
// and a higher bound a lower one.
func better(a, b *exact.Result) bool {
	if a == nil {
		return false
	}
	rank := func(r *exact.Result) int {
		switch r.Verdict {
		case exact.VerdictExact:
			return 3
		case exact.VerdictLowerBound, exact.VerdictRwndLimited:
			return 2
		}
		return 0
	}
	if rank(a) != rank(b) {
		return rank(a) > rank(b)
	}
	return rank(a) == 2 && a.IWSegments > b.IWSegments
}

// longPathBytes is the length of the made-up path of the long-path retry: a
// server that echoes it in an error page or a redirect answers with at least
// that much (TBIT's trick), while the request still fits one segment.
const longPathBytes = 1200

// longPathURL returns the URL with a long path that no server is likely to
// have; ok is false when the URL is not http://.
func longPathURL(raw string) (string, bool) {
	u, err := url.Parse(raw)
	if err != nil || u.Scheme != "http" {
		return "", false
	}
	u.Path = "/slowstart-initial-window-probe/" + strings.Repeat("x", longPathBytes)
	u.RawQuery, u.Fragment = "", ""
	return u.String(), true
}

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) {
	if d <= 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
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
	row.ExactMSS = res.AnnouncedMSS
	if res.Verdict != exact.VerdictNone && res.Verdict != exact.VerdictInconsistent {
		row.ExactIWSegments, row.ExactIWBytes = ptr(res.IWSegments), ptr(res.IWBytes)
	}
}

// fillPassive fills the page load's columns from its final connection, as
// report.Summary projects it (the same row watch stores).
func fillPassive(row *Row, res *probe.Result) {
	c := res.Final(0)
	if c == nil {
		return
	}
	sum := report.Summary(c)
	row.PassiveVerdict = sum.IW.Verdict
	row.PassiveIWSegments, row.PassiveIWSegmentsMax, row.PassiveIWExactIf = sum.IW.Segments, sum.IW.SegmentsMax, sum.IW.ExactIf
	row.FirstRoundBytes, row.TLSFlightBytes = sum.FirstRoundBytes, sum.TLSFlightBytes
	row.TLSRoundTrips, row.RoundTrips = sum.TLSRoundTrips, sum.RoundTrips
	row.HandshakeRTTMs, row.MSS = sum.HandshakeRTTMs, sum.MSS
	row.Status, row.BodyBytes, row.LastByteMs = sum.Status, sum.BodyBytes, sum.LastByteMs
	row.Protocol = sum.Protocol
	if sum.URL != "" && sum.URL != row.URL {
		row.FinalURL = sum.URL
	}
}

func ptr[T any](v T) *T { return &v }

// oneLine flattens an error's message to one line, for a table cell, with the
// URLs in it redacted.
func oneLine(err error) string {
	return redact.Text(strings.Join(strings.Fields(err.Error()), " "))
}
