package capture

import (
	"encoding/binary"
	"fmt"
	"math"

	"golang.org/x/net/bpf"
)

// The kernel filter of a live capture: a classic BPF program over packets
// that start at the IP header (what a SOCK_DGRAM packet socket sees, whatever
// the link layer). It returns the snap length for a packet to keep and 0 for
// one to drop. It reads the IP version from the packet's first nibble:
// the kernel's protocol field is a BPF extension that golang.org/x/net/bpf's
// VM cannot run, and the unit tests run the program in that VM.

// Offsets into IPv4 and IPv6 headers and TCP headers, in bytes.
const (
	ipv4ProtocolOffset  = 9
	ipv4FragmentOffset  = 6      // flags and fragment offset
	ipv4FragmentMask    = 0x1fff // the fragment offset bits
	ipv4SrcOffset       = 12
	ipv4DstOffset       = 16
	ipv6NextHeaderOff   = 6
	ipv6SrcOffset       = 8
	ipv6DstOffset       = 24
	tcpSrcPortOffset    = 0
	tcpDstPortOffset    = 2
	ipProtocolTCP       = 6
	ipVersionNibbleMask = 0xf0
	ipVersion4Nibble    = 0x40
	ipVersion6Nibble    = 0x60
)

// Labels every program has.
const (
	labelAccept = "accept"
	labelDrop   = "drop"
)

// dropAllProgram keeps nothing: the filter a capture socket gets before it is
// bound, and again at Stop.
func dropAllProgram() []bpf.RawInstruction {
	ret, _ := bpf.RetConstant{Val: 0}.Assemble() // cannot fail
	return []bpf.RawInstruction{ret}
}

// filterProgram compiles f into a program that keeps snaplen bytes of each
// matching packet.
func filterProgram(f Filter, snaplen int) ([]bpf.RawInstruction, error) {
	if snaplen <= 0 || snaplen > math.MaxInt32 {
		return nil, fmt.Errorf("capture: snap length %d out of range (1 to 2^31-1 bytes)", snaplen)
	}
	remote := f.Remote.Unmap()
	var a bpfAssembler

	// Dispatch on the IP version, keeping only the families the remote allows.
	a.op(bpf.LoadAbsolute{Off: 0, Size: 1})
	a.op(bpf.ALUOpConstant{Op: bpf.ALUOpAnd, Val: ipVersionNibbleMask})
	switch {
	case remote.Is4():
		a.jump(bpf.JumpEqual, ipVersion4Nibble, "v4", labelDrop)
	case remote.Is6():
		a.jump(bpf.JumpEqual, ipVersion6Nibble, "v6", labelDrop)
	default:
		a.jump(bpf.JumpEqual, ipVersion4Nibble, "v4", "")
		a.jump(bpf.JumpEqual, ipVersion6Nibble, "v6", labelDrop)
	}

	if !remote.Is6() {
		a.label("v4")
		a.op(bpf.LoadAbsolute{Off: ipv4ProtocolOffset, Size: 1})
		a.jump(bpf.JumpEqual, ipProtocolTCP, "", labelDrop)
		a.op(bpf.LoadAbsolute{Off: ipv4FragmentOffset, Size: 2})
		a.jump(bpf.JumpBitsSet, ipv4FragmentMask, labelDrop, "")
		a.op(bpf.LoadMemShift{Off: 0}) // X = the IPv4 header length (IHL * 4)
		a.endpoints("v4", f, ipv4SrcOffset, ipv4DstOffset)
	}
	if !remote.Is4() {
		a.label("v6")
		a.op(bpf.LoadAbsolute{Off: ipv6NextHeaderOff, Size: 1})
		a.jump(bpf.JumpEqual, ipProtocolTCP, "", labelDrop)
		a.op(bpf.LoadConstant{Dst: bpf.RegX, Val: ipv6HeaderBytes})
		a.endpoints("v6", f, ipv6SrcOffset, ipv6DstOffset)
	}

	a.label(labelAccept)
	a.op(bpf.RetConstant{Val: uint32(snaplen)})
	a.label(labelDrop)
	a.op(bpf.RetConstant{Val: 0})
	return a.assemble()
}

// endpoints matches the filter's remote address and ports in either
// direction: first with the remote as the source, then as the destination.
// X holds the offset of the TCP header.
func (a *bpfAssembler) endpoints(family string, f Filter, srcOffset, dstOffset uint32) {
	remote := f.Remote.Unmap()
	remoteIsDst := family + ".remote-is-dst"
	directions := []struct {
		remoteAddrOffset              uint32
		remotePortOffset, localOffset uint32
		onMismatch                    string
	}{
		{srcOffset, tcpSrcPortOffset, tcpDstPortOffset, remoteIsDst},
		{dstOffset, tcpDstPortOffset, tcpSrcPortOffset, labelDrop},
	}
	if !remote.IsValid() && f.Port == 0 && f.LocalPort == 0 {
		a.jumpAlways(labelAccept)
		return
	}
	for i, d := range directions {
		if i == 1 {
			a.label(remoteIsDst)
		}
		if remote.IsValid() {
			addr := remote.AsSlice()
			for word := 0; word < len(addr); word += 4 {
				a.op(bpf.LoadAbsolute{Off: d.remoteAddrOffset + uint32(word), Size: 4})
				a.jump(bpf.JumpEqual, binary.BigEndian.Uint32(addr[word:]), "", d.onMismatch)
			}
		}
		if f.Port != 0 {
			a.op(bpf.LoadIndirect{Off: d.remotePortOffset, Size: 2})
			a.jump(bpf.JumpEqual, uint32(f.Port), "", d.onMismatch)
		}
		if f.LocalPort != 0 {
			a.op(bpf.LoadIndirect{Off: d.localOffset, Size: 2})
			a.jump(bpf.JumpEqual, uint32(f.LocalPort), "", d.onMismatch)
		}
		a.jumpAlways(labelAccept)
	}
}

// bpfAssembler builds a program with named jump targets; classic BPF jumps
// only forward, by instruction counts that assemble works out.
type bpfAssembler struct {
	steps  []bpfStep
	labels map[string]int // label -> index of the instruction it names
}

// bpfStep is one instruction; for a jump, the targets by label ("" = the next
// instruction).
type bpfStep struct {
	op              bpf.Instruction
	isJump, always  bool
	cond            bpf.JumpTest
	val             uint32
	ifTrue, ifFalse string
}

func (a *bpfAssembler) op(op bpf.Instruction) { a.steps = append(a.steps, bpfStep{op: op}) }

func (a *bpfAssembler) jump(cond bpf.JumpTest, val uint32, ifTrue, ifFalse string) {
	a.steps = append(a.steps, bpfStep{isJump: true, cond: cond, val: val, ifTrue: ifTrue, ifFalse: ifFalse})
}

func (a *bpfAssembler) jumpAlways(target string) {
	a.steps = append(a.steps, bpfStep{isJump: true, always: true, ifTrue: target})
}

func (a *bpfAssembler) label(name string) {
	if a.labels == nil {
		a.labels = map[string]int{}
	}
	a.labels[name] = len(a.steps)
}

// assemble resolves the labels and encodes the program.
func (a *bpfAssembler) assemble() ([]bpf.RawInstruction, error) {
	skipTo := func(from int, target string) (uint32, error) {
		if target == "" {
			return 0, nil
		}
		to, ok := a.labels[target]
		if !ok {
			return 0, fmt.Errorf("capture: BPF label %q is not defined", target)
		}
		skip := to - from - 1
		if skip < 0 {
			return 0, fmt.Errorf("capture: BPF jump backwards to %q", target)
		}
		return uint32(skip), nil
	}
	ops := make([]bpf.Instruction, 0, len(a.steps))
	for i, s := range a.steps {
		if !s.isJump {
			ops = append(ops, s.op)
			continue
		}
		skipTrue, err := skipTo(i, s.ifTrue)
		if err != nil {
			return nil, err
		}
		if s.always {
			ops = append(ops, bpf.Jump{Skip: skipTrue})
			continue
		}
		skipFalse, err := skipTo(i, s.ifFalse)
		if err != nil {
			return nil, err
		}
		if skipTrue > math.MaxUint8 || skipFalse > math.MaxUint8 {
			return nil, fmt.Errorf("capture: BPF program too long for a conditional jump at %d", i)
		}
		ops = append(ops, bpf.JumpIf{Cond: s.cond, Val: s.val, SkipTrue: uint8(skipTrue), SkipFalse: uint8(skipFalse)})
	}
	raw, err := bpf.Assemble(ops)
	if err != nil {
		return nil, fmt.Errorf("capture: assembling the BPF filter: %w", err)
	}
	return raw, nil
}
