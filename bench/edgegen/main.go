// Command edgegen writes a synthetic capture of an edge server's traffic for the
// analyze benchmark: many long-lived HTTP/1.1 keep-alive connections open at once,
// each carrying many small responses, as a capture taken at the server of a CDN
// edge would hold. Real traffic of that size (50,000 connections open at once) is
// more than this machine can make and capture, hence a generator; make-capture.sh
// --shape edge makes a real one of 5,000.
//
// Every connection: a handshake (MSS, window scale, SACK permitted and timestamps
// options), then -requests exchanges a keep-alive pause apart (a request of one
// segment, a response of one or two segments sent at once, the client's ACK a
// round trip later), then a FIN from each side. Connections start spread over the
// first -ramp, so that all are open at once for most of the capture; each client
// has its own round-trip time (10 to 150 ms). Ethernet, IPv4, a 96-byte snap
// length like tcpdump -s 96, the server's vantage point. The output depends only
// on the flags (-seed). It is a benchmarking aid, not part of the slowstart binary.
//
//	go run ./bench/edgegen -connections 50000 -requests 20 /tmp/edge-50k.pcap
package main

import (
	"bufio"
	"container/heap"
	"encoding/binary"
	"flag"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"
)

const (
	snaplen = 96
	mss     = 1448
)

func main() {
	connections := flag.Int("connections", 50000, "connections, all open at once after the ramp")
	requests := flag.Int("requests", 20, "requests per connection")
	ramp := flag.Duration("ramp", 10*time.Second, "connections start spread over this time")
	pause := flag.Duration("pause", 3*time.Second, "mean pause between a response and the next request")
	seed := flag.Uint64("seed", 1, "random seed")
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), "usage: %s [flags] OUT.pcap\n", os.Args[0])
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() != 1 || *connections <= 0 || *connections > 1<<24 || *requests <= 0 {
		flag.Usage()
		os.Exit(2)
	}
	g := generator{connections: *connections, requests: *requests, rampNs: int64(*ramp), pauseNs: int64(*pause),
		rng: rand.New(rand.NewPCG(*seed, 0x65646765))}
	if err := g.write(flag.Arg(0)); err != nil {
		fmt.Fprintln(os.Stderr, "edgegen:", err)
		os.Exit(1)
	}
}

type generator struct {
	connections, requests int
	rampNs, pauseNs       int64
	rng                   *rand.Rand
}

// conn is one client's connection: the packets still to send are made one step at
// a time (step), each at its time.
type conn struct {
	id                     int
	client                 net.IP
	clientPort             uint16
	rttNs                  int64
	clientSeq, serverSeq   uint32
	clientTsval, serverTsv uint32
	step                   int // what the next packet is
	request                int // requests done
	responseBytes          int
	responseSent           int
	atNs                   int64 // the next packet's time
}

type queue []*conn

func (q queue) Len() int { return len(q) }
func (q queue) Less(i, j int) bool {
	return q[i].atNs < q[j].atNs || q[i].atNs == q[j].atNs && q[i].id < q[j].id
}
func (q queue) Swap(i, j int)              { q[i], q[j] = q[j], q[i] }
func (q *queue) Push(x any)                { *q = append(*q, x.(*conn)) }
func (q *queue) Pop() any                  { old := *q; c := old[len(old)-1]; *q = old[:len(old)-1]; return c }
func (q queue) peek() *conn                { return q[0] }
func (q *queue) fix()                      { heap.Fix(q, 0) }
func (q *queue) pop()                      { heap.Pop(q) }
func (g *generator) jitter(ns int64) int64 { return ns/2 + g.rng.Int64N(ns+1) }

var (
	serverIP  = net.IPv4(198, 51, 100, 80).To4()
	serverMAC = net.HardwareAddr{0x02, 0, 0, 0, 0, 1}
	routerMAC = net.HardwareAddr{0x02, 0, 0, 0, 0, 2}
)

const request = "GET /static/app.js?v=%d HTTP/1.1\r\nHost: edge.example\r\nUser-Agent: bench\r\nAccept: */*\r\n\r\n"

func (g *generator) write(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	bw := bufio.NewWriterSize(f, 1<<20)
	w := pcapgo.NewWriterNanos(bw)
	if err := w.WriteFileHeader(snaplen, layers.LinkTypeEthernet); err != nil {
		return err
	}
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano()
	var q queue
	for i := range g.connections {
		c := &conn{id: i, client: net.IPv4(10, byte(i>>16), byte(i>>8), byte(i)).To4(), clientPort: uint16(20000 + g.rng.IntN(40000)),
			rttNs: int64(10e6) + g.rng.Int64N(140e6), clientSeq: g.rng.Uint32(), serverSeq: g.rng.Uint32(),
			clientTsval: g.rng.Uint32(), serverTsv: g.rng.Uint32(),
			atNs: start + g.rng.Int64N(g.rampNs)}
		q = append(q, c)
	}
	heap.Init(&q)
	s := serializer{w: w, buf: gopacket.NewSerializeBuffer()}
	for q.Len() > 0 {
		c := q.peek()
		done, err := g.next(&s, c)
		if err != nil {
			return err
		}
		if done {
			q.pop()
		} else {
			q.fix()
		}
	}
	if err := bw.Flush(); err != nil {
		return err
	}
	return f.Close()
}

// Steps of a connection.
const (
	stepSYN = iota
	stepSYNACK
	stepACK
	stepRequest
	stepResponse
	stepResponseACK
	stepClientFIN
	stepServerFIN
	stepLastACK
)

// next writes c's next packet and moves c on; true when c has no more.
func (g *generator) next(s *serializer, c *conn) (bool, error) {
	half := c.rttNs / 2
	tsAt := func(ns int64) uint32 { return uint32(ns / 1e6) } // a 1 ms clock
	client := func(flags tcpFlags, payload []byte) error {
		err := s.write(c.atNs, c.client, serverIP, c.clientPort, 80, c.clientSeq, c.serverSeq, flags, c.clientTsval+tsAt(c.atNs), c.serverTsv+tsAt(c.atNs-half), payload, 0)
		c.clientSeq += uint32(len(payload))
		if flags.syn || flags.fin {
			c.clientSeq++
		}
		return err
	}
	server := func(flags tcpFlags, payload []byte, length int) error {
		err := s.write(c.atNs, serverIP, c.client, 80, c.clientPort, c.serverSeq, c.clientSeq, flags, c.serverTsv+tsAt(c.atNs), c.clientTsval+tsAt(c.atNs-half), payload, length)
		c.serverSeq += uint32(length)
		if flags.syn || flags.fin {
			c.serverSeq++
		}
		return err
	}
	var err error
	switch c.step {
	case stepSYN:
		err = client(tcpFlags{syn: true}, nil)
		c.step, c.atNs = stepSYNACK, c.atNs+20e3
	case stepSYNACK:
		err = server(tcpFlags{syn: true, ack: true}, nil, 0)
		c.step, c.atNs = stepACK, c.atNs+c.rttNs
	case stepACK:
		err = client(tcpFlags{ack: true}, nil)
		c.step, c.atNs = stepRequest, c.atNs+g.jitter(2e6)
	case stepRequest:
		err = client(tcpFlags{ack: true, psh: true}, fmt.Appendf(nil, request, c.request))
		c.request++
		c.responseBytes, c.responseSent = 600, 0
		if g.rng.IntN(3) == 0 {
			c.responseBytes = 2000
		}
		c.step, c.atNs = stepResponse, c.atNs+g.jitter(400e3)
	case stepResponse:
		n := min(mss, c.responseBytes-c.responseSent)
		var payload []byte
		if c.responseSent == 0 {
			payload = fmt.Appendf(nil, "HTTP/1.1 200 OK\r\nContent-Length: %d\r\nConnection: keep-alive\r\n\r\n", c.responseBytes-60)
		}
		c.responseSent += n
		last := c.responseSent == c.responseBytes
		err = server(tcpFlags{ack: true, psh: last}, payload, n)
		if last {
			c.step, c.atNs = stepResponseACK, c.atNs+c.rttNs
		} else {
			c.atNs += 12e3 // the next segment, 12 µs later
		}
	case stepResponseACK:
		err = client(tcpFlags{ack: true}, nil)
		if c.request < g.requests {
			c.step, c.atNs = stepRequest, c.atNs+g.jitter(g.pauseNs)
		} else {
			c.step, c.atNs = stepClientFIN, c.atNs+g.jitter(g.pauseNs)
		}
	case stepClientFIN:
		err = client(tcpFlags{ack: true, fin: true}, nil)
		c.step, c.atNs = stepServerFIN, c.atNs+50e3
	case stepServerFIN:
		err = server(tcpFlags{ack: true, fin: true}, nil, 0)
		c.step, c.atNs = stepLastACK, c.atNs+c.rttNs
	case stepLastACK:
		err = client(tcpFlags{ack: true}, nil)
		return true, err
	}
	return false, err
}

type tcpFlags struct{ syn, ack, psh, fin bool }

// serializer writes one frame at a time, cut to the snap length.
type serializer struct {
	w   *pcapgo.Writer
	buf gopacket.SerializeBuffer
	id  uint16
}

// write writes a segment of length bytes whose first bytes are payload (the rest
// zeros, cut off by the snap length anyway).
func (s *serializer) write(atNs int64, src, dst net.IP, srcPort, dstPort uint16, seq, ack uint32, flags tcpFlags, tsval, tsecr uint32, payload []byte, length int) error {
	if length < len(payload) {
		length = len(payload)
	}
	s.id++
	eth := &layers.Ethernet{SrcMAC: routerMAC, DstMAC: serverMAC, EthernetType: layers.EthernetTypeIPv4}
	if src.Equal(serverIP) {
		eth.SrcMAC, eth.DstMAC = serverMAC, routerMAC
	}
	ip := &layers.IPv4{Version: 4, TTL: 64, Protocol: layers.IPProtocolTCP, SrcIP: src, DstIP: dst, Id: s.id, Flags: layers.IPv4DontFragment}
	ts := make([]byte, 8)
	binary.BigEndian.PutUint32(ts, tsval)
	binary.BigEndian.PutUint32(ts[4:], tsecr)
	tcp := &layers.TCP{SrcPort: layers.TCPPort(srcPort), DstPort: layers.TCPPort(dstPort), Seq: seq, SYN: flags.syn, FIN: flags.fin, PSH: flags.psh, Window: 502}
	if flags.ack {
		tcp.ACK, tcp.Ack = true, ack
	}
	if flags.syn {
		tcp.Window = 64240
		tcp.Options = []layers.TCPOption{
			{OptionType: layers.TCPOptionKindMSS, OptionLength: 4, OptionData: []byte{(mss + 12) >> 8, (mss + 12) & 0xff}},
			{OptionType: layers.TCPOptionKindSACKPermitted, OptionLength: 2},
			{OptionType: layers.TCPOptionKindTimestamps, OptionLength: 10, OptionData: ts},
			{OptionType: layers.TCPOptionKindNop},
			{OptionType: layers.TCPOptionKindWindowScale, OptionLength: 3, OptionData: []byte{7}},
		}
	} else {
		tcp.Options = []layers.TCPOption{
			{OptionType: layers.TCPOptionKindNop},
			{OptionType: layers.TCPOptionKindNop},
			{OptionType: layers.TCPOptionKindTimestamps, OptionLength: 10, OptionData: ts},
		}
	}
	if err := tcp.SetNetworkLayerForChecksum(ip); err != nil {
		return err
	}
	// The payload is made whole (zeros after its text) for the lengths and the
	// checksum, then the frame is cut to the snap length.
	body := make([]byte, length)
	copy(body, payload)
	if err := gopacket.SerializeLayers(s.buf, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}, eth, ip, tcp, gopacket.Payload(body)); err != nil {
		return err
	}
	data := s.buf.Bytes()
	ci := gopacket.CaptureInfo{Timestamp: time.Unix(0, atNs).UTC(), Length: len(data), CaptureLength: min(len(data), snaplen)}
	return s.w.WritePacket(ci, data[:ci.CaptureLength])
}
