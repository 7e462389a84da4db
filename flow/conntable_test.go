package flow

import (
	"math/rand/v2"
	"net/netip"
	"testing"
)

// TestConnTable holds the table to a map keyed by the four-tuple, through
// random puts (some of a four-tuple already held, which replace it), removals
// (some of connections no longer held) and lookups both ways, with all the
// hash's bits and with two (most connections then share a chain), over IPv4,
// IPv6 and zoned endpoints.
func TestConnTable(t *testing.T) {
	addrs := []netip.Addr{
		netip.MustParseAddr("192.0.2.1"), netip.MustParseAddr("192.0.2.2"),
		netip.MustParseAddr("2001:db8::1"), netip.MustParseAddr("fe80::1%eth0"), netip.MustParseAddr("fe80::1%eth1"),
		netip.MustParseAddr("::ffff:192.0.2.1"),
	}
	for _, mask := range []uint64{^uint64(0), 3} {
		rng := rand.New(rand.NewPCG(7, mask))
		ct := newConnTable()
		ct.mask = mask
		want := map[connKey]*Conn{}
		endpoint := func() netip.AddrPort {
			return netip.AddrPortFrom(addrs[rng.IntN(len(addrs))], uint16(80+rng.IntN(6)))
		}
		var all []*Conn
		for step := range 20000 {
			x, y := endpoint(), endpoint()
			switch op := rng.IntN(3); {
			case op == 0:
				c := &Conn{Client: x, Server: y, Index: step}
				ct.put(c)
				want[makeKey(x, y)] = c
				all = append(all, c)
			case op == 1 && len(all) > 0:
				c := all[rng.IntN(len(all))]
				ct.remove(c)
				if k := makeKey(c.Client, c.Server); want[k] == c {
					delete(want, k)
				}
			default:
				if got, w := ct.get(x, y), want[makeKey(x, y)]; got != w {
					t.Fatalf("mask %#x, step %d: get(%v, %v) = %v, want %v", mask, step, x, y, got, w)
				}
				if got, w := ct.get(y, x), want[makeKey(x, y)]; got != w {
					t.Fatalf("mask %#x, step %d: get(%v, %v) = %v, want %v (the other way)", mask, step, y, x, got, w)
				}
			}
			if ct.len() != len(want) {
				t.Fatalf("mask %#x, step %d: len %d, want %d", mask, step, ct.len(), len(want))
			}
		}
		seen := 0
		ct.each(func(c *Conn) {
			if want[makeKey(c.Client, c.Server)] != c {
				t.Fatalf("mask %#x: each gave %v-%v #%d, not held", mask, c.Client, c.Server, c.Index)
			}
			seen++
		})
		if seen != len(want) || len(want) < 10 {
			t.Fatalf("mask %#x: each gave %d connections, want %d", mask, seen, len(want))
		}
	}
}

// TestEndpointHashOfSixteenBytes holds EndpointHash to the hash of the
// address's 16-byte form (As16) and port, word by word: the IPv4 short way
// must give what the 16 bytes give (a wrong byte of the mapped prefix, or the
// words swapped, fails it).
func TestEndpointHashOfSixteenBytes(t *testing.T) {
	reference := func(e netip.AddrPort, seed uint64) uint64 {
		a := e.Addr().As16()
		h := seed ^ uint64(e.Port())
		for i := 0; i < 16; i += 8 {
			var w uint64
			for _, b := range a[i : i+8] {
				w = w<<8 | uint64(b)
			}
			h = (h ^ w) * 0x9e3779b97f4a7c15
			h ^= h >> 31
			h *= 0x94d049bb133111eb
			h ^= h >> 29
		}
		return h
	}
	for i, s := range []string{"192.0.2.1:443", "10.0.0.2:51234", "0.0.0.0:0", "255.255.255.255:65535",
		"[2001:db8::1]:443", "[::ffff:192.0.2.1]:80", "[::]:1", "[fe80::1%eth0]:22"} {
		e := netip.MustParseAddrPort(s)
		seed := uint64(i)*0x9e3779b97f4a7c15 + 1
		if got, want := EndpointHash(e, seed), reference(e, seed); got != want {
			t.Errorf("EndpointHash(%s) = %#x, want %#x", s, got, want)
		}
	}
}
