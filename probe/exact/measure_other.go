//go:build !linux

package exact

import (
	"context"
	"errors"
	"io"
)

// TablePrefix begins the name of every nftables table the package makes.
const TablePrefix = "slowstart_exact_"

var errNeedsLinux = errors.New("the exact measurement needs Linux (nf_tables and AF_PACKET): use the passive probe here")

// Measure needs Linux.
func Measure(ctx context.Context, opts Options) (*Result, error) { return nil, errNeedsLinux }

// Clean needs Linux.
func Clean(ctx context.Context) error { return errNeedsLinux }

// CleanNamespace needs Linux.
func CleanNamespace(ctx context.Context, netnsPath string) ([]string, error) {
	return nil, errNeedsLinux
}

// Hold fails: the exact measurement needs Linux.
func Hold(ctx context.Context, netnsPath string) (release func() error, removed []string, err error) {
	return nil, nil, errNeedsLinux
}

// CleanStale needs Linux: it does nothing.
func CleanStale(ctx context.Context, netnsPath string, w io.Writer) {}

// CleanEveryNamespace needs Linux.
func CleanEveryNamespace(ctx context.Context, w io.Writer) (int, error) { return 0, errNeedsLinux }

// Tables needs Linux.
func Tables(netnsPath string) ([]string, error) { return nil, errNeedsLinux }
