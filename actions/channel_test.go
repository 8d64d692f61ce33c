package actions_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loopd/loopd/actions"
	"github.com/loopd/loopd/desired"
	"github.com/loopd/loopd/internal/channel"
	"github.com/loopd/loopd/internal/journal"
	"github.com/loopd/loopd/schema"
)

// Each spawn gets its item's channel (0700), a fresh token whose digest
// alone the status keeps, and, when its route hands out a credential,
// git's configuration naming loopd's credential helper for its
// repository's origin, and a gh that asks for a token at each run. The
// next spawn gets another token. The daemon is told the channel to listen
// on.
func TestSpawnGetsItsChannel(t *testing.T) {
	r := newRig(t)
	root := filepath.Join(t.TempDir(), "state", channel.RootName)
	r.exec.Channels = root
	creds := actions.AgentCredentials{Mode: schema.AgentCredentialsApp, URL: "https://github.example:8443/octo-org/api.git", GH: true}
	r.exec.Credentials = func(desired.Record) actions.AgentCredentials { return creds }
	bin := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(bin, "gh"), []byte("#!/bin/sh\n"), 0o755))
	r.exec.RunEnviron = []string{"PATH=" + bin + ":/usr/bin"}
	var opened []string
	r.exec.OpenChannel = func(k desired.Key, dir string) { opened = append(opened, k.String()+" "+dir) }
	rec := r.ingest(t, "d-1", "[loopd] issue_comment.created\nhello")

	res := r.exec.Execute(context.Background(), []desired.Record{rec}, []actions.Action{actions.FreshSpawn{Spawn: r.spawn(rec, rec.Pending[0])}})
	require.Equal(t, actions.Result{Applied: 1}, res)

	sess := desired.SessionName(r.key)
	env := r.launchEnv(t, sess)
	dir := channel.Dir(root, sess)
	assert.Equal(t, dir, env[channel.EnvDir])
	assert.Equal(t, r.key.String(), env[channel.EnvWorkItem])
	for _, d := range []string{root, dir} {
		info, err := os.Stat(d)
		require.NoError(t, err)
		assert.Equal(t, os.FileMode(0o700), info.Mode().Perm(), d)
	}
	token := env[channel.EnvToken]
	require.Len(t, token, 64)
	st := r.get(t).Status
	assert.Equal(t, channel.Digest(token), st.ChannelToken, "the status keeps the digest")
	assert.NotContains(t, st.ChannelToken, token)
	assert.Equal(t, []string{r.key.String() + " " + dir}, opened)

	origin := "https://github.example:8443"
	assert.Equal(t, "3", env["GIT_CONFIG_COUNT"])
	assert.Equal(t, "credential."+origin+".helper", env["GIT_CONFIG_KEY_0"])
	assert.Equal(t, "", env["GIT_CONFIG_VALUE_0"], "the operator's own helpers are reset")
	assert.Equal(t, "credential."+origin+".helper", env["GIT_CONFIG_KEY_1"])
	assert.Equal(t, "!'/opt/loopd' credential", env["GIT_CONFIG_VALUE_1"])
	assert.Equal(t, "credential."+origin+".useHttpPath", env["GIT_CONFIG_KEY_2"])
	assert.Equal(t, "true", env["GIT_CONFIG_VALUE_2"])

	// gh runs behind a wrapper that asks for a token at each run.
	assert.Equal(t, filepath.Join(dir, "bin")+":"+bin+":/usr/bin", env["PATH"])
	wrapper, err := os.ReadFile(filepath.Join(dir, "bin", "gh"))
	require.NoError(t, err)
	assert.Contains(t, string(wrapper), "'/opt/loopd' credential token")
	assert.Contains(t, string(wrapper), `GH_ENTERPRISE_TOKEN="$t" GH_HOST='github.example:8443'`)
	assert.Contains(t, string(wrapper), "exec '"+filepath.Join(bin, "gh")+"' \"$@\"")
	assert.NotContains(t, string(wrapper), token, "no token on disk")

	// The next spawn, a route that hands out nothing: a new token, no git
	// configuration.
	creds = actions.AgentCredentials{Mode: schema.AgentCredentialsNone}
	rec = r.get(t)
	rec.Status.Phase = desired.PhaseExited
	res = r.exec.Execute(context.Background(), []desired.Record{rec}, []actions.Action{actions.FreshSpawn{Spawn: r.spawn(rec, rec.Pending[0])}})
	require.Equal(t, actions.Result{Applied: 1}, res)
	next := r.launchEnv(t, sess)
	assert.NotEqual(t, token, next[channel.EnvToken])
	assert.Equal(t, channel.Digest(next[channel.EnvToken]), r.get(t).Status.ChannelToken)
	for k := range next {
		assert.False(t, strings.HasPrefix(k, "GIT_CONFIG"), k)
	}
	assert.NotContains(t, next, "PATH")
}

// A report taken is recorded as the item's and its file removed; one
// refused is journaled as a failure (the limiter folds a flood of them)
// and removed, and nothing else changes.
func TestReportsTakenAndRefused(t *testing.T) {
	r := newRig(t)
	root := filepath.Join(t.TempDir(), channel.RootName)
	r.exec.Channels = root
	rec := r.ingest(t, "d-1", "[loopd] issue_comment.created\nhello")
	sess := desired.SessionName(r.key)
	dir, err := channel.Prepare(root, sess)
	require.NoError(t, err)
	for _, item := range []string{r.key.String(), "octo-org/api#8"} {
		require.NoError(t, channel.WriteReport(dir, item, "tok", []byte(`{"session_id":"x","source":"clear"}`), r.now))
	}
	files, err := channel.ReadReports(dir, 16)
	require.NoError(t, err)
	require.Len(t, files, 2)
	before := r.get(t).Status

	rep := desired.SessionReport{SessionID: "9a9a9a9a-1b4d-4c8e-9f00-0123456789ab", Source: "clear", At: r.now}
	res := r.exec.Execute(context.Background(), []desired.Record{rec}, []actions.Action{
		actions.TakeReport{Key: r.key, Session: sess, File: files[0].Name, Report: rep},
		actions.RefuseReport{Key: r.key, Session: sess, File: files[1].Name, Reason: actions.ReasonWrongWorkItem, Detail: "the report names octo-org/api#8", SessionID: "x", Source: "clear"},
	})
	require.Equal(t, actions.Result{Applied: 2}, res)

	got := r.get(t)
	require.NotNil(t, got.Report)
	assert.Equal(t, rep.SessionID, got.Report.SessionID)
	assert.Equal(t, before, got.Status, "the status is untouched")
	left, err := channel.ReadReports(dir, 16)
	require.NoError(t, err)
	assert.Empty(t, left, "both files are gone")
	require.Len(t, r.named(t, journal.SessionReported), 1)
	rejected := r.named(t, journal.SessionReportRejected)
	require.Len(t, rejected, 1)
	assert.Equal(t, "wrong_work_item", rejected[0].Attrs["reason"])
	assert.Equal(t, "x", rejected[0].Attrs["attempted_session_id"])
	assert.NotEmpty(t, rejected[0].Attrs["err"], "a failure, for the limiter")
}
