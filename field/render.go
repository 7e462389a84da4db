package field

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/slowstart/slowstart/units"
)

// WriteText writes a summary for people: the pool of all networks in words,
// a table of the busiest networks, the marks, the counts and what was not
// seen.
func WriteText(w io.Writer, s *Summary) error {
	var b strings.Builder
	source := "the kernel"
	if s.Source == SourcePackets {
		source = "packets"
	}
	span := s.To.Sub(s.From).Round(time.Second)
	fmt.Fprintf(&b, "%d first responses on port %s, read from %s, %s to %s (%s)\n", s.All.Connections, joinInts(s.Ports), source,
		s.From.Local().Format("2006-01-02 15:04:05"), s.To.Local().Format("15:04:05"), span)
	if s.All.Connections > 0 {
		a := s.All
		fmt.Fprintf(&b, "all networks: handshake RTT %s; round trips per first response %s; round 1 %s; window-limited %s\n",
			distText(a.HandshakeRTTMs, "ms"), roundsText(a.RoundTrips), bytesDistText(a.Round1Bytes), shareText(a.WindowLimited))
		for _, sv := range a.Savings {
			fmt.Fprintf(&b, "  %s\n", savingSentence(sv))
		}
		tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
		fmt.Fprint(tw, "\nnetwork\tconns\trtt p50\tround trips\tround 1 p50\twindow-limited")
		for _, iw := range s.IWs {
			fmt.Fprintf(tw, "\tIW %d saves (95%% CI)", iw)
		}
		fmt.Fprintln(tw)
		for _, n := range s.Networks {
			fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s", n.Network, n.Connections, quantileText(n.HandshakeRTTMs.Median, "ms"),
				roundsText(n.RoundTrips), bytesText(n.Round1Bytes.Median), shareText(n.WindowLimited))
			for _, sv := range n.Savings {
				fmt.Fprintf(tw, "\t%s", savingCell(sv))
			}
			fmt.Fprintln(tw)
		}
		tw.Flush()
		if s.NetworksOmitted > 0 {
			fmt.Fprintf(&b, "(%d more networks; --top shows more)\n", s.NetworksOmitted)
		}
	}
	for _, m := range s.Marks {
		fmt.Fprintf(&b, "mark: %s\n", MarkText(m))
	}
	c := s.Counts
	fmt.Fprintf(&b, "connections: %d followed, %d first responses measured, %d without a request, %d without a response\n",
		c.Followed, c.Measured, c.NoRequest, c.NoResponse)
	d := s.Drops
	if d.Any() || d.ConnectionsPooled > 0 {
		fmt.Fprintf(&b, "not seen: %d kernel events lost (of %d read), %d connections not followed, %d packets dropped, %d intervals not stored\n",
			d.EventsLost, d.EventsRead, d.ConnectionsNotFollowed, d.PacketsDropped, d.StoreErrors)
	} else if s.Source == SourceKernel {
		fmt.Fprintf(&b, "not seen: nothing (%d kernel events read, none lost)\n", d.EventsRead)
	}
	for _, n := range s.Notes {
		fmt.Fprintf(&b, "note: %s\n", n)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func joinInts(xs []int) string {
	var s []string
	for _, x := range xs {
		s = append(s, fmt.Sprint(x))
	}
	return strings.Join(s, ",")
}

func quantileText(v *float64, unit string) string {
	if v == nil {
		return "-"
	}
	return fmt.Sprintf("%.3g %s", *v, unit)
}

func distText(d Distribution, unit string) string {
	if d.Median == nil {
		return "-"
	}
	return fmt.Sprintf("p50 %.3g %s (p10 %.3g, p90 %.3g)", *d.Median, unit, *d.P10, *d.P90)
}

func roundsText(d Distribution) string {
	if d.Median == nil || d.Mean == nil {
		return "-"
	}
	return fmt.Sprintf("p50 %.3g, mean %.2f", *d.Median, *d.Mean)
}

func bytesText(v *float64) string {
	if v == nil {
		return "-"
	}
	return units.FormatSize(int64(*v))
}

func bytesDistText(d Distribution) string {
	if d.Median == nil {
		return "-"
	}
	return "p50 " + bytesText(d.Median)
}

func shareText(s Share) string {
	return fmt.Sprintf("%.0f%% (%.0f-%.0f%%)", 100*s.Value, 100*s.CI.Low, 100*s.CI.High)
}

func savingCell(sv SavingSummary) string {
	if sv.N == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f rt (%.2f to %.2f), %.0f ms (%.0f to %.0f)", sv.RoundTrips, sv.RoundTripsCI.Low, sv.RoundTripsCI.High,
		sv.Ms, sv.MsCI.Low, sv.MsCI.High)
}

func savingSentence(sv SavingSummary) string {
	if sv.N == 0 {
		return fmt.Sprintf("IW %d: no response to price (no RTT or MSS known)", sv.IW)
	}
	verb := "would save"
	rt, lo, hi, ms, msLo, msHi := sv.RoundTrips, sv.RoundTripsCI.Low, sv.RoundTripsCI.High, sv.Ms, sv.MsCI.Low, sv.MsCI.High
	if rt < 0 {
		verb = "would cost"
		rt, lo, hi, ms, msLo, msHi = -rt, -hi, -lo, -ms, -msHi, -msLo
	}
	return fmt.Sprintf("IW %d %s %.2f round trips (95%% CI %.2f to %.2f), %.1f ms (%.1f to %.1f) per first response; %.0f%% of them would save one or more",
		sv.IW, verb, rt, lo, hi, ms, msLo, msHi, 100*sv.Helped)
}
