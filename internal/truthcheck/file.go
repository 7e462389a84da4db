package truthcheck

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/slowstart/slowstart/analysis"
	"github.com/slowstart/slowstart/report"
)

// CheckFile analyzes one capture of a trial and judges the connection that carried
// the server's data.
func CheckFile(ctx context.Context, path, vantage string, truth Truth) (wrong, timing []string) {
	rep, err := analysis.File(ctx, path, analysis.Options{})
	if err != nil {
		return []string{err.Error()}, nil
	}
	var conn *report.Connection
	for i := range rep.Connections {
		if c := &rep.Connections[i]; c.BytesToClient > 0 {
			if conn != nil {
				return []string{fmt.Sprintf("%s: the server sent data on more than one connection", filepath.Base(path))}, nil
			}
			conn = c
		}
	}
	if conn == nil {
		return []string{fmt.Sprintf("%s: no connection with server data", filepath.Base(path))}, nil
	}
	wrong, timing = Check(conn, vantage, truth)
	prefix := filepath.Base(path) + ": "
	for i := range wrong {
		wrong[i] = prefix + wrong[i]
	}
	for i := range timing {
		timing[i] = prefix + timing[i]
	}
	return wrong, timing
}

// CheckHoles cuts packets out of a capture of a cleartext transfer that the window cut
// (truth.Expect exact) and checks the readings: without round 1's last segment or a
// segment in its middle, ambiguous (never a smaller exact window); without the
// client's first acknowledgement of data, a reading that holds the truth.
func CheckHoles(ctx context.Context, scratch, path, vantage string, truth Truth) (wrong, timing []string) {
	ps, err := Packets(path)
	if err != nil {
		return []string{err.Error()}, nil
	}
	last, okLast := DataSegment(ps, truth.IW)
	mid, okMid := DataSegment(ps, (truth.IW+1)/2)
	ack, okAck := FirstDataAck(ps)
	if !okLast || !okMid || !okAck {
		return []string{fmt.Sprintf("%s: no segment %d, %d or data acknowledgement to cut", filepath.Base(path), truth.IW, (truth.IW+1)/2)}, nil
	}
	for _, cut := range []struct {
		what   string
		index  int
		expect string
	}{
		{"round1-last", last.Index, ExpectAmbiguous},
		{"round1-middle", mid.Index, ExpectAmbiguous},
		{"first-ack", ack.Index, ExpectBound},
	} {
		out := filepath.Join(scratch, strings.TrimSuffix(filepath.Base(path), ".pcap")+"-without-"+cut.what+".pcap")
		if err := Remove(path, out, cut.index); err != nil {
			wrong = append(wrong, err.Error())
			continue
		}
		t := truth
		t.Expect = cut.expect
		w, tm := CheckFile(ctx, out, vantage, t)
		wrong, timing = append(wrong, w...), append(timing, tm...)
	}
	return wrong, timing
}
