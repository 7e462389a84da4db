package quicanalysis

import (
	"fmt"
	"strings"

	"github.com/slowstart/slowstart/quic"
	"github.com/slowstart/slowstart/report"
)

// Diagnosis kinds (the same names as the TCP probe's where they mean the same).
const (
	DiagnosisCertificateChain = "certificate_chain"
	DiagnosisInitialWindow    = "initial_window"
)

// diagnose names what cost the connection round trips.
func diagnose(c *report.Connection) []report.Diagnosis {
	var out []report.Diagnosis
	q := c.QUIC
	rtt := 0.0
	if c.HandshakeRTTMs != nil {
		rtt = *c.HandshakeRTTMs
	}
	// The handshake's round trips the amplification limit cost: those it ended (others
	// may have been ended by the window, a loss or a slow server).
	extra := 0
	for _, r := range c.Rounds {
		if r.Phase == report.PhaseTLS && r.Limit == report.LimitAmplification {
			extra++
		}
	}
	if extra = min(extra, c.RoundTrips.TLS-1); extra > 0 {
		what := fmt.Sprintf("the server's handshake (%s)", report.Size(int64(q.ServerHandshakeBytes)))
		if q.CertificateBytes > 0 {
			what = fmt.Sprintf("the chain (%s)", report.Size(int64(q.CertificateBytes)))
		}
		fix := "compress certificates (RFC 8879) or send a larger first datagram"
		if q.CertificateCompressed {
			fix = "the chain is already compressed: shorten it, or send a larger first datagram"
		}
		out = append(out, report.Diagnosis{
			Kind: DiagnosisCertificateChain,
			Text: fmt.Sprintf("%s does not fit in 3× your %s-byte Initial: +%s; %s",
				what, thousands(q.ClientInitialBytes), plural(extra, "round trip", "round trips"), fix),
			CostRoundTrips: extra,
			CostMs:         float64(extra) * rtt,
		})
	}
	if iw := c.InitialWindow; iw != nil && iw.Verdict == report.VerdictExact {
		out = append(out, report.Diagnosis{
			Kind: DiagnosisInitialWindow,
			Text: fmt.Sprintf("the server's initial window is %s (%s bytes in flight)", plural(iw.Segments, "datagram", "datagrams"), thousands(iw.Bytes)),
		})
	}
	return out
}

func plural(n int, one, many string) string {
	if n == 1 {
		return fmt.Sprintf("%d %s", n, one)
	}
	return fmt.Sprintf("%d %s", n, many)
}

// thousands formats n with thousands separators: 1,200.
func thousands(n int) string {
	s := fmt.Sprint(n)
	if n < 0 {
		return "-" + thousands(-n)
	}
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// packetLog lists every packet with its frames in brief.
func packetLog(c *conn, dgs []serverDatagram, packetDatagram map[int]int, ms func(int64) float64, indexOf map[int]int) []report.QUICPacket {
	out := make([]report.QUICPacket, 0, len(c.packets))
	for i := range c.packets {
		p := &c.packets[i]
		qp := report.QUICPacket{TimeMs: ms(p.TimeNs), Dir: "s2c", Space: p.Space.String(), Type: p.Type.String(), Number: p.Number, Bytes: p.Bytes, Datagram: p.Datagram, Frames: []string{}}
		if p.FromClient {
			qp.Dir = "c2s"
		} else if d, ok := packetDatagram[i]; ok && dgs[d].inFlight {
			qp.Round = indexOf[dgs[d].round]
		}
		for _, f := range p.Frames {
			qp.Frames = append(qp.Frames, FrameSummary(&f))
		}
		if p.Problem != "" {
			qp.Frames = append(qp.Frames, "("+p.Problem+")")
		}
		out = append(out, qp)
	}
	return out
}

// FrameSummary describes a frame in brief: "CRYPTO 0+1162", "STREAM 0 1200+1100 fin",
// "ACK 0-5,7", "PADDING 36".
func FrameSummary(f *quic.Frame) string {
	switch f.Type {
	case quic.FrameCrypto:
		return fmt.Sprintf("CRYPTO %d+%d", f.Offset, f.Length)
	case quic.FrameStream:
		s := fmt.Sprintf("STREAM %d %d+%d", f.StreamID, f.Offset, f.Length)
		if f.Fin {
			s += " fin"
		}
		return s
	case quic.FrameAck, quic.FrameAckECN:
		parts := make([]string, 0, len(f.AckRanges))
		for i := len(f.AckRanges) - 1; i >= 0; i-- {
			r := f.AckRanges[i]
			if r.Smallest == r.Largest {
				parts = append(parts, fmt.Sprint(r.Largest))
			} else {
				parts = append(parts, fmt.Sprintf("%d-%d", r.Smallest, r.Largest))
			}
		}
		return "ACK " + strings.Join(parts, ",")
	case quic.FramePadding:
		return fmt.Sprintf("PADDING %d", f.Length)
	case quic.FrameConnectionClose, quic.FrameApplicationClose:
		return fmt.Sprintf("CONNECTION_CLOSE %#x %q", f.ErrorCode, f.Reason)
	case quic.FrameNewConnectionID:
		return fmt.Sprintf("NEW_CONNECTION_ID %d", f.Value)
	case quic.FrameMaxData, quic.FrameMaxStreamsBidi, quic.FrameMaxStreamsUni:
		return fmt.Sprintf("%s %d", f.Type, f.Value)
	case quic.FrameMaxStreamData:
		return fmt.Sprintf("MAX_STREAM_DATA %d %d", f.StreamID, f.Value)
	}
	return f.Type.String()
}
