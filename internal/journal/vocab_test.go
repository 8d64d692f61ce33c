package journal_test

import (
	"go/ast"
	"go/constant"
	"go/types"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/tools/go/packages"

	"github.com/loopd/loopd/internal/journal"
)

const (
	modulePath  = "github.com/loopd/loopd"
	journalPath = modulePath + "/internal/journal"
	actionsPath = modulePath + "/actions"
)

// source is the module's code as the compiler sees it, tests left out.
type source struct {
	pkgs  []*packages.Package
	names map[string]bool // the values of journal's Name constants
	keys  map[string]bool // the values of journal's Key… constants
}

// loadSource type-checks every package of the module (tests excluded) and
// reads journal's lists of names and keys from its constants.
func loadSource(t *testing.T) *source {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	require.NoError(t, err)
	cfg := &packages.Config{
		Mode: packages.NeedName | packages.NeedFiles | packages.NeedSyntax | packages.NeedTypes | packages.NeedTypesInfo,
		Dir:  root,
	}
	pkgs, err := packages.Load(cfg, "./...")
	require.NoError(t, err)
	require.Zero(t, packages.PrintErrors(pkgs), "the module type-checks")
	s := &source{pkgs: pkgs, names: map[string]bool{}, keys: map[string]bool{}}
	for _, p := range pkgs {
		if p.PkgPath != journalPath {
			continue
		}
		scope := p.Types.Scope()
		for _, n := range scope.Names() {
			c, ok := scope.Lookup(n).(*types.Const)
			if !ok {
				continue
			}
			switch {
			case isNamed(c.Type(), journalPath, "Name"):
				s.names[constant.StringVal(c.Val())] = true
			case strings.HasPrefix(n, "Key") && c.Val().Kind() == constant.String:
				s.keys[constant.StringVal(c.Val())] = true
			}
		}
	}
	require.NotEmpty(t, s.names, "journal's Name constants")
	require.NotEmpty(t, s.keys, "journal's Key constants")
	return s
}

func isNamed(t types.Type, pkg, name string) bool {
	n, ok := types.Unalias(t).(*types.Named)
	return ok && n.Obj().Pkg() != nil && n.Obj().Pkg().Path() == pkg && n.Obj().Name() == name
}

// walk calls f on every call expression and composite literal of the
// module's code, with the package it is in.
func (s *source) walk(f func(p *packages.Package, n ast.Node)) {
	for _, p := range s.pkgs {
		for _, file := range p.Syntax {
			ast.Inspect(file, func(n ast.Node) bool {
				switch n.(type) {
				case *ast.CallExpr, *ast.CompositeLit:
					f(p, n)
				}
				return true
			})
		}
	}
}

func (s *source) pos(p *packages.Package, n ast.Node) string {
	pos := p.Fset.Position(n.Pos())
	return filepath.Base(filepath.Dir(pos.Filename)) + "/" + filepath.Base(pos.Filename) + ":" + strconv.Itoa(pos.Line)
}

// slogCall returns the index of the message argument when call is a
// log/slog logging call (a *slog.Logger method or a slog package function),
// -1 otherwise.
func slogCall(info *types.Info, call *ast.CallExpr) int {
	sel, ok := call.Fun.(*ast.SelectorExpr)
	if !ok {
		return -1
	}
	fn, ok := info.Uses[sel.Sel].(*types.Func)
	if !ok || fn.Pkg() == nil || fn.Pkg().Path() != "log/slog" {
		return -1
	}
	switch fn.Name() {
	case "Debug", "Info", "Warn", "Error":
		return 0
	case "DebugContext", "InfoContext", "WarnContext", "ErrorContext":
		return 1
	case "Log", "LogAttrs":
		return 2
	}
	return -1
}

// kvCall returns the index of the first key argument when call is to a
// function of loopd whose last parameter is a key-value list (...any: the
// journal's Record and RecordLater and their wrappers), -1 otherwise.
func kvCall(info *types.Info, call *ast.CallExpr) int {
	fn, ok := funcOf(info, call)
	if !ok || fn.Pkg() == nil || !strings.HasPrefix(fn.Pkg().Path(), modulePath) {
		return -1
	}
	sig := fn.Signature()
	if !sig.Variadic() {
		return -1
	}
	if !isAnySlice(sig.Params().At(sig.Params().Len() - 1).Type()) {
		return -1
	}
	return sig.Params().Len() - 1
}

// isKVList reports whether elts, the elements of a []any, look like a
// key-value list: the first is a constant string. A list of SQL arguments
// starts with a variable.
func isKVList(info *types.Info, elts []ast.Expr) bool {
	if len(elts) == 0 {
		return false
	}
	v := info.Types[elts[0]].Value
	return v != nil && v.Kind() == constant.String
}

// isName reports whether e is a journal.Name, or string(x) of one.
func isName(info *types.Info, e ast.Expr) bool {
	if call, ok := e.(*ast.CallExpr); ok && len(call.Args) == 1 {
		if tv, ok := info.Types[call.Fun]; ok && tv.IsType() {
			e = call.Args[0]
		}
	}
	return isNamed(info.TypeOf(e), journalPath, "Name")
}

// TestLogMessagesAreNames fails on a log/slog call anywhere in loopd whose
// message is not one of journal's Name constants (a string literal
// included), and on a Name made from anything but a constant of the list,
// so that the list in journal.go stays the whole vocabulary of the log.
func TestLogMessagesAreNames(t *testing.T) {
	s := loadSource(t)
	var bad []string
	calls := 0
	s.walk(func(p *packages.Package, n ast.Node) {
		call, ok := n.(*ast.CallExpr)
		if !ok {
			return
		}
		// A conversion to Name must not mint a name outside the list.
		if tv, ok := p.TypesInfo.Types[call.Fun]; ok && tv.IsType() && isNamed(tv.Type, journalPath, "Name") && len(call.Args) == 1 {
			if v := p.TypesInfo.Types[call.Args[0]].Value; v == nil || !s.names[constant.StringVal(v)] {
				bad = append(bad, s.pos(p, call)+": journal.Name made from something not in the list")
			}
		}
		i := slogCall(p.TypesInfo, call)
		if i < 0 {
			return
		}
		calls++
		if i >= len(call.Args) {
			bad = append(bad, s.pos(p, call)+": log call without a message")
			return
		}
		msg := call.Args[i]
		if !isName(p.TypesInfo, msg) {
			bad = append(bad, s.pos(p, call)+": log message "+types.ExprString(msg)+" is not a journal.Name")
			return
		}
		if v := p.TypesInfo.Types[msg].Value; v != nil && !s.names[constant.StringVal(v)] {
			bad = append(bad, s.pos(p, call)+": log message "+v.ExactString()+" is not in journal's list")
		}
	})
	require.NotZero(t, calls, "the scan finds the log calls")
	require.Empty(t, bad, "every log message is a name from internal/journal/journal.go")
}

// TestKeysAreListed fails on a key of a log line, a journal row or a dry-run
// field that is not one of journal's Key… constants. Keys are found where
// they are written: the key-value arguments of log and Record calls, []any
// literals and appends to a []any (key-value lists built before the call),
// slog.Attr constructors and actions.Field literals.
func TestKeysAreListed(t *testing.T) {
	s := loadSource(t)
	var bad []string
	found := map[string]bool{}
	check := func(p *packages.Package, e ast.Expr, what string) {
		if _, ok := e.(*ast.CallExpr); ok {
			return // an Attr, checked where it is made
		}
		tv := p.TypesInfo.Types[e]
		if tv.Value == nil || tv.Value.Kind() != constant.String {
			if b, ok := types.Unalias(tv.Type).Underlying().(*types.Basic); ok && b.Info()&types.IsString != 0 {
				bad = append(bad, s.pos(p, e)+": "+what+" key "+types.ExprString(e)+" is not a constant")
			}
			return
		}
		k := constant.StringVal(tv.Value)
		found[k] = true
		if !s.keys[k] {
			bad = append(bad, s.pos(p, e)+": "+what+" key "+strconv.Quote(k)+" is not in journal's list")
		}
	}
	pairs := func(p *packages.Package, args []ast.Expr, what string) {
		for i := 0; i < len(args); i += 2 {
			check(p, args[i], what)
		}
	}
	s.walk(func(p *packages.Package, n ast.Node) {
		switch n := n.(type) {
		case *ast.CallExpr:
			if fn, ok := funcOf(p.TypesInfo, n); ok && fn.Pkg() != nil && fn.Pkg().Path() == "log/slog" && fn.Signature().Recv() == nil && fn.Signature().Results().Len() == 1 &&
				types.Identical(fn.Signature().Results().At(0).Type(), slogAttr(fn)) && len(n.Args) > 0 {
				// slog.String("key", v), slog.Int(…) and the like.
				check(p, n.Args[0], "log")
				return
			}
			if n.Ellipsis.IsValid() {
				// A spread list is checked where it is built.
				return
			}
			if i := slogCall(p.TypesInfo, n); i >= 0 && i+1 <= len(n.Args) {
				pairs(p, n.Args[i+1:], "log")
				return
			}
			if i := kvCall(p.TypesInfo, n); i >= 0 && i <= len(n.Args) {
				pairs(p, n.Args[i:], "journal")
				return
			}
			if id, ok := n.Fun.(*ast.Ident); ok && id.Name == "append" && len(n.Args) > 1 && isAnySlice(p.TypesInfo.TypeOf(n.Args[0])) && isKVList(p.TypesInfo, n.Args[1:]) {
				pairs(p, n.Args[1:], "key-value list")
			}
		case *ast.CompositeLit:
			typ := p.TypesInfo.TypeOf(n)
			switch {
			case isAnySlice(typ) && isKVList(p.TypesInfo, n.Elts):
				pairs(p, n.Elts, "key-value list")
			case isNamed(typ, actionsPath, "Field") && len(n.Elts) > 0:
				for _, el := range n.Elts {
					if kv, ok := el.(*ast.KeyValueExpr); ok {
						if id, ok := kv.Key.(*ast.Ident); ok && id.Name == "Key" {
							check(p, kv.Value, "dry-run")
						}
						continue
					}
					check(p, el, "dry-run")
					break
				}
			}
		}
	})
	require.Contains(t, found, "work_item", "the scan finds the keys")
	require.Empty(t, bad, "every key is one of journal's Key… constants (internal/journal/keys.go)")
}

func funcOf(info *types.Info, call *ast.CallExpr) (*types.Func, bool) {
	var id *ast.Ident
	switch f := call.Fun.(type) {
	case *ast.Ident:
		id = f
	case *ast.SelectorExpr:
		id = f.Sel
	default:
		return nil, false
	}
	fn, ok := info.Uses[id].(*types.Func)
	return fn, ok
}

// slogAttr returns slog.Attr, from fn's package.
func slogAttr(fn *types.Func) types.Type {
	return fn.Pkg().Scope().Lookup("Attr").Type()
}

func isAnySlice(t types.Type) bool {
	if t == nil {
		return false
	}
	s, ok := types.Unalias(t).Underlying().(*types.Slice)
	if !ok {
		return false
	}
	i, ok := types.Unalias(s.Elem()).(*types.Interface)
	return ok && i.Empty()
}

// TestNamesListsEveryName: journal.Names, what `loopd events --type`
// takes, holds every Name constant once, sorted.
func TestNamesListsEveryName(t *testing.T) {
	s := loadSource(t)
	listed := map[string]bool{}
	for _, n := range journal.Names() {
		assert.False(t, listed[string(n)], "%s listed twice", n)
		listed[string(n)] = true
		assert.True(t, journal.Known(string(n)), "%s", n)
	}
	assert.Equal(t, s.names, listed)
	assert.True(t, slices.IsSorted(journal.Names()))
	assert.False(t, journal.Known("session.exitd"))
	assert.Contains(t, journal.Near("session.exitd"), journal.SessionExited)
}

// Typed gives counts and yes-or-no attributes their JSON types, and leaves
// text, and a value that does not parse as its key's type, as written.
func TestTyped(t *testing.T) {
	assert.Equal(t, int64(3), journal.Typed(journal.KeyFailures, "3"))
	assert.Equal(t, int64(-1), journal.Typed(journal.KeyExitStatus, "-1"))
	assert.Equal(t, true, journal.Typed(journal.KeyConfirmed, "true"))
	assert.Equal(t, "1234567", journal.Typed(journal.KeyDelivery, "1234567"), "an id that looks like a number stays text")
	assert.Equal(t, "many", journal.Typed(journal.KeyPending, "many"))
}
