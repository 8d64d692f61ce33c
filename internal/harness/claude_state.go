package harness

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/loopd/loopd/internal/sandbox"
)

// What a sandbox shows an item of Claude Code's shared config dir
// (CLAUDE_CONFIG_DIR, or $HOME/.claude) at its path (docs/design.md,
// "Sandbox"): the item's own view of it (itemDir), holding the item's
// .claude.json, settings.json and the CLI's own files (todos, shell
// snapshots, backups); in it, the shared project dir of the item's
// workdir, where its transcripts are (projects/<enc(cwd)>: each item has
// its own cwd, so items never share one), writable; the login, writable;
// and the operator's own configuration, read-only.
var (
	// claudeLogin is the account's login. Claude Code 2.1.197 writes it
	// as <file>.tmp.<hex> renamed over it; a rename over a bind fails
	// with EBUSY, and the CLI then copies the new file into place
	// (measured with a refresh through a local OAuth endpoint: rename
	// EBUSY, open O_WRONLY, copy_file_range, ftruncate): the refresh
	// lands in the shared file, which every item's bind shows, and
	// the CLI reloads a file whose mtime changed.
	claudeLogin = ".credentials.json"
	// claudeShared are the operator's own files of the config dir that
	// every item reads: memory, agents, commands, skills, output styles,
	// plugins, key bindings.
	claudeShared = []string{"CLAUDE.md", "agents", "commands", "skills", "output-styles", "plugins", "keybindings.json"}
)

// ItemState gives a sandboxed spawn in workdir its view of the config
// dir: made on first use, its .claude.json then seeded from the shared
// global config without the other workdirs' projects, its settings.json
// the shared one copied at each spawn, both provisioned with the keys
// Provision owns (unless the harness says provision: false); CLAUDE_CONFIG_DIR names the config dir, so that the CLI
// reads its global config there even when none was set (it reads
// $HOME/.claude.json then, which the sandbox's private $HOME lacks). A
// spawn without a sandbox uses the shared dir as it is.
func (c *claudeCode) ItemState(workdir, _ string, sandboxed bool) (State, error) {
	if !sandboxed {
		return State{}, nil
	}
	set, dir, err := claudeOwned(workdir)
	if err != nil {
		return State{}, fmt.Errorf("claude view of %s: %w", workdir, err)
	}
	config, err := c.configDir(dir)
	if err != nil {
		return State{}, fmt.Errorf("claude view of %s: %w", workdir, err)
	}
	view := itemDir(config, dir)
	project := filepath.Join(config, "projects", projectDirName(dir))
	for _, d := range []string{view, project} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return State{}, fmt.Errorf("claude view of %s: %w", workdir, err)
		}
	}
	global, settings, err := c.claudeConfigFiles(dir)
	if err != nil {
		return State{}, fmt.Errorf("claude view of %s: %w", workdir, err)
	}
	own := filepath.Join(view, ".claude.json")
	if err := seedClaudeGlobal(global, own, dir); err != nil {
		return State{}, fmt.Errorf("claude view of %s: %w", workdir, err)
	}
	ownSettings := filepath.Join(view, "settings.json")
	if err := copyInto(settings, ownSettings); err != nil {
		return State{}, fmt.Errorf("claude view of %s: %w", workdir, err)
	}
	if c.provisions() {
		if err := provisionClaude(own, ownSettings, set); err != nil {
			return State{}, fmt.Errorf("claude view of %s: %w", workdir, err)
		}
	}
	st := State{Env: map[string]string{"CLAUDE_CONFIG_DIR": config}, Binds: []sandbox.Bind{
		{Source: view, Target: config, Write: true},
		{Source: project, Write: true},
	}}
	st.Binds = append(st.Binds, sharedBinds(config, claudeLogin)...)
	for _, name := range claudeShared {
		if p := filepath.Join(config, name); exists(p) {
			st.Binds = append(st.Binds, sandbox.Bind{Source: p})
		}
	}
	return st, nil
}

// seedClaudeGlobal writes the view's global config own from the shared one
// global the first time: every key but the projects of other workdirs (a
// project's entry holds its last session and its history), so that the
// account, the onboarding and dir's own project come along. It leaves own
// alone once it exists: the CLI keeps it from then on. A shared file
// that is missing or not a JSON object seeds an empty one.
func seedClaudeGlobal(global, own, dir string) error {
	if _, err := os.Lstat(own); err == nil || !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	doc := map[string]json.RawMessage{}
	if b, err := os.ReadFile(global); err == nil {
		_ = json.Unmarshal(b, &doc) // not an object: seeded empty
	} else if !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	var projects map[string]json.RawMessage
	if json.Unmarshal(doc["projects"], &projects) == nil && projects[dir] != nil {
		keep, _ := json.Marshal(map[string]json.RawMessage{dir: projects[dir]})
		doc["projects"] = keep
	} else {
		delete(doc, "projects")
	}
	b, err := json.Marshal(doc)
	if err != nil {
		return err
	}
	return os.WriteFile(own, b, 0o600)
}
