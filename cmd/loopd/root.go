package main

import (
	"fmt"
	"io"
	"log/slog"
	"runtime/debug"
	"strings"

	"github.com/spf13/cobra"

	"github.com/loopd/loopd/internal/journal"
)

// globals are the flags every command shares.
type globals struct {
	// config is --config until the command starts, the file chosen by
	// findConfig from then on; configErr is why none was found.
	config    string
	configErr error
	logLevel  string
	logFormat string
	// stderr is where a command's warnings go (the command's error
	// writer).
	stderr io.Writer
}

func newRootCmd() *cobra.Command {
	g := &globals{}
	root := &cobra.Command{
		Use:           "loopd",
		Short:         "Keep one agent session per GitHub work item alive in tmux",
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       currentVersion(debug.ReadBuildInfo()).String(),
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			return g.checkGlobals(cmd)
		},
	}
	root.SetVersionTemplate("{{.Version}}\n")
	root.PersistentFlags().StringVar(&g.config, "config", "",
		"config file (default: $"+configEnv+", else the first of ./loopd.yaml, $XDG_CONFIG_HOME/loopd/loopd.yaml, "+etcConfig+")")
	root.PersistentFlags().StringVar(&g.logLevel, "log-level", "info", "log level: debug, info, warn or error")
	root.PersistentFlags().StringVar(&g.logFormat, "log-format", "text", "log format: text or json")
	root.AddCommand(
		newServeCmd(g),
		newReconcileCmd(g),
		newGetCmd(g),
		newHostsCmd(g),
		newDrainCmd(g),
		newEventsCmd(g),
		newDescribeCmd(g),
		newAttachCmd(g),
		newLogsCmd(g),
		newConfigCmd(g),
		newHoldCmd(g, true),
		newHoldCmd(g, false),
		newForgetCmd(g),
		newReplayCmd(g),
		newHookCmd(),
		newCredentialCmd(),
		newLaunchCmd(),
		newFenceCmd(),
		newRunHarnessCmd(),
		newSandboxExecCmd(),
		newVersionCmd(),
	)
	requireSubcommands(root)
	return root
}

// logger builds the process's one slog.Logger, writing to w. A line
// logged with a pass's context carries its reconcile_id
// (journal.WithPassID).
func (g *globals) logger(w io.Writer) (*slog.Logger, error) {
	level, err := g.level()
	if err != nil {
		return nil, err
	}
	return g.loggerAt(w, level)
}

// verbLogger is the logger of a command that prints its own line for a
// person (hold, release, forget): its info lines, the journal rows it
// writes among them, show only at --log-level debug; warnings and errors
// always.
func (g *globals) verbLogger(w io.Writer) (*slog.Logger, error) {
	level, err := g.level()
	if err != nil {
		return nil, err
	}
	if level > slog.LevelDebug {
		level = max(level, slog.LevelWarn)
	}
	return g.loggerAt(w, level)
}

func (g *globals) level() (slog.Level, error) {
	var level slog.Level
	if err := level.UnmarshalText([]byte(g.logLevel)); err != nil {
		// slog's own error names no valid value.
		return 0, fmt.Errorf("--log-level %q: want debug, info, warn or error", g.logLevel)
	}
	return level, nil
}

func (g *globals) loggerAt(w io.Writer, level slog.Level) (*slog.Logger, error) {
	opts := &slog.HandlerOptions{Level: level}
	switch strings.ToLower(g.logFormat) {
	case "text":
		return slog.New(journal.WithPassID(slog.NewTextHandler(w, opts))), nil
	case "json":
		return slog.New(journal.WithPassID(slog.NewJSONHandler(w, opts))), nil
	default:
		return nil, fmt.Errorf("--log-format %q: want text or json", g.logFormat)
	}
}
