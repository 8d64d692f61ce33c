package schema

import (
	"bytes"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"text/template"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
	"golang.org/x/text/language"
	"golang.org/x/text/message"
	"gopkg.in/yaml.v3"

	"github.com/loopd/loopd/internal/near"
	"github.com/loopd/loopd/internal/paneenv"
	"github.com/loopd/loopd/internal/perm"
	"github.com/loopd/loopd/internal/workspace"
)

// ErrInvalid is wrapped by every error that says a config file breaks the
// contract: bad YAML, a schema violation or a failed cross-field check.
var ErrInvalid = errors.New("invalid config")

// Problem is one violation of the config contract.
type Problem struct {
	File   string // the path given to Load or Parse
	Line   int    // 1-based; 0 when unknown
	Column int    // 1-based; 0 when unknown
	// Key is the key path of the offending value, e.g.
	// webhooks.ghWebhook.routing.repos["octo-org/api"].harness; "" for the
	// whole document.
	Key     string
	Message string
}

// String formats p as file:line:col: key: message, leaving out the parts
// that are unknown.
func (p Problem) String() string {
	var b strings.Builder
	b.WriteString(p.File)
	if p.Line > 0 {
		fmt.Fprintf(&b, ":%d", p.Line)
		if p.Column > 0 {
			fmt.Fprintf(&b, ":%d", p.Column)
		}
	}
	if p.Key != "" {
		b.WriteString(": " + p.Key)
	}
	b.WriteString(": " + p.Message)
	return b.String()
}

// ValidationError lists every problem found in one config file, in file
// order. It wraps ErrInvalid.
type ValidationError struct {
	Problems []Problem
}

// Error returns one problem per line.
func (e *ValidationError) Error() string {
	lines := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		lines[i] = p.String()
	}
	return strings.Join(lines, "\n")
}

// Unwrap returns ErrInvalid.
func (e *ValidationError) Unwrap() error { return ErrInvalid }

func invalid(file string, problems []Problem) *ValidationError {
	for i := range problems {
		problems[i].File = file
	}
	slices.SortStableFunc(problems, func(a, b Problem) int {
		if a.Line != b.Line {
			return a.Line - b.Line
		}
		if a.Column != b.Column {
			return a.Column - b.Column
		}
		return strings.Compare(a.Key+a.Message, b.Key+b.Message)
	})
	return &ValidationError{Problems: slices.CompactFunc(problems, func(a, b Problem) bool { return a == b })}
}

//go:embed loopd.schema.json
var schemaJSON []byte

const schemaURL = "https://github.com/loopd/loopd/schema/loopd.schema.json"

// schemaDoc is the embedded schema parsed once, for the keys of an object
// an unknown key is near (knownKeys).
var schemaDoc = sync.OnceValue(func() any {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(schemaJSON))
	if err != nil {
		panic(fmt.Sprintf("parse embedded %s: %v", schemaURL, err))
	}
	return doc
})

// knownKeys returns the keys the schema at location (a schema URL of the
// embedded schema with a JSON pointer fragment, RFC 6901, as the
// validator reports it) names in its properties, sorted; none when
// location is elsewhere.
func knownKeys(location string) []string {
	base, ptr, _ := strings.Cut(location, "#")
	if base != schemaURL {
		return nil
	}
	node := schemaDoc()
	for _, tok := range strings.Split(strings.TrimPrefix(ptr, "/"), "/") {
		if tok == "" {
			continue
		}
		tok = strings.NewReplacer("~1", "/", "~0", "~").Replace(tok)
		m, ok := node.(map[string]any)
		if !ok {
			return nil
		}
		node = m[tok]
	}
	m, _ := node.(map[string]any)
	props, _ := m["properties"].(map[string]any)
	return slices.Sorted(maps.Keys(props))
}

// compiledSchema compiles the embedded schema once. It cannot fail at run
// time: TestSchemaCompiles covers it.
var compiledSchema = sync.OnceValue(func() *jsonschema.Schema {
	c := jsonschema.NewCompiler()
	if err := c.AddResource(schemaURL, schemaDoc()); err != nil {
		panic(fmt.Sprintf("add embedded %s: %v", schemaURL, err))
	}
	return c.MustCompile(schemaURL)
})

// Load reads and parses the config file at path; see Parse. A file that
// cannot be read gives an error wrapping the os error (errors.Is(err,
// fs.ErrNotExist) for a missing file), not ErrInvalid.
func Load(path string) (*Config, error) {
	data, err := readConfig(path)
	if err != nil {
		return nil, err
	}
	return Parse(data, path)
}

// Check is Load for config validate, which names every problem of the
// file in one run: a file other users can change is one problem beside
// those of its text, not a refusal before them. It returns the config as
// Parse returns it (nil when the text is invalid, whatever the file's
// mode), the config as far as it can be read (as LoadUnchecked reads it;
// nil when nothing can be), and the problems joined: the mode's (wrapping
// perm.ErrUnsafe), then the text's (a *ValidationError). A file that
// cannot be read gives only the os error, as Load does.
func Check(path string) (cfg, partial *Config, err error) {
	data, unsafe, err := readFile(path)
	if err != nil {
		return nil, nil, err
	}
	partial, _ = parseUnchecked(data, path)
	cfg, err = Parse(data, path)
	return cfg, partial, errors.Join(unsafe, err)
}

// readConfig reads the config file at path, which no other user may be
// able to change (perm.Trusted: it names the commands loopd runs).
func readConfig(path string) ([]byte, error) {
	data, unsafe, err := readFile(path)
	if unsafe != nil {
		return nil, unsafe
	}
	return data, err
}

// readFile reads the config file at path and says apart whether another
// user can change it (unsafe, wrapping perm.ErrUnsafe): readConfig refuses
// such a file, Check names it among the other problems.
func readFile(path string) (data []byte, unsafe, err error) {
	if err := perm.Trusted(path); err != nil {
		unsafe = fmt.Errorf("config %w", err)
	}
	data, err = os.ReadFile(path)
	if err != nil {
		return nil, unsafe, fmt.Errorf("read config: %w", err)
	}
	return data, unsafe, nil
}

// Parse parses one YAML document, validates it against the embedded JSON
// Schema (loopd.schema.json) and the cross-field rules, and returns it with
// every default filled in. path names the file in messages, and relative
// paths in the config (stateDir) are resolved against its directory.
//
// An invalid config gives a *ValidationError, which wraps ErrInvalid and
// lists every problem found as path:line:col: key: message. Unknown keys are
// problems. The cross-field rules are: every route's harness is a key of
// harnesses; every route's workdir renders to an absolute path; no two route
// keys differ only in case; a harness without adapter is named after one;
// freshArgs and resumeArgs are only given to the custom adapter, which needs
// freshArgs, and parse as text/template; readyPattern compiles; listen is
// host:port with a port of 1 to 65535; backoffInitialSeconds is at most
// backoffMaxSeconds; authorizedUsers holds no PlaceholderLogin; a route's standing
// instructions (read from instructionsFile here) are bounded text. They run
// on a document with schema problems too, on what of it can be read, so
// that one run names every problem; one at or under a key the schema
// refused is left out, as it would say the same again. A document with
// no settings (empty, comments only, null) is one problem that says how
// to write a starter and what the least config holds.
func Parse(data []byte, path string) (*Config, error) {
	dir, err := filepath.Abs(filepath.Dir(path))
	if err != nil {
		return nil, fmt.Errorf("parse config %s: %w", path, err)
	}
	var doc yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&doc); err != nil && err != io.EOF {
		return nil, invalid(path, yamlProblems(err))
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); err != io.EOF {
		return nil, invalid(path, []Problem{{Line: extra.Line, Message: "only one YAML document is allowed"}})
	}
	t, problems := newTree(&doc)
	if len(problems) > 0 {
		return nil, invalid(path, problems)
	}
	if t.value == nil {
		return nil, invalid(path, []Problem{{Message: emptyProblem(path)}})
	}
	var schemaProblems []Problem
	if err := compiledSchema().Validate(t.value); err != nil {
		var verr *jsonschema.ValidationError
		if !errors.As(err, &verr) {
			return nil, fmt.Errorf("validate config %s: %w", path, err)
		}
		schemaProblems = t.schemaProblems(verr)
	}

	var cfg Config
	dec = yaml.NewDecoder(bytes.NewReader(data))
	// With schema problems, every value of the right type is read (a
	// *yaml.TypeError for the rest, which the schema named already), so
	// that the cross-field rules see what they can.
	dec.KnownFields(len(schemaProblems) == 0)
	var terr *yaml.TypeError
	if err := dec.Decode(&cfg); err != nil && err != io.EOF && (len(schemaProblems) == 0 || !errors.As(err, &terr)) {
		return nil, invalid(path, append(schemaProblems, yamlProblems(err)...))
	}
	cfg.applyDefaults(dir)
	cross := append(append(cfg.check(t), cfg.checkSandbox(t, path)...), cfg.readInstructions(t)...)
	if problems := append(schemaProblems, beside(cross, schemaProblems)...); len(problems) > 0 {
		return nil, invalid(path, problems)
	}
	return &cfg, nil
}

// emptyProblem is the problem of a config file at path that holds no
// settings (nothing, comments, or null): the command that writes a
// starter in its place, and what the least config holds.
func emptyProblem(path string) string {
	return fmt.Sprintf("the file holds no settings: loopd config init --force %s writes a commented starter; "+
		"the least config names a harness (harnesses: {claude-code: {command: claude}}), "+
		"the GitHub logins loopd acts for (webhooks.ghWebhook.authorizedUsers) and a route "+
		`(webhooks.ghWebhook.routing.repos: {"*": {harness: claude-code, workdir: "/srv/{{.Owner}}/{{.Repo}}/{{.Number}}"}})`, path)
}

// beside returns the problems of cross that are not at or under a key the
// schema already found wrong (of): a value the schema refused was read as
// its zero value or default, and what a cross-field rule says of it would
// only repeat the schema's problem in other words.
func beside(cross, of []Problem) []Problem {
	var out []Problem
	for _, p := range cross {
		covered := slices.ContainsFunc(of, func(s Problem) bool {
			return s.Key == "" || p.Key == s.Key || strings.HasPrefix(p.Key, s.Key+".") || strings.HasPrefix(p.Key, s.Key+"[")
		})
		if !covered {
			out = append(out, p)
		}
	}
	return out
}

// yamlLine matches the "line N: message" form of yaml.v3's errors.
var yamlLine = regexp.MustCompile(`^line (\d+): (.*)$`)

// yamlProblems turns a yaml.v3 syntax or decode error into problems.
func yamlProblems(err error) []Problem {
	msgs := []string{strings.TrimPrefix(err.Error(), "yaml: ")}
	var terr *yaml.TypeError
	if errors.As(err, &terr) {
		msgs = terr.Errors
	}
	problems := make([]Problem, 0, len(msgs))
	for _, msg := range msgs {
		p := Problem{Message: msg}
		if m := yamlLine.FindStringSubmatch(msg); m != nil {
			p.Line, _ = strconv.Atoi(m[1])
			p.Message = m[2]
		}
		problems = append(problems, p)
	}
	return problems
}

var printer = message.NewPrinter(language.English)

// secretValue is where a value that may hold a password is (store.url, a
// connection URL): a problem there never quotes it, since config.invalid
// goes to the log and the journal.
var secretValue = []string{"store", "url"}

// schemaProblems flattens the validator's error tree into one problem per
// failed keyword, placed at the offending key or value.
func (t *tree) schemaProblems(verr *jsonschema.ValidationError) []Problem {
	var problems []Problem
	var walk func(e *jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		switch k := e.ErrorKind.(type) {
		case *kind.AdditionalProperties:
			for _, name := range k.Properties {
				msg := "unknown key" + near.DidYouMean(near.Names(name, knownKeys(e.SchemaURL)))
				problems = append(problems, t.keyProblemAt(child(e.InstanceLocation, name), msg))
			}
			return
		case *kind.PropertyNames:
			// The causes describe the key as a standalone instance; report
			// the deepest one at the key.
			msg := "invalid key"
			for c := e; len(c.Causes) > 0; {
				c = c.Causes[0]
				msg = "invalid key: " + leafMessage(c.ErrorKind)
			}
			for _, at := range t.keysUnder(e.SchemaURL, k.Property) {
				problems = append(problems, t.keyProblemAt(at, msg))
			}
			return
		}
		if len(e.Causes) == 0 {
			msg := leafMessage(e.ErrorKind)
			if slices.Equal(e.InstanceLocation, secretValue) {
				msg = "invalid value (not shown: it may hold a password); want \"\" or a postgres:// URL"
			}
			problems = append(problems, t.problemAt(e.InstanceLocation, msg))
			return
		}
		for _, c := range e.Causes {
			walk(c)
		}
	}
	walk(verr)
	return problems
}

// keysUnder returns the locations of the keys named name in the objects
// that the propertyNames keyword at schemaURL governs. The validator's
// InstanceLocation for propertyNames errors cannot be used: it shares its
// backing array with the traversal and is overwritten by later siblings.
// The schema location says which objects are meant: "properties/<name>"
// steps into a key, "additionalProperties" and "items" into any.
func (t *tree) keysUnder(schemaURL, name string) [][]string {
	_, frag, _ := strings.Cut(schemaURL, "#/")
	steps := strings.Split(frag, "/")
	var pattern []string // "" matches any token
	for i := 0; i < len(steps) && steps[i] != "propertyNames"; i++ {
		switch steps[i] {
		case "properties":
			i++
			pattern = append(pattern, steps[i])
		case "additionalProperties", "items":
			pattern = append(pattern, "")
		}
	}
	var found [][]string
	for k := range t.sites {
		if k == "" {
			continue
		}
		tokens := strings.Split(k[1:], "\x00")
		if len(tokens) != len(pattern)+1 || tokens[len(pattern)] != name {
			continue
		}
		if slices.EqualFunc(pattern, tokens[:len(pattern)], func(p, tok string) bool { return p == "" || p == tok }) {
			found = append(found, tokens)
		}
	}
	return found
}

// leafMessage is the validator's message, except for bounds, which it
// prints as floats (2.147483647e+09).
func leafMessage(k jsonschema.ErrorKind) string {
	switch k := k.(type) {
	case *kind.Minimum:
		return fmt.Sprintf("%s is less than the minimum, %s", k.Got.RatString(), k.Want.RatString())
	case *kind.Maximum:
		return fmt.Sprintf("%s is more than the maximum, %s", k.Got.RatString(), k.Want.RatString())
	}
	return k.LocalizedString(printer)
}

// resolve makes a relative path absolute against the config file's
// directory.
func (c *Config) resolve(path string) string {
	if filepath.IsAbs(path) {
		return path
	}
	return filepath.Join(c.dir, path)
}

// credentialFileVar is a ${NAME} reference in a credential file's path
// (webhooks.ghWebhook.secretFile, github.tokenFile).
var credentialFileVar = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)\}`)

// SecretFilePath returns webhooks.ghWebhook.secretFile with each ${NAME}
// replaced by lookup's value of NAME, then resolved against the config
// file's directory when relative, like stateDir. systemd sets
// CREDENTIALS_DIRECTORY for a unit with LoadCredential=, so
// "${CREDENTIALS_DIRECTORY}/webhook-secret" names a credential. It returns
// "" when secretFile is not set, and an error naming a variable that
// lookup does not have or that is empty.
func (c *Config) SecretFilePath(lookup func(string) (string, bool)) (string, error) {
	return c.credentialFile("webhooks.ghWebhook.secretFile", c.Webhooks.GHWebhook.SecretFile, lookup)
}

// TokenFilePath is SecretFilePath for github.tokenFile
// ("${CREDENTIALS_DIRECTORY}/github-token"); "" without one.
func (c *Config) TokenFilePath(lookup func(string) (string, bool)) (string, error) {
	if c.GitHub == nil {
		return "", nil
	}
	return c.credentialFile("github.tokenFile", c.GitHub.TokenFile, lookup)
}

// credentialFile is the path of the credential file whose config key is
// key and whose raw value is raw, as SecretFilePath says.
func (c *Config) credentialFile(key, raw string, lookup func(string) (string, bool)) (string, error) {
	if raw == "" {
		return "", nil
	}
	var missing []string
	path := credentialFileVar.ReplaceAllStringFunc(raw, func(ref string) string {
		name := ref[2 : len(ref)-1]
		v, ok := lookup(name)
		if !ok || v == "" {
			missing = append(missing, name)
		}
		return v
	})
	if len(missing) > 0 {
		return "", fmt.Errorf("%s %q: environment variable %s is not set", key, raw, strings.Join(missing, ", "))
	}
	return c.resolve(path), nil
}

// keyProblem is a problem of one key of a route.
type keyProblem struct{ key, message string }

// credentialProblems are the problems of route r's agentCredentials and
// agentGH under c's github block: an App's token needs github.app, loopd's
// own token github.tokenEnv, and either a checkout (the repository git
// pushes to); agentGH needs one of them.
func (c *Config) credentialProblems(r Route) []keyProblem {
	var out []keyProblem
	switch r.AgentCredentials {
	case AgentCredentialsApp:
		if c.GitHub == nil || c.GitHub.App == nil {
			out = append(out, keyProblem{"agentCredentials", "app needs github.app: an installation token is minted by a GitHub App"})
		}
	case AgentCredentialsToken:
		if c.GitHub == nil || c.GitHub.App != nil {
			out = append(out, keyProblem{"agentCredentials", "token hands out loopd's own token (github.tokenEnv); with github.app use app, which is scoped to the item's repository"})
		}
	}
	if r.AgentCredentials != "" && r.AgentCredentials != AgentCredentialsNone && r.Checkout == nil {
		out = append(out, keyProblem{"agentCredentials", "needs checkout: the credential is for the repository git pushes to"})
	}
	if r.AgentGH && r.Credentials(c.GitHub) == AgentCredentialsNone {
		out = append(out, keyProblem{"agentGH", "gh gets the agent's credential: the route gives none (agentCredentials)"})
	}
	return out
}

// adapters are the values of harnesses.<name>.adapter (the schema's enum).
var adapters = []string{"claude-code", "codex", "gemini", "cursor", "custom"}

// check runs the cross-field rules listed on Parse on a defaulted config.
func (c *Config) check(t *tree) []Problem {
	var problems []Problem
	add := func(p Problem) { problems = append(problems, p) }
	harnesses := []string{"harnesses"}

	for name, h := range c.Harnesses {
		at := child(harnesses, name)
		if _, given := t.sites[locKey(child(at, "adapter"))]; !given && !slices.Contains(adapters, h.Adapter) {
			// A given adapter outside the enum is the schema's problem.
			add(t.keyProblemAt(at, fmt.Sprintf("no adapter given and the name is not one of %s; set adapter", strings.Join(adapters, ", "))))
		}
		for key, args := range map[string][]string{"freshArgs": h.FreshArgs, "resumeArgs": h.ResumeArgs} {
			if len(args) > 0 && h.Adapter != "custom" {
				add(t.keyProblemAt(child(at, key), "only the custom adapter takes "+key))
			}
			for i, arg := range args {
				if _, err := template.New(key).Parse(arg); err != nil {
					add(t.problemAt(child(child(at, key), strconv.Itoa(i)), err.Error()))
				}
			}
		}
		if h.Adapter == "custom" && len(h.FreshArgs) == 0 {
			add(t.keyProblemAt(at, "the custom adapter needs freshArgs"))
		}
		if _, err := regexp.Compile(h.ReadyPattern); err != nil {
			add(t.problemAt(child(at, "readyPattern"), err.Error()))
		}
	}

	gh := c.Webhooks.GHWebhook
	if gh.SecretFile != "" && gh.SecretEnv != "" {
		add(t.keyProblemAt([]string{"webhooks", "ghWebhook", "secretFile"}, "set secretFile or secretEnv, not both"))
	}
	if i := slices.Index(gh.AuthorizedUsers, PlaceholderLogin); i >= 0 {
		add(t.problemAt([]string{"webhooks", "ghWebhook", "authorizedUsers", strconv.Itoa(i)},
			"replace the placeholder "+PlaceholderLogin+" with the GitHub logins whose events loopd may act on"))
	}
	if slices.Contains(paneenv.Base, gh.SecretEnv) {
		add(t.problemAt([]string{"webhooks", "ghWebhook", "secretEnv"}, fmt.Sprintf("%s reaches every pane (one of %s); name another variable", gh.SecretEnv, strings.Join(paneenv.Base, ", "))))
	}
	for _, name := range slices.Sorted(maps.Keys(c.Harnesses)) {
		h, at := c.Harnesses[name], child(harnesses, name)
		for i, v := range h.PassEnv {
			switch {
			case v == gh.SecretEnv:
				add(t.problemAt(child(child(at, "passEnv"), strconv.Itoa(i)), v+" holds the webhook secret (secretEnv); it never reaches a harness"))
			case paneenv.Denied(v):
				add(t.problemAt(child(child(at, "passEnv"), strconv.Itoa(i)), v+" is never passed to a harness: loopd's own LOOPD_ variables and GitHub credentials stay with loopd"))
			}
		}
		if _, ok := h.Env[gh.SecretEnv]; ok && gh.SecretEnv != "" {
			add(t.keyProblemAt(child(child(at, "env"), gh.SecretEnv), gh.SecretEnv+" is the webhook secret's variable (secretEnv); give the harness another name"))
		}
	}

	listenAt := []string{"webhooks", "ghWebhook", "listen"}
	if _, port, err := net.SplitHostPort(gh.Listen); err != nil {
		add(t.problemAt(listenAt, "want host:port: "+err.Error()))
	} else if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		// Port 0 would listen on a port the kernel picks anew at each
		// start, which no GitHub webhook can be pointed at.
		add(t.problemAt(listenAt, fmt.Sprintf("port %q is not a number from 1 to 65535 (0, a port picked at each start, is one no GitHub webhook can be pointed at)", port)))
	}

	reposAt := []string{"webhooks", "ghWebhook", "routing", "repos"}
	byFold := map[string]string{}
	for _, key := range slices.Sorted(maps.Keys(gh.Routing.Repos)) {
		r, at := gh.Routing.Repos[key], child(reposAt, key)
		if other, dup := byFold[strings.ToLower(key)]; dup {
			add(t.keyProblemAt(at, fmt.Sprintf("same repository as %q: keys match case-insensitively", other)))
		}
		byFold[strings.ToLower(key)] = key
		if _, ok := c.Harnesses[r.Harness]; !ok {
			add(t.problemAt(child(at, "harness"), fmt.Sprintf("unknown harness %q: not a key of harnesses", r.Harness)))
		}
		if _, err := r.RenderWorkdir("owner", "repo", 1, "issue"); err != nil {
			add(t.problemAt(child(at, "workdir"), err.Error()))
		}
		if b := r.Budget; b != nil {
			if d, err := time.ParseDuration(b.Window); b.Window != "" && (err != nil || d < time.Hour || d > MaxBudgetWindow) {
				add(t.problemAt(child(child(at, "budget"), "window"), fmt.Sprintf("%q is not a window of 1h to %dh", b.Window, int(MaxBudgetWindow.Hours()))))
			}
			if b.Tokens == 0 && b.Total == 0 {
				add(t.keyProblemAt(child(at, "budget"), "set tokens (per window) or total, or leave budget out"))
			}
		}
		if d, err := time.ParseDuration(r.ApprovalReminder); r.ApprovalReminder != "" && (err != nil || d < MinApprovalReminder || d > MaxApprovalReminder) {
			add(t.problemAt(child(at, "approvalReminder"), fmt.Sprintf("%q is not a duration of %dm to %dh", r.ApprovalReminder, int(MinApprovalReminder.Minutes()), int(MaxApprovalReminder.Hours()))))
		}
		for _, p := range c.credentialProblems(r) {
			add(t.problemAt(child(at, p.key), p.message))
		}
		if c := r.Checkout; c != nil {
			if u, err := c.RenderURL("owner", "repo"); err != nil {
				add(t.problemAt(child(child(at, "checkout"), "url"), err.Error()))
			} else if _, err := workspace.Public(u); err != nil {
				// A URL every checkout would refuse (a password in an ssh
				// URL, a control character) is the config's fault, said at
				// load and reload rather than at each item's prepare.
				add(t.problemAt(child(child(at, "checkout"), "url"), err.Error()))
			}
			if _, err := c.RenderIssueBranch("owner", "repo", 1); err != nil {
				add(t.problemAt(child(child(at, "checkout"), "issueBranch"), err.Error()))
			}
			if c.Base != "" && (!ValidBranch(c.Base) || strings.HasPrefix(c.Base, "origin/") || strings.HasPrefix(c.Base, "refs/")) {
				add(t.problemAt(child(child(at, "checkout"), "base"), fmt.Sprintf("%q is not a branch name of the remote (write main, not origin/main)", c.Base)))
			}
			if !workdirPerItem(key, r) {
				add(t.problemAt(child(at, "workdir"), "with checkout, the workdir must differ per work item (use {{.Number}}, and {{.Owner}}/{{.Repo}} in a wildcard route): two items never share a worktree"))
			}
		}
	}

	if g := c.GitHub; g != nil {
		at := []string{"github"}
		if g.App != nil && g.TokenEnv != "" {
			add(t.keyProblemAt(child(at, "app"), "set app or tokenEnv, not both"))
		}
		if g.TokenFile != "" && (g.App != nil || g.TokenEnv != "") {
			add(t.keyProblemAt(child(at, "tokenFile"), "set one of app, tokenEnv and tokenFile"))
		}
		switch {
		case g.TokenEnv != "" && g.TokenEnv == gh.SecretEnv:
			add(t.problemAt(child(at, "tokenEnv"), g.TokenEnv+" is the webhook secret's variable (secretEnv); name another"))
		case g.TokenEnv != "" && !paneenv.Denied(g.TokenEnv):
			add(t.problemAt(child(at, "tokenEnv"), g.TokenEnv+" could reach a pane; name a variable loopd never passes on (LOOPD_…, or one that contains GITHUB)"))
		}
		if u, err := url.Parse(g.APIURL); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
			add(t.problemAt(child(at, "apiURL"), fmt.Sprintf("%q is not an http(s) URL", g.APIURL)))
		}
	}

	p := gh.Routing.Tmux
	if p.BackoffInitialSeconds > p.BackoffMaxSeconds {
		add(t.problemAt([]string{"webhooks", "ghWebhook", "routing", "tmux", "backoffInitialSeconds"},
			fmt.Sprintf("%d is more than backoffMaxSeconds (%d)", p.BackoffInitialSeconds, p.BackoffMaxSeconds)))
	}
	return problems
}
