package report

// writeQUIC writes the QUIC facts of a connection: the client's first flight, the
// amplification budget and what the server sent in round 1.
func writeQUIC(bw *ErrWriter, q *QUIC) {
	line := "  QUIC: the client's first flight " + Size(int64(q.ClientInitialBytes)) +
		", so the server could send " + Size(int64(q.AmplificationLimitBytes)) +
		" before validating its address; it sent " + Size(int64(q.ServerFirstFlightBytes)) + " in round 1"
	if q.AmplificationLimited {
		line += " and stopped at that limit"
	}
	if q.CertificateBytes > 0 {
		line += "; certificate " + Size(int64(q.CertificateBytes))
		if q.CertificateCompressed {
			line += " (compressed)"
		}
	}
	bw.Printf("%s\n", line)
	if q.Decrypted != "all" {
		bw.Printf("  QUIC: only the Initial packets were decrypted (no key log for this connection)\n")
	}
}
