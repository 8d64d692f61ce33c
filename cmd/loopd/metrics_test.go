package main

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"runtime/debug"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"

	"github.com/loopd/loopd/desired"
	"github.com/loopd/loopd/internal/journal"
	"github.com/loopd/loopd/store"
)

// describing is a Registerer that registers with a real registry (so that
// a clash still fails) and keeps the descriptor of every metric
// registered, including the vectors that have no series yet.
type describing struct {
	reg   *prometheus.Registry
	descs []*prometheus.Desc
}

func (d *describing) Register(c prometheus.Collector) error {
	if err := d.reg.Register(c); err != nil {
		return err
	}
	ch := make(chan *prometheus.Desc)
	go func() { c.Describe(ch); close(ch) }()
	for desc := range ch {
		d.descs = append(d.descs, desc)
	}
	return nil
}

func (d *describing) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		if err := d.Register(c); err != nil {
			panic(err)
		}
	}
}

func (d *describing) Unregister(c prometheus.Collector) bool { return d.reg.Unregister(c) }

// descPattern reads a descriptor's name and variable labels from its
// String (client_golang's Desc has no getters).
var descPattern = regexp.MustCompile(`^Desc\{fqName: "([^"]+)", .*variableLabels: \{([^}]*)\}\}$`)

// exported returns the name of every metric serve registers, each with
// its label names.
func exported(t *testing.T) (map[string][]string, *prometheus.Registry) {
	t.Helper()
	d := &describing{reg: prometheus.NewRegistry()}
	registerMetrics(d, journal.NewAsync(nil, 1, slog.New(slog.DiscardHandler)), nil, nil)
	out := map[string][]string{}
	for _, desc := range d.descs {
		m := descPattern.FindStringSubmatch(desc.String())
		require.NotNil(t, m, "descriptor %s", desc)
		var labels []string
		if m[2] != "" {
			labels = strings.Split(m[2], ",")
		}
		out[m[1]] = labels
	}
	require.Contains(t, out, "loopd_work_items")
	return out, d.reg
}

// alertRules is the part of a Prometheus rules file the test reads
// (prometheus.io docs, "Alerting rules").
type alertRules struct {
	Groups []struct {
		Name  string `yaml:"name"`
		Rules []struct {
			Alert       string            `yaml:"alert"`
			Expr        string            `yaml:"expr"`
			For         string            `yaml:"for"`
			Labels      map[string]string `yaml:"labels"`
			Annotations map[string]string `yaml:"annotations"`
		} `yaml:"rules"`
	} `yaml:"groups"`
}

// grafanaDashboard is the part of a Grafana dashboard JSON the test reads.
type grafanaDashboard struct {
	Title  string `json:"title"`
	Panels []struct {
		Title   string `json:"title"`
		Targets []struct {
			Expr string `json:"expr"`
		} `json:"targets"`
	} `json:"panels"`
}

var (
	// metricName is a loopd metric's name in PromQL.
	metricName = regexp.MustCompile(`\bloopd_[a-z0-9_]+`)
	// selector is a loopd metric with its label matchers.
	selector = regexp.MustCompile(`\b(loopd_[a-z0-9_]+)\{([^}]*)\}`)
	// matcher is one label matcher of a selector: name, operator, value.
	matcher = regexp.MustCompile(`([a-z_]+)\s*(=~|!~|!=|=)\s*"([^"]*)"`)
)

// checkExpr requires every loopd metric expr names to be exported (a
// histogram's _bucket, _sum and _count series by their histogram), and
// every label it matches on to be one of the metric's; a phase matched
// exactly must be one of desired's phases.
func checkExpr(t *testing.T, where, expr string, names map[string][]string) {
	t.Helper()
	found := metricName.FindAllString(expr, -1)
	assert.NotEmpty(t, found, "%s: no loopd metric in %q", where, expr)
	base := func(n string) (string, bool) {
		if _, ok := names[n]; ok {
			return n, true
		}
		for _, suffix := range []string{"_bucket", "_sum", "_count"} {
			if b, ok := strings.CutSuffix(n, suffix); ok {
				if _, ok := names[b]; ok {
					return b, true
				}
			}
		}
		return "", false
	}
	for _, n := range found {
		_, ok := base(n)
		assert.True(t, ok, "%s: %s is not a metric loopd serve exports", where, n)
	}
	for _, sel := range selector.FindAllStringSubmatch(expr, -1) {
		b, ok := base(sel[1])
		if !ok {
			continue
		}
		for _, m := range matcher.FindAllStringSubmatch(sel[2], -1) {
			if m[1] == "le" && strings.HasSuffix(sel[1], "_bucket") {
				continue
			}
			assert.Contains(t, names[b], m[1], "%s: %s has no label %s", where, b, m[1])
			if m[1] == "phase" && m[2] == "=" {
				assert.True(t, desired.Phase(m[3]).Known(), "%s: no phase %q", where, m[3])
			}
		}
	}
}

// TestContribUsesOnlyExportedMetrics reads the alert rules and the Grafana
// dashboard in contrib/ and checks every loopd metric and label they use
// against the collectors serve registers: a renamed metric or label
// breaks it.
func TestContribUsesOnlyExportedMetrics(t *testing.T) {
	names, _ := exported(t)
	root := filepath.Join("..", "..", "contrib")

	b, err := os.ReadFile(filepath.Join(root, "prometheus", "loopd-alerts.yml"))
	require.NoError(t, err)
	var rules alertRules
	dec := yaml.NewDecoder(strings.NewReader(string(b)))
	dec.KnownFields(true)
	require.NoError(t, dec.Decode(&rules))
	require.NotEmpty(t, rules.Groups)
	var alerts []string
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			alerts = append(alerts, r.Alert)
			assert.NotEmpty(t, r.Alert, "group %s: a rule without a name", g.Name)
			assert.NotEmpty(t, r.Labels["severity"], "%s: no severity", r.Alert)
			assert.NotEmpty(t, r.Annotations["summary"], "%s: no summary", r.Alert)
			checkExpr(t, r.Alert, r.Expr, names)
		}
	}
	// The three: NeedsAttention for 10 min, the oldest pending
	// delivery over 15 min, the resume fallback rate.
	assert.Subset(t, alerts, []string{"LoopdItemNeedsAttention", "LoopdDeliveryStuck", "LoopdResumeFallbackRateHigh"})
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			switch r.Alert {
			case "LoopdItemNeedsAttention":
				assert.Contains(t, r.Expr, `loopd_work_items{phase="NeedsAttention"}`)
				assert.Equal(t, "10m", r.For)
			case "LoopdDeliveryStuck":
				assert.Contains(t, r.Expr, "loopd_oldest_pending_delivery_age_seconds) > 15 * 60")
			}
		}
	}

	b, err = os.ReadFile(filepath.Join(root, "grafana", "loopd-dashboard.json"))
	require.NoError(t, err)
	var dash grafanaDashboard
	require.NoError(t, json.Unmarshal(b, &dash))
	require.NotEmpty(t, dash.Panels)
	for _, p := range dash.Panels {
		require.NotEmpty(t, p.Targets, "panel %q", p.Title)
		for _, target := range p.Targets {
			checkExpr(t, "panel "+p.Title, target.Expr, names)
		}
	}
}

// TestMetricsFollowPrometheusNaming lints the metrics serve exports with
// client_golang's promlint (counters end in _total, units in base units).
func TestMetricsFollowPrometheusNaming(t *testing.T) {
	_, reg := exported(t)
	mfs, err := reg.Gather()
	require.NoError(t, err)
	problems, err := promlint.NewWithMetricFamilies(mfs).Lint()
	require.NoError(t, err)
	problems = slices.DeleteFunc(problems, func(p promlint.Problem) bool { return !strings.HasPrefix(p.Metric, "loopd_") })
	assert.Empty(t, problems)
}

// TestBuildInfoSaysWhichBuild: /metrics has loopd_build_info, 1, labelled
// with the same version, commit and Go version loopd version prints.
func TestBuildInfoSaysWhichBuild(t *testing.T) {
	names, reg := exported(t)
	require.ElementsMatch(t, []string{"version", "commit", "go"}, names["loopd_build_info"])
	mfs, err := reg.Gather()
	require.NoError(t, err)
	v := currentVersion(debug.ReadBuildInfo())
	i := slices.IndexFunc(mfs, func(mf *dto.MetricFamily) bool { return mf.GetName() == "loopd_build_info" })
	require.GreaterOrEqual(t, i, 0)
	require.Len(t, mfs[i].GetMetric(), 1)
	m := mfs[i].GetMetric()[0]
	labels := map[string]string{}
	for _, l := range m.GetLabel() {
		labels[l.GetName()] = l.GetValue()
	}
	assert.Equal(t, map[string]string{"version": v.Version, "commit": v.Commit, "go": v.Go}, labels)
	assert.Equal(t, 1.0, m.GetGauge().GetValue())
}

// downListener is a store.Listener whose connection is down.
type downListener struct{}

func (downListener) Listen(context.Context, func(), store.ListenJournal) error { return nil }
func (downListener) ListenDown() error                                         { return store.ErrListenDown }

// TestStoreListeningSaysWhenTheListenerIsDown: loopd_store_listening is 0
// while the store's listener is down, 1 without one (SQLite).
func TestStoreListeningSaysWhenTheListenerIsDown(t *testing.T) {
	for listener, want := range map[store.Listener]float64{nil: 1, downListener{}: 0} {
		reg := prometheus.NewRegistry()
		registerMetrics(reg, journal.NewAsync(nil, 1, slog.New(slog.DiscardHandler)), listener, nil)
		mfs, err := reg.Gather()
		require.NoError(t, err)
		i := slices.IndexFunc(mfs, func(mf *dto.MetricFamily) bool { return mf.GetName() == "loopd_store_listening" })
		require.GreaterOrEqual(t, i, 0)
		assert.Equal(t, want, mfs[i].GetMetric()[0].GetGauge().GetValue(), "%T", listener)
	}
}

// TestStoreReachableSaysWhenTheStoreIsDown: loopd_store_reachable is 0
// while the heartbeats find the store out of reach, 1 otherwise.
func TestStoreReachableSaysWhenTheStoreIsDown(t *testing.T) {
	down := func() (time.Time, error) { return time.Unix(1, 0), errors.New("connection refused") }
	up := func() (time.Time, error) { return time.Time{}, nil }
	for name, tc := range map[string]struct {
		storeDown func() (time.Time, error)
		want      float64
	}{"none": {nil, 1}, "up": {up, 1}, "down": {down, 0}} {
		reg := prometheus.NewRegistry()
		registerMetrics(reg, journal.NewAsync(nil, 1, slog.New(slog.DiscardHandler)), nil, tc.storeDown)
		mfs, err := reg.Gather()
		require.NoError(t, err)
		i := slices.IndexFunc(mfs, func(mf *dto.MetricFamily) bool { return mf.GetName() == "loopd_store_reachable" })
		require.GreaterOrEqual(t, i, 0)
		assert.Equal(t, tc.want, mfs[i].GetMetric()[0].GetGauge().GetValue(), name)
	}
}
