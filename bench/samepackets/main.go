// Command samepackets compares two captures of the same traffic taken by two
// taps at once (bench/live.sh: tcpdump's file and the packets slowstart's live
// path read): whether they hold the same TCP packets, field by field and
// captured payload byte by byte, in each direction of each connection. Two
// packet sockets on one interface each get every packet, but not always in
// the same order: outgoing packets are tapped as they are sent and incoming
// ones as they are received, and packets received on both cores at once reach
// the two sockets in either order, each socket stamping an incoming packet as
// it is handed to it. So it also counts the connections whose packets the two
// hold in another order (within a direction or across the two), and says how
// far apart the two stamps of the same packet lie. It is a benchmarking aid,
// not part of the slowstart binary.
//
//	samepackets [-connections FILE] A.pcap B.pcap
//
// With -connections, it writes to FILE a line for each connection the two
// hold the same packets of: "LOWER HIGHER ORDER STAMPS" (endpoints as
// ADDR:PORT, the lower first; ORDER "same" or "other"; STAMPS the greatest
// distance in nanoseconds between the two stamps of one of its packets). It
// exits 1 when the captures do not hold the same packets (one missing, extra
// or changed), 2 on an error.
package main

import (
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"hash/maphash"
	"io"
	"net/netip"
	"os"
	"slices"
	"sort"

	"github.com/slowstart/slowstart/capture"
)

// endpoints names a connection by its two endpoints, the lower first.
type endpoints struct{ a, b netip.AddrPort }

// conn is what one capture holds of one connection: each packet's direction
// (0: from the lower endpoint), fingerprint and stamp, in the capture's order.
type conn struct {
	dir    []byte
	prints []uint64
	stamps []int64
}

func main() {
	connections := flag.String("connections", "", "write here, for each connection, whether the two hold its packets in the same order and how far apart their stamps lie")
	flag.Parse()
	if flag.NArg() != 2 {
		fmt.Fprintln(os.Stderr, "usage: samepackets [-connections FILE] A.pcap B.pcap")
		os.Exit(2)
	}
	seed := maphash.MakeSeed()
	a, na, err := read(flag.Arg(0), seed)
	if err == nil {
		var b map[endpoints]*conn
		var nb int
		b, nb, err = read(flag.Arg(1), seed)
		if err == nil {
			var same bool
			same, err = compare(os.Stdout, a, b, na, nb, *connections)
			if err == nil && !same {
				os.Exit(1)
			}
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "samepackets:", err)
		os.Exit(2)
	}
}

// read fingerprints every TCP packet of path by connection.
func read(path string, seed maphash.Seed) (map[endpoints]*conn, int, error) {
	r, err := capture.Open(path)
	if err != nil {
		return nil, 0, err
	}
	defer r.Close()
	conns := make(map[endpoints]*conn)
	var p capture.Packet
	var h maphash.Hash
	h.SetSeed(seed)
	var buf []byte
	n := 0
	for {
		if err := r.Next(&p); err != nil {
			if errors.Is(err, io.EOF) {
				return conns, n, nil
			}
			if errors.Is(err, capture.ErrDamaged) {
				// Every readable record was read (a capture cut short ends
				// so): what is missing shows as missing packets.
				fmt.Fprintf(os.Stderr, "samepackets: %s: %v\n", path, err)
				return conns, n, nil
			}
			return nil, 0, fmt.Errorf("%s: %w", path, err)
		}
		n++
		src := netip.AddrPortFrom(p.Src, p.SrcPort)
		dst := netip.AddrPortFrom(p.Dst, p.DstPort)
		key, dir := endpoints{src, dst}, byte(0)
		if dst.Compare(src) < 0 {
			key, dir = endpoints{dst, src}, 1
		}
		c := conns[key]
		if c == nil {
			c = new(conn)
			conns[key] = c
		}
		buf = binary.LittleEndian.AppendUint16(buf[:0], p.IPID)
		buf = binary.LittleEndian.AppendUint32(buf, p.Seq)
		buf = binary.LittleEndian.AppendUint32(buf, p.Ack)
		buf = append(buf, p.Flags)
		buf = binary.LittleEndian.AppendUint16(buf, p.Window)
		buf = binary.LittleEndian.AppendUint32(buf, uint32(p.HeaderLen))
		buf = binary.LittleEndian.AppendUint32(buf, uint32(p.PayloadLen))
		buf = fmt.Appendf(buf, "%v", p.Options)
		buf = append(buf, p.Payload...)
		h.Reset()
		h.Write(buf)
		c.dir = append(c.dir, dir)
		c.prints = append(c.prints, h.Sum64())
		c.stamps = append(c.stamps, p.TimestampNs)
	}
}

// compare prints how a and b differ and reports whether every direction of
// every connection holds the same packets in both. With connectionsPath, it
// writes there a line for each connection both hold the same packets of:
// "LOWER HIGHER ORDER STAMPS", ORDER "same" or "other" (the two hold its
// packets in another order), STAMPS the greatest distance in nanoseconds
// between the two stamps of one of its packets.
func compare(w io.Writer, a, b map[endpoints]*conn, na, nb int, connectionsPath string) (bool, error) {
	keys := make([]endpoints, 0, len(a))
	for k := range a {
		keys = append(keys, k)
	}
	for k := range b {
		if a[k] == nil {
			keys = append(keys, k)
		}
	}
	sort.Slice(keys, func(i, j int) bool {
		if c := keys[i].a.Compare(keys[j].a); c != 0 {
			return c < 0
		}
		return keys[i].b.Compare(keys[j].b) < 0
	})
	var directions, sameDirections, sameOrder, connsSame, connsOrdered, differ int
	var deltas [2][]int64 // b's stamp minus a's, by direction, for the same packet
	var facts []byte
	for _, k := range keys {
		ca, cb := a[k], b[k]
		if ca == nil {
			ca = new(conn)
		}
		if cb == nil {
			cb = new(conn)
		}
		samePackets, inOrder := true, slices.Equal(ca.dir, cb.dir)
		var farthest int64
		for dir := range byte(2) {
			pa, sa := only(ca, dir)
			pb, sb := only(cb, dir)
			if len(pa) == 0 && len(pb) == 0 {
				continue
			}
			directions++
			var d []int64
			if slices.Equal(pa, pb) {
				sameOrder++
				d = make([]int64, len(sa))
				for i := range sa {
					d[i] = sb[i] - sa[i]
				}
			} else {
				inOrder = false
				var ok bool
				if d, ok = matchStamps(pa, sa, pb, sb); !ok {
					samePackets = false
					if differ++; differ <= maxListed {
						fmt.Fprintf(w, "different: %s %s from the %s endpoint: %d and %d packets\n", k.a, k.b, []string{"lower", "higher"}[dir], len(pa), len(pb))
					}
					continue
				}
			}
			sameDirections++
			for _, x := range d {
				farthest = max(farthest, x, -x)
			}
			deltas[dir] = append(deltas[dir], d...)
		}
		if !samePackets {
			continue
		}
		connsSame++
		order := "other"
		if inOrder {
			connsOrdered++
			order = "same"
		}
		facts = fmt.Appendf(facts, "%s %s %s %d\n", k.a, k.b, order, farthest)
	}
	if differ > maxListed {
		fmt.Fprintf(w, "different: %d directions more\n", differ-maxListed)
	}
	fmt.Fprintf(w, "packets: %d and %d\n", na, nb)
	fmt.Fprintf(w, "directions: %d, the same packets: %d, also in the same order: %d\n", directions, sameDirections, sameOrder)
	fmt.Fprintf(w, "connections: %d, the same packets: %d, in the same order (each direction's and across the two): %d\n", len(keys), connsSame, connsOrdered)
	for dir, d := range deltas {
		if len(d) == 0 {
			continue
		}
		slices.Sort(d)
		fmt.Fprintf(w, "stamps of the same packet from the %s endpoint, second minus first: min %d ns, median %d ns, max %d ns\n",
			[]string{"lower", "higher"}[dir], d[0], d[len(d)/2], d[len(d)-1])
	}
	if connectionsPath != "" {
		if err := os.WriteFile(connectionsPath, facts, 0o644); err != nil {
			return false, err
		}
	}
	return sameDirections == directions, nil
}

// maxListed is how many directions whose packets differ are named.
const maxListed = 10

// only returns the fingerprints and stamps of c's packets in direction dir.
func only(c *conn, dir byte) (prints []uint64, stamps []int64) {
	for i, d := range c.dir {
		if d == dir {
			prints = append(prints, c.prints[i])
			stamps = append(stamps, c.stamps[i])
		}
	}
	return prints, stamps
}

// matchStamps pairs the packets of one direction as two captures hold them in
// different orders: each fingerprint's k-th packet in a with its k-th in b.
// It returns b's stamp minus a's for each, and false if the two do not hold
// the same packets.
func matchStamps(pa []uint64, sa []int64, pb []uint64, sb []int64) ([]int64, bool) {
	if len(pa) != len(pb) {
		return nil, false
	}
	at := make(map[uint64][]int64, len(pa))
	for i, p := range pa {
		at[p] = append(at[p], sa[i])
	}
	deltas := make([]int64, 0, len(pb))
	for i, p := range pb {
		s := at[p]
		if len(s) == 0 {
			return nil, false
		}
		deltas = append(deltas, sb[i]-s[0])
		at[p] = s[1:]
	}
	return deltas, true
}
