// Package srctest reads loopd's own Go source for the tests that hold a
// rule to its one home (a tunable in schema/defaults.go, the session
// prefix, tmux.Target, the one line of dispatch.delivered, doc.go's list
// of actions): the parsed files of loopd's code, without tests.
package srctest

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// Walk calls each with the slash path, relative to root, and the syntax
// tree of every Go file of loopd's code below root: not a test
// (_test.go), nor in test support (a directory whose name ends in
// "test": tmuxtest, storetest, …), testdata, e2e or a hidden directory.
func Walk(t testing.TB, root string, each func(path string, f *ast.File)) {
	t.Helper()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			name := d.Name()
			if path != root && (name == "testdata" || name == "e2e" || strings.HasSuffix(name, "test") || strings.HasPrefix(name, ".")) {
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
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		each(filepath.ToSlash(rel), f)
		return nil
	})
	require.NoError(t, err)
}

// Package returns the syntax trees of the Go files, tests aside, of the
// package in dir alone.
func Package(t testing.TB, dir string) []*ast.File {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	require.NoError(t, err)
	var out []*ast.File
	for _, file := range files {
		if strings.HasSuffix(file, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), file, nil, parser.SkipObjectResolution)
		require.NoError(t, err)
		out = append(out, f)
	}
	return out
}
