package reconciler

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loopd/loopd/internal/srctest"
)

// docAction is an item of doc.go's list of actions: "//   - name, name2:".
var docAction = regexp.MustCompile(`^//   - ([a-z_]+(?:, [a-z_]+)*):`)

// TestDocListsEveryAction holds doc.go's list of what Plan emits equal to
// the action types of package actions, by their names (Action.Name), and
// those types to the executor's type switch (Executor.apply), wait aside:
// a new action is documented and executed, or this fails.
func TestDocListsEveryAction(t *testing.T) {
	doc, err := parser.ParseFile(token.NewFileSet(), "doc.go", nil, parser.ParseComments|parser.PackageClauseOnly)
	require.NoError(t, err)
	var documented []string
	for _, c := range doc.Doc.List {
		if m := docAction.FindStringSubmatch(c.Text); m != nil {
			documented = append(documented, strings.Split(m[1], ", ")...)
		}
	}

	var names, types, applied, unapplied []string
	for _, f := range srctest.Package(t, filepath.Join("..", "actions")) {
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Recv == nil {
				continue
			}
			recv := receiver(fn)
			switch fn.Name.Name {
			case "Name":
				types = append(types, recv)
				ast.Inspect(fn.Body, func(n ast.Node) bool {
					if r, ok := n.(*ast.ReturnStmt); ok && len(r.Results) == 1 {
						if lit, ok := r.Results[0].(*ast.BasicLit); ok && lit.Kind == token.STRING {
							name, err := strconv.Unquote(lit.Value)
							require.NoError(t, err)
							names = append(names, name)
						}
					}
					return true
				})
			case "Mutates":
				if r, ok := fn.Body.List[0].(*ast.ReturnStmt); ok {
					if id, ok := r.Results[0].(*ast.Ident); ok && id.Name == "false" {
						unapplied = append(unapplied, recv)
					}
				}
			case "apply":
				ast.Inspect(fn.Body, func(n ast.Node) bool {
					if c, ok := n.(*ast.CaseClause); ok {
						for _, e := range c.List {
							if id, ok := e.(*ast.Ident); ok {
								applied = append(applied, id.Name)
							}
						}
					}
					return true
				})
			}
		}
	}
	slices.Sort(documented)
	slices.Sort(names)
	assert.Equal(t, names, documented, "doc.go lists every action by its name, once")
	assert.Equal(t, []string{"Wait"}, unapplied, "only wait changes nothing")
	types = slices.DeleteFunc(types, func(s string) bool { return slices.Contains(unapplied, s) })
	slices.Sort(types)
	slices.Sort(applied)
	assert.Equal(t, types, applied, "Executor.apply has a case for every action that changes something")
}

// receiver returns the type name of fn's receiver.
func receiver(fn *ast.FuncDecl) string {
	e := fn.Recv.List[0].Type
	if s, ok := e.(*ast.StarExpr); ok {
		e = s.X
	}
	return e.(*ast.Ident).Name
}
