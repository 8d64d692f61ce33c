package harness

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loopd/loopd/schema"
)

func TestCodexTrust(t *testing.T) {
	const dir = "/srv/agents/acme/api/7"
	const user = "# my settings\nmodel = \"o3\"\n\n[tui]\nscreen_reader_detection_done = true\n"
	for _, tc := range []struct {
		name    string
		before  string
		trusted bool
		after   string
	}{
		{"trust_in_a_missing_file", "", true, "[projects.\"" + dir + "\"]\ntrust_level = \"trusted\"\n"},
		{"trust_appends_a_table", user, true, user + "\n[projects.\"" + dir + "\"]\ntrust_level = \"trusted\"\n"},
		{"trust_after_a_last_line_without_newline", "model = \"o3\"", true, "model = \"o3\"\n\n[projects.\"" + dir + "\"]\ntrust_level = \"trusted\"\n"},
		{"trust_replaces_untrusted", "[projects.\"" + dir + "\"]\ntrust_level = \"untrusted\"\n" + user, true,
			"[projects.\"" + dir + "\"]\ntrust_level = \"trusted\"\n" + user},
		{"trust_fills_an_empty_table", "[projects.\"" + dir + "\"]\n[tui]\nx = 1\n", true,
			"[projects.\"" + dir + "\"]\ntrust_level = \"trusted\"\n[tui]\nx = 1\n"},
		{"trusted_already", user + "\n[projects.\"" + dir + "\"] # loopd\ntrust_level = \"trusted\"\n", true,
			user + "\n[projects.\"" + dir + "\"] # loopd\ntrust_level = \"trusted\"\n"},
		{"untrust_removes_the_key", "[projects.\"" + dir + "\"]\ntrust_level = \"trusted\" # by hand\n" + user, false,
			"[projects.\"" + dir + "\"]\n" + user},
		{"untrust_keeps_untrusted", "[projects.\"" + dir + "\"]\ntrust_level = 'untrusted'\n", false, "[projects.\"" + dir + "\"]\ntrust_level = 'untrusted'\n"},
		{"untrust_leaves_other_projects", "[projects.\"/srv/other\"]\ntrust_level = \"trusted\"\n", false, "[projects.\"/srv/other\"]\ntrust_level = \"trusted\"\n"},
		{"untrust_a_missing_file_writes_nothing", "", false, ""},
		{"another_table_key_is_not_the_trust", "[projects.\"" + dir + "\"]\n[x]\ntrust_level = \"trusted\"\n", false,
			"[projects.\"" + dir + "\"]\n[x]\ntrust_level = \"trusted\"\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "config.toml")
			if tc.before != "" {
				require.NoError(t, os.WriteFile(path, []byte(tc.before), 0o640))
			}
			require.NoError(t, codexTrust(path, dir, tc.trusted))
			b, err := os.ReadFile(path)
			if tc.after == "" {
				assert.ErrorIs(t, err, os.ErrNotExist, "nothing to take back: no file made")
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.after, string(b))
			info, err := os.Stat(path)
			require.NoError(t, err)
			if tc.before != "" {
				assert.Equal(t, os.FileMode(0o640), info.Mode().Perm(), "the mode is kept")
			}
		})
	}
	for _, bad := range []string{
		"projects = { \"" + dir + "\" = { trust_level = \"trusted\" } }\n",
		"projects.\"" + dir + "\".trust_level = \"trusted\"\n",
		"[projects.'" + dir + "']\ntrust_level = \"trusted\"\n",
		"[projects.\"" + dir + "\"]\n[projects.\"" + dir + "\"]\n",
	} {
		path := filepath.Join(t.TempDir(), "config.toml")
		require.NoError(t, os.WriteFile(path, []byte(bad), 0o600))
		for _, trusted := range []bool{true, false} {
			assert.ErrorIs(t, codexTrust(path, dir, trusted), ErrBadSettings, "%q", bad)
		}
		b, err := os.ReadFile(path)
		require.NoError(t, err)
		assert.Equal(t, bad, string(b), "left as it is")
	}
	assert.ErrorIs(t, codexTrust(filepath.Join(t.TempDir(), "c.toml"), `/srv/a"b`, true), ErrBadSettings)
}

// TestCodexProvision: an adapter trusts its physical workdir in the
// item's own CODEX_HOME's config.toml (the shared one copied in at each
// spawn, ItemState) only when the workdir's project settings are trusted,
// and takes a trust it finds back otherwise; the shared config.toml is
// the operator's, never edited.
func TestCodexProvision(t *testing.T) {
	home := t.TempDir()
	work, err := filepath.EvalSymlinks(t.TempDir())
	require.NoError(t, err)
	link := filepath.Join(t.TempDir(), "link")
	require.NoError(t, os.Symlink(work, link))
	a := newTestAdapter(t, AdapterCodex, schema.Harness{Env: map[string]string{"CODEX_HOME": home}})
	shared := filepath.Join(home, "config.toml")
	const user = "model = \"o3\"\n"
	table := "[projects.\"" + work + "\"]\n"
	require.NoError(t, os.WriteFile(shared, []byte(user), 0o600))
	spawn := func(a Adapter) string {
		t.Helper()
		st, err := ItemState(a, link, "", false)
		require.NoError(t, err)
		require.NoError(t, Provision(a, link))
		require.NotEqual(t, home, st.Env["CODEX_HOME"], "the item's own home")
		b, err := os.ReadFile(filepath.Join(st.Env["CODEX_HOME"], "config.toml"))
		require.NoError(t, err)
		return string(b)
	}

	assert.Equal(t, user+"\n"+table+"trust_level = \"trusted\"\n", spawn(WithProjectSettings(a, true)), "the physical path, as Codex names it")
	b, err := os.ReadFile(shared)
	require.NoError(t, err)
	assert.Equal(t, user, string(b), "the shared config is left as it is")

	require.NoError(t, os.WriteFile(shared, []byte(user+"\n"+table+"trust_level = \"trusted\"\n"), 0o600))
	assert.Equal(t, user+"\n"+table, spawn(a), "an untrusted spawn takes a trust found in the config back")

	offHome := t.TempDir()
	off := newTestAdapter(t, AdapterCodex, schema.Harness{Env: map[string]string{"CODEX_HOME": offHome}, Provision: new(bool)})
	st, err := ItemState(WithProjectSettings(off, true), link, "", false)
	require.NoError(t, err)
	require.NoError(t, Provision(WithProjectSettings(off, true), link))
	assert.NoFileExists(t, filepath.Join(st.Env["CODEX_HOME"], "config.toml"), "provision: false writes nothing")
	assert.NoFileExists(t, filepath.Join(offHome, "config.toml"))
}
