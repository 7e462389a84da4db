package watch

import (
	"fmt"
	"net/http"

	"github.com/slowstart/slowstart/internal/localhttp"
)

// DefaultMetricsHost is where the metrics are served when the address names only
// a port (":9464"): this machine only.
const DefaultMetricsHost = localhttp.DefaultHost

// MetricsAddress reads a --metrics-listen value: HOST:PORT, or :PORT for
// DefaultMetricsHost. Anything but a loopback address exposes the metrics to the
// network, as the user asked.
func MetricsAddress(listen string) (string, error) { return localhttp.Address(listen) }

// ServeMetrics serves m at http://ADDR/metrics (see MetricsAddress) until stop is
// called. It answers GET and HEAD only; on a loopback address it also refuses
// requests whose Host is not an IP address or localhost, so that a web page
// elsewhere can't read the metrics through a name that resolves to 127.0.0.1
// (package localhttp).
func ServeMetrics(listen string, m *Metrics) (stop func(), bound string, err error) {
	mux := http.NewServeMux()
	mux.Handle("/metrics", m)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/" {
			http.NotFound(w, r)
			return
		}
		fmt.Fprintln(w, "slowstart watch: metrics at /metrics")
	})
	s, err := localhttp.Serve(listen, mux, "slowstart watch")
	if err != nil {
		return nil, "", err
	}
	return func() { _ = s.Stop() }, s.Addr(), nil
}
