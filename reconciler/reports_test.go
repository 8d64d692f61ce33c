package reconciler

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loopd/loopd/actions"
	"github.com/loopd/loopd/desired"
	"github.com/loopd/loopd/internal/channel"
	"github.com/loopd/loopd/internal/harness"
	"github.com/loopd/loopd/observed"
)

// The token of the current spawn of these tests' item, and one an
// earlier spawn of it was given.
const (
	spawnToken = "7d5c0e1f9a2b4c3d8e7f6a5b4c3d2e1f0a9b8c7d6e5f4a3b2c1d0e9f8a7b6c5d"
	oldToken   = "0000000000000000000000000000000000000000000000000000000000000000"
)

// reportFile is a report file the observer read of the item's channel.
func reportFile(name, item, token, id, source string, mtime time.Time) channel.Report {
	r := channel.Report{Name: name, ModTime: mtime, WorkItem: item, SessionID: id, Source: source}
	if token != "" {
		r.TokenDigest = channel.Digest(token)
	}
	return r
}

// withReports adds the report files to o's reports of the item.
func withReports(o observed.Observation, files ...channel.Report) observed.Observation {
	o.Reports = map[desired.Key][]channel.Report{key: files}
	return o
}

// TestPlanTakesOnlyTheCurrentSpawnsReports: the reports in an item's
// channel are judged before anything else is decided on it. Only a report
// of the item's current spawn (its work item, its token, an id its harness
// accepts) is recorded; any other is refused with its reason, and the rest
// of the plan is what it would be without it. A /clear that is taken
// moves the item only once the new conversation's transcript appeared in
// its harness state since the spawn.
func TestPlanTakesOnlyTheCurrentSpawnsReports(t *testing.T) {
	at := t0.Add(-2 * time.Second)
	item := key.String()
	live := func() desired.Status {
		st := running()
		st.ChannelToken = channel.Digest(spawnToken)
		return st
	}
	taken := func(file, id, source string, when time.Time) actions.TakeReport {
		return actions.TakeReport{Key: key, Session: sess, File: file, Report: desired.SessionReport{SessionID: id, Source: source, At: when}}
	}
	refused := func(file string, reason actions.Reason, detail, id, source string) actions.RefuseReport {
		return actions.RefuseReport{Key: key, Session: sess, File: file, Reason: reason, Detail: detail, SessionID: id, Source: source}
	}
	deliver := actions.DeliverPrompt{Key: key, Session: sess, PaneID: "%1", DeliveryID: "d-1"}
	follow := actions.FollowSession{Key: key, Session: sess, From: oldID, To: clearedID, Source: "clear"}
	base := obs(alive(), transcript)
	tests := []struct {
		name    string
		records []desired.Record
		obs     observed.Observation
		want    []actions.Action
	}{
		{"report_of_the_current_spawn_is_taken", []desired.Record{rec(live(), ev1)},
			withReports(base, reportFile("r1", item, spawnToken, oldID, "startup", at)),
			[]actions.Action{taken("r1", oldID, "startup", at), deliver}},
		{"clear_whose_transcript_appeared_is_taken_and_followed", []desired.Record{rec(live(), ev1)},
			reported(withReports(base, reportFile("r1", item, spawnToken, clearedID, "clear", at)), clearedID, appeared),
			[]actions.Action{taken("r1", clearedID, "clear", at), follow, deliver}},
		{"clear_without_its_transcript_yet_is_taken_and_not_followed", []desired.Record{rec(live(), ev1)},
			reported(withReports(base, reportFile("r1", item, spawnToken, clearedID, "clear", at)), clearedID, noScript),
			[]actions.Action{taken("r1", clearedID, "clear", at), deliver}},
		{"report_for_another_item_is_refused", []desired.Record{rec(live(), ev1)},
			reported(withReports(base, reportFile("r1", "octo-org/api#7", spawnToken, clearedID, "clear", at)), clearedID, appeared),
			[]actions.Action{refused("r1", actions.ReasonWrongWorkItem, "the report names octo-org/api#7", clearedID, "clear"), deliver}},
		{"report_with_an_earlier_spawns_token_is_refused", []desired.Record{rec(live(), ev1)},
			reported(withReports(base, reportFile("r1", item, oldToken, clearedID, "clear", at)), clearedID, appeared),
			[]actions.Action{refused("r1", actions.ReasonNotThisSpawn, "the token is not the current spawn's", clearedID, "clear"), deliver}},
		{"report_without_a_token_is_refused", []desired.Record{rec(live(), ev1)},
			withReports(base, reportFile("r1", item, "", clearedID, "clear", at)),
			[]actions.Action{refused("r1", actions.ReasonNotThisSpawn, "the token is not the current spawn's", clearedID, "clear"), deliver}},
		{"report_to_a_spawn_given_no_token_is_refused", []desired.Record{rec(running(), ev1)},
			withReports(base, reportFile("r1", item, spawnToken, oldID, "startup", at)),
			[]actions.Action{refused("r1", actions.ReasonNotThisSpawn, "the token is not the current spawn's", oldID, "startup"), deliver}},
		{"report_the_channel_found_malformed_is_refused_with_its_problem", []desired.Record{rec(live(), ev1)},
			withReports(base, channel.Report{Name: "r1", Problem: channel.ProblemMalformed, Detail: "input: invalid character"}),
			[]actions.Action{refused("r1", channel.ProblemMalformed, "input: invalid character", "", ""), deliver}},
		{"report_of_an_id_the_harness_refuses_is_refused", []desired.Record{rec(live(), ev1)},
			withReports(base, reportFile("r1", item, spawnToken, "../../etc/passwd", "clear", at)),
			[]actions.Action{refused("r1", actions.ReasonInvalidSessionID, "not an id harness claude-code accepts", "../../etc/passwd", "clear"), deliver}},
		{"clear_naming_another_items_conversation_is_taken_and_not_followed", []desired.Record{rec(live(), ev1), func() desired.Record {
			other := rec(running())
			other.Key = desired.Key{Owner: "octo-org", Repo: "api", Number: 7}
			// A closed item, in the same workdir, whose conversation it was.
			other.Spec.Closed, other.Status.Phase = true, desired.PhaseStopped
			other.Status.HarnessSessionID, other.Status.Session, other.Status.PaneID = clearedID, desired.SessionName(other.Key), ""
			return other
		}()},
			reported(withReports(base, reportFile("r1", item, spawnToken, clearedID, "clear", at)), clearedID, appeared),
			[]actions.Action{taken("r1", clearedID, "clear", at), deliver}},
		{"report_stamped_before_the_spawn_counts_from_the_spawn", []desired.Record{rec(live(), ev1)},
			withReports(base, reportFile("r1", item, spawnToken, oldID, "startup", spawnAt.Add(-time.Hour))),
			[]actions.Action{taken("r1", oldID, "startup", spawnAt), deliver}},
		{"report_stamped_after_now_counts_from_now", []desired.Record{rec(live(), ev1)},
			withReports(base, reportFile("r1", item, spawnToken, oldID, "startup", t0.Add(time.Hour))),
			[]actions.Action{taken("r1", oldID, "startup", t0), deliver}},
		{"the_latest_of_two_reports_counts", []desired.Record{rec(live(), ev1)},
			reported(withReports(base, reportFile("r1", item, spawnToken, oldID, "startup", at),
				reportFile("r2", item, oldToken, "8b8b8b8b-1b4d-4c8e-9f00-0123456789ab", "clear", at),
				reportFile("r3", item, spawnToken, clearedID, "clear", at.Add(time.Second))), clearedID, appeared),
			[]actions.Action{taken("r1", oldID, "startup", at),
				refused("r2", actions.ReasonNotThisSpawn, "the token is not the current spawn's", "8b8b8b8b-1b4d-4c8e-9f00-0123456789ab", "clear"),
				taken("r3", clearedID, "clear", at.Add(time.Second)), follow, deliver}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Plan(tt.records, tt.obs, testPolicy(), t0)
			require.Equal(t, tt.want, got)
		})
	}
}

// TestFollowable: the rule of which conversation a report may move an
// item to. The report is the agent's word; the transcript, where the
// item's own harness keeps it, is the harness's trace.
func TestFollowable(t *testing.T) {
	r := rec(running())
	r.Status.RetiredSessionIDs = []string{"5e5e5e5e-1b4d-4c8e-9f00-0123456789ab"}
	other := desired.Key{Owner: "octo-org", Repo: "api", Number: 7}
	with := func(f func(*harness.Transcript)) harness.Transcript { tr := appeared; f(&tr); return tr }
	tests := []struct {
		name    string
		id      string
		tr      harness.Transcript
		read    bool
		claimed map[string][]desired.Key
		want    bool
	}{
		{"transcript_appeared_since_the_spawn", clearedID, appeared, true, nil, true},
		{"transcript_written_in_the_spawns_second", clearedID, with(func(tr *harness.Transcript) { tr.ModTime = spawnAt.Truncate(time.Second) }), true, nil, true},
		{"named_only_by_the_item_itself", clearedID, appeared, true, map[string][]desired.Key{clearedID: {key}}, true},
		{"transcript_not_read", clearedID, harness.Transcript{}, false, nil, false},
		{"no_transcript_yet", clearedID, noScript, true, nil, false},
		{"transcript_with_no_turn", clearedID, with(func(tr *harness.Transcript) { tr.Exists = false }), true, nil, false},
		{"no_transcript_rule", clearedID, with(func(tr *harness.Transcript) { tr.Known = false }), true, nil, false},
		{"transcript_last_written_before_the_spawn", clearedID, with(func(tr *harness.Transcript) { tr.ModTime = spawnAt.Add(-time.Second) }), true, nil, false},
		{"conversation_the_item_retired", "5e5e5e5e-1b4d-4c8e-9f00-0123456789ab", appeared, true, nil, false},
		{"conversation_another_item_names", clearedID, appeared, true, map[string][]desired.Key{clearedID: {other}}, false},
		{"conversation_the_item_and_another_name", clearedID, appeared, true, map[string][]desired.Key{clearedID: {key, other}}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, followable(&r, tt.id, tt.tr, tt.read, tt.claimed))
		})
	}
}
