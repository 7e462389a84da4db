package httpmsg

import (
	"math"
	"math/rand/v2"
	"reflect"
	"testing"
)

// randomMessage fills every field of a Message by reflection, so that a field the
// codec forgets comes back different; half of them are left at zero, strings
// are drawn from the codes' lists, a few repeating values and new ones.
func randomMessage(rng *rand.Rand) Message {
	var m Message
	v := reflect.ValueOf(&m).Elem()
	for i := range v.NumField() {
		f := v.Field(i)
		if rng.IntN(2) == 0 {
			continue
		}
		switch f.Kind() {
		case reflect.Int, reflect.Int64:
			switch rng.IntN(5) {
			case 0:
				f.SetInt(math.MaxInt64)
			case 1:
				f.SetInt(-1)
			default:
				f.SetInt(rng.Int64N(1 << uint(rng.IntN(63))))
			}
		case reflect.Bool:
			f.SetBool(true)
		case reflect.String:
			all := [][]string{methodCodes, versionCodes, reasonCodes, {"/a", "/b", "example.com", "text/html"}}
			list := all[rng.IntN(len(all))]
			s := list[rng.IntN(len(list))]
			if rng.IntN(4) == 0 {
				s = string(rune('a'+rng.IntN(26))) + "-new"
			}
			f.SetString(s)
		default:
			panic("store_test: no filler for a field of kind " + f.Kind().String() + ": add one, and the field to messageCodec.visit")
		}
	}
	return m
}

// TestMessageStoreEveryField stores messages with every field set and reads them
// back every way there is: a field added to Message and not to messageCodec.visit
// fails here.
func TestMessageStoreEveryField(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	var s messageStore
	var want []Message
	for i := range 300 {
		m := randomMessage(rng)
		s.Append(m)
		want = append(want, m)
		if rng.IntN(2) == 0 {
			// The last one may change until the next comes.
			s.Last().End = int64(i)
			want[i].End = int64(i)
		}
		if s.Len() != len(want) || !reflect.DeepEqual(*s.Last(), want[i]) {
			t.Fatalf("after message %d: %d stored, last %+v", i, s.Len(), *s.Last())
		}
	}
	if got := s.All(); !reflect.DeepEqual(got, want) {
		t.Fatal("All returns other messages than those stored")
	}
	// Appended to a reused slice that holds other messages: the ones before
	// stay, and those after its length are overwritten whole.
	reused := make([]Message, 2, 400)
	reused[0], reused[1] = randomMessage(rng), randomMessage(rng)
	garbage := reused[:cap(reused)]
	for i := 2; i < len(garbage); i++ {
		garbage[i] = randomMessage(rng)
	}
	head := append([]Message(nil), reused...)
	if got := s.AppendAll(reused); !reflect.DeepEqual(got[:2], head) || !reflect.DeepEqual(got[2:], want) {
		t.Fatal("AppendAll onto a reused slice gives other messages than those stored, after those it held")
	}
	for _, i := range []int{0, 1, 15, 16, 17, 100, 298, 299} {
		if got := s.At(i); !reflect.DeepEqual(got, want[i]) {
			t.Errorf("At(%d) = %+v, want %+v", i, got, want[i])
		}
		n := i
		for j, m := range s.From(i) {
			if j != n || !reflect.DeepEqual(m, want[j]) {
				t.Fatalf("From(%d) yields message %d as %+v, want %d: %+v", i, j, m, n, want[n])
			}
			n++
		}
		if n != len(want) {
			t.Errorf("From(%d) stopped before message %d", i, n)
		}
	}
	var c messageCodec
	c.Encode(nil, 1)
	c.visit(&Message{}, &messagePredictor{})
	if c.Fields() > 64 {
		t.Errorf("messageCodec.visit visits %d fields; its bitmap has room for 64", c.Fields())
	}
}

// TestRepeatedStringsReused feeds a keep-alive connection's requests, naming
// two targets in turn with the same Host and Content-Type, and counts the
// allocations of one more exchange: the strings the messages before named
// are reused, so an exchange allocates nothing of its own (the store's
// buffers grow by doubling, rarely). A string made per message for the target,
// the host or the content type would be one allocation each, every time.
func TestRepeatedStringsReused(t *testing.T) {
	requests := NewRequestParser()
	responses := NewResponseParser(requests)
	var reqOffset, respOffset int64
	reqs := [2][]byte{[]byte("GET /a HTTP/1.1\r\nHost: example.com\r\n\r\n"), []byte("GET /bb HTTP/1.1\r\nHost: example.com\r\n\r\n")}
	resp := []byte("HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: 2\r\n\r\nok")
	exchange := func(i int) {
		req := reqs[i%2]
		requests.Write(reqOffset, req, len(req))
		reqOffset += int64(len(req))
		responses.Write(respOffset, resp, len(resp))
		respOffset += int64(len(resp))
	}
	for i := range 1000 {
		exchange(i)
	}
	i := 1000
	allocs := testing.AllocsPerRun(200, func() {
		exchange(i)
		i++
	})
	if allocs > 0.2 {
		t.Errorf("an exchange of strings named before allocated %.2f times on average, want at most 0.2", allocs)
	}
	ms := requests.Messages()
	if len(ms) < 1201 || ms[1000].Target != "/a" || ms[1001].Target != "/bb" || ms[1001].Host != "example.com" {
		t.Fatalf("requests parsed wrong: %d messages, 1000th %+v", len(ms), ms[min(1000, len(ms)-1)])
	}
	if rs := responses.Messages(); len(rs) < 1201 || rs[1200].ContentType != "text/html" || rs[1200].Status != 200 {
		t.Fatalf("responses parsed wrong: %d messages", len(rs))
	}
}
