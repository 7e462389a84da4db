package field

import (
	"context"
	"net/http"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/slowstart/slowstart/internal/localhttp"
)

// metrics are field's Prometheus metrics, in a registry of their own
// (docs/field.md lists them). Each network's series are resolved once and kept,
// so that a connection costs a few atomic additions.
type metrics struct {
	registry    *prometheus.Registry
	maxNetworks int
	iws         []int

	connections *prometheus.CounterVec
	rtt         *prometheus.HistogramVec
	roundTrips  *prometheus.HistogramVec
	round1      *prometheus.HistogramVec
	response    *prometheus.HistogramVec
	limits      *prometheus.CounterVec
	cut         *prometheus.CounterVec
	savedRounds *prometheus.CounterVec
	savedTime   *prometheus.CounterVec

	networks map[string]*networkMetrics
}

// networkMetrics are one network's series.
type networkMetrics struct {
	connections                       prometheus.Counter
	rtt, roundTrips, round1, response prometheus.Observer
	limits                            [5]prometheus.Counter
	cut                               []prometheus.Counter // by cutOrder; [0] unused
	savedRounds, savedTime            []prometheus.Counter // by iws
}

// MetricsOtherNetwork labels the networks past Options.MetricsNetworks.
const MetricsOtherNetwork = "other"

func seconds(boundsMs []float64) []float64 {
	out := make([]float64, len(boundsMs))
	for i, b := range boundsMs {
		out[i] = b / 1e3
	}
	return out
}

// newMetrics registers the metrics; status reads the source's counts when
// the metrics are scraped.
func newMetrics(maxNetworks int, iws []int, status func() statusCounts) *metrics {
	m := &metrics{registry: prometheus.NewRegistry(), maxNetworks: maxNetworks, iws: iws, networks: map[string]*networkMetrics{}}
	net := []string{"network"}
	m.connections = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "slowstart_field_connections_total",
		Help: "First responses measured on new connections to the followed ports."}, net)
	m.rtt = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "slowstart_field_handshake_rtt_seconds",
		Help: "Handshake round-trip time of new connections, as the server's kernel measured it.", Buckets: seconds(RTTBoundsMs)}, net)
	m.roundTrips = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "slowstart_field_round_trips",
		Help: "Round trips per first response (responses seen to their end).", Buckets: RoundTripBounds}, net)
	m.round1 = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "slowstart_field_round1_bytes",
		Help: "Bytes the server sent in a first response's round 1.", Buckets: Round1BoundsBytes}, net)
	m.response = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "slowstart_field_response_seconds",
		Help: "From a request's arrival to the ACK of its response's last byte.", Buckets: seconds(ResponseBoundsMs)}, net)
	m.limits = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "slowstart_field_round1_limit_total",
		Help: "First responses by what limited round 1: cwnd, rwnd (window-limited), app, end (fit in round 1), unknown."},
		[]string{"network", "limit"})
	m.cut = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "slowstart_field_cut_short_total",
		Help: "First responses whose end was not seen, by why (server_closed: the kernel reports no ACK after the server closes)."},
		[]string{"network", "reason"})
	m.savedRounds = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "slowstart_field_iw_saved_round_trips_total",
		Help: "Round trips initial window iw would have saved, summed over first responses (by the model; negative values cost)."},
		[]string{"network", "iw"})
	m.savedTime = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "slowstart_field_iw_saved_seconds_total",
		Help: "Time initial window iw would have saved, summed over first responses (round trips saved times the handshake RTT)."},
		[]string{"network", "iw"})
	m.registry.MustRegister(m.connections, m.rtt, m.roundTrips, m.round1, m.response, m.limits, m.cut, m.savedRounds, m.savedTime)
	counter := func(name, help string, get func(statusCounts) uint64) {
		m.registry.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help},
			func() float64 { return float64(get(status())) }))
	}
	counter("slowstart_field_followed_total", "New connections followed.", func(s statusCounts) uint64 { return s.followed })
	counter("slowstart_field_not_followed_total", "New connections not followed: the table of open connections was full.",
		func(s statusCounts) uint64 { return s.notFollowed })
	counter("slowstart_field_no_request_total", "Connections closed or idle before the client sent data.",
		func(s statusCounts) uint64 { return s.noRequest })
	counter("slowstart_field_no_response_total", "Connections whose request got no data back.",
		func(s statusCounts) uint64 { return s.noResponse })
	counter("slowstart_field_events_total", "Kernel events read.", func(s statusCounts) uint64 { return s.eventsRead })
	counter("slowstart_field_events_lost_total", "Kernel events lost: the ring buffer was full.",
		func(s statusCounts) uint64 { return s.eventsLost })
	counter("slowstart_field_packets_dropped_total", "Packets the kernel dropped from the capture (the packet source).",
		func(s statusCounts) uint64 { return s.packetsDropped })
	m.registry.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "slowstart_field_open_connections",
		Help: "Connections followed now (their first response under way)."}, func() float64 { return float64(status().open) }))
	return m
}

// network returns a network's series, made on first use; past maxNetworks
// networks, the others share MetricsOtherNetwork's.
func (m *metrics) network(name string) *networkMetrics {
	if nm, ok := m.networks[name]; ok {
		return nm
	}
	label := name
	if len(m.networks) >= m.maxNetworks {
		// Past the bound every network shares one series, and its name is not
		// kept: the map stays as small as the bound however many networks come.
		label = MetricsOtherNetwork
		if nm, ok := m.networks[label]; ok {
			return nm
		}
	}
	if label == "" {
		label = "(none)"
	}
	nm := &networkMetrics{
		connections: m.connections.WithLabelValues(label),
		rtt:         m.rtt.WithLabelValues(label), roundTrips: m.roundTrips.WithLabelValues(label),
		round1: m.round1.WithLabelValues(label), response: m.response.WithLabelValues(label),
		cut: make([]prometheus.Counter, len(cutOrder)),
	}
	for i, l := range limitOrder {
		nm.limits[i] = m.limits.WithLabelValues(label, l)
	}
	for i := 1; i < len(cutOrder); i++ {
		nm.cut[i] = m.cut.WithLabelValues(label, cutOrder[i])
	}
	for _, iw := range m.iws {
		nm.savedRounds = append(nm.savedRounds, m.savedRounds.WithLabelValues(label, strconv.Itoa(iw)))
		nm.savedTime = append(nm.savedTime, m.savedTime.WithLabelValues(label, strconv.Itoa(iw)))
	}
	m.networks[label] = nm
	return nm
}

// observe counts one connection.
func (m *metrics) observe(network string, s *sample) {
	nm := m.network(network)
	nm.connections.Inc()
	nm.limits[s.limit].Inc()
	if s.cut != 0 {
		nm.cut[s.cut].Inc()
	}
	if s.rttUs > 0 {
		nm.rtt.Observe(float64(s.rttUs) / 1e6)
	}
	if s.roundTrips >= 0 {
		nm.roundTrips.Observe(float64(s.roundTrips))
	}
	if s.round1Bytes >= 0 {
		nm.round1.Observe(float64(s.round1Bytes))
	}
	if s.responseMs >= 0 {
		nm.response.Observe(s.responseMs / 1e3)
	}
	r := s.record()
	for i, iw := range m.iws {
		if sv, ok := r.saving(iw); ok {
			// A counter only grows: a cost (a smaller window) is not added here.
			if sv.RoundTrips > 0 {
				nm.savedRounds[i].Add(float64(sv.RoundTrips))
				nm.savedTime[i].Add(sv.Ms / 1e3)
			}
		}
	}
}

// DefaultMetricsHost is where the metrics are served when the address names
// only a port (":9464"): this machine only.
const DefaultMetricsHost = localhttp.DefaultHost

// serveMetrics serves the registry at http://ADDR/metrics until ctx ends,
// as package localhttp serves: GET and HEAD only, and on a loopback address
// only requests whose Host is an IP address or localhost. done gets what
// ended the serving (nil for ctx).
func serveMetrics(ctx context.Context, listen string, registry *prometheus.Registry) (bound string, done <-chan error, err error) {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(registry, promhttp.HandlerOpts{}))
	s, err := localhttp.Serve(listen, mux, "slowstart field")
	if err != nil {
		return "", nil, err
	}
	errc := make(chan error, 1)
	context.AfterFunc(ctx, func() { errc <- s.Stop() })
	return s.Addr(), errc, nil
}
