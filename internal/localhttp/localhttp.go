// Package localhttp serves HTTP to this machine's users the one careful way
// the verbs need (watch's and field's metrics; the view's page checks hosts
// the same way): on a loopback address only requests whose Host is an IP
// address or localhost are answered, so that a web page elsewhere can't read
// the server through a name that resolves to 127.0.0.1 (DNS rebinding); only
// GET and HEAD are. It is not a general web server.
package localhttp

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"time"
)

// DefaultHost is where a server listens when its address names only a port
// (":9464"): this machine only.
const DefaultHost = "127.0.0.1"

// HostAllowed accepts IP addresses and localhost, with or without a port: the
// Host headers a page of this machine sends.
func HostAllowed(hostport string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	return strings.EqualFold(host, "localhost") || net.ParseIP(host) != nil
}

// Address reads a listen address: HOST:PORT, or :PORT for DefaultHost.
// Anything but a loopback address exposes the server to the network, as the
// user asked.
func Address(listen string) (string, error) {
	host, port, err := net.SplitHostPort(listen)
	if err != nil {
		return "", fmt.Errorf("%q: give HOST:PORT or :PORT, e.g. 127.0.0.1:9464", listen)
	}
	if host == "" {
		host = DefaultHost
	}
	return net.JoinHostPort(host, port), nil
}

// Server serves a handler until Stop.
type Server struct {
	srv  *http.Server
	addr string
	done chan error
}

// Serve serves h at listen (Address's forms), answering GET and HEAD only,
// and on a loopback address only the Hosts HostAllowed accepts; name starts
// its refusals ("slowstart watch").
func Serve(listen string, h http.Handler, name string) (*Server, error) {
	addr, err := Address(listen)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	loopback := false
	if ta, ok := ln.Addr().(*net.TCPAddr); ok {
		loopback = ta.IP.IsLoopback()
	}
	guard := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.Method != http.MethodGet && r.Method != http.MethodHead:
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, name+": only GET and HEAD", http.StatusMethodNotAllowed)
		case loopback && !HostAllowed(r.Host):
			http.Error(w, name+": unexpected Host header; use the IP address or localhost", http.StatusMisdirectedRequest)
		default:
			h.ServeHTTP(w, r)
		}
	})
	s := &Server{srv: &http.Server{Handler: guard, ReadHeaderTimeout: 10 * time.Second}, addr: ln.Addr().String(), done: make(chan error, 1)}
	go func() {
		err := s.srv.Serve(ln)
		if errors.Is(err, http.ErrServerClosed) {
			err = nil
		}
		s.done <- err
	}()
	return s, nil
}

// Addr is the address the server listens on (its port chosen when 0).
func (s *Server) Addr() string { return s.addr }

// Stop shuts the server down (within 2 seconds) and returns what ended its
// serving, nil for the shutdown.
func (s *Server) Stop() error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_ = s.srv.Shutdown(ctx)
	return <-s.done
}
