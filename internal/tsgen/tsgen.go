// Package tsgen writes TypeScript declarations for Go types as encoding/json writes
// them, so that the web UI's types (web/src/types.ts) are generated from the Go
// types that produce its JSON instead of copied by hand. Field comments in the Go
// source become the declarations' doc comments.
//
// `go generate ./web` writes web/src/types.ts (see gen.go); the package's test
// regenerates it and fails when the committed file differs.
//
// It is for plain data types (structs of numbers, strings, booleans, pointers,
// slices, maps and other such structs). It refuses what it cannot describe
// faithfully (a custom MarshalJSON, the ",string" option, channels, functions)
// rather than guess. It is not a general Go-to-TypeScript translator.
package tsgen

import (
	"bytes"
	"encoding"
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"time"
)

// Root is a type to declare, with the TypeScript name it gets (its Go name when
// empty). Types it reaches are declared too.
type Root struct {
	Type reflect.Type
	Name string
}

// Config says what to generate.
type Config struct {
	// Header is written first, as comment lines.
	Header []string
	// Roots are declared in order, each followed by the named types it reaches
	// that were not declared yet.
	Roots []Root
	// Names renames reached types ("pkgpath.Name" → TypeScript name); other types
	// keep their Go name. Two types with one name are an error.
	Names map[string]string
	// NonNull lists the slice, map and pointer fields ("pkgpath.Type.Field") that the
	// code writing them never leaves nil, with where that is ensured: they are
	// declared without "| null".
	NonNull map[string]string
	// Module and ModuleDir locate the Go source (module path and the directory of
	// go.mod) for the field comments; without them there are none.
	Module, ModuleDir string
}

var (
	jsonMarshaler = reflect.TypeFor[json.Marshaler]()
	textMarshaler = reflect.TypeFor[encoding.TextMarshaler]()
)

type generator struct {
	cfg      Config
	names    map[reflect.Type]string // declared or queued
	byName   map[string]reflect.Type
	queue    []reflect.Type
	out      bytes.Buffer
	comments map[string]map[string]map[string]string // pkgpath → type → field → comment
	typeDocs map[string]map[string]string            // pkgpath → type → comment
}

// Generate returns the TypeScript declarations of cfg.Roots and what they reach.
func Generate(cfg Config) ([]byte, error) {
	g := &generator{
		cfg:      cfg,
		names:    map[reflect.Type]string{},
		byName:   map[string]reflect.Type{},
		comments: map[string]map[string]map[string]string{},
		typeDocs: map[string]map[string]string{},
	}
	for _, h := range cfg.Header {
		fmt.Fprintln(&g.out, strings.TrimRight("// "+h, " "))
	}
	for _, r := range cfg.Roots {
		t := r.Type
		if t.Kind() != reflect.Struct || t.Name() == "" {
			return nil, fmt.Errorf("tsgen: root %v is not a named struct type", t)
		}
		if _, err := g.name(t, r.Name); err != nil {
			return nil, err
		}
		for len(g.queue) > 0 {
			next := g.queue[0]
			g.queue = g.queue[1:]
			if err := g.declare(next); err != nil {
				return nil, err
			}
		}
	}
	return g.out.Bytes(), nil
}

// name returns the TypeScript name of the named struct t, queueing its
// declaration the first time.
func (g *generator) name(t reflect.Type, want string) (string, error) {
	if n, ok := g.names[t]; ok {
		return n, nil
	}
	n := want
	if n == "" {
		n = g.cfg.Names[t.PkgPath()+"."+t.Name()]
	}
	if n == "" {
		n = t.Name()
	}
	if other, ok := g.byName[n]; ok {
		return "", fmt.Errorf("tsgen: %v and %v would both be declared as %s: rename one in Config.Names", other, t, n)
	}
	g.names[t] = n
	g.byName[n] = t
	g.queue = append(g.queue, t)
	return n, nil
}

func (g *generator) declare(t reflect.Type) error {
	fields, err := g.fields(t, "  ")
	if err != nil {
		return err
	}
	g.out.WriteString("\n")
	if doc := g.typeDoc(t); doc != "" {
		writeDoc(&g.out, "", doc)
	}
	fmt.Fprintf(&g.out, "export interface %s {\n%s}\n", g.names[t], fields)
	return nil
}

// fields returns the members of struct t as encoding/json writes them, one a line.
func (g *generator) fields(t reflect.Type, indent string) (string, error) {
	var b strings.Builder
	for _, f := range jsonFields(t) {
		_, nonNull := g.cfg.NonNull[f.owner.PkgPath()+"."+f.owner.Name()+"."+f.goName]
		ts, err := g.tsType(f.typ, f.omitempty || nonNull, f.where)
		if err != nil {
			return "", err
		}
		if doc := g.fieldDoc(f.owner, f.goName); doc != "" {
			writeDoc(&b, indent, doc)
		}
		opt := ""
		if f.omitempty {
			opt = "?"
		}
		fmt.Fprintf(&b, "%s%s%s: %s;\n", indent, quoteKey(f.name), opt, ts)
	}
	return b.String(), nil
}

type jsonField struct {
	name, goName string
	typ          reflect.Type
	owner        reflect.Type // the struct that declares it (for its comment)
	omitempty    bool
	where        string
}

// jsonFields lists the fields encoding/json writes for struct t, promoting the
// fields of untagged embedded structs. (A promoted name clashing with another is
// not resolved the way encoding/json does; the types given here have none.)
func jsonFields(t reflect.Type) []jsonField {
	var out []jsonField
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		tag, hasTag := f.Tag.Lookup("json")
		if tag == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		if f.Anonymous && !hasTag {
			ft := f.Type
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				out = append(out, jsonFields(ft)...)
				continue
			}
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		jf := jsonField{name: name, goName: f.Name, typ: f.Type, owner: t, where: t.String() + "." + f.Name}
		for _, o := range strings.Split(opts, ",") {
			switch o {
			case "omitempty", "omitzero":
				jf.omitempty = true
			case "string":
				jf.where += " (the ,string option is not supported)"
				jf.typ = reflect.TypeFor[chan int]() // refused below
			}
		}
		out = append(out, jf)
	}
	return out
}

// tsType is the TypeScript type of a value of Go type t. A nil pointer, slice or
// map is written as null, unless notNull (omitempty leaves the field out instead,
// or NonNull says it is never nil).
func (g *generator) tsType(t reflect.Type, notNull bool, where string) (string, error) {
	if t == reflect.TypeFor[time.Time]() {
		return "string", nil // RFC 3339
	}
	if t.Implements(jsonMarshaler) || reflect.PointerTo(t).Implements(jsonMarshaler) {
		return "", fmt.Errorf("tsgen: %s: %v has its own MarshalJSON, which tsgen cannot read", where, t)
	}
	if t.Implements(textMarshaler) || reflect.PointerTo(t).Implements(textMarshaler) {
		return "string", nil
	}
	nullable := func(s string) string {
		if notNull {
			return s
		}
		return s + " | null"
	}
	switch t.Kind() {
	case reflect.Bool:
		return "boolean", nil
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr,
		reflect.Float32, reflect.Float64:
		return "number", nil
	case reflect.String:
		return "string", nil
	case reflect.Interface:
		return "unknown", nil
	case reflect.Pointer:
		el, err := g.tsType(t.Elem(), false, where)
		if err != nil {
			return "", err
		}
		if strings.HasSuffix(el, " | null") {
			return el, nil
		}
		return nullable(el), nil
	case reflect.Slice, reflect.Array:
		if t.Elem().Kind() == reflect.Uint8 && t.Kind() == reflect.Slice {
			return nullable("string"), nil // base64
		}
		el, err := g.tsType(t.Elem(), false, where)
		if err != nil {
			return "", err
		}
		if strings.Contains(el, " ") {
			el = "(" + el + ")"
		}
		if t.Kind() == reflect.Array {
			return el + "[]", nil
		}
		return nullable(el + "[]"), nil
	case reflect.Map:
		if k := t.Key().Kind(); k != reflect.String && (k < reflect.Int || k > reflect.Uint64) {
			return "", fmt.Errorf("tsgen: %s: map key %v is not a string or integer", where, t.Key())
		}
		el, err := g.tsType(t.Elem(), false, where)
		if err != nil {
			return "", err
		}
		return nullable("Record<string, " + el + ">"), nil
	case reflect.Struct:
		if t.Name() == "" {
			body, err := g.fields(t, "    ")
			if err != nil {
				return "", err
			}
			return "{\n" + body + "  }", nil
		}
		return g.name(t, "")
	}
	return "", fmt.Errorf("tsgen: %s: %v cannot be written as JSON", where, t)
}

func quoteKey(k string) string {
	for i, r := range k {
		if !(r == '_' || r == '$' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || i > 0 && r >= '0' && r <= '9') {
			b, _ := json.Marshal(k)
			return string(b)
		}
	}
	return k
}

func writeDoc(b interface{ WriteString(string) (int, error) }, indent, doc string) {
	lines := strings.Split(strings.TrimSpace(doc), "\n")
	if len(lines) == 1 {
		b.WriteString(indent + "/** " + strings.ReplaceAll(lines[0], "*/", "* /") + " */\n")
		return
	}
	b.WriteString(indent + "/**\n")
	for _, l := range lines {
		b.WriteString(strings.TrimRight(indent+" * "+strings.ReplaceAll(l, "*/", "* /"), " ") + "\n")
	}
	b.WriteString(indent + " */\n")
}

func (g *generator) typeDoc(t reflect.Type) string {
	g.load(t.PkgPath())
	return g.typeDocs[t.PkgPath()][t.Name()]
}

func (g *generator) fieldDoc(owner reflect.Type, field string) string {
	if owner.Name() == "" {
		return ""
	}
	g.load(owner.PkgPath())
	return g.comments[owner.PkgPath()][owner.Name()][field]
}

// load reads the comments of the package at pkgPath, when it is in the module.
func (g *generator) load(pkgPath string) {
	if _, ok := g.comments[pkgPath]; ok {
		return
	}
	fields := map[string]map[string]string{}
	docs := map[string]string{}
	g.comments[pkgPath], g.typeDocs[pkgPath] = fields, docs
	if g.cfg.Module == "" || (pkgPath != g.cfg.Module && !strings.HasPrefix(pkgPath, g.cfg.Module+"/")) {
		return
	}
	dir := filepath.Join(g.cfg.ModuleDir, filepath.FromSlash(strings.TrimPrefix(strings.TrimPrefix(pkgPath, g.cfg.Module), "/")))
	entries, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	names := make([]string, 0, len(entries))
	for _, e := range entries {
		if n := e.Name(); strings.HasSuffix(n, ".go") && !strings.HasSuffix(n, "_test.go") {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	fset := token.NewFileSet()
	for _, n := range names {
		f, err := parser.ParseFile(fset, filepath.Join(dir, n), nil, parser.ParseComments|parser.SkipObjectResolution)
		if err != nil {
			continue
		}
		for _, d := range f.Decls {
			gd, ok := d.(*ast.GenDecl)
			if !ok || gd.Tok != token.TYPE {
				continue
			}
			for _, s := range gd.Specs {
				ts := s.(*ast.TypeSpec)
				st, ok := ts.Type.(*ast.StructType)
				if !ok {
					continue
				}
				doc := ts.Doc
				if doc == nil && len(gd.Specs) == 1 {
					doc = gd.Doc
				}
				docs[ts.Name.Name] = doc.Text()
				m := map[string]string{}
				fields[ts.Name.Name] = m
				for _, fl := range st.Fields.List {
					text := strings.TrimSpace(fl.Doc.Text())
					if c := strings.TrimSpace(fl.Comment.Text()); c != "" {
						if text != "" {
							text += "\n"
						}
						text += c
					}
					for _, id := range fl.Names {
						m[id.Name] = text
					}
				}
			}
		}
	}
}
