package probe

import (
	"context"
	"fmt"
	"io"

	"github.com/slowstart/slowstart/internal/fault"
	"github.com/slowstart/slowstart/internal/textsafe"
	"github.com/slowstart/slowstart/report"
)

// Print runs the probe and prints its Report to out, as text (WriteText) or
// JSON, its warnings to errOut, and its page through writeHTML when set. A
// probe that failed after a connection prints what it has, then returns its
// error (KindOf tells its kind); a signal's is marked fault.Interrupted.
func Print(ctx context.Context, opts Options, asJSON bool, writeHTML func(*report.Report) error, out, errOut io.Writer) error {
	res, err := Run(ctx, opts)
	if ctx.Err() != nil {
		return fault.Interruptedf("interrupted; nothing left behind")
	}
	if res == nil || (err != nil && len(res.Report.Connections) == 0) {
		return err
	}
	return PrintReport(res.Report, err, asJSON, func(w io.Writer) error { return WriteText(w, res) }, writeHTML, out, errOut)
}

// PrintReport prints a probe's Report: its warnings to errOut (but the one
// that is err's message, which the last line says), the Report to out as
// JSON or through writeText, and its page through writeHTML when set. It
// returns err, or else what writing failed.
func PrintReport(rep *report.Report, err error, asJSON bool, writeText func(io.Writer) error, writeHTML func(*report.Report) error, out, errOut io.Writer) error {
	for _, w := range rep.Warnings {
		if err != nil && w == err.Error() {
			continue // the last line says it
		}
		fmt.Fprintf(errOut, "slowstart: warning: %s\n", textsafe.Escape(w))
	}
	var werr error
	if asJSON {
		werr = report.WriteJSON(out, rep)
	} else {
		werr = writeText(out)
	}
	if err == nil {
		err = werr
	}
	if writeHTML != nil && err == nil {
		err = writeHTML(rep)
	}
	return err
}
