#!/usr/bin/env bash
# cpuhog: runs a command beside N busy processes (LOOPD_HOG, default 2),
# each spinning one core, so that a test run sees the loaded machine that
# flaky timing assumptions break on. The hogs stop when the command ends,
# and on ^C, SIGTERM or SIGHUP, which also stop the command; the script
# exits with the command's status (128+signal when a signal stopped it).
#
#   scripts/cpuhog.sh make check
#   LOOPD_HOG=3 scripts/cpuhog.sh go test ./e2e -run '^TestRespawnBackoffGrows$' -count=20
set -euo pipefail
if [ $# -eq 0 ]; then
	echo "usage: $0 command [arg...]   (LOOPD_HOG=N busy processes, default 2)" >&2
	exit 2
fi
n=${LOOPD_HOG:-2}
case $n in
'' | *[!0-9]*)
	echo "cpuhog: LOOPD_HOG must be a number of processes, not '$n'" >&2
	exit 2
	;;
esac

hogs=()
cmd=
stop() {
	# The hogs by their pids, each one this script started.
	if [ ${#hogs[@]} -gt 0 ]; then
		kill "${hogs[@]}" 2>/dev/null || true
		wait "${hogs[@]}" 2>/dev/null || true
	fi
	hogs=()
}
on_signal() {
	local sig=$1 code=$2
	trap - INT TERM HUP
	if [ -n "$cmd" ]; then
		# To its whole process group, as a terminal's ^C reaches a
		# foreground job: go test passes it on to the test binary.
		kill "-$sig" -- "-$cmd" 2>/dev/null || true
		wait "$cmd" 2>/dev/null || true
	fi
	stop
	exit "$code"
}
trap stop EXIT
trap 'on_signal INT 130' INT
trap 'on_signal TERM 143' TERM
trap 'on_signal HUP 129' HUP

for ((i = 0; i < n; i++)); do
	# A subshell that only spins: no fork per turn, so it loads one core.
	(
		trap - INT TERM HUP EXIT
		while :; do :; done
	) &
	hogs+=($!)
done
echo "cpuhog: ${#hogs[@]} busy processes (pids ${hogs[*]}) beside: $*" >&2

# In the background, so that the traps run while it runs, as a job of its
# own (set -m): a process group of its own, which the traps signal, and
# SIGINT not ignored, as it is for a background command without job control.
set -m
"$@" &
cmd=$!
status=0
wait "$cmd" || status=$?
cmd=
exit "$status"
