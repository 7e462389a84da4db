package tsgen

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/slowstart/slowstart/internal/golden"
)

// TestWebTypesCurrent fails when web/src/types.ts is not what the Go types make:
// someone changed a Report, page-load or live-status type without regenerating, or
// edited the generated file by hand.
func TestWebTypesCurrent(t *testing.T) {
	dir, err := ModuleDir()
	if err != nil {
		t.Fatal(err)
	}
	want, err := WebTypes(dir)
	if err != nil {
		t.Fatal(err)
	}
	// The Go comments come along: Connection.Index's line comment.
	if doc := "/** 1-based, in order of first packet */\n  index: number;"; !bytes.Contains(want, []byte(doc)) {
		t.Errorf("the generated types lack report.Connection.Index's comment %q", doc)
	}
	got, err := os.ReadFile(filepath.Join(dir, WebTypesFile))
	if err != nil {
		t.Fatal(err)
	}
	if line, g, w := golden.FirstDifference(got, want); line > 0 {
		t.Fatalf("%s is stale: line %d is\n\t%q\nbut the Go types make\n\t%q\nRun `go generate ./web`, then `make web` (or cd web && npm run build) and commit both.", WebTypesFile, line, g, w)
	}
}

// TestNonNullFieldsExist keeps WebTypes' NonNull list from naming fields that
// are gone or renamed (an entry that matches nothing would silently stop applying).
func TestNonNullFieldsExist(t *testing.T) {
	seen := map[string]bool{}
	var walk func(reflect.Type)
	walk = func(rt reflect.Type) {
		for rt.Kind() == reflect.Pointer || rt.Kind() == reflect.Slice || rt.Kind() == reflect.Map {
			rt = rt.Elem()
		}
		if rt.Kind() != reflect.Struct || rt.Name() == "" {
			return
		}
		key := rt.PkgPath() + "." + rt.Name()
		if seen[key] {
			return
		}
		seen[key] = true
		for _, f := range jsonFields(rt) {
			seen[f.owner.PkgPath()+"."+f.owner.Name()+"."+f.goName] = true
			walk(f.typ)
		}
	}
	for _, r := range webConfig("").Roots {
		walk(r.Type)
	}
	for k := range webConfig("").NonNull {
		if !seen[k] {
			t.Errorf("NonNull names %s, which is not a field the web types reach", k)
		}
	}
}

type inner struct {
	A int `json:"a"`
}

type Embedded struct {
	E string `json:"e"`
}

type outer struct {
	Embedded
	Name     string           `json:"name"`
	Opt      string           `json:"opt,omitempty"`
	Ptr      *float64         `json:"ptr"`
	OptPtr   *inner           `json:"opt_ptr,omitempty"`
	List     []inner          `json:"list"`
	Never    []int            `json:"never"`
	Map      map[string]int   `json:"map"`
	Raw      []byte           `json:"raw"`
	When     time.Time        `json:"when"`
	Any      any              `json:"any"`
	Anon     struct{ X bool } `json:"anon"`
	Skip     int              `json:"-"`
	hidden   int              //nolint:unused
	Default  int
	Dashed   int               `json:"a-b"`
	Matrix   [][]*int          `json:"matrix"`
	Array    [2]int            `json:"array"`
	ByNumber map[int][]string  `json:"by_number"`
	Nested   map[string]*inner `json:"nested,omitempty"`
}

func TestGenerate(t *testing.T) {
	_ = outer{}.hidden
	b, err := Generate(Config{
		Roots:   []Root{{Type: reflect.TypeFor[outer](), Name: "Outer"}},
		Names:   map[string]string{"github.com/slowstart/slowstart/internal/tsgen.inner": "Inner"},
		NonNull: map[string]string{"github.com/slowstart/slowstart/internal/tsgen.outer.Never": "test"},
		Module:  module, ModuleDir: "../..",
	})
	if err != nil {
		t.Fatal(err)
	}
	want := `
export interface Outer {
  e: string;
  name: string;
  opt?: string;
  ptr: number | null;
  opt_ptr?: Inner;
  list: Inner[] | null;
  never: number[];
  map: Record<string, number> | null;
  raw: string | null;
  when: string;
  any: unknown;
  anon: {
    X: boolean;
  };
  Default: number;
  "a-b": number;
  matrix: ((number | null)[] | null)[] | null;
  array: number[];
  by_number: Record<string, string[] | null> | null;
  nested?: Record<string, Inner | null>;
}

export interface Inner {
  a: number;
}
`
	if string(b) != want {
		t.Errorf("got\n%s\nwant\n%s", b, want)
	}
}

type marshals struct{}

func (marshals) MarshalJSON() ([]byte, error) { return []byte("1"), nil }

type withMarshaler struct {
	M marshals `json:"m"`
}

type withChan struct {
	C chan int `json:"c"`
}

type withString struct {
	N int `json:"n,string"`
}

type a1 struct {
	B b1 `json:"b"`
}
type b1 struct{}

func TestGenerateRefuses(t *testing.T) {
	for _, c := range []struct {
		root  reflect.Type
		names map[string]string
		want  string
	}{
		{reflect.TypeFor[withMarshaler](), nil, "MarshalJSON"},
		{reflect.TypeFor[withChan](), nil, "cannot be written as JSON"},
		{reflect.TypeFor[withString](), nil, ",string option"},
		{reflect.TypeFor[a1](), map[string]string{"github.com/slowstart/slowstart/internal/tsgen.b1": "a1"}, "both be declared as a1"},
		{reflect.TypeFor[int](), nil, "not a named struct"},
	} {
		_, err := Generate(Config{Roots: []Root{{Type: c.root}}, Names: c.names})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: error %v, want one saying %q", c.root, err, c.want)
		}
	}
}
