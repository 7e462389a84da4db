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
//			// errors.Is(err, capture.ErrDamaged): damaged records were
//			// skipped, every readable one was read (see Damaged files)
//			return err
//		}
//		use(&p) // p.Payload points into the reader's buffer: copy what you keep
//	}
//	stats := r.Stats() // records, TCP, skipped, truncated, damage, link types, time span
//
// # What it reads
//
// Formats: pcap with microsecond or nanosecond timestamps in either byte order
// (versions 2.0 to 2.4: before 2.3 the record lengths are read swapped, as
// libpcap and Wireshark read them), pcapng (several interfaces, each with its
// own link type and timestamp resolution, and several sections), and either of
// them gzip-compressed. Timestamps become Unix nanoseconds whatever the
// file's resolution. A Reader only reads its input, never seeks: NewReader
// reads a pipe or os.Stdin as well as a file.
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
// and WCCP, VXLAN (UDP 4789 and 8472), VXLAN-GPE (4790), Geneve (6081), L2TPv2 (1701),
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
// # Several files
//
// OpenFiles reads several capture files as one capture: the files of a
// rotated capture (tcpdump -W, -C), or captures taken at several points.
// Each may be pcap or pcapng, gzip-compressed or not, of any link type. Next
// hands out their records in time order, as mergecap merges them: a k-way
// merge that holds one record per file (memory grows with the number of
// files, not their size). Records of the same time come in the order the
// files were given. Packet.File says which file a packet came from;
// Stats sums the files' counts and Stats.Files gives each one's.
//
//	r, err := capture.OpenFiles([]string{"trace0.pcap", "trace1.pcap.gz"})
//
// # Packets in memory
//
// A program that sees packets itself (the lab's link emulator, on its TUN
// devices) hands them to a Memory as they pass (Add, from any goroutine) and
// reads them back as Packets (Next), as a Reader would read a capture file of
// them, without writing one.
//
// # Damaged files
//
// A record that cannot be read (a length no capture can have: longer than
// the snaplen allows, than the packet was or than MaxRecordBytes, whatever the
// snaplen; a pcapng block whose two length
// fields disagree, or of an interface that does not exist) does not end the
// reading. The Reader skips to the next place where records can be read
// again: for pcap, two record headers in a row that are plausible (lengths
// within the snaplen and each other, a fraction of a second below one, times
// within a day of the last record read and of each other; three in a row
// before any record was read); for pcapng, a block of a known type whose two
// length fields agree. It also looks at the header after each record: when
// that cannot be one, the record's own length may be wrong, and a run of
// good records starting inside it says so (the record is then skipped too).
// Stats.Damaged says where the first damaged record was (its number and
// byte offset), how many damaged places and bytes were skipped; after the
// last packet Next returns a *DamageError, which wraps ErrDamaged, in place
// of io.EOF. How many records the skipped bytes held is not known.
//
// # Decoding
//
// Records are read by this package's pcap and pcapng readers in place from
// their read buffer (a record is not copied), and their link, tunnel and IP
// layers are decoded by gopacket's DecodingLayerParser into layer structs the
// Reader owns (one sparse container of them for every link type), so the
// steady state allocates nothing per packet. Headers gopacket has no
// allocation-free DecodingLayer for (PPP, PPPoE, MPLS, FDDI, Cisco HDLC,
// radiotap, 802.11, NFLOG, PKTAP, ERSPAN III) are decoded by small layers in
// encap.go that read only the fields that locate the next header.
// The TCP header is decoded here rather than by layers.TCP: that decoder
// refuses a header whose options were cut by the snaplen, and allocates for
// MPTCP options; the fields used are at fixed offsets and the five options
// read (MSS, window scale, SACK-permitted, timestamps, SACK) are simple.
// Known exceptions to "no allocation per packet", all inside gopacket:
// IPv6 hop-by-hop options, Geneve options and GTP-U extension headers are
// allocated one by one.
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
// capture with a header and no records is valid and simply has no packets),
// a file header that cannot be read ErrDamaged, one cut inside it
// ErrTruncated; a directory a *fs.PathError of EISDIR; Open and OpenFiles
// name the file. A file that ends inside a record (a capture still being
// written, or cut by a copy) is read up to it: Next returns io.EOF after the
// last whole record and Stats.Truncated is set (analyze warns and exits 3). Damaged records are skipped (see Damaged
// files): after the last packet Next returns a *DamageError wrapping
// ErrDamaged. A compressed stream that cannot be decompressed further ends
// its file the same way, with the read error as DamageError.Cause. With
// several files, the errors of each are joined (errors.Join). Test the kinds
// with errors.Is.
package capture
