package ktcp

import (
	"errors"
	"strings"
)

// ErrUnavailable is what every UnavailableError is (errors.Is): this machine
// cannot follow TCP sockets from the kernel, and a caller should fall back to
// another source (a packet capture).
var ErrUnavailable = errors.New("kernel TCP tracing is unavailable")

// ErrClosed is returned by Read and Sync once the Tracer is closed.
var ErrClosed = errors.New("ktcp: tracer closed")

// UnavailableError says why kernel TCP tracing cannot run here: no BPF system
// call, no permission (not root, no CAP_BPF and CAP_PERFMON, or a locked-down
// kernel), no kernel BTF, a kernel without the tracepoints, or a kernel that
// refused the programs. Reason is one line meant for the user.
type UnavailableError struct {
	Reason string
	Err    error
}

func (e *UnavailableError) Error() string {
	return "kernel TCP tracing is unavailable: " + e.Reason
}

func (e *UnavailableError) Unwrap() error { return e.Err }

// Is makes errors.Is(err, ErrUnavailable) true.
func (e *UnavailableError) Is(target error) bool { return target == ErrUnavailable }

// unavailable builds an UnavailableError, its reason kept to one line.
func unavailable(err error, reason string) *UnavailableError {
	reason = strings.Join(strings.Fields(reason), " ")
	return &UnavailableError{Reason: reason, Err: err}
}
