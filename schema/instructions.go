package schema

import (
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"unicode/utf8"

	"github.com/loopd/loopd/internal/journal"
	"github.com/loopd/loopd/internal/perm"
)

// MaxInstructions is the largest a route's standing instructions may be,
// in bytes: they ride in the boot prompt's argv next to an event of up to
// DefaultMaxBootPrompt bytes, and tmux refuses argv over about 16 KiB.
const MaxInstructions = 4 << 10

// PlaceholderLogin is the authorizedUsers entry `loopd config init`
// writes: it must be replaced by real GitHub logins, and a config that
// still holds it does not validate.
const PlaceholderLogin = "REPLACE-WITH-YOUR-GITHUB-LOGIN"

// readInstructions fills each route's Instructions from its
// InstructionsFile and checks the text of both: a file that cannot be
// read, is larger than MaxInstructions, is not UTF-8 or holds a control
// character other than '\n' and '\t' is a problem of the key, as are both
// keys set on one route.
func (c *Config) readInstructions(t *tree) []Problem {
	var problems []Problem
	repos := c.Webhooks.GHWebhook.Routing.Repos
	reposAt := []string{"webhooks", "ghWebhook", "routing", "repos"}
	for _, key := range slices.Sorted(maps.Keys(repos)) {
		r, at := repos[key], child(reposAt, key)
		if r.InstructionsFile == "" {
			if msg := instructionsProblem([]byte(r.Instructions)); msg != "" {
				problems = append(problems, t.problemAt(child(at, "instructions"), msg))
			}
			continue
		}
		fileAt := child(at, "instructionsFile")
		if r.Instructions != "" {
			problems = append(problems, t.keyProblemAt(fileAt, "set instructions or instructionsFile, not both"))
			continue
		}
		// The operator's own words to every agent: no other user may be
		// able to change them (perm.Trusted).
		text, err := readTrusted(c.resolve(r.InstructionsFile), MaxInstructions)
		if err != nil {
			problems = append(problems, t.problemAt(fileAt, err.Error()))
			continue
		}
		if msg := instructionsProblem(text); msg != "" {
			problems = append(problems, t.problemAt(fileAt, c.resolve(r.InstructionsFile)+": "+msg))
			continue
		}
		r.Instructions = string(text)
		repos[key] = r
	}
	return problems
}

// instructionsProblem says what is wrong with text as standing
// instructions, "" for nothing.
func instructionsProblem(text []byte) string {
	switch {
	case len(text) > MaxInstructions:
		return fmt.Sprintf("%d bytes, more than the %d that fit in a boot prompt", len(text), MaxInstructions)
	case !utf8.Valid(text):
		return "not UTF-8 text"
	}
	for _, r := range string(text) {
		if journal.IsControl(r) && !journal.NewlineOrTab(r) {
			return fmt.Sprintf("holds the control character %U; only newlines and tabs may be in the text", r)
		}
	}
	return ""
}

// readTrusted reads the file at path, or up to limit+1 bytes of it, so
// that a file too large is said to be without reading all of it. No other
// user may be able to change the file (perm.Trusted): the error of one
// they can names it.
func readTrusted(path string, limit int) ([]byte, error) {
	if err := perm.Trusted(path); err != nil {
		return nil, err
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err // open <path>: …
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, int64(limit)+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	return b, nil
}
