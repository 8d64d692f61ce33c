// Package channel is the per-item channel between an agent and loopd.
//
// Each work item has a directory of its own, <stateDir>/channels/<session>
// (mode 0700, Dir), which each spawn names to its harness in
// $LOOPD_CHANNEL, with a token made for that spawn alone in
// $LOOPD_CHANNEL_TOKEN (NewToken). Both reach the harness through the
// launcher's env file, never an argv. loopd keeps only the token's SHA-256
// (Digest) in the item's status: neither the store nor the journal holds a
// token, and a report or request that carries another one (another item's,
// or an earlier spawn's) is not this spawn's.
//
// Two things pass through a channel:
//
//   - Reports. The harness's SessionStart hook (loopd hook session-start)
//     drops its input into the directory as a file (WriteReport), which
//     the next reconcile pass reads as an observed fact (ReadReports) and
//     removes once it is recorded or refused. No daemon has to run: a
//     cron pass (loopd reconcile --once) reads it too.
//   - Requests that need an answer at once: the git credential helper
//     (loopd credential) asks loopd serve, over the unix socket
//     loopd.sock in the same directory, for a credential at the moment of
//     use (Ask, Serve). Without a daemon nothing answers, and no
//     credential is handed out.
//
// Neither needs loopd's config or store: a sandbox that shows an agent its
// channel directory and loopd's executable, and nothing else of loopd, is
// enough for both.
package channel

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// The environment a spawn's harness gets (through the launcher's env
// file): the item it works on, its channel directory, and its spawn's
// token.
const (
	EnvWorkItem = "LOOPD_WORK_ITEM"
	EnvDir      = "LOOPD_CHANNEL"
	EnvToken    = "LOOPD_CHANNEL_TOKEN"
)

// ErrNoChannel is the error of an agent-side command (the session-start
// hook, the credential helper) run where loopd did not start it: no
// channel in its environment.
var ErrNoChannel = errors.New("no loopd channel here: $" + EnvDir + " and $" + EnvToken +
	" are set by loopd on the harnesses it starts")

// RootName is the directory of the channels inside the state dir.
const RootName = "channels"

// Root returns the directory of the channels of the state dir stateDir.
func Root(stateDir string) string { return filepath.Join(stateDir, RootName) }

// Dir returns the channel directory of session (desired.SessionName,
// [a-z0-9-]) under root.
func Dir(root, session string) string { return filepath.Join(root, session) }

// Prepare makes the channel directory of session under root, and root,
// mode 0700 (an existing one is tightened), and returns its path.
func Prepare(root, session string) (string, error) {
	dir := Dir(root, session)
	for _, d := range []string{root, dir} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return "", fmt.Errorf("channel %s: %w", session, err)
		}
		// MkdirAll leaves an existing directory's mode alone.
		if err := os.Chmod(d, 0o700); err != nil {
			return "", fmt.Errorf("channel %s: %w", session, err)
		}
	}
	return dir, nil
}

// Remove removes the channel directory of session under root and what is
// in it; one that does not exist is no error.
func Remove(root, session string) error {
	if err := os.RemoveAll(Dir(root, session)); err != nil {
		return fmt.Errorf("remove channel %s: %w", session, err)
	}
	return nil
}

// tokenBytes is a token's length before hex: 256 bits.
const tokenBytes = 32

// NewToken returns a fresh token for one spawn (256 random bits, in hex)
// and its Digest.
func NewToken() (token, digest string, err error) {
	b := make([]byte, tokenBytes)
	if _, err := rand.Read(b); err != nil {
		return "", "", fmt.Errorf("channel token: %w", err)
	}
	token = hex.EncodeToString(b)
	return token, Digest(token), nil
}

// Digest returns the SHA-256 of token in hex: what the item's status keeps
// of its spawn's token.
func Digest(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}

// Matches reports whether the token whose Digest is got is the one whose
// Digest is want, in constant time; an empty want matches nothing.
func Matches(got, want string) bool {
	return want != "" && subtle.ConstantTimeCompare([]byte(got), []byte(want)) == 1
}

// MaxInput is the most a report's input may hold, in bytes: Claude Code's
// SessionStart input is a few hundred bytes (an id, two paths, two words).
const MaxInput = 64 << 10

// maxReportFile caps what ReadReports reads of one report file, in bytes:
// MaxInput escaped as JSON (at most 6 bytes a byte), and the envelope.
const maxReportFile = 6*(MaxInput+1) + 4<<10

// reportPrefix and reportSuffix frame a report's file name; a name
// between them is the time it was written (Unix nanoseconds, 20 digits, so
// that names sort as they were written) and a random tag.
const (
	reportPrefix = "report-"
	reportSuffix = ".json"
)

// envelope is a report file: the work item the hook was told it works on,
// its spawn's token, and the hook's input as given.
type envelope struct {
	WorkItem string `json:"work_item"`
	Token    string `json:"token"`
	Input    string `json:"input"`
}

// WriteReport drops one report into the channel directory dir: the input
// the harness's hook was given (at most MaxInput+1 bytes of it are kept;
// ReadReports refuses more), for the work item item, with the spawn's
// token. The file is written under a temporary name and renamed into
// place (mode 0600), so that a reader never sees half of it.
func WriteReport(dir, item, token string, input []byte, now time.Time) error {
	if len(input) > MaxInput+1 {
		input = input[:MaxInput+1]
	}
	data, err := json.Marshal(envelope{WorkItem: item, Token: token, Input: string(input)})
	if err != nil {
		return fmt.Errorf("write report: %w", err)
	}
	tag := make([]byte, 4)
	if _, err := rand.Read(tag); err != nil {
		return fmt.Errorf("write report: %w", err)
	}
	name := fmt.Sprintf("%s%020d-%s%s", reportPrefix, now.UnixNano(), hex.EncodeToString(tag), reportSuffix)
	f, err := os.CreateTemp(dir, ".report-*") // mode 0600
	if err != nil {
		return fmt.Errorf("write report: %w", err)
	}
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), filepath.Join(dir, name))
	}
	if err != nil {
		_ = os.Remove(f.Name())
		return fmt.Errorf("write report: %w", err)
	}
	return nil
}

// IsReport reports whether name is the name of a report file
// (WriteReport's): what a watcher of the directory wakes a pass for.
func IsReport(name string) bool {
	stamp, ok := strings.CutPrefix(name, reportPrefix)
	if !ok || !strings.HasSuffix(stamp, reportSuffix) || strings.ContainsAny(name, `/\`) {
		return false
	}
	digits, _, ok := strings.Cut(stamp, "-")
	_, err := strconv.ParseUint(digits, 10, 64)
	return ok && err == nil
}

// The problems ReadReports finds in a report by itself (Report.Problem);
// the reconciler refuses such a report with it as the reason.
const (
	ProblemMalformed     = "malformed_input"
	ProblemTooLarge      = "input_too_large"
	ProblemWrongHook     = "wrong_hook_event"
	ProblemUnknownSource = "unknown_source"
)

// SessionSources are the values of Claude Code's SessionStart "source"
// (Claude Code settings, "hooks", SessionStart input).
var SessionSources = []string{"startup", "resume", "clear", "compact"}

// Report is one report file as ReadReports found it. Nothing in it is
// trusted: the reconciler judges it (its work item, its token, its
// session id).
type Report struct {
	// Name is its file's name in the channel directory (RemoveReport).
	Name string
	// ModTime is its file's mtime: when the hook wrote it, by the writer's
	// clock.
	ModTime time.Time
	// WorkItem is the work item the hook said it reports for.
	WorkItem string
	// TokenDigest is the Digest of the token it carried ("" for none).
	TokenDigest string
	// SessionID and Source are what the harness said: the conversation it
	// writes to and why it started (SessionSources).
	SessionID, Source string
	// Problem, when not "", is what is wrong with the report by itself
	// (ProblemMalformed …), and Detail says how.
	Problem, Detail string
}

// sessionStartInput is the part of Claude Code's SessionStart hook input
// loopd uses. Claude Code adds fields across versions (transcript_path,
// cwd, model …); those are read past, not refused.
type sessionStartInput struct {
	SessionID     string `json:"session_id"`
	Source        string `json:"source"`
	HookEventName string `json:"hook_event_name"`
}

// ReadReports reads the oldest max report files of the channel directory
// dir, oldest first; a directory that does not exist holds none. A file
// that is not a regular file (a symlink included), or is larger than a
// report can be, comes back with Problem set, to be refused and removed
// like any other. The error is one reading the directory.
func ReadReports(dir string, max int) ([]Report, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read channel %s: %w", dir, err)
	}
	var out []Report
	for _, e := range entries { // sorted by name, and so by time written
		if len(out) == max {
			break
		}
		if IsReport(e.Name()) {
			out = append(out, readReport(dir, e.Name()))
		}
	}
	return out, nil
}

// readReport reads and parses the report file name of dir.
func readReport(dir, name string) Report {
	r := Report{Name: name}
	f, err := os.OpenFile(filepath.Join(dir, name), os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		r.Problem, r.Detail = ProblemMalformed, err.Error()
		return r
	}
	defer f.Close()
	info, err := f.Stat()
	switch {
	case err != nil:
		r.Problem, r.Detail = ProblemMalformed, err.Error()
		return r
	case !info.Mode().IsRegular():
		r.Problem, r.Detail = ProblemMalformed, "not a regular file"
		return r
	}
	r.ModTime = info.ModTime()
	data, err := io.ReadAll(io.LimitReader(f, maxReportFile+1))
	switch {
	case err != nil:
		r.Problem, r.Detail = ProblemMalformed, err.Error()
		return r
	case len(data) > maxReportFile:
		r.Problem, r.Detail = ProblemTooLarge, fmt.Sprintf("report over %d bytes", maxReportFile)
		return r
	}
	var env envelope
	if err := json.Unmarshal(data, &env); err != nil {
		r.Problem, r.Detail = ProblemMalformed, "report: "+err.Error()
		return r
	}
	r.WorkItem = env.WorkItem
	if env.Token != "" {
		r.TokenDigest = Digest(env.Token)
	}
	in, problem, detail := parseInput([]byte(env.Input))
	r.SessionID, r.Source, r.Problem, r.Detail = in.SessionID, in.Source, problem, detail
	return r
}

// parseInput reads one SessionStart input: one JSON object of at most
// MaxInput bytes, of the SessionStart hook, with a known source. It
// returns what it read and, when the input fails, the problem and what
// failed.
func parseInput(data []byte) (in sessionStartInput, problem, detail string) {
	if len(data) > MaxInput {
		return in, ProblemTooLarge, fmt.Sprintf("input over %d bytes", MaxInput)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&in); err != nil {
		return sessionStartInput{}, ProblemMalformed, "input: " + err.Error()
	}
	if dec.InputOffset() != int64(len(bytes.TrimRight(data, " \t\r\n"))) {
		return in, ProblemMalformed, "input: data after the JSON object"
	}
	switch {
	case in.HookEventName != "" && in.HookEventName != "SessionStart":
		return in, ProblemWrongHook, fmt.Sprintf("hook_event_name %q", in.HookEventName)
	case !slices.Contains(SessionSources, in.Source):
		return in, ProblemUnknownSource, fmt.Sprintf("source %q is not one of %s", in.Source, strings.Join(SessionSources, ", "))
	}
	return in, "", ""
}

// RemoveReport removes the report file name from the channel directory
// dir, once it was recorded or refused; one already gone is no error.
func RemoveReport(dir, name string) error {
	if !IsReport(name) {
		return fmt.Errorf("remove report %q: not a report's name", name)
	}
	if err := os.Remove(filepath.Join(dir, name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove report: %w", err)
	}
	return nil
}
