package tlsrec

import (
	"crypto/tls"
	"reflect"
	"testing"

	"github.com/slowstart/slowstart/internal/streamtest"
)

func FuzzTLSStream(f *testing.F) {
	clientHello := handshakeMessage(HandshakeClientHello, clientHelloBody("example.test", []string{"h2"}, []uint16{VersionTLS13, VersionTLS12}))
	f.Add(record(ContentHandshake, clientHello), []byte{3, 0x80 | 7, 0x40 | 20})
	f.Add(concat(record(ContentHandshake, handshakeMessage(HandshakeServerHello, serverHelloBody(make([]byte, 32), 0x1301, VersionTLS13))),
		record(ContentChangeCipherSpec, []byte{1}), record(ContentApplicationData, make([]byte, 70))), []byte{0x3f, 0xc0 | 5, 1})
	if !testing.Short() {
		// Real handshakes make good seeds; they cost a few milliseconds each.
		certificate := selfSignedCertificate(f, 5)
		for _, version := range []uint16{tls.VersionTLS12, tls.VersionTLS13} {
			session := runTLS(f, version, certificate, 300)
			f.Add(session.clientStream, []byte{1, 2, 3, 0x45})
			f.Add(session.serverStream, []byte{0x7f, 0xbf, 0x3f, 0xff})
		}
	}
	f.Fuzz(func(t *testing.T, stream, plan []byte) {
		single := parse(streamtest.Whole(stream))
		checkRecordOrder(t, single.Records())

		// Fully captured, split anyhow: the same as one piece, unless sync was lost
		// (then resynchronization depends on where segments start).
		split := parse(streamtest.Plan(stream, plan, true))
		if single.LostAt() < 0 {
			if !reflect.DeepEqual(split.Records(), single.Records()) || !reflect.DeepEqual(split.Hello(), single.Hello()) {
				t.Fatalf("split parse differs from one piece:\n got %+v\nwant %+v", split.Records(), single.Records())
			}
		}

		// Cut and holed: ordered records, and those before any loss are real ones.
		cut := parse(streamtest.Plan(stream, plan, false))
		checkRecordOrder(t, cut.Records())
		if single.LostAt() < 0 {
			var trusted []Record
			for _, record := range cut.Records() {
				if record.Resynced {
					break
				}
				trusted = append(trusted, record)
			}
			checkNoInventedRecords(t, trusted, single.Records())
		}
	})
}

func checkRecordOrder(t *testing.T, records []Record) {
	t.Helper()
	for i, record := range records {
		if record.Length < 0 || record.Length > MaxRecordLength {
			t.Fatalf("record %d has length %d", i, record.Length)
		}
		if i > 0 && record.Offset < records[i-1].End() {
			t.Fatalf("record %d at %d overlaps the previous one ending at %d", i, record.Offset, records[i-1].End())
		}
	}
}
