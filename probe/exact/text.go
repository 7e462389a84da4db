package exact

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/slowstart/slowstart/internal/textsafe"
)

// OptionsError is returned by Measure for options it cannot measure with (a
// malformed URL, an MSS out of bounds, ...): the caller's mistake, not the
// network's.
type OptionsError struct{ Err error }

func (e *OptionsError) Error() string { return e.Err.Error() }

// Check refuses, with an *OptionsError, the options Measure would refuse
// before measuring (an MSS out of range, a malformed URL, ...), so that a
// caller refuses them before it says it measures.
func (o Options) Check() error {
	if _, _, err := o.normalized(); err != nil {
		return &OptionsError{Err: err}
	}
	return nil
}

// Answered reports whether the measurement reported a window: exactly, or as
// a bound. VerdictNone (no run gave a reading) and VerdictInconsistent (the
// runs disagree) report none.
func (r *Result) Answered() bool {
	return r.Verdict != VerdictNone && r.Verdict != VerdictInconsistent
}
func (e *OptionsError) Unwrap() error { return e.Err }

// WriteText renders r for people: one line per run, then the verdict.
func WriteText(w io.Writer, r *Result) error {
	what := "HTTP response"
	if r.Phase == PhaseTLS {
		what = "TLS handshake flight"
	} else if r.AfterHandshake {
		what = "HTTP response after the TLS handshake"
	}
	fmt.Fprintf(w, "Exact initial window of %s (%s)\n", textsafe.Escape(r.URL), r.Remote)
	fmt.Fprintf(w, "  counted: the %s, with an announced MSS of %d bytes and no ACKs\n\n", what, r.AnnouncedMSS)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "run\toutcome\tsegments\tbytes\tsegment size\thandshake RTT\t")
	for _, run := range r.Runs {
		fmt.Fprintf(tw, "%d\t%s\t%d\t%d\t%d B\t%.1f ms\t\n", run.Index, run.Outcome, run.Segments, run.Bytes, run.SegmentBytes, run.HandshakeRTTMs)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, run := range r.Runs {
		if run.Outcome != OutcomeSuccess && run.Reason != "" {
			fmt.Fprintf(w, "  run %d: %s\n", run.Index, run.Reason)
		}
	}
	fmt.Fprintln(w)
	reason := r.Reason
	if reason != "" {
		reason = strings.ToUpper(reason[:1]) + reason[1:]
	}
	switch r.Verdict {
	case VerdictExact:
		fmt.Fprintf(w, "Initial window: %d segments (exact). %s.\n", r.IWSegments, reason)
		fmt.Fprintf(w, "At a full-sized 1448-byte segment that is %.1f KB in the first round trip.\n", float64(r.IWSegments*1448)/1000)
	case VerdictLowerBound, VerdictRwndLimited:
		fmt.Fprintf(w, "Initial window: at least %d segments (%s). %s.\n", r.IWSegments, r.Verdict, reason)
	default:
		fmt.Fprintf(w, "Initial window: unknown (%s). %s.\n", r.Verdict, reason)
	}
	_, err := fmt.Fprintln(w)
	return err
}
