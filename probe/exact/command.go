package exact

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"syscall"

	"github.com/slowstart/slowstart/internal/fault"
	"github.com/slowstart/slowstart/internal/jsonout"
	"github.com/slowstart/slowstart/internal/redact"
)

// Print runs probe --exact as slowstart probe does: bad values are refused
// before anything is said or done (fault.Usage); the measurement is printed
// (text, or JSON) to out; one that reported no window (no run gave a reading,
// or the runs disagree) prints what each run saw and fails. errOut is told
// what is measured. Its errors are marked with their fault kind.
func Print(ctx context.Context, opts Options, asJSON bool, out, errOut io.Writer) error {
	if opts.TLSVersion == "none" || opts.TLSVersion == "any" {
		opts.TLSVersion = ""
	}
	if err := opts.Check(); err != nil {
		return fault.Usagef("--exact: %w", err)
	}
	if os.Geteuid() != 0 {
		return fault.Permissionf("--exact installs a firewall rule (nftables) and captures packets, which needs CAP_NET_ADMIN and CAP_NET_RAW: run sudo slowstart probe --exact")
	}
	if !asJSON {
		fmt.Fprintf(errOut, "Measuring the initial window of %s over %d fresh connections (no ACKs until the server retransmits)...\n", redact.URL(opts.URL), max(opts.Runs, 1))
	}
	res, err := Measure(ctx, opts)
	if err != nil {
		var oe *OptionsError
		switch {
		case errors.As(err, &oe):
			return fault.Mark(fault.Usage, err)
		case ctx.Err() != nil:
			return fault.Interruptedf("interrupted; nothing left behind (the firewall rules were removed)")
		case errors.Is(err, os.ErrPermission) || errors.Is(err, syscall.EPERM):
			return fault.Mark(fault.Permission, err)
		}
		return fault.Mark(fault.Network, err)
	}
	var werr error
	if asJSON {
		werr = jsonout.Write(out, res)
	} else {
		werr = WriteText(out, res)
	}
	if werr == nil && !res.Answered() {
		return fault.Failedf("the exact measurement reported no initial window (%s): %s", res.Verdict, res.Reason)
	}
	return werr
}
