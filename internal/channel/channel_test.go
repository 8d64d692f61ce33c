package channel_test

import (
	"context"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loopd/loopd/internal/channel"
)

var now = time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)

func TestPrepareMakesPrivateDirs(t *testing.T) {
	root := filepath.Join(t.TempDir(), channel.RootName)
	require.NoError(t, os.MkdirAll(filepath.Join(root, "loop-a"), 0o755))
	dir, err := channel.Prepare(root, "loop-a")
	require.NoError(t, err)
	assert.Equal(t, filepath.Join(root, "loop-a"), dir)
	for _, d := range []string{root, dir} {
		info, err := os.Stat(d)
		require.NoError(t, err)
		assert.Equal(t, os.FileMode(0o700), info.Mode().Perm(), "%s is tightened", d)
	}
	require.NoError(t, channel.Remove(root, "loop-a"))
	assert.NoDirExists(t, dir)
	require.NoError(t, channel.Remove(root, "loop-a"), "gone already")
}

func TestTokens(t *testing.T) {
	a, da, err := channel.NewToken()
	require.NoError(t, err)
	b, db, err := channel.NewToken()
	require.NoError(t, err)
	assert.NotEqual(t, a, b)
	assert.Len(t, a, 64)
	assert.Equal(t, channel.Digest(a), da)
	assert.NotEqual(t, a, da, "the digest is not the token")
	assert.True(t, channel.Matches(channel.Digest(a), da))
	assert.False(t, channel.Matches(channel.Digest(a), db))
	assert.False(t, channel.Matches("", ""), "no token matches none")
	assert.False(t, channel.Matches(channel.Digest(""), ""))
}

// A report reads back as written, oldest first and at most max at a
// time; what is wrong with one by itself is its Problem, for the pass to
// refuse it; a removed report is gone.
func TestReportsRoundTrip(t *testing.T) {
	dir := t.TempDir()
	report := func(id, source string) []byte {
		return []byte(`{"session_id":"` + id + `","transcript_path":"/x.jsonl","cwd":"/w","hook_event_name":"SessionStart","source":"` + source + `"}`)
	}
	write := func(item, token string, input []byte, at time.Time) {
		t.Helper()
		require.NoError(t, channel.WriteReport(dir, item, token, input, at))
	}
	write("o/r#1", "tok", report("a", "startup"), now)
	write("o/r#1", "tok", report("b", "clear"), now.Add(time.Second))
	write("o/r#2", "", report("c", "resume"), now.Add(2*time.Second))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("x"), 0o600))

	got, err := channel.ReadReports(dir, 2)
	require.NoError(t, err)
	require.Len(t, got, 2)
	assert.Equal(t, "a", got[0].SessionID)
	assert.Equal(t, "startup", got[0].Source)
	assert.Equal(t, "o/r#1", got[0].WorkItem)
	assert.Equal(t, channel.Digest("tok"), got[0].TokenDigest)
	assert.Empty(t, got[0].Problem)
	assert.Equal(t, "b", got[1].SessionID)
	assert.True(t, channel.IsReport(got[0].Name))

	require.NoError(t, channel.RemoveReport(dir, got[0].Name))
	require.NoError(t, channel.RemoveReport(dir, got[0].Name), "gone already")
	require.Error(t, channel.RemoveReport(dir, "notes.txt"), "only a report's name")
	require.Error(t, channel.RemoveReport(dir, "../report-1-x.json"))
	got, err = channel.ReadReports(dir, 16)
	require.NoError(t, err)
	require.Len(t, got, 2)
	assert.Equal(t, "c", got[1].SessionID)
	assert.Empty(t, got[1].TokenDigest, "no token")

	none, err := channel.ReadReports(filepath.Join(dir, "missing"), 16)
	require.NoError(t, err)
	assert.Empty(t, none)
}

// The checks a report fails by itself, as the hook's input was checked
// before it reached the pass.
func TestReportProblems(t *testing.T) {
	const good = "8fb7b7f1-2c48-47de-8203-43547ba09c9d"
	report := func(id, source string) string {
		return `{"session_id":"` + id + `","transcript_path":"/x.jsonl","cwd":"/w","hook_event_name":"SessionStart","source":"` + source + `"}`
	}
	tests := []struct {
		name, input, problem string
	}{
		{"good", report(good, "startup"), ""},
		{"compact", report(good, "compact"), ""},
		{"no_hook_event_name", `{"session_id":"` + good + `","source":"resume"}`, ""},
		{"huge_input", report(good, "startup") + strings.Repeat(" ", 64<<10), channel.ProblemTooLarge},
		{"wrong_source", report(good, "evil"), channel.ProblemUnknownSource},
		{"no_source", `{"session_id":"` + good + `"}`, channel.ProblemUnknownSource},
		{"wrong_hook_event", `{"session_id":"` + good + `","source":"startup","hook_event_name":"Stop"}`, channel.ProblemWrongHook},
		{"not_json", `not json`, channel.ProblemMalformed},
		{"not_an_object", `["` + good + `"]`, channel.ProblemMalformed},
		{"second_object_after_it", report(good, "startup") + `{"session_id":"x"}`, channel.ProblemMalformed},
		{"empty", ``, channel.ProblemMalformed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			require.NoError(t, channel.WriteReport(dir, "o/r#1", "tok", []byte(tt.input), now))
			got, err := channel.ReadReports(dir, 16)
			require.NoError(t, err)
			require.Len(t, got, 1)
			assert.Equal(t, tt.problem, got[0].Problem, got[0].Detail)
		})
	}
}

// What an agent can put into its own channel besides a report: a
// symlink to a file it cannot read, a FIFO that would block a reader, a
// file too large, a file that is not a report's envelope. Each comes back
// with a problem, never blocks, and is read no further than the bound.
func TestReportFilesPlantedInTheChannel(t *testing.T) {
	dir := t.TempDir()
	secret := filepath.Join(t.TempDir(), "secret")
	require.NoError(t, os.WriteFile(secret, []byte(`{"work_item":"o/r#1","token":"t","input":"{}"}`), 0o600))
	name := func(i int) string {
		return filepath.Join(dir, "report-0000000000000000000"+string(rune('0'+i))+"-aa.json")
	}
	require.NoError(t, os.Symlink(secret, name(1)))
	require.NoError(t, syscall.Mkfifo(name(2), 0o600))
	require.NoError(t, os.WriteFile(name(3), []byte(strings.Repeat("x", 1<<20)), 0o600))
	require.NoError(t, os.WriteFile(name(4), []byte(`{"work_item":1}`), 0o600))
	done := make(chan []channel.Report)
	go func() {
		got, err := channel.ReadReports(dir, 16)
		assert.NoError(t, err)
		done <- got
	}()
	var got []channel.Report
	select {
	case got = <-done:
	case <-time.After(time.Minute):
		t.Fatal("ReadReports blocked on a FIFO")
	}
	require.Len(t, got, 4)
	assert.Equal(t, channel.ProblemMalformed, got[0].Problem, "symlink: %s", got[0].Detail)
	assert.Equal(t, channel.ProblemMalformed, got[1].Problem, "fifo: %s", got[1].Detail)
	assert.Equal(t, channel.ProblemTooLarge, got[2].Problem)
	assert.Equal(t, channel.ProblemMalformed, got[3].Problem)
	for _, r := range got {
		assert.Empty(t, r.TokenDigest)
	}
}

// longDir is a channel directory whose socket's path is longer than a
// unix socket address can hold (107 bytes), as under a deep state dir for
// a long repository name.
func longDir(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), strings.Repeat("d", 60), "loop-"+strings.Repeat("a-very-long-repository-name-", 4)+"1")
	require.NoError(t, os.MkdirAll(dir, 0o700))
	require.Greater(t, len(filepath.Join(dir, channel.SocketName)), 108)
	return dir
}

// A request reaches the handler with its token and attributes and the
// answer comes back, whatever the path's length; the socket is private and
// replaces one a dead daemon left; nothing listening is ErrNoDaemon; a
// request that is not a JSON line is refused without reaching the handler.
func TestAskAndServe(t *testing.T) {
	dir := longDir(t)
	require.NoError(t, os.WriteFile(filepath.Join(dir, channel.SocketName), nil, 0o600), "left by a dead daemon")

	_, err := channel.Ask(t.Context(), dir, channel.Request{Token: "t", Op: channel.OpToken})
	require.ErrorIs(t, err, channel.ErrNoDaemon)

	ln, err := channel.Listen(dir)
	require.NoError(t, err)
	info, err := os.Stat(filepath.Join(dir, channel.SocketName))
	require.NoError(t, err)
	assert.Equal(t, os.ModeSocket, info.Mode().Type())
	assert.Equal(t, os.FileMode(0o600), info.Mode().Perm())
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan struct{})
	var got []channel.Request
	go func() {
		defer close(served)
		channel.Serve(ctx, ln, func(_ context.Context, req channel.Request) channel.Answer {
			got = append(got, req)
			return channel.Answer{Username: "u", Password: "p", Expires: now}
		}, slog.New(slog.DiscardHandler))
	}()

	req := channel.Request{Token: "t", Op: channel.OpGit, Protocol: "https", Host: "github.com", Path: "o/r.git"}
	a, err := channel.Ask(t.Context(), dir, req)
	require.NoError(t, err)
	assert.Equal(t, channel.Answer{Username: "u", Password: "p", Expires: now}, a)

	raw := rawAsk(t, dir, "not json\n")
	assert.Contains(t, raw, `"refused":"malformed request"`)
	assert.Equal(t, []channel.Request{req}, got, "the malformed request never reached the handler")

	cancel()
	<-served
	require.NoError(t, channel.Unlisten(dir))
	_, err = channel.Ask(t.Context(), dir, req)
	require.ErrorIs(t, err, channel.ErrNoDaemon)
}

// rawAsk writes line to the socket of dir, through a short path, and
// returns what comes back.
func rawAsk(t *testing.T, dir, line string) string {
	t.Helper()
	link := filepath.Join(t.TempDir(), "c")
	require.NoError(t, os.Symlink(dir, link))
	conn, err := net.Dial("unix", filepath.Join(link, channel.SocketName))
	require.NoError(t, err)
	defer conn.Close()
	_, err = conn.Write([]byte(line))
	require.NoError(t, err)
	b := make([]byte, 4096)
	n, _ := conn.Read(b)
	return string(b[:n])
}
