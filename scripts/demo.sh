#!/usr/bin/env bash
# demo: a real loopd serve on a private tmux server, fed signed real GitHub
# webhook payloads. It uses the fake Claude Code CLI (bin/fakeclaude) unless
# LOOPD_DEMO_CLAUDE names a real claude binary. Everything lives in a temp
# dir, which is removed at the end unless LOOPD_DEMO_KEEP=1.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
loopd="$root/bin/loopd"
fixtures="$root/testdata/github-webhooks"
claude=${LOOPD_DEMO_CLAUDE:-$root/bin/fakeclaude}
port=${LOOPD_DEMO_PORT:-18787}
work=$(mktemp -d "${TMPDIR:-/tmp}/loopd-demo.XXXXXX")
socket="loopd-demo-$$"
export LOOPD_WEBHOOK_SECRET="demo-secret-$$"

say() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

cleanup() {
	[ -n "${serve_pid:-}" ] && kill "$serve_pid" 2>/dev/null && wait "$serve_pid" 2>/dev/null || true
	tmux -L "$socket" kill-server 2>/dev/null || true
	if [ "${LOOPD_DEMO_KEEP:-0}" = 1 ]; then echo "kept $work"; else rm -rf "$work"; fi
}
trap cleanup EXIT

mkdir -p "$work/agents" "$work/claude"
# The repository the agents work on: a local bare repository with a default
# branch "main" and the branch "changes" of pull request #2 (the fixture's
# head), made here so the demo needs no network.
git init -q --bare --initial-branch=main "$work/remote.git"
git init -q --initial-branch=main "$work/seed"
echo "Hello World" > "$work/seed/README"
gitc() { git -C "$work/seed" -c user.name=demo -c user.email=demo@example.com "$@"; }
gitc add README && gitc commit -qm "initial commit"
gitc checkout -qb changes && echo "a change" > "$work/seed/CHANGES" && gitc add CHANGES && gitc commit -qm "the pull request's change"
gitc push -q "$work/remote.git" main changes
# The Claude config dir starts empty: loopd provisions it before each spawn
# (onboarding done, the workdir trusted, the auto-updater off).
cat > "$work/loopd.yaml" <<YAML
stateDir: $work/state
tmux:
  socket: $socket
reconcile:
  intervalSeconds: 2
capacity:
  maxLiveSessions: 2
harnesses:
  claude-code:
    command: $claude
    env:
      CLAUDE_CONFIG_DIR: $work/claude
webhooks:
  ghWebhook:
    listen: 127.0.0.1:$port
    path: /webhook
    secretEnv: LOOPD_WEBHOOK_SECRET
    authorizedUsers: [Codertocat]
    routing:
      repos:
        "Codertocat/*":
          harness: claude-code
          workdir: "$work/agents/{{.Owner}}/{{.Repo}}/{{.Number}}"
          checkout:
            url: "file://$work/remote.git"
      tmux:
        resumeOnRespawn: true
        resumeProbeSeconds: 2
        restartPolicy: OnFailure
YAML
cfg=(--config "$work/loopd.yaml")

say "harness: $claude"
"$loopd" config validate "${cfg[@]}"

say "loopd serve on 127.0.0.1:$port, tmux -L $socket"
"$loopd" serve "${cfg[@]}" >"$work/serve.log" 2>&1 &
serve_pid=$!
for _ in $(seq 100); do
	grep -q 'msg=serve.listening' "$work/serve.log" && break
	kill -0 "$serve_pid" 2>/dev/null || { cat "$work/serve.log"; exit 1; }
	sleep 0.1
done
grep -q 'msg=serve.listening' "$work/serve.log" || { cat "$work/serve.log"; exit 1; }
echo "listening; log in $work/serve.log"

# wait_for PATTERN: until loopd get prints a line matching PATTERN (15 s).
wait_for() {
	for _ in $(seq 150); do
		"$loopd" get --all "${cfg[@]}" 2>/dev/null | grep -Eq "$1" && return 0
		sleep 0.1
	done
	echo "timed out waiting for: $1" >&2
	return 1
}

say "issues.opened: Codertocat/Hello-World#1 starts a fresh conversation"
"$loopd" replay "${cfg[@]}" "$fixtures/issues.opened.1.json"
wait_for 'Hello-World#1 .* Running'

say "#1's agent works in a git worktree of the repository, on its own branch"
wt="$work/agents/Codertocat/Hello-World/1"
echo "$wt: branch $(git -C "$wt" branch --show-current), $(git -C "$wt" log --oneline -1)"
git -C "$wt" worktree list

say "issue_comment.created: pasted into the live conversation"
comment_id=$(cat /proc/sys/kernel/random/uuid)
"$loopd" replay "${cfg[@]}" --delivery-id "$comment_id" "$fixtures/issue_comment.created.1.json"
wait_for 'Hello-World#1 .* Running .* 0 '

say "the same delivery again (a GitHub redelivery): accepted, changes nothing"
"$loopd" replay "${cfg[@]}" --delivery-id "$comment_id" "$fixtures/issue_comment.created.1.json"

say "pull_request.opened: Codertocat/Hello-World#2 gets its own session"
"$loopd" replay "${cfg[@]}" "$fixtures/pull_request.opened.1.json"
wait_for 'Hello-World#2 .* Running'
wt2="$work/agents/Codertocat/Hello-World/2"
echo "$wt2: branch $(git -C "$wt2" branch --show-current), $(git -C "$wt2" log --oneline -1)"
"$loopd" get "${cfg[@]}"

say "issues.opened #3: the host is full (capacity.maxLiveSessions: 2), so #3 is queued"
# The fixture of #1, renumbered: issue #3 of the same repository.
sed '12s/"number": 1,/"number": 3,/' "$fixtures/issues.opened.1.json" >"$work/issues.opened.3.json"
"$loopd" replay "${cfg[@]}" "$work/issues.opened.3.json"
wait_for 'Hello-World#3 .* Queued .*position=1'
"$loopd" get "${cfg[@]}"

say "kill -9 the agent of #1: loopd resumes the same conversation by itself, in its own slot (#3 stays queued)"
pid=$(tmux -L "$socket" list-panes -a -F '#{session_name} #{pane_pid}' | awk '/hello-world-1/ {print $2; exit}')
kill -9 "$pid"
sleep 1
wait_for 'Hello-World#1 .* Running'
"$loopd" get "${cfg[@]}"

say "pull_request.closed: #2's session is stopped, and its slot admits #3"
"$loopd" replay "${cfg[@]}" "$fixtures/pull_request.closed.1.json"
wait_for 'Hello-World#2 .* Stopped'
wait_for 'Hello-World#3 .* Running'
"$loopd" get "${cfg[@]}"

say "what the agent of #1 sees (tmux -L $socket capture-pane)"
session=$(tmux -L "$socket" list-sessions -F '#{session_name}' | grep hello-world-1 | head -n1)
tmux -L "$socket" capture-pane -p -t "=$session:" | sed '/^$/d' | tail -n 15

say "transcript of #1 (one line per turn)"
find "$work/claude/projects" -name '*.jsonl' -path '*1*' -exec sh -c 'echo "$1: $(wc -l <"$1") lines"' _ {} \;

say "loopd get"
"$loopd" get "${cfg[@]}"
say "loopd events"
"$loopd" events "${cfg[@]}"
