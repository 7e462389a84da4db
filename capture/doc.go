// Package capture reads packets from capture files (pcap and pcapng) and from
// a live interface (Linux), and decodes each TCP segment (and on request each
// UDP datagram) into a Packet. It knows link layers, tunnels, IP, TCP and UDP
// headers; it knows nothing of connections, TLS, QUIC or HTTP (see packages
// flow, tlsrec, httpmsg). It does not reassemble streams or IP fragments.
//
// # Reading a file
//
//	r, err := capture.Open("trace.pcap")
//	if err != nil { ... }
//	defer r.Close()
//	var p capture.Packet
//	for {
//		if err := r.Next(&p); err == io.EOF {
//			break
//		} else if err != nil {
//			return err // the file is damaged; the packets before were good
//		}
//		use(&p) // p.Payload points into the reader's buffer: copy what you keep
//	}
//	stats := r.Stats() // records, TCP, skipped, truncated, link types, time span
//
// # What it reads
//
// Formats: pcap with microsecond or nanosecond timestamps in either byte order,
// pcapng (several interfaces, each with its own link type, and several
// sections), and either of them gzip-compressed. Timestamps become Unix
// nanoseconds whatever the file's resolution.
//
// Link types: Ethernet (802.1Q, 802.1ad/QinQ and 0x9100 VLAN tags, 802.3
// frames with LLC/SNAP, 802.1ah PBB, VN-Tag, E-Tag, FabricPath), raw IP
// (LINKTYPE_RAW 101, DLT_RAW 12 and 14, LINKTYPE_IPV4 228, LINKTYPE_IPV6
// 229), Linux cooked captures SLL (113) and SLL2 (276) as `tcpdump -i any`
// writes them, BSD loopback NULL (0) and LOOP (108) with the address family
// in either byte order (AF_INET6 is 10, 24, 28 or 30 depending on the
// system), PPP (9), PPP in HDLC framing (50, Cisco HDLC frames included),
// PPPoE (51), Cisco HDLC (104), FDDI (10), 802.11 (105) and 802.11 with
// radiotap (127; the FCS and header padding flags are honoured), NFLOG
// (239), PFLOG (117), IP over InfiniBand (242) and Apple's PKTAP (258, and
// 149 as macOS writes it).
//
// Tunnels and encapsulations: PPPoE sessions, MPLS label stacks (with a
// pseudowire control word before Ethernet), GRE (key, sequence, checksum,
// PPTP's version 1) with ERSPAN types I, II and III, Aruba's 802.11 in GRE
// and WCCP, VXLAN (UDP 4789 and 8472), VXLAN-GPE (4790), Geneve (6081),
// GTP-U (2152), GRE and MPLS in UDP (4754, 6635), IP in IP in every
// combination of IPv4 and IPv6, EtherIP and IPsec AH. The Packet is the
// innermost TCP segment; Packet.Tunnel names the encapsulations it came
// through (Stats.Tunnels, those of the whole file). A UDP tunnel is followed
// only on its destination port and when its header is plausible.
//
// What is not decoded is counted: other protocols in Stats.NonTCP; link
// types and encapsulations that may carry TCP (an unknown link type, IPsec
// ESP, encrypted 802.11, MACsec...) also by name in Stats.Skipped, so that a
// caller can say what it missed. docs/capture.md has the full list.
//
// Network layers: IPv4 (with options) and IPv6 (hop-by-hop, routing and
// destination-options extension headers are skipped). IP fragments, first
// fragments included, are skipped and counted (Stats.Fragments): a segment
// that was fragmented cannot be decoded from one record.
//
// # UDP
//
// A Reader made with WithUDP also returns UDP datagrams (Packet.Protocol is
// ProtocolUDP; ports, HeaderLen 8, PayloadLen and Payload are filled as for
// TCP; the TCP fields are zero and Options.WindowScale is -1), through the
// same link types and tunnels. Without it, a Reader returns TCP only.
//
// # Short snaplen
//
// Captures taken with a small snaplen (tcpdump -s 96) keep only the headers.
// Packet.PayloadLen comes from the IP header's length fields (IPv4 total
// length, IPv6 payload length, less the IP, extension and TCP headers), so it
// is the segment's true length; Packet.Payload holds only the captured bytes.
// Ethernet padding of short frames is not payload. When the IP length field is
// 0 (segmentation offload, IPv6 jumbograms) the record's original wire length
// stands in for it. A TCP header cut inside its options is decoded as far as
// it goes (options that were cut off stay absent); a record without the whole
// fixed 20-byte TCP header counts as undecodable.
//
// # Decoding
//
// Link, tunnel and IP layers are decoded by gopacket's DecodingLayerParser
// into layer structs the Reader owns (one sparse container of them for every
// link type), and records are read with pcapgo's ZeroCopyReadPacketData, so
// the steady state allocates nothing per packet. Headers gopacket has no
// allocation-free DecodingLayer for (PPP, PPPoE, MPLS, FDDI, Cisco HDLC,
// radiotap, 802.11, NFLOG, PKTAP, ERSPAN III) are decoded by small layers in
// encap.go that read only the fields that locate the next header.
// The TCP header is decoded here rather than by layers.TCP: that decoder
// refuses a header whose options were cut by the snaplen, and allocates for
// MPTCP options; the fields used are at fixed offsets and the five options
// read (MSS, window scale, SACK-permitted, timestamps, SACK) are simple.
// Known exceptions to "no allocation per packet", all inside gopacket:
// pcapng records of a link type numbered above 255 (SLL2, PKTAP) box the link
// type, IPv6 hop-by-hop options, Geneve options and GTP-U extension headers
// are allocated one by one.
//
// # Live capture
//
// OpenLive captures on one interface (Linux, CAP_NET_RAW) through an AF_PACKET
// socket that hands over packets from the IP header on, with a BPF filter on
// one remote endpoint applied in the kernel, kernel timestamps, and no packet
// ring: Stop returns at once and Next then hands over every packet captured
// before it, then io.EOF. PcapWriter keeps a copy (Live.Tee), RouteInterface
// finds the interface that carries traffic to an address.
//
//	iface, _, err := capture.RouteInterface(serverAddr)
//	live, err := capture.OpenLive(ctx, capture.LiveOptions{
//		Interface: iface, Filter: capture.Filter{Remote: serverAddr, Port: 443}})
//	defer live.Close()
//	go func() { fetch(); live.Stop() }()
//	for live.Next(&p) == nil { use(&p) } // until io.EOF after Stop
//
// # Errors
//
// A file that is not a capture gives ErrNotCapture, a 0-byte file ErrEmpty (a
// capture with a header and no records is valid and simply has no packets). A
// file that ends inside a record (a capture still being written, or cut by a
// copy) is not an error: Next returns io.EOF after the last whole record and
// Stats.Truncated is set. A record that cannot be read (an impossible length,
// an unknown pcapng interface) gives ErrDamaged; the reader stops there.
package capture
