package live

import (
	"context"
	"fmt"
	"io"

	"github.com/slowstart/slowstart/analysis"
	"github.com/slowstart/slowstart/capture"
	"github.com/slowstart/slowstart/report"
)

// sliceSource replays packets as an analysis.PacketSource.
type sliceSource struct {
	packets []capture.Packet
	next    int
}

func (s *sliceSource) Next(p *capture.Packet) error {
	if s.next == len(s.packets) {
		return io.EOF
	}
	*p = s.packets[s.next]
	s.next++
	return nil
}

// Analyze runs the analysis pipeline over one connection's packets and returns
// its report, numbered c.ID and with StartMs counted from baseNs (the start of
// the capture). ok is false when the analysis kept no connection (opts.Server
// names another server).
func Analyze(ctx context.Context, c *Conn, opts analysis.Options, baseNs int64) (rc report.Connection, ok bool, err error) {
	rep, err := analysis.Run(ctx, &sliceSource{packets: c.Packets}, opts)
	if err != nil {
		return rc, false, fmt.Errorf("live: analyzing connection %d: %w", c.ID, err)
	}
	switch len(rep.Connections) {
	case 0:
		return rc, false, nil
	case 1:
	default:
		// The Tracker splits connections as flow.Tracker does: this is a bug.
		return rc, false, fmt.Errorf("live: connection %d split into %d connections in the analysis", c.ID, len(rep.Connections))
	}
	rc = rep.Connections[0]
	rc.Index = c.ID
	rc.StartMs = float64(c.FirstNs-baseNs) / 1e6
	if c.PayloadCut > 0 {
		rc.Notes = append(rc.Notes, fmt.Sprintf("the live view kept no payload of the last %d packets (memory bound): TLS and HTTP boundaries past it are inferred or unknown", c.PayloadCut))
	}
	if !c.Final {
		rc.Notes = append(rc.Notes, "the connection is still open: it is shown as it was when it went idle")
	}
	return rc, true, nil
}
