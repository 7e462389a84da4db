package watch

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strings"
	"time"
)

// DefaultMetricsHost is where the metrics are served when the address names only
// a port (":9464"): this machine only.
const DefaultMetricsHost = "127.0.0.1"

// MetricsAddress reads a --metrics-listen value: HOST:PORT, or :PORT for
// DefaultMetricsHost. Anything but a loopback address exposes the metrics to the
// network, as the user asked.
func MetricsAddress(listen string) (string, error) {
	host, port, err := net.SplitHostPort(listen)
	if err != nil {
		return "", fmt.Errorf("%q: give HOST:PORT or :PORT, e.g. 127.0.0.1:9464", listen)
	}
	if host == "" {
		host = DefaultMetricsHost
	}
	return net.JoinHostPort(host, port), nil
}

// ServeMetrics serves m at http://ADDR/metrics (see MetricsAddress) until stop is
// called. It answers GET and HEAD only; on a loopback address it also refuses
// requests whose Host is not an IP address or localhost, so that a web page
// elsewhere can't read the metrics through a name that resolves to 127.0.0.1.
func ServeMetrics(listen string, m *Metrics) (stop func(), bound string, err error) {
	addr, err := MetricsAddress(listen)
	if err != nil {
		return nil, "", err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, "", err
	}
	loopback := false
	if ta, ok := ln.Addr().(*net.TCPAddr); ok {
		loopback = ta.IP.IsLoopback()
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", m)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/" {
			http.NotFound(w, r)
			return
		}
		fmt.Fprintln(w, "slowstart watch: metrics at /metrics")
	})
	guard := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "slowstart watch: only GET", http.StatusMethodNotAllowed)
			return
		}
		if loopback && !localHost(r.Host) {
			http.Error(w, "slowstart watch: unexpected Host header; use the IP address or localhost", http.StatusMisdirectedRequest)
			return
		}
		mux.ServeHTTP(w, r)
	})
	srv := &http.Server{Handler: guard, ReadHeaderTimeout: 10 * time.Second}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(ln)
	}()
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
		<-done
	}, ln.Addr().String(), nil
}

// localHost accepts IP addresses and localhost, with or without a port.
func localHost(hostport string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if strings.EqualFold(host, "localhost") {
		return true
	}
	return net.ParseIP(host) != nil
}
