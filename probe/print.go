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
	for _, w := range res.Report.Warnings {
		if err != nil && w == err.Error() {
			continue // the last line says it
		}
		fmt.Fprintf(errOut, "slowstart: warning: %s\n", textsafe.Escape(w))
	}
	var werr error
	if asJSON {
		werr = report.WriteJSON(out, res.Report)
	} else {
		werr = WriteText(out, res)
	}
	if err == nil {
		err = werr
	}
	if writeHTML != nil && err == nil {
		err = writeHTML(res.Report)
	}
	return err
}
