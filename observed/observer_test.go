package observed_test

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loopd/loopd/desired"
	"github.com/loopd/loopd/internal/harness"
	"github.com/loopd/loopd/internal/tmux/tmuxtest"
	"github.com/loopd/loopd/observed"
	"github.com/loopd/loopd/schema"
)

const (
	idA = "00000000-0000-4000-8000-00000000000a"
	idB = "00000000-0000-4000-8000-00000000000b"
	idC = "00000000-0000-4000-8000-00000000000c"
)

// observerRig is an Observer on a tmux fake and the real claude-code
// adapter, whose transcripts live under a temporary config dir.
type observerRig struct {
	o   *observed.Observer
	f   *tmuxtest.Fake
	ad  harness.Adapter
	dir string
}

func newObserverRig(t *testing.T) *observerRig {
	t.Helper()
	dir := t.TempDir()
	ad, err := harness.New("claude-code", schema.Harness{Command: "claude", Env: map[string]string{"CLAUDE_CONFIG_DIR": filepath.Join(dir, "claude")}})
	require.NoError(t, err)
	f := tmuxtest.NewFake()
	log := slog.New(slog.NewTextHandler(&bytes.Buffer{}, nil))
	return &observerRig{o: &observed.Observer{Tmux: f, Harnesses: map[string]harness.Adapter{"claude-code": ad}, Log: log}, f: f, ad: ad, dir: dir}
}

// item is a record of the claude-code harness in the rig's workdir name
// (created when exists), with session id id and deliveries pending.
func (r *observerRig) item(t *testing.T, n int, name string, exists bool, id string, pending ...desired.Delivery) desired.Record {
	t.Helper()
	cwd := filepath.Join(r.dir, name)
	if exists {
		require.NoError(t, os.MkdirAll(cwd, 0o755))
	}
	return desired.Record{Key: desired.Key{Owner: "acme", Repo: "api", Number: n},
		Spec:   desired.Spec{Harness: "claude-code", Cwd: cwd},
		Status: desired.Status{Phase: desired.PhaseRunning, SessionState: desired.SessionState{HarnessSessionID: id}}, Pending: pending}
}

// turn appends a user turn holding text to the transcript of id in rec's
// workdir, as Claude Code does when a prompt is submitted.
func (r *observerRig) turn(t *testing.T, rec desired.Record, id, text string) {
	t.Helper()
	tr, err := r.ad.Transcript(rec.Spec.Cwd, id)
	require.NoError(t, err)
	require.NoError(t, os.MkdirAll(filepath.Dir(tr.Path), 0o755))
	f, err := os.OpenFile(tr.Path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	require.NoError(t, err)
	defer f.Close()
	_, err = fmt.Fprintf(f, `{"type":"user","timestamp":"2026-03-01T12:00:00Z","sessionId":%q,"message":{"role":"user","content":%q}}`+"\n", id, text)
	require.NoError(t, err)
}

// framed is delivery id with a framed body, as webhook.Render stores it.
func framed(id, body string) desired.Delivery {
	return desired.Delivery{ID: id, Prompt: "[loopd] issue_comment.created\n" + desired.FrameBegin(id) + body + desired.FrameEnd(id, body)}
}

// needsOf answers Observe's needs from a table by item number, and records
// the snapshot each call saw.
func needsOf(table map[int]observed.Need, seen *[]observed.Snapshot) observed.Needs {
	return func(rec desired.Record, snap observed.Snapshot) observed.Need {
		*seen = append(*seen, snap)
		return table[rec.Key.Number]
	}
}

// TestObserverReadsOnlyWhatIsNeeded: the disk is read for the items whose
// Need asks, and only the frames asked for are looked for.
func TestObserverReadsOnlyWhatIsNeeded(t *testing.T) {
	r := newObserverRig(t)
	spawn(t, r.f, "loop-acme-api-2", "claude", "hi")
	d1, d2 := framed("d-1", "first"), framed("d-2", "second")
	a := r.item(t, 1, "a", false, idA, d1)
	b := r.item(t, 2, "b", true, idB, d1, d2)
	c := r.item(t, 3, "c", false, idC, d1)
	r.turn(t, a, idA, d1.Prompt)
	r.turn(t, b, idB, d1.Prompt)
	var seen []observed.Snapshot
	needs := needsOf(map[int]observed.Need{
		2: {Disk: true, Frames: []desired.Frame{desired.FrameOf(d1), desired.FrameOf(d2)}},
		3: {Disk: true, Frames: []desired.Frame{desired.FrameOf(d1)}},
	}, &seen)

	o, err := r.o.Observe(t.Context(), []desired.Record{a, b, c}, needs, now)
	require.NoError(t, err)

	require.Len(t, seen, 3, "needs is asked once per record")
	_, ok := seen[0].Pane("loop-acme-api-2")
	assert.True(t, ok, "needs sees the snapshot of the same pass")
	assert.Equal(t, now, o.Snapshot.At)
	assert.Equal(t, map[desired.Key]bool{c.Key: true}, o.MissingWorkdirs, "a's missing workdir is not looked at: a needs nothing")
	assert.NotContains(t, o.Transcripts, a.Key)
	assert.NotContains(t, o.Frames, a.Key)
	assert.True(t, o.Transcripts[b.Key].Known && o.Transcripts[b.Key].Exists)
	assert.Equal(t, map[string]harness.Found{"d-1": {Whole: true}, "d-2": {}}, o.Frames[b.Key])
	assert.True(t, o.Transcripts[c.Key].Known && !o.Transcripts[c.Key].Exists)
	assert.Empty(t, o.Frames[c.Key], "no transcript: nothing delivered")
}

// TestObserverReadsTheReportedConversation: a frame in the transcript of
// the id the harness reported (a /clear) counts; an id the adapter rejects
// is never turned into a path.
func TestObserverReadsTheReportedConversation(t *testing.T) {
	r := newObserverRig(t)
	d1 := framed("d-1", "first")
	b := r.item(t, 2, "b", true, idB, d1)
	r.turn(t, b, idB, "an older turn")
	r.turn(t, b, idC, d1.Prompt)
	for _, tc := range []struct {
		name     string
		reported string
		want     map[string]harness.Found
	}{
		{"reported_id_is_read", idC, map[string]harness.Found{"d-1": {Whole: true}}},
		{"no_report", "", map[string]harness.Found{"d-1": {}}},
		{"invalid_id_is_not_read", "../" + idC, map[string]harness.Found{"d-1": {}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var seen []observed.Snapshot
			needs := needsOf(map[int]observed.Need{2: {Disk: true, Frames: []desired.Frame{desired.FrameOf(d1)}, Reported: tc.reported}}, &seen)
			o, err := r.o.Observe(t.Context(), []desired.Record{b}, needs, now)
			require.NoError(t, err)
			assert.Equal(t, tc.want, o.Frames[b.Key])
		})
	}
}

// An unreadable tmux is an error, and no disk fact is read: nothing is
// known to be dead.
func TestObserverTmuxError(t *testing.T) {
	r := newObserverRig(t)
	boom := errors.New("boom")
	r.f.FailNext("ListPanes", boom)
	called := false
	_, err := r.o.Observe(t.Context(), []desired.Record{r.item(t, 1, "a", false, idA)},
		func(desired.Record, observed.Snapshot) observed.Need { called = true; return observed.Need{Disk: true} }, now)
	assert.ErrorIs(t, err, boom)
	assert.False(t, called)
}

// TestObserverReadsTheReportedTranscript: the transcript of a conversation
// the harness reported (Need.Reported), where the item's own harness keeps
// it for its workdir, is read into Observation.Reported whether or not the
// pass reads the disk; the item's own transcript stays the recorded
// conversation's; an id the adapter rejects is never turned into a path.
func TestObserverReadsTheReportedTranscript(t *testing.T) {
	r := newObserverRig(t)
	d1, d2 := framed("d-1", "before the clear"), framed("d-2", "after the clear")
	rec := r.item(t, 1, "a", true, idA, d1, d2)
	r.turn(t, rec, idA, d1.Prompt)
	r.turn(t, rec, idB, d2.Prompt)
	want, err := r.ad.Transcript(rec.Spec.Cwd, idB)
	require.NoError(t, err)
	recorded, err := r.ad.Transcript(rec.Spec.Cwd, idA)
	require.NoError(t, err)
	for _, tc := range []struct {
		name string
		need observed.Need
		want map[string]harness.Transcript
	}{
		{"with_disk", observed.Need{Disk: true, Reported: idB, Frames: []desired.Frame{desired.FrameOf(d1), desired.FrameOf(d2)}}, map[string]harness.Transcript{idB: want}},
		{"without_disk", observed.Need{Reported: idB}, map[string]harness.Transcript{idB: want}},
		{"invalid_id", observed.Need{Reported: "../" + idB}, nil},
		{"none", observed.Need{}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var seen []observed.Snapshot
			o, err := r.o.Observe(t.Context(), []desired.Record{rec}, needsOf(map[int]observed.Need{1: tc.need}, &seen), now)
			require.NoError(t, err)
			assert.Equal(t, tc.want, o.Reported[rec.Key])
			if tc.need.Disk {
				assert.Equal(t, recorded.Path, o.Transcripts[rec.Key].Path, "the transcript of the conversation the item is in")
				assert.True(t, o.Frames[rec.Key]["d-1"].Whole, "found in the recorded conversation")
				assert.True(t, o.Frames[rec.Key]["d-2"].Whole, "found in the reported one")
			}
		})
	}
}

// TestObserverReadsScreensOfWhatIsNeeded: an item whose Need asks for its
// screen gets what its live pane shows (a block, a usage limit) and, with
// Disk, the limit its transcript's latest turn ended on; others get none.
func TestObserverReadsScreensOfWhatIsNeeded(t *testing.T) {
	r := newObserverRig(t)
	spawn(t, r.f, "loop-acme-api-1", "claude", "hi")
	spawn(t, r.f, "loop-acme-api-2", "claude", "hi")
	spawn(t, r.f, "loop-acme-api-3", "claude", "hi")
	rule := strings.Repeat("─", 20)
	r.f.SetScreen("loop-acme-api-1", "❯ fix it\n  ⎿  You've hit your session limit · resets 3pm (UTC)\n"+rule+"\n❯\u00a0\n"+rule)
	r.f.SetScreen("loop-acme-api-2", rule+"\n❯\u00a0\n"+rule+"\n  ? for shortcuts     Not logged in · Run /login")
	r.f.SetScreen("loop-acme-api-3", rule+"\n❯\u00a0\n"+rule)
	a, b, c := r.item(t, 1, "a", true, idA), r.item(t, 2, "b", true, idB), r.item(t, 3, "c", true, idC)
	tr, err := r.ad.Transcript(c.Spec.Cwd, idC)
	require.NoError(t, err)
	require.NoError(t, os.MkdirAll(filepath.Dir(tr.Path), 0o755))
	require.NoError(t, os.WriteFile(tr.Path, []byte(`{"type":"user","timestamp":"2026-03-01T11:59:00Z","message":{"role":"user","content":"go"}}`+"\n"+
		`{"type":"assistant","isApiErrorMessage":true,"timestamp":"2026-03-01T11:59:01Z","message":{"role":"assistant","content":[{"type":"text","text":"Claude AI usage limit reached|1772370000"}]}}`+"\n"), 0o600))
	var seen []observed.Snapshot
	o, err := r.o.Observe(t.Context(), []desired.Record{a, b, c}, needsOf(map[int]observed.Need{
		1: {Screen: true}, 2: {Screen: true}, 3: {Screen: true, Disk: true},
	}, &seen), now)
	require.NoError(t, err)
	require.NotNil(t, o.Screens[a.Key].Limit)
	assert.True(t, time.Date(2026, 3, 1, 15, 0, 0, 0, time.UTC).Equal(o.Screens[a.Key].Limit.Reset))
	assert.Equal(t, harness.BlockLoginRequired, o.Screens[b.Key].Blocked)
	assert.Nil(t, o.Screens[b.Key].Limit)
	require.NotNil(t, o.Screens[c.Key].Limit, "the transcript's limit")
	assert.True(t, time.Unix(1772370000, 0).Equal(o.Screens[c.Key].Limit.Reset))

	o, err = r.o.Observe(t.Context(), []desired.Record{a, b, c}, needsOf(map[int]observed.Need{}, &seen), now)
	require.NoError(t, err)
	assert.Empty(t, o.Screens, "no screen read unless asked")
}

// TestObserverCapturesAScreenOnceUntilItsPaneWrites: a live agent's screen
// is captured again only after output to its pane (tmux's window_activity,
// whole seconds); a quiet pane's last capture is read again, with this
// pass's clock.
func TestObserverCapturesAScreenOnceUntilItsPaneWrites(t *testing.T) {
	r := newObserverRig(t)
	clock := now
	r.f.Now = func() time.Time { return clock }
	spawn(t, r.f, "loop-acme-api-1", "claude", "hi")
	rule := strings.Repeat("─", 20)
	r.f.SetScreen("loop-acme-api-1", rule+"\n❯\u00a0\n"+rule)
	a := r.item(t, 1, "a", true, idA)
	captures := func() int {
		return len(slices.DeleteFunc(r.f.Calls(), func(c string) bool { return c != "CapturePanes" }))
	}
	observe := func() observed.Screen {
		var seen []observed.Snapshot
		o, err := r.o.Observe(t.Context(), []desired.Record{a}, needsOf(map[int]observed.Need{1: {Screen: true}}, &seen), clock)
		require.NoError(t, err)
		sc, ok := o.Screens[a.Key]
		require.True(t, ok, "the screen is known every pass")
		return sc
	}

	observe()
	require.Equal(t, 1, captures())
	clock = clock.Add(300 * time.Millisecond)
	observe()
	assert.Equal(t, 2, captures(), "output in the second of the capture may have come after it")
	clock = clock.Add(time.Second)
	observe()
	assert.Equal(t, 3, captures(), "the last capture was in the second of the output")
	clock = clock.Add(time.Second)
	observe()
	assert.Equal(t, 3, captures(), "captured in a later second than the output: it stands")

	r.f.SetScreen("loop-acme-api-1", rule+"\n❯\u00a0\n"+rule+"\n  ? for shortcuts     Not logged in · Run /login")
	clock = clock.Add(time.Second)
	assert.Equal(t, harness.BlockLoginRequired, observe().Blocked, "output: captured again")
	assert.Equal(t, 4, captures())
	clock = clock.Add(time.Second)
	assert.Equal(t, harness.BlockLoginRequired, observe().Blocked)
	assert.Equal(t, 4, captures())

	require.NoError(t, r.f.KillSession(t.Context(), "loop-acme-api-1", owner))
	spawn(t, r.f, "loop-acme-api-1", "claude", "hi")
	clock = clock.Add(time.Second)
	observe()
	assert.Equal(t, 5, captures(), "a new pane is captured")
}

// TestObserverCapturesOnlyTheScreensDecisionsNeed: a new Observer (a
// cold pass) captures the screens a decision needs, all in one call, and
// none of those only watched for news (Need.ScreenIfChanged), until their
// panes write.
func TestObserverCapturesOnlyTheScreensDecisionsNeed(t *testing.T) {
	r := newObserverRig(t)
	clock := now
	r.f.Now = func() time.Time { return clock }
	rule := strings.Repeat("─", 20)
	var recs []desired.Record
	needs := map[int]observed.Need{}
	for i, id := range []string{idA, idB, idC} {
		name := fmt.Sprintf("loop-acme-api-%d", i+1)
		spawn(t, r.f, name, "claude", "hi")
		r.f.SetScreen(name, rule+"\n❯\u00a0\n"+rule+"\n  ? for shortcuts     Not logged in · Run /login")
		recs = append(recs, r.item(t, i+1, fmt.Sprint(i), true, id))
		needs[i+1] = observed.Need{Screen: true, ScreenIfChanged: i > 0}
	}
	captured := func() []string {
		return slices.DeleteFunc(r.f.Calls(), func(c string) bool { return !strings.HasPrefix(c, "CapturePane") })
	}
	observe := func() observed.Observation {
		var seen []observed.Snapshot
		o, err := r.o.Observe(t.Context(), recs, needsOf(needs, &seen), clock)
		require.NoError(t, err)
		return o
	}

	clock = clock.Add(time.Second) // a pass in a later second than the output
	o := observe()
	assert.Equal(t, []string{"CapturePanes"}, captured(), "one call")
	assert.Equal(t, harness.BlockLoginRequired, o.Screens[recs[0].Key].Blocked, "the screen a decision needs")
	assert.NotContains(t, o.Screens, recs[1].Key, "a screen watched for news, first seen")
	assert.NotContains(t, o.Screens, recs[2].Key)

	clock = clock.Add(time.Second)
	o = observe()
	assert.Len(t, captured(), 1, "nothing new: the kept capture stands, and no pane wrote")
	assert.Len(t, o.Screens, 1)

	r.f.SetScreen("loop-acme-api-2", rule+"\n❯\u00a0\n"+rule+"\n  ? for shortcuts     Not logged in · Run /login ")
	needs[3] = observed.Need{Screen: true}
	clock = clock.Add(time.Second)
	o = observe()
	assert.Len(t, captured(), 2, "the pane that wrote and the one now needed, in one call")
	assert.Equal(t, harness.BlockLoginRequired, o.Screens[recs[1].Key].Blocked, "news")
	assert.Equal(t, harness.BlockLoginRequired, o.Screens[recs[2].Key].Blocked, "needed")
}

// countingAdapter counts the reads of transcripts' latest turns.
type countingAdapter struct {
	harness.Adapter
	reads int
}

func (c *countingAdapter) TranscriptLimit(tr harness.Transcript) (harness.Limit, bool, error) {
	c.reads++
	return c.Adapter.TranscriptLimit(tr)
}

// TestObserverReadsALatestTurnOnceUntilItsTranscriptChanges: the usage
// limit a transcript's latest turn shows is read again only once the
// transcript's size or mtime changed.
func TestObserverReadsALatestTurnOnceUntilItsTranscriptChanges(t *testing.T) {
	r := newObserverRig(t)
	ad := &countingAdapter{Adapter: r.ad}
	r.o.Harnesses["claude-code"] = ad
	spawn(t, r.f, "loop-acme-api-1", "claude", "hi")
	a := r.item(t, 1, "a", true, idA)
	r.turn(t, a, idA, "go")
	observe := func() *harness.Limit {
		var seen []observed.Snapshot
		o, err := r.o.Observe(t.Context(), []desired.Record{a}, needsOf(map[int]observed.Need{1: {Screen: true, Disk: true}}, &seen), now)
		require.NoError(t, err)
		return o.Screens[a.Key].Limit
	}
	assert.Nil(t, observe())
	assert.Nil(t, observe())
	assert.Equal(t, 1, ad.reads, "an unchanged transcript is not read again")

	tr, err := r.ad.Transcript(a.Spec.Cwd, idA)
	require.NoError(t, err)
	f, err := os.OpenFile(tr.Path, os.O_APPEND|os.O_WRONLY, 0o600)
	require.NoError(t, err)
	_, err = f.WriteString(`{"type":"assistant","isApiErrorMessage":true,"timestamp":"2026-03-01T11:59:01Z","message":{"role":"assistant","content":[{"type":"text","text":"Claude AI usage limit reached|1772370000"}]}}` + "\n")
	require.NoError(t, err)
	require.NoError(t, f.Close())
	l := observe()
	require.NotNil(t, l, "the transcript grew: read again")
	assert.True(t, time.Unix(1772370000, 0).Equal(l.Reset))
	require.NotNil(t, observe(), "kept while unchanged")
	assert.Equal(t, 2, ad.reads)
}

// TestObserverReadsWhatADeadAgentSaidLast: a dead pane is read only when
// its Need asks (Exit), for its last line and its refusal to resume the
// item's recorded conversation; a live screen that prints a refusal and a
// signal's death are read too, and a pane nobody asked about is not.
func TestObserverReadsWhatADeadAgentSaidLast(t *testing.T) {
	r := newObserverRig(t)
	for n := 1; n <= 3; n++ {
		spawn(t, r.f, fmt.Sprintf("loop-acme-api-%d", n), "claude", "hi")
	}
	r.f.SetScreen("loop-acme-api-1", "No conversation found with session ID: "+idA)
	r.f.Exit("loop-acme-api-1", 1)
	r.f.SetScreen("loop-acme-api-2", "❯ fix it\nError: Maximum call stack size exceeded")
	r.f.ExitSignal("loop-acme-api-2", 9)
	r.f.SetScreen("loop-acme-api-3", "No conversation found with session ID: "+idC)
	a, b, c := r.item(t, 1, "a", true, idA), r.item(t, 2, "b", true, idB), r.item(t, 3, "c", true, idC)
	var seen []observed.Snapshot
	o, err := r.o.Observe(t.Context(), []desired.Record{a, b, c}, needsOf(map[int]observed.Need{
		1: {Exit: true}, 2: {Exit: true}, 3: {Screen: true},
	}, &seen), now)
	require.NoError(t, err)
	assert.Equal(t, observed.Exit{Words: "No conversation found with session ID: " + idA, Refusal: harness.RefusalNotResumable}, o.Exits[a.Key])
	assert.Equal(t, observed.Exit{Words: "Error: Maximum call stack size exceeded"}, o.Exits[b.Key])
	assert.Equal(t, harness.RefusalNotResumable, o.Screens[c.Key].Refusal, "a live CLI that prints its refusal")
	assert.NotContains(t, o.Exits, c.Key, "a live pane has no last words")
}
