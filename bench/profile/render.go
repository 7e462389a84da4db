package main

import (
	"fmt"
	"io"

	"github.com/slowstart/slowstart/internal/textsafe"
	"github.com/slowstart/slowstart/report"
)

// Ways to render the connections, to compare what each costs.
const (
	renderNone   = "none"   // no rendering: the analysis alone
	renderIndent = "indent" // the JSON document of `analyze --json`
	renderJSONL  = "jsonl"  // JSON Lines, as `analyze --jsonl`
	renderText   = "text"   // the text of `analyze`
)

// streamWriter renders connections to w in the given mode.
func streamWriter(w io.Writer, mode string) (report.StreamWriter, error) {
	switch mode {
	case renderNone:
		return discard{}, nil
	case renderIndent:
		return report.NewJSONStream(w), nil
	case renderJSONL:
		return report.NewJSONLStream(w), nil
	case renderText:
		return report.NewTextStream(textsafe.Writer(w)), nil
	}
	return nil, fmt.Errorf("unknown -render %q: use %s, %s, %s or %s", mode, renderNone, renderIndent, renderJSONL, renderText)
}

type discard struct{}

func (discard) Begin(string) error                  { return nil }
func (discard) Connection(*report.Connection) error { return nil }
func (discard) End(report.Source, []string) error   { return nil }
