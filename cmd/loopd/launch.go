package main

import (
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/loopd/loopd/internal/fence"
	"github.com/loopd/loopd/internal/launch"
	"github.com/loopd/loopd/schema"
)

// newLaunchCmd is the launcher a pane runs first (package launch): it is
// hidden, since only the executor starts it.
func newLaunchCmd() *cobra.Command {
	var (
		stamp string
		epoch uint64
	)
	cmd := newExecStepCmd(launch.Command, launch.EnvFileFlag, "FILE",
		"Start a harness with the environment in FILE, which it removes (used by loopd's panes)",
		"file holding the harness environment (JSON)", func(envFile string, argv []string) error {
			return launch.Exec(envFile, stamp, epoch, argv)
		})
	cmd.Flags().StringVar(&stamp, strings.TrimPrefix(launch.FenceFlag, "--"), "",
		"fence stamp: start the harness only while it holds, and end it once it lapsed (package fence)")
	cmd.Flags().Uint64Var(&epoch, strings.TrimPrefix(launch.EpochFlag, "--"), 0,
		"the lease epoch the spawn was drawn under (package fence)")
	return cmd
}

// newFenceCmd is the watchdog a launcher starts beside its harness
// (package fence): hidden, since only the launcher starts it. It exits 0
// when the harness exits or once it fenced it.
func newFenceCmd() *cobra.Command {
	var (
		stamp string
		epoch uint64
		pid   int
	)
	cmd := &cobra.Command{
		Use:    fence.Command + " " + fence.StampFlag + " FILE " + fence.EpochFlag + " EPOCH " + fence.PIDFlag + " PID",
		Short:  "End the harness PID once the fence stamp FILE no longer holds for EPOCH (started by loopd's launcher)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			// The launcher that started it is its parent, and is the
			// harness once it execs; a parent already gone leaves a pid
			// that another process may take, which is never watched.
			if os.Getppid() != pid {
				return nil
			}
			_, err := fence.Watch(cmd.Context(), fence.Stamp{Path: stamp}, epoch, pid, schema.FencePoll)
			return err
		},
	}
	cmd.Flags().StringVar(&stamp, strings.TrimPrefix(fence.StampFlag, "--"), "", "the fence stamp")
	cmd.Flags().Uint64Var(&epoch, strings.TrimPrefix(fence.EpochFlag, "--"), 0, "the lease epoch the harness was started under")
	cmd.Flags().IntVar(&pid, strings.TrimPrefix(fence.PIDFlag, "--"), 0, "the harness's pid")
	_ = cmd.MarkFlagRequired(strings.TrimPrefix(fence.StampFlag, "--"))
	_ = cmd.MarkFlagRequired(strings.TrimPrefix(fence.EpochFlag, "--"))
	_ = cmd.MarkFlagRequired(strings.TrimPrefix(fence.PIDFlag, "--"))
	return cmd
}

// newExecStepCmd builds a hidden step that a pane runs before its harness
// and that replaces itself with it: `<use> <flag> VALUE -- COMMAND
// [ARG...]`, flag required, everything after the first argument the
// harness's own argv, handed to run with the flag's value.
func newExecStepCmd(use, flag, value, short, flagHelp string, run func(value string, argv []string) error) *cobra.Command {
	var v string
	cmd := &cobra.Command{
		Use:    use + " " + flag + " " + value + " -- COMMAND [ARG...]",
		Short:  short,
		Hidden: true,
		Args:   cobra.MinimumNArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			return run(v, args)
		},
	}
	name := strings.TrimPrefix(flag, "--")
	cmd.Flags().StringVar(&v, name, "", flagHelp)
	_ = cmd.MarkFlagRequired(name)
	// Everything after the first argument is the harness's own argv.
	cmd.Flags().SetInterspersed(false)
	return cmd
}
