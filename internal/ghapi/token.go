package ghapi

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/bradleyfalzon/ghinstallation/v2"
	jwt "github.com/golang-jwt/jwt/v4"
	ghv88 "github.com/google/go-github/v88/github"

	"github.com/loopd/loopd/schema"
)

// serverClock is GitHub's time as loopd sees it: the local clock (now)
// plus the offset the Date header of GitHub's latest answer showed
// (whole seconds, RFC 9110 section 6.6.1), 0 before any answer.
type serverClock struct {
	now    func() time.Time
	offset atomic.Int64 // time.Duration
}

// Now returns GitHub's time.
func (c *serverClock) Now() time.Time {
	return c.now().Add(time.Duration(c.offset.Load()))
}

// observe returns base, which reads the Date of each answer.
func (c *serverClock) observe(base http.RoundTripper) http.RoundTripper {
	return roundTripper(func(req *http.Request) (*http.Response, error) {
		resp, err := base.RoundTrip(req)
		if err == nil {
			if d, perr := http.ParseTime(resp.Header.Get("Date")); perr == nil {
				c.offset.Store(int64(d.Sub(c.now())))
			}
		}
		return resp, err
	})
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// skewSigner signs the App's JWT with iat and exp on GitHub's clock
// instead of ghinstallation's local ones.
type skewSigner struct {
	rsa   ghinstallation.Signer
	clock *serverClock
}

func (s skewSigner) Sign(claims jwt.Claims) (string, error) {
	rc, ok := claims.(*jwt.RegisteredClaims)
	if !ok {
		return "", fmt.Errorf("app jwt: unexpected claims %T", claims)
	}
	c := *rc
	iat := s.clock.Now().Add(-schema.GitHubJWTBackdate).Truncate(time.Second)
	c.IssuedAt, c.ExpiresAt = jwt.NewNumericDate(iat), jwt.NewNumericDate(iat.Add(schema.GitHubJWTLifetime))
	return s.rsa.Sign(&c)
}

// appTransport authenticates as a GitHub App's installation: it keeps
// one installation token, minted through ghinstallation, and mints a new
// one when the token is within schema.GitHubTokenRefreshMargin of its expiry by
// GitHub's clock, or when GitHub refused it (401). The calls carry the
// token as ghinstallation's transport sends it (Authorization: token …),
// through base, so that ghinstallation's own refresh by the local clock
// never runs.
type appTransport struct {
	apps  *ghinstallation.AppsTransport
	id    int64
	opts  *ghv88.InstallationTokenOptions
	clock *serverClock
	base  http.RoundTripper // clock.observe's

	mu  sync.Mutex
	cur *installationToken
}

// installationToken is one token minted and its expires_at.
type installationToken struct {
	token   string
	expires time.Time
}

// newAppTransport returns the transports of App appID's installation id,
// its tokens asked for with opts (nil: the installation's own reach), and
// of the App itself (its JWT) over base, with baseURL the API's root and
// now the local clock; the error names a private key that does not parse.
func newAppTransport(base http.RoundTripper, appID, id int64, opts *ghv88.InstallationTokenOptions, key []byte, baseURL string, now func() time.Time) (*appTransport, http.RoundTripper, error) {
	pk, err := jwt.ParseRSAPrivateKeyFromPEM(key)
	if err != nil {
		return nil, nil, fmt.Errorf("could not parse private key: %w", err)
	}
	clock := &serverClock{now: now}
	observed := clock.observe(base)
	apps, err := ghinstallation.NewAppsTransportWithOptions(observed, appID,
		ghinstallation.WithSigner(skewSigner{rsa: ghinstallation.NewRSASigner(jwt.SigningMethodRS256, pk), clock: clock}))
	if err != nil {
		return nil, nil, err
	}
	if baseURL != "" {
		apps.BaseURL = baseURL
	}
	t := &appTransport{apps: apps, id: id, opts: opts, clock: clock, base: observed}
	return t, roundTripper(func(req *http.Request) (*http.Response, error) {
		return retryUnauthorized(req, apps.RoundTrip, func() {})
	}), nil
}

// InstallationID returns the installation's id.
func (t *appTransport) InstallationID() int64 { return t.id }

// Token returns the installation's token (TokenExpiry).
func (t *appTransport) Token(ctx context.Context) (string, error) {
	tok, _, err := t.TokenExpiry(ctx)
	return tok, err
}

// TokenExpiry returns the installation's token and its expires_at
// (GitHub's clock), minted anew (POST
// /app/installations/{id}/access_tokens) when there is none or it is
// within schema.GitHubTokenRefreshMargin of its expiry by GitHub's clock. A mint GitHub
// refuses with 401, which a JWT signed before loopd knew GitHub's clock
// gets, is tried once more. The error is ghinstallation's (its HTTPError
// carries GitHub's answer).
func (t *appTransport) TokenExpiry(ctx context.Context) (string, time.Time, error) {
	cur, err := t.current(ctx)
	if err != nil {
		return "", time.Time{}, err
	}
	return cur.token, cur.expires, nil
}

// current returns a token that is not about to expire.
func (t *appTransport) current(ctx context.Context) (*installationToken, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.cur != nil && t.clock.Now().Add(schema.GitHubTokenRefreshMargin).Before(t.cur.expires) {
		return t.cur, nil
	}
	var err error
	for range 2 {
		tr := ghinstallation.NewFromAppsTransport(t.apps, t.id)
		tr.BaseURL, tr.InstallationTokenOptions = t.apps.BaseURL, t.opts
		var tok string
		if tok, err = tr.Token(ctx); err == nil {
			exp, _, _ := tr.Expiry() // set: Token succeeded
			t.cur = &installationToken{token: tok, expires: exp}
			return t.cur, nil
		}
		var he *ghinstallation.HTTPError
		if !errors.As(err, &he) || he.Response == nil || he.Response.StatusCode != http.StatusUnauthorized {
			break
		}
		he.Response.Body.Close() // ghinstallation leaves a refusal's body open
	}
	return nil, err
}

// drop forgets tok, when it is still the current one, so that the next
// call mints another.
func (t *appTransport) drop(tok *installationToken) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.cur == tok {
		t.cur = nil
	}
}

// RoundTrip sends req with the installation's token. A 401, GitHub
// refusing a token it revoked or that expired early by loopd's estimate,
// mints another and sends req once more, when its body can be read again.
func (t *appTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	var used *installationToken
	send := func(r *http.Request) (*http.Response, error) {
		cur, err := t.current(r.Context())
		if err != nil {
			if r.Body != nil {
				r.Body.Close()
			}
			return nil, err
		}
		used = cur
		r.Header.Set("Authorization", "token "+cur.token)
		if r.Header.Get("Accept") == "" {
			r.Header.Set("Accept", "application/vnd.github.v3+json")
		}
		return t.base.RoundTrip(r)
	}
	return retryUnauthorized(req, send, func() { t.drop(used) })
}

// retryUnauthorized sends req, and when the answer is 401 calls renew and
// sends it once more (its body read again through GetBody); a body that
// cannot be read again keeps the first answer.
func retryUnauthorized(req *http.Request, send func(*http.Request) (*http.Response, error), renew func()) (*http.Response, error) {
	// Each send gets its own copy of the header: the transports set their
	// Authorization and Accept on the request they are given.
	resp, err := send(req.Clone(req.Context()))
	if err != nil || resp.StatusCode != http.StatusUnauthorized || (req.Body != nil && req.GetBody == nil) {
		return resp, err
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<16))
	resp.Body.Close()
	renew()
	again := req.Clone(req.Context())
	if req.GetBody != nil {
		if again.Body, err = req.GetBody(); err != nil {
			return nil, err
		}
	}
	return send(again)
}
