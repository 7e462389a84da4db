package probe

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"sync"

	"github.com/slowstart/slowstart/capture"
	"github.com/slowstart/slowstart/internal/privatefile"
)

// liveCapture adapts a capture.Live to packetCapture.
type liveCapture struct {
	*capture.Live
}

func (l liveCapture) info() captureInfo {
	st := l.Stats()
	return captureInfo{Interface: st.Interface, LinkType: st.LinkType, Packets: uint64(st.Packets), KernelDrops: uint64(st.KernelDrops)}
}

// opener returns the captureOpener of a real probe: a live capture on the
// interface the route to the server uses (or opts.Interface), filtered in the
// kernel to the server's address and port, teeing into the --pcap file.
func (out *outputs) opener(ctx context.Context, o *Options) captureOpener {
	return func(ctx context.Context, remote netip.AddrPort) (packetCapture, error) {
		iface := o.Interface
		if iface == "" {
			name, _, err := capture.RouteInterfaceIn(o.Netns, remote.Addr())
			if err != nil {
				return nil, &Error{Kind: KindUnreach, Err: fmt.Errorf("finding the interface of the route to %s: %w: check the address, or name one with --interface", remote.Addr(), err)}
			}
			iface = name
		}
		live, err := capture.OpenLive(ctx, capture.LiveOptions{
			Interface: iface,
			Filter:    capture.Filter{Remote: remote.Addr(), Port: remote.Port()},
			Netns:     o.Netns,
		})
		switch {
		case errors.Is(err, capture.ErrPermission):
			return nil, &Error{Kind: KindPermission, Err: errors.New("capturing the probe's packets needs CAP_NET_RAW: run with sudo, or give the binary the capability once: sudo setcap cap_net_raw,cap_net_admin+ep $(which slowstart)")}
		case errors.Is(err, capture.ErrNoInterface):
			return nil, &Error{Kind: KindInterface, Err: fmt.Errorf("interface %q does not exist: see `ip link` for the names", iface)}
		case errors.Is(err, capture.ErrLiveUnsupported):
			return nil, &Error{Kind: KindCapture, Err: err}
		case err != nil:
			return nil, &Error{Kind: KindCapture, Err: fmt.Errorf("capturing on %s: %w", iface, err)}
		}
		if out.pcap != nil {
			live.Tee(out.pcap.writer)
		}
		return liveCapture{live}, nil
	}
}

// pcapSink is the --pcap file, shared by the captures of every hop.
type pcapSink struct {
	mu     sync.Mutex
	file   *os.File
	writer *capture.PcapWriter
}

func newPcapSink(path string) (*pcapSink, error) {
	// The requests are in it in plaintext over http://: the owner's only.
	f, err := privatefile.Create(path)
	if err != nil {
		return nil, err
	}
	w, err := capture.NewPcapWriter(f, 0)
	if err != nil {
		f.Close()
		os.Remove(path)
		return nil, err
	}
	return &pcapSink{file: f, writer: w}, nil
}

func (p *pcapSink) close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return errors.Join(p.writer.Flush(), p.file.Close())
}
