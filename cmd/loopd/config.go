package main

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"

	"github.com/spf13/cobra"

	"github.com/loopd/loopd/internal/harness"
	"github.com/loopd/loopd/schema"
)

func newConfigCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "config", Short: "Work with the config file"}
	cmd.AddCommand(newConfigInitCmd())
	cmd.AddCommand(&cobra.Command{
		Use:   "validate [FILE]",
		Short: "Validate a config file against schema/loopd.schema.json",
		Long: `validate loads FILE (default: the config file loopd uses, --config or the search path) and checks it against the JSON
Schema and the cross-field rules. Every problem is printed with its line and
key; the exit code is 1 when there is any, and when the config file, an
instructions file, secretFile or the GitHub App's key file is one other
users can change (or, for a secret, read), and when a harness a route uses
has a command that cannot be found or run (named with where it was looked
for); a missing one no route uses is a warning. When a route runs its
agents in a sandbox (sandbox.mode bubblewrap, the default), it checks that
bubblewrap is installed and can make namespaces here, and says what to
install or turn on when not.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			path := g.config
			if len(args) == 1 {
				path = args[0]
			} else if g.configErr != nil {
				return g.configErr
			}
			cfg, partial, err := schema.Check(path)
			if cfg == nil {
				// The harness commands are looked for too, in what can
				// be read of the file, so that one run names every
				// problem it can.
				if partial != nil {
					adapters, _ := harnessAdapters(partial)
					return errors.Join(append([]error{err}, missingRouteHarnesses(partial, adapters)...)...)
				}
				return err
			}
			adapters, problems := harnessAdapters(cfg)
			used := routeHarnesses(cfg)
			for _, name := range slices.Sorted(maps.Keys(adapters)) {
				if err := harness.LookCommand(adapters[name]); err != nil && !slices.Contains(used, name) {
					fmt.Fprintf(os.Stderr, "warning: %v (no route uses it)\n", err)
				}
			}
			// err is the file's mode, when others can change it.
			problems = append(append(append(problems, err), missingRouteHarnesses(cfg, adapters)...), checkRoutes(cfg, adapters))
			problems = append(problems, checkSecretFiles(cfg, func(err error) { fmt.Fprintf(os.Stderr, "warning: %v\n", err) }))
			if gh := cfg.Webhooks.GHWebhook; gh.SecretFile == "" && os.Getenv(gh.SecretEnv) == "" {
				// Validate may run where serve will not (a CI job): a
				// warning, which serve makes a refusal.
				fmt.Fprintf(os.Stderr, "warning: %v (here; serve refuses to start without it)\n", errSecretEnvEmpty(gh.SecretEnv))
			}
			if sb, err := sandboxOf(cmd.Context(), cfg, path); err != nil {
				problems = append(problems, err)
			} else {
				problems = append(problems, checkSandbox(cfg, sb))
			}
			if err := errors.Join(problems...); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s: ok\n", path)
			return nil
		},
	})
	return cmd
}

// harnessAdapters builds the adapter of each harness of cfg, by name,
// and returns the errors of those it cannot build (harness <name>: …).
func harnessAdapters(cfg *schema.Config) (map[string]harness.Adapter, []error) {
	adapters := map[string]harness.Adapter{}
	var problems []error
	for _, name := range slices.Sorted(maps.Keys(cfg.Harnesses)) {
		ad, err := harness.New(name, cfg.Harnesses[name])
		if err != nil {
			problems = append(problems, err)
			continue
		}
		adapters[name] = ad
	}
	return adapters, problems
}

// checkRoutes reports each route whose runner its harness cannot serve: a
// process route whose adapter has no headless form (the planner would
// block each of its items, harness_not_headless), or whose extraArgs the
// headless form refuses (harness.Headless.CheckHeadlessArgs). config
// validate, serve's start and every reload ask it.
func checkRoutes(cfg *schema.Config, adapters map[string]harness.Adapter) error {
	var problems []error
	for _, key := range slices.Sorted(maps.Keys(cfg.Webhooks.GHWebhook.Routing.Repos)) {
		route := cfg.Webhooks.GHWebhook.Routing.Repos[key]
		if route.Runner != schema.RunnerProcess {
			continue
		}
		h, ok := adapters[route.Harness].(harness.Headless)
		if !ok {
			problems = append(problems, fmt.Errorf("routing.repos.%s: runner process needs a harness with a headless form; %q has none", key, route.Harness))
			continue
		}
		if err := h.CheckHeadlessArgs(); err != nil {
			problems = append(problems, fmt.Errorf("routing.repos.%s: runner process: %w", key, err))
		}
	}
	return errors.Join(problems...)
}
