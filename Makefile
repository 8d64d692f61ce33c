# loopd — see README.md.
GO            ?= go
BIN           := bin
CLAUDE_VERSION := 2.1.197
CLAUDE_DIR    := .tools/claude-code
CLAUDE_BIN    := $(CLAUDE_DIR)/node_modules/.bin/claude
CODEX_VERSION := 0.171.0
CODEX_DIR     := .tools/codex
CODEX_BIN     := $(CODEX_DIR)/node_modules/.bin/codex
GEMINI_VERSION := 0.61.0
GEMINI_DIR    := .tools/gemini
GEMINI_BIN    := $(GEMINI_DIR)/node_modules/.bin/gemini
# TESTDATA_PKGS are the Go packages under testdata, which ./... leaves out.
TESTDATA_PKGS := ./testdata/fakeclaude ./testdata/faketerm ./testdata/fakecodex ./testdata/fakegemini ./testdata/fakecli ./testdata/fakecli/fakeclitest

# The end-to-end tests use the real Claude Code CLI when it is installed
# here (make claude); they fall back to the fake harness otherwise.
export LOOPD_REAL_CLAUDE ?= $(if $(wildcard $(CLAUDE_BIN)),$(abspath $(CLAUDE_BIN)),)
# The real Codex CLI, when installed here (make codex); its tests are
# skipped otherwise.
export LOOPD_REAL_CODEX ?= $(if $(wildcard $(CODEX_BIN)),$(abspath $(CODEX_BIN)),)
# The real Gemini CLI, when installed here (make gemini); its tests are
# skipped otherwise.
export LOOPD_REAL_GEMINI ?= $(if $(wildcard $(GEMINI_BIN)),$(abspath $(GEMINI_BIN)),)

# FUZZ_TARGETS are the Go fuzz targets, package:Name; make fuzz runs each
# for FUZZTIME (CI: 20s). Their seeds are in the code (f.Add) and in each
# package's testdata/fuzz/<Name>, where go test -fuzz writes a failing
# input and plain go test replays it.
FUZZ_TARGETS := ./internal/webhook:FuzzHandler ./internal/webhook:FuzzSanitize ./desired:FuzzSessionName \
	./internal/tmux:FuzzParseListPanes ./internal/harness:FuzzTranscriptReaders ./schema:FuzzParse
FUZZTIME ?= 10m

# VERSION and COMMIT are stamped into loopd (loopd version): the nearest
# tag with the commits since it, and the commit, each "-dirty" from a
# modified tree. Outside a git checkout (a tarball) they are empty, and
# loopd reports what the go command recorded; give them by hand there.
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null)
COMMIT  ?= $(shell { git rev-parse --short=12 HEAD && { git diff --quiet HEAD || echo -dirty; }; } 2>/dev/null | tr -d '\n')
# LDFLAGS is expanded where it is used (=, as VERSION and COMMIT are by
# ?=), so git runs for build and install only, not each time make reads
# this file (the sub-makes of check included).
LDFLAGS  = -X main.version=$(VERSION) -X main.commit=$(COMMIT)
# install puts loopd in $(PREFIX)/bin when PREFIX is given (make install
# PREFIX=/usr/local), else where go install puts binaries: $(GOBIN), or
# $(go env GOPATH)/bin.
PREFIX  ?=

build:
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN)/loopd ./cmd/loopd
	$(GO) build -o $(BIN)/fakeclaude ./testdata/fakeclaude
	$(GO) build -o $(BIN)/fakecodex ./testdata/fakecodex
	$(GO) build -o $(BIN)/fakegemini ./testdata/fakegemini

install:
ifeq ($(PREFIX),)
	$(GO) install -ldflags "$(LDFLAGS)" ./cmd/loopd
	@echo "installed $$(d=$$($(GO) env GOBIN); [ -n "$$d" ] || d=$$($(GO) env GOPATH)/bin; echo $$d)/loopd"
else
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN)/loopd ./cmd/loopd
	install -D -m 0755 $(BIN)/loopd $(DESTDIR)$(PREFIX)/bin/loopd
	@echo "installed $(DESTDIR)$(PREFIX)/bin/loopd"
endif

# test gives each package's binary 30 minutes, not go test's 10: beside
# busy processes the e2e package alone has taken more than 10.
test:
	$(GO) test -count=1 -timeout 30m ./... $(TESTDATA_PKGS)

check:
	@./scripts/gofmt-check.sh
	$(GO) vet ./... $(TESTDATA_PKGS)
	$(MAKE) test
	$(MAKE) chaos-short
	$(MAKE) fuzz FUZZTIME=20s

bench:
	$(GO) test -run '^$$' -bench BacklogRSS -benchtime 1x ./e2e
	$(GO) test -run '^$$' -bench . -benchmem ./reconciler ./internal/tmux ./observed ./desired ./store/sqlstore ./internal/webhook ./internal/workspace
	$(GO) test -run '^$$' -bench ServerLoss -benchtime 3x ./e2e
	$(GO) test -run '^$$' -bench FleetTakeover -benchtime 3x ./e2e
	$(GO) test -run '^$$' -bench 'KillToRespawn|AcceptedToVerified' -benchtime 20x ./e2e

fuzz:
	@for t in $(FUZZ_TARGETS); do \
		echo "fuzz $${t##*:} ($${t%%:*}) for $(FUZZTIME)"; \
		$(GO) test -run '^$$' -fuzz "^$${t##*:}\$$" -fuzztime $(FUZZTIME) "$${t%%:*}" || exit 1; \
	done

# chaos is the chaos suite's long run (docs/chaos.md): 20 items, 1,000
# signed deliveries, 100 daemon SIGKILLs, agent SIGKILLs, one tmux server
# kill, then the store faults. LOOPD_CHAOS_SEED=<n> replays a run's random
# moments. chaos-short is CI's scaled-down run (about 2 min).
chaos:
	LOOPD_CHAOS=long $(GO) test -count=1 -v -timeout 30m -run '^TestChaos' ./e2e

chaos-short:
	LOOPD_CHAOS=short $(GO) test -count=1 -v -timeout 10m -run '^TestChaos' ./e2e

# demo says so before it builds: a cold build compiles SQLite and prints
# nothing for minutes.
demo:
	@echo "demo: building loopd and the fake CLI first (a cold build takes a few minutes)"
	@$(MAKE) --no-print-directory build
	./scripts/demo.sh

# claude installs the pinned Claude Code CLI from the npm registry into
# $(CLAUDE_DIR) (about 245 MB).
claude: $(CLAUDE_BIN)

$(CLAUDE_BIN):
	npm install --prefix $(CLAUDE_DIR) --no-audit --no-fund @anthropic-ai/claude-code@$(CLAUDE_VERSION)

# codex installs the pinned Codex CLI from the npm registry into
# $(CODEX_DIR) (about 320 MB: a Node launcher and its native binary).
codex: $(CODEX_BIN)

$(CODEX_BIN):
	npm install --prefix $(CODEX_DIR) --no-audit --no-fund @openai/codex@$(CODEX_VERSION)
# gemini installs the pinned Gemini CLI from the npm registry into
# $(GEMINI_DIR) (about 100 MB).
gemini: $(GEMINI_BIN)

$(GEMINI_BIN):
	npm install --prefix $(GEMINI_DIR) --no-audit --no-fund @google/gemini-cli@$(GEMINI_VERSION)

clean:
	rm -rf $(BIN)
