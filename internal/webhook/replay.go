package webhook

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"

	"github.com/google/go-github/v84/github"
)

// Sign returns the X-Hub-Signature-256 header value for body: "sha256=" and
// the hex HMAC-SHA256 of body keyed with secret (GitHub webhook docs,
// "Validating webhook deliveries").
func Sign(secret, body []byte) string {
	mac := hmac.New(sha256.New, secret)
	mac.Write(body)
	return "sha256=" + hex.EncodeToString(mac.Sum(nil))
}

// Replay POSTs body to url as GitHub would deliver it: Content-Type
// application/json, X-GitHub-Event event, X-GitHub-Delivery deliveryID and
// X-Hub-Signature-256 signed with secret. The caller closes the response
// body. A non-2xx status is not an error.
func Replay(ctx context.Context, client *http.Client, url string, secret []byte, event, deliveryID string, body []byte) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("replay %s %s: %w", event, deliveryID, err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "loopd-replay")
	req.Header.Set(github.EventTypeHeader, event)
	req.Header.Set(github.DeliveryIDHeader, deliveryID)
	req.Header.Set(github.SHA256SignatureHeader, Sign(secret, body))
	resp, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("replay %s %s: %w", event, deliveryID, err)
	}
	return resp, nil
}
