package main

import (
	"strings"

	"github.com/spf13/cobra"

	"github.com/loopd/loopd/internal/launch"
)

// newLaunchCmd is the launcher a pane runs first (package launch): it is
// hidden, since only the executor starts it.
func newLaunchCmd() *cobra.Command {
	return newExecStepCmd(launch.Command, launch.EnvFileFlag, "FILE",
		"Start a harness with the environment in FILE, which it removes (used by loopd's panes)",
		"file holding the harness environment (JSON)", launch.Exec)
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
