package tmux_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loopd/loopd/internal/tmux"
)

func TestTarget(t *testing.T) {
	assert.Equal(t, "=loop-acme-api-1:", tmux.Target("loop-acme-api-1"))
	require.NoError(t, tmux.CheckTarget(tmux.Target("loop-acme-api-1")))
}

// TestTargetIsTheOneSpelling: outside the e2e tests and the fakes, a
// session's exact pane target is made by tmux.Target, never by hand
// ("=" + name + ":"), so that every part reaches the same pane. The
// exactness itself is the conformance suite's (tmuxtest, exactTargets).
func TestTargetIsTheOneSpelling(t *testing.T) {
	root := filepath.Join("..", "..")
	var byHand []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if d.Name() == "testdata" || d.Name() == "e2e" || strings.HasPrefix(d.Name(), ".") && path != root {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		for _, decl := range f.Decls {
			if fn, ok := decl.(*ast.FuncDecl); ok && fn.Name.Name == "Target" && fn.Recv == nil && filepath.Base(filepath.Dir(path)) == "tmux" {
				continue
			}
			ast.Inspect(decl, func(n ast.Node) bool {
				b, ok := n.(*ast.BinaryExpr)
				if !ok || b.Op != token.ADD {
					return true
				}
				if isLit(b.Y, ":") && isLit(leftmost(b), "=") {
					byHand = append(byHand, filepath.ToSlash(path))
					return false
				}
				return true
			})
		}
		return nil
	})
	require.NoError(t, err)
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
