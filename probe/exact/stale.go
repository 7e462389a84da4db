package exact

import (
	"context"
	"fmt"
	"io"
)

// CleanStale removes, before a probe, survey or watch starts, the tables of
// this package that killed processes left in the namespace the run uses
// (CleanNamespace): their rules would stall its connections from the same
// local ports. It says so on w, one line per table. Without the privilege to
// read nftables (a capture-only probe) it does nothing.
func CleanStale(ctx context.Context, netnsPath string, w io.Writer) {
	removed, err := CleanNamespace(ctx, netnsPath)
	if err != nil {
		return
	}
	for _, name := range removed {
		fmt.Fprintf(w, "slowstart: removed the nftables table %s that a killed run left\n", name)
	}
}
