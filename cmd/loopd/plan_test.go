package main

import (
	"bytes"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loopd/loopd/actions"
	"github.com/loopd/loopd/desired"
	"github.com/loopd/loopd/reconciler"
)

// TestPrintPlanTyped: the JSON and YAML dry run carry typed values (an
// signal as a number (a run a signal ended has no exit status), a flag as a boolean, a time as RFC
// 3339 in UTC, a duration as "30s"), for the actions and the GitHub calls
// alike; the text form is unchanged.
func TestPrintPlanTyped(t *testing.T) {
	k := desired.Key{Owner: "acme", Repo: "api", Number: 42}
	next := time.Date(2026, 5, 1, 14, 0, 7, 0, time.FixedZone("CEST", 2*3600))
	res := reconciler.PassResult{Plan: []actions.Action{
		actions.RecordExit{Key: k, Session: "loop-acme-api-42", ExitStatus: 0, Signal: 9, Phase: desired.PhaseBackingOff,
			Failures: 1, NextAttempt: next, Reason: actions.ReasonCrash},
		actions.Park{Key: k, Session: "loop-acme-api-42", PaneID: "%3", IdleFor: 30 * time.Second},
	}}
	calls := []desired.Call{{ID: 3, Key: k, Kind: desired.CallReact, Attempts: 2, NextAttempt: next, HTTPStatus: 502, Error: "Bad Gateway"}}

	var js bytes.Buffer
	require.NoError(t, printPlan(&js, "json", res, calls))
	assert.JSONEq(t, `[
	  {"action": "record_exit", "fields": {"work_item": "acme/api#42", "session": "loop-acme-api-42", "signal": 9,
	    "clean": false, "phase": "BackingOff", "failures": 1, "fast_failures": 0, "churn_failures": 0,
	    "next_attempt": "2026-05-01T12:00:07Z", "reason": "crash"}},
	  {"action": "park", "fields": {"work_item": "acme/api#42", "session": "loop-acme-api-42", "pane_id": "%3", "idle_for": "30s", "reason": "idle"}},
	  {"action": "github_call", "fields": {"work_item": "acme/api#42", "call": "react", "call_id": 3, "attempts": 2,
	    "next_attempt": "2026-05-01T12:00:07Z", "http_status": 502, "err": "Bad Gateway"}}
	]`, js.String())

	var ym bytes.Buffer
	require.NoError(t, printPlan(&ym, "yaml", res, calls))
	assert.YAMLEq(t, `
- action: record_exit
  fields: {work_item: "acme/api#42", session: loop-acme-api-42, signal: 9, clean: false, phase: BackingOff,
    failures: 1, fast_failures: 0, churn_failures: 0, next_attempt: "2026-05-01T12:00:07Z", reason: crash}
- action: park
  fields: {work_item: "acme/api#42", session: loop-acme-api-42, pane_id: "%3", idle_for: 30s, reason: idle}
- action: github_call
  fields: {work_item: "acme/api#42", call: react, call_id: 3, attempts: 2, next_attempt: "2026-05-01T12:00:07Z",
    http_status: 502, err: Bad Gateway}
`, ym.String())
	assert.Contains(t, ym.String(), "signal: 9\n", "a number, not a quoted string")
	assert.Contains(t, ym.String(), "clean: false\n", "a boolean, not a quoted string")

	var text bytes.Buffer
	require.NoError(t, printPlan(&text, "text", res, calls))
	assert.Equal(t, "record_exit work_item=acme/api#42 session=loop-acme-api-42 signal=9 clean=false phase=BackingOff failures=1 fast_failures=0 churn_failures=0 next_attempt=2026-05-01T12:00:07Z reason=crash\n"+
		"park work_item=acme/api#42 session=loop-acme-api-42 pane_id=%3 idle_for=30s reason=idle\n"+
		"github_call work_item=acme/api#42 call=react call_id=3 attempts=2 next_attempt=2026-05-01T12:00:07Z http_status=502 err=\"Bad Gateway\"\n", text.String())
}

// TestEmptyPlanSaysNoChanges: a dry run with nothing to do says so in
// text, and is an empty list in json and yaml.
func TestEmptyPlanSaysNoChanges(t *testing.T) {
	for format, want := range map[string]string{"text": "No changes.\n", "json": "[]\n", "yaml": "[]\n"} {
		var out bytes.Buffer
		require.NoError(t, printPlan(&out, format, reconciler.PassResult{}, nil))
		assert.Equal(t, want, out.String(), format)
	}
}
