package schema

import (
	"encoding/json"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// schemaDefaults returns the "default" keyword of every key of the schema,
// by key path (webhooks.ghWebhook.routing.tmux.restartBudget; "*" stands
// for a map's key: harnesses.*.provision), with the key's description.
func schemaDefaults(t *testing.T) (defaults map[string]any, descriptions map[string]string) {
	t.Helper()
	var doc map[string]any
	require.NoError(t, json.Unmarshal(schemaJSON, &doc))
	defaults, descriptions = map[string]any{}, map[string]string{}
	var walk func(prefix string, node map[string]any)
	walk = func(prefix string, node map[string]any) {
		props, _ := node["properties"].(map[string]any)
		for name, p := range props {
			p := p.(map[string]any)
			path := strings.TrimPrefix(prefix+"."+name, ".")
			if d, ok := p["default"]; ok {
				defaults[path] = d
				descriptions[path], _ = p["description"].(string)
			}
			walk(path, p)
		}
		if entry, ok := node["additionalProperties"].(map[string]any); ok {
			walk(strings.TrimPrefix(prefix+".*", "."), entry)
		}
	}
	walk("", doc)
	return defaults, descriptions
}

// filled returns the leaves of cfg, as its JSON, by key path; keys left
// empty (nil, "", an empty list) are left out.
func filled(t *testing.T, cfg *Config) map[string]any {
	t.Helper()
	data, err := json.Marshal(cfg)
	require.NoError(t, err)
	var doc map[string]any
	require.NoError(t, json.Unmarshal(data, &doc))
	out := map[string]any{}
	var walk func(prefix string, v any)
	walk = func(prefix string, v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, c := range v {
				walk(strings.TrimPrefix(prefix+"."+k, "."), c)
			}
		case nil, []any:
		default:
			if v != "" {
				out[prefix] = v
			}
		}
	}
	walk("", doc)
	return out
}

// TestSchemaDefaultsAreTheCodes: the "default" of each key in
// loopd.schema.json is what Load fills in when the key is absent, every
// default Load fills in is in the schema, and each key's description names
// its default.
func TestSchemaDefaultsAreTheCodes(t *testing.T) {
	dir := t.TempDir()
	// github is optional: its keys are filled in once it is there. A
	// harness and a route ("*") have their keys filled in too.
	cfg, err := Parse([]byte(minimal+"github: {}\n"), filepath.Join(dir, "loopd.yaml"))
	require.NoError(t, err)
	got := map[string]any{}
	for key, v := range filled(t, cfg) {
		got[strings.Replace(key, "harnesses.claude-code.", "harnesses.*.", 1)] = v
	}
	// What minimal gives, and a harness's adapter, whose default is its
	// name, which no schema default can say.
	for _, key := range []string{"harnesses.*.command", "harnesses.*.adapter",
		"webhooks.ghWebhook.routing.repos.*.harness", "webhooks.ghWebhook.routing.repos.*.workdir"} {
		require.Contains(t, got, key)
		delete(got, key)
	}
	want, descriptions := schemaDefaults(t)
	require.NotEmpty(t, want)

	for _, key := range slices.Sorted(maps.Keys(want)) {
		d := want[key]
		if key == "stateDir" {
			// A relative path is resolved against the config's directory.
			d = filepath.Join(dir, d.(string))
		}
		assert.Equal(t, d, got[key], "%s: the schema's default is not what Load fills in", key)
		assert.Contains(t, descriptions[key], fmt.Sprintf("Default %v", want[key]), "%s: the description names another default", key)
	}
	for _, key := range slices.Sorted(maps.Keys(got)) {
		assert.Contains(t, want, key, "%s: Load fills in %v, which the schema does not say", key, got[key])
	}
}

// TestUnfilledReadsAsTheDefault: a config not filled in by Load (a zero
// value built in code) reads as Load would have filled it, never the
// opposite.
func TestUnfilledReadsAsTheDefault(t *testing.T) {
	cfg, err := Parse([]byte(minimal), "loopd.yaml")
	require.NoError(t, err)
	assert.Equal(t, cfg.Retention.JournalAge(), Retention{}.JournalAge())
	assert.Equal(t, 30*24*time.Hour, Retention{}.JournalAge())
	assert.Equal(t, cfg.Webhooks.GHWebhook.StatusPageOn(), GHWebhook{}.StatusPageOn())
	assert.Equal(t, cfg.Webhooks.GHWebhook.ConnsPerAddress(), GHWebhook{}.ConnsPerAddress())
	assert.Equal(t, cfg.Harnesses["claude-code"].ProvisionOn(), Harness{}.ProvisionOn())
	assert.Equal(t, cfg.Webhooks.GHWebhook.Routing.Repos["*"].Reactions.CIFailureOn(), Reactions{}.CIFailureOn())
	assert.True(t, Harness{}.ProvisionOn())

	days, off := 0, false
	assert.Equal(t, time.Duration(0), Retention{JournalDays: &days}.JournalAge(), "0 keeps every row")
	assert.False(t, Harness{Provision: &off}.ProvisionOn())
	assert.Zero(t, GHWebhook{MaxConnsPerAddress: &days}.ConnsPerAddress(), "0 is no bound")
}
