package store_test

import (
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// module is the import path of this repository's module.
const module = "github.com/loopd/loopd"

// goList runs `go list` with args in the module's root and returns its
// lines of output.
func goList(t *testing.T, args ...string) []string {
	t.Helper()
	cmd := exec.Command("go", append([]string{"list"}, args...)...)
	cmd.Dir = ".." // this package's directory is store/
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "go list %s: %s", strings.Join(args, " "), stderr.String())
	return strings.Fields(string(out))
}

// isDriver reports whether the package pkg is a database driver or the
// standard library's SQL layer: database/sql, pgx and its pool (github.com/
// jackc/...) or SQLite (modernc.org/...). database/sql/driver alone is
// interfaces only, imported by github.com/google/uuid for its Value and
// Scan methods, and is none.
func isDriver(pkg string) bool {
	return pkg == "database/sql" || strings.HasPrefix(pkg, "github.com/jackc/") ||
		strings.HasPrefix(pkg, "modernc.org/")
}

// isStd reports whether pkg is in the standard library: its first path
// element has no dot.
func isStd(pkg string) bool {
	first, _, _ := strings.Cut(pkg, "/")
	return !strings.Contains(first, ".")
}

// TestOnlyCmdImportsTheSQLStore: the one implementation of the store is
// wired by cmd alone (docs/design.md, "Where each rule lives"); every other
// package's code takes the contract (store.Store) or an interface of its
// own. The backends' own tests are not package code (go list's Imports
// leave tests out).
func TestOnlyCmdImportsTheSQLStore(t *testing.T) {
	const sqlstore = module + "/store/sqlstore"
	var importers []string
	for _, line := range goList(t, "-f", `{{.ImportPath}}:{{join .Imports ","}}`, "./...") {
		pkg, imports, _ := strings.Cut(line, ":")
		if slices.Contains(strings.Split(imports, ","), sqlstore) {
			importers = append(importers, pkg)
		}
	}
	require.NotEmpty(t, importers, "cmd/loopd wires the SQL store")
	for _, pkg := range importers {
		assert.True(t, strings.HasPrefix(pkg, module+"/cmd/"), "%s imports %s", pkg, sqlstore)
	}
}

// TestTheRecordImportsNoStorage: desired is pure values, built from the
// standard library (but database/sql) and internal/journal only.
func TestTheRecordImportsNoStorage(t *testing.T) {
	allowed := []string{module + "/desired", module + "/internal/journal"}
	for _, pkg := range goList(t, "-deps", "./desired") {
		assert.True(t, (isStd(pkg) && !isDriver(pkg)) || slices.Contains(allowed, pkg), "desired depends on %s", pkg)
	}
}

// TestTheContractNamesNoDriver: neither store, its conformance suites, the
// record nor the reconciler (whose Plan is pure) links a database driver.
func TestTheContractNamesNoDriver(t *testing.T) {
	deps := goList(t, "-deps", "./store", "./store/storetest", "./desired", "./reconciler")
	require.Contains(t, deps, module+"/store", "go list lists the packages themselves")
	for _, pkg := range deps {
		assert.False(t, isDriver(pkg), "links %s", pkg)
	}
	// The check itself: the SQL store does link them.
	assert.True(t, slices.ContainsFunc(goList(t, "-deps", "./store/sqlstore"), isDriver))
}
