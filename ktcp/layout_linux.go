package ktcp

import (
	"errors"
	"fmt"
	"strings"

	"github.com/cilium/ebpf/btf"
)

// field is where one kernel struct member lies, read from the kernel's BTF: the
// byte offset from the start of the struct the program holds a pointer to, the
// size in bytes of the load that reads it, and for a bitfield the bit shift and
// width to apply after the load.
type field struct {
	offset   int16
	size     int // 1, 2, 4 or 8 bytes
	shift    int // bitfields only: bits to shift right after the load
	bitWidth int // bitfields only: 0 for a whole member
}

// layout holds every field the programs read. The programs are assembled at load
// time with these offsets, so that one binary reads any kernel whose BTF has the
// members, wherever they lie (what a CO-RE relocation does for a compiled program).
type layout struct {
	// struct sock (and its sock_common)
	family, protocol, sockState field
	localPort, remotePort       field // inet_sport (of struct tcp_sock), skc_dport: network order
	localAddr4, remoteAddr4     field // skc_rcv_saddr, skc_daddr
	localAddr6, remoteAddr6     field // skc_v6_rcv_saddr, skc_v6_daddr (16 bytes: read as two loads of 8)
	netPointer                  field // skc_net.net: struct net *
	netInode                    field // struct net: ns.inum
	// struct tcp_sock
	sndCwnd, sndSSThresh, sndWnd, rcvWnd field
	srttUs, mssCache                     field
	sndUna, sndNxt, writeSeq, rcvNxt     field
	packetsOut, retransOut, lostOut      field
	sackedOut, totalRetrans, delivered   field
	caState                              field // inet_conn.icsk_ca_state (a bitfield)
	caOps                                field // inet_conn.icsk_ca_ops: const struct tcp_congestion_ops *
	caName                               field // struct tcp_congestion_ops: name (char[16])
	// struct sk_buff
	skbCB, skbMark, skbLen field
	// struct tcp_skb_cb, inside sk_buff.cb
	cbSeq, cbEndSeq, cbFlags, cbAckSeq field
}

// tracepoint names the kernel tracepoints the programs attach to, with the number
// of arguments each must take (its btf_trace_<name> prototype, after the context).
var tracepointArgs = map[string]int{
	"tcp_probe":           2, // (struct sock *sk, struct sk_buff *skb)
	"inet_sock_set_state": 3, // (const struct sock *sk, const int oldstate, const int newstate)
	"tcp_retransmit_skb":  3, // (const struct sock *sk, const struct sk_buff *skb, int err)
	"tcp_cong_state_set":  2, // (struct sock *sk, const u8 ca_state)
}

// loadLayout reads the field offsets from the kernel's BTF and checks that each
// tracepoint takes the arguments the programs expect.
func loadLayout(spec *btf.Spec) (*layout, error) {
	r := resolver{spec: spec}
	l := &layout{
		family:    r.field("sock", "__sk_common.skc_family"),
		protocol:  r.field("sock", "sk_protocol"),
		sockState: r.field("sock", "__sk_common.skc_state"),
		// Not skc_num: the kernel clears it when the socket closes, before the
		// state change to CLOSE fires (inet_put_port); inet_sport stays.
		localPort:   r.field("tcp_sock", "inet_conn.icsk_inet.inet_sport"),
		remotePort:  r.field("sock", "__sk_common.skc_dport"),
		localAddr4:  r.field("sock", "__sk_common.skc_rcv_saddr"),
		remoteAddr4: r.field("sock", "__sk_common.skc_daddr"),
		localAddr6:  r.field("sock", "__sk_common.skc_v6_rcv_saddr"),
		remoteAddr6: r.field("sock", "__sk_common.skc_v6_daddr"),
		netPointer:  r.field("sock", "__sk_common.skc_net.net"),
		netInode:    r.field("net", "ns.inum"),

		sndCwnd:      r.field("tcp_sock", "snd_cwnd"),
		sndSSThresh:  r.field("tcp_sock", "snd_ssthresh"),
		sndWnd:       r.field("tcp_sock", "snd_wnd"),
		rcvWnd:       r.field("tcp_sock", "rcv_wnd"),
		srttUs:       r.field("tcp_sock", "srtt_us"),
		mssCache:     r.field("tcp_sock", "mss_cache"),
		sndUna:       r.field("tcp_sock", "snd_una"),
		sndNxt:       r.field("tcp_sock", "snd_nxt"),
		writeSeq:     r.field("tcp_sock", "write_seq"),
		rcvNxt:       r.field("tcp_sock", "rcv_nxt"),
		packetsOut:   r.field("tcp_sock", "packets_out"),
		retransOut:   r.field("tcp_sock", "retrans_out"),
		lostOut:      r.field("tcp_sock", "lost_out"),
		sackedOut:    r.field("tcp_sock", "sacked_out"),
		totalRetrans: r.field("tcp_sock", "total_retrans"),
		delivered:    r.field("tcp_sock", "delivered"),
		caState:      r.field("tcp_sock", "inet_conn.icsk_ca_state"),
		caOps:        r.field("tcp_sock", "inet_conn.icsk_ca_ops"),
		caName:       r.field("tcp_congestion_ops", "name"),

		skbCB:   r.field("sk_buff", "cb"),
		skbMark: r.field("sk_buff", "mark"),
		skbLen:  r.field("sk_buff", "len"),

		cbSeq:    r.field("tcp_skb_cb", "seq"),
		cbEndSeq: r.field("tcp_skb_cb", "end_seq"),
		cbFlags:  r.field("tcp_skb_cb", "tcp_flags"),
		cbAckSeq: r.field("tcp_skb_cb", "ack_seq"),
	}
	if r.err != nil {
		return nil, r.err
	}
	// The checks the programs rely on beyond the offsets.
	switch {
	case l.localAddr6.size != 16 || l.remoteAddr6.size != 16:
		return nil, fmt.Errorf("kernel BTF: struct in6_addr is %d bytes, not 16", l.localAddr6.size)
	case l.caName.size < 16:
		return nil, fmt.Errorf("kernel BTF: tcp_congestion_ops.name is %d bytes, not 16", l.caName.size)
	case l.skbCB.size < int(l.cbAckSeq.offset)+4:
		return nil, fmt.Errorf("kernel BTF: sk_buff.cb (%d bytes) cannot hold tcp_skb_cb's ack_seq at %d", l.skbCB.size, l.cbAckSeq.offset)
	}
	for _, f := range []field{l.family, l.protocol, l.localPort, l.remotePort} {
		if f.size != 2 || f.bitWidth != 0 {
			return nil, errors.New("kernel BTF: the socket's family, protocol or ports are not 16-bit members")
		}
	}
	for _, f := range []field{l.localAddr4, l.remoteAddr4, l.netInode, l.sndCwnd, l.sndSSThresh, l.sndWnd, l.rcvWnd,
		l.srttUs, l.mssCache, l.sndUna, l.sndNxt, l.writeSeq, l.rcvNxt, l.packetsOut, l.retransOut, l.lostOut,
		l.sackedOut, l.totalRetrans, l.delivered, l.skbMark, l.skbLen, l.cbSeq, l.cbEndSeq, l.cbAckSeq} {
		if f.size != 4 || f.bitWidth != 0 {
			return nil, errors.New("kernel BTF: a TCP socket or segment field the programs read as 32 bits has another size")
		}
	}
	if l.sockState.size != 1 || l.sockState.bitWidth != 0 {
		return nil, errors.New("kernel BTF: skc_state is not one byte")
	}
	if l.netPointer.size != 8 || l.caOps.size != 8 {
		return nil, errors.New("kernel BTF: pointers are not 8 bytes")
	}
	if l.caState.bitWidth == 0 || l.caState.size != 1 || l.caState.shift+l.caState.bitWidth > 8 {
		return nil, errors.New("kernel BTF: icsk_ca_state is not a bitfield within one byte")
	}
	if l.cbFlags.size != 1 && l.cbFlags.size != 2 {
		return nil, fmt.Errorf("kernel BTF: tcp_skb_cb.tcp_flags is %d bytes", l.cbFlags.size)
	}
	return l, nil
}

// resolver finds members in the kernel's BTF and keeps the first error.
type resolver struct {
	spec *btf.Spec
	err  error
}

// field resolves a dotted path of members from a struct, stepping through
// anonymous unions and structs as C does.
func (r *resolver) field(structName, path string) field {
	if r.err != nil {
		return field{}
	}
	var s *btf.Struct
	if err := r.spec.TypeByName(structName, &s); err != nil {
		r.err = fmt.Errorf("kernel BTF: struct %s: %w", structName, err)
		return field{}
	}
	var typ btf.Type = s
	var bits btf.Bits
	var last btf.Member
	for _, name := range strings.Split(path, ".") {
		member, offset, ok := findMember(typ, name)
		if !ok {
			r.err = fmt.Errorf("kernel BTF: struct %s has no member %s", structName, path)
			return field{}
		}
		bits += offset
		last = member
		typ = member.Type
	}
	size, err := btf.Sizeof(last.Type)
	if err != nil {
		r.err = fmt.Errorf("kernel BTF: size of %s.%s: %w", structName, path, err)
		return field{}
	}
	f := field{size: size}
	if last.BitfieldSize > 0 {
		// A bitfield: load the byte that holds it (little-endian bit order).
		f.offset = int16(bits / 8)
		f.size = 1
		f.shift = int(bits % 8)
		f.bitWidth = int(last.BitfieldSize)
	} else {
		if bits%8 != 0 {
			r.err = fmt.Errorf("kernel BTF: %s.%s is not byte-aligned", structName, path)
			return field{}
		}
		f.offset = int16(bits / 8)
	}
	if bits/8 > 1<<15-1 {
		r.err = fmt.Errorf("kernel BTF: %s.%s lies beyond what one load can reach", structName, path)
	}
	return f
}

// findMember looks for a member by name in a struct or union, and inside its
// anonymous members; offset is in bits from the start of typ.
func findMember(typ btf.Type, name string) (btf.Member, btf.Bits, bool) {
	var members []btf.Member
	switch t := btf.UnderlyingType(typ).(type) {
	case *btf.Struct:
		members = t.Members
	case *btf.Union:
		members = t.Members
	default:
		return btf.Member{}, 0, false
	}
	for _, m := range members {
		if m.Name == name {
			return m, m.Offset, true
		}
	}
	for _, m := range members {
		if m.Name != "" {
			continue
		}
		if inner, offset, ok := findMember(m.Type, name); ok {
			return inner, m.Offset + offset, true
		}
	}
	return btf.Member{}, 0, false
}

// checkTracepoint checks that the kernel has the BTF tracepoint and that it
// takes the number of arguments the program reads.
func checkTracepoint(spec *btf.Spec, name string) error {
	args := tracepointArgs[name]
	var td *btf.Typedef
	if err := spec.TypeByName("btf_trace_"+name, &td); err != nil {
		return &missingTracepointError{name: name, err: err}
	}
	pointer, ok := btf.UnderlyingType(td.Type).(*btf.Pointer)
	if !ok {
		return fmt.Errorf("kernel BTF: btf_trace_%s is not a function pointer", name)
	}
	proto, ok := btf.UnderlyingType(pointer.Target).(*btf.FuncProto)
	if !ok {
		return fmt.Errorf("kernel BTF: btf_trace_%s is not a function pointer", name)
	}
	// The first parameter is the tracepoint's private data, not an argument.
	if got := len(proto.Params) - 1; got != args {
		return fmt.Errorf("kernel BTF: tracepoint %s takes %d arguments, this version of slowstart reads %d", name, got, args)
	}
	return nil
}

// missingTracepointError: the kernel has no such tracepoint.
type missingTracepointError struct {
	name string
	err  error
}

func (e *missingTracepointError) Error() string {
	return fmt.Sprintf("this kernel has no tracepoint %s (%v)", e.name, e.err)
}

func (e *missingTracepointError) Unwrap() error { return e.err }
