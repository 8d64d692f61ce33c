# loopd — see README.md.
GO            ?= go
BIN           := bin
CLAUDE_VERSION := 2.1.197
CLAUDE_DIR    := .tools/claude-code
CLAUDE_BIN    := $(CLAUDE_DIR)/node_modules/.bin/claude
# TESTDATA_PKGS are the Go packages under testdata, which ./... leaves out.
TESTDATA_PKGS := ./testdata/fakeclaude ./testdata/faketerm

# The end-to-end tests use the real Claude Code CLI when it is installed
# here (make claude); they fall back to the fake harness otherwise.
export LOOPD_REAL_CLAUDE ?= $(if $(wildcard $(CLAUDE_BIN)),$(abspath $(CLAUDE_BIN)),)

.PHONY: build test check bench demo claude clean

build:
	$(GO) build -o $(BIN)/loopd ./cmd/loopd
	$(GO) build -o $(BIN)/fakeclaude ./testdata/fakeclaude

test:
	$(GO) test -count=1 ./... $(TESTDATA_PKGS)

check:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./... $(TESTDATA_PKGS)
	$(MAKE) test

bench:
	$(GO) test -run '^$$' -bench . -benchmem ./reconciler ./internal/tmux ./observed ./desired ./internal/webhook ./internal/workspace
	$(GO) test -run '^$$' -bench ServerLoss -benchtime 3x ./e2e
	$(GO) test -run '^$$' -bench 'KillToRespawn|AcceptedToVerified' -benchtime 20x ./e2e

demo: build
	./scripts/demo.sh

# claude installs the pinned Claude Code CLI from the npm registry into
# $(CLAUDE_DIR) (about 245 MB).
claude: $(CLAUDE_BIN)

$(CLAUDE_BIN):
	npm install --prefix $(CLAUDE_DIR) --no-audit --no-fund @anthropic-ai/claude-code@$(CLAUDE_VERSION)

clean:
	rm -rf $(BIN)
