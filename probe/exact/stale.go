package exact

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
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

// netnsDir is where `ip netns add NAME` puts named network namespaces.
const netnsDir = "/run/netns"

// CleanEveryNamespace removes the tables of this package that dead processes
// left (CleanNamespace) in this network namespace and in every named one,
// says each on w, and returns how many.
func CleanEveryNamespace(ctx context.Context, w io.Writer) (int, error) {
	namespaces := []string{""}
	entries, err := os.ReadDir(netnsDir)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return 0, fmt.Errorf("list %s: %w", netnsDir, err)
	}
	for _, e := range entries {
		namespaces = append(namespaces, filepath.Join(netnsDir, e.Name()))
	}
	count := 0
	var errs []error
	for _, ns := range namespaces {
		removed, err := CleanNamespace(ctx, ns)
		if err != nil {
			if ns != "" {
				continue // not a namespace (a leftover mount point), or one being removed
			}
			errs = append(errs, err)
		}
		where := "this network namespace"
		if ns != "" {
			where = "network namespace " + filepath.Base(ns)
		}
		for _, name := range removed {
			fmt.Fprintf(w, "removed nftables table inet %s in %s\n", name, where)
			count++
		}
	}
	return count, errors.Join(errs...)
}
