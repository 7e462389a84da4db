//go:build ignore

// gen writes web/src/types.ts: `go generate ./web` runs it (see web/web.go).
package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/slowstart/slowstart/internal/tsgen"
)

func main() {
	dir, err := tsgen.ModuleDir()
	if err == nil {
		var b []byte
		if b, err = tsgen.WebTypes(dir); err == nil {
			err = os.WriteFile(filepath.Join(dir, tsgen.WebTypesFile), b, 0o644)
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
