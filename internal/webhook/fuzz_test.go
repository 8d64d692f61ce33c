package webhook

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/google/go-github/v84/github"
	"github.com/stretchr/testify/require"

	"github.com/loopd/loopd/internal/journal"
	"github.com/loopd/loopd/schema"
	"github.com/loopd/loopd/store"
	"github.com/loopd/loopd/store/sqlstore"
)

// The ways FuzzHandler signs a request, by its sign argument modulo 3.
const (
	signBody  = iota // X-Hub-Signature-256 over the body with testSecret
	signAsIs         // the fuzzed header as it is (no header when empty)
	signOther        // a well-formed signature over other bytes
)

// fuzzStore is the real SQLite store a fuzz target drives, opened again
// (in a new file) after an input that stored something, so that every
// input starts from an empty store.
type fuzzStore struct {
	dir   string
	n     int
	store store.Store
}

func (s *fuzzStore) open(t testing.TB) {
	t.Helper()
	s.n++
	st, err := sqlstore.OpenSQLite(context.Background(), filepath.Join(s.dir, "loopd-"+strconv.Itoa(s.n)+".db"))
	require.NoError(t, err)
	s.store = st
}

func (s *fuzzStore) close(t testing.TB) {
	t.Helper()
	require.NoError(t, s.store.Close())
}

// empty reports whether the store holds no work item and no journal row.
func (s *fuzzStore) empty(t testing.TB) bool {
	t.Helper()
	recs, err := s.store.Records(context.Background())
	require.NoError(t, err)
	evs, err := s.store.Events(context.Background(), store.EventFilter{})
	require.NoError(t, err)
	return len(recs) == 0 && len(evs) == 0
}

// validSignature reports whether header is an X-Hub-Signature-256 value
// that authenticates body under secret (GitHub webhook docs, "Validating
// webhook deliveries"), by its own reading of the rule, not the handler's.
func validSignature(header string, secret, body []byte) bool {
	hexSig, ok := strings.CutPrefix(header, "sha256=")
	if !ok {
		return false
	}
	got, err := hex.DecodeString(hexSig)
	if err != nil {
		return false
	}
	mac := hmac.New(sha256.New, secret)
	mac.Write(body)
	return len(secret) > 0 && hmac.Equal(got, mac.Sum(nil))
}

// FuzzHandler drives the real http.Handler over a real SQLite store with
// fuzzed body bytes and headers. It must never panic, always answer, and
// never store anything (no work item, no journal row) unless the request
// carried a valid signature of its body. The seeds are every vendored
// GitHub fixture, signed, under its event's name.
func FuzzHandler(f *testing.F) {
	fixtures, err := filepath.Glob(filepath.Join(fixturesDir, "*.json"))
	require.NoError(f, err)
	require.NotEmpty(f, fixtures)
	for i, path := range fixtures {
		body, err := os.ReadFile(path)
		require.NoError(f, err)
		event, _, _ := strings.Cut(filepath.Base(path), ".")
		f.Add(body, event, "d-"+strconv.Itoa(i), "application/json", "", uint8(signBody))
	}
	issue, err := os.ReadFile(filepath.Join(fixturesDir, "issue_comment.created.1.json"))
	require.NoError(f, err)
	f.Add(issue, "issue_comment", "d-x", "application/json", "sha256=00", uint8(signAsIs))
	f.Add(issue, "issue_comment", "d-x", "application/json; charset=utf-8", "", uint8(signOther))
	f.Add([]byte(`{"action":"created"}`), "issue_comment", "../../etc", "text/plain", "sha1=ab", uint8(signBody))
	f.Add([]byte{}, "", "", "", "", uint8(signBody))

	s := &fuzzStore{dir: f.TempDir()}
	s.open(f)
	f.Cleanup(func() { s.close(f) })
	cfg := defaultConfig()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))

	f.Fuzz(func(t *testing.T, body []byte, event, id, contentType, sig string, sign uint8) {
		switch sign % 3 {
		case signBody:
			sig = Sign(testSecret, body)
		case signOther:
			sig = Sign(testSecret, append([]byte("x"), body...))
		}
		h := New(Options{
			Secret:   testSecret,
			Config:   func() schema.GHWebhook { return cfg },
			Store:    s.store,
			Recorder: journal.NewRecorder(log, s.store, func() time.Time { return receivedAt }),
			Log:      log,
			Now:      func() time.Time { return receivedAt },
			// Small enough that a fuzzed body can pass it.
			MaxBody: 1 << 20,
		})
		req := httptest.NewRequest(http.MethodPost, "/webhook", bytes.NewReader(body))
		for name, value := range map[string]string{github.EventTypeHeader: event, github.DeliveryIDHeader: id,
			"Content-Type": contentType, github.SHA256SignatureHeader: sig} {
			if value != "" {
				req.Header[name] = []string{value}
			}
		}
		w := httptest.NewRecorder()

		h.ServeHTTP(w, req)

		code := w.Result().StatusCode
		require.True(t, code >= 200 && code < 600, "status %d", code)
		if !validSignature(sig, testSecret, body) {
			require.NotEqual(t, http.StatusAccepted, code, "an unauthenticated request is never accepted")
			require.True(t, s.empty(t), "a request without a valid signature stored something (status %d)", code)
			return
		}
		if !s.empty(t) {
			s.close(t)
			s.open(t)
		}
	})
}

// invisibleKept reports whether r is one of the invisible code points the
// sanitizer may keep as part of what a reader sees (hidden.go, keep): a
// joiner, a variation selector, a Mongolian free variation selector, or a
// tag of an emoji tag sequence.
func invisibleKept(r rune) bool {
	return r == zwj || r == zwnj || (r >= '\uFE00' && r <= '\uFE0F') || (r >= '\u180B' && r <= '\u180F') ||
		(r >= tagFirstASCII && r <= tagLastASCII) || r == cancelTag
}

// visibleRunes returns the runes of s that a reader of GitHub sees and the
// sanitizer must keep: valid UTF-8 that is no control and not invisible.
func visibleRunes(s string) []rune {
	var out []rune
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		i += n
		if (r == utf8.RuneError && n == 1) || unicode.IsControl(r) || invisible(r) {
			continue
		}
		out = append(out, r)
	}
	return out
}

// subsequence reports whether want's runes appear in got in order.
func subsequence(want []rune, got string) bool {
	i := 0
	for _, r := range got {
		if i < len(want) && r == want[i] {
			i++
		}
	}
	return i == len(want)
}

// FuzzSanitize checks the prompt sanitizer on every kind of field: the
// output is valid UTF-8 with no control but the newlines and tabs the field
// allows, every invisible (Default_Ignorable) code point left in it is one
// the keep rules allow there (sanitizing the output again changes
// nothing), and every visible character of the input survives, in order.
// A markdown body's output holds no link reference definition that GitHub
// would hide: each was wrapped in its escape (for a body without controls,
// whose removal can make a definition of text GitHub shows).
func FuzzSanitize(f *testing.F) {
	for _, s := range []string{
		"plain text", "a\x1b[201~b\r\nc\x7f\u0085d\te", "zero\u200bwidth \u202eevil\u202c",
		"👨\u200d👩\u200d👧 ❤\ufe0f\u200d🔥 #\ufe0f\u20e3 \U0001F3F4\U000E0067\U000E0062\U000E0065\U000E006E\U000E0067\U000E007F",
		"\U000E0072\U000E0075\U000E006E tags", "ک\u200cب क\u094d\u200dष", "≩\ufe00 ᠠ\u180b",
		"<!-- hidden -->shown <!-- open\n\n> <!-- quoted -->\n`<!-- code -->`", "<!--> <!---> ⟦x⟧ <!-- ⟦y⟧ -->",
		"\xff\xfe invalid", "<!-- unterminated\r\nrest",
		"[//]: # (hidden)\n[x]: </u v> 'title\nover lines'\n> [q]: /q\n- [l]: /l \"a\\\\\"b\"\n\"t\" [y]: /v",
	} {
		f.Add(s)
	}
	fields := []struct {
		name     string
		clean    func(string) string
		controls string // the controls the field keeps
		input    func(string) string
	}{
		{"line", sanitizeLine, "", func(s string) string { return s }},
		{"text", sanitize, "\n\t", func(s string) string { return s }},
		// A markdown body reads a CR as a line end, as CommonMark does.
		{"markdown", sanitizeMarkdown, "\n\t", func(s string) string {
			return strings.ReplaceAll(strings.ReplaceAll(s, "\r\n", "\n"), "\r", "\n")
		}},
	}
	f.Fuzz(func(t *testing.T, s string) {
		for _, fd := range fields {
			out := fd.clean(s)
			require.True(t, utf8.ValidString(out), "%s: invalid UTF-8 out of %q", fd.name, s)
			for _, r := range out {
				if unicode.IsControl(r) && !strings.ContainsRune(fd.controls, r) {
					t.Fatalf("%s: control %U survives in %q (from %q)", fd.name, r, out, s)
				}
				if invisible(r) && !invisibleKept(r) {
					t.Fatalf("%s: invisible %U survives in %q (from %q)", fd.name, r, out, s)
				}
			}
			require.Equal(t, out, reveal(out), "%s: an invisible code point in %q is not one the keep rules allow there", fd.name, out)
			require.True(t, subsequence(visibleRunes(fd.input(s)), out), "%s: a visible character of %q is missing from %q", fd.name, s, out)
			if fd.name == "markdown" && journal.StripControls(fd.input(s), journal.NewlineOrTab) == fd.input(s) {
				_, defs := hiddenMarkup(out)
				require.Empty(t, defs, "a link reference definition of %q is not marked in %q", s, out)
			}
		}
	})
}
