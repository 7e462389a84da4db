package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/slowstart/slowstart/lab/netlab"
	"github.com/slowstart/slowstart/probe/exact"
)

func newCleanCommand() *cobra.Command {
	var all bool
	cmd := &cobra.Command{
		Use:   "clean",
		Short: "Remove what a killed slowstart left behind: lab namespaces, processes, directories, firewall tables",
		Long: `Remove what slowstart runs that were killed (SIGKILL, a crash, a reboot of a
container) left behind, and say what was removed:

  - the lab's network namespaces (slowstart-PID-START-N-c/-s under /run/netns),
    with the servers and clients still running inside them;
  - the lab's temporary directories (slowstart-PID-START-WHAT-N in the temporary
    directory: nginx configurations, curl CA files);
  - the nftables tables of probe --exact and survey (slowstart_exact_PID), in
    this network namespace and in every named one, which rewrite the MSS of
    and hold back the ACKs of the connections they measure.

Only what carries the marker slowstart writes into each (the PID and start
time of the process that made it) is removed, and only when that process is
gone: a file, namespace or table of yours with a similar name is never touched.
(What a run killed before it could write the marker left, an empty mount point
or directory, is proven by its name, which carries the same PID and start time.)
An exact table's connections expire by themselves within seconds; the lab and
every probe, survey and watch also clean up at their start.

It needs root.`,
		Example: `  sudo slowstart clean
  sudo slowstart clean --all    # also the lab namespaces of runs still going`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runClean(cmd, all)
		},
	}
	cmd.Flags().BoolVar(&all, "all", false, "also remove the lab namespaces of runs that are still going")
	return cmd
}

// runClean removes every kind of leftover and prints one line per thing removed.
func runClean(cmd *cobra.Command, all bool) error {
	if os.Geteuid() != 0 {
		return withCode(exitPermission, errors.New("removing network namespaces and nftables tables needs root: run sudo slowstart clean"))
	}
	ctx := cmd.Context()
	out := cmd.OutOrStdout()
	removed, err := netlab.Clean(ctx, all)
	for _, r := range removed {
		if filepath.IsAbs(r) {
			fmt.Fprintf(out, "removed directory %s\n", r)
		} else {
			fmt.Fprintf(out, "removed network namespace %s\n", r)
		}
	}
	tables, tablesErr := exact.CleanEveryNamespace(ctx, out)
	if n := len(removed) + tables; n == 0 && err == nil && tablesErr == nil {
		fmt.Fprintln(out, "nothing to remove")
	}
	return errors.Join(err, tablesErr)
}
