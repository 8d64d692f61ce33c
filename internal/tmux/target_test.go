package tmux_test

import (
	"go/ast"
	"go/token"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loopd/loopd/internal/srctest"
	"github.com/loopd/loopd/internal/tmux"
)

func TestTarget(t *testing.T) {
	assert.Equal(t, "=loop-acme-api-1:", tmux.Target("loop-acme-api-1"))
	require.NoError(t, tmux.CheckTarget(tmux.Target("loop-acme-api-1")))
}

// TestTargetIsTheOneSpelling: outside tests, test support and the fakes, a
// session's exact pane target is made by tmux.Target, never by hand
// ("=" + name + ":"), so that every part reaches the same pane. The
// exactness itself is the conformance suite's (tmuxtest, exactTargets).
func TestTargetIsTheOneSpelling(t *testing.T) {
	var byHand []string
	srctest.Walk(t, filepath.Join("..", ".."), func(file string, f *ast.File) {
		for _, decl := range f.Decls {
			if fn, ok := decl.(*ast.FuncDecl); ok && fn.Name.Name == "Target" && fn.Recv == nil && file == "internal/tmux/check.go" {
				continue
			}
			ast.Inspect(decl, func(n ast.Node) bool {
				b, ok := n.(*ast.BinaryExpr)
				if !ok || b.Op != token.ADD {
					return true
				}
				if isLit(b.Y, ":") && isLit(leftmost(b), "=") {
					byHand = append(byHand, file)
					return false
				}
				return true
			})
		}
	})
	assert.Empty(t, byHand, "exact pane targets built by hand: call tmux.Target")
}

// leftmost returns the first operand of a chain of +.
func leftmost(e ast.Expr) ast.Expr {
	for {
		b, ok := e.(*ast.BinaryExpr)
		if !ok || b.Op != token.ADD {
			return e
		}
		e = b.X
	}
}

func isLit(e ast.Expr, v string) bool {
	l, ok := e.(*ast.BasicLit)
	return ok && l.Kind == token.STRING && l.Value == `"`+v+`"`
}
