package reconciler

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/loopd/loopd/desired"
)

// Explain is the one home of the reason an operator sees, in loopd get and
// on the status page: each row is one thing it adds to the stored reason.
func TestReasons(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	local := func(t time.Time) string { return t.Local().Format(time.RFC3339) }
	key := func(n int) desired.Key { return desired.Key{Owner: "o", Repo: "r", Number: n} }
	pending := func(ages ...time.Duration) []desired.Delivery {
		var out []desired.Delivery
		for _, a := range ages {
			out = append(out, desired.Delivery{ID: "d-" + a.String(), ReceivedAt: now.Add(-a)})
		}
		return out
	}
	tests := []struct {
		name    string
		records []desired.Record
		want    map[desired.Key]string
	}{
		{name: "running_says_nothing", records: []desired.Record{{Key: key(1), Status: desired.Status{Phase: desired.PhaseRunning}}},
			want: map[desired.Key]string{key(1): ""}},
		{name: "stored_reason_stays", records: []desired.Record{{Key: key(1), Status: desired.Status{Phase: desired.PhaseNeedsAttention, Reason: "crash_loop"}}},
			want: map[desired.Key]string{key(1): "crash_loop"}},
		{name: "queued_items_get_their_place_oldest_event_first", records: []desired.Record{
			{Key: key(1), Status: desired.Status{Phase: desired.PhaseQueued, Reason: "capacity"}, Pending: pending(time.Minute)},
			{Key: key(2), Status: desired.Status{Phase: desired.PhaseQueued, Reason: "capacity"}, Pending: pending(time.Hour)},
		}, want: map[desired.Key]string{key(1): "capacity position=2", key(2): "capacity position=1"}},
		{name: "backing_off_says_when_next", records: []desired.Record{{Key: key(1),
			Status: desired.Status{Phase: desired.PhaseBackingOff, Reason: "crash", RestartHistory: desired.RestartHistory{NextAttempt: now.Add(time.Minute)}}}},
			want: map[desired.Key]string{key(1): "crash next_attempt=" + local(now.Add(time.Minute))}},
		{name: "harness_gone_from_the_config_names_it_and_no_next_attempt_past", records: []desired.Record{{Key: key(1), Spec: desired.Spec{Harness: "claude-code"},
			Status: desired.Status{Phase: desired.PhaseBackingOff, Reason: "harness_unknown", RestartHistory: desired.RestartHistory{NextAttempt: now.Add(-15 * time.Minute)}}}},
			want: map[desired.Key]string{key(1): `harness_unknown harness=claude-code (not in the config: add it back to harnesses)`}},
		{name: "workspace_error_is_quoted", records: []desired.Record{{Key: key(1),
			Status: desired.Status{Phase: desired.PhaseNeedsAttention, Reason: "workspace_failed", WorkspaceState: desired.WorkspaceState{WorkspaceError: "git fetch: exit 128"}}}},
			want: map[desired.Key]string{key(1): `workspace_failed workspace_error="git fetch: exit 128"`}},
		{name: "blocked_says_by_what", records: []desired.Record{{Key: key(1),
			Status: desired.Status{Phase: desired.PhaseRunning, AttentionState: desired.AttentionState{Blocked: "workspace_trust"}}}},
			want: map[desired.Key]string{key(1): "blocked reason=workspace_trust"}},
		{name: "stopped_is_no_longer_blocked", records: []desired.Record{{Key: key(1), Spec: desired.Spec{Closed: true},
			Status: desired.Status{Phase: desired.PhaseStopped, Reason: "closed", AttentionState: desired.AttentionState{Blocked: "login_required"}}}},
			want: map[desired.Key]string{key(1): "closed"}},
		{name: "stopped_with_old_pending_is_stale", records: []desired.Record{{Key: key(1),
			Status: desired.Status{Phase: desired.PhaseStopped}, Pending: pending(2*time.Hour+5*time.Minute+7*time.Second, time.Minute)}},
			want: map[desired.Key]string{key(1): "stale_pending=2 since=2h5m"}},
		{name: "stale_under_a_minute_in_seconds", records: []desired.Record{{Key: key(1),
			Status: desired.Status{Phase: desired.PhaseStopped}, Pending: pending(30 * time.Second)}},
			want: map[desired.Key]string{key(1): ""}},
		{name: "running_with_old_pending_is_not_stale", records: []desired.Record{{Key: key(1),
			Status: desired.Status{Phase: desired.PhaseRunning}, Pending: pending(time.Hour)}},
			want: map[desired.Key]string{key(1): ""}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := map[desired.Key]string{}
			for k, e := range Explain(tt.records, testPolicy(), now, 10*time.Minute) {
				got[k] = e.Reason
			}
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestStalePendingFlag(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	rec := desired.Record{Key: desired.Key{Owner: "o", Repo: "r", Number: 1}, Status: desired.Status{Phase: desired.PhaseStopped},
		Pending: []desired.Delivery{{ID: "d", ReceivedAt: now.Add(-30 * time.Second)}}}
	assert.Equal(t, "stale_pending=1 since=30s", StalePending(rec, now, 10*time.Second))
	assert.Empty(t, StalePending(rec, now, time.Minute))
}

// A harness_missing item says which command is missing while it still is;
// once found, only the stored reason stays until the next spawn replaces
// it.
func TestReasonNamesAMissingHarness(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	r := desired.Record{Key: desired.Key{Owner: "o", Repo: "r", Number: 1}, Spec: desired.Spec{Harness: "claude-code"},
		Status: desired.Status{Phase: desired.PhaseIdle, Reason: "harness_missing"}}
	p := testPolicy()
	c := p.Harnesses["claude-code"]
	c.Missing = `harness claude-code: command "/x/claude": not found`
	p.Harnesses = map[string]Capabilities{"claude-code": c}
	assert.Equal(t, `harness_missing err="harness claude-code: command \"/x/claude\": not found"`, Explain([]desired.Record{r}, p, now, time.Hour)[r.Key].Reason)
	assert.Equal(t, "harness_missing", Explain([]desired.Record{r}, testPolicy(), now, time.Hour)[r.Key].Reason)
}

// A harness that exited at once is named with its command, its exit
// status and its last words.
func TestReasonNamesAHarnessThatExitedAtOnce(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	one := 1
	r := desired.Record{Key: desired.Key{Owner: "o", Repo: "r", Number: 1}, Spec: desired.Spec{Harness: "claude-code"},
		Status: desired.Status{Phase: desired.PhaseNeedsAttention, Reason: "harness_exited_at_once",
			RestartHistory: desired.RestartHistory{LastExitReason: "harness_exited_at_once", LastExitStatus: &one, LastWords: "bwrap: execvp claude: No such file"}}}
	p := testPolicy()
	c := p.Harnesses["claude-code"]
	c.Command = "/bin/false"
	p.Harnesses = map[string]Capabilities{"claude-code": c}
	assert.Equal(t, `harness_exited_at_once exit_status=1 command=/bin/false output="bwrap: execvp claude: No such file"`, Explain([]desired.Record{r}, p, now, time.Hour)[r.Key].Reason)
}

// A list cuts a long reason; the item's own view keeps it whole.
func TestListedReasonCutsALongOne(t *testing.T) {
	long := "workspace_failed workspace_error=" + strings.Repeat("x", 300)
	got := ListedReason(long)
	assert.Equal(t, long[:maxListedReason]+"…", got)
	assert.Equal(t, "crash_loop", ListedReason("crash_loop"))
}
