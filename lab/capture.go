package lab

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/slowstart/slowstart/capture"
)

// pcapFile writes the packets one TUN device saw (link type RAW: IP headers first),
// as tcpdump on that device would, with the tool's one pcap writer.
type pcapFile struct {
	path string
	f    *os.File
	w    *capture.PcapWriter
}

func newPcapFile(path string) (*pcapFile, error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("capture file: %w", err)
	}
	w, err := capture.NewPcapWriter(f, capture.DefaultSnaplen)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("capture file %s: %w", path, err)
	}
	return &pcapFile{path: path, f: f, w: w}, nil
}

// write keeps one packet; the first error sticks, and close returns it.
func (p *pcapFile) write(data []byte, unixNs int64) {
	_ = p.w.WritePacket(data, unixNs, len(data))
}

func (p *pcapFile) close() error {
	return errors.Join(p.w.Flush(), p.f.Close())
}

// pcapTaps holds the client-side and server-side captures of a trial (the
// server-side one may be left out: nil).
type pcapTaps struct {
	client, server *pcapFile
}

// newPcapTaps opens the captures; serverPath "" leaves the server side out.
func newPcapTaps(clientPath, serverPath string) (*pcapTaps, error) {
	c, err := newPcapFile(clientPath)
	if err != nil {
		return nil, err
	}
	if serverPath == "" {
		return &pcapTaps{client: c}, nil
	}
	s, err := newPcapFile(serverPath)
	if err != nil {
		c.close()
		return nil, err
	}
	return &pcapTaps{client: c, server: s}, nil
}

// tap receives every packet read from or written to a device: device 0 is the
// client's TUN, 1 the server's.
func (t *pcapTaps) tap(device int, data []byte, unixNs int64) {
	if device == 0 {
		t.client.write(data, unixNs)
	} else if t.server != nil {
		t.server.write(data, unixNs)
	}
}

func (t *pcapTaps) close() error {
	if t.server == nil {
		return t.client.close()
	}
	return errors.Join(t.client.close(), t.server.close())
}

// KeepCaptures copies the trial's captures (ClientPcap and ServerPcap, written
// with a capture directory) into dir as NAME.client.pcap and NAME.server.pcap:
// what a test or a campaign keeps of a trial to look at again. A capture that
// cannot be copied does not keep the other from being copied.
func (r TrialResult) KeepCaptures(dir, name string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	return errors.Join(copyFile(r.ClientPcap, filepath.Join(dir, name+".client.pcap")),
		copyFile(r.ServerPcap, filepath.Join(dir, name+".server.pcap")))
}

func copyFile(from, to string) error {
	data, err := os.ReadFile(from)
	if err != nil {
		return err
	}
	return os.WriteFile(to, data, 0o644)
}
