package main

import (
	"encoding/json"
	"fmt"
	"io"

	"github.com/slowstart/slowstart/report"
)

// Ways to render the Report as JSON, to compare what each costs.
const (
	renderNone    = "none"    // no rendering: the analysis alone
	renderIndent  = "indent"  // report.WriteJSON, as `analyze --json` does
	renderCompact = "compact" // one json.Encoder pass without indentation
)

// render writes rep to w in the given mode.
func render(w io.Writer, rep *report.Report, mode string) error {
	switch mode {
	case renderNone:
		return nil
	case renderIndent:
		return report.WriteJSON(w, rep)
	case renderCompact:
		return json.NewEncoder(w).Encode(rep)
	}
	return fmt.Errorf("unknown -render %q: use %s, %s or %s", mode, renderNone, renderIndent, renderCompact)
}
