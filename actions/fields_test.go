package actions_test

import (
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loopd/loopd/actions"
	"github.com/loopd/loopd/desired"
)

// TestFieldsJSON: every action type's fields, as the JSON dry run carries
// them (Field.Data), are typed: counts, exit statuses and generations are
// numbers, flags are booleans, times are RFC 3339 strings in UTC, and
// durations are Go's duration strings. The text form of the same fields
// (String) is unchanged.
func TestFieldsJSON(t *testing.T) {
	for _, tc := range fieldCases() {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.name, tc.a.Name())
			m := map[string]any{}
			for _, f := range tc.a.Fields() {
				m[f.Key] = f.Data()
			}
			got, err := json.Marshal(m)
			require.NoError(t, err)
			assert.JSONEq(t, tc.json, string(got))
			if tc.text != "" {
				assert.Equal(t, tc.text, tc.a.String())
			}
		})
	}
}

// fieldCase is one action, its fields in JSON, and, when not empty, its
// text form.
type fieldCase struct {
	name string
	a    actions.Action
	json string
	text string
}

// fieldCases holds one case of every action type.
func fieldCases() []fieldCase {
	k := desired.Key{Owner: "acme", Repo: "api", Number: 42}
	// at is not in UTC and has a fraction of a second: the JSON is in UTC,
	// and the fields that were whole seconds in the text stay so.
	at := time.Date(2026, 5, 1, 14, 0, 7, 250_000_000, time.FixedZone("CEST", 2*3600))
	spawn := actions.Spawn{Key: k, Session: "loop-acme-api-42", Harness: "claude-code", Cwd: "/src/api", DeliveryID: "d-1",
		Replay: 4096, Reason: actions.ReasonNewEvent}
	return []fieldCase{
		{"fresh_spawn", actions.FreshSpawn{Spawn: spawn, ResumeFailed: actions.ReasonPaneDead, AttemptedID: "old", Unpinned: true},
			`{"attempted_session_id":"old","cwd":"/src/api","delivery":"d-1","harness":"claude-code","harness_session_id":"unconfirmed","reason":"new_event","replay":4096,"resume_failed":"pane_dead","session":"loop-acme-api-42","work_item":"acme/api#42"}`,
			"fresh_spawn work_item=acme/api#42 session=loop-acme-api-42 harness=claude-code attempted_session_id=old resume_failed=pane_dead harness_session_id=unconfirmed cwd=/src/api delivery=d-1 replay=4096 reason=new_event"},
		{"resume_spawn", actions.ResumeSpawn{Spawn: spawn, ResumeID: "7f3c"},
			`{"cwd":"/src/api","delivery":"d-1","harness":"claude-code","reason":"new_event","replay":4096,"resume_id":"7f3c","session":"loop-acme-api-42","work_item":"acme/api#42"}`, ""},
		{"deliver_prompt", actions.DeliverPrompt{Key: k, Session: "s", PaneID: "%1", DeliveryID: "d-2", Retry: true, Repaste: false},
			`{"delivery":"d-2","pane_id":"%1","repaste":false,"retry":true,"session":"s","work_item":"acme/api#42"}`,
			"deliver_prompt work_item=acme/api#42 session=s pane_id=%1 delivery=d-2 retry=true repaste=false"},
		{"confirm_delivery", actions.ConfirmDelivery{Key: k, Session: "s", DeliveryID: "d-2", Verified: true, Via: "transcript"},
			`{"delivery":"d-2","session":"s","verified":true,"via":"transcript","work_item":"acme/api#42"}`, ""},
		{"drop_delivery", actions.DropDelivery{Key: k, DeliveryID: "d-3", Commit: "abc", Reason: actions.ReasonOwnPush},
			`{"commit":"abc","delivery":"d-3","reason":"own_push","work_item":"acme/api#42"}`, ""},
		{"stop_session", actions.StopSession{Key: k, Session: "s", Reason: actions.ReasonClosed, Delivered: "d-4"},
			`{"delivered":"d-4","reason":"closed","session":"s","work_item":"acme/api#42"}`, ""},
		{"mark_running", actions.MarkRunning{Key: k, Session: "s", PaneID: "%1", SessionID: "7f3c", Mode: desired.SpawnResume, Confirmed: true, Reason: actions.ReasonConfirmed},
			`{"confirmed":true,"harness_session_id":"7f3c","mode":"resume","pane_id":"%1","reason":"confirmed","session":"s","work_item":"acme/api#42"}`, ""},
		{"record_exit", actions.RecordExit{Key: k, Session: "s", ExitStatus: 1, Phase: desired.PhaseBackingOff, Failures: 2,
			FastFailures: 1, ChurnFailures: 0, NextAttempt: at, Retire: actions.Reason("fast_failures"), Reason: actions.ReasonPaneDead},
			`{"churn_failures":0,"clean":false,"exit_status":1,"failures":2,"fast_failures":1,"next_attempt":"2026-05-01T12:00:07Z","phase":"BackingOff","reason":"pane_dead","retire":"fast_failures","session":"s","work_item":"acme/api#42"}`,
			"record_exit work_item=acme/api#42 session=s exit_status=1 clean=false phase=BackingOff failures=2 fast_failures=1 churn_failures=0 retire=fast_failures next_attempt=2026-05-01T12:00:07Z reason=pane_dead"},
		{"follow_session", actions.FollowSession{Key: k, Session: "s", From: "a", To: "b", Source: "clear"},
			`{"from":"a","harness_session_id":"b","session":"s","source":"clear","work_item":"acme/api#42"}`, ""},
		{"id_ambiguous", actions.Ambiguous{Key: k, Session: "s", Candidates: []string{"a", "b"}},
			`{"candidates":"a,b","reason":"id_ambiguous","session":"s","work_item":"acme/api#42"}`,
			"id_ambiguous work_item=acme/api#42 session=s candidates=a,b reason=id_ambiguous"},
		{"take_report", actions.TakeReport{Key: k, Session: "s", File: "report-1.json", Report: desired.SessionReport{SessionID: "b", Source: "clear", At: at}},
			`{"harness_session_id":"b","report":"report-1.json","session":"s","source":"clear","work_item":"acme/api#42"}`,
			"take_report work_item=acme/api#42 session=s report=report-1.json harness_session_id=b source=clear"},
		{"refuse_report", actions.RefuseReport{Key: k, Session: "s", File: "report-2.json", Reason: actions.ReasonNotThisSpawn, Detail: "x", SessionID: "b"},
			`{"reason":"not_this_spawn","report":"report-2.json","session":"s","work_item":"acme/api#42"}`,
			"refuse_report work_item=acme/api#42 session=s report=report-2.json reason=not_this_spawn"},
		{"release", actions.Release{Key: k, Session: "s", Generation: 7, Fresh: true, RetireID: "a", Phase: desired.PhaseSpawning},
			`{"fresh":true,"generation":7,"phase":"Spawning","retired_session_id":"a","session":"s","work_item":"acme/api#42"}`,
			"release work_item=acme/api#42 session=s generation=7 fresh=true retired_session_id=a phase=Spawning"},
		{"wait", actions.Wait{Key: k, Until: at, Reason: actions.ReasonBackoff},
			`{"reason":"backoff","until":"2026-05-01T12:00:07.25Z","work_item":"acme/api#42"}`,
			"wait work_item=acme/api#42 until=2026-05-01T12:00:07.25Z reason=backoff"},
		{"give_up", actions.GiveUp{Key: k, Session: "s", Reason: actions.ReasonDeliveryMangled, Mangled: "d-5", Copies: 3, Path: "/w", Detail: "x"},
			`{"copies":3,"cwd":"/w","delivery":"d-5","detail":"x","reason":"delivery_mangled","session":"s","work_item":"acme/api#42"}`, ""},
		{"block", actions.Block{Key: k, Reason: actions.ReasonWorkspaceFailed, Detail: "status unreadable"},
			`{"detail":"status unreadable","reason":"workspace_failed","work_item":"acme/api#42"}`, ""},
		{"prepare_workspace", actions.PrepareWorkspace{Key: k, Dir: "/w", Checkout: &actions.Checkout{URL: "https://github.com/acme/api.git", Mode: actions.CheckoutIssue, Branch: "loopd/42", Base: "main"},
			Reason: actions.ReasonNewEvent, Failures: 1, Retry: true, RetryAfter: 90 * time.Second},
			`{"base":"main","branch":"loopd/42","cwd":"/w","failures_on_error":1,"mode":"issue","reason":"new_event","retry_after":"1m30s","url":"https://github.com/acme/api.git","work_item":"acme/api#42"}`,
			"prepare_workspace work_item=acme/api#42 cwd=/w url=https://github.com/acme/api.git mode=issue branch=loopd/42 base=main reason=new_event failures_on_error=1 retry_after=1m30s"},
		{"fetch_head", actions.FetchHead{Key: k, DeliveryID: "d-6", URL: "https://x-access-token:secret@github.com/acme/api.git", PR: 42, Commit: "abc1234"},
			`{"commit":"abc1234","delivery":"d-6","url":"https://***@github.com/acme/api.git","work_item":"acme/api#42"}`,
			"fetch_head work_item=acme/api#42 delivery=d-6 url=https://***@github.com/acme/api.git commit=abc1234"},
		{"attended", actions.MarkAttended{Key: k, Session: "s", By: "octo"},
			`{"by":"octo","session":"s","work_item":"acme/api#42"}`,
			"attended work_item=acme/api#42 session=s by=octo"},
		{"client_gone", actions.MarkAttended{Key: k, Session: "s", By: "octo", Gone: true},
			`{"session":"s","work_item":"acme/api#42"}`, ""},
		{"hand_back", actions.HandBack{Key: k, Session: "s", By: "octo", How: "detached", Deliveries: []string{"d-1", "d-2"}},
			`{"by":"octo","deliveries":"d-1,d-2","how":"detached","session":"s","work_item":"acme/api#42"}`,
			"hand_back work_item=acme/api#42 session=s by=octo how=detached deliveries=d-1,d-2"},
		{"remove_workspace", actions.RemoveWorkspace{Key: k, Dir: "/w", URL: "https://github.com/acme/api.git"},
			`{"cwd":"/w","reason":"closed","url":"https://github.com/acme/api.git","work_item":"acme/api#42"}`, ""},
		{"report_workdir", actions.ReportWorkdir{Key: k, Pinned: "/p", Rendered: "/r"},
			`{"config_cwd":"/r","cwd":"/p","reason":"workdir_pinned","work_item":"acme/api#42"}`, ""},
		{"queue", actions.Queue{Key: k, Session: "s", Position: 2, Live: 4, MaxLive: 4, Starts: 1, MaxStarts: 3, Reason: actions.ReasonCapacity},
			`{"live":4,"max_live":4,"max_starts":3,"position":2,"reason":"capacity","session":"s","starts":1,"work_item":"acme/api#42"}`, ""},
		{"park", actions.Park{Key: k, Session: "s", PaneID: "%1", IdleFor: 30 * time.Second},
			`{"idle_for":"30s","pane_id":"%1","reason":"idle","session":"s","work_item":"acme/api#42"}`, ""},
		{"relinquish", actions.Relinquish{Key: k, Session: "s", Owner: "b", Reason: actions.ReasonLeaseLost},
			`{"reason":"lease_lost","session":"s","to_host":"b","work_item":"acme/api#42"}`, ""},
		{"restore_transcript", actions.RestoreTranscript{Key: k, Session: "s", ResumeID: "7f3c", Cwd: "/w", From: "a", To: "b", Resume: true},
			`{"cwd":"/w","from_host":"a","reason":"host_moved","resume_id":"7f3c","resumed":true,"session":"s","to_host":"b","work_item":"acme/api#42"}`, ""},
		{"handover", actions.Handover{Key: k, Session: "s", Live: true, Reason: actions.ReasonDrained},
			`{"live":true,"reason":"drained","session":"s","work_item":"acme/api#42"}`, ""},
		{"rate_limit", actions.RateLimit{Key: k, Session: "s", Harness: "claude-code", Kind: "session", Reset: at, Until: at.Add(time.Minute), Default: true, Capped: true},
			`{"default_reset":true,"harness":"claude-code","limit":"session","reason":"rate_limited","reset":"2026-05-01T12:00:07Z","reset_capped":true,"session":"s","until":"2026-05-01T12:01:07Z","work_item":"acme/api#42"}`,
			"rate_limit work_item=acme/api#42 session=s harness=claude-code limit=session reset=2026-05-01T12:00:07Z until=2026-05-01T12:01:07Z default_reset=true reset_capped=true reason=rate_limited"},
		{"answer_limit_menu", actions.AnswerLimitMenu{Key: k, Session: "s", PaneID: "%1"},
			`{"pane_id":"%1","reason":"rate_limited","session":"s","work_item":"acme/api#42"}`, ""},
		{"blocked", actions.MarkBlocked{Key: k, Session: "s", Block: "login"},
			`{"reason":"login","session":"s","work_item":"acme/api#42"}`, ""},
		{"stop_run", actions.StopRun{Key: k, Session: "s", Run: "r1", DeliveryID: "d-6", Timeout: 10 * time.Minute, Reason: actions.ReasonDispatchTimeout},
			`{"delivery":"d-6","reason":"dispatch_timeout","run":"r1","session":"s","timeout":"10m0s","work_item":"acme/api#42"}`,
			"stop_run work_item=acme/api#42 session=s run=r1 delivery=d-6 timeout=10m0s reason=dispatch_timeout"},
		{"record_usage", actions.RecordUsage{Key: k, State: desired.BudgetState{UsageOffset: 4096}, Added: 1200},
			`{"bytes":4096,"tokens":1200,"work_item":"acme/api#42"}`, "record_usage work_item=acme/api#42 tokens=1200 bytes=4096"},
		{"budget_exhaust", actions.BudgetExhaust{Key: k, Session: "s", PaneID: "%1", Used: 1100, Limit: 1000, Which: "window", Delivered: "d-1"},
			`{"budget_limit":1000,"budget_used":1100,"budget_which":"window","delivered":"d-1","pane_id":"%1","reason":"budget_exhausted","session":"s","work_item":"acme/api#42"}`,
			"budget_exhaust work_item=acme/api#42 session=s pane_id=%1 budget_used=1100 budget_limit=1000 budget_which=window delivered=d-1 reason=budget_exhausted"},
		{"ask_question", actions.AskQuestion{Key: k, Session: "s", Question: desired.Question{ID: "q1", Title: "Do you want to proceed?", Choices: []string{"Yes"}}, Block: "permission_prompt"},
			`{"question_id":"q1","reason":"awaiting_approval","session":"s","title":"Do you want to proceed?","work_item":"acme/api#42"}`,
			`ask_question work_item=acme/api#42 session=s question_id=q1 title="Do you want to proceed?" reason=awaiting_approval`},
		{"remind_question", actions.RemindQuestion{Key: k, QuestionID: "q1"},
			`{"question_id":"q1","reason":"awaiting_approval","work_item":"acme/api#42"}`, ""},
		{"question_gone", actions.QuestionGone{Key: k, QuestionID: "q1"}, `{"question_id":"q1","work_item":"acme/api#42"}`, ""},
		{"answer_question", actions.AnswerQuestion{Key: k, Session: "s", PaneID: "%1", DeliveryID: "d-7", Sender: "alice",
			Question: desired.Question{ID: "q1", Choices: []string{"Yes", "No"}}, Choice: 2},
			`{"answer":"No","choice":2,"delivery":"d-7","pane_id":"%1","question_id":"q1","sender":"alice","session":"s","work_item":"acme/api#42"}`,
			"answer_question work_item=acme/api#42 session=s pane_id=%1 question_id=q1 delivery=d-7 sender=alice choice=2 answer=No"},
		{"refuse_answer", actions.RefuseAnswer{Key: k, DeliveryID: "d-8", Sender: "bob", QuestionID: "q1", Choice: 1, Reason: actions.ReasonQuestionGone},
			`{"choice":1,"delivery":"d-8","question_id":"q1","reason":"question_gone","sender":"bob","work_item":"acme/api#42"}`, ""},
		{"budget_exhaust", actions.BudgetExhaust{Key: k, Session: "s", Run: "r1", Used: 1100, Limit: 1000, Which: "total"},
			`{"budget_limit":1000,"budget_used":1100,"budget_which":"total","reason":"budget_exhausted","run":"r1","session":"s","work_item":"acme/api#42"}`,
			"budget_exhaust work_item=acme/api#42 session=s run=r1 budget_used=1100 budget_limit=1000 budget_which=total reason=budget_exhausted"},
		{"rest", actions.Rest{Key: k, Session: "s", Reason: actions.ReasonIdle},
			`{"reason":"idle","session":"s","work_item":"acme/api#42"}`, ""},
	}
}

// TestFieldsJSONCoversEveryAction: TestFieldsJSON has a case for every
// type of this package with a Fields method, so that a new action cannot
// slip past the typed JSON.
func TestFieldsJSONCoversEveryAction(t *testing.T) {
	pkgs, err := parser.ParseDir(token.NewFileSet(), ".", func(fi fs.FileInfo) bool { return !strings.HasSuffix(fi.Name(), "_test.go") }, 0)
	require.NoError(t, err)
	var withFields []string
	for _, p := range pkgs {
		for _, f := range p.Files {
			for _, d := range f.Decls {
				fn, ok := d.(*ast.FuncDecl)
				if !ok || fn.Name.Name != "Fields" || fn.Recv == nil {
					continue
				}
				if id, ok := fn.Recv.List[0].Type.(*ast.Ident); ok {
					withFields = append(withFields, id.Name)
				}
			}
		}
	}
	require.NotEmpty(t, withFields, "the scan finds the Fields methods")
	covered := map[string]bool{}
	for _, tc := range fieldCases() {
		covered[reflect.TypeOf(tc.a).Name()] = true
	}
	for _, name := range withFields {
		assert.True(t, covered[name], "TestFieldsJSON has no case for %s", name)
	}
}
