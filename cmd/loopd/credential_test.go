package main

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loopd/loopd/internal/channel"
)

// serveChannel answers on the channel dir with handle until the test ends.
func serveChannel(t *testing.T, dir string, handle channel.Handler) {
	t.Helper()
	ln, err := channel.Listen(dir)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		channel.Serve(ctx, ln, handle, slog.New(slog.DiscardHandler))
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
}

// The credential helper runs where a sandboxed agent does (no config, no
// store): it passes git's request and its spawn's token over the channel
// and prints git's answer; a refusal or no daemon makes git stop
// (quit=1), saying why on stderr; store and erase do nothing.
func TestCredentialHelper(t *testing.T) {
	dir, token := agentEnv(t, "octo-org/api#3")
	expires := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	var got []channel.Request
	serveChannel(t, dir, func(_ context.Context, req channel.Request) channel.Answer {
		got = append(got, req)
		if req.Path != "octo-org/api.git" && req.Op == channel.OpGit {
			return channel.Answer{Refused: "other_repository: another repository"}
		}
		return channel.Answer{Username: "x-access-token", Password: "ghs_scoped", Expires: expires}
	})

	out, err := run(t, "protocol=https\nhost=github.com\npath=octo-org/api.git\n\n", "credential", "get")
	require.NoError(t, err)
	assert.Equal(t, "username=x-access-token\npassword=ghs_scoped\npassword_expiry_utc=1893553445\n", out)
	require.Len(t, got, 1)
	assert.Equal(t, channel.Request{Token: token, Op: channel.OpGit, Protocol: "https", Host: "github.com", Path: "octo-org/api.git"}, got[0])

	out, err = run(t, "protocol=https\nhost=github.com\npath=octo-org/other.git\n\n", "credential", "get")
	require.NoError(t, err)
	assert.Contains(t, out, "quit=1\n")
	assert.Contains(t, out, "loopd refused: other_repository")
	assert.NotContains(t, out, "password=")

	out, err = run(t, "", "credential", "token")
	require.NoError(t, err)
	assert.Equal(t, "ghs_scoped\n", out)

	out, err = run(t, "protocol=https\nhost=github.com\n\n", "credential", "store")
	require.NoError(t, err)
	assert.Empty(t, out)
	assert.Len(t, got, 3, "store asks nothing")

	// No daemon: nothing listens on a fresh channel.
	agentEnv(t, "octo-org/api#3")
	out, err = run(t, "protocol=https\nhost=github.com\npath=octo-org/api.git\n\n", "credential", "get")
	require.NoError(t, err)
	assert.Contains(t, out, "quit=1\n")
	assert.Contains(t, out, "loopd serve only")
	_, err = run(t, "", "credential", "token")
	require.ErrorIs(t, err, channel.ErrNoDaemon)
}
