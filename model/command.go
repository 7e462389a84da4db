package model

// This file runs the model verb as slowstart model does: its inputs as the
// flags give them, the prediction with its progress, the output.

import (
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/slowstart/slowstart/internal/fault"
	"github.com/slowstart/slowstart/internal/jsonout"
	"github.com/slowstart/slowstart/internal/progress"
	"github.com/slowstart/slowstart/report"
	"github.com/slowstart/slowstart/units"
)

// Inputs are a prediction's inputs as slowstart model's flags give them
// (units' forms: "160KB", "130ms", "15mbit").
type Inputs struct {
	Size, Headers, RTT, Rate, IW, Rwnd, TLS, Chain, CC string
	MSS                                                int
	DelayedACK, LabLatency                             bool
}

// Print predicts the load of Inputs and prints it (text, or JSON) to out;
// bad inputs are usage errors. A simulation long enough to take seconds
// shows its progress on standard error.
func Print(in Inputs, asJSON bool, out io.Writer) error {
	base, iws, body, err := in.params()
	if err != nil {
		return fault.Mark(fault.Usage, err)
	}
	work := int64(len(iws)) * SimulationBytes(base)
	bar := progress.NewWork(fmt.Sprintf("Simulating a %s response at %s, packet by packet", report.Size(base.SizeBytes), iwList(iws)), work)
	res, err := PredictProgress(base, iws, body, bar.Set)
	bar.Finish()
	if err != nil {
		return fault.Mark(fault.Usage, err)
	}
	if asJSON {
		return jsonout.Write(out, res)
	}
	return WriteText(out, res)
}

// params reads the inputs: the model's parameters, the windows to compare and
// the body's bytes.
func (f Inputs) params() (p Params, iws []int, bodyBytes int64, err error) {
	body, err := units.ParseSize(f.Size)
	if err != nil {
		return p, nil, 0, fmt.Errorf("--size: %w", err)
	}
	headers := LabHeaderBytes(body)
	if f.Headers != "" {
		if headers, err = units.ParseSize(f.Headers); err != nil {
			return p, nil, 0, fmt.Errorf("--headers: %w", err)
		}
	}
	p.SizeBytes, bodyBytes = body+headers, body
	if p.RTTNs, err = units.ParseDuration(f.RTT); err != nil {
		return p, nil, 0, fmt.Errorf("--rtt: %w", err)
	}
	if f.Rate != "0" && f.Rate != "none" && f.Rate != "" {
		if p.RateBitsPerSecond, err = units.ParseRate(f.Rate); err != nil {
			return p, nil, 0, fmt.Errorf("--rate: %w", err)
		}
	}
	if f.Rwnd != "" && f.Rwnd != "linux" {
		if p.RwndBytes, err = units.ParseSize(f.Rwnd); err != nil {
			return p, nil, 0, fmt.Errorf("--rwnd: %w", err)
		}
	}
	if p.TLS, p.ChainBytes, err = ParseTLS(f.TLS, f.Chain); err != nil {
		return p, nil, 0, err
	}
	p.MSS, p.DelayedACK, p.CC = f.MSS, f.DelayedACK, f.CC
	if f.LabLatency {
		p.HostDelayNs, p.ServerDelayNs = LabHostDelayNs, LabServerDelayNs
	}
	for _, s := range strings.Split(f.IW, ",") {
		if s = strings.TrimSpace(s); s == "" {
			continue
		}
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			return p, nil, 0, fmt.Errorf("--iw: %q is not a number of segments", s)
		}
		iws = append(iws, n)
	}
	if len(iws) == 0 {
		return p, nil, 0, errors.New("--iw: give at least one initial window")
	}
	return p, iws, bodyBytes, nil
}

// ParseTLS reads --tls and --chain as the model and the lab take them: the
// TLS version ("" for none, cleartext) and, with a version, the certificate
// chain's bytes on the wire.
func ParseTLS(version, chain string) (tls string, chainBytes int, err error) {
	switch version {
	case "none", "":
		return "", 0, nil
	case "1.2", "1.3":
		n, err := units.ParseSize(chain)
		if err != nil {
			return "", 0, fmt.Errorf("--chain: %w", err)
		}
		return version, int(n), nil
	}
	return "", 0, fmt.Errorf("--tls %q: use none, 1.2 or 1.3", version)
}

// iwList says "IW 10" or "IW 3, 10 and 32".
func iwList(iws []int) string {
	s := "IW "
	for i, iw := range iws {
		switch {
		case i == 0:
		case i == len(iws)-1:
			s += " and "
		default:
			s += ", "
		}
		s += strconv.Itoa(iw)
	}
	return s
}
