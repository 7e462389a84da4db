package analysis

import "encoding/binary"

// timedMessage remembers when an HTTP message's first and last bytes were seen.
type timedMessage struct {
	firstNs, lastNs int64
}

// messageTimes holds the times of one direction's HTTP messages, in order. Those
// of messages whose last byte was seen change no more and are encoded (two
// varints each: the first byte's time after the last byte of the message
// before, the last byte's after the first); the others are timedMessage values.
type messageTimes struct {
	coded      []byte
	frozen     int
	prevLastNs int64 // the last encoded message's lastNs
	open       []timedMessage
}

func (t *messageTimes) Len() int { return t.frozen + len(t.open) }

// Append adds the times of the next message.
func (t *messageTimes) Append(m timedMessage) { t.open = append(t.open, m) }

// Timed reports whether message i's last byte has a time.
func (t *messageTimes) Timed(i int) bool { return i < t.frozen || t.open[i-t.frozen].lastNs != 0 }

// Open is message i's times, for one not encoded yet (not before the first
// untimed one, see freeze).
func (t *messageTimes) Open(i int) *timedMessage { return &t.open[i-t.frozen] }

// freeze encodes the times of the messages before message n, all timed.
func (t *messageTimes) freeze(n int) {
	k := n - t.frozen
	if k <= 0 {
		return
	}
	for _, m := range t.open[:k] {
		t.coded = binary.AppendVarint(t.coded, m.firstNs-t.prevLastNs)
		t.coded = binary.AppendVarint(t.coded, m.lastNs-m.firstNs)
		t.prevLastNs = m.lastNs
	}
	t.frozen = n
	rest := copy(t.open, t.open[k:])
	t.open = t.open[:rest]
}

// All returns every message's times, in a slice of its own.
func (t *messageTimes) All() []timedMessage {
	out := make([]timedMessage, 0, t.Len())
	buf := t.coded
	var last int64
	for range t.frozen {
		d, n := binary.Varint(buf)
		buf = buf[n:]
		span, k := binary.Varint(buf)
		buf = buf[k:]
		m := timedMessage{firstNs: last + d}
		m.lastNs = m.firstNs + span
		last = m.lastNs
		out = append(out, m)
	}
	return append(out, t.open...)
}
