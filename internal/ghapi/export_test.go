package ghapi

import (
	"net/http"
	"time"
)

// NewAt is New with now as the local clock.
func NewAt(apiURL string, cred Credentials, base http.RoundTripper, timeout time.Duration, now func() time.Time) (*Client, error) {
	return newClient(apiURL, cred, base, timeout, now)
}

// NewMinterAt is NewMinter with now as the local clock.
func NewMinterAt(apiURL string, cred Credentials, base http.RoundTripper, timeout time.Duration, now func() time.Time) (*Minter, error) {
	return newMinter(apiURL, cred, base, timeout, now)
}
