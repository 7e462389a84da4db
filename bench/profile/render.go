package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"

	"github.com/slowstart/slowstart/report"
)

// Ways to render the Report as JSON, to compare what each costs.
const (
	renderNone          = "none"           // no rendering: the analysis alone
	renderIndent        = "indent"         // report.WriteJSON, as `analyze --json` does
	renderCompact       = "compact"        // one json.Encoder pass without indentation
	renderPerConnection = "per-connection" // the same bytes as indent, one connection at a time
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
	case renderPerConnection:
		return writePerConnection(w, rep)
	}
	return fmt.Errorf("unknown -render %q: use %s, %s, %s or %s", mode, renderNone, renderIndent, renderCompact, renderPerConnection)
}

// writePerConnection writes the same indented JSON as report.WriteJSON but
// encodes one connection at a time into a reused buffer, so the memory it needs is
// that of the largest connection, not that of the whole document.
func writePerConnection(w io.Writer, rep *report.Report) error {
	if len(rep.Connections) == 0 {
		return report.WriteJSON(w, rep) // nothing to stream; keeps null vs [] as it is
	}
	out := bufio.NewWriterSize(w, 1<<16)
	envelope := *rep
	envelope.Connections = nil
	head, err := json.MarshalIndent(envelope, "", "  ")
	if err != nil {
		return fmt.Errorf("encode the report envelope: %w", err)
	}
	// Splice the connections into the envelope's empty "connections": null.
	const empty = `"connections": null`
	before, after, found := bytes.Cut(head, []byte(empty))
	if !found {
		return fmt.Errorf("the report envelope has no %s to splice into", empty)
	}
	out.Write(before)
	out.WriteString(`"connections": [`)
	var compact, indented bytes.Buffer
	encoder := json.NewEncoder(&compact)
	for i := range rep.Connections {
		compact.Reset()
		indented.Reset()
		if err := encoder.Encode(&rep.Connections[i]); err != nil {
			return fmt.Errorf("encode connection %d: %w", i+1, err)
		}
		if err := json.Indent(&indented, bytes.TrimSuffix(compact.Bytes(), []byte("\n")), "    ", "  "); err != nil {
			return fmt.Errorf("indent connection %d: %w", i+1, err)
		}
		if i > 0 {
			out.WriteByte(',')
		}
		out.WriteString("\n    ")
		out.Write(indented.Bytes())
	}
	out.WriteString("\n  ]")
	out.Write(after)
	out.WriteByte('\n')
	return out.Flush()
}
