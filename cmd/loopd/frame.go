package main

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
)

// errNoSubcommand is returned by a command that only groups others (loopd
// config, loopd hook) when it is run without one; its help is printed
// first, as kubectl does for its groups.
var errNoSubcommand = errors.New("a subcommand is required")

// requireSubcommands makes every command under root that only groups
// others refuse what cobra would otherwise answer with its help and exit
// status 0: an unknown subcommand is an error naming it, with cobra's
// "Did you mean this?" suggestions, and no subcommand at all is an error
// after the help (bare loopd only prints its help). cobra itself checks unknown subcommands of the root only
// (legacyArgs); a group without Run returns flag.ErrHelp before any
// argument check, hence the RunE.
func requireSubcommands(root *cobra.Command) {
	// cobra adds its completion command at Execute; made now, it is
	// covered too.
	root.InitDefaultCompletionCmd()
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		for _, sub := range c.Commands() {
			walk(sub)
		}
		if !c.HasSubCommands() || c.Runnable() {
			return
		}
		c.Args = unknownSubcommand
		c.RunE = func(c *cobra.Command, _ []string) error {
			if err := c.Help(); err != nil {
				return err
			}
			if !c.HasParent() {
				return nil // bare loopd asks for help, as bare kubectl does
			}
			return fmt.Errorf("%s: %w", c.CommandPath(), errNoSubcommand)
		}
	}
	walk(root)
}

// unknownSubcommand is the Args of a group: any argument is a subcommand
// it does not have. The message is cobra's own for the root.
func unknownSubcommand(c *cobra.Command, args []string) error {
	if len(args) == 0 {
		return nil
	}
	if c.SuggestionsMinimumDistance <= 0 {
		c.SuggestionsMinimumDistance = 2 // cobra's default
	}
	var b strings.Builder
	fmt.Fprintf(&b, "unknown command %q for %q", args[0], c.CommandPath())
	if s := c.SuggestionsFor(args[0]); len(s) > 0 {
		b.WriteString("\n\nDid you mean this?\n")
		for _, name := range s {
			fmt.Fprintf(&b, "\t%s\n", name)
		}
	}
	return errors.New(strings.TrimSuffix(b.String(), "\n"))
}

// checkGlobals refuses bad values of the global flags before any command
// does work: --log-level and --log-format are parsed by the logger every
// command builds (globals.logger, their one home), here once on nothing.
func (g *globals) checkGlobals(cmd *cobra.Command) error {
	if _, err := g.logger(io.Discard); err != nil {
		return err
	}
	g.stderr = cmd.ErrOrStderr()
	g.findConfig()
	return nil
}
