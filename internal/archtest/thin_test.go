package archtest

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

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
