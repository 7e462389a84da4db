package ktcp

import (
	"fmt"

	"github.com/cilium/ebpf/asm"
)

// The programs are assembled here, instruction by instruction, with the
// offsets the kernel's BTF gave (layout): nothing is compiled ahead of time and
// no C compiler is involved. Each program is a BTF tracepoint (tp_btf) program:
// its context is the tracepoint's arguments, 8 bytes each, and the pointers
// among them are typed, so the verifier lets it read the kernel structs they
// point to directly (loads it turns into fault-safe ones).
//
// Registers, in every program:
//
//	R7  the context (the tracepoint's arguments)
//	R6  the socket (struct sock *), the first argument
//	R8  the same socket as struct tcp_sock * (bpf_skc_to_tcp_sock), once the
//	    family and namespace filters have passed
//	R9  the record reserved in the ring buffer
//	R1-R5, R0: scratch, clobbered by helper calls
//
// Stack: fp-16..fp-1 the local address key; fp-24 a 32-bit map key.

// The maps the programs use, by name (the programs refer to them by these
// names, and loading the collection puts their file descriptors in).
const (
	mapRing     = "ktcp_ring"     // BPF_MAP_TYPE_RINGBUF: the records
	mapPorts    = "ktcp_ports"    // array of 2048 u64: bitmaps of local ports (0-1023) and remote ports (1024-2047)
	mapAddrs    = "ktcp_addrs"    // hash: 16-byte local address → u8
	mapCounters = "ktcp_counters" // per-CPU array of u64: [2*kind] records submitted, [2*kind+1] records lost
	mapSync     = "ktcp_sync"     // array of one u64: the marker's sequence number
)

// loadMap puts the address of a map in dst.
func loadMap(dst asm.Register, name string) asm.Instruction {
	return asm.LoadMapPtr(dst, 0).WithReference(name)
}

// Map sizes.
const (
	portBitmapWords = 65536 / 64
	counterSlots    = 2 * 8
)

const (
	labelExit = "exit"
	labelLost = "lost"
)

// program is one program being assembled.
type program struct {
	insns asm.Instructions
	l     *layout
	f     Filter
	kind  Kind
	// wakeBytes is how much the ring holds before a record wakes the reader.
	wakeBytes int32
	n         int // for unique labels
}

func (p *program) emit(insns ...asm.Instruction) { p.insns = append(p.insns, insns...) }

func (p *program) label(prefix string) string {
	p.n++
	return fmt.Sprintf("%s_%d", prefix, p.n)
}

// mark puts label on a no-op (goto +0) that the next instruction follows.
func (p *program) mark(label string) {
	p.emit(asm.Instruction{OpCode: asm.OpCode(asm.JumpClass).SetJumpOp(asm.Ja)}.WithSymbol(label))
}

// zeroRecord writes zeros over a whole record, so that no byte of it carries
// what the ring's memory held before.
func zeroRecord(record asm.Register) asm.Instructions {
	insns := asm.Instructions{asm.Mov.Imm(asm.R1, 0)}
	for off := int16(0); off < recordSize; off += 8 {
		insns = append(insns, asm.StoreMem(record, off, asm.R1, asm.DWord))
	}
	return insns
}

func sizeOf(bytes int) asm.Size {
	switch bytes {
	case 1:
		return asm.Byte
	case 2:
		return asm.Half
	case 4:
		return asm.Word
	}
	return asm.DWord
}

// load reads a field of the struct src points to into dst (a bitfield shifted
// and masked).
func (p *program) load(dst, src asm.Register, f field) {
	p.loadAt(dst, src, f, 0)
}

// loadAt reads size bytes at a field's offset plus extra.
func (p *program) loadAt(dst, src asm.Register, f field, extra int16) {
	p.emit(asm.LoadMem(dst, src, f.offset+extra, sizeOf(f.size)))
	if f.bitWidth > 0 {
		if f.shift > 0 {
			p.emit(asm.RSh.Imm(dst, int32(f.shift)))
		}
		p.emit(asm.And.Imm(dst, int32(1)<<f.bitWidth-1))
	}
}

// loadWord reads 8 bytes at a field's offset plus extra (one half of an
// IPv6 address, one half of a name).
func (p *program) loadWord(dst, src asm.Register, f field, extra int16) {
	p.emit(asm.LoadMem(dst, src, f.offset+extra, asm.DWord))
}

// build assembles the program of one kind.
func build(l *layout, f Filter, kind Kind, wakeBytes int32) asm.Instructions {
	p := &program{l: l, f: f, kind: kind, wakeBytes: wakeBytes}
	p.emit(
		asm.Mov.Reg(asm.R7, asm.R1),
		asm.LoadMem(asm.R6, asm.R7, 0, asm.DWord),
		asm.JEq.Imm(asm.R6, 0, labelExit),
	)
	if kind == KindState {
		// inet_sock_set_state fires for TCP, SCTP and MPTCP sockets alike.
		p.load(asm.R1, asm.R6, l.protocol)
		p.emit(asm.JNE.Imm(asm.R1, 6 /* IPPROTO_TCP */, labelExit))
	}
	p.filterFamily()
	p.filterNetns()
	// The TCP socket behind the socket.
	p.emit(
		asm.Mov.Reg(asm.R1, asm.R6),
		asm.FnSkcToTcpSock.Call(),
		asm.JEq.Imm(asm.R0, 0, labelExit),
		asm.Mov.Reg(asm.R8, asm.R0),
	)
	p.filterPorts()
	p.filterLocalAddrs()
	// Reserve the record; a full ring counts a lost event.
	p.emit(
		loadMap(asm.R1, mapRing),
		asm.Mov.Imm(asm.R2, recordSize),
		asm.Mov.Imm(asm.R3, 0),
		asm.FnRingbufReserve.Call(),
		asm.JEq.Imm(asm.R0, 0, labelLost),
		asm.Mov.Reg(asm.R9, asm.R0),
	)
	p.emit(zeroRecord(asm.R9)...)
	p.emit(
		asm.FnKtimeGetNs.Call(),
		asm.StoreMem(asm.R9, recMonoNs, asm.R0, asm.DWord),
		asm.Mov.Reg(asm.R1, asm.R6),
		asm.FnGetSocketCookie.Call(),
		asm.StoreMem(asm.R9, recCookie, asm.R0, asm.DWord),
		asm.StoreImm(asm.R9, recKind, int64(kind), asm.Byte),
	)
	p.recordSocket()
	p.recordTCP()
	switch kind {
	case KindProbe:
		// tcp_probe(struct sock *sk, struct sk_buff *skb)
		p.emit(asm.LoadMem(asm.R2, asm.R7, 8, asm.DWord))
		p.recordSegment(true)
	case KindState:
		// inet_sock_set_state(const struct sock *sk, const int oldstate, const int newstate)
		p.emit(
			asm.LoadMem(asm.R1, asm.R7, 8, asm.DWord),
			asm.StoreMem(asm.R9, recOldState, asm.R1, asm.Byte),
			asm.LoadMem(asm.R1, asm.R7, 16, asm.DWord),
			asm.StoreMem(asm.R9, recNewState, asm.R1, asm.Byte),
		)
		p.recordCongestionControl()
	case KindRetransmit:
		// tcp_retransmit_skb(const struct sock *sk, const struct sk_buff *skb, int err)
		p.emit(asm.LoadMem(asm.R2, asm.R7, 8, asm.DWord))
		p.recordSegment(false)
		p.emit(
			asm.LoadMem(asm.R1, asm.R7, 16, asm.DWord),
			asm.StoreMem(asm.R9, recErr, asm.R1, asm.Word),
		)
	case KindCongestionState:
		// tcp_cong_state_set(struct sock *sk, const u8 ca_state)
		p.emit(
			asm.LoadMem(asm.R1, asm.R7, 8, asm.DWord),
			asm.StoreMem(asm.R9, recNewState, asm.R1, asm.Byte),
		)
		p.recordCongestionControl()
	}
	// Wake the reader only once the ring holds wakeBytes: below that it reads
	// when its poll interval ends (Tracer.Read), so that a busy ring costs one
	// wake-up per batch, not one per event.
	submit := p.label("submit")
	p.emit(
		loadMap(asm.R1, mapRing),
		asm.Mov.Imm(asm.R2, 0 /* BPF_RB_AVAIL_DATA */),
		asm.FnRingbufQuery.Call(),
		asm.Mov.Imm(asm.R2, 1 /* BPF_RB_NO_WAKEUP */),
		asm.JLT.Imm(asm.R0, p.wakeBytes, submit),
		asm.Mov.Imm(asm.R2, 2 /* BPF_RB_FORCE_WAKEUP */),
		asm.Mov.Reg(asm.R1, asm.R9).WithSymbol(submit),
		asm.FnRingbufSubmit.Call(),
	)
	p.count(2 * int32(kind))
	p.emit(
		asm.Mov.Imm(asm.R0, 0).WithSymbol(labelExit),
		asm.Return(),
	)
	p.emit(asm.Mov.Imm(asm.R0, 0).WithSymbol(labelLost))
	p.count(2*int32(kind) + 1)
	p.emit(asm.Mov.Imm(asm.R0, 0), asm.Return())
	return p.insns
}

// filterFamily keeps the families the filter asks for; an IPv6 socket whose
// peer is IPv4-mapped counts as IPv4.
func (p *program) filterFamily() {
	l := p.l
	ok := p.label("family_ok")
	p.load(asm.R1, asm.R6, l.family)
	if p.f.Family == AnyFamily {
		p.emit(
			asm.JEq.Imm(asm.R1, afInet, ok),
			asm.JNE.Imm(asm.R1, afInet6, labelExit),
		)
		p.mark(ok)
		return
	}
	is4, is6 := p.label("is4"), p.label("is6")
	p.emit(asm.JEq.Imm(asm.R1, afInet, is4))
	p.emit(asm.JNE.Imm(asm.R1, afInet6, labelExit))
	p.loadWord(asm.R2, asm.R6, l.remoteAddr6, 0)
	p.emit(asm.JNE.Imm(asm.R2, 0, is6))
	p.emit(asm.LoadMem(asm.R2, asm.R6, l.remoteAddr6.offset+8, asm.Word))
	p.emit(asm.JNE.Imm32(asm.R2, int32(-65536) /* 0xffff0000: bytes 00 00 ff ff */, is6))
	p.emit(asm.Ja.Label(is4))
	if p.f.Family == IPv6 {
		p.emit(asm.Ja.Label(ok).WithSymbol(is6))
		p.emit(asm.Ja.Label(labelExit).WithSymbol(is4))
	} else {
		p.emit(asm.Ja.Label(labelExit).WithSymbol(is6))
		p.emit(asm.Ja.Label(ok).WithSymbol(is4))
	}
	p.mark(ok)
}

// filterNetns keeps sockets of the filter's network namespaces.
func (p *program) filterNetns() {
	if len(p.f.Netns) == 0 {
		return
	}
	ok := p.label("netns_ok")
	p.load(asm.R1, asm.R6, p.l.netPointer)
	p.load(asm.R1, asm.R1, p.l.netInode)
	for _, inode := range p.f.Netns {
		p.emit(asm.JEq.Imm32(asm.R1, int32(inode), ok))
	}
	p.emit(asm.Ja.Label(labelExit))
	p.mark(ok)
}

// filterPorts keeps sockets whose ports are set in the port bitmaps.
func (p *program) filterPorts() {
	if len(p.f.LocalPorts) > 0 {
		p.filterPort(asm.R8, p.l.localPort, 0)
	}
	if len(p.f.RemotePorts) > 0 {
		p.filterPort(asm.R6, p.l.remotePort, portBitmapWords)
	}
}

// filterPort tests one port's bit: word port/64 (plus base), bit port%64. The
// port is in network order in the struct src points to.
func (p *program) filterPort(src asm.Register, f field, base int32) {
	loadPort := func() {
		p.load(asm.R1, src, f)
		p.emit(asm.HostTo(asm.BE, asm.R1, asm.Half))
	}
	loadPort()
	p.emit(
		asm.RSh.Imm(asm.R1, 6),
		asm.Add.Imm(asm.R1, base),
		asm.StoreMem(asm.RFP, -24, asm.R1, asm.Word),
		loadMap(asm.R1, mapPorts),
		asm.Mov.Reg(asm.R2, asm.RFP),
		asm.Add.Imm(asm.R2, -24),
		asm.FnMapLookupElem.Call(),
		asm.JEq.Imm(asm.R0, 0, labelExit),
		asm.LoadMem(asm.R0, asm.R0, 0, asm.DWord),
	)
	loadPort()
	p.emit(
		asm.And.Imm(asm.R1, 63),
		asm.Mov.Imm(asm.R2, 1),
		asm.LSh.Reg(asm.R2, asm.R1),
		asm.And.Reg(asm.R0, asm.R2),
		asm.JEq.Imm(asm.R0, 0, labelExit),
	)
}

// filterLocalAddrs keeps sockets whose local address is in the address map.
func (p *program) filterLocalAddrs() {
	if len(p.f.LocalAddrs) == 0 {
		return
	}
	l := p.l
	v6, lookup := p.label("addr6"), p.label("addr_lookup")
	p.load(asm.R1, asm.R6, l.family)
	p.emit(
		asm.JEq.Imm(asm.R1, afInet6, v6),
		asm.Mov.Imm(asm.R1, 0),
		asm.StoreMem(asm.RFP, -16, asm.R1, asm.DWord),
		asm.StoreImm(asm.RFP, -8, int64(int32(-65536)), asm.Word),
	)
	p.load(asm.R1, asm.R6, l.localAddr4)
	p.emit(
		asm.StoreMem(asm.RFP, -4, asm.R1, asm.Word),
		asm.Ja.Label(lookup),
	)
	p.loadWord(asm.R1, asm.R6, l.localAddr6, 0)
	p.insns[len(p.insns)-1] = p.insns[len(p.insns)-1].WithSymbol(v6)
	p.emit(asm.StoreMem(asm.RFP, -16, asm.R1, asm.DWord))
	p.loadWord(asm.R1, asm.R6, l.localAddr6, 8)
	p.emit(asm.StoreMem(asm.RFP, -8, asm.R1, asm.DWord))
	p.mark(lookup)
	p.emit(
		loadMap(asm.R1, mapAddrs),
		asm.Mov.Reg(asm.R2, asm.RFP),
		asm.Add.Imm(asm.R2, -16),
		asm.FnMapLookupElem.Call(),
		asm.JEq.Imm(asm.R0, 0, labelExit),
	)
}

// recordSocket writes the socket's addresses, ports, family, state and
// namespace.
func (p *program) recordSocket() {
	l := p.l
	v6, done := p.label("rec6"), p.label("rec_addr_done")
	p.load(asm.R1, asm.R6, l.family)
	p.emit(
		asm.StoreMem(asm.R9, recFamily, asm.R1, asm.Byte),
		asm.JEq.Imm(asm.R1, afInet6, v6),
		asm.StoreImm(asm.R9, recLocalAddr+8, int64(int32(-65536)), asm.Word),
		asm.StoreImm(asm.R9, recRemoteAddr+8, int64(int32(-65536)), asm.Word),
	)
	p.load(asm.R1, asm.R6, l.localAddr4)
	p.emit(asm.StoreMem(asm.R9, recLocalAddr+12, asm.R1, asm.Word))
	p.load(asm.R1, asm.R6, l.remoteAddr4)
	p.emit(
		asm.StoreMem(asm.R9, recRemoteAddr+12, asm.R1, asm.Word),
		asm.Ja.Label(done),
	)
	for i, half := range []int16{0, 8} {
		p.loadWord(asm.R1, asm.R6, l.localAddr6, half)
		if i == 0 {
			p.insns[len(p.insns)-1] = p.insns[len(p.insns)-1].WithSymbol(v6)
		}
		p.emit(asm.StoreMem(asm.R9, recLocalAddr+half, asm.R1, asm.DWord))
		p.loadWord(asm.R1, asm.R6, l.remoteAddr6, half)
		p.emit(asm.StoreMem(asm.R9, recRemoteAddr+half, asm.R1, asm.DWord))
	}
	p.mark(done)
	p.load(asm.R1, asm.R8, l.localPort)
	p.emit(
		asm.HostTo(asm.BE, asm.R1, asm.Half),
		asm.StoreMem(asm.R9, recLocalPort, asm.R1, asm.Half),
	)
	p.load(asm.R1, asm.R6, l.remotePort)
	p.emit(
		asm.HostTo(asm.BE, asm.R1, asm.Half),
		asm.StoreMem(asm.R9, recRemotePort, asm.R1, asm.Half),
	)
	p.load(asm.R1, asm.R6, l.sockState)
	p.emit(asm.StoreMem(asm.R9, recSockState, asm.R1, asm.Byte))
	p.load(asm.R1, asm.R6, l.netPointer)
	p.load(asm.R1, asm.R1, l.netInode)
	p.emit(asm.StoreMem(asm.R9, recNetns, asm.R1, asm.Word))
}

// recordTCP writes the struct tcp_sock fields.
func (p *program) recordTCP() {
	l := p.l
	fields := [sockFieldCount]field{
		sockSndCwnd:      l.sndCwnd,
		sockSndSSThresh:  l.sndSSThresh,
		sockSndWnd:       l.sndWnd,
		sockRcvWnd:       l.rcvWnd,
		sockSRTT:         l.srttUs,
		sockMSS:          l.mssCache,
		sockSndUna:       l.sndUna,
		sockSndNxt:       l.sndNxt,
		sockWriteSeq:     l.writeSeq,
		sockRcvNxt:       l.rcvNxt,
		sockPacketsOut:   l.packetsOut,
		sockRetransOut:   l.retransOut,
		sockLostOut:      l.lostOut,
		sockSackedOut:    l.sackedOut,
		sockTotalRetrans: l.totalRetrans,
		sockDelivered:    l.delivered,
	}
	for i, f := range fields {
		p.load(asm.R1, asm.R8, f)
		p.emit(asm.StoreMem(asm.R9, recSock+4*int16(i), asm.R1, asm.Word))
	}
	p.load(asm.R1, asm.R8, l.caState)
	p.emit(asm.StoreMem(asm.R9, recCAState, asm.R1, asm.Byte))
}

// recordSegment writes the sequence range, flags and mark of the sk_buff in R2
// (and its ACK number for a received one) from its control block.
func (p *program) recordSegment(received bool) {
	l := p.l
	skip := p.label("no_skb")
	p.emit(asm.JEq.Imm(asm.R2, 0, skip))
	cb := l.skbCB.offset
	p.emit(
		asm.LoadMem(asm.R1, asm.R2, cb+l.cbSeq.offset, asm.Word),
		asm.StoreMem(asm.R9, recSeq, asm.R1, asm.Word),
		asm.LoadMem(asm.R1, asm.R2, cb+l.cbEndSeq.offset, asm.Word),
		asm.StoreMem(asm.R9, recEndSeq, asm.R1, asm.Word),
		asm.LoadMem(asm.R1, asm.R2, cb+l.cbFlags.offset, sizeOf(l.cbFlags.size)),
		asm.StoreMem(asm.R9, recFlags, asm.R1, asm.Half),
	)
	if received {
		p.emit(
			asm.LoadMem(asm.R1, asm.R2, cb+l.cbAckSeq.offset, asm.Word),
			asm.StoreMem(asm.R9, recAckSeq, asm.R1, asm.Word),
		)
	}
	p.load(asm.R1, asm.R2, l.skbMark)
	p.emit(asm.StoreMem(asm.R9, recMark, asm.R1, asm.Word))
	p.mark(skip)
}

// recordCongestionControl writes the name of the socket's congestion control.
func (p *program) recordCongestionControl() {
	l := p.l
	skip := p.label("no_ca")
	p.load(asm.R1, asm.R8, l.caOps)
	p.emit(asm.JEq.Imm(asm.R1, 0, skip))
	p.loadWord(asm.R2, asm.R1, l.caName, 0)
	p.emit(asm.StoreMem(asm.R9, recCAName, asm.R2, asm.DWord))
	p.loadWord(asm.R2, asm.R1, l.caName, 8)
	p.emit(asm.StoreMem(asm.R9, recCAName+8, asm.R2, asm.DWord))
	p.mark(skip)
}

// count adds one to a per-CPU counter.
func (p *program) count(slot int32) {
	skip := p.label("no_counter")
	p.emit(
		asm.StoreImm(asm.RFP, -24, int64(slot), asm.Word),
		loadMap(asm.R1, mapCounters),
		asm.Mov.Reg(asm.R2, asm.RFP),
		asm.Add.Imm(asm.R2, -24),
		asm.FnMapLookupElem.Call(),
		asm.JEq.Imm(asm.R0, 0, skip),
		asm.Mov.Imm(asm.R1, 1),
		asm.StoreXAdd(asm.R0, asm.R1, asm.DWord),
	)
	p.mark(skip)
}

// buildMarker assembles the program Sync runs (BPF_PROG_TEST_RUN) to put a
// marker record in the ring: the sequence number in the sync map. It returns 1
// when the marker is in the ring, 0 when the ring was full.
func buildMarker() asm.Instructions {
	insns := asm.Instructions{
		asm.StoreImm(asm.RFP, -8, 0, asm.Word),
		loadMap(asm.R1, mapSync),
		asm.Mov.Reg(asm.R2, asm.RFP),
		asm.Add.Imm(asm.R2, -8),
		asm.FnMapLookupElem.Call(),
		asm.JEq.Imm(asm.R0, 0, "full"),
		asm.LoadMem(asm.R6, asm.R0, 0, asm.DWord),
		loadMap(asm.R1, mapRing),
		asm.Mov.Imm(asm.R2, recordSize),
		asm.Mov.Imm(asm.R3, 0),
		asm.FnRingbufReserve.Call(),
		asm.JEq.Imm(asm.R0, 0, "full"),
		asm.Mov.Reg(asm.R9, asm.R0),
	}
	insns = append(insns, zeroRecord(asm.R9)...)
	return append(insns,
		asm.StoreMem(asm.R9, recCookie, asm.R6, asm.DWord),
		asm.StoreImm(asm.R9, recKind, int64(kindMarker), asm.Byte),
		asm.Mov.Reg(asm.R1, asm.R9),
		asm.Mov.Imm(asm.R2, 2 /* BPF_RB_FORCE_WAKEUP */),
		asm.FnRingbufSubmit.Call(),
		asm.Mov.Imm(asm.R0, 1),
		asm.Return(),
		asm.Mov.Imm(asm.R0, 0).WithSymbol("full"),
		asm.Return(),
	)
}
