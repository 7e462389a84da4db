package lab

import (
	"fmt"
	"io"
	"strconv"
	"text/tabwriter"

	"github.com/slowstart/slowstart/internal/hoststeal"
	"github.com/slowstart/slowstart/lab/link"
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
}

// PointSummary sums up one point's trials.
type PointSummary struct {
	Point      string `json:"point"`
	Spec       Row    `json:"parameters"`
	Queue      string `json:"queue"`
	Trials     int    `json:"trials"`
	Failed     int    `json:"failed"`
	FCTPaperMs Stats  `json:"fct_paper_ms"`
	FCTUserMs  Stats  `json:"fct_user_ms"`
	FirstByte  Stats  `json:"first_byte_ms"`
	Drops      Drops  `json:"drops"`
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
			paper, user, fb = append(paper, r.FCTPaperMs), append(user, r.FCTUserMs), append(fb, r.FirstByteMs)
			if r.DataPacketsLost > 0 {
				ps.Drops.TrialsWithDataDrops++
			}
			ps.Drops.DataQueue += r.DataPacketsDroppedQueue
			ps.Drops.DataLoss += r.DataPacketsDroppedLoss
			ps.Drops.AckQueue += r.AckPacketsDroppedQueue
			ps.Drops.AckLoss += r.AckPacketsDroppedLoss
		}
		ps.FCTPaperMs, ps.FCTUserMs, ps.FirstByte = Summarize(paper), Summarize(user), Summarize(fb)
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
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "point\ttrials\tFCT paper median ms\tp10\tp90\tFCT user median ms\tp10\tp90\tdrops/trial queue\tloss\t\n")
	for _, s := range sums {
		ok := s.Trials - s.Failed
		fmt.Fprintf(tw, "%s\t%d\t%.1f\t%.1f\t%.1f\t%.1f\t%.1f\t%.1f\t%s\t%s\t\n", s.Point, ok,
			s.FCTPaperMs.Median, s.FCTPaperMs.P10, s.FCTPaperMs.P90, s.FCTUserMs.Median, s.FCTUserMs.P10, s.FCTUserMs.P90,
			perTrial(s.Drops.DataQueue, ok), perTrial(s.Drops.DataLoss, ok))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, s := range sums {
		if s.Failed > 0 {
			fmt.Fprintf(w, "%s: %d of %d trials failed, e.g.: %s\n", s.Point, s.Failed, s.Trials, s.Errors[0])
		}
	}
	return nil
}

// WriteTrials writes one line per trial: its times and its drops.
func WriteTrials(w io.Writer, rows []Row) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "trial\tFCT paper ms\tFCT user ms\tdata drops queue\tloss\tACK drops queue\tloss\t\n")
	for _, r := range rows {
		if r.Error != "" {
			fmt.Fprintf(tw, "%d\tfailed\t\t\t\t\t\t\n", r.Trial)
			continue
		}
		fmt.Fprintf(tw, "%d\t%.1f\t%.1f\t%d\t%d\t%d\t%d\t\n", r.Trial, r.FCTPaperMs, r.FCTUserMs,
			r.DataPacketsDroppedQueue, r.DataPacketsDroppedLoss, r.AckPacketsDroppedQueue, r.AckPacketsDroppedLoss)
	}
	return tw.Flush()
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
		ok := s.Trials - s.Failed
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
