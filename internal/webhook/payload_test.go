package webhook

import (
	"encoding/json"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/google/go-github/v84/github"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestPayloadDecodesTheFixtures: for every fixture of a handled event,
// each field of payload holds exactly what the JSON holds at its path
// (decoded generically, as a map), and each path is in at least one
// fixture, so a misspelt tag, or a path GitHub never sends, shows.
// notInFixtures are the paths no vendored fixture has.
func TestPayloadDecodesTheFixtures(t *testing.T) {
	entries, err := os.ReadDir(fixturesDir)
	require.NoError(t, err)
	set := map[string]bool{}
	n := 0
	for _, entry := range entries {
		event, _, _ := strings.Cut(entry.Name(), ".")
		if _, ok := classifiers[event]; !ok {
			continue
		}
		n++
		body := fixture(t, entry.Name())
		p, err := decodePayload(body)
		require.NoError(t, err, entry.Name())
		var generic any
		require.NoError(t, json.Unmarshal(body, &generic))
		sameAsJSON(t, entry.Name(), "", reflect.ValueOf(*p), generic, set)
	}
	require.NotZero(t, n)
	for _, path := range leafPaths(reflect.TypeFor[payload](), "") {
		assert.True(t, set[path] || notInFixtures[path], "no fixture has %s", path)
	}
}

// notInFixtures are payload paths no vendored fixture has: those of
// pull_request_review_comment, of which there is no fixture (GitHub docs,
// "pull_request_review_comment"), and a GitHub App's slug, which the
// check_suite fixture leaves out (GitHub docs, "Apps"; go-github's App.Slug).
var notInFixtures = map[string]bool{".comment.path": true, ".comment.diff_hunk": true, ".check_suite.app.slug": true}

var timestampType = reflect.TypeFor[github.Timestamp]()

// sameAsJSON checks that v, decoded from the JSON at path, equals j, the
// same JSON decoded generically (nil when the key is missing or null),
// and records in set the leaf paths whose key the JSON has.
func sameAsJSON(t *testing.T, file, path string, v reflect.Value, j any, set map[string]bool) {
	t.Helper()
	switch {
	case v.Type() == timestampType:
		s, _ := j.(string)
		var want time.Time
		if s != "" {
			var err error
			want, err = time.Parse(time.RFC3339, s)
			require.NoError(t, err, "%s %s", file, path)
		}
		assert.True(t, want.Equal(v.Interface().(github.Timestamp).Time), "%s %s", file, path)
		return
	}
	switch v.Kind() {
	case reflect.Pointer:
		if j == nil {
			assert.True(t, v.IsNil(), "%s %s", file, path)
			return
		}
		require.False(t, v.IsNil(), "%s %s", file, path)
		if v.Elem().Kind() == reflect.Struct && v.Elem().NumField() == 0 {
			return
		}
		sameAsJSON(t, file, path, v.Elem(), j, set)
	case reflect.Struct:
		m, _ := j.(map[string]any)
		for i := range v.NumField() {
			if v.Type().Field(i).Anonymous {
				// Embedded: its fields are the object's own (encoding/json).
				sameAsJSON(t, file, path, v.Field(i), j, set)
				continue
			}
			name := jsonName(v.Type().Field(i))
			field, ok := m[name]
			if ok && isLeaf(v.Field(i).Type()) {
				set[path+"."+name] = true
			}
			sameAsJSON(t, file, path+"."+name, v.Field(i), field, set)
		}
	case reflect.Slice:
		a, _ := j.([]any)
		require.Equal(t, len(a), v.Len(), "%s %s", file, path)
		for i := range a {
			sameAsJSON(t, file, path+"[]", v.Index(i), a[i], set)
		}
	case reflect.String:
		s, _ := j.(string)
		assert.Equal(t, s, v.String(), "%s %s", file, path)
	case reflect.Int, reflect.Int64:
		f, _ := j.(float64)
		assert.Equal(t, int64(f), v.Int(), "%s %s", file, path)
	case reflect.Bool:
		b, _ := j.(bool)
		assert.Equal(t, b, v.Bool(), "%s %s", file, path)
	default:
		t.Fatalf("%s: no check for %s", path, v.Kind())
	}
}

// isLeaf reports whether a field of typ holds a value rather than fields:
// a string, a number, a boolean, a timestamp, a presence marker (a pointer
// to an empty struct) or a pointer to a value.
func isLeaf(typ reflect.Type) bool {
	switch typ.Kind() {
	case reflect.Pointer:
		return typ.Elem().Kind() != reflect.Struct || typ.Elem().NumField() == 0
	case reflect.Struct:
		return typ == timestampType
	case reflect.Slice:
		return false
	}
	return true
}

// leafPaths lists the paths of typ's fields that hold a value (isLeaf).
func leafPaths(typ reflect.Type, path string) []string {
	switch {
	case typ == timestampType:
		return []string{path}
	case typ.Kind() == reflect.Pointer:
		if isLeaf(typ) {
			return []string{path}
		}
		return leafPaths(typ.Elem(), path)
	case typ.Kind() == reflect.Slice:
		return leafPaths(typ.Elem(), path+"[]")
	case typ.Kind() == reflect.Struct:
		var out []string
		for i := range typ.NumField() {
			if typ.Field(i).Anonymous {
				out = append(out, leafPaths(typ.Field(i).Type, path)...)
				continue
			}
			out = append(out, leafPaths(typ.Field(i).Type, path+"."+jsonName(typ.Field(i)))...)
		}
		return out
	}
	return []string{path}
}

// jsonName is the key f is decoded from.
func jsonName(f reflect.StructField) string {
	name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
	return name
}
