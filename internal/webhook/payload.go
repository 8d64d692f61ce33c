package webhook

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/google/go-github/v84/github"
)

// payload is the part of a handled event's body that the classifiers read
// (GitHub webhook docs, "Webhook events and payloads"): one struct for the
// eight events, with only the fields loopd uses. encoding/json skips every
// other field without building it, where github.ParseWebHook built the
// whole of go-github's event type, hundreds of fields and pointers for a
// 14 KB comment (BenchmarkClassify). Timestamps keep go-github's type,
// which reads both forms GitHub sends (RFC 3339 text and Unix seconds).
type payload struct {
	Action     string     `json:"action"`
	Repository repository `json:"repository"`
	Sender     user       `json:"sender"`
	// Issue and PullRequest are nil when the payload has none.
	Issue       *issue       `json:"issue"`
	PullRequest *pullRequest `json:"pull_request"`
	Comment     comment      `json:"comment"`
	Review      review       `json:"review"`
	Label       named        `json:"label"`
	// After is a push's new head commit (pull_request synchronize).
	After       string      `json:"after"`
	CheckRun    checkRun    `json:"check_run"`
	CheckSuite  checkSuite  `json:"check_suite"`
	WorkflowRun workflowRun `json:"workflow_run"`
	Workflow    named       `json:"workflow"`
	// Installation is the GitHub App installation the delivery came
	// through, id 0 when the payload names none (a repository webhook).
	Installation struct {
		ID int64 `json:"id"`
	} `json:"installation"`
}

type repository struct {
	Name     string `json:"name"`
	FullName string `json:"full_name"`
	HTMLURL  string `json:"html_url"`
	Owner    user   `json:"owner"`
}

type user struct {
	Login string `json:"login"`
	Type  string `json:"type"` // "User", "Bot", "Organization"
}

type named struct {
	Name string `json:"name"`
}

// thread is what an issue and a pull request both carry: GitHub's pull
// request is an issue, and its payloads repeat the issue's fields.
type thread struct {
	Number    int              `json:"number"`
	State     string           `json:"state"`
	UpdatedAt github.Timestamp `json:"updated_at"`
	Title     string           `json:"title"`
	Body      string           `json:"body"`
	HTMLURL   string           `json:"html_url"`
	Labels    []named          `json:"labels"`
	// User is who opened the issue or pull request.
	User user `json:"user"`
}

type issue struct {
	thread
	// PullRequest is set when the issue is a pull request (GitHub sends
	// issue_comment for both).
	PullRequest *struct{} `json:"pull_request"`
}

type pullRequest struct {
	thread
	Head branch `json:"head"`
	Base branch `json:"base"`
	// MaintainerCanModify is nil when the payload leaves it out.
	MaintainerCanModify *bool `json:"maintainer_can_modify"`
}

type branch struct {
	Ref  string     `json:"ref"`
	SHA  string     `json:"sha"`
	Repo repository `json:"repo"`
}

// comment is an issue comment or a review comment (with a path and a
// diff hunk).
type comment struct {
	ID        int64            `json:"id"`
	HTMLURL   string           `json:"html_url"`
	Body      string           `json:"body"`
	Path      string           `json:"path"`
	DiffHunk  string           `json:"diff_hunk"`
	UpdatedAt github.Timestamp `json:"updated_at"`
}

type review struct {
	ID      int64  `json:"id"`
	State   string `json:"state"`
	HTMLURL string `json:"html_url"`
	Body    string `json:"body"`
}

// prRef is a pull request as a check's pull_requests list names it.
type prRef struct {
	Number int `json:"number"`
	Head   struct {
		Ref string `json:"ref"`
		SHA string `json:"sha"`
	} `json:"head"`
	Base struct {
		Repo named `json:"repo"`
	} `json:"base"`
}

type checkRun struct {
	ID         int64  `json:"id"`
	Name       string `json:"name"`
	Status     string `json:"status"`
	Conclusion string `json:"conclusion"`
	HeadSHA    string `json:"head_sha"`
	DetailsURL string `json:"details_url"`
	HTMLURL    string `json:"html_url"`
	Output     struct {
		Title   string `json:"title"`
		Summary string `json:"summary"`
		Text    string `json:"text"`
	} `json:"output"`
	CheckSuite struct {
		ID int64 `json:"id"`
	} `json:"check_suite"`
	PullRequests []prRef `json:"pull_requests"`
}

type checkSuite struct {
	ID         int64            `json:"id"`
	Status     string           `json:"status"`
	Conclusion string           `json:"conclusion"`
	HeadSHA    string           `json:"head_sha"`
	UpdatedAt  github.Timestamp `json:"updated_at"`
	App        struct {
		Name string `json:"name"`
		Slug string `json:"slug"`
	} `json:"app"`
	PullRequests []prRef `json:"pull_requests"`
}

type workflowRun struct {
	ID           int64   `json:"id"`
	Name         string  `json:"name"`
	Status       string  `json:"status"`
	RunAttempt   int     `json:"run_attempt"`
	Conclusion   string  `json:"conclusion"`
	HeadSHA      string  `json:"head_sha"`
	HTMLURL      string  `json:"html_url"`
	CheckSuiteID int64   `json:"check_suite_id"`
	PullRequests []prRef `json:"pull_requests"`
}

// decodePayload decodes the body of a handled event. The error says what
// does not decode.
func decodePayload(body []byte) (*payload, error) {
	var p payload
	if err := json.Unmarshal(body, &p); err != nil {
		return nil, fmt.Errorf("malformed payload: %w", err)
	}
	return &p, nil
}

// subjects names, for each handled event, the object its payload is about
// (GitHub webhook docs, "Webhook events and payloads"): a payload of the
// event without it is not one GitHub sends.
var subjects = map[string]string{
	"issues":                      "issue",
	"issue_comment":               "issue",
	"pull_request":                "pull_request",
	"pull_request_review":         "pull_request",
	"pull_request_review_comment": "pull_request",
	"check_run":                   "check_run",
	"check_suite":                 "check_suite",
	"workflow_run":                "workflow_run",
}

// CheckPayload reports why body is not a payload of event as GitHub sends
// it, for loopd replay to refuse before it sends anything: not a JSON
// object (the error wraps ErrNotJSON), or, for an event loopd handles,
// without its action, repository, sender or the object it is about
// (ErrNotEventPayload). nil for a payload that looks like one, and for
// any payload of an event loopd does not handle (the daemon answers that
// it ignores it).
func CheckPayload(event string, body []byte) error {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(body, &fields); err != nil || fields == nil {
		if err == nil {
			err = errors.New("null")
		}
		return fmt.Errorf("%w: %w", ErrNotJSON, err)
	}
	subject, handled := subjects[event]
	if !handled {
		return nil
	}
	for _, want := range []string{"action", "repository", "sender", subject} {
		if v, ok := fields[want]; !ok || string(v) == "null" {
			return fmt.Errorf("%w: %s payload has no %q", ErrNotEventPayload, event, want)
		}
	}
	if _, err := decodePayload(body); err != nil {
		return fmt.Errorf("%w: %s %w", ErrNotEventPayload, event, err)
	}
	return nil
}

// The errors of CheckPayload.
var (
	ErrNotJSON         = errors.New("not a JSON object")
	ErrNotEventPayload = errors.New("not a payload of its event")
)
