package archtest

import (
	"bufio"
	"errors"
	"fmt"
	"go/ast"
	"go/build/constraint"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/slowstart/slowstart"

// A rule closes a corridor that the layers leave open: no package matching From may
// import a package matching To, directly (Direct) or through any chain of imports.
// A pattern is a package ("lab") or a package and everything below it ("lab/...").
type rule struct {
	From, To []string
	Direct   bool
	Why      string
}

var rules = []rule{
	{From: []string{"probe/..."}, To: []string{"lab/..."},
		Why: "the probe measures live sites; the demo, which probes emulated servers, builds on it from outside"},
	{From: []string{"compare"}, To: []string{"lab/..."},
		Why: "comparing samples needs statistics, not the lab that made them"},
	{From: []string{"lab/..."}, To: []string{"probe/..."},
		Why: "the lab and the probe are sibling clients; what both need lives below them"},
	{From: []string{"lab/link", "lab/netlab", "lab/server", "lab/client"}, To: []string{"lab"}, Direct: true,
		Why: "the lab's parts do not import the lab that assembles them"},
	{From: []string{"..."}, To: []string{"cmd/...", "bench/..."}, Direct: true,
		Why: "commands only wire flags to calls; nothing imports them"},
}

// knownViolations are the violations the code had when their rule was written,
// "importer → imported" as the test reports them. Each goes when the change named
// beside it removes the import; the test fails when an entry is no longer violated,
// so delete it then.
var knownViolations = map[string]string{}

// pkg is one package of the module: its path inside the module ("lab/link", "" for
// the root) and the module packages its non-test files import.
type pkg struct {
	rel     string
	imports []string
}

func moduleDir(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		if filepath.Dir(dir) == dir {
			t.Fatal("no go.mod above the test's directory")
		}
		dir = filepath.Dir(dir)
	}
}

// loadPackages parses the imports of every package under root. Build constraints
// other than "ignore" are not applied: a file for another OS imports for real there.
func loadPackages(root string) (map[string]*pkg, error) {
	pkgs := map[string]*pkg{}
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if path != root && (name == "testdata" || name == "vendor" || name == "node_modules" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_")) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(name, ".go") {
			return nil
		}
		rel, err := filepath.Rel(root, filepath.Dir(path))
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		if rel == "." {
			rel = ""
		}
		p := pkgs[rel]
		if p == nil {
			p = &pkg{rel: rel}
			pkgs[rel] = p
		}
		if strings.HasSuffix(name, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ImportsOnly|parser.ParseComments)
		if err != nil {
			return err
		}
		for _, cg := range f.Comments {
			if cg.Pos() >= f.Package {
				break
			}
			for _, c := range cg.List {
				if expr, err := constraint.Parse(c.Text); err == nil && !expr.Eval(func(tag string) bool { return tag != "ignore" }) {
					return nil // //go:build ignore: a program run by hand or by go generate
				}
			}
		}
		for _, im := range f.Imports {
			ip, err := strconv.Unquote(im.Path.Value)
			if err != nil {
				return err
			}
			if ip == module || strings.HasPrefix(ip, module+"/") {
				r := strings.TrimPrefix(strings.TrimPrefix(ip, module), "/")
				if !slices.Contains(p.imports, r) {
					p.imports = append(p.imports, r)
				}
			}
		}
		return nil
	})
	for _, p := range pkgs {
		sort.Strings(p.imports)
	}
	return pkgs, err
}

// layers reads the table "Packages by layer" of docs/architecture.md: the layers
// from the bottom up and the layer of each package.
func layers(doc string) (order []string, of map[string]int, err error) {
	of = map[string]int{}
	in := false
	sc := bufio.NewScanner(strings.NewReader(doc))
	row := regexp.MustCompile("^\\| ([a-z]+) \\| (`.*`) \\|$")
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "## ") {
			in = line == "## Packages by layer"
			continue
		}
		m := row.FindStringSubmatch(line)
		if !in || m == nil {
			continue
		}
		order = append(order, m[1])
		for _, f := range strings.Split(m[2], ",") {
			name := strings.Trim(strings.TrimSpace(f), "`")
			if _, dup := of[name]; dup {
				return nil, nil, fmt.Errorf("%s is in two layers", name)
			}
			of[name] = len(order) - 1
		}
	}
	if len(order) == 0 {
		return nil, nil, errors.New(`no table under "## Packages by layer"`)
	}
	return order, of, nil
}

func matches(pattern, rel string) bool {
	if pattern == "..." {
		return true
	}
	if base, ok := strings.CutSuffix(pattern, "/..."); ok {
		return rel == base || strings.HasPrefix(rel, base+"/")
	}
	return rel == pattern
}

func matchesAny(patterns []string, rel string) bool {
	return slices.ContainsFunc(patterns, func(p string) bool { return matches(p, rel) })
}

// violations returns, for each package matching r.From, the forbidden packages it
// reaches, with the shortest chain of imports. A chain stops at the first forbidden
// package (what that one imports is its own matter) and at a package the rule also
// applies to (reported on its own), so each violation is named once, where it is.
func (r rule) violations(pkgs map[string]*pkg) map[string][]string {
	out := map[string][]string{}
	names := make([]string, 0, len(pkgs))
	for n := range pkgs {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, from := range names {
		// Inside the closed area (cmd/slowstart's own packages, say) the rule has
		// nothing to say.
		if !matchesAny(r.From, from) || matchesAny(r.To, from) {
			continue
		}
		prev := map[string]string{from: ""}
		queue := []string{from}
		for len(queue) > 0 {
			cur := queue[0]
			queue = queue[1:]
			p := pkgs[cur]
			if p == nil {
				continue
			}
			for _, im := range p.imports {
				if _, seen := prev[im]; seen {
					continue
				}
				prev[im] = cur
				if matchesAny(r.To, im) && !matchesAny(r.From, im) || matchesAny(r.To, im) && r.Direct {
					chain := []string{im}
					for at := cur; at != ""; at = prev[at] {
						chain = append([]string{at}, chain...)
					}
					out[from+" → "+im] = chain
					continue
				}
				// A package the rule also applies to answers for its own imports.
				if !r.Direct && !matchesAny(r.From, im) {
					queue = append(queue, im)
				}
			}
		}
	}
	return out
}

func TestLayers(t *testing.T) {
	root := moduleDir(t)
	docBytes, err := os.ReadFile(filepath.Join(root, "docs", "architecture.md"))
	if err != nil {
		t.Fatal(err)
	}
	doc := string(docBytes)
	order, layerOf, err := layers(doc)
	if err != nil {
		t.Fatalf("docs/architecture.md: %v", err)
	}
	pkgs, err := loadPackages(root)
	if err != nil {
		t.Fatal(err)
	}
	names := make([]string, 0, len(pkgs))
	for n := range pkgs {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		if _, ok := layerOf[n]; !ok {
			t.Errorf("package %s is in no layer of docs/architecture.md: give it its place in the table \"Packages by layer\"", show(n))
		}
	}
	for n := range layerOf {
		if pkgs[n] == nil {
			t.Errorf("docs/architecture.md places %s, which is not a package of the module", n)
		}
	}
	// A package imports its own layer or those above it in the table, never one below.
	edges := map[[2]int]bool{}
	for _, n := range names {
		from, ok := layerOf[n]
		if !ok {
			continue
		}
		for _, im := range pkgs[n].imports {
			to, ok := layerOf[im]
			if !ok {
				continue
			}
			if to > from {
				t.Errorf("%s (layer %s) imports %s (layer %s): a package imports only its own row of docs/architecture.md's layers and the rows above it", show(n), order[from], im, order[to])
			}
			if to != from {
				edges[[2]int{from, to}] = true
			}
		}
	}
	// The doc's table of imports by layer is what the code does.
	var b strings.Builder
	b.WriteString("| layer | imports (besides its own layer) |\n|---|---|\n")
	for i, l := range order {
		var to []string
		for j, m := range order {
			if edges[[2]int{i, j}] {
				to = append(to, m)
			}
		}
		if len(to) == 0 {
			to = []string{"—"}
		}
		fmt.Fprintf(&b, "| %s | %s |\n", l, strings.Join(to, ", "))
	}
	const begin, end = "<!-- layer-imports: begin -->\n", "<!-- layer-imports: end -->"
	i, j := strings.Index(doc, begin), strings.Index(doc, end)
	if i < 0 || j < i {
		t.Fatalf("docs/architecture.md lacks the %q … %q markers around the table of imports by layer", strings.TrimSpace(begin), end)
	}
	if got := doc[i+len(begin) : j]; got != b.String() {
		t.Errorf("docs/architecture.md's table of imports by layer is not what the code imports; it is now:\n%s", b.String())
	}
}

func TestRules(t *testing.T) {
	pkgs, err := loadPackages(moduleDir(t))
	if err != nil {
		t.Fatal(err)
	}
	found := map[string]bool{}
	for _, r := range rules {
		v := r.violations(pkgs)
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			found[k] = true
			if _, known := knownViolations[k]; known {
				t.Logf("known violation %s (%s): %s", k, strings.Join(v[k], " → "), r.Why)
				continue
			}
			t.Errorf("forbidden import %s, by %s: %s", k, strings.Join(v[k], " → "), r.Why)
		}
	}
	for k, what := range knownViolations {
		if !found[k] {
			t.Errorf("knownViolations lists %s (%s), which no longer happens: delete the entry", k, what)
		}
	}
}

// TestRulesFire checks the rules on a made-up module, so that a rule that can no
// longer match anything is noticed.
func TestRulesFire(t *testing.T) {
	pkgs := map[string]*pkg{
		"probe":               {rel: "probe", imports: []string{"lab", "lab/netlab"}},
		"probe/exact":         {rel: "probe/exact", imports: []string{"lab/link"}},
		"compare":             {rel: "compare", imports: []string{"stats"}},
		"stats":               {rel: "stats", imports: []string{"lab/link"}},
		"lab":                 {rel: "lab", imports: []string{"lab/link", "lab/netlab", "lab/client"}},
		"lab/link":            {rel: "lab/link"},
		"lab/netlab":          {rel: "lab/netlab"},
		"lab/client":          {rel: "lab/client", imports: []string{"lab", "h3"}},
		"h3":                  {rel: "h3", imports: []string{"probe/quicprobe"}},
		"probe/quicprobe":     {rel: "probe/quicprobe", imports: []string{"cmd/slowstart"}},
		"cmd/slowstart":       {rel: "cmd/slowstart", imports: []string{"cmd/slowstart/flags"}},
		"cmd/slowstart/flags": {rel: "cmd/slowstart/flags"},
	}
	var got []string
	for _, r := range rules {
		for k, chain := range r.violations(pkgs) {
			got = append(got, k+" ("+strings.Join(chain, " → ")+")")
		}
	}
	sort.Strings(got)
	want := []string{
		"compare → lab/link (compare → stats → lab/link)",
		"lab/client → lab (lab/client → lab)",
		"lab/client → probe/quicprobe (lab/client → h3 → probe/quicprobe)",
		"probe → lab (probe → lab)",
		"probe → lab/netlab (probe → lab/netlab)",
		"probe/exact → lab/link (probe/exact → lab/link)",
		"probe/quicprobe → cmd/slowstart (probe/quicprobe → cmd/slowstart)",
	}
	sort.Strings(want)
	if !slices.Equal(got, want) {
		t.Errorf("violations in the made-up module:\n\t%s\nwant\n\t%s", strings.Join(got, "\n\t"), strings.Join(want, "\n\t"))
	}
}

func show(rel string) string {
	if rel == "" {
		return "the module's root"
	}
	return rel
}

// The command only wires flags to calls (docs/architecture.md): its code
// stays small, so that a verb's work lands in the verb's package. Lines are
// counted without those inside a string literal's later lines (the help
// texts), which are the command's to hold.
const (
	// maxRunELines bounds a RunE: read the flags into options, make the call.
	maxRunELines = 12
	// maxFuncLines bounds any function of the command: a command's
	// constructor with its flags, the reading of a verb's flags.
	maxFuncLines = 50
	// maxFileLines bounds a file of the command, help texts included.
	maxFileLines = 300
)

// commandDirs are the command packages held thin.
var commandDirs = []string{"cmd/slowstart"}

// thinViolation is one place where a command's code grew past a bound.
type thinViolation struct {
	where string
	what  string
}

// thinViolations checks the non-test Go files of dir against the bounds.
func thinViolations(dir string) ([]thinViolation, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		return nil, err
	}
	var out []thinViolation
	for _, path := range files {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		v, err := thinViolationsOf(filepath.Base(path), src)
		if err != nil {
			return nil, err
		}
		out = append(out, v...)
	}
	return out, nil
}

// thinViolationsOf checks one file's source.
func thinViolationsOf(name string, src []byte) ([]thinViolation, error) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, name, src, parser.SkipObjectResolution)
	if err != nil {
		return nil, err
	}
	var out []thinViolation
	if n := strings.Count(string(src), "\n"); n > maxFileLines {
		out = append(out, thinViolation{name, fmt.Sprintf("the file has %d lines (at most %d)", n, maxFileLines)})
	}
	// Lines after the first of a string literal: help texts, not code.
	text := map[int]bool{}
	ast.Inspect(f, func(n ast.Node) bool {
		if lit, ok := n.(*ast.BasicLit); ok && lit.Kind == token.STRING {
			for l := fset.Position(lit.Pos()).Line + 1; l <= fset.Position(lit.End()).Line; l++ {
				text[l] = true
			}
		}
		return true
	})
	code := func(n ast.Node) int {
		lines := 0
		for l := fset.Position(n.Pos()).Line; l <= fset.Position(n.End()).Line; l++ {
			if !text[l] {
				lines++
			}
		}
		return lines
	}
	for _, d := range f.Decls {
		if fd, ok := d.(*ast.FuncDecl); ok {
			if n := code(fd); n > maxFuncLines {
				out = append(out, thinViolation{fmt.Sprintf("%s:%d", name, fset.Position(fd.Pos()).Line),
					fmt.Sprintf("func %s has %d lines of code (at most %d)", fd.Name.Name, n, maxFuncLines)})
			}
		}
	}
	ast.Inspect(f, func(n ast.Node) bool {
		kv, ok := n.(*ast.KeyValueExpr)
		if !ok {
			return true
		}
		if key, ok := kv.Key.(*ast.Ident); ok && key.Name == "RunE" {
			if n := code(kv.Value); n > maxRunELines {
				out = append(out, thinViolation{fmt.Sprintf("%s:%d", name, fset.Position(kv.Pos()).Line),
					fmt.Sprintf("a RunE of %d lines (at most %d): read the flags into options and call the verb's package", n, maxRunELines)})
			}
		}
		return true
	})
	return out, nil
}

// TestCommandStaysThin: no function, RunE or file of the command grows past
// its bound; a verb's work goes to the verb's package.
func TestCommandStaysThin(t *testing.T) {
	root := moduleDir(t)
	for _, dir := range commandDirs {
		found, err := thinViolations(filepath.Join(root, dir))
		if err != nil {
			t.Fatal(err)
		}
		sort.Slice(found, func(i, j int) bool { return found[i].where < found[j].where })
		for _, v := range found {
			t.Errorf("%s/%s: %s", dir, v.where, v.what)
		}
	}
}

// TestThinViolationsFindsThickCode: the check finds a RunE, a function and a
// file past their bounds, and leaves help texts and small code alone.
func TestThinViolationsFindsThickCode(t *testing.T) {
	var b strings.Builder
	b.WriteString("package main\n\nfunc newCommand() *Command {\n\treturn &Command{\n\t\tLong: `help\n")
	for range maxFileLines {
		b.WriteString("help text, not code\n")
	}
	b.WriteString("`,\n\t\tRunE: func() error {\n")
	for i := range maxRunELines {
		fmt.Fprintf(&b, "\t\t\tx%d := %d\n\t\t\t_ = x%d\n", i, i, i)
	}
	b.WriteString("\t\t\treturn nil\n\t\t},\n\t}\n}\n\nfunc long() {\n")
	for i := range maxFuncLines {
		fmt.Fprintf(&b, "\ty%d := %d\n\t_ = y%d\n", i, i, i)
	}
	b.WriteString("}\n\nfunc short() {}\n")
	found, err := thinViolationsOf("thick.go", []byte(b.String()))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, v := range found {
		got = append(got, v.what)
	}
	want := []string{"the file has", "func long has", "a RunE of"}
	if len(got) != len(want) {
		t.Fatalf("found %q, want one each of %q", got, want)
	}
	for i, w := range want {
		if !strings.HasPrefix(got[i], w) {
			t.Errorf("violation %d is %q, want %q…", i, got[i], w)
		}
	}
	// newCommand holds the help text and a RunE of 2*maxRunELines+3 lines of
	// code: it is within maxFuncLines, so its help text was not counted.
	for _, v := range found {
		if strings.Contains(v.what, "newCommand") || strings.Contains(v.what, "short") {
			t.Errorf("flagged %q", v.what)
		}
	}
}
