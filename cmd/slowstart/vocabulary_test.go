package main

import (
	"bytes"
	"os"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// vocabularyRow is a row of README's table of flags.
type vocabularyRow struct {
	name      string
	verbs     []string
	oldByVerb map[string][]string // old names (without --) by verb
}

// readVocabulary reads the table under "## Flags" in README.md.
func readVocabulary(t *testing.T) map[string]vocabularyRow {
	t.Helper()
	data, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	section := string(data)
	start := strings.Index(section, "\n## Flags\n")
	if start < 0 {
		t.Fatal(`README.md has no "## Flags" section`)
	}
	section = section[start+1:]
	if end := strings.Index(section[3:], "\n## "); end >= 0 {
		section = section[:end+3]
	}
	flagName := regexp.MustCompile("^`--([a-z0-9.-]+)`")
	oldName := regexp.MustCompile("`--([a-z0-9.-]+)`(?: \\(([^)]*)\\))?")
	rows := map[string]vocabularyRow{}
	for _, line := range strings.Split(section, "\n") {
		cells := strings.Split(line, " | ")
		if len(cells) != 4 || !strings.HasPrefix(line, "| `--") {
			continue
		}
		m := flagName.FindStringSubmatch(strings.TrimPrefix(cells[0], "| "))
		if m == nil {
			t.Fatalf("README's row %q does not start with a flag", line)
		}
		row := vocabularyRow{name: m[1], oldByVerb: map[string][]string{}}
		for _, v := range strings.Split(cells[2], ",") {
			row.verbs = append(row.verbs, strings.TrimSpace(v))
		}
		for _, old := range oldName.FindAllStringSubmatch(cells[3], -1) {
			verbs := row.verbs
			if old[2] != "" && !strings.HasPrefix(old[2], "the ") {
				verbs = strings.Split(old[2], ", ")
			}
			for _, v := range verbs {
				row.oldByVerb[v] = append(row.oldByVerb[v], old[1])
			}
		}
		if _, dup := rows[row.name]; dup {
			t.Errorf("README lists --%s twice: one name, one meaning, one row", row.name)
		}
		rows[row.name] = row
	}
	if len(rows) == 0 {
		t.Fatal("README's table of flags has no rows")
	}
	return rows
}

// verbFlag is a flag of a verb.
type verbFlag struct {
	verb string
	flag *pflag.Flag
	cmd  *cobra.Command
}

// everyFlag lists the flags of every runnable verb (hidden ones too), and the
// root's persistent flags as those of "every verb".
func everyFlag(root *cobra.Command) []verbFlag {
	var out []verbFlag
	root.PersistentFlags().VisitAll(func(f *pflag.Flag) {
		out = append(out, verbFlag{"every verb", f, root})
	})
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if c.Runnable() && c != root {
			verb := strings.TrimPrefix(c.CommandPath(), "slowstart ")
			c.LocalNonPersistentFlags().VisitAll(func(f *pflag.Flag) {
				out = append(out, verbFlag{verb, f, c})
			})
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
	return out
}

// TestFlagVocabulary: every flag of every verb is a row of README's table,
// with the verb listed; every row's verbs take it; a name has one kind of
// value across verbs; and every old name is a hidden, deprecated name of its
// row's flag in the verbs it names, and no other flag is hidden.
func TestFlagVocabulary(t *testing.T) {
	rows := readVocabulary(t)
	flags := everyFlag(newRootCommand())
	has := map[string]map[string]bool{} // name → verbs
	kinds := map[string]map[string][]string{}
	hidden := map[string]map[string]*pflag.Flag{} // verb → old name → flag
	for _, vf := range flags {
		f := vf.flag
		if f.Hidden {
			if hidden[vf.verb] == nil {
				hidden[vf.verb] = map[string]*pflag.Flag{}
			}
			hidden[vf.verb][f.Name] = f
			continue
		}
		row, ok := rows[f.Name]
		switch {
		case !ok:
			t.Errorf("%s --%s is not in README's table of flags", vf.verb, f.Name)
			continue
		case !slices.Contains(row.verbs, vf.verb):
			t.Errorf("README's row of --%s does not list %s, which takes it", f.Name, vf.verb)
		}
		if has[f.Name] == nil {
			has[f.Name], kinds[f.Name] = map[string]bool{}, map[string][]string{}
		}
		has[f.Name][vf.verb] = true
		kind := valueKind(f)
		kinds[f.Name][kind] = append(kinds[f.Name][kind], vf.verb)
	}
	for name, row := range rows {
		for _, verb := range row.verbs {
			if !has[name][verb] {
				t.Errorf("README lists --%s for %s, which does not take it", name, verb)
			}
		}
		if len(kinds[name]) > 1 && name != "slow-start-after-idle" {
			// slow-start-after-idle is the one switch of the lab (on) and a
			// value of tune apply (0 or 1, either way): README says so.
			t.Errorf("--%s takes values of different kinds: %v", name, kinds[name])
		}
		for verb, olds := range row.oldByVerb {
			for _, old := range olds {
				f := hidden[verb][old]
				switch {
				case f == nil:
					t.Errorf("README names --%s as the old name of --%s in %s, which does not take it", old, name, verb)
				case f.Deprecated == "" || !strings.Contains(f.Deprecated, "--"+name):
					t.Errorf("%s --%s: not deprecated for --%s (%q)", verb, old, name, f.Deprecated)
				}
				delete(hidden[verb], old)
			}
		}
	}
	for verb, left := range hidden {
		for old := range left {
			t.Errorf("%s has a hidden flag --%s that README's table does not name", verb, old)
		}
	}
}

// valueKind is what a flag takes: a switch, a number, a duration, or a text
// (one value or a list of them, which the verbs read alike).
func valueKind(f *pflag.Flag) string {
	switch t := f.Value.Type(); t {
	case "string", "stringSlice", "stringArray":
		return "text"
	default:
		return t
	}
}

// TestOldFlagNamesStillWork: each old name of README's table parses in the
// verbs it names, sets its new flag, and says on standard error, in one
// line, that it is deprecated and what to use instead.
func TestOldFlagNamesStillWork(t *testing.T) {
	rows := readVocabulary(t)
	samples := map[string]string{"int": "7", "uint64": "7", "float64": "0.07", "duration": "7s", "bool": ""}
	checked := 0
	for name, row := range rows {
		for verb, olds := range row.oldByVerb {
			for _, old := range olds {
				root := newRootCommand()
				var stderr bytes.Buffer
				root.SetErr(&stderr)
				root.SetOut(&bytes.Buffer{})
				cmd, _, err := root.Find(strings.Fields(verb))
				if err != nil {
					t.Fatalf("%s: %v", verb, err)
				}
				oldFlag := cmd.Flags().Lookup(old)
				if oldFlag == nil {
					t.Errorf("%s does not take --%s, README's old name of --%s", verb, old, name)
					continue
				}
				value, ok := samples[oldFlag.Value.Type()]
				if !ok {
					value = "sample-value"
				}
				arg := "--" + old
				if value != "" {
					arg += "=" + value
				}
				if err := cmd.ParseFlags([]string{arg}); err != nil {
					t.Errorf("%s %s: %v", verb, arg, err)
					continue
				}
				checked++
				notice := stderr.String()
				if strings.Count(notice, "\n") != 1 || !strings.Contains(notice, "--"+old+" has been deprecated") || !strings.Contains(notice, "--"+name) {
					t.Errorf("%s %s: the notice on standard error is %q, want one line naming --%s", verb, arg, notice, name)
				}
				newFlag := cmd.Flags().Lookup(name)
				if alias, isAlias := oldFlag.Value.(alias); isAlias {
					if alias.target != newFlag || !newFlag.Changed || (value != "" && !strings.Contains(newFlag.Value.String(), value)) {
						t.Errorf("%s %s: --%s is %q (given: %v), want %q", verb, arg, name, newFlag.Value.String(), newFlag.Changed, value)
					}
				}
			}
		}
	}
	if checked < 15 {
		t.Errorf("only %d old names checked: README's table lost its old names", checked)
	}
}

// TestHelpListsNoOldName: --help of a verb shows the new names only.
func TestHelpListsNoOldName(t *testing.T) {
	for _, verb := range []string{"lab run", "survey", "probe", "view", "watch"} {
		root := newRootCommand()
		var out bytes.Buffer
		root.SetOut(&out)
		root.SetArgs(append(strings.Fields(verb), "--help"))
		if err := root.Execute(); err != nil {
			t.Fatal(err)
		}
		var old []string
		for _, name := range []string{"trials", "concurrency", "page-loads", "filter", "count", "dns-concurrency", "client"} {
			if strings.Contains(out.String(), "--"+name+" ") {
				old = append(old, name)
			}
		}
		sort.Strings(old)
		if len(old) > 0 {
			t.Errorf("%s --help lists old names %v", verb, old)
		}
	}
}
