package main

import (
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestVersionCommandAndFlagAgree: loopd version and loopd --version print
// the same one line, with the version, the commit and the Go version.
func TestVersionCommandAndFlagAgree(t *testing.T) {
	byCmd, err := run(t, "", "version")
	require.NoError(t, err)
	byFlag, err := run(t, "", "--version")
	require.NoError(t, err)
	assert.Equal(t, byCmd, byFlag)
	assert.Regexp(t, `^loopd \S+ \(commit \S+[,:] .*go\S+\)\n$`, byCmd)
}

// TestCurrentVersion: the -X values win; without them the module version
// and the vcs stamp of go install/go build stand in, a modified tree
// marked -dirty; without either the line still says what is unknown.
func TestCurrentVersion(t *testing.T) {
	stamped := &debug.BuildInfo{GoVersion: "go1.99.1", Main: debug.Module{Version: "v1.4.0"},
		Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "0123456789abcdef0123"}, {Key: "vcs.modified", Value: "true"}}}
	for _, tc := range []struct {
		name            string
		version, commit string
		info            *debug.BuildInfo
		want            buildVersion
	}{
		{name: "ldflags_win", version: "v2.0.0", commit: "abc1234", info: stamped,
			want: buildVersion{Version: "v2.0.0", Commit: "abc1234", Go: "go1.99.1"}},
		{name: "build_info_fallback", info: stamped,
			want: buildVersion{Version: "v1.4.0", Commit: "0123456789ab-dirty", Go: "go1.99.1"}},
		{name: "devel_clean_tree", info: &debug.BuildInfo{GoVersion: "go1.99.1", Main: debug.Module{Version: "(devel)"},
			Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "feedface"}, {Key: "vcs.modified", Value: "false"}}},
			want: buildVersion{Version: "untagged", Commit: "feedface", Go: "go1.99.1"}},
		{name: "pseudo_version_is_untagged", info: &debug.BuildInfo{GoVersion: "go1.99.1", Main: debug.Module{Version: "v0.0.0-20261202055353-ab57d108696e+dirty"},
			Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "ab57d108696e5b041eb472205b67a8468133ee8d"}, {Key: "vcs.modified", Value: "true"}}},
			want: buildVersion{Version: "untagged", Commit: "ab57d108696e-dirty", Go: "go1.99.1"}},
		{name: "untagged_describe_is_the_commit", version: "abc1234-dirty", commit: "abc1234def56-dirty", info: stamped,
			want: buildVersion{Version: "untagged", Commit: "abc1234def56-dirty", Go: "go1.99.1"}},
		{name: "a_tag_past_a_commit_stays", version: "v1.2.0-3-gabc1234", commit: "abc1234def56", info: stamped,
			want: buildVersion{Version: "v1.2.0-3-gabc1234", Commit: "abc1234def56", Go: "go1.99.1"}},
		{name: "nothing_known", want: buildVersion{Version: "unknown", Commit: "unknown", Go: runtime.Version()}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			oldV, oldC := version, commit
			version, commit = tc.version, tc.commit
			t.Cleanup(func() { version, commit = oldV, oldC })
			assert.Equal(t, tc.want, currentVersion(tc.info, tc.info != nil))
		})
	}
	assert.Equal(t, "loopd untagged (commit feedface, go1.99.1)", buildVersion{Version: "untagged", Commit: "feedface", Go: "go1.99.1"}.String())
	assert.Contains(t, buildVersion{Version: "unknown", Commit: "unknown", Go: "go1.99.1"}.String(), "the go command recorded no vcs.revision")
}

// TestEveryGroupRefusesAnUnknownSubcommand walks the command tree: every
// command that groups others (the root, config, hook, completion …)
// answers an unknown subcommand with an error naming it, never with its
// help and success, and suggests the near miss.
func TestEveryGroupRefusesAnUnknownSubcommand(t *testing.T) {
	var groups []*cobra.Command
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if c.HasSubCommands() {
			groups = append(groups, c)
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(newRootCmd())
	require.GreaterOrEqual(t, len(groups), 4, "root, config, hook, completion")
	for _, g := range groups {
		path := strings.Fields(g.CommandPath())[1:]
		t.Run(strings.Join(append([]string{"loopd"}, path...), "_"), func(t *testing.T) {
			_, err := run(t, "", append(path, "no-such-verb")...)
			require.Error(t, err)
			assert.Contains(t, err.Error(), `unknown command "no-such-verb" for "`+g.CommandPath()+`"`)

			sub := g.Commands()[0].Name()
			typo := sub[:len(sub)-1] // one letter short
			_, err = run(t, "", append(path, typo)...)
			require.Error(t, err, typo)
			assert.Contains(t, err.Error(), "Did you mean this?\n\t"+sub, typo)
		})
	}
	for _, args := range [][]string{{"config", "valdate", "x"}, {"hook", "sesion-start"}, {"status"}, {"list"}} {
		_, err := run(t, "", args...)
		require.Error(t, err, args)
		assert.Contains(t, err.Error(), "Did you mean this?", args)
	}
	_, err := run(t, "", "status")
	assert.ErrorContains(t, err, "Did you mean this?\n\tget", "what other tools call their listing")
	// A group without a subcommand prints its help and fails; bare loopd
	// only prints its help.
	out, err := run(t, "", "config")
	require.ErrorIs(t, err, errNoSubcommand)
	assert.Contains(t, out, "Available Commands:")
	out, err = run(t, "")
	require.NoError(t, err)
	assert.Contains(t, out, "Available Commands:")
}

// TestBadGlobalFlagValuesAreRefusedBeforeAnyWork: --log-format and
// --log-level values the logger would not take fail the command before it
// opens anything (here: get would create the store in the state dir).
func TestBadGlobalFlagValuesAreRefusedBeforeAnyWork(t *testing.T) {
	dir := t.TempDir()
	config := writeConfig(t, dir)
	for _, tc := range []struct{ flag, value, valid string }{
		{"--log-format", "xml", "want text or json"},
		{"--log-level", "loud", "want debug, info, warn or error"},
	} {
		_, err := run(t, "", "--config", config, tc.flag, tc.value, "get")
		require.Error(t, err, tc.flag)
		assert.Contains(t, err.Error(), tc.flag+` "`+tc.value+`": `+tc.valid, "the error names the valid values")
		assert.NoDirExists(t, filepath.Join(dir, "state"), "nothing was opened")
	}
	makeStore(t, dir)
	_, err := run(t, "", "--config", config, "--log-format", "JSON", "--log-level", "debug", "get")
	require.NoError(t, err)
}

// TestConfigSearchOrder: --config, then $LOOPD_CONFIG, then ./loopd.yaml,
// then $XDG_CONFIG_HOME/loopd/loopd.yaml ($HOME/.config without it), then
// the system file; each step is taken only when the ones before it give
// nothing, and the error when nothing exists lists every place looked.
func TestConfigSearchOrder(t *testing.T) {
	root := t.TempDir()
	work := filepath.Join(root, "work")
	xdg := filepath.Join(root, "xdg")
	home := filepath.Join(root, "home")
	etc := filepath.Join(root, "etc", "loopd.yaml")
	require.NoError(t, os.MkdirAll(work, 0o755))
	t.Chdir(work)
	t.Setenv("XDG_CONFIG_HOME", xdg)
	t.Setenv("HOME", home)
	t.Setenv(configEnv, "")
	touch := func(p string) {
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, nil, 0o644))
	}
	locate := func(flag string) (string, error) { return locateConfig(flag, os.Getenv, etc) }

	// Nothing anywhere: the error lists the search path.
	_, err := locate("")
	require.ErrorIs(t, err, errNoConfig)
	for _, p := range []string{"./loopd.yaml", filepath.Join(xdg, "loopd", "loopd.yaml"), etc, "--config", "$LOOPD_CONFIG"} {
		assert.Contains(t, err.Error(), p)
	}

	touch(etc)
	got, err := locate("")
	require.NoError(t, err)
	assert.Equal(t, etc, got, "the system file, last")

	// Without XDG_CONFIG_HOME the XDG default under $HOME stands in.
	t.Setenv("XDG_CONFIG_HOME", "")
	touch(filepath.Join(home, ".config", "loopd", "loopd.yaml"))
	got, err = locate("")
	require.NoError(t, err)
	assert.Equal(t, filepath.Join(home, ".config", "loopd", "loopd.yaml"), got)

	t.Setenv("XDG_CONFIG_HOME", xdg)
	touch(filepath.Join(xdg, "loopd", "loopd.yaml"))
	got, err = locate("")
	require.NoError(t, err)
	assert.Equal(t, filepath.Join(xdg, "loopd", "loopd.yaml"), got, "XDG before the system file")

	touch(filepath.Join(work, "loopd.yaml"))
	got, err = locate("")
	require.NoError(t, err)
	assert.Equal(t, "loopd.yaml", got, "the working directory's before XDG")

	t.Setenv(configEnv, "/from/env.yaml")
	got, err = locate("")
	require.NoError(t, err)
	assert.Equal(t, "/from/env.yaml", got, "$LOOPD_CONFIG before the search, existing or not")

	got, err = locate("/from/flag.yaml")
	require.NoError(t, err)
	assert.Equal(t, "/from/flag.yaml", got, "--config first")
}

// TestCommandsFindTheConfigBySearch: a command given no --config loads the
// file $LOOPD_CONFIG names, and without one fails listing where it looked.
func TestCommandsFindTheConfigBySearch(t *testing.T) {
	dir := t.TempDir()
	config := writeConfig(t, dir)
	t.Chdir(t.TempDir())
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	t.Setenv(configEnv, config)
	out, err := run(t, "", "config", "validate")
	require.NoError(t, err)
	assert.Equal(t, config+": ok\n", out)

	t.Setenv(configEnv, "")
	_, err = run(t, "", "get")
	require.ErrorIs(t, err, errNoConfig)
	assert.Contains(t, err.Error(), "./loopd.yaml")
}
