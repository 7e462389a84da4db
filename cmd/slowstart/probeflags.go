package main

import (
	"errors"
	"net/http"
	"net/netip"

	"github.com/slowstart/slowstart/internal/fault"
	"github.com/slowstart/slowstart/probe"
)

// probeFlags are the flags of the probe's HTTP client, read into
// probe.Options: probe's and watch's.
type probeFlags struct {
	o          probe.Options
	netns      string
	resolves   []string
	headers    []string
	ipv4, ipv6 bool
}

// options reads the flags for a probe of url.
func (f *probeFlags) options(url string) (probe.Options, error) {
	o := f.o
	o.URL, o.Tool = url, "slowstart "+version
	var err error
	if o.Netns, err = netnsPath(f.netns); err != nil {
		return o, err
	}
	if o.TLSVersion == "none" || o.TLSVersion == "any" {
		o.TLSVersion = ""
	}
	if f.ipv4 && f.ipv6 {
		return o, withCode(exitUsage, errors.New("--ipv4 and --ipv6 exclude each other"))
	}
	if f.ipv4 {
		o.IPVersion = probe.IPv4
	}
	if f.ipv6 {
		o.IPVersion = probe.IPv6
	}
	if o.Resolve, err = parseResolves(f.resolves); err != nil {
		return o, err
	}
	if len(f.headers) > 0 {
		o.Headers = http.Header{}
	}
	for _, h := range f.headers {
		name, value, err := probe.ParseHeader(h)
		if err != nil {
			return o, withCode(exitUsage, err)
		}
		o.Headers.Add(name, value)
	}
	return o, nil
}

// parseResolves reads --resolve HOST:PORT:ADDRESS values.
func parseResolves(values []string) (map[string]netip.Addr, error) {
	out := map[string]netip.Addr{}
	for _, r := range values {
		key, addr, err := probe.ParseResolve(r)
		if err != nil {
			return nil, withCode(exitUsage, err)
		}
		out[key] = addr
	}
	return out, nil
}

// probeError marks a probe's error with its fault kind (probeExitCode), unless
// it is marked already.
func probeError(err error) error {
	if err == nil || fault.Marked(err) {
		return err
	}
	return withCode(probeExitCode(err), err)
}
