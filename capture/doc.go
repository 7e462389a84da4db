// Package capture reads packets from capture files (pcap and pcapng) and from
// a live interface (Linux), and decodes each TCP segment into a Packet. It
// knows link layers, IP and TCP headers; it knows nothing of connections, TLS
// or HTTP (see packages flow, tlsrec, httpmsg). It does not reassemble streams.
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
// Link types: Ethernet (with 802.1Q and 802.1ad/QinQ VLAN tags), raw IP
// (LINKTYPE_RAW 101, DLT_RAW 12 and 14, LINKTYPE_IPV4 228, LINKTYPE_IPV6 229),
// Linux cooked captures SLL (113) and SLL2 (276) as `tcpdump -i any` writes
// them, and BSD loopback NULL (0) and LOOP (108) with the address family in
// either byte order (AF_INET6 is 10, 24, 28 or 30 depending on the system).
// Records of other link types are counted as non-TCP.
//
// Network layers: IPv4 (with options) and IPv6 (hop-by-hop, routing and
// destination-options extension headers are skipped). IP fragments, first
// fragments included, are skipped and counted (Stats.Fragments): a segment
// that was fragmented cannot be decoded from one record. IP-in-IP decodes to
// the innermost header.
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
// Link and IP layers are decoded by gopacket's DecodingLayerParser into layer
// structs the Reader owns, and records are read with pcapgo's
// ZeroCopyReadPacketData, so the steady state allocates nothing per packet.
// The TCP header is decoded here rather than by layers.TCP: that decoder
// refuses a header whose options were cut by the snaplen, and allocates for
// MPTCP options; the fields used are at fixed offsets and the five options
// read (MSS, window scale, SACK-permitted, timestamps, SACK) are simple.
// Known exceptions to "no allocation per packet", both inside gopacket:
// pcapng records of a link type numbered above 255 (SLL2) box the link type,
// and IPv6 hop-by-hop options are allocated one by one.
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
