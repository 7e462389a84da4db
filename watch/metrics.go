package watch

import (
	"io"
	"net/http"
	"runtime"
	"sort"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/common/expfmt"

	"github.com/slowstart/slowstart/internal/redact"
	"github.com/slowstart/slowstart/report"
)

// Metrics holds what the Prometheus endpoint serves, through the official Go
// client (github.com/prometheus/client_golang): per watch, counters of probes
// and failed probes, histograms of every successful probe's timings and round
// trips (so that the probes made between two scrapes are all counted), gauges
// of the last successful probe's initial window and body; and for the process,
// slowstart_watch_up, slowstart_build_info and the client's Go and process
// collectors. A watch's series are labelled {label="NAME"} when it has a label,
// {url="URL"} (redacted) otherwise.
type Metrics struct {
	base *prometheus.Registry // the process: up, build info, Go and process collectors
	mu   sync.Mutex
	// watches are the watches' own registries, by their series's label: a
	// watch named by a label and one named by its URL have label names of
	// their own, which one registry would refuse in one family.
	watches map[string]*watchMetrics
}

// watchMetrics are one watch's series, registered in a registry of its own
// whose constant label names the watch. A series with no label values
// (vectors of no labels) appears with its first value: a gauge of a watch that
// never succeeded is absent rather than 0.
type watchMetrics struct {
	registry                 *prometheus.Registry
	probes, errors           prometheus.Counter
	lastProbe, lastSuccess   *prometheus.GaugeVec
	initialWindow, bodyBytes *prometheus.GaugeVec
	histograms               []metricHistogram
}

// metricHistogram charts a metric of report.Metrics: every successful probe's
// value, times in seconds.
type metricHistogram struct {
	metric report.Metric
	vec    *prometheus.HistogramVec
}

// histograms are the metrics charted, with their series's name, help and buckets.
var histograms = []struct {
	metric, name, help string
	buckets            []float64
}{
	{"handshake_rtt", "slowstart_watch_handshake_rtt_seconds", "TCP handshake round-trip time of each successful probe.", rttBuckets},
	{"tls", "slowstart_watch_tls_seconds", "TLS handshake duration of each successful probe.", rttBuckets},
	{"first_byte", "slowstart_watch_first_byte_seconds", "Time to the first response byte of each successful probe, from the request's start.", byteTimeBuckets},
	{"last_byte", "slowstart_watch_last_byte_seconds", "Time to the last body byte of each successful probe, from the request's start.", byteTimeBuckets},
	{"rounds", "slowstart_watch_round_trips", "Round trips (TCP + TLS + HTTP) of each successful probe.", roundTripsBuckets},
}

// Buckets of the histograms: round trips of a path (1 ms to 8 s), times to a
// response's bytes (5 ms to 41 s), and round trips counted (1 to 20).
var (
	rttBuckets        = prometheus.ExponentialBuckets(0.001, 2, 14)
	byteTimeBuckets   = prometheus.ExponentialBuckets(0.005, 2, 14)
	roundTripsBuckets = prometheus.LinearBuckets(1, 1, 20)
)

// NewMetrics makes an empty Metrics for a process of this version and commit.
func NewMetrics(version, commit string) *Metrics {
	base := prometheus.NewRegistry()
	base.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "slowstart_watch_up",
			Help: "1 while the watch runs and serves these metrics (Prometheus's own up says whether the scrape answered)."},
			func() float64 { return 1 }),
	)
	info := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "slowstart_build_info",
		Help: "The slowstart build: its version, commit and Go version as labels; the value is 1."},
		[]string{"version", "commit", "goversion"})
	info.WithLabelValues(version, commit, runtime.Version()).Set(1)
	base.MustRegister(info)
	return &Metrics{base: base, watches: map[string]*watchMetrics{}}
}

func newWatchMetrics(labels prometheus.Labels) *watchMetrics {
	w := &watchMetrics{registry: prometheus.NewRegistry()}
	counter := func(name, help string) prometheus.Counter {
		return prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help, ConstLabels: labels})
	}
	gauge := func(name, help string) *prometheus.GaugeVec {
		return prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: name, Help: help, ConstLabels: labels}, nil)
	}
	w.probes = counter("slowstart_watch_probes_total", "Probes made, successful or not.")
	w.errors = counter("slowstart_watch_errors_total", "Probes that failed.")
	w.lastProbe = gauge("slowstart_watch_last_probe_timestamp_seconds", "Unix time of the last probe.")
	w.lastSuccess = gauge("slowstart_watch_last_success_timestamp_seconds", "Unix time of the last successful probe.")
	w.initialWindow = gauge("slowstart_watch_initial_window_segments", "The server's initial window seen by the last successful probe (segments), when its verdict was exact.")
	w.bodyBytes = gauge("slowstart_watch_body_bytes", "Response body bytes received by the last successful probe.")
	w.registry.MustRegister(w.probes, w.errors, w.lastProbe, w.lastSuccess, w.initialWindow, w.bodyBytes)
	for _, h := range histograms {
		m, ok := report.MetricNamed(h.metric)
		if !ok {
			panic("watch: no metric " + h.metric)
		}
		vec := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: h.name, Help: h.help, ConstLabels: labels, Buckets: h.buckets}, nil)
		w.registry.MustRegister(vec)
		w.histograms = append(w.histograms, metricHistogram{metric: m, vec: vec})
	}
	return w
}

// Observe counts a probe.
func (m *Metrics) Observe(r Row) {
	labels := prometheus.Labels{"url": redact.URL(r.URL)}
	key := "url=" + labels["url"]
	if r.Label != "" {
		labels = prometheus.Labels{"label": r.Label}
		key = "label=" + r.Label
	}
	m.mu.Lock()
	w := m.watches[key]
	if w == nil {
		w = newWatchMetrics(labels)
		m.watches[key] = w
	}
	m.mu.Unlock()

	w.probes.Inc()
	w.lastProbe.WithLabelValues().Set(float64(r.Time.UnixNano()) / 1e9)
	if r.Error != "" {
		w.errors.Inc()
		return
	}
	w.lastSuccess.WithLabelValues().Set(float64(r.Time.UnixNano()) / 1e9)
	if iw, exact := r.IW.Exact(); exact {
		w.initialWindow.WithLabelValues().Set(float64(iw))
	} else {
		w.initialWindow.Reset() // a bound or a range is no gauge value
	}
	if r.BodyBytes != nil {
		w.bodyBytes.WithLabelValues().Set(float64(*r.BodyBytes))
	}
	for _, h := range w.histograms {
		if v, ok := h.metric.Value(r.SummaryRow); ok {
			if h.metric.Unit == "ms" {
				v /= 1000
			}
			h.vec.WithLabelValues().Observe(v)
		}
	}
}

// gatherers are the registries to serve: the process's, then every watch's
// in the order of their labels.
func (m *Metrics) gatherers() prometheus.Gatherers {
	m.mu.Lock()
	defer m.mu.Unlock()
	keys := make([]string, 0, len(m.watches))
	for k := range m.watches {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	g := prometheus.Gatherers{m.base}
	for _, k := range keys {
		g = append(g, m.watches[k].registry)
	}
	return g
}

// ServeHTTP serves the metrics as promhttp does (the text format, or another a
// scraper asks for).
func (m *Metrics) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	promhttp.HandlerFor(m.gatherers(), promhttp.HandlerOpts{}).ServeHTTP(w, r)
}

// Write writes the metrics in the Prometheus text exposition format.
func (m *Metrics) Write(w io.Writer) error {
	families, err := m.gatherers().Gather()
	if err != nil {
		return err
	}
	enc := expfmt.NewEncoder(w, expfmt.NewFormat(expfmt.TypeTextPlain))
	for _, mf := range families {
		if err := enc.Encode(mf); err != nil {
			return err
		}
	}
	return nil
}
