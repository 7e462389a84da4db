package flow

import (
	"encoding/binary"
	"math/rand/v2"
	"net/netip"
)

// connTable holds the open connections by four-tuple: a table of chains (through
// Conn.sameHash) indexed by a hash of the two endpoints, the same both ways, and
// twice as large as soon as it holds more connections than chains. A Go map
// keyed by the four-tuple hashed two netip.AddrPorts (their address handles
// included) and compared them in order (makeKey) for every packet that did not
// follow one of its own connection's, 11% of the samples on 64 interleaved
// bulk streams (perf); one keyed by this hash hashed it again. The hash is
// seeded at random, so that no input can choose connections that collide.
type connTable struct {
	chains []*Conn // a power of two of them
	seed   uint64
	// mask keeps the bits of the hash used: all of them, but in the tests,
	// which make connections collide.
	mask uint64
	n    int // connections held
}

func newConnTable() connTable {
	return connTable{chains: make([]*Conn, 64), seed: rand.Uint64(), mask: ^uint64(0)}
}

func (ct *connTable) hash(x, y netip.AddrPort) uint64 {
	return EndpointsHash(x, y, ct.seed) & ct.mask
}

// EndpointsHash is the hash of the connection between x and y, the same for
// (x, y) and (y, x): the sum of the two endpoints' EndpointHash.
func EndpointsHash(x, y netip.AddrPort, seed uint64) uint64 {
	return EndpointHash(x, seed) + EndpointHash(y, seed)
}

// EndpointHash mixes an endpoint's address and port with seed (splitmix64's
// finalizer over each word of the address's 16-byte form, as As16 gives it,
// after the port). Endpoints that differ only in their zone hash the same.
func EndpointHash(e netip.AddrPort, seed uint64) uint64 {
	// An IPv4 address's words are made from its 4 bytes: As16, written as two
	// words and copied as one, stalled the processor (36% of this function's
	// samples on bulk, perf).
	var hi, lo uint64
	if addr := e.Addr(); addr.Is4() {
		b := addr.As4()
		lo = 0xffff<<32 | uint64(binary.BigEndian.Uint32(b[:]))
	} else {
		a := addr.As16()
		hi, lo = binary.BigEndian.Uint64(a[:8]), binary.BigEndian.Uint64(a[8:])
	}
	return mixWord(mixWord(seed^uint64(e.Port()), hi), lo)
}

// mixWord mixes w into h (splitmix64's finalizer).
func mixWord(h, w uint64) uint64 {
	h = (h ^ w) * 0x9e3779b97f4a7c15
	h ^= h >> 31
	h *= 0x94d049bb133111eb
	h ^= h >> 29
	return h
}

// chain is where the chain of the connections between x and y starts.
func (ct *connTable) chain(x, y netip.AddrPort) **Conn {
	return &ct.chains[ct.hash(x, y)&uint64(len(ct.chains)-1)]
}

// get returns the open connection between x and y (either way), nil if none.
func (ct *connTable) get(x, y netip.AddrPort) *Conn {
	for c := *ct.chain(x, y); c != nil; c = c.sameHash {
		if c.between(x, y) {
			return c
		}
	}
	return nil
}

// put adds c, in place of an open connection of the same four-tuple if there
// is one (which is then no longer found).
func (ct *connTable) put(c *Conn) {
	head := ct.chain(c.Client, c.Server)
	for old := *head; old != nil; old = old.sameHash {
		if old.between(c.Client, c.Server) {
			*head, _ = unlink(*head, old)
			ct.n--
			break
		}
	}
	c.sameHash = *head
	*head = c
	ct.n++
	if ct.n > len(ct.chains) {
		ct.grow()
	}
}

// grow doubles the number of chains and sorts the connections into them anew.
func (ct *connTable) grow() {
	old := ct.chains
	ct.chains = make([]*Conn, 2*len(old))
	for _, c := range old {
		for c != nil {
			next := c.sameHash
			head := ct.chain(c.Client, c.Server)
			c.sameHash = *head
			*head = c
			c = next
		}
	}
}

// remove takes c out, if it is there.
func (ct *connTable) remove(c *Conn) {
	head := ct.chain(c.Client, c.Server)
	if rest, found := unlink(*head, c); found {
		*head = rest
		ct.n--
	}
}

// unlink returns the chain from head without c, and whether c was in it.
func unlink(head, c *Conn) (_ *Conn, found bool) {
	if head == c {
		next := c.sameHash
		c.sameHash = nil
		return next, true
	}
	for p := head; p != nil; p = p.sameHash {
		if p.sameHash == c {
			p.sameHash = c.sameHash
			c.sameHash = nil
			return head, true
		}
	}
	return head, false
}

// len is the number of open connections.
func (ct *connTable) len() int { return ct.n }

// each calls f for every open connection, in no particular order.
func (ct *connTable) each(f func(*Conn)) {
	for _, head := range ct.chains {
		for c := head; c != nil; {
			next := c.sameHash // f may finish c
			f(c)
			c = next
		}
	}
}
