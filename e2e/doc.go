// Package e2e holds the end-to-end tests of loopd. They build the real
// loopd binary and the fake Claude Code CLI (testdata/fakeclaude) once, run
// `loopd serve` as a subprocess on a private tmux server (a unique -L socket
// per test), feed it signed real GitHub webhook payloads over HTTP, and
// assert the end state: store records, journal events, the argv each agent
// process started with, transcript contents and tmux sessions.
//
// The tests that drive the real Claude Code CLI run only when
// LOOPD_REAL_CLAUDE names its executable; the others need tmux and a Go
// toolchain. The chaos suite (TestChaos…, docs/chaos.md) runs only when
// LOOPD_CHAOS is short or long (make chaos-short, make chaos). Run them with:
//
//	go test ./e2e/
package e2e
