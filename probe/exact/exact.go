package exact

import (
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"net/url"
	"strconv"
	"time"

	"github.com/slowstart/slowstart/report"
)

// Outcomes of one run.
const (
	// OutcomeSuccess: the server stopped with data left, and retransmitted: the
	// bytes it sent before are its initial window.
	OutcomeSuccess = "success"
	// OutcomeTooShort: the response (or the TLS flight) ended before the window
	// was full: the bytes are a lower bound of the window.
	OutcomeTooShort = "too_short"
	// OutcomeRwndLimited: the bytes in flight reached the receive window this
	// side advertised, so the window may be larger.
	OutcomeRwndLimited = "rwnd_limited"
	// OutcomeFIN and OutcomeRST: the server closed (FIN) or reset (RST) the
	// connection before sending any data.
	OutcomeFIN = "fin"
	OutcomeRST = "rst"
	// OutcomeLoss: a segment of the flight was lost (a hole in the sequence
	// space before the first retransmission, or a reset in the middle): the
	// count is not trustworthy.
	OutcomeLoss = "loss"
	// OutcomeTimeout: the server sent nothing, or stopped without retransmitting
	// within the wait.
	OutcomeTimeout = "timeout"
)

// Verdicts of a measurement (several runs).
const (
	// VerdictExact: every successful run saw the same window, and no run
	// contradicted it.
	VerdictExact = "exact"
	// VerdictLowerBound: no run filled the window; the largest complete answer
	// is a lower bound.
	VerdictLowerBound = "lower_bound"
	// VerdictRwndLimited: the receive window this side advertised capped the
	// flight; the initial window is at least that.
	VerdictRwndLimited = "rwnd_limited"
	// VerdictInconsistent: successful runs disagree (or a complete answer was
	// larger than a measured window): no window is reported.
	VerdictInconsistent = "inconsistent"
	// VerdictNone: no run gave a reading (loss, timeouts, closes).
	VerdictNone = "none"
)

// Phases: what the counted flight was.
const (
	PhaseHTTP = "http" // the HTTP response (cleartext, or after a TLS handshake)
	PhaseTLS  = "tls"  // the server's TLS handshake flight
)

// Defaults of Options.
const (
	DefaultMSS     = 64
	DefaultRuns    = 3
	DefaultTimeout = 10 * time.Second
	DefaultMaxWait = 5 * time.Second
	// MinMSS is the smallest MSS the package announces. Linux servers raise an
	// MSS below their net.ipv4.tcp_min_snd_mss (48 by default).
	MinMSS = 48
	// MaxMSS keeps the announced MSS below an Ethernet path's, so that the
	// measurement stays independent of the path MTU.
	MaxMSS = 1460
)

// Options configure a measurement.
type Options struct {
	// URL is http:// or https://; its path is requested over HTTP. A long (or
	// made-up) path can make a short answer long enough to fill the window.
	URL string
	// Resolve maps "host:port" to the address to connect to (curl's --resolve).
	// Without an entry the host must be an IP literal or resolve by DNS.
	Resolve map[string]netip.Addr
	// MSS is the MSS announced in the SYN, in bytes (default DefaultMSS).
	MSS int
	// Runs is how many fresh connections to measure (default DefaultRuns).
	Runs int
	// AfterHandshake (HTTPS only) completes the TLS handshake normally and
	// counts the HTTP response instead of the handshake flight. The window is
	// then the one after the handshake, which the handshake's ACKs may have
	// grown.
	AfterHandshake bool
	// TLSVersion holds HTTPS to "1.2" or "1.3"; "" offers both.
	TLSVersion string
	// ServerName is the TLS server name (SNI); the URL's host when empty.
	ServerName string
	// UserAgent is sent with the HTTP request; "slowstart" when empty.
	UserAgent string
	// Netns is the path of a network namespace (e.g. /run/netns/NAME) to measure
	// from: the socket, the nftables table and the capture are made inside it.
	Netns string
	// Interface is the capture interface; the one the route to the server uses
	// when empty.
	Interface string
	// Timeout bounds the connection set-up of each run (default DefaultTimeout).
	Timeout time.Duration
	// MaxWait bounds the wait for the server's first retransmission after the
	// request (default DefaultMaxWait). The wait is 1 s + 6 handshake RTTs, at
	// most this.
	MaxWait time.Duration
	// Pause is waited between one run's end and the next run's connection, to
	// spare a server many connections in a row (a survey's politeness); 0: none.
	Pause time.Duration
	// Logger receives diagnostics; nil discards them.
	Logger *slog.Logger
}

// Schema names the JSON form of a Result (docs/schemas/exact.json).
const Schema = "slowstart.exact/v1"

// Result is the outcome of a measurement.
type Result struct {
	Schema string `json:"schema"` // Schema
	URL    string `json:"url"`
	Remote string `json:"remote"` // ip:port connected to
	Phase  string `json:"phase"`  // PhaseHTTP or PhaseTLS
	// AnnouncedMSS is the MSS the SYNs carried, in bytes.
	AnnouncedMSS   int   `json:"announced_mss"`
	AfterHandshake bool  `json:"after_handshake"`
	Runs           []Run `json:"runs"`
	// Consistent: every successful run saw the same window and no run
	// contradicted it.
	Consistent bool `json:"consistent"`
	// IWSegments and IWBytes are the window (VerdictExact), the lower bound
	// (VerdictLowerBound, VerdictRwndLimited), or 0.
	IWSegments int    `json:"iw_segments"`
	IWBytes    int    `json:"iw_bytes"`
	Verdict    string `json:"verdict"`
	Reason     string `json:"reason"` // a sentence for people
}

// Run is one connection's measurement.
type Run struct {
	Index   int    `json:"run"` // 1-based
	Outcome string `json:"outcome"`
	// Bytes are the distinct sequence bytes of the flight, before the first
	// retransmission (a loss probe of new data excluded).
	Bytes int `json:"bytes"`
	// Segments is Bytes in full-sized segments (rounded up).
	Segments int `json:"segments"`
	// SegmentBytes is the payload of the server's full-sized segments: the
	// announced MSS less the TCP options the server puts in each segment.
	SegmentBytes int `json:"segment_bytes"`
	// Retransmission: the server retransmitted before the run ended.
	Retransmission bool `json:"retransmission"`
	// LossProbeBytes counts new data the server sent alone after a pause of at
	// least a round trip, just before retransmitting: a tail loss probe (Linux
	// sends one when its window is full), not part of the window.
	LossProbeBytes int `json:"loss_probe_bytes"`
	// MergedSegments: the capture saw packets longer than the server's segments
	// (TSO/GSO at the sender or GRO here). A Linux sender with TSO may then hold
	// back the window's last segments (TSO deferral) and send them only as a
	// loss probe, so a flight followed by a loss probe is a lower bound.
	MergedSegments bool `json:"merged_segments"`
	// FlightBytes is the length of the whole response (or TLS flight) when this
	// side saw it complete, else 0.
	FlightBytes int `json:"flight_bytes"`
	// ServerMSS is the MSS in the server's SYN/ACK.
	ServerMSS int `json:"server_mss"`
	// ReceiveWindowBytes is the receive window this side last advertised
	// before the flight (scaled).
	ReceiveWindowBytes int     `json:"receive_window_bytes"`
	HandshakeRTTMs     float64 `json:"handshake_rtt_ms"`
	// FirstRetransmissionMs is the time from the request (or ClientHello) to
	// the first retransmission; 0 without one.
	FirstRetransmissionMs float64 `json:"first_retransmission_ms"`
	TLSVersion            string  `json:"tls_version,omitempty"` // "1.2", "1.3" from the ServerHello
	Local                 string  `json:"local"`                 // ip:port of this side
	Reason                string  `json:"reason"`                // a sentence for people
	Error                 string  `json:"error,omitempty"`       // why the run could not measure
	// Packets counts the connection's packets the capture saw, both ways.
	Packets int `json:"packets"`
}

// target is a parsed URL.
type target struct {
	url        *url.URL
	host       string // without brackets
	port       uint16
	tls        bool
	serverName string
}

func (o Options) normalized() (Options, target, error) {
	if o.MSS == 0 {
		o.MSS = DefaultMSS
	}
	if o.MSS < MinMSS || o.MSS > MaxMSS {
		return o, target{}, fmt.Errorf("MSS %d bytes: use %d to %d (Linux servers raise an MSS below net.ipv4.tcp_min_snd_mss, 48 by default)", o.MSS, MinMSS, MaxMSS)
	}
	if o.Runs == 0 {
		o.Runs = DefaultRuns
	}
	if o.Runs < 1 || o.Runs > 100 {
		return o, target{}, fmt.Errorf("%d runs: use 1 to 100", o.Runs)
	}
	if o.Timeout == 0 {
		o.Timeout = DefaultTimeout
	}
	if o.MaxWait == 0 {
		o.MaxWait = DefaultMaxWait
	}
	if o.Timeout < 0 || o.MaxWait < 0 || o.Pause < 0 {
		return o, target{}, errors.New("timeouts must be positive")
	}
	switch o.TLSVersion {
	case "", "1.2", "1.3":
	default:
		return o, target{}, fmt.Errorf("TLS version %q: use 1.2 or 1.3", o.TLSVersion)
	}
	if o.UserAgent == "" {
		o.UserAgent = "slowstart"
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	t, err := parseTarget(o.URL)
	if err != nil {
		return o, t, err
	}
	if o.AfterHandshake && !t.tls {
		return o, t, fmt.Errorf("URL %s: measuring after the handshake needs an https:// URL", o.URL)
	}
	t.serverName = o.ServerName
	if t.serverName == "" {
		t.serverName = t.host
	}
	return o, t, nil
}

func parseTarget(raw string) (target, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return target{}, fmt.Errorf("URL %q is malformed: %w", raw, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return target{}, fmt.Errorf("URL %q: give an http:// or https:// URL", raw)
	}
	t := target{url: u, host: u.Hostname(), tls: u.Scheme == "https", port: 80}
	if t.host == "" {
		return t, fmt.Errorf("URL %q has no host", raw)
	}
	if t.tls {
		t.port = 443
	}
	if p := u.Port(); p != "" {
		n, err := strconv.ParseUint(p, 10, 16)
		if err != nil || n == 0 {
			return t, fmt.Errorf("URL %q: port %q is not a number from 1 to 65535", raw, p)
		}
		t.port = uint16(n)
	}
	return t, nil
}

// requestPath is the path and query to ask for ("/" for an empty path).
func (t target) requestPath() string {
	p := t.url.RequestURI()
	if p == "" {
		return "/"
	}
	return p
}

// summarize sets the verdict of r from its runs: the window is reported only
// when every successful run agrees and no complete answer was larger.
func (r *Result) summarize() {
	var successSegments []int
	successBytes := 0
	lowerSegments, lowerBytes := 0, 0
	rwndSegments, rwndBytes := 0, 0
	deferred := false
	for _, run := range r.Runs {
		switch run.Outcome {
		case OutcomeSuccess:
			if run.MergedSegments && run.LossProbeBytes > 0 {
				deferred = true
			}
			successSegments = append(successSegments, run.Segments)
			successBytes = max(successBytes, run.Bytes)
		case OutcomeTooShort:
			if run.Segments > lowerSegments {
				lowerSegments, lowerBytes = run.Segments, run.Bytes
			}
		case OutcomeRwndLimited:
			if run.Segments > rwndSegments {
				rwndSegments, rwndBytes = run.Segments, run.Bytes
			}
		}
	}
	what := "the response"
	if r.Phase == PhaseTLS {
		what = "the TLS handshake flight"
	}
	switch {
	case len(successSegments) > 0:
		agree := true
		for _, s := range successSegments {
			agree = agree && s == successSegments[0]
		}
		iw := successSegments[0]
		switch {
		case !agree:
			r.Verdict = VerdictInconsistent
			r.Reason = fmt.Sprintf("successful runs saw different windows (%v segments): the server's window varies (a fleet with mixed settings?) or the path lost or reordered segments; measure again", successSegments)
		case deferred:
			r.Verdict = VerdictLowerBound
			r.IWSegments, r.IWBytes = iw, successBytes
			r.Reason = fmt.Sprintf("the server sent %d segments of %s, then new data only as a loss probe; its packets were merged (TSO/GSO, or GRO on this side), and a sender with TSO may hold back the window's last segments until ACKs come: the window is at least %d segments", iw, what, iw)
		case lowerSegments > iw:
			r.Verdict = VerdictInconsistent
			r.Reason = fmt.Sprintf("a run saw %s complete in %d segments, more than the %d segments other runs measured: measure again", what, lowerSegments, iw)
		default:
			r.Consistent = true
			r.Verdict = VerdictExact
			r.IWSegments, r.IWBytes = iw, successBytes
			r.Reason = fmt.Sprintf("%d of %d runs agree: the server sent %d segments (%d bytes) of %s and then waited for an ACK", len(successSegments), len(r.Runs), iw, successBytes, what)
		}
	case rwndSegments > 0:
		r.Verdict = VerdictRwndLimited
		r.IWSegments, r.IWBytes = rwndSegments, rwndBytes
		r.Reason = fmt.Sprintf("the flight filled the receive window this side advertised: the initial window is at least %d segments", rwndSegments)
	case lowerSegments > 0:
		r.Verdict = VerdictLowerBound
		r.IWSegments, r.IWBytes = lowerSegments, lowerBytes
		r.Reason = fmt.Sprintf("%s ended after %d segments, inside the initial window: the window is at least that; ask for a longer path, or announce a smaller MSS", what, lowerSegments)
	default:
		r.Verdict = VerdictNone
		r.Reason = "no run gave a reading (see each run's outcome): measure again"
	}
}

// InitialWindow returns the result in the Report's form, nil when no run gave
// a reading. The Report's verdicts have the same meaning, except that an
// inconsistent measurement is "ambiguous" there.
func (r *Result) InitialWindow() *report.InitialWindow {
	iw := &report.InitialWindow{Segments: r.IWSegments, Bytes: r.IWBytes, Source: r.Phase, Reason: r.Reason}
	switch r.Verdict {
	case VerdictExact:
		iw.Verdict = report.VerdictExact
	case VerdictLowerBound:
		iw.Verdict = report.VerdictLowerBound
	case VerdictRwndLimited:
		iw.Verdict = report.VerdictRwndLimited
	case VerdictInconsistent:
		iw.Verdict = report.VerdictAmbiguous
	default:
		return nil
	}
	return iw
}
