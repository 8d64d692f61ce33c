package harness

import (
	"fmt"
	"os"
	"path/filepath"
)

// What loopd provisions in Claude Code's config dir before each spawn, so
// that the TUI starts at its input box and stays the version installed
// (Claude Code 2.1.197; docs/reference/harness-cli-facts.md, section 1).
// These are the only keys loopd writes there.
var (
	// claudeOnboarded is the global config's (.claude.json) mark of a
	// finished first run: without it the CLI shows its theme picker and
	// login screen, and offline it exits at a connectivity preflight.
	claudeOnboarded = setting{[]string{"hasCompletedOnboarding"}, true}
	// claudeResumeReturnDismissed is the global config's answer "Don't
	// ask me again" to the resume-return chooser ("Resume from summary
	// (recommended)"), which 2.1.x shows on a resume of a conversation
	// older than CLAUDE_CODE_RESUME_THRESHOLD_MINUTES (70) and longer than
	// 100k tokens, behind a server flag; the CLI reads it before the
	// chooser and shows none (its strings; anthropics/claude-code#62811).
	// A resume then loads the whole conversation, as loopd asked.
	claudeResumeReturnDismissed = setting{[]string{"resumeReturnDismissed"}, true}
	// claudeNoAutoUpdate is the user settings' (settings.json) variable
	// that turns the auto-updater off, which otherwise installs a newer
	// version from the TUI. 2.1.197 moves a global "autoUpdates": false to
	// this very key and deletes it, so the key is set here, not there; it
	// also holds for a claude run by hand in this config dir (to log in).
	claudeNoAutoUpdate = setting{[]string{"env", "DISABLE_AUTOUPDATER"}, "1"}
)

// claudeTrusted is the global config's mark that the workspace-trust
// dialog was accepted for dir (a physical, clean path); the CLI honours it
// for dir and every directory below it.
func claudeTrusted(dir string) setting {
	return setting{[]string{"projects", dir, "hasTrustDialogAccepted"}, true}
}

// Provision merges into the config dir the pane's claude reads
// (claudeConfigFiles) the keys of claudeOnboarded,
// claudeResumeReturnDismissed and claudeTrusted for the physical workdir
// (none for ""), and claudeNoAutoUpdate. It keeps
// every other key, writes a file only when a key is missing or differs,
// and takes .claude.json's lock as the CLI does (mergeSettings). It
// returns an error wrapping ErrBadSettings for a file that is not a plain
// JSON object, which it leaves as it is, and ErrSettingsLocked when the
// CLI held the lock too long.
func (c *claudeCode) Provision(workdir string) error {
	set, cwd, err := claudeOwned(workdir)
	if err != nil {
		return fmt.Errorf("provision claude config: %w", err)
	}
	global, settings, err := c.claudeConfigFiles(cwd)
	if err != nil {
		return fmt.Errorf("provision claude config: %w", err)
	}
	return provisionClaude(global, settings, set)
}

// claudeOwned returns the keys Provision sets in the global config for a
// spawn in workdir, and the physical workdir ("" for none).
func claudeOwned(workdir string) ([]setting, string, error) {
	set := []setting{claudeOnboarded, claudeResumeReturnDismissed}
	if workdir == "" {
		return set, "", nil
	}
	dir, err := physicalDir(workdir)
	if err != nil {
		return nil, "", err
	}
	return append(set, claudeTrusted(filepath.Clean(dir))), dir, nil
}

// provisionClaude merges set into the global config file global and
// claudeNoAutoUpdate into the user settings file settings.
func provisionClaude(global, settings string, set []setting) error {
	if err := mergeSettings(global, true, set...); err != nil {
		return fmt.Errorf("provision claude config %s: %w", global, err)
	}
	if err := mergeSettings(settings, false, claudeNoAutoUpdate); err != nil {
		return fmt.Errorf("provision claude settings %s: %w", settings, err)
	}
	return nil
}

// claudeConfigFiles returns the global config and the user settings file
// the pane's claude reads, as 2.1.197 finds them: the config dir is
// CLAUDE_CONFIG_DIR, else $HOME/.claude; settings.json is in it; the
// global config is <config dir>/.config.json when that legacy file
// exists, else .claude.json in CLAUDE_CONFIG_DIR, else $HOME/.claude.json.
func (c *claudeCode) claudeConfigFiles(cwd string) (global, settings string, err error) {
	dir, err := c.configDir(cwd)
	if err != nil {
		return "", "", err
	}
	settings = filepath.Join(dir, "settings.json")
	if legacy := filepath.Join(dir, ".config.json"); exists(legacy) {
		return legacy, settings, nil
	}
	if c.getenv("CLAUDE_CONFIG_DIR") != "" {
		return filepath.Join(dir, ".claude.json"), settings, nil
	}
	return filepath.Join(filepath.Dir(dir), ".claude.json"), settings, nil
}

// exists reports whether path names a file (after symlinks).
func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
