package main

import (
	"github.com/spf13/cobra"

	"github.com/loopd/loopd/internal/launch"
)

// newLaunchCmd is the launcher a pane runs first (package launch): it is
// hidden, since only the executor starts it.
func newLaunchCmd() *cobra.Command {
	var envFile string
	cmd := &cobra.Command{
		Use:    launch.Command + " " + launch.EnvFileFlag + " FILE -- COMMAND [ARG...]",
		Short:  "Start a harness with the environment in FILE, which it removes (used by loopd's panes)",
		Hidden: true,
		Args:   cobra.MinimumNArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			return launch.Exec(envFile, args)
		},
	}
	cmd.Flags().StringVar(&envFile, launch.EnvFileFlag[2:], "", "file holding the harness environment (JSON)")
	_ = cmd.MarkFlagRequired(launch.EnvFileFlag[2:])
	// Everything after the first argument is the harness's own argv.
	cmd.Flags().SetInterspersed(false)
	return cmd
}
