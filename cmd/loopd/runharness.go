package main

import (
	"github.com/spf13/cobra"

	"github.com/loopd/loopd/internal/runner"
)

// newRunHarnessCmd is the wrapper of one run of the process runner
// (runner.Exec): hidden, since only the executor starts it.
func newRunHarnessCmd() *cobra.Command {
	var dir, id string
	cmd := &cobra.Command{
		Use:    runner.Command + " " + runner.DirFlag + " DIR " + runner.IDFlag + " ID -- COMMAND [ARG...]",
		Short:  "Run a harness's headless turn and record its pid and exit status in DIR (used by the process runner)",
		Hidden: true,
		Args:   cobra.MinimumNArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			return runner.Exec(dir, id, args)
		},
	}
	cmd.Flags().StringVar(&dir, runner.DirFlag[2:], "", "directory of the run's files")
	cmd.Flags().StringVar(&id, runner.IDFlag[2:], "", "the run's id")
	_ = cmd.MarkFlagRequired(runner.DirFlag[2:])
	_ = cmd.MarkFlagRequired(runner.IDFlag[2:])
	// Everything after the first argument is the harness's own argv.
	cmd.Flags().SetInterspersed(false)
	return cmd
}
