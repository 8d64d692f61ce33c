package schema

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// minimal is the smallest useful config: one harness, one route.
const minimal = `
harnesses:
  claude-code:
    command: claude
webhooks:
  ghWebhook:
    routing:
      repos:
        "*":
          harness: claude-code
          workdir: /srv/{{.Owner}}/{{.Repo}}/{{.Number}}
`

func TestSchemaCompiles(t *testing.T) {
	require.NotPanics(t, func() { compiledSchema() })
}

// TestExampleConfigsLoad loads every example config shipped in the repo.
func TestExampleConfigsLoad(t *testing.T) {
	paths, err := filepath.Glob("../*.example.yaml")
	require.NoError(t, err)
	require.NotEmpty(t, paths)
	for _, path := range paths {
		t.Run(filepath.Base(path), func(t *testing.T) {
			cfg, err := Load(path)
			require.NoError(t, err)
			assert.NotEmpty(t, cfg.Harnesses)
			assert.NotEmpty(t, cfg.Webhooks.GHWebhook.Routing.Repos)
		})
	}
}

func TestLoadExample(t *testing.T) {
	cfg, err := Load("../loopd.example.yaml")
	require.NoError(t, err)
	dir, err := filepath.Abs("..")
	require.NoError(t, err)
	assert.Equal(t, filepath.Join(dir, "state"), cfg.StateDir)
	assert.Equal(t, Tmux{Socket: "loopd", HistoryLimit: 2000}, cfg.Tmux)
	assert.Equal(t, 10*time.Second, cfg.Reconcile.Interval())
	assert.Equal(t, "claude", cfg.Harnesses["claude-code"].Command)
	gh := cfg.Webhooks.GHWebhook
	assert.Equal(t, Logins{"Codertocat"}, gh.AuthorizedUsers, "the sender of the sample payloads")
	route, ok := gh.Routing.Route("octo-org", "api")
	require.True(t, ok)
	assert.Equal(t, "claude-code", route.Harness)
	assert.Nil(t, route.Checkout, "a trial of the example starts offline: a plain directory")
	assert.NotContains(t, route.Instructions, "push", "with no clone and no credential the agent cannot push")
	assert.Equal(t, 2*time.Second, gh.Routing.Tmux.ProbeWindow())
	assert.Equal(t, RestartOnFailure, gh.Routing.Tmux.RestartPolicy)
}

func TestParseDefaults(t *testing.T) {
	cfg, err := Parse([]byte(minimal), filepath.Join("conf", "loopd.yaml"))
	require.NoError(t, err)

	dir, err := filepath.Abs("conf")
	require.NoError(t, err)
	assert.Equal(t, filepath.Join(dir, "state"), cfg.StateDir)
	assert.Equal(t, Tmux{Socket: "loopd", HistoryLimit: 2000}, cfg.Tmux)
	assert.Equal(t, Reconcile{IntervalSeconds: 10}, cfg.Reconcile)
	assert.Equal(t, "claude-code", cfg.Harnesses["claude-code"].Adapter, "adapter defaults to the harness name")
	gh := cfg.Webhooks.GHWebhook
	assert.Equal(t, "127.0.0.1:8787", gh.Listen)
	assert.Equal(t, "/webhook", gh.Path)
	assert.Equal(t, "LOOPD_WEBHOOK_SECRET", gh.SecretEnv)
	assert.Empty(t, gh.AuthorizedUsers)
	assert.Equal(t, DefaultPolicy(), gh.Routing.Tmux)

	p := gh.Routing.Tmux
	assert.True(t, p.Resume())
	assert.Equal(t, 5*time.Second, p.ProbeWindow())
	assert.Equal(t, 120*time.Second, p.ConfirmTimeout())
	assert.Equal(t, RestartOnFailure, p.RestartPolicy)
	assert.Equal(t, 15*time.Second, p.FastFailWindow())
	assert.Equal(t, 3, p.MaxFastFailures)
	assert.Equal(t, 5, p.MaxChurnFailures)
	assert.Equal(t, 300*time.Second, p.ChurnWindow())
	assert.Equal(t, 2*time.Second, p.BackoffInitial())
	assert.Equal(t, 300*time.Second, p.BackoffMax())
	assert.Equal(t, 600*time.Second, p.HealthyReset())
	assert.Equal(t, 10, p.RestartBudget)
}

func TestParseExplicitValues(t *testing.T) {
	src := `
stateDir: /var/lib/loopd
tmux: {socket: other, historyLimit: 500}
reconcile: {intervalSeconds: 30}
harnesses:
  mine:
    adapter: custom
    command: /usr/local/bin/agent
    freshArgs: ["--id", "{{.SessionID}}", "{{.Prompt}}"]
    env: {API_MODE: fast}
webhooks:
  ghWebhook:
    listen: ":9000"
    routing:
      repos:
        "Octo/API": {harness: mine, workdir: "/w/{{.Repo}}"}
      tmux:
        resumeOnRespawn: false
        resumeProbeSeconds: 0
        restartPolicy: Always
`
	cfg, err := Parse([]byte(src), "loopd.yaml")
	require.NoError(t, err)
	assert.Equal(t, "/var/lib/loopd", cfg.StateDir, "an absolute stateDir stays")
	assert.Equal(t, Tmux{Socket: "other", HistoryLimit: 500}, cfg.Tmux)
	assert.Equal(t, 30*time.Second, cfg.Reconcile.Interval())
	assert.Equal(t, Harness{
		Adapter:   "custom",
		Command:   "/usr/local/bin/agent",
		FreshArgs: []string{"--id", "{{.SessionID}}", "{{.Prompt}}"},
		Env:       map[string]string{"API_MODE": "fast"},
		Provision: new(true),
	}, cfg.Harnesses["mine"])
	p := cfg.Webhooks.GHWebhook.Routing.Tmux
	assert.False(t, p.Resume())
	assert.Equal(t, time.Duration(0), p.ProbeWindow(), "an explicit 0 is kept, not defaulted")
	assert.Equal(t, RestartAlways, p.RestartPolicy)
	assert.Equal(t, 120*time.Second, p.ConfirmTimeout(), "absent keys next to given ones still default")
}

func TestParseYAMLFeatures(t *testing.T) {
	// Anchors, aliases and merge keys validate as they decode.
	src := `
harnesses:
  claude-code: &base
    command: claude
    env: {A: "1"}
  claude-fast:
    <<: *base
    adapter: claude-code
    env: {B: "2"}
webhooks: {ghWebhook: {routing: {repos: {"*": {harness: claude-fast, workdir: /w}}}}}
`
	cfg, err := Parse([]byte(src), "loopd.yaml")
	require.NoError(t, err)
	assert.Equal(t, Harness{Adapter: "claude-code", Command: "claude", Env: map[string]string{"B": "2"}, Provision: new(true)}, cfg.Harnesses["claude-fast"])
}

func TestParseInvalid(t *testing.T) {
	tests := []struct {
		name string
		src  string
		want []string // every problem, in order
	}{
		{
			name: "unknown_key_top_level",
			src:  "stateDir: ./s\nstatedir: ./t\n",
			want: []string{"c.yaml:2:1: statedir: unknown key; did you mean stateDir?"},
		},
		{
			name: "unknown_key_nested",
			src:  minimal + "      tmux:\n        restartPolicy: Never\n        resumeOnRespan: false\n",
			want: []string{"c.yaml:14:9: webhooks.ghWebhook.routing.tmux.resumeOnRespan: unknown key; did you mean resumeOnRespawn?"},
		},
		{
			name: "unknown_keys_in_map_entries",
			src:  "harnesses:\n  a:\n    adapter: cursor\n    command: x\n    comand: y\n  b:\n    adapter: cursor\n    command: x\n    args: [1]\n",
			want: []string{
				"c.yaml:5:5: harnesses.a.comand: unknown key; did you mean command?",
				"c.yaml:9:5: harnesses.b.args: unknown key",
			},
		},
		{
			name: "wrong_type",
			src:  "reconcile:\n  intervalSeconds: soon\ntmux: [loopd]\n",
			want: []string{
				"c.yaml:2:20: reconcile.intervalSeconds: got string, want integer",
				"c.yaml:3:7: tmux: got array, want object",
			},
		},
		{
			name: "bad_enum",
			src:  minimal + "      tmux: {restartPolicy: always}\n",
			want: []string{"c.yaml:12:29: webhooks.ghWebhook.routing.tmux.restartPolicy: value must be one of 'Always', 'OnFailure', 'Never'"},
		},
		{
			name: "bad_adapter",
			src:  "harnesses:\n  x: {adapter: aider, command: aider}\n",
			want: []string{"c.yaml:2:16: harnesses.x.adapter: value must be one of 'claude-code', 'codex', 'gemini', 'cursor', 'custom'"},
		},
		{
			name: "below_minimum",
			src:  minimal + "      tmux: {restartBudget: 0, resumeProbeSeconds: -1}\n",
			want: []string{
				"c.yaml:12:29: webhooks.ghWebhook.routing.tmux.restartBudget: 0 is less than the minimum, 1",
				"c.yaml:12:52: webhooks.ghWebhook.routing.tmux.resumeProbeSeconds: -1 is less than the minimum, 0",
			},
		},
		{
			name: "missing_required",
			src:  "harnesses:\n  claude-code: {}\n",
			want: []string{"c.yaml:2:16: harnesses.claude-code: missing property 'command'"},
		},
		{
			name: "bad_checkout",
			src:  minimal + "        octo-org/*: {harness: claude-code, workdir: /w, checkout: {url: \"{{.Nope}}\", issueBranch: \"-x{{.Number}}\", base: \"a..b\"}}\n",
			want: []string{
				`c.yaml:12:53: webhooks.ghWebhook.routing.repos["octo-org/*"].workdir: with checkout, the workdir must differ per work item (use {{.Number}}, and {{.Owner}}/{{.Repo}} in a wildcard route): two items never share a worktree`,
				`c.yaml:12:73: webhooks.ghWebhook.routing.repos["octo-org/*"].checkout.url: render checkout url: template: url:1:2: executing "url" at <.Nope>: can't evaluate field Nope in type schema.checkoutData`,
				`c.yaml:12:99: webhooks.ghWebhook.routing.repos["octo-org/*"].checkout.issueBranch: render issue branch: "-x1" is not a branch name loopd makes`,
				`c.yaml:12:122: webhooks.ghWebhook.routing.repos["octo-org/*"].checkout.base: "a..b" is not a branch name of the remote (write main, not origin/main)`,
			},
		},
		{
			// Two items of a wildcard route would share one worktree, and
			// a remote-tracking name is not a base branch.
			name: "checkout_workdir_shared_and_base_origin",
			src:  minimal + "        octo-org/*: {harness: claude-code, workdir: \"/w/{{.Repo}}\", checkout: {url: \"file:///r/{{.Repo}}.git\", base: origin/main}}\n",
			want: []string{
				`c.yaml:12:53: webhooks.ghWebhook.routing.repos["octo-org/*"].workdir: with checkout, the workdir must differ per work item (use {{.Number}}, and {{.Owner}}/{{.Repo}} in a wildcard route): two items never share a worktree`,
				`c.yaml:12:118: webhooks.ghWebhook.routing.repos["octo-org/*"].checkout.base: "origin/main" is not a branch name of the remote (write main, not origin/main)`,
			},
		},
		{
			// ssh cannot take a password from the URL, and it would reach
			// ssh's argv: refused at load, naming the route, masked.
			name: "checkout_url_ssh_password",
			src: minimal + "        octo-org/*: {harness: claude-code, workdir: \"/w/{{.Repo}}/{{.Number}}\", checkout: {url: \"ssh://git:hunter2@example.com/{{.Owner}}/{{.Repo}}.git\"}}\n" +
				"        octo-org/api: {harness: claude-code, workdir: \"/a/{{.Number}}\", checkout: {url: \"git:hunter2@example.com:octo-org/api.git\"}}\n",
			want: []string{
				`c.yaml:12:97: webhooks.ghWebhook.routing.repos["octo-org/*"].checkout.url: checkout url "ssh://***@example.com/owner/repo.git": a password in a non-http(s) url cannot be used: use an ssh key`,
				`c.yaml:13:89: webhooks.ghWebhook.routing.repos["octo-org/api"].checkout.url: checkout url: a password in a non-http(s) url cannot be used: use an ssh key`,
			},
		},
		{
			// One run names the schema's problems and the cross-field
			// ones; a value the schema refused gets no second word.
			name: "schema_and_cross_field_together",
			src: "capacity: {maxLiveSessions: -1}\n" + minimal + "        a/b: {harness: nope, workdir: relative}\n" +
				"      tmux: {backoffInitialSeconds: 90, backoffMaxSeconds: 30}\n    listen: 8080\n",
			want: []string{
				"c.yaml:1:29: capacity.maxLiveSessions: -1 is less than the minimum, 0",
				`c.yaml:13:24: webhooks.ghWebhook.routing.repos["a/b"].harness: unknown harness "nope": not a key of harnesses`,
				`c.yaml:13:39: webhooks.ghWebhook.routing.repos["a/b"].workdir: render workdir: "relative" is not an absolute path`,
				"c.yaml:14:37: webhooks.ghWebhook.routing.tmux.backoffInitialSeconds: 90 is more than backoffMaxSeconds (30)",
				"c.yaml:15:13: webhooks.ghWebhook.listen: got number, want string",
			},
		},
		{
			name: "checkout_without_url",
			src:  minimal + "        octo-org/*: {harness: claude-code, workdir: /w, checkout: {removeOnClose: true}}\n",
			want: []string{
				`c.yaml:12:53: webhooks.ghWebhook.routing.repos["octo-org/*"].workdir: with checkout, the workdir must differ per work item (use {{.Number}}, and {{.Owner}}/{{.Repo}} in a wildcard route): two items never share a worktree`,
				`c.yaml:12:67: webhooks.ghWebhook.routing.repos["octo-org/*"].checkout: missing property 'url'`,
			},
		},
		{
			name: "bad_route_key",
			src:  minimal + "        octo-org: {harness: claude-code, workdir: /w}\n",
			want: []string{`c.yaml:12:9: webhooks.ghWebhook.routing.repos.octo-org: invalid key: 'octo-org' does not match pattern '^(\\*|[A-Za-z0-9-]+/(\\*|[A-Za-z0-9._-]+))$'`},
		},
		{
			name: "bad_env_name",
			src:  "harnesses:\n  claude-code:\n    command: claude\n    env: {\"A=B\": x}\n",
			want: []string{`c.yaml:4:11: harnesses.claude-code.env["A=B"]: invalid key: 'A=B' does not match pattern '^[A-Za-z_][A-Za-z0-9_]*$'`},
		},
		{
			name: "route_to_missing_harness",
			src:  minimal + "        \"octo/api\": {harness: claude, workdir: /w}\n",
			want: []string{`c.yaml:12:31: webhooks.ghWebhook.routing.repos["octo/api"].harness: unknown harness "claude": not a key of harnesses`},
		},
		{
			name: "relative_workdir",
			src:  minimal + "        \"octo/api\": {harness: claude-code, workdir: \"w/{{.Repo}}\"}\n",
			want: []string{`c.yaml:12:53: webhooks.ghWebhook.routing.repos["octo/api"].workdir: render workdir: "w/repo" is not an absolute path`},
		},
		{
			name: "bad_workdir_template",
			src:  minimal + "        \"octo/api\": {harness: claude-code, workdir: \"/w/{{.Repo\"}\n",
			want: []string{`c.yaml:12:53: webhooks.ghWebhook.routing.repos["octo/api"].workdir: render workdir: template: workdir:1: unclosed action`},
		},
		{
			name: "route_keys_differ_only_in_case",
			src:  minimal + "        \"octo/api\": {harness: claude-code, workdir: /a}\n        \"Octo/API\": {harness: claude-code, workdir: /b}\n",
			want: []string{`c.yaml:12:9: webhooks.ghWebhook.routing.repos["octo/api"]: same repository as "Octo/API": keys match case-insensitively`},
		},
		{
			name: "budget_window_too_long",
			src:  minimal + "        \"octo/api\": {harness: claude-code, workdir: /w, budget: {tokens: 1000, window: 200h}}\n",
			want: []string{`c.yaml:12:88: webhooks.ghWebhook.routing.repos["octo/api"].budget.window: "200h" is not a window of 1h to 168h`},
		},
		{
			name: "budget_without_a_bound",
			src:  minimal + "        \"octo/api\": {harness: claude-code, workdir: /w, budget: {window: 2h}}\n",
			want: []string{`c.yaml:12:57: webhooks.ghWebhook.routing.repos["octo/api"].budget: set tokens (per window) or total, or leave budget out`},
		},
		{
			name: "budget_bad_weight",
			src:  minimal + "        \"octo/api\": {harness: claude-code, workdir: /w, budget: {total: 5, weights: {cacheRead: -1}}}\n",
			want: []string{`c.yaml:12:97: webhooks.ghWebhook.routing.repos["octo/api"].budget.weights.cacheRead: -1 is less than the minimum, 0`},
		},
		{
			name: "approvals_from_nowhere",
			src:  minimal + "        \"octo/api\": {harness: claude-code, workdir: /w, approvals: slack}\n",
			want: []string{`c.yaml:12:68: webhooks.ghWebhook.routing.repos["octo/api"].approvals: value must be 'github'`},
		},
		{
			name: "approval_reminder_too_soon",
			src:  minimal + "        \"octo/api\": {harness: claude-code, workdir: /w, approvals: github, approvalReminder: 30s}\n",
			want: []string{`c.yaml:12:94: webhooks.ghWebhook.routing.repos["octo/api"].approvalReminder: "30s" is not a duration of 1m to 168h`},
		},
		{
			name: "harness_name_is_not_an_adapter",
			src:  "harnesses:\n  claude:\n    command: claude\n",
			want: []string{"c.yaml:2:3: harnesses.claude: no adapter given and the name is not one of claude-code, codex, gemini, cursor, custom; set adapter"},
		},
		{
			name: "custom_adapter_rules",
			src:  "harnesses:\n  c: {adapter: custom, command: x, resumeArgs: [\"{{.Prompt\"]}\n  d: {adapter: cursor, command: y, freshArgs: [a]}\n",
			want: []string{
				"c.yaml:2:3: harnesses.c: the custom adapter needs freshArgs",
				"c.yaml:2:49: harnesses.c.resumeArgs[0]: template: resumeArgs:1: unclosed action",
				"c.yaml:3:36: harnesses.d.freshArgs: only the custom adapter takes freshArgs",
			},
		},
		{
			name: "bad_ready_pattern",
			src:  "harnesses:\n  claude-code: {command: claude, readyPattern: \"(\"}\n",
			want: []string{"c.yaml:2:48: harnesses.claude-code.readyPattern: error parsing regexp: missing closing ): `(`"},
		},
		{
			// The URL may hold a password: the problem never quotes it.
			name: "store_url_not_postgres",
			src:  "store: {url: \"mysql://u:S3cretPw@h/db\"}\n",
			want: []string{`c.yaml:1:14: store.url: invalid value (not shown: it may hold a password); want "" or a postgres:// URL`},
		},
		{
			name: "listen_port_zero",
			src:  minimal + "    listen: \":0\"\n",
			want: []string{`c.yaml:12:13: webhooks.ghWebhook.listen: port "0" is not a number from 1 to 65535 (0, a port picked at each start, is one no GitHub webhook can be pointed at)`},
		},
		{
			name: "bad_listen",
			src:  "webhooks: {ghWebhook: {listen: \"localhost\"}}\n",
			want: []string{"c.yaml:1:32: webhooks.ghWebhook.listen: want host:port: address localhost: missing port in address"},
		},
		{
			name: "backoff_initial_above_max",
			src:  minimal + "      tmux: {backoffInitialSeconds: 400}\n",
			want: []string{"c.yaml:12:37: webhooks.ghWebhook.routing.tmux.backoffInitialSeconds: 400 is more than backoffMaxSeconds (300)"},
		},
		{
			name: "secret_file_and_env",
			src:  "webhooks: {ghWebhook: {secretEnv: MY_SECRET, secretFile: /run/secret}}\n",
			want: []string{"c.yaml:1:46: webhooks.ghWebhook.secretFile: set secretFile or secretEnv, not both"},
		},
		{
			name: "secret_env_reaching_every_pane",
			src:  "webhooks: {ghWebhook: {secretEnv: LANG}}\n",
			want: []string{"c.yaml:1:35: webhooks.ghWebhook.secretEnv: LANG reaches every pane (one of PATH, HOME, USER, LOGNAME, LANG, LANGUAGE, LC_ALL, LC_ADDRESS, LC_COLLATE, LC_CTYPE, LC_IDENTIFICATION, LC_MEASUREMENT, LC_MESSAGES, LC_MONETARY, LC_NAME, LC_NUMERIC, LC_PAPER, LC_TELEPHONE, LC_TIME, TERM, TZ, TMPDIR, TMUX_TMPDIR); name another variable"},
		},
		{
			name: "pass_env_of_secrets",
			src: "webhooks: {ghWebhook: {secretEnv: HOOK_SECRET}}\n" +
				"harnesses:\n  claude-code:\n    command: claude\n    passEnv: [ANTHROPIC_API_KEY, HOOK_SECRET, GITHUB_TOKEN, GH_TOKEN, LOOPD_X]\n",
			want: []string{
				"c.yaml:5:34: harnesses.claude-code.passEnv[1]: HOOK_SECRET holds the webhook secret (secretEnv); it never reaches a harness",
				"c.yaml:5:47: harnesses.claude-code.passEnv[2]: GITHUB_TOKEN is never passed to a harness: loopd's own LOOPD_ variables and GitHub credentials stay with loopd",
				"c.yaml:5:61: harnesses.claude-code.passEnv[3]: GH_TOKEN is never passed to a harness: loopd's own LOOPD_ variables and GitHub credentials stay with loopd",
				"c.yaml:5:71: harnesses.claude-code.passEnv[4]: LOOPD_X is never passed to a harness: loopd's own LOOPD_ variables and GitHub credentials stay with loopd",
			},
		},
		{
			name: "harness_env_sets_the_secret_variable",
			src:  "harnesses:\n  claude-code:\n    command: claude\n    env: {LOOPD_WEBHOOK_SECRET: x}\n",
			want: []string{"c.yaml:4:11: harnesses.claude-code.env.LOOPD_WEBHOOK_SECRET: LOOPD_WEBHOOK_SECRET is the webhook secret's variable (secretEnv); give the harness another name"},
		},
		{
			name: "duplicate_key",
			src:  "stateDir: a\nstateDir: b\n",
			want: []string{"c.yaml:2:1: stateDir: key already defined at line 1"},
		},
		{
			name: "yaml_syntax",
			src:  "tmux: {socket: x\n",
			want: []string{"c.yaml:1: did not find expected ',' or '}'"},
		},
		{
			name: "empty_file",
			src:  "",
			want: []string{"c.yaml: " + emptyProblem("c.yaml")},
		},
		{
			name: "comments_only",
			src:  "# stateDir: /var/lib/loopd\n",
			want: []string{"c.yaml: the file holds no settings: loopd config init --force c.yaml writes a commented starter; " +
				"the least config names a harness (harnesses: {claude-code: {command: claude}}), the GitHub logins loopd acts for " +
				`(webhooks.ghWebhook.authorizedUsers) and a route (webhooks.ghWebhook.routing.repos: {"*": {harness: claude-code, workdir: "/srv/{{.Owner}}/{{.Repo}}/{{.Number}}"}})`},
		},
		{
			name: "two_documents",
			src:  "stateDir: a\n---\nstateDir: b\n",
			want: []string{"c.yaml:2: only one YAML document is allowed"},
		},
		{
			name: "alias_bomb",
			src: "a: &a [x, x, x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a, *a]\n" +
				"c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b, *b]\nd: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c, *c]\n" +
				"e: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d, *d]\nf: [*e, *e, *e, *e, *e, *e, *e, *e, *e, *e]\n",
			want: []string{"c.yaml:1:1: document expands to more than 100000 values (alias loop or alias bomb?)"},
		},
		{
			// Found by FuzzParse: refused after maxNodes levels, in minutes.
			name: "alias_loop",
			src:  "a: &x {b: *x}\n",
			want: []string{"c.yaml:1:1: document nests deeper than 100 levels (alias loop?)"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := Parse([]byte(tt.src), "c.yaml")
			require.Error(t, err)
			assert.Nil(t, cfg)
			assert.ErrorIs(t, err, ErrInvalid)
			var verr *ValidationError
			require.ErrorAs(t, err, &verr)
			got := make([]string, len(verr.Problems))
			for i, p := range verr.Problems {
				got[i] = p.String()
			}
			assert.Equal(t, tt.want, got)
			assert.Equal(t, strings.Join(tt.want, "\n"), err.Error())
		})
	}
}

func TestLoadMissingFile(t *testing.T) {
	_, err := Load(filepath.Join(t.TempDir(), "nope.yaml"))
	require.Error(t, err)
	assert.ErrorIs(t, err, fs.ErrNotExist)
	assert.NotErrorIs(t, err, ErrInvalid)
	assert.Contains(t, err.Error(), "nope.yaml")
}

func TestLoadRelativeStateDir(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "loopd.yaml")
	require.NoError(t, os.WriteFile(path, []byte("stateDir: data/loopd\n"), 0o600))
	cfg, err := Load(path)
	require.NoError(t, err)
	assert.Equal(t, filepath.Join(dir, "data", "loopd"), cfg.StateDir)
}

func TestSecretFilePath(t *testing.T) {
	dir := t.TempDir()
	env := map[string]string{"CREDENTIALS_DIRECTORY": "/run/credentials/loopd.service", "EMPTY": ""}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	for _, tc := range []struct {
		name, secretFile, want, err string
	}{
		{name: "unset", secretFile: ""},
		{name: "absolute", secretFile: "/etc/loopd/secret", want: "/etc/loopd/secret"},
		{name: "relative_to_the_config", secretFile: "secrets/hook", want: filepath.Join(dir, "secrets", "hook")},
		{name: "systemd_credential", secretFile: "${CREDENTIALS_DIRECTORY}/webhook-secret", want: "/run/credentials/loopd.service/webhook-secret"},
		{name: "dollar_without_braces_is_literal", secretFile: "/s/$HOME", want: "/s/$HOME"},
		{name: "unset_variable", secretFile: "${NOPE}/x", err: `webhooks.ghWebhook.secretFile "${NOPE}/x": environment variable NOPE is not set`},
		{name: "empty_variable", secretFile: "${EMPTY}/x", err: `webhooks.ghWebhook.secretFile "${EMPTY}/x": environment variable EMPTY is not set`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := "webhooks: {ghWebhook: {}}\n"
			if tc.secretFile != "" {
				src = fmt.Sprintf("webhooks: {ghWebhook: {secretFile: %q}}\n", tc.secretFile)
			}
			cfg, err := Parse([]byte(src), filepath.Join(dir, "loopd.yaml"))
			require.NoError(t, err)
			if tc.secretFile != "" {
				assert.Empty(t, cfg.Webhooks.GHWebhook.SecretEnv, "no default secretEnv beside secretFile")
			} else {
				assert.Equal(t, "LOOPD_WEBHOOK_SECRET", cfg.Webhooks.GHWebhook.SecretEnv)
			}
			got, err := cfg.SecretFilePath(lookup)
			if tc.err != "" {
				assert.EqualError(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}

func TestRoute(t *testing.T) {
	exact := Route{Harness: "exact", Workdir: "/e"}
	star := Route{Harness: "star", Workdir: "/s"}
	owner := Route{Harness: "owner", Workdir: "/o"}
	tests := []struct {
		name        string
		repos       map[string]Route
		owner, repo string
		want        Route
		wantOK      bool
	}{
		{name: "exact_wins_over_star", repos: map[string]Route{"octo/api": exact, "*": star}, owner: "octo", repo: "api", want: exact, wantOK: true},
		{name: "case_insensitive", repos: map[string]Route{"Octo/API": exact, "*": star}, owner: "octo", repo: "Api", want: exact, wantOK: true},
		{name: "star_fallback", repos: map[string]Route{"octo/api": exact, "*": star}, owner: "octo", repo: "web", want: star, wantOK: true},
		{name: "no_route", repos: map[string]Route{"octo/api": exact}, owner: "octo", repo: "web"},
		{name: "owner_is_not_a_prefix_match", repos: map[string]Route{"octo/api": exact}, owner: "octo/api", repo: ""},
		{name: "owner_wildcard_over_star", repos: map[string]Route{"Octo/*": owner, "*": star}, owner: "octo", repo: "web", want: owner, wantOK: true},
		{name: "exact_over_owner_wildcard", repos: map[string]Route{"octo/*": owner, "octo/api": exact}, owner: "octo", repo: "api", want: exact, wantOK: true},
		{name: "owner_wildcard_is_one_owner", repos: map[string]Route{"octo/*": owner}, owner: "other", repo: "api"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := Routing{Repos: tt.repos}.Route(tt.owner, tt.repo)
			assert.Equal(t, tt.wantOK, ok)
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestRenderWorkdir(t *testing.T) {
	tests := []struct {
		name        string
		workdir     string
		owner, repo string
		want        string
		wantErr     string
	}{
		{name: "all_fields", workdir: "/srv/{{.Owner}}/{{.Repo}}/{{.Kind}}-{{.Number}}", owner: "octo", repo: "api.go", want: "/srv/octo/api.go/pull_request-42"},
		{name: "cleaned", workdir: "/srv//{{.Repo}}/./x/", owner: "octo", repo: "api", want: "/srv/api/x"},
		{name: "relative", workdir: "{{.Repo}}", owner: "octo", repo: "api", wantErr: `"api" is not an absolute path`},
		{name: "dot_dot_repo", workdir: "/srv/{{.Repo}}", owner: "octo", repo: "..", wantErr: "not a GitHub owner/repo name"},
		{name: "slash_in_owner", workdir: "/srv/{{.Owner}}", owner: "a/b", repo: "api", wantErr: "not a GitHub owner/repo name"},
		{name: "unknown_field", workdir: "/srv/{{.Branch}}", owner: "octo", repo: "api", wantErr: "can't evaluate field Branch"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Route{Workdir: tt.workdir}.RenderWorkdir(tt.owner, tt.repo, 42, "pull_request")
			if tt.wantErr != "" {
				assert.ErrorContains(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestPolicyAccessorsOnZeroPolicy(t *testing.T) {
	var p Policy // built in code, not loaded: pointers are nil
	assert.True(t, p.Resume())
	assert.Equal(t, 5*time.Second, p.ProbeWindow())
}

// TestSchemaMatchesTypes checks that loopd.schema.json and the Config types
// name the same keys, and that the schema describes every key.
func TestSchemaMatchesTypes(t *testing.T) {
	var doc map[string]any
	require.NoError(t, json.Unmarshal(schemaJSON, &doc))
	compareSchema(t, "", reflect.TypeFor[Config](), doc)
}

func compareSchema(t *testing.T, path string, typ reflect.Type, node map[string]any) {
	t.Helper()
	switch typ.Kind() {
	case reflect.Pointer:
		compareSchema(t, path, typ.Elem(), node)
	case reflect.Struct:
		assert.Equal(t, false, node["additionalProperties"], "%s: additionalProperties", path)
		props, _ := node["properties"].(map[string]any)
		var fields []string
		for f := range typ.Fields() {
			if !f.IsExported() {
				continue // not a key
			}
			key := strings.Split(f.Tag.Get("yaml"), ",")[0]
			fields = append(fields, key)
			prop, ok := props[key].(map[string]any)
			if !assert.True(t, ok, "%s.%s: not in the schema", path, key) {
				continue
			}
			assert.NotEmpty(t, prop["description"], "%s.%s: no description", path, key)
			compareSchema(t, joinPath(path, key), f.Type, prop)
		}
		for key := range props {
			assert.True(t, slices.Contains(fields, key), "%s.%s: in the schema, not in the types", path, key)
		}
	case reflect.Map:
		value, ok := node["additionalProperties"].(map[string]any)
		if assert.True(t, ok, "%s: a map needs an additionalProperties schema", path) {
			compareSchema(t, path+".*", typ.Elem(), value)
		}
	case reflect.Slice:
		items, ok := node["items"].(map[string]any)
		if assert.True(t, ok, "%s: an array needs items", path) {
			compareSchema(t, path+"[]", typ.Elem(), items)
		}
	}
}
