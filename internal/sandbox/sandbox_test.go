package sandbox

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// testHost is a merged-/usr machine as Layout finds Debian's.
var testHost = Host{
	Bwrap: "/usr/bin/bwrap", Exe: "/usr/local/bin/loopd", Root: true,
	System: []Entry{{Path: "/usr"}, {Path: "/bin", Link: "usr/bin"}, {Path: "/lib", Link: "usr/lib"}, {Path: "/etc"}},
}

func TestWrap(t *testing.T) {
	base := Spec{Workdir: "/srv/agents/acme/api/42", Program: "/opt/claude/node_modules/@anthropic-ai/claude-code/bin/claude.exe"}
	root := []string{"/usr/bin/bwrap", "--die-with-parent", "--unshare-pid", "--unshare-ipc", "--cap-drop", "ALL"}
	system := []string{
		"--ro-bind", "/usr", "/usr", "--symlink", "usr/bin", "/bin", "--symlink", "usr/lib", "/lib", "--ro-bind", "/etc", "/etc",
		"--dev", "/dev", "--proc", "/proc", "--ro-bind", "/proc/sys", "/proc/sys", "--tmpfs", "/tmp", "--tmpfs", "/var/tmp", "--tmpfs", "/run",
	}
	exe := []string{"--ro-bind", "/usr/local/bin/loopd", "/usr/local/bin/loopd"}
	tail := []string{"--chdir", base.Workdir, "--", "/usr/local/bin/loopd", "sandbox-exec", "--path", base.Program, "--"}
	join := func(parts ...[]string) []string {
		var out []string
		for _, p := range parts {
			out = append(out, p...)
		}
		return out
	}
	work := []string{"--bind", base.Workdir, base.Workdir}
	cases := []struct {
		name string
		host func(Host) Host
		spec func(Spec) Spec
		want []string
	}{
		{
			name: "root_drops_capabilities_and_needs_no_user_namespace",
			want: join(root, system, exe, work, tail),
		},
		{
			name: "another_user_gets_a_user_namespace",
			host: func(h Host) Host { h.Root = false; return h },
			want: join(root[:4], []string{"--unshare-user", "--cap-drop", "ALL"}, system, exe, work, tail),
		},
		{
			name: "a_resolver_link_into_run_is_shown_read_only",
			host: func(h Host) Host { h.Extra = []string{"/run/systemd/resolve/stub-resolv.conf"}; return h },
			want: join(root, system[:12], []string{"--ro-bind", "/run/systemd/resolve/stub-resolv.conf", "/run/systemd/resolve/stub-resolv.conf"},
				system[12:], exe, work, tail),
		},
		{
			name: "home_and_tmpdir_are_private",
			spec: func(s Spec) Spec { s.Private = []string{"/root", "/tmp/loopd-tmp", "/tmp"}; return s },
			want: join(root, system, []string{"--tmpfs", "/root", "--tmpfs", "/tmp/loopd-tmp"}, exe, work, tail),
		},
		{
			name: "install_dir_read_only_then_read_write_paths_workdir_and_channel",
			spec: func(s Spec) Spec {
				s.ReadOnly = []string{"/opt/claude/node_modules"}
				s.ReadWrite = []string{"/srv/mirrors/acme/api.git"}
				s.Channel = "/var/lib/loopd/channels/loop-acme-api-42"
				return s
			},
			want: join(root, system, exe, []string{"--ro-bind", "/opt/claude/node_modules", "/opt/claude/node_modules",
				"--bind", "/srv/mirrors/acme/api.git", "/srv/mirrors/acme/api.git"}, work,
				[]string{"--bind", "/var/lib/loopd/channels/loop-acme-api-42", "/var/lib/loopd/channels/loop-acme-api-42"}, tail),
		},
		{
			name: "binds_come_last_in_order_a_per_item_view_under_its_shared_dir",
			spec: func(s Spec) Spec {
				s.Binds = []Bind{
					{Source: "/var/lib/loopd/claude/loopd-items/42-ab12", Target: "/var/lib/loopd/claude", Write: true},
					{Source: "/var/lib/loopd/claude/projects/-srv-agents-acme-api-42", Write: true},
					{Source: "/home/operator/.gitconfig"},
				}
				return s
			},
			want: join(root, system, exe, work, []string{
				"--bind", "/var/lib/loopd/claude/loopd-items/42-ab12", "/var/lib/loopd/claude",
				"--bind", "/var/lib/loopd/claude/projects/-srv-agents-acme-api-42", "/var/lib/loopd/claude/projects/-srv-agents-acme-api-42",
				"--ro-bind", "/home/operator/.gitconfig", "/home/operator/.gitconfig",
			}, tail),
		},
		{
			name: "a_hidden_dir_is_covered_after_each_bind_that_holds_it",
			spec: func(s Spec) Spec {
				s.Hide = []string{"/etc/loopd", "/srv/agents/state"}
				s.Mask = []string{"/etc/loopd.yaml"}
				s.Workdir = "/srv/agents"
				return s
			},
			want: join(root, system[:9], []string{"--ro-bind", "/etc", "/etc", "--tmpfs", "/etc/loopd", "--ro-bind", "/dev/null", "/etc/loopd.yaml"},
				system[12:], exe, []string{"--bind", "/srv/agents", "/srv/agents", "--tmpfs", "/srv/agents/state"},
				[]string{"--chdir", "/srv/agents"}, tail[2:]),
		},
		{
			name: "a_bind_at_another_path_covers_the_hidden_path_where_it_shows_it",
			spec: func(s Spec) Spec {
				s.Hide = []string{"/data/state"}
				s.Binds = []Bind{{Source: "/data", Target: "/mnt/data"}}
				return s
			},
			want: join(root, system, exe, work, []string{"--ro-bind", "/data", "/mnt/data", "--tmpfs", "/mnt/data/state"}, tail),
		},
		{
			name: "what_lies_inside_a_hidden_dir_is_loopds_to_show",
			spec: func(s Spec) Spec {
				s.Hide = []string{"/var/lib/loopd"}
				s.Workdir = "/var/lib/loopd/workspaces/acme/api/42"
				return s
			},
			want: join(root, system, exe, []string{"--bind", "/var/lib/loopd/workspaces/acme/api/42", "/var/lib/loopd/workspaces/acme/api/42",
				"--chdir", "/var/lib/loopd/workspaces/acme/api/42"}, tail[2:]),
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h, s := testHost, base
			if c.host != nil {
				h = c.host(h)
			}
			if c.spec != nil {
				s = c.spec(s)
			}
			got, err := h.Wrap(s)
			require.NoError(t, err)
			assert.Equal(t, c.want, got)
		})
	}
}

func TestWrapRefuses(t *testing.T) {
	ok := Spec{Workdir: "/srv/w", Program: "/usr/bin/claude"}
	cases := []struct {
		name string
		host func(Host) Host
		spec func(Spec) Spec
		want string
	}{
		{name: "no_workdir", spec: func(s Spec) Spec { s.Workdir = ""; return s }, want: "no workdir"},
		{name: "no_program", spec: func(s Spec) Spec { s.Program = ""; return s }, want: "no workdir or program"},
		{name: "no_bwrap", host: func(h Host) Host { h.Bwrap = ""; return h }, want: "no bwrap"},
		{name: "relative_path", spec: func(s Spec) Spec { s.ReadOnly = []string{"tools"}; return s }, want: `"tools" is not absolute`},
		{name: "unclean_path", spec: func(s Spec) Spec { s.Workdir = "/srv/w/../x"; return s }, want: "not absolute and clean"},
		{name: "unclean_bind_target", spec: func(s Spec) Spec { s.Binds = []Bind{{Source: "/a", Target: "/b/"}}; return s }, want: `"/b/"`},
		{name: "a_hidden_dir_itself", spec: func(s Spec) Spec {
			s.Hide = []string{"/var/lib/loopd"}
			s.Binds = []Bind{{Source: "/var/lib/loopd"}}
			return s
		}, want: "/var/lib/loopd is hidden"},
		{name: "a_masked_file_itself", spec: func(s Spec) Spec {
			s.Mask = []string{"/etc/loopd/secret"}
			s.ReadOnly = []string{"/etc/loopd/secret"}
			return s
		}, want: "/etc/loopd/secret is hidden"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h, s := testHost, ok
			if c.host != nil {
				h = c.host(h)
			}
			if c.spec != nil {
				s = c.spec(s)
			}
			_, err := h.Wrap(s)
			require.ErrorIs(t, err, ErrBadSpec)
			assert.Contains(t, err.Error(), c.want)
		})
	}
}

// TestWrapNeverCarriesTheEnvironment: the harness's environment reaches
// it through execve, never bwrap's --setenv (argv is world-readable).
func TestWrapNeverCarriesTheEnvironment(t *testing.T) {
	got, err := testHost.Wrap(Spec{Workdir: "/w", Program: "/usr/bin/env"})
	require.NoError(t, err)
	for _, a := range got {
		assert.NotContains(t, []string{"--setenv", "--unsetenv", "--clearenv"}, a)
		assert.False(t, strings.Contains(a, "="), "no NAME=value in argv: %q", a)
	}
	assert.NotContains(t, got, "--new-session", "the harness keeps the pane's terminal as its controlling one")
}

func TestWithin(t *testing.T) {
	assert.True(t, Within("/a/b", "/a"))
	assert.True(t, Within("/a", "/a"))
	assert.True(t, Within("/a", "/"))
	assert.False(t, Within("/ab", "/a"))
	assert.False(t, Within("/a", "/a/b"))
	assert.True(t, Overlaps("/a", "/a/b"))
	assert.True(t, Overlaps("/a/b", "/a"))
	assert.False(t, Overlaps("/a/b", "/a/c"))
}

// A signal inside the sandbox reaches the pane as bwrap's 128+N: ExitOf
// reads it as the signal; any other status stays itself.
func TestExitOf(t *testing.T) {
	for status, want := range map[int][2]int{137: {0, 9}, 129: {0, 1}, 143: {0, 15}, 192: {0, 64}, 128: {128, 0}, 193: {193, 0}, 1: {1, 0}, 0: {0, 0}} {
		exit, signal := ExitOf(status)
		assert.Equal(t, want, [2]int{exit, signal}, "status %d", status)
	}
}
