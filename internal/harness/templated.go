package harness

import (
	"fmt"
	"regexp"
	"strings"
	"text/template"

	"github.com/loopd/loopd/desired"
)

// templated is an adapter whose argv comes from text/template arguments:
// the custom adapter, and cursor as a fixed instance of it.
type templated struct {
	base
	fresh, resume []*template.Template
}

// argData is what the argv templates see.
type argData struct {
	SessionID string
	Prompt    string
}

// newCustom builds the custom adapter from freshArgs and resumeArgs, each
// a text/template argv that follows the command and extraArgs.
func newCustom(b base, fresh, resume []string) (*templated, error) {
	if len(fresh) == 0 {
		return nil, fmt.Errorf("custom adapter without freshArgs: %w", ErrBadConfig)
	}
	t := &templated{base: b}
	var err error
	if t.fresh, err = parseArgs("freshArgs", fresh); err != nil {
		return nil, err
	}
	if t.resume, err = parseArgs("resumeArgs", resume); err != nil {
		return nil, err
	}
	return t, nil
}

// newCursor builds the cursor adapter: Cursor's CLI ("cursor-agent
// [prompt]") cannot start a conversation under an id chosen in advance, so
// loopd cannot resume one by its recorded id, and every spawn is fresh
// (design: "cursor: no interactive mode, so it is unsupported"). The
// session id stays loopd's own label; it never reaches argv.
func newCursor(b base) (*templated, error) {
	return newCustom(b, []string{"{{.Prompt}}"}, nil)
}

// parseArgs parses each argument and runs it once on sample data, so that
// a template that cannot render fails here and not at spawn time.
func parseArgs(key string, args []string) ([]*template.Template, error) {
	ts := make([]*template.Template, len(args))
	for i, arg := range args {
		t, err := template.New(key).Parse(arg)
		if err == nil {
			err = t.Execute(&strings.Builder{}, argData{SessionID: "id", Prompt: "prompt"})
		}
		if err != nil {
			return nil, fmt.Errorf("%s[%d] %q: %w: %w", key, i, arg, ErrBadConfig, err)
		}
		ts[i] = t
	}
	return ts, nil
}

// SupportsResume reports whether resumeArgs were given.
func (t *templated) SupportsResume() bool { return len(t.resume) > 0 }

// ValidSessionID is SessionIDPattern: the adapter knows nothing stricter.
func (t *templated) ValidSessionID(id string) bool { return SessionIDPattern.MatchString(id) }

// FreshArgv is [command extraArgs... freshArgs...], each freshArgs element
// rendered with id and prompt; an element that renders to "" is left out,
// so an empty prompt adds no empty argument. It returns nil when a template
// fails for these values (a template function such as slice can fail on
// one prompt and not on another); nil is never a valid argv.
func (t *templated) FreshArgv(id, prompt string) []string { return t.argv(t.fresh, id, prompt) }

// ResumeArgv is FreshArgv with resumeArgs; it is nil when SupportsResume
// is false.
func (t *templated) ResumeArgv(id, prompt string) []string {
	if !t.SupportsResume() {
		return nil
	}
	return t.argv(t.resume, id, prompt)
}

func (t *templated) argv(args []*template.Template, id, prompt string) []string {
	argv := append([]string{t.command}, t.extra...)
	for _, a := range args {
		var sb strings.Builder
		if err := a.Execute(&sb, argData{SessionID: id, Prompt: prompt}); err != nil {
			return nil
		}
		if sb.Len() > 0 {
			argv = append(argv, sb.String())
		}
	}
	return argv
}

// Env is the harness env as configured, on top of loopd's values of
// passEnv.
func (t *templated) Env() map[string]string {
	return t.paneEnv()
}

// Transcript is not Known: these adapters have no transcript rule.
func (t *templated) Transcript(cwd, id string) (Transcript, error) {
	return Transcript{}, nil
}

// TranscriptFrames finds nothing: without a transcript rule there is no
// transcript to read.
func (t *templated) TranscriptFrames(Transcript, []desired.Frame) (map[string]Found, error) {
	return map[string]Found{}, nil
}

// anyText matches a screen with anything on it.
var anyText = regexp.MustCompile(`\S`)

// Screen is Ready when cfg.ReadyPattern matches, or, without one, as soon
// as the screen shows anything; otherwise Busy. These adapters know no
// dialogs, so they never report Blocked.
func (t *templated) Screen(text string) (Screen, string) {
	ready := anyText
	if t.ready != nil {
		ready = t.ready
	}
	if ready.MatchString(text) {
		return ScreenReady, ""
	}
	return ScreenBusy, ""
}
