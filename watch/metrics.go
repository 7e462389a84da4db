package watch

import (
	"fmt"
	"io"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/slowstart/slowstart/internal/redact"
	"github.com/slowstart/slowstart/report"
)

// Metrics holds what the Prometheus endpoint serves: per watch, counters of probes
// and failed probes, and gauges of the last successful probe. A watch's series are
// labelled {label="NAME"} when it has a label, {url="URL"} (redacted) otherwise.
type Metrics struct {
	mu   sync.Mutex
	urls map[string]*urlMetrics // by the series's labels, e.g. url="https://example.com/"
}

type urlMetrics struct {
	probes, errors uint64
	lastUnix       float64 // time of the last probe, successful or not
	last           *Row    // the last successful probe
}

// NewMetrics makes an empty Metrics.
func NewMetrics() *Metrics { return &Metrics{urls: map[string]*urlMetrics{}} }

// Observe counts a probe.
func (m *Metrics) Observe(r Row) {
	m.mu.Lock()
	defer m.mu.Unlock()
	series := `url="` + escapeLabel(redact.URL(r.URL)) + `"`
	if r.Label != "" {
		series = `label="` + escapeLabel(r.Label) + `"`
	}
	u := m.urls[series]
	if u == nil {
		u = &urlMetrics{}
		m.urls[series] = u
	}
	u.probes++
	u.lastUnix = float64(r.Time.UnixNano()) / 1e9
	if r.Error != "" {
		u.errors++
		return
	}
	row := r
	u.last = &row
}

// ServeHTTP writes the metrics in the Prometheus text exposition format (0.0.4).
func (m *Metrics) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
	_ = m.Write(w)
}

// Write writes the metrics in the Prometheus text exposition format.
func (m *Metrics) Write(w io.Writer) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	urls := make([]string, 0, len(m.urls))
	for u := range m.urls {
		urls = append(urls, u)
	}
	sort.Strings(urls)
	var b strings.Builder
	family := func(name, kind, help string, value func(*urlMetrics) (float64, bool)) {
		fmt.Fprintf(&b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, kind)
		for _, u := range urls {
			if v, ok := value(m.urls[u]); ok {
				fmt.Fprintf(&b, "%s{%s} %s\n", name, u, strconv.FormatFloat(v, 'g', -1, 64))
			}
		}
	}
	seconds := func(get func(*Row) *float64) func(*urlMetrics) (float64, bool) {
		return func(u *urlMetrics) (float64, bool) {
			if u.last == nil || get(u.last) == nil {
				return 0, false
			}
			return *get(u.last) / 1000, true
		}
	}
	integer := func(get func(*Row) *int) func(*urlMetrics) (float64, bool) {
		return func(u *urlMetrics) (float64, bool) {
			if u.last == nil || get(u.last) == nil {
				return 0, false
			}
			return float64(*get(u.last)), true
		}
	}
	family("slowstart_watch_probes_total", "counter", "Probes made, successful or not.",
		func(u *urlMetrics) (float64, bool) { return float64(u.probes), true })
	family("slowstart_watch_errors_total", "counter", "Probes that failed.",
		func(u *urlMetrics) (float64, bool) { return float64(u.errors), true })
	family("slowstart_watch_last_probe_timestamp_seconds", "gauge", "Unix time of the last probe.",
		func(u *urlMetrics) (float64, bool) { return u.lastUnix, true })
	family("slowstart_watch_last_success_timestamp_seconds", "gauge", "Unix time of the last successful probe.",
		func(u *urlMetrics) (float64, bool) {
			if u.last == nil {
				return 0, false
			}
			return float64(u.last.Time.UnixNano()) / 1e9, true
		})
	family("slowstart_watch_initial_window_segments", "gauge", "The server's initial window seen by the last successful probe (segments), when its verdict was exact.",
		integer(func(r *Row) *int {
			if r.IWVerdict != report.VerdictExact {
				return nil // a bound or a range is no gauge value
			}
			return r.IWSegments
		}))
	family("slowstart_watch_handshake_rtt_seconds", "gauge", "TCP handshake round-trip time of the last successful probe.",
		seconds(func(r *Row) *float64 { return r.HandshakeRTTMs }))
	family("slowstart_watch_tls_seconds", "gauge", "TLS handshake duration of the last successful probe.",
		seconds(func(r *Row) *float64 { return r.TLSMs }))
	family("slowstart_watch_first_byte_seconds", "gauge", "Time to the first response byte of the last successful probe, from the request's start.",
		seconds(func(r *Row) *float64 { return r.FirstByteMs }))
	family("slowstart_watch_last_byte_seconds", "gauge", "Time to the last body byte of the last successful probe, from the request's start.",
		seconds(func(r *Row) *float64 { return r.LastByteMs }))
	family("slowstart_watch_round_trips", "gauge", "Round trips (TCP + TLS + HTTP) of the last successful probe.",
		integer(func(r *Row) *int { return r.RoundTrips }))
	family("slowstart_watch_body_bytes", "gauge", "Response body bytes received by the last successful probe.",
		func(u *urlMetrics) (float64, bool) {
			if u.last == nil || u.last.BodyBytes == nil {
				return 0, false
			}
			return float64(*u.last.BodyBytes), true
		})
	_, err := io.WriteString(w, b.String())
	return err
}

// escapeLabel escapes a label value as the text format asks: backslash, quote
// and newline.
func escapeLabel(s string) string {
	return strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`).Replace(s)
}
