package desired

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestSessionPrefixHasOneHome: the prefix of loopd's session names is
// spelled once, SessionPrefix; SessionName and observed's filter use it,
// so that no part of loopd can name or look for a session another way.
func TestSessionPrefixHasOneHome(t *testing.T) {
	var spelled []string
	err := filepath.WalkDir("..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			// Tests and test support (tmuxtest, storetest, …) name sessions of their own.
			if d.Name() == "testdata" || d.Name() == "e2e" || strings.HasSuffix(d.Name(), "test") ||
				strings.HasPrefix(d.Name(), ".") && path != ".." {
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
		ast.Inspect(f, func(n ast.Node) bool {
			if lit, ok := n.(*ast.BasicLit); ok && lit.Kind == token.STRING {
				if v, err := strconv.Unquote(lit.Value); err == nil && strings.HasPrefix(v, SessionPrefix) {
					spelled = append(spelled, filepath.ToSlash(path)+": "+lit.Value)
				}
			}
			return true
		})
		return nil
	})
	require.NoError(t, err)
	assert.Equal(t, []string{"../desired/workitem.go: \"loop-\""}, spelled)
}
