package main

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/slowstart/slowstart/tune"
)

// tuneHoldEnv, set to 1, makes `tune apply` stop after writing its backup and
// before changing any route, until interrupted: it lets tests kill the process
// at that point.
const tuneHoldEnv = "SLOWSTART_TUNE_HOLD_AFTER_BACKUP"

func newTuneCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "tune",
		Short: "Show, change and restore the server's initcwnd and the TCP settings beside it",
		Long: `tune reads and changes what decides a server's first round trips.

A new TCP connection may send only its initial window (initcwnd; Linux: 10
segments, about 14.6 KB) before it waits a round trip for acknowledgements. The
window is a metric of the route towards the client: one 'ip route change ...
initcwnd N' line changes it for every new connection. tune shows the routes and
sysctls, applies new windows with a backup made first, and reverts them exactly.`,
		Example: `  slowstart tune show                              # routes, sysctls, advice priced by the model
  slowstart tune apply --initcwnd 32 --dry-run     # what would change, as ip commands
  sudo slowstart tune apply --initcwnd 32          # back up, then change the default routes
  sudo slowstart tune revert                       # put them back as the newest backup recorded`,
	}
	cmd.AddCommand(newTuneShowCommand(), newTuneApplyCommand(), newTuneRevertCommand())
	return cmd
}

const tuneExitCodes = `

No route matching exits 2; a backup that can't be found or read exits 3.`

// tuneCode maps a tune error to an exit code.
func tuneCode(err error) error {
	var usage *tune.UsageError
	var noRoute *tune.NoRouteError
	var backup *tune.BackupError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &usage), errors.As(err, &noRoute):
		return withCode(exitUsage, err)
	case errors.As(err, &backup):
		return withCode(exitFile, err)
	case errors.Is(err, syscall.EPERM), errors.Is(err, os.ErrPermission):
		return withCode(exitPermission, fmt.Errorf("%w (changing routes or entering a namespace needs root)", err))
	}
	return err
}

func newTuneShowCommand() *cobra.Command {
	var netnsFlag, size, rtt string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "show",
		Short: "Routes with their metrics, the TCP sysctls that matter, and advice",
		Long: `show lists every route (all tables, IPv4 and IPv6) with its metrics (initcwnd,
initrwnd, congctl, mtu, advmss, rto_min, quickack, ...), the sysctls that decide
a new connection's first rounds, and recommendations with the time each saves on
a page of --size over --rtt, as model.Simulate predicts it.` + tuneExitCodes,
		Example: `  slowstart tune show
  slowstart tune show --size 500KB --rtt 200ms
  slowstart tune show --netns web1 --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			netnsName, err := netnsName(netnsFlag)
			if err != nil {
				return err
			}
			return tuneCode(tune.Show(netnsName, size, rtt, asJSON, cmd.OutOrStdout()))
		},
	}
	f := cmd.Flags()
	addNetnsFlag(f, &netnsFlag)
	f.StringVar(&size, "size", "160KB", "page size the advice is priced on")
	f.StringVar(&rtt, "rtt", "130ms", "round-trip time the advice is priced on")
	f.BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

func newTuneApplyCommand() *cobra.Command {
	var opts tune.ApplyOptions
	var persist, asJSON bool
	var slowStartAfterIdle, noMetricsSave string
	cmd := &cobra.Command{
		Use:   "apply --initcwnd N",
		Short: "Set initcwnd (and initrwnd) on routes, backing them up first",
		Long: `apply sets the initial congestion window (initcwnd, segments) and optionally
the initial receive window (initrwnd) on the chosen routes. It prints the
equivalent 'ip route change' lines, writes a backup of the exact prior state of
every route it touches (fsync'd, then renamed into place) and only then replaces
each route through netlink, keeping every other attribute of it. Routes that
already carry the values are left alone. Values outside 1..100 segments are
refused without --force. The change applies to new connections only.

--slow-start-after-idle 0 stops the kernel from shrinking an idle keep-alive
connection's window back to the initial one; --no-metrics-save 1 stops it from
starting new connections from the cached ssthresh of earlier ones. Their prior
values go into the same backup, and revert restores them too.` + tuneExitCodes,
		Example: `  slowstart tune apply --initcwnd 32 --dry-run
  sudo slowstart tune apply --initcwnd 32 --initrwnd 32
  sudo slowstart tune apply --initcwnd 20 --route 203.0.113.0/24 --backup /root/routes.json
  sudo slowstart tune apply --initcwnd 32 --route all --persist
  sudo slowstart tune apply --initcwnd 32 --slow-start-after-idle 0`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := applyOptions(cmd, &opts, slowStartAfterIdle, noMetricsSave); err != nil {
				return err
			}
			return tuneCode(tune.RunApply(cmd.Context(), opts, asJSON, persist, cmd.OutOrStdout()))
		},
	}
	f := cmd.Flags()
	f.IntVar(&opts.InitCwnd, "initcwnd", 0, "initial congestion window to set, in segments (1..100)")
	f.IntVar(&opts.InitRwnd, "initrwnd", 0, "initial receive window to set, in segments (0 leaves it)")
	f.StringVar(&opts.Route, "route", tune.RouteDefault, "routes to change: default, all, or a PREFIX such as 203.0.113.0/24")
	addNetnsFlag(f, &opts.Netns)
	f.StringVar(&slowStartAfterIdle, "slow-start-after-idle", "", "also set net.ipv4.tcp_slow_start_after_idle to `0|1` (0: idle connections keep their window)")
	f.StringVar(&noMetricsSave, "no-metrics-save", "", "also set net.ipv4.tcp_no_metrics_save to `0|1` (1: no cached ssthresh across connections)")
	f.BoolVar(&opts.DryRun, "dry-run", false, "print what would change, change nothing")
	f.BoolVar(&opts.Force, "force", false, "allow windows above 100 segments")
	f.BoolVar(&persist, "persist", false, "also print how to keep the change after a reboot (systemd-networkd, netplan, ifupdown)")
	f.StringVar(&opts.BackupPath, "backup", "", "write the backup to `FILE` (default: a new file in --backup-dir)")
	f.StringVar(&opts.BackupDir, "backup-dir", tune.DefaultBackupDir, "directory of the backups")
	f.BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

// applyOptions reads the flags of tune apply into opts: the namespace, the
// sysctls given, the window (required unless something else is set), the
// command line recorded in the backup.
func applyOptions(cmd *cobra.Command, opts *tune.ApplyOptions, slowStartAfterIdle, noMetricsSave string) error {
	flags := cmd.Flags()
	var err error
	if opts.Netns, err = netnsName(opts.Netns); err != nil {
		return err
	}
	opts.Sysctls = map[string]string{}
	if flags.Changed("slow-start-after-idle") {
		opts.Sysctls[tune.SysctlSlowStartAfterIdle] = slowStartAfterIdle
	}
	if flags.Changed("no-metrics-save") {
		opts.Sysctls[tune.SysctlNoMetricsSave] = noMetricsSave
	}
	switch {
	case flags.Changed("initcwnd"):
		if err := tune.CheckWindow("initcwnd", opts.InitCwnd, opts.Force); err != nil {
			return withCode(exitUsage, err)
		}
	case !flags.Changed("initrwnd") && len(opts.Sysctls) == 0:
		return withCode(exitUsage, errors.New("--initcwnd N is required (segments; Linux's default is 10), unless --initrwnd, --slow-start-after-idle or --no-metrics-save is given"))
	}
	opts.Command = "slowstart " + strings.Join(os.Args[1:], " ")
	if os.Getenv(tuneHoldEnv) == "1" {
		errOut, ctx := cmd.ErrOrStderr(), cmd.Context()
		opts.AfterBackup = func(path string) error {
			fmt.Fprintf(errOut, "backup written: %s; holding before any change (%s=1)\n", path, tuneHoldEnv)
			<-ctx.Done()
			return ctx.Err()
		}
	}
	return nil
}

func newTuneRevertCommand() *cobra.Command {
	var opts tune.RevertOptions
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "revert",
		Short: "Restore the routes exactly as a backup recorded them",
		Long: `revert puts every route a backup recorded back in its recorded state (all its
attributes, not only initcwnd), adding back a route deleted since, and every
sysctl it recorded back to its recorded value. Without
--backup it takes the newest backup in --backup-dir made for the same network
namespace. Routes already in the recorded state are left alone, so reverting
twice is harmless.` + tuneExitCodes,
		Example: `  sudo slowstart tune revert
  sudo slowstart tune revert --backup /var/lib/slowstart/tune/tune-backup-20250101T120000.000000000Z-4242.json
  sudo slowstart tune revert --netns web1`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var err error
			if opts.Netns, err = netnsName(opts.Netns); err != nil {
				return err
			}
			return tuneCode(tune.RunRevert(opts, asJSON, cmd.OutOrStdout()))
		},
	}
	f := cmd.Flags()
	f.StringVar(&opts.BackupPath, "backup", "", "the backup `FILE` to restore (default: the newest for the namespace)")
	f.StringVar(&opts.BackupDir, "backup-dir", tune.DefaultBackupDir, "directory of the backups")
	f.StringVar(&opts.Netns, "netns", "", netnsHelp+" (default: the one the backup names)")
	f.BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}
