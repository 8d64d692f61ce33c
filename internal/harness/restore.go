package harness

import (
	"bytes"
	"errors"
	"fmt"
	"time"
)

// ErrNoTranscriptRule means an adapter cannot say where its CLI would
// find a conversation's transcript for a cwd (custom, cursor; a Codex
// rollout that records no settings to move): the transcript can be
// neither copied nor put back, so the item's conversation does not move
// with it, and a host that takes the item over starts it fresh.
var ErrNoTranscriptRule = errors.New("no transcript rule")

// Restorer is implemented by adapters that can put a conversation's
// transcript back where their CLI looks for it, on another host or in
// another workdir (docs/design.md, "Conversations move with their item").
type Restorer interface {
	// RestoreTarget returns the path at which the CLI, run in the
	// physical cwd, finds the transcript of id whose stored copy is data,
	// and the bytes to write there: data itself, followed by whatever the
	// CLI needs to take the conversation as cwd's (Codex: its settings
	// re-rooted at cwd). data is always a prefix of them, so that the
	// copy kept in the store goes on growing by offset from the file
	// written. An existing transcript of id for cwd gives its own path.
	// now dates a file that the CLI names after its start when data does
	// not say it. It may create what the CLI needs to look in that place
	// (Gemini's project marker), and nothing else.
	RestoreTarget(cwd, id string, data []byte, now time.Time) (path string, out []byte, err error)
}

// RestoreTarget is a's Restorer.RestoreTarget for an id that a accepts
// (ValidSessionID, else ErrInvalidSessionID). An adapter that is no
// Restorer gives ErrNoTranscriptRule.
func RestoreTarget(a Adapter, cwd, id string, data []byte, now time.Time) (string, []byte, error) {
	r, ok := a.(Restorer)
	if !ok {
		return "", nil, fmt.Errorf("restore transcript %s: harness %s: %w", id, a.Name(), ErrNoTranscriptRule)
	}
	if !a.ValidSessionID(id) {
		return "", nil, fmt.Errorf("restore transcript %q: %w", id, ErrInvalidSessionID)
	}
	path, out, err := r.RestoreTarget(cwd, id, data, now)
	if err != nil {
		return "", nil, fmt.Errorf("restore transcript %s: %w", id, err)
	}
	if !bytes.HasPrefix(out, data) {
		// The store could no longer be appended to by offset.
		return "", nil, fmt.Errorf("restore transcript %s: harness %s rewrote the stored copy", id, a.Name())
	}
	return path, out, nil
}

// RestoreTarget is the path Transcript reports, and data as it is: Claude
// Code finds a conversation by its file name in the project dir of the
// physical cwd, and resumes a transcript whose lines name another cwd
// (measured on 2.1.197: internal/transcript's real-CLI test).
func (c *claudeCode) RestoreTarget(cwd, id string, data []byte, _ time.Time) (string, []byte, error) {
	t, err := c.Transcript(cwd, id)
	if err != nil {
		return "", nil, err
	}
	return t.Path, data, nil
}
