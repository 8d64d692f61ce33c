package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/loopd/loopd/actions"
	"github.com/loopd/loopd/desired"
	"github.com/loopd/loopd/internal/harness"
	"github.com/loopd/loopd/internal/journal"
	"github.com/loopd/loopd/schema"
	"github.com/loopd/loopd/store"
)

// workItemEnv names the environment variable that tells a hook which work
// item its pane belongs to; the executor sets it on every pane.
const workItemEnv = "LOOPD_WORK_ITEM"

// maxHookInput caps what a hook reads from stdin, in bytes. Claude Code's
// SessionStart input is a few hundred bytes (an id, two paths, two words).
const maxHookInput = 64 << 10

// maxShownValue caps, in bytes, a rejected value quoted in the journal.
const maxShownValue = 200

// sessionSources are the values of Claude Code's SessionStart "source"
// (Claude Code settings, "hooks", SessionStart input).
var sessionSources = []string{"startup", "resume", "clear", "compact"}

// sessionStartInput is the part of Claude Code's SessionStart hook input
// loopd uses. Claude Code adds fields across versions (transcript_path,
// cwd, model …); those are read past, not refused.
type sessionStartInput struct {
	SessionID     string `json:"session_id"`
	Source        string `json:"source"`
	HookEventName string `json:"hook_event_name"`
}

// errReportRejected is returned by the session-start hook for a report it
// journaled as session.report_rejected and did not record.
var errReportRejected = errors.New("session report rejected")

// The reasons of session.report_rejected.
const (
	reasonBadWorkItem     = "bad_work_item"
	reasonInputTooLarge   = "input_too_large"
	reasonMalformedInput  = "malformed_input"
	reasonWrongHookEvent  = "wrong_hook_event"
	reasonUnknownSource   = "unknown_source"
	reasonUnknownWorkItem = "unknown_work_item"
	reasonUnknownHarness  = "unknown_harness"
	reasonInvalidSession  = "invalid_session_id"
)

func newHookCmd(g *globals) *cobra.Command {
	hook := &cobra.Command{
		Use:   "hook",
		Short: "Entry points that harness hooks call",
	}
	hook.AddCommand(&cobra.Command{
		Use:   "session-start",
		Short: "Record the session id a harness reports at session start (Claude Code SessionStart hook)",
		Long: `session-start reads the SessionStart hook input (JSON with session_id and
source) on stdin and records it for the work item named by $LOOPD_WORK_ITEM,
which loopd sets on every pane. The reconciler uses it to confirm a resume
and to follow the conversation id when it changes (/clear). It prints
nothing on stdout: Claude Code would add that to the conversation.

The report is checked as a webhook delivery is: the work item must exist,
the input must be one JSON object of at most 64 KiB, source one of
startup, resume, clear or compact, and session_id an id the item's harness
accepts (for Claude Code a canonical lowercase UUID). A report that fails
is journaled as session.report_rejected with its reason, never recorded,
and the command exits non-zero.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			if dir := os.Getenv(actions.ChannelEnv); dir != "" {
				// In a sandbox, which shows no config or store: the
				// report waits in the item's channel for the next pass.
				return dropReport(dir, cmd.InOrStdin(), time.Now())
			}
			cfg, store, err := g.openStore(ctx)
			if err != nil {
				return err
			}
			defer store.Close()
			now := time.Now()
			// The log goes nowhere: the hook's output belongs to the harness.
			rec := journal.NewRecorder(slog.New(slog.DiscardHandler), store, func() time.Time { return now })
			in, k, reason, err := checkSessionStart(ctx, cfg, store, os.Getenv(workItemEnv), cmd.InOrStdin())
			if reason != "" {
				item := ""
				if k != (desired.Key{}) {
					item = k.String()
				}
				rec.Record(ctx, slog.LevelWarn, journal.SessionReportRejected, item, "reason", reason,
					"attempted_session_id", shown(in.SessionID), "source", shown(in.Source), "err", err)
				return fmt.Errorf("hook session-start %s: %w: %s: %w", item, errReportRejected, reason, err)
			}
			if err != nil {
				return fmt.Errorf("hook session-start %s: %w", k, err)
			}
			return recordReport(ctx, store, rec, k, in, now)
		},
	})
	return hook
}

// recordReport records the checked report in of item k, made at at.
func recordReport(ctx context.Context, st store.Store, rec *journal.Recorder, k desired.Key, in sessionStartInput, at time.Time) error {
	if err := st.ReportSession(ctx, k, desired.SessionReport{SessionID: in.SessionID, Source: in.Source, At: at}); err != nil {
		return err
	}
	rec.Record(ctx, slog.LevelInfo, journal.SessionReported, k.String(), "harness_session_id", in.SessionID, "source", in.Source)
	return nil
}

// reportPattern matches the reports dropReport leaves in a channel dir.
const reportPattern = "session-start.*.json"

// dropReport leaves the hook's input (at most one byte past maxHookInput,
// so that an oversize one is refused as such) in the channel dir as a
// report made at now: session-start.<unix ns>.json, whole or not at all
// (a temporary file renamed), its mtime now.
func dropReport(dir string, stdin io.Reader, now time.Time) error {
	data, err := io.ReadAll(io.LimitReader(stdin, maxHookInput+1))
	if err != nil {
		return fmt.Errorf("hook session-start: read input: %w", err)
	}
	name := filepath.Join(dir, fmt.Sprintf("session-start.%d.json", now.UnixNano()))
	if err := os.WriteFile(name+".tmp", data, 0o600); err != nil {
		return fmt.Errorf("hook session-start: %w", err)
	}
	if err := os.Chtimes(name+".tmp", now, now); err != nil {
		return fmt.Errorf("hook session-start: %w", err)
	}
	if err := os.Rename(name+".tmp", name); err != nil {
		return fmt.Errorf("hook session-start: %w", err)
	}
	return nil
}

// ingestReports records the SessionStart reports that sandboxed harnesses
// left in their items' channel dirs under channels (dropReport), in the
// order they were made: each is checked as the hook checks one
// (checkSessionStart), for the item whose channel it lies in, whatever
// it says of its own, and removed. A report that fails is journaled as
// session.report_rejected, as the hook does. The pass runs it first
// (reconciler.Reconciler.Ingest).
func ingestReports(ctx context.Context, cfg *schema.Config, st store.Store, rec *journal.Recorder, channels string) error {
	files, err := filepath.Glob(filepath.Join(channels, "*", reportPattern))
	if err != nil || len(files) == 0 {
		return err
	}
	records, err := st.Records(ctx)
	if err != nil {
		return err
	}
	items := map[string]desired.Key{}
	for _, r := range records {
		items[desired.SessionName(r.Key)] = r.Key
	}
	slices.Sort(files) // by the time in their names
	for _, f := range files {
		info, err := os.Stat(f)
		data, rerr := os.ReadFile(f)
		if err := errors.Join(err, rerr, os.Remove(f)); err != nil {
			return fmt.Errorf("session report %s: %w", f, err)
		}
		item := ""
		if k, ok := items[filepath.Base(filepath.Dir(f))]; ok {
			item = k.String()
		}
		in, k, reason, err := checkSessionStart(ctx, cfg, st, item, bytes.NewReader(data))
		if reason != "" {
			rec.Record(ctx, slog.LevelWarn, journal.SessionReportRejected, item, "reason", reason,
				"attempted_session_id", shown(in.SessionID), "source", shown(in.Source), "err", err)
			continue
		}
		if err != nil {
			return err
		}
		if err := recordReport(ctx, st, rec, k, in, info.ModTime()); err != nil {
			return err
		}
	}
	return nil
}

// checkSessionStart reads and checks one SessionStart report for the work
// item named item. A report that fails a check comes back with the reason
// (one of the reason constants) and an error saying what failed; an error
// with no reason is loopd's own (the store).
func checkSessionStart(ctx context.Context, cfg *schema.Config, st store.Store, item string, stdin io.Reader) (
	in sessionStartInput, k desired.Key, reason string, err error) {
	k, err = desired.ParseKey(item)
	if err == nil && k.String() != item {
		// loopd sets the key as Key.String writes it; "#01" or another
		// spelling did not come from loopd.
		err = fmt.Errorf("not in its canonical form %s", k)
	}
	if err != nil {
		return in, desired.Key{}, reasonBadWorkItem, fmt.Errorf("$%s %q: %w", workItemEnv, shown(item), err)
	}
	data, err := io.ReadAll(io.LimitReader(stdin, maxHookInput+1))
	if err != nil {
		return in, k, reasonMalformedInput, fmt.Errorf("read input: %w", err)
	}
	if len(data) > maxHookInput {
		return in, k, reasonInputTooLarge, fmt.Errorf("input over %d bytes", maxHookInput)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&in); err != nil {
		return sessionStartInput{}, k, reasonMalformedInput, fmt.Errorf("input: %w", err)
	}
	if dec.InputOffset() != int64(len(bytes.TrimRight(data, " \t\r\n"))) {
		return in, k, reasonMalformedInput, errors.New("input: data after the JSON object")
	}
	switch {
	case in.HookEventName != "" && in.HookEventName != "SessionStart":
		return in, k, reasonWrongHookEvent, fmt.Errorf("hook_event_name %q", shown(in.HookEventName))
	case !slices.Contains(sessionSources, in.Source):
		return in, k, reasonUnknownSource, fmt.Errorf("source %q is not one of %s", shown(in.Source), strings.Join(sessionSources, ", "))
	}
	r, err := st.Get(ctx, k)
	if errors.Is(err, store.ErrNotFound) {
		return in, k, reasonUnknownWorkItem, err
	} else if err != nil {
		return in, k, "", err
	}
	hcfg, ok := cfg.Harnesses[r.Spec.Harness]
	if !ok {
		return in, k, reasonUnknownHarness, fmt.Errorf("harness %q is not configured", r.Spec.Harness)
	}
	ad, err := harness.New(r.Spec.Harness, hcfg)
	if err != nil {
		return in, k, reasonUnknownHarness, err
	}
	if !capabilities(map[string]harness.Adapter{r.Spec.Harness: ad})[r.Spec.Harness].AcceptsSessionID(in.SessionID) {
		return in, k, reasonInvalidSession, fmt.Errorf("%w for harness %s: %q", harness.ErrInvalidSessionID, r.Spec.Harness, shown(in.SessionID))
	}
	return in, k, "", nil
}

// shown returns s cut to maxShownValue bytes (journal.Clip), for quoting
// an untrusted value in the journal or an error.
func shown(s string) string {
	return journal.Clip(s, maxShownValue)
}

// sessionStartHook is the shell command line a harness runs at session
// start: this executable's "hook session-start" with the absolute config.
func sessionStartHook(config string) (string, error) {
	exe, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("session-start hook: %w", err)
	}
	abs, err := filepath.Abs(config)
	if err != nil {
		return "", fmt.Errorf("session-start hook: %w", err)
	}
	return shellQuote(exe) + " hook session-start --config " + shellQuote(abs), nil
}

// shellQuote quotes s for sh: single quotes, with each ' written as '\”.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
