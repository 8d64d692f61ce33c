package reconciler

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"

	"github.com/loopd/loopd/desired"
	"github.com/loopd/loopd/internal/harness"
	"github.com/loopd/loopd/internal/tmux"
	"github.com/loopd/loopd/observed"
	"github.com/loopd/loopd/schema"
)

var update = flag.Bool("update", false, "rewrite the dry-run golden files in testdata/plan")

// planCase is one testdata/plan/<case>.yaml: desired records, what tmux and
// the disk showed, the policy and the time.
type planCase struct {
	Now    time.Time     `yaml:"now"`
	Policy schema.Policy `yaml:"policy"`
	// Capacity, when set, bounds the fleet (admission); unset, nothing does.
	Capacity *schema.Capacity `yaml:"capacity"`
	Items    []struct {
		Key     string             `yaml:"key"`
		Spec    desired.Spec       `yaml:"spec"`
		Status  desired.Status     `yaml:"status"`
		Pending []desired.Delivery `yaml:"pending"`
		// Report is the latest SessionStart report of the item's harness.
		Report *desired.SessionReport `yaml:"report"`
	} `yaml:"items"`
	Panes []struct {
		Item   string `yaml:"item"`
		PaneID string `yaml:"paneId"`
		Dead   bool   `yaml:"dead"`
		Status *int   `yaml:"status"`
		// Words is what a dead pane shows its harness printed last, read
		// by the Claude Code adapter as the Observer reads it.
		Words string `yaml:"words"`
	} `yaml:"panes"`
	Transcripts map[string]struct {
		Exists bool  `yaml:"exists"`
		Size   int64 `yaml:"size"`
	} `yaml:"transcripts"`
	// Reported are, per item, the transcripts of the conversations its
	// harness reported, by id (observed.Observation.Reported).
	Reported map[string]map[string]struct {
		Exists  bool      `yaml:"exists"`
		Size    int64     `yaml:"size"`
		ModTime time.Time `yaml:"modtime"`
	} `yaml:"reported"`
	MissingWorkdirs []string `yaml:"missingWorkdirs"`
	// Routing, when set, is the config's routing (a route's budget);
	// Usage what each item's transcript holds of the CLI's token usage
	// past its status's offset (observed.Observation.Usage).
	Routing *schema.Routing              `yaml:"routing"`
	Usage   map[string]desired.UsageRead `yaml:"usage"`
	// Screens are, per item, what its live pane shows, read by the
	// Claude Code adapter as the Observer reads it (observed.ScreenOf).
	Screens map[string]string `yaml:"screens"`
}

// TestPlanGolden renders the dry run of each case and compares it with
// <case>.golden; go test ./reconciler -update rewrites them.
func TestPlanGolden(t *testing.T) {
	cases, err := filepath.Glob(filepath.Join("testdata", "plan", "*.yaml"))
	require.NoError(t, err)
	require.NotEmpty(t, cases)
	for _, path := range cases {
		name := strings.TrimSuffix(filepath.Base(path), ".yaml")
		t.Run(name, func(t *testing.T) {
			data, err := os.ReadFile(path)
			require.NoError(t, err)
			var c planCase
			dec := yaml.NewDecoder(strings.NewReader(string(data)))
			dec.KnownFields(true)
			require.NoError(t, dec.Decode(&c))

			items, obs := c.build(t)
			p := PolicyFrom(mergePolicy(c.Policy), testPolicy().Harnesses, testOwner)
			if c.Capacity != nil {
				p = p.WithCapacity(*c.Capacity)
			}
			if c.Routing != nil {
				p.Routing = *c.Routing
			}
			p.Adapters = map[string]string{"claude-code": harness.AdapterClaudeCode}
			var b strings.Builder
			for _, a := range Plan(items, obs, p, c.Now) {
				b.WriteString(a.String() + "\n")
			}
			golden := strings.TrimSuffix(path, ".yaml") + ".golden"
			if *update {
				require.NoError(t, os.WriteFile(golden, []byte(b.String()), 0o644))
			}
			want, err := os.ReadFile(golden)
			require.NoError(t, err, "run go test ./reconciler -update to create it")
			assert.Equal(t, string(want), b.String())
		})
	}
}

func (c planCase) build(t *testing.T) ([]desired.Record, observed.Observation) {
	var items []desired.Record
	for _, it := range c.Items {
		k, err := desired.ParseKey(it.Key)
		require.NoError(t, err)
		for i, d := range it.Pending {
			it.Pending[i] = d.Compact() // as the store gives it to a pass
		}
		items = append(items, desired.Record{Key: k, Spec: it.Spec, Status: it.Status, Pending: it.Pending, Report: it.Report})
	}
	claude, err := harness.New(harness.AdapterClaudeCode, schema.Harness{Command: "claude"})
	require.NoError(t, err)
	snap := observed.Snapshot{Panes: map[string]tmux.Pane{}}
	exits := map[desired.Key]observed.Exit{}
	for _, p := range c.Panes {
		k, err := desired.ParseKey(p.Item)
		require.NoError(t, err)
		pane := tmux.Pane{Session: desired.SessionName(k), PaneID: p.PaneID, Dead: p.Dead, StatusKnown: !p.Dead || p.Status != nil,
			CurrentCommand: "claude", Owner: testOwner}
		if p.Status != nil {
			pane.DeadStatus = *p.Status
		}
		snap.Panes[pane.Session] = pane
		if p.Words != "" {
			id := ""
			for _, it := range items {
				if it.Key == k {
					id = it.Status.HarnessSessionID
				}
			}
			exits[k] = observed.Exit{Words: tmux.LastWords(p.Words), Refusal: harness.ResumeRefusal(claude, p.Words, pane.DeadStatus, id)}
		}
	}
	obs := observed.Observation{Snapshot: snap, Transcripts: map[desired.Key]harness.Transcript{}, MissingWorkdirs: map[desired.Key]bool{}, Exits: exits}
	for item, tr := range c.Transcripts {
		k, err := desired.ParseKey(item)
		require.NoError(t, err)
		obs.Transcripts[k] = harness.Transcript{Known: true, Exists: tr.Exists, Size: tr.Size}
	}
	obs.Reported = map[desired.Key]map[string]harness.Transcript{}
	for item, byID := range c.Reported {
		k, err := desired.ParseKey(item)
		require.NoError(t, err)
		obs.Reported[k] = map[string]harness.Transcript{}
		for id, tr := range byID {
			obs.Reported[k][id] = harness.Transcript{Known: true, Exists: tr.Exists, Size: tr.Size, ModTime: tr.ModTime}
		}
	}
	obs.Usage = map[desired.Key]desired.UsageRead{}
	for item, u := range c.Usage {
		k, err := desired.ParseKey(item)
		require.NoError(t, err)
		obs.Usage[k] = u
	}
	obs.Screens = map[desired.Key]observed.Screen{}
	for item, text := range c.Screens {
		k, err := desired.ParseKey(item)
		require.NoError(t, err)
		for _, it := range items {
			if it.Key == k {
				obs.Screens[k] = observed.ScreenOf(claude, it, text, c.Now)
			}
		}
	}
	for _, item := range c.MissingWorkdirs {
		k, err := desired.ParseKey(item)
		require.NoError(t, err)
		obs.MissingWorkdirs[k] = true
	}
	return items, obs
}

// mergePolicy fills the case's unset policy fields with the defaults.
func mergePolicy(p schema.Policy) schema.Policy {
	d := schema.DefaultPolicy()
	if p.ResumeOnRespawn != nil {
		d.ResumeOnRespawn = p.ResumeOnRespawn
	}
	if p.ResumeProbeSeconds != nil {
		d.ResumeProbeSeconds = p.ResumeProbeSeconds
	}
	if p.RestartPolicy != "" {
		d.RestartPolicy = p.RestartPolicy
	}
	return d
}
