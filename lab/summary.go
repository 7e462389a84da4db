package lab

import (
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"

	"github.com/slowstart/slowstart/internal/hoststeal"
	"github.com/slowstart/slowstart/internal/texttable"
	"github.com/slowstart/slowstart/lab/link"
	"github.com/slowstart/slowstart/report"
)

// Schema names the JSON form of a RunOutput (docs/schemas/lab.json).
const Schema = "slowstart.lab/v1"

// RunOutput is what lab run --json prints: the point's summary and every trial.
type RunOutput struct {
	Schema  string       `json:"schema"` // Schema
	Summary PointSummary `json:"summary"`
	Trials  []Row        `json:"trials"`
	// Warnings are the sentences the text output prints after its tables: drops
	// nobody asked for, a host too busy to time the trials.
	Warnings []string `json:"warnings"`
	// HostSteal is the CPU time the hypervisor took while the trials ran.
	HostSteal HostSteal `json:"host_steal"`
	// HTTP3 and Comparison, with lab run --http3: the same page on the same path over
	// HTTP/3, and the two set side by side (Summary is the TCP point's).
	HTTP3      *PointSummary `json:"http3,omitempty"`
	Comparison *Comparison   `json:"comparison,omitempty"`
}

// PointSummary sums up one point's trials.
type PointSummary struct {
	Point  string `json:"point"`
	Spec   Row    `json:"parameters"`
	Queue  string `json:"queue"`
	Trials int    `json:"trials"`
	Failed int    `json:"failed"`
	// Rerun counts the trials run again because the host distorted their path,
	// Distorted those still distorted after it (Row.Excluded), and Excluded
	// those left out of the statistics: the distorted ones, unless every
	// trial was (then the statistics are of all, and say so).
	Rerun     int `json:"rerun"`
	Distorted int `json:"distorted"`
	Excluded  int `json:"excluded"`
	// DistortedBy is what distorted the first of those trials (its reason).
	DistortedBy string `json:"distorted_by,omitempty"`
	FCTPaperMs  Stats  `json:"fct_paper_ms"`
	FCTUserMs   Stats  `json:"fct_user_ms"`
	FirstByte   Stats  `json:"first_byte_ms"`
	Drops       Drops  `json:"drops"`
	// RoundTrips summarizes the trials' round trips, when they were counted.
	RoundTrips *RoundTripStats `json:"round_trips,omitempty"`
	// Errors are the failed trials' errors.
	Errors []string `json:"errors,omitempty"`
}

// Drops counts the emulator's drops over a point's successful trials.
type Drops struct {
	// TrialsWithDataDrops is how many trials lost at least one data packet.
	TrialsWithDataDrops int `json:"trials_with_data_drops"`
	// DataQueue and DataLoss are the data packets (server→client) the full
	// bottleneck queue dropped and the random loss drew, over all trials; AckQueue
	// and AckLoss the same of the ACKs.
	DataQueue int64 `json:"data_packets_dropped_queue"`
	DataLoss  int64 `json:"data_packets_dropped_loss"`
	AckQueue  int64 `json:"ack_packets_dropped_queue"`
	AckLoss   int64 `json:"ack_packets_dropped_loss"`
}

// RoundTripStats summarizes the round trips of a point's trials.
type RoundTripStats struct {
	Handshake Stats `json:"handshake"`
	Data      Stats `json:"data"`
	Total     Stats `json:"total"`
}

// HostSteal is the hypervisor's share of the machine while trials ran.
type HostSteal struct {
	StolenSeconds  float64 `json:"stolen_seconds"`
	ElapsedSeconds float64 `json:"elapsed_seconds"`
	Share          float64 `json:"share"` // of all CPUs' time
	// TooBusy: the share is above hoststeal.NoisyShare, where timings of a few
	// milliseconds stop being trustworthy.
	TooBusy bool `json:"too_busy"`
}

// NewHostSteal records a steal reading.
func NewHostSteal(r hoststeal.Reading) HostSteal {
	return HostSteal{StolenSeconds: r.Stolen.Seconds(), ElapsedSeconds: r.Elapsed.Seconds(), Share: r.Share, TooBusy: r.Noisy()}
}

// SummarizePoints sums up the rows of each point of specs.
func SummarizePoints(specs []Spec, rows []Row) []PointSummary {
	var out []PointSummary
	for _, s := range specs {
		ps := PointSummary{Point: s.Label(), Spec: NewRow(s, TrialResult{}), Queue: QueueDescription(s)}
		var paper, user, fb []float64
		var handshake, data, total []float64
		var clean, distorted []Row
		for _, r := range rows {
			if r.Point != ps.Point {
				continue
			}
			ps.Trials++
			if r.Error != "" {
				ps.Failed++
				ps.Errors = append(ps.Errors, r.Error)
				continue
			}
			if r.Reruns > 0 {
				ps.Rerun++
			}
			if r.DistortedBy != "" && ps.DistortedBy == "" {
				ps.DistortedBy = r.DistortedBy
			}
			if r.Excluded {
				distorted = append(distorted, r)
			} else {
				clean = append(clean, r)
			}
		}
		ps.Distorted, ps.Excluded = len(distorted), len(distorted)
		counted := clean
		if len(clean) == 0 {
			// Every trial was distorted: the statistics are of them all (the
			// warning says what they are), rather than of none.
			counted, ps.Excluded = distorted, 0
		}
		for _, r := range counted {
			paper, user, fb = append(paper, r.FCTPaperMs), append(user, r.FCTUserMs), append(fb, r.FirstByteMs)
			if rt := r.RoundTrips; rt != nil {
				handshake, data, total = append(handshake, float64(rt.Handshake)), append(data, float64(rt.Data)), append(total, float64(rt.Total))
			}
			if r.DataPacketsLost > 0 {
				ps.Drops.TrialsWithDataDrops++
			}
			ps.Drops.DataQueue += r.DataPacketsDroppedQueue
			ps.Drops.DataLoss += r.DataPacketsDroppedLoss
			ps.Drops.AckQueue += r.AckPacketsDroppedQueue
			ps.Drops.AckLoss += r.AckPacketsDroppedLoss
		}
		ps.FCTPaperMs, ps.FCTUserMs, ps.FirstByte = Summarize(paper), Summarize(user), Summarize(fb)
		if len(total) > 0 {
			ps.RoundTrips = &RoundTripStats{Handshake: Summarize(handshake), Data: Summarize(data), Total: Summarize(total)}
		}
		out = append(out, ps)
	}
	return out
}

// perTrial writes a count per successful trial, one decimal.
func perTrial(n int64, trials int) string {
	if trials == 0 {
		return "-"
	}
	return strconv.FormatFloat(float64(n)/float64(trials), 'f', 1, 64)
}

// WriteSummaries writes one line per point: the trials, the flow completion
// times, and the drops per trial (data packets dropped by the full queue and by
// the random loss), then the failures.
func WriteSummaries(w io.Writer, sums []PointSummary) error {
	tb := texttable.New("  ", texttable.L("point"), texttable.R("trials"), texttable.R("FCT paper median ms"), texttable.R("p10"), texttable.R("p90"),
		texttable.R("FCT user median ms"), texttable.R("p10"), texttable.R("p90"), texttable.R("drops/trial queue"), texttable.R("loss"))
	for _, s := range sums {
		ok := s.Trials - s.Failed - s.Excluded
		tb.Row(s.Point, strconv.Itoa(ok), ms(s.FCTPaperMs.Median), ms(s.FCTPaperMs.P10), ms(s.FCTPaperMs.P90),
			ms(s.FCTUserMs.Median), ms(s.FCTUserMs.P10), ms(s.FCTUserMs.P90),
			perTrial(s.Drops.DataQueue, ok), perTrial(s.Drops.DataLoss, ok))
	}
	if err := tb.Write(w); err != nil {
		return err
	}
	for _, s := range sums {
		if s.Failed > 0 {
			fmt.Fprintf(w, "%s: %d of %d trials failed, e.g.: %s\n", s.Point, s.Failed, s.Trials, s.Errors[0])
		}
	}
	return nil
}

// WriteTrials writes one line per trial: its times and its drops; its protocol when
// the rows mix them, and its round trips when they were counted.
func WriteTrials(w io.Writer, rows []Row) error {
	mixed, counted := false, false
	for _, r := range rows {
		mixed = mixed || r.HTTP3 != rows[0].HTTP3
		counted = counted || r.RoundTrips != nil
	}
	cols := []texttable.Column{texttable.R("trial")}
	if mixed {
		cols = append(cols, texttable.L("protocol"))
	}
	cols = append(cols, texttable.R("handshake ms"), texttable.R("FCT paper ms"), texttable.R("FCT user ms"))
	if counted {
		cols = append(cols, texttable.R("round trips"))
	}
	cols = append(cols, texttable.R("data drops queue"), texttable.R("loss"), texttable.R("ACK drops queue"), texttable.R("loss"), texttable.L("path"))
	tb := texttable.New("  ", cols...)
	for _, r := range rows {
		cells := []string{strconv.Itoa(r.Trial)}
		if mixed {
			cells = append(cells, transportOf(r))
		}
		if r.Error != "" {
			tb.Row(append(cells, "failed")...)
			continue
		}
		handshake := "-"
		if r.PathCheck != nil && r.PathCheck.HandshakeRTTMs > 0 {
			handshake = ms(r.PathCheck.HandshakeRTTMs)
		}
		cells = append(cells, handshake, ms(r.FCTPaperMs), ms(r.FCTUserMs))
		if counted {
			rt := "-"
			if r.RoundTrips != nil {
				rt = fmt.Sprintf("%d + %d = %d", r.RoundTrips.Handshake, r.RoundTrips.Data, r.RoundTrips.Total)
			}
			cells = append(cells, rt)
		}
		count := func(n int64) string { return strconv.FormatInt(n, 10) }
		tb.Row(append(cells, count(r.DataPacketsDroppedQueue), count(r.DataPacketsDroppedLoss),
			count(r.AckPacketsDroppedQueue), count(r.AckPacketsDroppedLoss), pathText(r))...)
	}
	return tb.Write(w)
}

// pathText says how a trial's path measured: as set, as set once run again,
// or distorted (excluded from the statistics).
func pathText(r Row) string {
	switch {
	case r.Excluded, r.PathCheck != nil && r.PathCheck.Distorted:
		return "distorted"
	case r.Reruns > 0:
		return fmt.Sprintf("as set on run %d", r.Reruns+1)
	case r.PathCheck != nil:
		return "as set"
	}
	return "-"
}

// PathWarnings says, for each point with trials whose path the host distorted,
// what distorted them and what the lab did: ran them again, and left out of the
// statistics those it could not get a clean run of.
func PathWarnings(sums []PointSummary) []string {
	var out []string
	for _, s := range sums {
		if s.Rerun == 0 && s.Distorted == 0 {
			continue
		}
		counted := s.Trials - s.Failed
		what := fmt.Sprintf("%s: the host, not the path, set the times of %d of %d trials (the first: %s)", s.Point, max(s.Rerun, s.Distorted), counted, s.DistortedBy)
		var parts []string
		if clean := s.Rerun - s.Distorted; clean > 0 {
			parts = append(parts, fmt.Sprintf("%d ran as configured when run again", clean))
		}
		switch {
		case s.Distorted > 0 && s.Excluded == 0:
			parts = append(parts, fmt.Sprintf("every trial stayed distorted after %s, so the statistics are of them all: they measure this host, not the path",
				report.Count(DefaultDistortedReruns, "more run", "more runs")))
		case s.Excluded > 0:
			parts = append(parts, fmt.Sprintf("%d, still distorted after %s, %s left out of the statistics", s.Excluded,
				report.Count(DefaultDistortedReruns, "more run", "more runs"), map[bool]string{true: "is", false: "are"}[s.Excluded == 1]))
		}
		what += ": " + strings.Join(parts, "; ")
		out = append(out, what+". Run again when the host is quieter (a process on the emulator's core stalls it).")
	}
	return out
}

// ms writes a time in milliseconds with one decimal.
func ms(x float64) string { return strconv.FormatFloat(x, 'f', 1, 64) }

// transportOf names a row's transport: "TCP" or "QUIC".
func transportOf(r Row) string {
	if r.HTTP3 {
		return "QUIC"
	}
	return "TCP"
}

// Comparison sets a point over TCP beside the same page on the same path over HTTP/3.
type Comparison struct {
	TCP  ComparisonSide `json:"tcp"`
	QUIC ComparisonSide `json:"quic"`
	// RoundTripsSaved and FCTUserSavedMs are the TCP median less the QUIC median
	// (negative when QUIC took longer).
	RoundTripsSaved float64 `json:"round_trips_saved"`
	FCTUserSavedMs  float64 `json:"fct_user_saved_ms"`
}

// ComparisonSide is one protocol's medians over a point's successful trials.
type ComparisonSide struct {
	Point    string `json:"point"`
	Protocol string `json:"protocol"` // "HTTP/2 over TLS 1.3 over TCP", "HTTP/3 over QUIC"
	Trials   int    `json:"trials"`   // successful ones
	// Medians of the round trips (handshakes, data rounds, all) and of the times.
	HandshakeRoundTrips float64 `json:"handshake_round_trips"`
	DataRoundTrips      float64 `json:"data_round_trips"`
	RoundTrips          float64 `json:"round_trips"`
	FirstByteMs         float64 `json:"first_byte_ms"`
	FCTPaperMs          float64 `json:"fct_paper_ms"`
	FCTUserMs           float64 `json:"fct_user_ms"`
}

func sideOf(s PointSummary) ComparisonSide {
	proto := "HTTP/1.1"
	if s.Spec.HTTP2 {
		proto = "HTTP/2"
	}
	if s.Spec.TLS != "" {
		proto += " over TLS " + s.Spec.TLS
	}
	proto += " over TCP"
	if s.Spec.HTTP3 {
		proto = "HTTP/3 over QUIC"
	}
	side := ComparisonSide{Point: s.Point, Protocol: proto, Trials: s.Trials - s.Failed - s.Excluded,
		FirstByteMs: s.FirstByte.Median, FCTPaperMs: s.FCTPaperMs.Median, FCTUserMs: s.FCTUserMs.Median}
	if rt := s.RoundTrips; rt != nil {
		side.HandshakeRoundTrips, side.DataRoundTrips, side.RoundTrips = rt.Handshake.Median, rt.Data.Median, rt.Total.Median
	}
	return side
}

// Compare sets the TCP point's summary beside the HTTP/3 one's.
func Compare(tcp, quic PointSummary) Comparison {
	c := Comparison{TCP: sideOf(tcp), QUIC: sideOf(quic)}
	c.RoundTripsSaved = c.TCP.RoundTrips - c.QUIC.RoundTrips
	c.FCTUserSavedMs = c.TCP.FCTUserMs - c.QUIC.FCTUserMs
	return c
}

// Comparisons pairs every TCP point of sums with its HTTP/3 twin (the same point
// with HTTP3 set), in the order of the TCP points.
func Comparisons(specs []Spec, sums []PointSummary) []Comparison {
	byLabel := map[string]PointSummary{}
	for _, s := range sums {
		byLabel[s.Point] = s
	}
	var out []Comparison
	for _, s := range specs {
		if s.HTTP3 {
			continue
		}
		twin, err := s.HTTP3Twin()
		if err != nil {
			continue
		}
		tcp, ok1 := byLabel[s.Label()]
		quic, ok2 := byLabel[twin.Label()]
		if ok1 && ok2 {
			out = append(out, Compare(tcp, quic))
		}
	}
	return out
}

// WriteComparisons writes TCP and QUIC side by side, two lines per point: the medians
// of the round trips (handshakes + data rounds) and of the times, and what QUIC saved.
func WriteComparisons(w io.Writer, cs []Comparison) error {
	if len(cs) == 0 {
		return nil
	}
	fmt.Fprintln(w, "TCP and QUIC, the same page on the same path (medians):")
	tb := texttable.New("  ", texttable.L("point"), texttable.L("protocol"), texttable.R("trials"), texttable.R("round trips (handshake + data)"),
		texttable.R("first byte ms"), texttable.R("FCT paper ms"), texttable.R("FCT user ms"))
	rt := func(s ComparisonSide) string {
		return fmt.Sprintf("%s + %s = %s", num(s.HandshakeRoundTrips), num(s.DataRoundTrips), num(s.RoundTrips))
	}
	for _, c := range cs {
		for _, s := range []ComparisonSide{c.TCP, c.QUIC} {
			tb.Row(s.Point, s.Protocol, strconv.Itoa(s.Trials), rt(s), ms(s.FirstByteMs), ms(s.FCTPaperMs), ms(s.FCTUserMs))
		}
	}
	if err := tb.Write(w); err != nil {
		return err
	}
	for _, c := range cs {
		if c.TCP.Trials == 0 || c.QUIC.Trials == 0 {
			continue
		}
		trips := num(math.Abs(c.RoundTripsSaved)) + " round trips"
		if math.Abs(c.RoundTripsSaved) == 1 {
			trips = "1 round trip"
		}
		wait := fmt.Sprintf("%.1f ms", math.Abs(c.FCTUserSavedMs))
		savedTrips, savedWait := c.RoundTripsSaved >= 0, c.FCTUserSavedMs >= 0
		switch {
		case c.RoundTripsSaved == 0:
			trips = "took as many round trips"
			if savedWait {
				wait = "saved " + wait
			} else {
				wait = "cost " + wait
			}
		case savedTrips == savedWait:
			verb := "saved"
			if !savedTrips {
				verb = "cost"
			}
			trips = verb + " " + trips
		case savedTrips:
			trips, wait = "saved "+trips, "but cost "+wait
		default:
			trips, wait = "cost "+trips, "but saved "+wait
		}
		sep := " and "
		if strings.HasPrefix(wait, "but ") {
			sep = " "
		}
		fmt.Fprintf(w, "%s: QUIC %s%s%s of the user's wait\n", c.TCP.Point, trips, sep, wait)
	}
	return nil
}

// num writes a median of counts: whole when it is, one decimal otherwise.
func num(x float64) string {
	return strconv.FormatFloat(x, 'f', -1, 64)
}

// QueueHelp says what the bottleneck queue is by default and why, for --help.
var QueueHelp = fmt.Sprintf("bottleneck buffer (drop-tail), in bytes (64KB) or packets (100p); default one BDP, "+
	"at least %d packets so that a short path still absorbs an IW of 10 (on a slow, short path such a queue "+
	"drops packets of a larger IW: the text output says when)", link.DefaultQueueFloorPackets)

// DropWarnings says, for each point whose trials lost data packets in the
// bottleneck queue, how many and what to change: a user who asked for no loss
// would otherwise read the retransmissions' cost as the initial window's.
func DropWarnings(sums []PointSummary) []string {
	var out []string
	for _, s := range sums {
		ok := s.Trials - s.Failed - s.Excluded
		if s.Drops.DataQueue == 0 || ok == 0 {
			continue
		}
		what := "no random loss was configured"
		if s.Spec.LossPercent > 0 {
			what = fmt.Sprintf("only %g%% random loss was configured", s.Spec.LossPercent)
		}
		out = append(out, fmt.Sprintf("%s: the full bottleneck queue dropped %d data packets in %d of %d trials (%s per trial), though %s; "+
			"the times include their retransmissions. The queue is %s; a deeper one (--queue 100p, or a size such as 64KB) shows the path without these drops.",
			s.Point, s.Drops.DataQueue, s.Drops.TrialsWithDataDrops, ok, perTrial(s.Drops.DataQueue, ok), what, s.Queue))
	}
	return out
}

// StealWarning says, when the host took too much of the machine while trials
// ran, that their timing can't be trusted; "" otherwise.
func StealWarning(h HostSteal) string {
	if !h.TooBusy {
		return ""
	}
	return fmt.Sprintf("the host was too busy for the lab's timing to be trusted: its hypervisor took %.0f%% of this machine's CPU time "+
		"(%.1f s of CPU time in %.1f s, above %.0f%%), which stalls the emulator, the server and the kernel's TCP for milliseconds at a time; "+
		"run again when the host is quieter, or on a machine of its own",
		100*h.Share, h.StolenSeconds, h.ElapsedSeconds, 100*hoststeal.NoisyShare)
}
