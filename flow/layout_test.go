package flow

import (
	"reflect"
	"testing"
)

// TestDirStateHotFields: the fields a packet reads or writes lie in the first
// part of Conn and of each DirState, so that a packet of a connection whose
// state is no longer in the cache waits for as few cache lines as can be (a
// capture of 50,000 open connections reads most of a connection's state from
// memory). The lines of Conn those parts lie in are counted, with Conn at the
// start of a line (the allocator's 896-byte class is made of whole 64-byte
// lines); a field moved below the cold fields' marker, or a large field added
// above it, fails here.
func TestDirStateHotFields(t *testing.T) {
	const line = 64
	// field is the named field of ty (a name that is none fails the test,
	// rather than reading as offset 0, the hot part).
	field := func(ty reflect.Type, name string) reflect.StructField {
		f, ok := ty.FieldByName(name)
		if !ok {
			t.Fatalf("%s has no field %s", ty.Name(), name)
		}
		return f
	}
	connType, dirType := reflect.TypeOf(Conn{}), reflect.TypeOf(DirState{})
	dirs, dirHotEnd := field(connType, "Dirs"), field(dirType, "SYN").Offset
	lines := map[uintptr]bool{}
	touch := func(from, to uintptr) {
		for l := from / line; l <= (to-1)/line; l++ {
			lines[l] = true
		}
	}
	// Conn's own hot fields end where Dirs begins; each DirState's at SYN.
	touch(0, dirs.Offset)
	for d := range 2 {
		start := dirs.Offset + uintptr(d)*dirType.Size()
		touch(start, start+dirHotEnd)
	}
	if field(connType, "Index").Offset < dirs.Offset+dirs.Type.Size() {
		t.Fatalf("Conn's fields are not hot, Dirs, cold")
	}
	// What a packet reads: in the hot parts.
	for _, name := range []string{"lastSeq", "lastOffset", "baseSet", "ackSent", "ackOffset", "ackWindow", "dataSeen", "SYNSeen",
		"HighestEnd", "highestTimeNs", "HighestAckByPeer", "finOffset", "FINSeen", "RSTSeen", "WindowScale", "Packets", "Bytes",
		"timing", "timedEnd", "timedNs", "floorTiming", "floorEnd", "floorNs", "MinAckDelayNs", "SYNCount", "lastRecent", "recent"} {
		if field(dirType, name).Offset >= dirHotEnd {
			t.Errorf("DirState.%s is among the fields a packet seldom reads", name)
		}
	}
	for _, name := range []string{"Client", "Server", "sameHash", "handler", "LastNs", "SYNNs", "SYNACKNs", "HandshakeACKNs",
		"synAcks", "heapPos", "closing", "done", "SYNACKInferred", "rstBeforeHandshake", "sawOther"} {
		if field(connType, name).Offset >= dirs.Offset {
			t.Errorf("Conn.%s is among the fields a packet seldom reads", name)
		}
	}
	if len(lines) > 10 {
		t.Errorf("a packet touches %d cache lines of its Conn, want at most 10 (of %d)", len(lines), (connType.Size()+line-1)/line)
	}
}
