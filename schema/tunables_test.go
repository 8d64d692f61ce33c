package schema

import (
	"go/ast"
	"go/token"
	"path"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/loopd/loopd/internal/srctest"
)

// stayingDurations are the package-level durations that keep their home
// outside this package, each with why (defaults.go says the same).
var stayingDurations = map[string]string{
	"internal/journal.DefaultRepeatWindow": "schema imports journal",
	"internal/workspace.DefaultTimeout":    "schema imports workspace",
	"internal/sandbox.probeTimeout":        "schema imports sandbox",
	"internal/flock.lockPoll":              "a leaf package",
	"internal/tmux.stopPoll":               "a leaf package",
	"internal/webhook.DefaultServerLimits": "the HTTP server's limits, one contract of webhook",
	"store/sqlstore.busyTimeout":           "the backend's driver setting; only cmd wires config into it",
}

// TestDurationTunablesLiveHere holds every package-level constant or
// variable whose value is made of time's units (a named timeout, grace,
// poll or interval) in schema/defaults.go, but for stayingDurations: a
// tunable defined beside its use is a second home of the tunables.
func TestDurationTunablesLiveHere(t *testing.T) {
	var found []string
	seen := map[string]bool{}
	srctest.Walk(t, "..", func(file string, f *ast.File) {
		if strings.HasPrefix(file, "schema/") {
			return
		}
		for _, decl := range f.Decls {
			g, ok := decl.(*ast.GenDecl)
			if !ok || (g.Tok != token.CONST && g.Tok != token.VAR) {
				continue
			}
			for _, spec := range g.Specs {
				vs := spec.(*ast.ValueSpec)
				for i, v := range vs.Values {
					if !usesTimeUnit(v) {
						continue
					}
					name := path.Dir(file) + "." + vs.Names[min(i, len(vs.Names)-1)].Name
					seen[name] = true
					if _, ok := stayingDurations[name]; !ok {
						found = append(found, name+" ("+file+")")
					}
				}
			}
		}
	})
	assert.Empty(t, found, "duration tunables outside schema/defaults.go: move them there, with their unit and source")
	for name := range stayingDurations {
		assert.True(t, seen[name], "%s is listed as staying but is gone: take it off the list", name)
	}
}

// usesTimeUnit reports whether e names time.Nanosecond … time.Hour outside
// a function literal (a function's local arithmetic is not a tunable).
func usesTimeUnit(e ast.Expr) bool {
	var uses bool
	ast.Inspect(e, func(n ast.Node) bool {
		if _, ok := n.(*ast.FuncLit); ok {
			return false
		}
		if s, ok := n.(*ast.SelectorExpr); ok {
			if x, ok := s.X.(*ast.Ident); ok && x.Name == "time" {
				switch s.Sel.Name {
				case "Nanosecond", "Microsecond", "Millisecond", "Second", "Minute", "Hour":
					uses = true
				}
			}
		}
		return !uses
	})
	return uses
}
