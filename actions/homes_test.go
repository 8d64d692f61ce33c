package actions_test

import (
	"go/ast"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/loopd/loopd/internal/srctest"
)

// usesIn returns, for each use of the selector sel (pkg.Name) in the
// package's non-test files, the function it is in ("" at package level).
func usesIn(t *testing.T, sel string) []string {
	t.Helper()
	var funcs []string
	for _, f := range srctest.Package(t, ".") {
		funcs = append(funcs, uses(f, sel)...)
	}
	return funcs
}

// uses returns, for each use of the selector sel (pkg.Name) in f, the
// function it is in ("" at package level).
func uses(f *ast.File, sel string) []string {
	pkg, name, _ := strings.Cut(sel, ".")
	var funcs []string
	for _, decl := range f.Decls {
		fn, _ := decl.(*ast.FuncDecl)
		ast.Inspect(decl, func(n ast.Node) bool {
			s, ok := n.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			if x, ok := s.X.(*ast.Ident); ok && x.Name == pkg && s.Sel.Name == name {
				in := ""
				if fn != nil {
					in = fn.Name.Name
				}
				funcs = append(funcs, in)
			}
			return true
		})
	}
	return funcs
}

// TestDeliveredIsJournaledWhereItIsMarked: dispatch.delivered is journaled
// in one place, the status write that marks a delivery (putDelivered), so
// that no action can mark one without the line, or write the line twice.
func TestDeliveredIsJournaledWhereItIsMarked(t *testing.T) {
	assert.Equal(t, []string{"putDelivered"}, usesIn(t, "journal.DispatchDelivered"))
}

// TestWorkItemEnvHasOneWriter: LOOPD_WORK_ITEM is set for a spawn in one
// place, harnessEnv (both runners' spawns take their environment from
// it), and read by the SessionStart hook alone.
func TestWorkItemEnvHasOneWriter(t *testing.T) {
	var at []string
	srctest.Walk(t, "..", func(file string, f *ast.File) {
		for _, fn := range uses(f, "channel.EnvWorkItem") {
			at = append(at, file+" "+fn)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			if lit, ok := n.(*ast.BasicLit); ok && lit.Value == `"LOOPD_WORK_ITEM"` && file != "internal/channel/channel.go" {
				at = append(at, file+" spells it")
			}
			return true
		})
	})
	assert.Equal(t, []string{"actions/channel.go harnessEnv", "internal/harness/sessionstart.go ReportSessionStart"}, at)
}
