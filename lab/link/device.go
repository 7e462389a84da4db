package link

// Device is a source and sink of IP packets, read and written in batches to keep system
// calls off the per-packet path (in the spirit of wireguard-go's tun.Device). NewTUN
// wraps a TUN device; tests can supply their own.
type Device interface {
	// Read blocks until at least one packet is available, then fills bufs[0:n] with up to
	// len(bufs) packets without blocking again, and their lengths in sizes[0:n]. A packet
	// longer than its buffer is cut short: its size then equals len(buf).
	Read(bufs [][]byte, sizes []int) (n int, err error)
	// Write sends each of bufs as one packet, in order, and returns how many it sent. On
	// an error the packet bufs[n] was not sent; the caller may go on with bufs[n+1:].
	Write(bufs [][]byte) (n int, err error)
	// Close releases the device and makes blocked Read and Write calls return.
	Close() error
}

// PollableDevice is a Device that can also be read without waiting, for the emulator's
// polling mode (RunOptions.Poll).
type PollableDevice interface {
	Device
	// TryRead is Read that returns 0 packets at once when none is waiting.
	TryRead(bufs [][]byte, sizes []int) (n int, err error)
}
