// Package ghapi is loopd's side of GitHub's REST API: a client built on
// google/go-github (a token, or a GitHub App installation through
// bradleyfalzon/ghinstallation) that sends the calls of the outbox, and
// the worker that drains the outbox with bounded, backed-off retries.
//
// Its name keeps it apart from go-github's package, github, in imports.
package ghapi

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/bradleyfalzon/ghinstallation/v2"
	"github.com/google/go-github/v84/github"

	"github.com/loopd/loopd/desired"
)

// ErrNoCredentials means Credentials name neither a token nor an App.
var ErrNoCredentials = errors.New("no GitHub credentials")

// Credentials authenticate loopd to GitHub: a token, or a GitHub App
// (AppID and the App's PEM private key), never both. An App's calls go
// through the installation each item's deliveries came through
// (desired.Spec.Installation); InstallationID, optional, is the one for an
// item none named, which GitHub is otherwise asked for (installations).
// They are daemon secrets: never logged, never in an argv or a pane.
// BotLogin, no secret, is the login they post as when the config names it
// (github.botLogin); "" asks GitHub (Client.Login).
type Credentials struct {
	Token          string
	AppID          int64
	InstallationID int64
	PrivateKey     []byte
	BotLogin       string
}

// Client sends loopd's calls to GitHub's REST API. It is safe for
// concurrent use.
type Client struct {
	// gh is the token's client, nil with an App.
	gh *github.Client
	// app authenticates as the App itself (a JWT), for GET /app and the
	// installation lookup; installs says which installation a call goes
	// through, and byID holds each one's client, made on first use with
	// its own token (appTransport); all nil or empty with a token.
	app        *github.Client
	installs   *installations
	newInstall func(id int64) (*installClient, error)
	imu        sync.Mutex
	byID       map[int64]*installClient
	// configured is Credentials.BotLogin; login the bot login once known
	// (BotLogin), under mu, and known the same, read without mu (Known).
	configured string
	mu         sync.Mutex
	login      string
	known      atomic.Pointer[string]
}

// installClient is the client of one installation and its token's
// transport.
type installClient struct {
	gh *github.Client
	tr *appTransport
}

// New returns a client of the REST API at apiURL (https://api.github.com,
// or a GitHub Enterprise Server's https://HOST/api/v3, through go-github's
// WithEnterpriseURLs) authenticated by cred. base is the transport under
// the authentication (nil: http.DefaultTransport); timeout bounds each
// request. The error wraps ErrNoCredentials when cred is empty, and names
// a private key that does not parse.
//
// An App's installation token, one per installation, is minted anew
// schema.GitHubTokenRefreshMargin before it expires by GitHub's clock,
// which the Date of GitHub's answers shows (a local clock minutes off
// GitHub's neither lets a token run out nor makes GitHub refuse the App's
// JWT); a call GitHub answers 401 mints another and is sent once more.
func New(apiURL string, cred Credentials, base http.RoundTripper, timeout time.Duration) (*Client, error) {
	return newClient(apiURL, cred, base, timeout, time.Now)
}

// newClient is New with now the local clock.
func newClient(apiURL string, cred Credentials, base http.RoundTripper, timeout time.Duration, now func() time.Time) (*Client, error) {
	if base == nil {
		base = http.DefaultTransport
	}
	apiURL = strings.TrimRight(apiURL, "/")
	c := &Client{configured: cred.BotLogin}
	var err error
	switch {
	case cred.Token != "" && cred.AppID != 0:
		return nil, errors.New("github client: a token and an App: use one")
	case cred.Token != "":
		if c.gh, err = restClient(apiURL, base, timeout); err == nil {
			c.gh = c.gh.WithAuthToken(cred.Token)
			c.gh.DisableRateLimitCheck = true // the copy left it out
		}
	case cred.AppID != 0:
		_, atr, aerr := newAppTransport(base, cred.AppID, 0, nil, cred.PrivateKey, apiURL, now)
		if aerr != nil {
			return nil, fmt.Errorf("github app %d: %w", cred.AppID, aerr)
		}
		if c.app, err = restClient(apiURL, atr, timeout); err != nil {
			break
		}
		c.installs = &installations{fixed: cred.InstallationID, app: c.app, repos: map[string]int64{}}
		c.byID = map[int64]*installClient{}
		c.newInstall = func(id int64) (*installClient, error) {
			itr, _, err := newAppTransport(base, cred.AppID, id, nil, cred.PrivateKey, apiURL, now)
			if err != nil {
				return nil, err
			}
			gh, err := restClient(apiURL, itr, timeout)
			return &installClient{gh: gh, tr: itr}, err
		}
	default:
		return nil, fmt.Errorf("github client: %w", ErrNoCredentials)
	}
	if err != nil {
		return nil, fmt.Errorf("github client %s: %w", apiURL, err)
	}
	return c, nil
}

// installation returns the client of installation id, made on first use.
func (c *Client) installation(id int64) (*installClient, error) {
	c.imu.Lock()
	defer c.imu.Unlock()
	if ic, ok := c.byID[id]; ok {
		return ic, nil
	}
	ic, err := c.newInstall(id)
	if err != nil {
		return nil, fmt.Errorf("github installation %d: %w", id, err)
	}
	c.byID[id] = ic
	return ic, nil
}

// rest returns the client call goes through and the installation's id:
// the token's (id 0), or the installation's of call's repository
// (installations.of).
func (c *Client) rest(ctx context.Context, call desired.Call) (*github.Client, int64, error) {
	if c.installs == nil {
		return c.gh, 0, nil
	}
	id, err := c.installs.of(ctx, call.Installation, call.Key.Owner, call.Key.Repo)
	if err != nil {
		return nil, 0, err
	}
	ic, err := c.installation(id)
	if err != nil {
		return nil, 0, err
	}
	return ic.gh, id, nil
}

// Installation names the installation whose rate limits call counts
// against (Limits): "installation <id>" for a GitHub App's (the one of
// its repository, installations.of), "token" for a token's. The error is
// the lookup's, as Send's would be.
func (c *Client) Installation(ctx context.Context, call desired.Call) (string, error) {
	_, id, err := c.rest(ctx, call)
	switch {
	case err != nil:
		return "", err
	case c.installs == nil:
		return "token", nil
	}
	return "installation " + strconv.FormatInt(id, 10), nil
}

// Login returns the login the credentials belong to: the token's user
// (GET /user), or the App's slug followed by "[bot]" (GET /app, as the App
// itself), the login GitHub shows on what the installation posts. It is
// the default bot login (schema.GitHub.BotLogin), whose comments are never
// delivered to an agent.
func (c *Client) Login(ctx context.Context) (string, error) {
	if c.app != nil {
		app, _, err := c.app.Apps.Get(ctx, "")
		if err != nil {
			return "", fmt.Errorf("github get app: %w", err)
		}
		if app.GetSlug() == "" {
			return "", errors.New("github get app: no slug")
		}
		return app.GetSlug() + "[bot]", nil
	}
	u, _, err := c.gh.Users.Get(ctx, "")
	if err != nil {
		return "", fmt.Errorf("github get user: %w", err)
	}
	if u.GetLogin() == "" {
		return "", errors.New("github get user: no login")
	}
	return u.GetLogin(), nil
}

// BotLogin returns the login loopd posts as: Credentials.BotLogin when it
// is set, and otherwise the login the credentials belong to (Login), asked
// once and then remembered. The webhook handler never delivers its
// comments to an agent, and only its comments count when a call looks for
// its marker (Send).
func (c *Client) BotLogin(ctx context.Context) (string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.login != "" {
		return c.login, nil
	}
	login := c.configured
	if login == "" {
		var err error
		if login, err = c.Login(ctx); err != nil {
			return "", err
		}
	}
	c.login = login
	c.known.Store(&login)
	return login, nil
}

// Known returns the bot login once BotLogin has learned it (at the start
// check, at its retries, or when a call looked for its marker), "" before;
// it never waits for GitHub.
func (c *Client) Known() string {
	if l := c.known.Load(); l != nil {
		return *l
	}
	return ""
}

// Check proves the credentials at start and returns the bot login
// (BotLogin): an App with a configured installation id first gets its
// token (POST /app/installations/{id}/access_tokens, through
// ghinstallation's installation transport), so that a wrong installation
// id is refused here rather than on every later call (an App without one
// proves its key with GET /app); a configured bot login is compared
// with the login the credentials belong to (Login), and another one is
// ErrLoginMismatch. The error is otherwise what Classify reads.
func (c *Client) Check(ctx context.Context) (string, error) {
	if c.installs != nil && c.installs.fixed != 0 {
		ic, err := c.installation(c.installs.fixed)
		if err == nil {
			_, err = ic.tr.Token(ctx)
		}
		if err != nil {
			return "", fmt.Errorf("github app installation %d: %w", c.installs.fixed, err)
		}
	}
	if c.configured != "" {
		// A configured login the credentials do not post as would make
		// Send miss loopd's own comments (a second announcement after a
		// kill) and the webhook filter let them through. GitHub out of
		// reach, or a token GET /user refuses, leaves the configured one.
		if own, err := c.Login(ctx); err == nil && !strings.EqualFold(own, c.configured) {
			return "", fmt.Errorf("%w: github.botLogin is %q, the credentials post as %q", ErrLoginMismatch, c.configured, own)
		}
	}
	return c.BotLogin(ctx)
}

// ErrLoginMismatch is Check's error when github.botLogin names another
// login than the one the credentials post as.
var ErrLoginMismatch = errors.New("bot login is not the credentials' login")

// Sent is what GitHub answered a call that succeeded.
type Sent struct {
	HTTPStatus int
	URL        string // the comment's html_url; "" for a reaction
	// Found is true when the comment was already there (its marker was
	// found among the item's comments) and nothing was posted.
	Found bool
}

// Send makes call c: an announcement or a notice is posted as a comment
// on the item, unless a comment of the item by the bot login (BotLogin)
// already carries its marker (a daemon killed between the post and its
// record; anyone else's copy of a marker counts for nothing); a reaction adds
// "eyes" to a comment or to the item. The error is go-github's
// (*github.ErrorResponse, *github.RateLimitError,
// *github.AbuseRateLimitError) or the transport's, wrapped with the
// operation and the item; Classify says what it means.
func (c *Client) Send(ctx context.Context, call desired.Call) (Sent, error) {
	k := call.Key
	gh, _, err := c.rest(ctx, call)
	if err != nil {
		return Sent{}, err
	}
	switch call.Kind {
	case desired.CallAnnounce, desired.CallNotify:
		if call.Marker != "" {
			found, err := c.hasMarker(ctx, gh, k, call.Marker)
			if err != nil {
				return Sent{}, err
			}
			if found {
				return Sent{Found: true}, nil
			}
		}
		cm, resp, err := gh.Issues.CreateComment(ctx, k.Owner, k.Repo, k.Number, &github.IssueComment{Body: github.Ptr(call.Body)})
		if err != nil {
			return Sent{}, fmt.Errorf("github comment on %s: %w", k, err)
		}
		return Sent{HTTPStatus: resp.StatusCode, URL: cm.GetHTMLURL()}, nil
	case desired.CallReact:
		var (
			resp *github.Response
			err  error
		)
		switch call.Target.Kind {
		case desired.SourceIssueComment:
			_, resp, err = gh.Reactions.CreateIssueCommentReaction(ctx, k.Owner, k.Repo, call.Target.ID, desired.ReactionEyes)
		case desired.SourceReviewComment:
			_, resp, err = gh.Reactions.CreatePullRequestCommentReaction(ctx, k.Owner, k.Repo, call.Target.ID, desired.ReactionEyes)
		case desired.SourceItem:
			_, resp, err = gh.Reactions.CreateIssueReaction(ctx, k.Owner, k.Repo, k.Number, desired.ReactionEyes)
		default:
			return Sent{}, fmt.Errorf("github react on %s: %w: %q", k, errUnknownTarget, call.Target.Kind)
		}
		if err != nil {
			return Sent{}, fmt.Errorf("github react on %s %s %d: %w", k, call.Target.Kind, call.Target.ID, err)
		}
		return Sent{HTTPStatus: resp.StatusCode}, nil
	}
	return Sent{}, fmt.Errorf("github call on %s: %w: %q", k, errUnknownCall, call.Kind)
}

// Errors of calls the outbox should not hold: never retried.
var (
	errUnknownTarget = errors.New("unknown reaction target")
	errUnknownCall   = errors.New("unknown call")
)

// commentsPerPage is the page size of a comment listing, GitHub's largest.
const commentsPerPage = 100

// hasMarker reports whether a comment of item k by the bot login
// (BotLogin, compared case-insensitively as GitHub's logins are) carries
// marker, reading every page of its comments
// (GET /repos/{owner}/{repo}/issues/{n}/comments) through gh.
func (c *Client) hasMarker(ctx context.Context, gh *github.Client, k desired.Key, marker string) (bool, error) {
	login, err := c.BotLogin(ctx)
	if err != nil {
		return false, fmt.Errorf("github comments of %s: %w", k, err)
	}
	opts := &github.IssueListCommentsOptions{ListOptions: github.ListOptions{PerPage: commentsPerPage}}
	for {
		comments, resp, err := gh.Issues.ListComments(ctx, k.Owner, k.Repo, k.Number, opts)
		if err != nil {
			return false, fmt.Errorf("github list comments of %s: %w", k, err)
		}
		for _, cm := range comments {
			if strings.EqualFold(cm.GetUser().GetLogin(), login) && strings.Contains(cm.GetBody(), marker) {
				return true, nil
			}
		}
		if resp.NextPage == 0 {
			return false, nil
		}
		opts.Page = resp.NextPage
	}
}

// Verdict is what a failed call's error means for the outbox.
type Verdict struct {
	// Retry is true for a 5xx, a rate limit (primary or secondary, 403 or
	// 429) and a request that got no answer; false for any other 4xx
	// (401, 404, 422…) and a call loopd cannot make.
	Retry bool
	// After is how long GitHub asked to wait (Retry-After, or until
	// X-RateLimit-Reset), 0 when it named nothing.
	After time.Duration
	// HTTPStatus is GitHub's status code, 0 when no answer came; Message
	// is GitHub's message, or the error's text.
	HTTPStatus int
	Message    string
	// Limit is the rate limit the call met (Limits), "" for none: a
	// secondary limit pauses the installation's content writes, a primary
	// one all its calls.
	Limit LimitKind
}

// Classify says whether err, returned by Send, is worth another try and
// when, from go-github's typed errors: RateLimitError (X-RateLimit-Remaining
// 0: a primary limit, wait until X-RateLimit-Reset), AbuseRateLimitError (a
// secondary rate limit: its Retry-After), ErrorResponse (a 5xx is retried;
// a 403 or 429 whose message says secondary rate limit, any 429, and any
// answer that carries Retry-After are a secondary limit too, as GitHub
// documents them,
// https://docs.github.com/en/rest/using-the-rest-api/rate-limits-for-the-rest-api).
// An App's installation token that could not be had is ghinstallation's
// HTTPError: with GitHub's answer in it, that answer is read as go-github
// reads any other (github.CheckResponse), so a 404 for a wrong
// installation id is not retried; without one, no answer came.
// now is the clock X-RateLimit-Reset is measured against.
func Classify(err error, now time.Time) Verdict {
	var (
		rl    *github.RateLimitError
		abuse *github.AbuseRateLimitError
		er    *github.ErrorResponse
		he    *ghinstallation.HTTPError
	)
	if errors.As(err, &he) && he.Response != nil && !errors.As(err, &er) {
		if gerr := github.CheckResponse(he.Response); gerr != nil {
			v := Classify(gerr, now)
			v.Message = fmt.Sprintf("installation %d token: %s", he.InstallationID, v.Message)
			return v
		}
	}
	switch {
	case errors.As(err, &rl):
		v := Verdict{Retry: true, Message: rl.Message, HTTPStatus: status(rl.Response), Limit: desired.PausePrimary}
		if !rl.Rate.Reset.IsZero() {
			v.After = max(rl.Rate.Reset.Sub(now), 0)
		}
		return v
	case errors.As(err, &abuse):
		v := Verdict{Retry: true, Message: abuse.Message, HTTPStatus: status(abuse.Response), Limit: desired.PauseSecondary}
		if abuse.RetryAfter != nil {
			v.After = max(*abuse.RetryAfter, 0)
		}
		return v
	case errors.As(err, &er):
		code := status(er.Response)
		v := Verdict{HTTPStatus: code, Message: er.Message, Retry: code >= 500}
		if v.Message == "" {
			v.Message = http.StatusText(code)
		}
		limited := code == http.StatusTooManyRequests ||
			(code == http.StatusForbidden && strings.Contains(strings.ToLower(er.Message), "secondary rate limit"))
		if er.Response != nil {
			if d, ok := retryAfter(er.Response.Header.Get("Retry-After"), now); ok {
				limited, v.After = true, d
			}
		}
		if limited {
			v.Retry, v.Limit = true, desired.PauseSecondary
		}
		return v
	case errors.Is(err, errUnknownTarget), errors.Is(err, errUnknownCall):
		return Verdict{Message: err.Error()}
	}
	// No answer: a network error, a timeout, a closed connection.
	return Verdict{Retry: true, Message: err.Error()}
}

func status(r *http.Response) int {
	if r == nil {
		return 0
	}
	return r.StatusCode
}

// retryAfter parses a Retry-After header: delay-seconds or an HTTP-date
// (RFC 9110, section 10.2.3).
func retryAfter(v string, now time.Time) (time.Duration, bool) {
	if v == "" {
		return 0, false
	}
	if secs, err := strconv.ParseInt(v, 10, 64); err == nil && secs >= 0 {
		return time.Duration(secs) * time.Second, true
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(t.Sub(now), 0), true
	}
	return 0, false
}
