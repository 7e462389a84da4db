package flow

import (
	"net/netip"

	"github.com/slowstart/slowstart/capture"
)

// tombstoneNs is how long a finished connection's sequence space is remembered
// after its last packet: late packets of it (a FIN retransmitted with backoff, a
// last ACK, a peer that resets the dead connection every few minutes) must not
// become new connections. maxTombstones bounds the memory it takes (about 8 MB,
// so that memory does not grow with the length of a capture); past it the
// oldest are forgotten first: 65,536 connections finished since, at thousands of
// connections per second, still span tens of seconds, while late packets come
// within seconds.
const (
	tombstoneNs   = 3600e9
	maxTombstones = 1 << 16
)

// sequenceSlack is how far from a finished connection's last sequence numbers a
// packet may be and still continue it.
const sequenceSlack = 1 << 24

// tombstone is what is kept of a finished connection.
type tombstone struct {
	clientIsB              bool // the client is the key's b side (else its a)
	clientISN              uint32
	clientISNKnown         bool
	clientNext, serverNext uint32 // the next sequence number of each side
	clientKnown            bool
	serverKnown            bool
	lastNs                 int64
}

type tombRef struct {
	key    compactKey
	lastNs int64
}

// bury remembers a finished connection's sequence space.
func (t *Tracker) bury(key connKey, c *Conn) {
	tomb := tombstone{clientIsB: c.Client == key.b, lastNs: c.LastNs}
	if d := &c.Dirs[ToServer]; d.SYNSeen {
		tomb.clientISN, tomb.clientISNKnown = d.ISN, true
	}
	if d := &c.Dirs[ToServer]; d.baseSet {
		tomb.clientNext, tomb.clientKnown = d.base+uint32(d.HighestEnd), true
	}
	if d := &c.Dirs[ToClient]; d.baseSet {
		tomb.serverNext, tomb.serverKnown = d.base+uint32(d.HighestEnd), true
	}
	ck := compact(key)
	t.finished[ck] = tomb
	t.tombQueue = append(t.tombQueue, tombRef{ck, c.LastNs})
}

// expireTombstones forgets finished connections quiet for longer than tombstoneNs.
func (t *Tracker) expireTombstones(nowNs int64) {
	for t.tombHead < len(t.tombQueue) && (nowNs-t.tombQueue[t.tombHead].lastNs > tombstoneNs || len(t.finished) > maxTombstones) {
		ref := t.tombQueue[t.tombHead]
		t.tombHead++
		tomb, ok := t.finished[ref.key]
		if !ok || tomb.lastNs < ref.lastNs {
			continue // forgotten, or buried again (a later entry stands for it)
		}
		if tomb.lastNs > ref.lastNs && nowNs-tomb.lastNs <= tombstoneNs && len(t.finished) <= maxTombstones {
			// Packets came after it was buried: its one entry moves to the back.
			t.tombQueue = append(t.tombQueue, tombRef{ref.key, tomb.lastNs})
			continue
		}
		delete(t.finished, ref.key)
	}
	if t.tombHead > 1024 && t.tombHead*2 > len(t.tombQueue) {
		n := copy(t.tombQueue, t.tombQueue[t.tombHead:])
		t.tombQueue = t.tombQueue[:n]
		t.tombHead = 0
	}
}

// continues reports whether packet p from src belongs to the finished connection:
// anything but a new SYN (a client SYN with another initial sequence number, or a
// SYN from the old server) whose sequence or acknowledgement numbers lie near the
// connection's last ones.
func (tomb *tombstone) continues(key connKey, src netip.AddrPort, p *capture.Packet) bool {
	fromClient := (src == key.b) == tomb.clientIsB
	if p.Has(capture.FlagSYN) && !p.Has(capture.FlagACK) {
		return fromClient && tomb.clientISNKnown && p.Seq == tomb.clientISN
	}
	near := func(x, ref uint32) bool {
		d := int32(x - ref)
		return d > -sequenceSlack && d < sequenceSlack
	}
	if fromClient {
		return (tomb.clientKnown && near(p.Seq, tomb.clientNext)) ||
			(tomb.serverKnown && p.Has(capture.FlagACK) && near(p.Ack, tomb.serverNext))
	}
	return (tomb.serverKnown && near(p.Seq, tomb.serverNext)) ||
		(tomb.clientKnown && p.Has(capture.FlagACK) && near(p.Ack, tomb.clientNext))
}
