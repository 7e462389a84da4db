package link

import "testing"

const millisecondNs = int64(1_000_000)

// newTestPackets returns one packet per size, each filled with its index so tests can
// tell them apart.
func newTestPackets(sizes ...int) []*Packet {
	packets := make([]*Packet, len(sizes))
	for i, size := range sizes {
		data := make([]byte, size)
		for j := range data {
			data[j] = byte(i)
		}
		packets[i] = &Packet{Data: data}
	}
	return packets
}

// drain dequeues every packet ready at nowNs.
func drain(stage interface{ Dequeue(int64) *Packet }, nowNs int64) []*Packet {
	var out []*Packet
	for p := stage.Dequeue(nowNs); p != nil; p = stage.Dequeue(nowNs) {
		out = append(out, p)
	}
	return out
}

// indexOf finds a packet among the originals.
func indexOf(t *testing.T, originals []*Packet, p *Packet) int {
	t.Helper()
	for i, original := range originals {
		if original == p {
			return i
		}
	}
	t.Fatalf("packet %p is not one of the test's packets", p)
	return -1
}
