package tune

// This file runs the tune verbs as slowstart tune show, apply and revert do,
// and writes their results as text.

import (
	"context"
	"fmt"
	"io"

	"github.com/slowstart/slowstart/internal/fault"
	"github.com/slowstart/slowstart/internal/jsonout"
	"github.com/slowstart/slowstart/internal/progress"
	"github.com/slowstart/slowstart/internal/texttable"
	"github.com/slowstart/slowstart/report"
	"github.com/slowstart/slowstart/units"
)

// Show prints the routes and sysctls of the network namespace netnsName and
// the advice, priced by the model on a page of size over rtt (units'
// forms), as text or JSON; the pricing shows its progress on standard error
// when it takes seconds.
func Show(netnsName, size, rtt string, asJSON bool, out io.Writer) error {
	var page Page
	var err error
	if page.SizeBytes, err = units.ParseSize(size); err != nil {
		return fault.Usagef("--size: %w", err)
	} else if page.SizeBytes <= 0 {
		return fault.Usagef("--size %q: give a size such as 160KB", size)
	}
	if page.RTTNs, err = units.ParseDuration(rtt); err != nil {
		return fault.Usagef("--rtt: %w", err)
	} else if page.RTTNs <= 0 {
		return fault.Usagef("--rtt %q: give a duration such as 130ms", rtt)
	}
	state, err := Read(netnsName)
	if err != nil {
		return err
	}
	var bar *progress.Work
	started := false
	page.Progress = func(done, total int64) {
		if !started {
			started = true
			bar = progress.NewWork(fmt.Sprintf("Pricing the advice on a %s page, packet by packet", report.Size(page.SizeBytes)), total)
		}
		bar.Set(done, total)
	}
	recs, err := Recommend(state, page)
	bar.Finish()
	if err != nil {
		return err
	}
	if asJSON {
		return jsonout.Write(out, NewShowOutput(state, recs))
	}
	WriteShow(out, state, recs)
	return nil
}

// WriteShow writes the routes, the sysctls and the advice as text.
func WriteShow(w io.Writer, state *State, recs []Recommendation) {
	where := "this network namespace"
	if state.Netns != "" {
		where = "network namespace " + state.Netns
	}
	fmt.Fprintf(w, "Routes in %s (%d):\n", where, len(state.Routes))
	for _, r := range state.Routes {
		fmt.Fprintf(w, "  %s\n", r)
	}
	fmt.Fprintln(w, "\nSysctls:")
	tb := texttable.New("  ", texttable.L("sysctl"), texttable.L("value"))
	for _, s := range state.Sysctls {
		if s.Error != "" {
			tb.Row(s.Name, "(unreadable: "+s.Error+")")
			continue
		}
		tb.Row(s.Name, s.Value)
	}
	tb.Write(w)
	fmt.Fprintln(w, "\nRecommendations:")
	if len(recs) == 0 {
		fmt.Fprintln(w, "  none: the initial windows and sysctls are already where they help")
	}
	for _, r := range recs {
		fmt.Fprintf(w, "  - %s\n", r.Reason)
		if r.Action != "" {
			fmt.Fprintf(w, "    do: %s\n", r.Action)
		}
	}
}

// WriteApply writes what apply changed (or would change), as the ip and
// sysctl commands that do it.
func WriteApply(w io.Writer, res *ApplyResult) {
	pending := 0
	for _, c := range res.Changes {
		switch {
		case c.Skipped != "":
			fmt.Fprintf(w, "skipped: %s: %s\n", c.Before, c.Skipped)
		case c.Unchanged:
			fmt.Fprintf(w, "unchanged: %s\n", c.Before)
		default:
			pending++
			fmt.Fprintln(w, c.Command)
		}
	}
	pendingSysctls := 0
	for _, s := range res.Sysctls {
		if s.Unchanged {
			fmt.Fprintf(w, "unchanged: %s = %s\n", s.Name, s.Before)
			continue
		}
		pendingSysctls++
		fmt.Fprintf(w, "%s   # was %s\n", s.Command, s.Before)
	}
	switch {
	case pending+pendingSysctls == 0:
		fmt.Fprintln(w, "Nothing to change: every matching route and sysctl already has these values.")
	case res.DryRun:
		fmt.Fprintf(w, "Dry run: %d route(s) and %d sysctl(s) would change; nothing was changed or written.\n", pending, pendingSysctls)
	default:
		fmt.Fprintf(w, "Backup of the prior state: %s\n", res.BackupPath)
		fmt.Fprintf(w, "Changed %d route(s) and %d sysctl(s). New connections use the new values; undo with: slowstart tune revert --backup %s\n",
			res.Changed, res.SysctlsChanged, res.BackupPath)
	}
	writeMarkNote(w, res.MarksFile, res.MarkError)
}

// writeMarkNote says where the change was recorded for slowstart field, or why
// it could not be.
func writeMarkNote(w io.Writer, marksFile, markError string) {
	switch {
	case markError != "":
		fmt.Fprintf(w, "warning: the change stands, but it could not be recorded for slowstart field: %s\n", markError)
	case marksFile != "":
		fmt.Fprintf(w, "Recorded in %s: slowstart field marks the change in its store.\n", marksFile)
	}
}

// WriteRevert writes what revert restored.
func WriteRevert(w io.Writer, res *RevertResult, err error) {
	fmt.Fprintf(w, "Backup: %s\n", res.BackupPath)
	for _, c := range res.Changes {
		switch {
		case c.Unchanged:
			fmt.Fprintf(w, "unchanged: %s\n", c.After)
		case c.Missing:
			fmt.Fprintf(w, "re-added: %s\n", c.Command)
		default:
			fmt.Fprintln(w, c.Command)
		}
	}
	for _, s := range res.Sysctls {
		if s.Unchanged {
			fmt.Fprintf(w, "unchanged: %s = %s\n", s.Name, s.After)
		} else {
			fmt.Fprintf(w, "%s   # was %s\n", s.Command, s.Before)
		}
	}
	if res.Changed+res.SysctlsChanged == 0 && err == nil {
		fmt.Fprintln(w, "Nothing to change: the routes and sysctls are as the backup recorded them.")
	} else if err == nil {
		fmt.Fprintf(w, "Restored %d route(s) and %d sysctl(s).\n", res.Changed, res.SysctlsChanged)
	}
	writeMarkNote(w, res.MarksFile, res.MarkError)
}

// RunApply applies opts as slowstart tune apply does and writes what changed
// (text, or JSON) to out; persist adds how to keep the change after a reboot.
// A signal (ctx) stops it with what was changed, or that nothing was
// (fault.Interrupted). Its other errors are Apply's, with the backup named
// when there is one.
func RunApply(ctx context.Context, opts ApplyOptions, asJSON, persist bool, out io.Writer) error {
	res, err := Apply(opts)
	if ctx.Err() != nil {
		switch {
		case res != nil && res.Changed+res.SysctlsChanged > 0:
			return fault.Interruptedf("interrupted after changing %d route(s) and %d sysctl(s); undo with: slowstart tune revert --backup %s", res.Changed, res.SysctlsChanged, res.BackupPath)
		case res != nil && res.BackupPath != "":
			return fault.Interruptedf("interrupted; nothing was changed (the backup %s records the state)", res.BackupPath)
		}
		return fault.Interruptedf("interrupted; nothing was changed")
	}
	if err != nil && (res == nil || len(res.Changes)+len(res.Sysctls) == 0) {
		return err
	}
	if asJSON {
		if encErr := jsonout.Write(out, res); encErr != nil {
			return encErr
		}
	} else {
		WriteApply(out, res)
	}
	if err != nil {
		if res.BackupPath != "" {
			err = fmt.Errorf("%w (backup of the prior state: %s)", err, res.BackupPath)
		}
		return err
	}
	if persist && !asJSON {
		fmt.Fprintln(out)
		WritePersistHelp(out, res, opts.InitCwnd, opts.InitRwnd)
	}
	return nil
}

// RunRevert reverts as slowstart tune revert does and writes what was
// restored (text, or JSON) to out. Its errors are Revert's.
func RunRevert(opts RevertOptions, asJSON bool, out io.Writer) error {
	res, err := Revert(opts)
	if err != nil && res == nil {
		return err
	}
	if asJSON {
		if encErr := jsonout.Write(out, res); encErr != nil {
			return encErr
		}
	} else {
		WriteRevert(out, res, err)
	}
	return err
}
