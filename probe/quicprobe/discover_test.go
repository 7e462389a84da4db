package quicprobe

import (
	"context"
	"net"
	"net/netip"
	"reflect"
	"testing"
	"time"

	"golang.org/x/net/dns/dnsmessage"
)

func TestParseAltSvc(t *testing.T) {
	for _, c := range []struct {
		header string
		want   []Alternative
		h3     bool
		h3Port uint16
		h3Host string
	}{
		{`h3=":443"; ma=86400`, []Alternative{{"h3", "", 443, 86400}}, true, 443, ""},
		{`h3-29=":443"; ma=3600, h3=":8443"; ma=60`, []Alternative{{"h3-29", "", 443, 3600}, {"h3", "", 8443, 60}}, true, 8443, ""},
		{`h2="alt.example.com:443", h3="alt.example.com:443"; persist=1`, []Alternative{{"h2", "alt.example.com", 443, 86400}, {"h3", "alt.example.com", 443, 86400}}, true, 443, "alt.example.com"},
		{`h3="[2001:db8::1]:443"`, []Alternative{{"h3", "2001:db8::1", 443, 86400}}, true, 443, "2001:db8::1"},
		{`clear`, nil, false, 0, ""},
		{`h2=":443"`, []Alternative{{"h2", "", 443, 86400}}, false, 0, ""},
		{`h3=":443"; ma=0`, []Alternative{{"h3", "", 443, 0}}, false, 0, ""}, // ma=0: forget it
		{`w%3Dx%3Ay=":80"`, []Alternative{{"w=x:y", "", 80, 86400}}, false, 0, ""},
		{`h3=":0", h3=":99999", h3=noquotes, junk, h3=":443;ma=5"`, nil, false, 0, ""},
		{``, nil, false, 0, ""},
	} {
		got := ParseAltSvc(c.header)
		if !reflect.DeepEqual(got, c.want) {
			t.Errorf("ParseAltSvc(%q) = %+v, want %+v", c.header, got, c.want)
		}
		alt, ok := HTTP3Alternative(c.header)
		if ok != c.h3 || ok && (alt.Port != c.h3Port || alt.Host != c.h3Host) {
			t.Errorf("HTTP3Alternative(%q) = %+v %v", c.header, alt, ok)
		}
	}
}

func TestParseProtocols(t *testing.T) {
	for list, want := range map[string][]string{"h3,h2,h1": {"h3", "h2", "h1"}, " H2 , http/1.1": {"h2", "h1"}, "h3": {"h3"}} {
		got, err := ParseProtocols(list)
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("ParseProtocols(%q) = %v, %v; want %v", list, got, err, want)
		}
	}
	for _, bad := range []string{"", "h4", "h2,h2", "h3,,h2"} {
		if got, err := ParseProtocols(bad); err == nil {
			t.Errorf("ParseProtocols(%q) = %v, want an error", bad, got)
		}
	}
}

// fakeDNS answers every HTTPS query for name with the records given (and a mismatched
// reply first, which must be ignored); other names get no answer records.
func fakeDNS(t *testing.T, name string, records []dnsmessage.HTTPSResource) netip.AddrPort {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pc.Close() })
	go func() {
		buf := make([]byte, 2048)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			var p dnsmessage.Parser
			h, err := p.Start(buf[:n])
			if err != nil {
				continue
			}
			q, err := p.Question()
			if err != nil {
				continue
			}
			for _, id := range []uint16{h.ID + 1, h.ID} {
				b := dnsmessage.NewBuilder(nil, dnsmessage.Header{ID: id, Response: true, RecursionAvailable: true})
				_ = b.StartQuestions()
				_ = b.Question(q)
				_ = b.StartAnswers()
				if q.Type == dnsmessage.TypeHTTPS && q.Name.String() == name+"." {
					for _, r := range records {
						_ = b.HTTPSResource(dnsmessage.ResourceHeader{Name: q.Name, Class: dnsmessage.ClassINET, TTL: 60}, r)
					}
				}
				msg, err := b.Finish()
				if err != nil {
					t.Error(err)
					return
				}
				_, _ = pc.WriteTo(msg, from)
			}
		}
	}()
	return netip.MustParseAddrPort(pc.LocalAddr().String())
}

func httpsRecord(priority uint16, target string, alpn []string, port uint16) dnsmessage.HTTPSResource {
	r := dnsmessage.HTTPSResource{SVCBResource: dnsmessage.SVCBResource{Priority: priority, Target: dnsmessage.MustNewName(target)}}
	if alpn != nil {
		var v []byte
		for _, a := range alpn {
			v = append(v, byte(len(a)))
			v = append(v, a...)
		}
		r.SetParam(dnsmessage.SVCParamALPN, v)
	}
	if port != 0 {
		r.SetParam(dnsmessage.SVCParamPort, []byte{byte(port >> 8), byte(port)})
	}
	return r
}

// TestLookupHTTPS asks a fake name server on loopback: the service record of the
// best priority with its ALPN list and port; none when the name has no record.
func TestLookupHTTPS(t *testing.T) {
	server := fakeDNS(t, "www.example.test", []dnsmessage.HTTPSResource{
		httpsRecord(2, "backup.example.test.", []string{"h2"}, 0),
		httpsRecord(1, ".", []string{"h3", "h2"}, 8443),
	})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	rec, ok, err := LookupHTTPS(ctx, server, "www.example.test")
	if err != nil || !ok {
		t.Fatalf("LookupHTTPS: %+v %v %v", rec, ok, err)
	}
	if rec.Priority != 1 || rec.Port != 8443 || !reflect.DeepEqual(rec.ALPN, []string{"h3", "h2"}) || !rec.OffersHTTP3() || rec.Target != "." {
		t.Errorf("record %+v", rec)
	}
	if rec, ok, err := LookupHTTPS(ctx, server, "other.example.test"); err != nil || ok {
		t.Errorf("a name without records: %+v %v %v", rec, ok, err)
	}
}
