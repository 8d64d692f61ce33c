#!/bin/sh
# gofmt-check: make check's formatting step. It lists the Go files under
# DIR (default: the current directory) that gofmt would change and exits 1
# when there is one. It reads the files on disk, not git's index, so a tree
# unpacked from a tarball (no .git) checks too. .tools (the npm installs of
# the real CLIs) and bin are left out.
set -eu
cd "${1:-.}"
out=$(find . \( -path ./.tools -o -path ./bin \) -prune -o -name '*.go' -type f -print0 | xargs -0 -r gofmt -l)
if [ -n "$out" ]; then
	echo "gofmt needed:"
	echo "$out"
	exit 1
fi
