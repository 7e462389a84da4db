//go:build !linux

package capture

import (
	"context"
	"fmt"
	"io"
	"net/netip"
)

// Live is a live capture; on this system OpenLive always fails with
// ErrLiveUnsupported.
type Live struct{}

// OpenLive fails: live capture needs Linux (AF_PACKET sockets).
func OpenLive(ctx context.Context, opts LiveOptions) (*Live, error) {
	return nil, fmt.Errorf("capture: capturing on %q: %w", opts.Interface, ErrLiveUnsupported)
}

// Next returns io.EOF.
func (l *Live) Next(p *Packet) error { return io.EOF }

// Stop does nothing.
func (l *Live) Stop() {}

// Close does nothing.
func (l *Live) Close() error { return nil }

// Stats returns zero counts.
func (l *Live) Stats() LiveStats { return LiveStats{LinkType: LinkTypeNameRaw} }

// SetFilter fails with ErrLiveUnsupported.
func (l *Live) SetFilter(f Filter) error {
	return fmt.Errorf("capture: setting the filter %s: %w", f, ErrLiveUnsupported)
}

// Tee does nothing.
func (l *Live) Tee(w *PcapWriter) {}

// RouteInterface fails with ErrLiveUnsupported: it reads Linux routes.
func RouteInterface(dst netip.Addr) (iface string, src netip.Addr, err error) {
	return "", netip.Addr{}, fmt.Errorf("capture: route to %s: %w", dst, ErrLiveUnsupported)
}

// RouteInterfaceIn fails with ErrLiveUnsupported: it reads Linux routes.
func RouteInterfaceIn(netnsPath string, dst netip.Addr) (iface string, src netip.Addr, err error) {
	return "", netip.Addr{}, fmt.Errorf("capture: route to %s: %w", dst, ErrLiveUnsupported)
}
