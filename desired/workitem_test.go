package desired

import (
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// sessionNameShape is what tmux may see: no '.', no ':', nothing to quote.
var sessionNameShape = regexp.MustCompile(`^loop-[a-z0-9-]+$`)

func TestSessionName(t *testing.T) {
	hashed := regexp.MustCompile(`^loop-[a-z0-9-]+--[0-9a-f]{8}$`)
	tests := []struct {
		name string
		key  Key
		want string // exact name; "" means the hashed form
	}{
		{name: "plain", key: Key{"acme", "api", 42}, want: "loop-acme-api-42"},
		{name: "digits_in_parts", key: Key{"acme2", "22", 7}, want: "loop-acme2-22-7"},
		{name: "upper_case", key: Key{"Acme", "API", 42}},
		{name: "dash_in_owner", key: Key{"a-b", "c", 1}},
		{name: "dash_in_repo", key: Key{"a", "b-c", 1}},
		{name: "dot_in_repo", key: Key{"acme", "api.go", 1}},
		{name: "underscore_in_repo", key: Key{"acme", "my_api", 1}},
		{name: "repo_only_underscore", key: Key{"acme", "_", 22}},
		{name: "colon_in_repo", key: Key{"acme", "a:b", 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := SessionName(tt.key)
			assert.Regexp(t, sessionNameShape, got)
			if tt.want != "" {
				assert.Equal(t, tt.want, got)
			} else {
				assert.Regexp(t, hashed, got)
			}
			assert.Equal(t, got, SessionName(tt.key), "deterministic")
		})
	}
}

func TestSessionNameInjective(t *testing.T) {
	// Pairs that a naive slug would merge, then every combination of
	// awkward parts.
	keys := []Key{
		{"a-b", "c", 1}, {"a", "b-c", 1},
		{"Acme", "API", 1}, {"acme", "api", 1}, {"ACME", "api", 1},
		{"a.b", "c", 1}, {"a_b", "c", 1}, {"a", "b.c", 1}, {"a", "b_c", 1}, {"a", "b", 1},
		{"acme", "_", 22}, {"acme", "22", 14435996}, {"acme", "-", 22},
		{"a", "b", 11}, {"a", "b1", 1}, {"a1", "b", 1},
	}
	parts := []string{"a", "b", "A", "a-b", "a.b", "a_b", "a--b", "-", "_", ".", "1", "a-1", "a1"}
	for _, o := range parts {
		for _, r := range parts {
			for _, n := range []int{1, 11, 22, 14435996} {
				keys = append(keys, Key{o, r, n})
			}
		}
	}
	seen := map[string]Key{}
	for _, k := range keys {
		name := SessionName(k)
		require.Regexp(t, sessionNameShape, name, "key %s", k)
		if prev, ok := seen[name]; ok && prev != k {
			t.Fatalf("%s and %s share session %s", prev, k, name)
		}
		seen[name] = k
	}
}

func TestParseKey(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want Key
	}{
		{name: "issue", in: "acme/api#42", want: Key{"acme", "api", 42}},
		{name: "dots_and_dashes", in: "a-b/c.d_e#1", want: Key{"a-b", "c.d_e", 1}},
		{name: "hash_in_repo", in: "acme/a#b#3", want: Key{"acme", "a#b", 3}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseKey(tt.in)
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
			assert.Equal(t, tt.in, got.String())
		})
	}
}

func TestParseKeyRoundTrip(t *testing.T) {
	for _, k := range []Key{{"acme", "api", 1}, {"Acme", "API.js", 12345}, {"a-b", "c_d", 7}} {
		got, err := ParseKey(k.String())
		require.NoError(t, err)
		assert.Equal(t, k, got)
	}
}

func TestParseKeyBad(t *testing.T) {
	for _, in := range []string{"", "acme", "acme/api", "acme/api#", "/api#1", "acme/#1", "acme#1",
		"acme/api#0", "acme/api#-1", "acme/api#x", "acme/api#1.5"} {
		t.Run(strconv.Quote(in), func(t *testing.T) {
			_, err := ParseKey(in)
			assert.ErrorIs(t, err, ErrBadKey)
		})
	}
}

func TestPhaseKnown(t *testing.T) {
	for _, p := range []Phase{PhaseIdle, PhaseSpawning, PhaseRunning, PhaseExited, PhaseBackingOff, PhaseNeedsAttention, PhaseStopped} {
		assert.True(t, p.Known(), p)
	}
	for _, p := range []Phase{"", "running", "Runing"} {
		assert.False(t, p.Known(), p)
	}
}

func TestOldestPending(t *testing.T) {
	t0 := time.Date(2025, 3, 1, 12, 0, 0, 123456789, time.UTC)
	t1, t2 := t0, t0.Add(time.Minute)
	tests := []struct {
		name    string
		pending []Delivery
		want    time.Time
		ok      bool
	}{
		{"none_pending", nil, time.Time{}, false},
		{"first_in_arrival_order", []Delivery{{ID: "d1", ReceivedAt: t1}, {ID: "d2", ReceivedAt: t2}}, t1, true},
		{"receipt_unknown", []Delivery{{ID: "d1"}, {ID: "d2", ReceivedAt: t2}}, time.Time{}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := Record{Pending: tt.pending}.OldestPending()
			assert.Equal(t, tt.ok, ok)
			assert.Equal(t, tt.want, got)
		})
	}
}

// A plain release after a release --fresh that no pass has carried out yet
// keeps the fresh request: the last call must not quietly undo it.
func TestReleaseFreshStands(t *testing.T) {
	pending := Spec{ReleaseGeneration: 2, ReleaseFresh: true}
	tests := []struct {
		name          string
		spec          Spec
		status        Status
		fresh         bool
		asFresh, kept bool
	}{
		{name: "no_release_yet", fresh: false},
		{name: "asked_fresh", fresh: true, asFresh: true},
		{name: "plain_after_plain", spec: Spec{ReleaseGeneration: 1}},
		{name: "plain_after_pending_fresh", spec: pending, asFresh: true, kept: true},
		{name: "fresh_after_pending_fresh", spec: pending, fresh: true, asFresh: true},
		{name: "plain_after_carried_out_fresh", spec: pending, status: Status{ReleasedGeneration: 2}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			asFresh, stands := Record{Spec: tt.spec, Status: tt.status}.ReleaseFresh(tt.fresh)
			assert.Equal(t, tt.asFresh, asFresh)
			assert.Equal(t, tt.kept, stands)
		})
	}
}
