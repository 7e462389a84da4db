package capture

import (
	"fmt"
	"strings"
)

// Damage says where an input was damaged and what the Reader skipped to read
// on. A damaged place is a record header or pcapng block that cannot be read
// (an impossible length, lengths that disagree, an interface that does not
// exist); the Reader skips to the next place where records can be read again
// (see docs/capture.md) and carries on. How many records the skipped bytes
// held is not known: each place cost at least one.
type Damage struct {
	// Input names the damaged input (its path for Open and OpenFiles, "" for
	// NewReader). In the Stats of several inputs it is the first damaged one.
	Input string
	// Record is the number of the first damaged record: one more than the
	// records read before it (0 when nothing was damaged).
	Record int64
	// Offset is where the first damaged record starts, in bytes from the start
	// of the file (of the decompressed stream, for a gzip-compressed file).
	Offset int64
	// Places counts the damaged places, Bytes the bytes skipped over at them.
	Places int64
	Bytes  int64
	// ToEnd is set when no readable record followed the last damaged place:
	// the rest of the input was skipped (or could not be decompressed).
	ToEnd bool
}

// place counts a damaged place that starts at offset, before the record
// numbered record.
func (d *Damage) place(record, offset int64) {
	if d.Places == 0 {
		d.Record, d.Offset = record, offset
	}
	d.Places++
	d.ToEnd = false
}

// add sums another input's damage into d (the first damage stays first).
func (d *Damage) add(other Damage) {
	if other.Places == 0 {
		return
	}
	if d.Places == 0 {
		d.Input, d.Record, d.Offset = other.Input, other.Record, other.Offset
	}
	d.Places += other.Places
	d.Bytes += other.Bytes
	d.ToEnd = d.ToEnd || other.ToEnd
}

// DamageError is what Next returns, in place of io.EOF, after the last record
// of an input with damaged places: every readable record was read first.
// errors.Is(err, ErrDamaged) holds for it.
type DamageError struct {
	Damage
	// Cause is the read error that ended the input (a gzip stream that cannot
	// be decompressed further), or nil when the input was read to its end.
	Cause error
}

func (e *DamageError) Error() string {
	var b strings.Builder
	b.WriteString("capture: ")
	if e.Input != "" {
		b.WriteString(e.Input + ": ")
	}
	if e.Cause != nil && e.Places <= 1 { // only the read error that ended the input
		fmt.Fprintf(&b, "reading record %d (byte %d): %v: %v (the records before it were read)", e.Record, e.Offset, ErrDamaged, e.Cause)
		return b.String()
	}
	fmt.Fprintf(&b, "record %d (byte %d) is damaged", e.Record, e.Offset)
	if e.Places > 1 {
		fmt.Fprintf(&b, ", and %d more places after it", e.Places-1)
	}
	fmt.Fprintf(&b, ": %d bytes skipped", e.Bytes)
	switch {
	case e.Cause != nil:
		fmt.Fprintf(&b, "; at the last place reading stopped: %v", e.Cause)
	case e.ToEnd:
		b.WriteString(", to the end of the file: no readable record follows")
	default:
		b.WriteString("; the records around it were read")
	}
	return b.String()
}

// Unwrap makes errors.Is(err, ErrDamaged) hold, and errors.Is and errors.As
// reach the Cause.
func (e *DamageError) Unwrap() []error {
	if e.Cause != nil {
		return []error{ErrDamaged, e.Cause}
	}
	return []error{ErrDamaged}
}
