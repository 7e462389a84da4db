package link

import (
	"net"
	"testing"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
)

// tcpPacket serializes an IPv4 or IPv6 TCP segment with the given flags and payload.
func tcpPacket(t *testing.T, ipv6, syn, ack bool, payload int) []byte {
	t.Helper()
	tcp := &layers.TCP{SrcPort: 40000, DstPort: 80, Seq: 1, SYN: syn, ACK: ack, Window: 65535}
	var ip gopacket.SerializableLayer
	if ipv6 {
		ip6 := &layers.IPv6{Version: 6, HopLimit: 64, NextHeader: layers.IPProtocolTCP, SrcIP: net.ParseIP("fd00::1"), DstIP: net.ParseIP("fd00::2")}
		if err := tcp.SetNetworkLayerForChecksum(ip6); err != nil {
			t.Fatal(err)
		}
		ip = ip6
	} else {
		ip4 := &layers.IPv4{Version: 4, TTL: 64, Protocol: layers.IPProtocolTCP, SrcIP: net.IPv4(10, 0, 0, 1), DstIP: net.IPv4(10, 0, 0, 2)}
		if err := tcp.SetNetworkLayerForChecksum(ip4); err != nil {
			t.Fatal(err)
		}
		ip = ip4
	}
	buf := gopacket.NewSerializeBuffer()
	opts := gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}
	if err := gopacket.SerializeLayers(buf, opts, ip, tcp, gopacket.Payload(make([]byte, payload))); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestDropTakesTheFirstMatchingPackets(t *testing.T) {
	for _, ipv6 := range []bool{false, true} {
		syn := tcpPacket(t, ipv6, true, false, 0)
		synAck := tcpPacket(t, ipv6, true, true, 0)
		ack := tcpPacket(t, ipv6, false, true, 0)
		data := tcpPacket(t, ipv6, false, true, 100)
		udp := []byte{0x45, 0, 0, 20, 0, 0, 0, 0, 64, 17} // IPv4, protocol UDP, cut short
		for _, tc := range []struct {
			config DropConfig
			in     [][]byte
			want   []bool // dropped
		}{
			{DropConfig{Count: 1, Match: MatchSYN}, [][]byte{synAck, syn, syn, ack}, []bool{false, true, false, false}},
			{DropConfig{Count: 2, Match: MatchSYN}, [][]byte{syn, udp, syn, syn}, []bool{true, false, true, false}},
			{DropConfig{Count: 1, Match: MatchSYNACK}, [][]byte{syn, synAck, synAck}, []bool{false, true, false}},
			{DropConfig{Count: 2, Match: MatchTCPData}, [][]byte{ack, data, ack, data, data}, []bool{false, true, false, true, false}},
			{DropConfig{Count: 2, Match: MatchAny}, [][]byte{udp, ack, syn}, []bool{true, true, false}},
			{DropConfig{Count: 0, Match: MatchSYN}, [][]byte{syn}, []bool{false}},
		} {
			stage := NewDrop(tc.config)
			var dropped []*Packet
			for i, data := range tc.in {
				p := &Packet{Data: data}
				dropped = stage.Enqueue(p, int64(i), dropped[:0])
				if got := len(dropped) == 1; got != tc.want[i] {
					t.Errorf("ipv6=%v %s: packet %d dropped %v, want %v", ipv6, tc.config, i, got, tc.want[i])
				}
				if len(dropped) == 0 && stage.Dequeue(int64(i)) != p {
					t.Errorf("ipv6=%v %s: packet %d did not pass at once", ipv6, tc.config, i)
				}
			}
		}
	}
}

func TestPipelineDropCountsAsLoss(t *testing.T) {
	p, err := NewPipeline(Config{DelayNs: millisecondNs, Drop: DropConfig{Count: 1, Match: MatchSYN}}, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	syn := tcpPacket(t, false, true, false, 0)
	p.Enqueue(&Packet{Data: syn}, 0)
	p.Enqueue(&Packet{Data: syn}, 10)
	if got := p.Dequeue(millisecondNs); got != nil {
		t.Fatalf("a packet left before its delay")
	}
	if got := p.Dequeue(millisecondNs + 10); got == nil {
		t.Fatal("the second SYN did not pass")
	}
	if c := p.Counters(); c.PacketsDroppedLoss != 1 || c.PacketsOut != 1 {
		t.Errorf("counters %+v, want one dropped as loss and one out", c)
	}
	if err := (Config{Drop: DropConfig{Count: -1}}).Validate(); err == nil {
		t.Error("a negative drop count was accepted")
	}
}
