package lab

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"
)

// pcapFile writes the packets one TUN device saw (link type RAW: IP headers first),
// as tcpdump on that device would.
type pcapFile struct {
	mu   sync.Mutex
	path string
	f    *os.File
	bw   *bufio.Writer
	w    *pcapgo.Writer
	err  error
}

func newPcapFile(path string) (*pcapFile, error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("capture file: %w", err)
	}
	bw := bufio.NewWriterSize(f, 256<<10)
	w := pcapgo.NewWriterNanos(bw)
	if err := w.WriteFileHeader(65535, layers.LinkTypeRaw); err != nil {
		f.Close()
		return nil, fmt.Errorf("capture file %s: %w", path, err)
	}
	return &pcapFile{path: path, f: f, bw: bw, w: w}, nil
}

func (p *pcapFile) write(data []byte, unixNs int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.err != nil {
		return
	}
	ci := gopacket.CaptureInfo{Timestamp: time.Unix(0, unixNs), CaptureLength: len(data), Length: len(data)}
	p.err = p.w.WritePacket(ci, data)
}

func (p *pcapFile) close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	err := p.err
	if e := p.bw.Flush(); err == nil {
		err = e
	}
	if e := p.f.Close(); err == nil {
		err = e
	}
	return err
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
