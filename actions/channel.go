package actions

import (
	"fmt"
	"maps"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/loopd/loopd/desired"
	"github.com/loopd/loopd/internal/channel"
	"github.com/loopd/loopd/internal/harness"
	"github.com/loopd/loopd/internal/launch"
	"github.com/loopd/loopd/schema"
)

// AgentCredentials is what credential a spawn's agent may ask loopd for
// over its channel, by its route (schema.Route.Credentials): none, or, for
// its repository at URL (the route's checkout URL), a scoped installation
// token (schema.AgentCredentialsApp) or loopd's own token
// (schema.AgentCredentialsToken); GH gives the agent's gh one too.
type AgentCredentials struct {
	Mode string
	URL  string
	GH   bool
}

// CredentialCommand is the loopd subcommand that is git's credential
// helper in an agent's environment.
const CredentialCommand = "credential"

// harnessEnv returns the environment r's harness gets for the spawn of
// session, on top of what every pane gets: the adapter's (its config env,
// passEnv and what the adapter needs), the item's harness state (state:
// a per-item home, harness.ItemState), the work item, and, with a channel
// root, the item's channel (made if need be, channel.Prepare) and the
// spawn's token, with the git configuration that makes git ask loopd for
// the credential the route allows (credentialEnv). base is the PATH the
// harness starts with, for gh.
func (e *Executor) harnessEnv(r *desired.Record, ad harness.Adapter, state map[string]string, session, token string, base []string) (map[string]string, error) {
	env := maps.Clone(ad.Env())
	if env == nil {
		env = map[string]string{}
	}
	maps.Copy(env, state)
	env[channel.EnvWorkItem] = r.Key.String()
	if e.Channels == "" {
		return env, nil
	}
	dir, err := channel.Prepare(e.Channels, session)
	if err != nil {
		return nil, err
	}
	env[channel.EnvDir], env[channel.EnvToken] = dir, token
	if e.Credentials != nil {
		if err := e.credentialEnv(env, dir, e.Credentials(*r), base); err != nil {
			return nil, err
		}
	}
	if e.OpenChannel != nil {
		e.OpenChannel(r.Key, dir)
	}
	return env, nil
}

// credentialEnv adds to env what makes the agent's git ask loopd for its
// credential (c) at the moment of use: for the http(s) origin of c.URL,
// git's configuration (GIT_CONFIG_COUNT, git-config(1), after any the
// harness's env holds) resets the credential helpers of lower scopes (the
// operator's own) and names "loopd credential" the helper, with the path
// sent (useHttpPath) so that loopd refuses another repository. With c.GH,
// a gh on the harness's PATH is put behind a wrapper in the channel's bin
// directory that asks loopd for a token at each run (ghWrapper). Nothing
// is added without a credential to give, nor for a URL that is not
// http(s) (ssh keys are not handed out).
func (e *Executor) credentialEnv(env map[string]string, dir string, c AgentCredentials, base []string) error {
	if c.Mode == "" || c.Mode == schema.AgentCredentialsNone {
		return nil
	}
	u, err := url.Parse(c.URL)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return nil
	}
	origin := u.Scheme + "://" + u.Host
	helper := "!" + launch.ShellQuote(e.Launcher.Exe) + " " + CredentialCommand
	n, _ := strconv.Atoi(env["GIT_CONFIG_COUNT"])
	n = max(n, 0)
	for _, kv := range [][2]string{
		{"credential." + origin + ".helper", ""},
		{"credential." + origin + ".helper", helper},
		{"credential." + origin + ".useHttpPath", "true"},
	} {
		env["GIT_CONFIG_KEY_"+strconv.Itoa(n)], env["GIT_CONFIG_VALUE_"+strconv.Itoa(n)] = kv[0], kv[1]
		n++
	}
	env["GIT_CONFIG_COUNT"] = strconv.Itoa(n)
	if c.GH {
		return e.ghWrapper(env, dir, u.Host, base)
	}
	return nil
}

// ghBin is the directory in a channel that holds the gh wrapper.
const ghBin = "bin"

// ghWrapper writes a gh into the channel's bin directory that runs the gh
// found on the harness's PATH with a token loopd hands out at that moment
// (GH_TOKEN; GH_ENTERPRISE_TOKEN and GH_HOST for another host than
// github.com), and puts the directory first on the harness's PATH: an
// installation token lasts an hour, so a value fixed at spawn would not
// do. Without a gh on the PATH there is nothing to wrap.
func (e *Executor) ghWrapper(env map[string]string, dir, host string, base []string) error {
	path, ok := env["PATH"]
	if !ok {
		path = lookupEnv(base, "PATH")
	}
	bin := filepath.Join(dir, ghBin)
	gh := lookPath("gh", path, bin)
	if gh == "" {
		return nil
	}
	exports := `GH_TOKEN="$t"`
	if host != "github.com" {
		exports = `GH_ENTERPRISE_TOKEN="$t" GH_HOST=` + launch.ShellQuote(host)
	}
	script := "#!/bin/sh\n# gh with a token loopd hands out now (agentCredentials); written at each spawn.\n" +
		"t=$(" + launch.ShellQuote(e.Launcher.Exe) + " " + CredentialCommand + " token) || exit 1\n" +
		"export " + exports + "\n" +
		"exec " + launch.ShellQuote(gh) + ` "$@"` + "\n"
	if err := os.MkdirAll(bin, 0o700); err != nil {
		return fmt.Errorf("gh wrapper: %w", err)
	}
	tmp := filepath.Join(bin, ".gh.tmp")
	if err := os.WriteFile(tmp, []byte(script), 0o700); err != nil {
		return fmt.Errorf("gh wrapper: %w", err)
	}
	if err := os.Rename(tmp, filepath.Join(bin, "gh")); err != nil {
		return fmt.Errorf("gh wrapper: %w", err)
	}
	env["PATH"] = bin + string(os.PathListSeparator) + path
	return nil
}

// lookupEnv returns the value of name in environ (NAME=value entries, the
// last one winning), "" when absent.
func lookupEnv(environ []string, name string) string {
	for _, kv := range slices.Backward(environ) {
		if v, ok := strings.CutPrefix(kv, name+"="); ok {
			return v
		}
	}
	return ""
}

// lookPath returns the absolute path of the executable file name in the
// directories of path, skipping the directory skip; "" when none.
func lookPath(name, path, skip string) string {
	for _, d := range filepath.SplitList(path) {
		if d == "" || !filepath.IsAbs(d) || d == skip {
			continue
		}
		p := filepath.Join(d, name)
		if info, err := os.Stat(p); err == nil && info.Mode().IsRegular() && info.Mode()&0o111 != 0 {
			if _, err := exec.LookPath(p); err == nil {
				return p
			}
		}
	}
	return ""
}
