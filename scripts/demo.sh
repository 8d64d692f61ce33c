#!/usr/bin/env bash
# demo: a real loopd serve on a private tmux server, fed signed real GitHub
# webhook payloads. It uses the fake Claude Code CLI (bin/fakeclaude) unless
# LOOPD_DEMO_CLAUDE names a real claude binary. Everything lives in a temp
# dir, which is removed at the end unless LOOPD_DEMO_KEEP=1. What it prints
# fits 100 columns: paths are relative to that dir, ids are cut to their
# first 8 digits, and longer lines are cut with "…".
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
loopd="$root/bin/loopd"
fixtures="$root/testdata/github-webhooks"
claude=${LOOPD_DEMO_CLAUDE:-$root/bin/fakeclaude}
port=${LOOPD_DEMO_PORT:-18787}
work=$(mktemp -d "${TMPDIR:-/tmp}/loopd-demo.XXXXXX")
socket="loopd-demo-$$"
export LOOPD_WEBHOOK_SECRET="demo-secret-$$"

say() { printf '\n\033[1m== %s\033[0m\n' "$(printf '%s\n' "$*" | fit 97)"; }
# die MESSAGE: the demo failed; say why and stop.
die() {
	printf '\n\033[1;31mDEMO FAILED: %s\033[0m\n' "$*" >&2
	exit 1
}

export LC_ALL=C.UTF-8
# wrap: the lines of stdin (space-separated fields, as logfmt) broken to
# fit 100 columns, each further line indented.
wrap() {
	fit 10000 | awk '{
		line = ""
		for (i = 1; i <= NF; i++) {
			if (line != "" && length(line) + 1 + length($i) > 100) { print line; line = "    " $i; continue }
			line = line == "" ? $i : line " " $i
		}
		print line
	}'
}
# fit [COLUMNS]: the lines of stdin made to fit COLUMNS (100): the demo's
# dir left out of paths, UUIDs cut to their first 8 digits, and what is
# still too long cut with "…".
fit() {
	sed -E -e "s|$work/||g" \
		-e 's/\b([0-9a-f]{8})-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b/\1…/g' \
		-e "s/^(.{$((${1:-100} - 1))}).+\$/\\1…/"
}

cleanup() {
	[ -n "${serve_pid:-}" ] && kill "$serve_pid" 2>/dev/null && wait "$serve_pid" 2>/dev/null || true
	tmux -L "$socket" kill-server 2>/dev/null || true
	# kill-server leaves the socket file, and serve's lock beside it.
	rm -f "${TMUX_TMPDIR:-/tmp}/tmux-$(id -u)/$socket" "${TMUX_TMPDIR:-/tmp}/tmux-$(id -u)/$socket".*
	if [ "${LOOPD_DEMO_KEEP:-0}" = 1 ]; then echo "kept $work"; return; fi
	# A hung-up Claude Code runs on for up to 150 ms, writing its config dir
	# (backups, telemetry) while rm walks it: try again for up to 5 s.
	for _ in $(seq 50); do
		rm -rf "$work" 2>/dev/null && return
		sleep 0.1
	done
	rm -rf "$work"
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
# How long a resumed agent must run before the resume counts: the fake CLI
# is up at once, the real one takes a moment.
probe=1
[ -n "${LOOPD_DEMO_CLAUDE:-}" ] && probe=2
cat > "$work/loopd.yaml" <<YAML
stateDir: $work/state
tmux:
  socket: $socket
reconcile:
  intervalSeconds: 1
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
        resumeProbeSeconds: $probe
        restartPolicy: OnFailure
YAML
cfg=(--config "$work/loopd.yaml")

# Each agent runs in a sandbox made with bubblewrap (sandbox.mode's default).
command -v bwrap >/dev/null 2>&1 ||
	die "the demo runs each agent in a sandbox made with bubblewrap, which is not installed: apt-get install bubblewrap"
echo "everything lives in $work; the paths below are relative to it"
say "harness: $claude"
"$loopd" config validate "${cfg[@]}" | fit

say "loopd serve on 127.0.0.1:$port, tmux -L $socket"
"$loopd" serve "${cfg[@]}" >"$work/serve.log" 2>&1 &
serve_pid=$!
for _ in $(seq 100); do
	grep -q 'msg=serve.listening' "$work/serve.log" && break
	kill -0 "$serve_pid" 2>/dev/null || { cat "$work/serve.log"; exit 1; }
	sleep 0.1
done
grep -q 'msg=serve.listening' "$work/serve.log" || { cat "$work/serve.log"; exit 1; }
echo "listening; log in serve.log"

# column FIELD [ITEM]: loopd get as a narrower table (WORK ITEM, PHASE, AGE,
# SESSION ID, PENDING, FAILURES, REASON: without HOST and SESSION), or,
# with FIELD, only that column of ITEM's line. Columns are cut where the
# header puts them, as phases and reasons may hold spaces.
column() {
	"$loopd" get --all "${cfg[@]}" | awk -v want="${1:-}" -v item="${2:-}" '
	function cell(line, name,    i, from, to) {
		from = pos[name]; to = 0
		for (i = 1; i <= n; i++) if (names[i] == name && i < n) to = pos[names[i + 1]]
		s = to ? substr(line, from, to - from) : substr(line, from)
		sub(/ +$/, "", s)
		return s
	}
	NR == 1 {
		n = split("WORK ITEM|HOST|SESSION|PHASE|AGE|SESSION ID|PENDING|FAILURES|REASON", names, "|")
		for (i = 1; i <= n; i++) {
			pos[names[i]] = index($0, names[i] (i == 3 ? " " : ""))
			if (!pos[names[i]]) { print "loopd get has no column " names[i] > "/dev/stderr"; exit 1 }
		}
		if (want == "") printf "%-25s %-21s %-4s %-12s %-7s %-8s %s\n", "WORK ITEM", "PHASE", "AGE", "SESSION ID", "PENDING", "FAILURES", "REASON"
		next
	}
	want != "" { if (cell($0, "WORK ITEM") == item) print cell($0, want); next }
	{
		# "…" is one column but three bytes, which printf counts.
		id = cell($0, "SESSION ID")
		id = length(id) > 8 ? sprintf("%s…   ", substr(id, 1, 8)) : sprintf("%-12s", id)
		printf "%-25s %-21s %-4s %s %-7s %-8s %s\n", cell($0, "WORK ITEM"), cell($0, "PHASE"), cell($0, "AGE"), id,
			cell($0, "PENDING"), cell($0, "FAILURES"), cell($0, "REASON")
	}' | if [ -n "${1:-}" ]; then cat; else fit; fi # a long reason is cut at 100 columns
}

# wait_for PATTERN: until loopd get prints a line matching PATTERN (15 s).
wait_for() {
	for _ in $(seq 150); do
		"$loopd" get --all "${cfg[@]}" 2>/dev/null | grep -Eq "$1" && return 0
		sleep 0.1
	done
	die "timed out waiting for loopd get to show: $1"
}

# wait_event NAME ITEM N: until ITEM's journal holds N events NAME (15 s).
wait_event() {
	for _ in $(seq 150); do
		[ "$("$loopd" events "${cfg[@]}" "$2" 2>/dev/null | grep -c " $1 ")" -ge "$3" ] && return 0
		sleep 0.1
	done
	die "timed out waiting for event $1 of $2"
}

# replay FIXTURE [ARGS]: loopd replay, its report without the file name,
# which the heading gives.
replay() {
	"$loopd" replay "${cfg[@]}" "$@" | sed 's/^[^ ]* //' | fit
}

one=Codertocat/Hello-World#1
say "issues.opened: $one starts a fresh conversation"
replay "$fixtures/issues.opened.1.json"
wait_for 'Hello-World#1 .* Running'

say "#1's agent works in a git worktree of the repository, on its own branch"
wt="$work/agents/Codertocat/Hello-World/1"
echo "$wt: branch $(git -C "$wt" branch --show-current), $(git -C "$wt" log --oneline -1)" | fit
git -C "$wt" worktree list | fit

say "issue_comment.created: pasted into the live conversation"
comment_id=$(cat /proc/sys/kernel/random/uuid)
replay --delivery-id "$comment_id" "$fixtures/issue_comment.created.1.json"
wait_for 'Hello-World#1 .* Running[^ ]* .* 0 '

say "the same delivery again (a GitHub redelivery): accepted, changes nothing"
replay --delivery-id "$comment_id" "$fixtures/issue_comment.created.1.json"

say "pull_request.opened: Codertocat/Hello-World#2 gets its own session"
replay "$fixtures/pull_request.opened.1.json"
wait_for 'Hello-World#2 .* Running'
wt2="$work/agents/Codertocat/Hello-World/2"
echo "$wt2: branch $(git -C "$wt2" branch --show-current), $(git -C "$wt2" log --oneline -1)" | fit
echo "(loopd get, here and below without its HOST and SESSION columns, ids cut to 8 digits)"
column
if "$loopd" get "${cfg[@]}" | grep -q 'reason=login_required'; then
	echo "blocked reason=login_required: not logged in is expected here: the demo runs offline"
fi

say "issues.opened #3: the host is full (capacity.maxLiveSessions: 2), so #3 is queued"
# The fixture of #1, renumbered: issue #3 of the same repository.
sed '12s/"number": 1,/"number": 3,/' "$fixtures/issues.opened.1.json" >"$work/issues.opened.3.json"
replay "$work/issues.opened.3.json"
wait_for 'Hello-World#3 .* Queued .*position=1'
column

say "a dry run (loopd reconcile --once --dry-run): what a pass would do now; it changes nothing"
"$loopd" reconcile --once --dry-run "${cfg[@]}" | wrap

say "kill -9 the agent of #1: loopd resumes the same conversation by itself (#3 stays queued)"
before=$(column "SESSION ID" "$one")
pid=$(tmux -L "$socket" list-panes -a -F '#{session_name} #{pane_pid}' | awk '/hello-world-1-/ {print $2; exit}')
kill -9 "$pid"
wait_event session.respawned "$one" 1
wait_for 'Hello-World#1 .* Running'
after=$(column "SESSION ID" "$one")
[ -n "$before" ] && [ "$before" = "$after" ] ||
	die "the conversation of #1 was '$before' before kill -9 and is '$after' after: not the same id"
"$loopd" events "${cfg[@]}" "$one" | grep -q " session.respawned .*harness_session_id=$before .*resumed=true" ||
	die "no session.respawned of #1 with resumed=true on $before"
column
printf '\033[1mconversation %s came back after kill -9 (same id)\033[0m\n' "$after"

say "pull_request.closed: #2's session is stopped, and its slot admits #3"
replay "$fixtures/pull_request.closed.1.json"
wait_for 'Hello-World#2 .* Stopped'
wait_for 'Hello-World#3 .* Running'
column

three=Codertocat/Hello-World#3
say "loopd hold $three: stopped on purpose, and never self-healed while held"
"$loopd" hold "${cfg[@]}" "$three" 2>&1 | fit
wait_event session.stopped "$three" 1
column

say "loopd release $three: it comes back on its own conversation"
held=$(column "SESSION ID" "$three")
"$loopd" release "${cfg[@]}" "$three" 2>&1 | fit
wait_event session.respawned "$three" 1
wait_for 'Hello-World#3 .* Running'
[ "$(column "SESSION ID" "$three")" = "$held" ] || die "#3 came back on another conversation than $held"
column

say "what the agent of #1 sees (tmux -L $socket capture-pane; its padding squeezed to fit)"
session=$(tmux -L "$socket" list-sessions -F '#{session_name}' | grep hello-world-1- | head -n1)
screen=$(tmux -L "$socket" capture-pane -p -t "=$session:")
# The TUI draws across the session's 200 columns: runs of padding and of
# rules are squeezed so that the screen fits 100.
printf '%s\n' "$screen" | sed '/^ *$/d' | sed -E -e 's/ {4,}/   /g' -e 's/─{8,}/────────/g' | tail -n 15 | fit
if printf '%s\n' "$screen" | grep -q 'Not logged in'; then
	echo "not logged in is expected here: the demo runs offline (README: Logging a harness in)"
else
	echo "The fake CLI answers like a logged-in one. The real one (LOOPD_DEMO_CLAUDE=<path>) says"
	echo "\"Not logged in\": not logged in is expected here: the demo runs offline."
fi

for n in 1 2 3; do
	say "transcript of Codertocat/Hello-World#$n (one JSON line per turn)"
	found=0
	for f in "$work"/claude/projects/*-Hello-World-"$n"/*.jsonl; do
		[ -e "$f" ] || continue
		found=1
		echo "$f: $(wc -l <"$f") lines" | fit
	done
	[ "$found" = 1 ] || echo "(none yet)"
done

say "loopd events $one (time, level, event, item, details)"
"$loopd" events "${cfg[@]}" "$one" | sed -E 's/^[0-9-]+T([0-9:]+)\.[0-9]+Z /\1 /' | fit
