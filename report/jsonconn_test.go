package report

import (
	"bytes"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"strconv"
	"testing"

	gojson "github.com/goccy/go-json"
)

// TestConnectionJSONTypes: the types the connection writer writes member by
// member are the ones it was written for. When one gains or loses a field, the
// writer would leave it out: it gives way to goccy then, and this test says
// which type to bring up to date in jsonconn.go (writer and writtenTypes).
func TestConnectionJSONTypes(t *testing.T) {
	for typ, want := range writtenTypes {
		if got := typeFields(typ); !slices.Equal(got, want) {
			t.Errorf("%s has the fields\n%q\nand appendConnectionJSON writes\n%q\nwrite the new ones in jsonconn.go too", typ, got, want)
		}
	}
	if !connectionTypesKnown {
		t.Error("connectionTypesKnown is false: every connection is written by goccy")
	}
}

// TestConnectionJSONLikeGoccy writes connections with every field set (and
// with each left at its zero value, so that omitempty and null are
// exercised), strings that need escapes, floats small and large, indented and
// compact, and compares them byte for byte with what goccy writes.
func TestConnectionJSONLikeGoccy(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	var enc bytes.Buffer
	e := gojson.NewEncoder(&enc)
	e.SetIndent("    ", "  ")
	for i := range 3000 {
		var c Connection
		fillValue(reflect.ValueOf(&c).Elem(), rng, 0)
		enc.Reset()
		if err := e.Encode(&c); err != nil {
			t.Fatal(err)
		}
		want := bytes.TrimSuffix(enc.Bytes(), []byte("\n"))
		got, ok := appendConnectionJSON(nil, &c, true, "    ")
		if !ok || !bytes.Equal(got, want) {
			t.Fatalf("connection %d (ok %t), indented:\n%s\ngoccy:\n%s", i, ok, got, want)
		}
		want, err := gojson.Marshal(&c)
		if err != nil {
			t.Fatal(err)
		}
		got, ok = appendConnectionJSON(nil, &c, false, "")
		if !ok || !bytes.Equal(got, want) {
			t.Fatalf("connection %d (ok %t), compact:\n%s\ngoccy:\n%s", i, ok, got, want)
		}
	}
	c := Connection{StartMs: math.NaN()}
	if _, ok := appendConnectionJSON(nil, &c, true, "    "); ok {
		t.Error("a NaN was written: goccy refuses it, and so must the writer (the caller then lets goccy say why)")
	}
}

// fillValue sets v to a random value: each field or element left at its zero
// value one time in three, slices of 0 to 3 elements.
func fillValue(v reflect.Value, rng *rand.Rand, depth int) {
	if v.Kind() != reflect.Struct && rng.IntN(3) == 0 {
		return
	}
	switch v.Kind() {
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				fillValue(v.Field(i), rng, depth)
			}
		}
	case reflect.Pointer:
		if depth > 3 {
			return
		}
		p := reflect.New(v.Type().Elem())
		fillValue(p.Elem(), rng, depth+1)
		v.Set(p)
	case reflect.Slice:
		if depth > 3 {
			return
		}
		n := rng.IntN(4)
		s := reflect.MakeSlice(v.Type(), n, n)
		for i := range n {
			fillValue(s.Index(i), rng, depth+1)
		}
		v.Set(s)
	case reflect.String:
		v.SetString(randomString(rng))
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int64, reflect.Int32:
		v.SetInt(rng.Int64N(1<<uint(rng.IntN(62))) - rng.Int64N(3))
	case reflect.Uint32, reflect.Uint64, reflect.Uint:
		v.SetUint(uint64(rng.Uint32()))
	case reflect.Float64:
		v.SetFloat(randomFloat(rng))
	default:
		panic("jsonconn_test: no filler for " + v.Kind().String())
	}
}

func randomString(rng *rand.Rand) string {
	plain := []string{"10.0.0.1:80", "end", "cwnd", "http", "the server's window", "/index.html", "text/html; charset=utf-8"}
	odd := []string{"a<b>&c", "quote \" and \\ backslash", "tab\there", "line\u2028sep", "é ü 日本", "bad \xff byte", "\x01\x1f", "del\x7f"}
	if rng.IntN(4) == 0 {
		return odd[rng.IntN(len(odd))]
	}
	return plain[rng.IntN(len(plain))]
}

func randomFloat(rng *rand.Rand) float64 {
	switch rng.IntN(8) {
	case 0:
		return 1e-7 * rng.Float64()
	case 1:
		return 1e21 * (1 + rng.Float64())
	case 2:
		return -rng.Float64() * 1000
	case 3:
		return float64(rng.IntN(1000))
	case 4:
		return 5e-324
	}
	return rng.Float64() * math.Pow(10, float64(rng.IntN(12)))
}

// BenchmarkConnectionJSON writes connections shaped like an edge's keep-alive
// ones (60 rounds and 120 HTTP messages of random values, the parts this
// writer writes itself) indented, as analyze --json does: the writer's cost
// per connection.
func BenchmarkConnectionJSON(b *testing.B) {
	rng := rand.New(rand.NewPCG(7, 8))
	conns := make([]Connection, 20)
	for i := range conns {
		c := &conns[i]
		c.Rounds, c.HTTP = make([]Round, 60), make([]HTTPMessage, 120)
		for j := range c.Rounds {
			fillValue(reflect.ValueOf(&c.Rounds[j]).Elem(), rng, 1)
		}
		for j := range c.HTTP {
			fillValue(reflect.ValueOf(&c.HTTP[j]).Elem(), rng, 1)
		}
	}
	var buf []byte
	written := 0
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		buf, _ = appendConnectionJSON(buf[:0], &conns[i%len(conns)], true, "    ")
		written += len(buf)
	}
	b.SetBytes(int64(written / max(b.N, 1)))
}

// TestAppendInt: the short path for numbers below 100 writes what strconv
// writes, and so do the others.
func TestAppendInt(t *testing.T) {
	values := []int64{-101, -100, -99, -10, -9, -1, 0, 1, 9, 10, 11, 42, 99, 100, 101, 999, 1 << 40, math.MaxInt64, math.MinInt64, math.MinInt64 + 1}
	// Each side of every count of digits (appendUint sizes the number
	// first), and of every count of bits.
	for p := int64(10); ; p *= 10 { // 10 to 10^18
		values = append(values, p-1, p, p+1, -p, -p+1)
		if p > math.MaxInt64/10 {
			break
		}
	}
	for k := range 63 {
		values = append(values, 1<<k-1, 1<<k, -(1 << k))
	}
	rng := rand.New(rand.NewPCG(5, 6))
	for range 100_000 {
		values = append(values, rng.Int64()>>rng.IntN(63), -rng.Int64()>>rng.IntN(63))
	}
	for _, v := range values {
		if got, want := string(appendInt([]byte("x"), v)), "x"+strconv.FormatInt(v, 10); got != want {
			t.Fatalf("appendInt(%d) = %q, want %q", v, got, want)
		}
	}
	for _, u := range []uint64{math.MaxUint64, math.MaxUint64 - 1, 1e19, 1e19 - 1} {
		if got, want := string(appendUint(nil, u)), strconv.FormatUint(u, 10); got != want {
			t.Fatalf("appendUint(%d) = %q, want %q", u, got, want)
		}
	}
}

// TestAppendStrEveryByte: a string is written as goccy writes it whatever byte
// stands wherever in it (in the eight-byte steps and in the rest), so that a
// byte that needs an escape is never let through as it is.
func TestAppendStrEveryByte(t *testing.T) {
	const plain = "the path is local: 0.053 ms"
	for pos := 0; pos < 20; pos++ {
		for c := 0; c < 256; c++ {
			b := []byte(plain[:20])
			b[pos] = byte(c)
			s := string(b)
			want, err := gojson.Marshal(s)
			if err != nil {
				t.Fatal(err)
			}
			var w jsonWriter
			if got := w.appendStr(nil, s); string(got) != string(want) {
				t.Errorf("byte %#02x at %d: %s, want %s", c, pos, got, want)
			}
		}
	}
}
