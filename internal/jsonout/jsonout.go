// Package jsonout writes the JSON every verb's --json prints: one value,
// indented by two spaces, ending in a newline. It is not for the Report's
// streamed JSON (package report writes that as connections finish).
package jsonout

import (
	"encoding/json"
	"io"
)

// Write writes v as indented JSON.
func Write(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
