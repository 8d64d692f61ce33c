package main

import (
	"maps"
	"slices"

	"github.com/loopd/loopd/internal/paneenv"
	"github.com/loopd/loopd/schema"
)

// secretsFDEnv names the file descriptor a re-executed loopd reads, at
// start, the values of the variables its first exec held and its
// environment no longer shows (scrubEnviron).
const secretsFDEnv = "LOOPD_SECRETS_FD"

// secretsFileName is the name of the anonymous file (memfd) that carries
// them: a descriptor named in secretsFDEnv that is not such a file is not
// read.
const secretsFileName = "loopd-secrets"

// maxSecretsFile caps what a re-executed loopd reads of it, in bytes.
const maxSecretsFile = 1 << 20

// reexecuted is set once this loopd took the values its first exec handed
// over (takeInherited): its environment block holds none of them, and it
// is not re-executed again.
var reexecuted bool

// secretEnvNames returns the variables of loopd's environment that hold
// what no other process may read in /proc/<pid>/environ, under cfg: the
// webhook secret's (secretEnv, without secretFile), the GitHub token's
// (github.tokenEnv, without an App), and the harnesses' passEnv (an API
// key meant for one harness), but not the base variables every pane gets
// anyway (paneenv.Base).
func secretEnvNames(cfg *schema.Config) []string {
	names := map[string]bool{}
	if gh := cfg.Webhooks.GHWebhook; gh.SecretFile == "" && gh.SecretEnv != "" {
		names[gh.SecretEnv] = true
	}
	if g := cfg.GitHub; g != nil && g.App == nil && g.TokenEnv != "" {
		names[g.TokenEnv] = true
	}
	for _, h := range cfg.Harnesses {
		for _, n := range h.PassEnv {
			if !slices.Contains(paneenv.Base, n) {
				names[n] = true
			}
		}
	}
	return slices.Sorted(maps.Keys(names))
}
