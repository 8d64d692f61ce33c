#!/usr/bin/env bash
# claude-start: what N real Claude Code starts at once cost, offline
# (docs/performance.md, "A real CLI's start"). Each gets an onboarded,
# trusted HOME of its own and resumes a hand-made one-line transcript, so
# that its TUI stays up; all N start at once in panes of one private tmux
# server, and each pane's process is sampled for 6 s: seconds since the
# start, pid, CPU ticks (utime + stime), RSS in kB. It prints, per pid,
# the CPU time by 1, 2 and 3 s and at the end, and the peak RSS.
#
#   CLAUDE=.tools/claude-code/node_modules/@anthropic-ai/claude-code/bin/claude.exe scripts/claude-start.sh 4
set -euo pipefail
n=${1:?usage: $0 N   (CLAUDE=path of the claude executable)}
claude=$(realpath "${CLAUDE:?set CLAUDE to the claude executable}")
dir=$(mktemp -d "${TMPDIR:-/tmp}/claude-start.XXXXXX")
sock=claude-start-$$
trap 'tmux -L "$sock" kill-server 2>/dev/null || true; rm -rf "$dir"' EXIT
tck=$(getconf CLK_TCK)
tmux -L "$sock" -f /dev/null start-server \; set -g remain-on-exit on
for i in $(seq 1 "$n"); do
	home=$dir/home$i work=$dir/work$i
	mkdir -p "$home" "$work"
	id=$(cat /proc/sys/kernel/random/uuid)
	project=$home/.claude/projects/$(printf %s "$work" | sed 's/[^a-zA-Z0-9]/-/g')
	mkdir -p "$project"
	printf '{"type":"user","message":{"role":"user","content":"hi"},"uuid":"%s","timestamp":"2026-01-01T00:00:00.000Z"}\n' \
		"$(cat /proc/sys/kernel/random/uuid)" >"$project/$id.jsonl"
	printf '{"hasCompletedOnboarding":true,"projects":{"%s":{"hasTrustDialogAccepted":true}}}' "$work" >"$home/.claude.json"
	tmux -L "$sock" new-session -d -s "s$i" -x 200 -y 50 -c "$work" \
		"exec env -i HOME=$home PATH=/usr/bin:/bin TERM=xterm-256color LANG=C.UTF-8 DISABLE_AUTOUPDATER=1 $claude --resume $id hello"
done
t0=$(date +%s.%N)
pids=$(tmux -L "$sock" list-panes -a -F '#{pane_pid}')
end=$(echo "$t0 + 6" | bc)
while [ "$(echo "$(date +%s.%N) < $end" | bc)" = 1 ]; do
	for p in $pids; do
		[ -r "/proc/$p/stat" ] || continue
		read -r -a f < <(sed 's/.*) //' "/proc/$p/stat")
		rss=$(awk '/VmRSS/{print $2}' "/proc/$p/status" 2>/dev/null || true)
		echo "$(echo "$(date +%s.%N) - $t0" | bc) $p $((f[11] + f[12])) ${rss:-0}"
	done
	sleep 0.1
done | awk -v tck="$tck" '
	{ if ($1 <= 1.05) c1[$2] = $3; if ($1 <= 2.05) c2[$2] = $3; if ($1 <= 3.05) c3[$2] = $3; c[$2] = $3; t[$2] = $1
	  if ($4 > m[$2]) m[$2] = $4 }
	END { for (p in m) printf "pid %s cpu by 1 s %.2f, 2 s %.2f, 3 s %.2f, %.1f s %.2f; peak RSS %d MB\n",
		p, c1[p]/tck, c2[p]/tck, c3[p]/tck, t[p], c[p]/tck, m[p]/1024 }'
