package desired

import (
	"go/ast"
	"go/token"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/loopd/loopd/internal/srctest"
)

// TestSessionPrefixHasOneHome: the prefix of loopd's session names is
// spelled once, SessionPrefix; SessionName and observed's filter use it,
// so that no part of loopd can name or look for a session another way.
// Tests and test support name sessions of their own.
func TestSessionPrefixHasOneHome(t *testing.T) {
	var spelled []string
	srctest.Walk(t, "..", func(file string, f *ast.File) {
		ast.Inspect(f, func(n ast.Node) bool {
			if lit, ok := n.(*ast.BasicLit); ok && lit.Kind == token.STRING {
				if v, err := strconv.Unquote(lit.Value); err == nil && strings.HasPrefix(v, SessionPrefix) {
					spelled = append(spelled, file+": "+lit.Value)
				}
			}
			return true
		})
	})
	assert.Equal(t, []string{"desired/workitem.go: \"loop-\""}, spelled)
}
