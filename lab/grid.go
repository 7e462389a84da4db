package lab

import (
	"errors"
	"fmt"
	"os/exec"
	"strings"

	"github.com/slowstart/slowstart/units"
)

// Grid is the points of a lab run or sweep as its flags give them: RTT, Rate, IW,
// Size and Loss are comma-separated lists (one value each for a run) in the units
// package's notation, the rest one value for every point. Errors name the flag
// (--rtt, ...) the value came from.
type Grid struct {
	RTT, Rate, IW, Size, Loss string
	// Queue is the bottleneck buffer in bytes ("64KB") or packets ("100p"); ""
	// for one BDP.
	Queue              string
	TLS, Chain         string // TLS "none", "1.2" or "1.3"; the chain's size
	Server, Client, CC string
	Think, ThinkAfter  string // the server's think time, after ThinkAfter body bytes
	HTTP2, IPv6        bool
	SlowStartAfterIdle bool
	InitRwnd           int
	Seed               uint64
	Trials             int
	// HTTP3 runs every point over HTTP/3 too, beside TCP. Its TCP side is then a
	// browser's: TLS 1.3 unless TLSGiven, HTTP/2 unless HTTP2Given.
	HTTP3                bool
	TLSGiven, HTTP2Given bool
}

// SplitList splits a comma-separated list, dropping empty items and spaces.
func SplitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// Specs expands the grid into every point, normalized (with HTTP3, each point
// followed by its HTTP/3 twin), after checking that this machine has the
// programs the points need.
func (g Grid) Specs() ([]Spec, error) {
	base, err := g.base()
	if err != nil {
		return nil, err
	}
	specs := []Spec{base}
	expand := func(flag, list string, set func(*Spec, string) error) error {
		var out []Spec
		items := SplitList(list)
		if len(items) == 0 {
			return fmt.Errorf("--%s: give at least one value", flag)
		}
		for _, s := range specs {
			for _, it := range items {
				n := s
				if err := set(&n, it); err != nil {
					return fmt.Errorf("--%s: %w", flag, err)
				}
				out = append(out, n)
			}
		}
		specs = out
		return nil
	}
	steps := []struct {
		flag, list string
		set        func(*Spec, string) error
	}{
		{"rtt", g.RTT, func(s *Spec, v string) (err error) { s.RTTNs, err = units.ParseDuration(v); return }},
		{"rate", g.Rate, func(s *Spec, v string) (err error) {
			if v == "0" || v == "none" {
				return nil
			}
			s.RateBitsPerSecond, err = units.ParseRate(v)
			return
		}},
		{"iw", g.IW, func(s *Spec, v string) error {
			_, err := fmt.Sscanf(v, "%d", &s.IW)
			if err != nil || s.IW < 1 {
				return fmt.Errorf("%q is not a number of segments", v)
			}
			return nil
		}},
		{"size", g.Size, func(s *Spec, v string) (err error) { s.SizeBytes, err = units.ParseSize(v); return }},
		{"loss", g.Loss, func(s *Spec, v string) (err error) { s.LossRate, err = units.ParsePercent(v); return }},
	}
	for _, st := range steps {
		if err := expand(st.flag, st.list, st.set); err != nil {
			return nil, err
		}
	}
	for i := range specs {
		if err := specs[i].Normalize(); err != nil {
			return nil, err
		}
	}
	if g.HTTP3 {
		// Each point over TCP, then the same over HTTP/3.
		var both []Spec
		for _, s := range specs {
			twin, err := s.HTTP3Twin()
			if err != nil {
				return nil, fmt.Errorf("--http3: %w", err)
			}
			both = append(both, s, twin)
		}
		specs = both
	}
	for _, s := range specs {
		if err := CheckTools(s); err != nil {
			return nil, err
		}
	}
	if g.Trials < 1 {
		return nil, errors.New("--runs must be 1 or more")
	}
	return specs, nil
}

// base is the point the lists vary: everything but RTT, rate, IW, size and loss.
func (g Grid) base() (Spec, error) {
	base := Spec{Server: g.Server, Client: g.Client, CC: g.CC, HTTP2: g.HTTP2, IPv6: g.IPv6, InitRwnd: g.InitRwnd,
		SlowStartAfterIdle: g.SlowStartAfterIdle, Seed: g.Seed}
	tlsVersion := g.TLS
	if g.HTTP3 {
		// The TCP side of the comparison as a browser's: HTTP/2 over TLS 1.3, unless asked otherwise.
		if !g.TLSGiven {
			tlsVersion = "1.3"
		}
		if !g.HTTP2Given {
			base.HTTP2 = true
		}
		if tlsVersion == "none" || tlsVersion == "" {
			return base, errors.New("--http3 compares HTTP/3 with HTTPS over TCP: give --tls 1.2 or 1.3 (the default with --http3 is 1.3)")
		}
	}
	if tlsVersion != "none" && tlsVersion != "" {
		base.TLS = tlsVersion
		chain, err := units.ParseSize(g.Chain)
		if err != nil {
			return base, fmt.Errorf("--chain: %w", err)
		}
		base.ChainBytes = int(chain)
	}
	if g.Queue != "" {
		if n, ok := strings.CutSuffix(g.Queue, "p"); ok {
			var packets int
			if _, err := fmt.Sscanf(n, "%d", &packets); err != nil || packets <= 0 {
				return base, fmt.Errorf("--queue %q: use bytes (64KB) or packets (100p)", g.Queue)
			}
			base.QueuePackets = packets
		} else {
			b, err := units.ParseSize(g.Queue)
			if err != nil {
				return base, fmt.Errorf("--queue: %w", err)
			}
			base.QueueBytes = b
		}
	}
	think, err := units.ParseDuration(g.Think)
	if err != nil {
		return base, fmt.Errorf("--think: %w", err)
	}
	base.ThinkNs = think
	if base.ThinkAfterBytes, err = units.ParseSize(g.ThinkAfter); err != nil {
		return base, fmt.Errorf("--think-after: %w", err)
	}
	return base, nil
}

// CheckTools says, before any work, when a point needs a program this machine
// lacks (nginx, caddy, curl).
func CheckTools(s Spec) error {
	for _, need := range []struct {
		used               bool
		program, flag, pkg string
	}{
		{s.Server == ServerNginx, "nginx", "--server-kind nginx", "nginx-light"},
		{s.Server == ServerCaddy, "caddy", "--server-kind caddy", "caddy"},
		{s.Client == ClientCurl, "curl", "--client-kind curl", "curl"},
	} {
		if _, err := exec.LookPath(need.program); need.used && err != nil {
			return fmt.Errorf("%s: %s is not installed (apt-get install %s), or use the built-in one", need.flag, need.program, need.pkg)
		}
	}
	return nil
}

// Jobs are the grid's trials of specs, Trials of each. With HTTP3 the TCP and
// HTTP/3 trials alternate, so that what the host does to the timing falls on both
// alike, and their round trips are counted.
func (g Grid) Jobs(specs []Spec) []Job {
	var jobs []Job
	if g.HTTP3 {
		for t := 1; t <= g.Trials; t++ {
			for _, s := range specs {
				jobs = append(jobs, Job{Spec: s, Trial: t, RoundTrips: true})
			}
		}
		return jobs
	}
	for _, s := range specs {
		for t := 1; t <= g.Trials; t++ {
			jobs = append(jobs, Job{Spec: s, Trial: t})
		}
	}
	return jobs
}

// DescribeSpecs says in words what the points of a run emulate: the TCP point, and
// its HTTP/3 twin.
func DescribeSpecs(specs []Spec) string {
	out := Describe(specs[0])
	if len(specs) == 2 && specs[1].HTTP3 {
		_, h3, _ := strings.Cut(Describe(specs[1]), "\n")
		out += "\nand over HTTP/3: " + h3
	}
	return out
}
