package ghapi

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/google/go-github/v84/github"
)

// installations says which installation of a GitHub App a call on a
// repository goes through (of), the one rule for the outbox's calls
// (Client) and the agents' tokens (Minter). It is safe for concurrent use.
type installations struct {
	// fixed is Credentials.InstallationID, 0 when the config names none;
	// app is the App's own client (its JWT), for GitHub's lookup.
	fixed int64
	app   *github.Client

	mu sync.Mutex
	// repos holds each installation GitHub's lookup named, by
	// "owner/repo" in lower case (GitHub's names ignore case).
	repos map[string]int64
}

// of returns the installation a call on owner/repo goes through: known,
// the one its item's delivery named (desired.Spec.Installation), when not
// 0; else the configured one (github.app.installationID); else the one
// GitHub names for the repository (GET /repos/{owner}/{repo}/installation,
// as the App), asked once per repository. The error is go-github's
// (a 404: the App is not installed there).
func (i *installations) of(ctx context.Context, known int64, owner, repo string) (int64, error) {
	switch {
	case known != 0:
		return known, nil
	case i.fixed != 0:
		return i.fixed, nil
	}
	key := strings.ToLower(owner + "/" + repo)
	i.mu.Lock()
	id, ok := i.repos[key]
	i.mu.Unlock()
	if ok {
		return id, nil
	}
	inst, _, err := i.app.Apps.FindRepositoryInstallation(ctx, owner, repo)
	if err != nil {
		return 0, fmt.Errorf("github installation of %s/%s: %w", owner, repo, err)
	}
	if inst.GetID() == 0 {
		return 0, fmt.Errorf("github installation of %s/%s: no id in the answer", owner, repo)
	}
	i.mu.Lock()
	i.repos[key] = inst.GetID()
	i.mu.Unlock()
	return inst.GetID(), nil
}

// restClient returns a go-github client of the REST API at apiURL
// (https://api.github.com, or a GitHub Enterprise Server's
// https://HOST/api/v3, through WithEnterpriseURLs) over rt, each request
// bounded by timeout. go-github's own rate-limit check is off: the limits
// are the worker's (Limits), one record per installation kept in the
// store, where go-github's would refuse calls by its memory of an answer,
// on its own clock.
func restClient(apiURL string, rt http.RoundTripper, timeout time.Duration) (*github.Client, error) {
	gh := github.NewClient(&http.Client{Transport: rt, Timeout: timeout})
	if apiURL != "" && apiURL != "https://api.github.com" {
		var err error
		if gh, err = gh.WithEnterpriseURLs(apiURL, apiURL); err != nil {
			return nil, err
		}
	}
	gh.DisableRateLimitCheck = true // set on the copy: go-github's copies leave it out
	return gh, nil
}
