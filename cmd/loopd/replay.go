package main

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"github.com/google/go-github/v84/github"
	"github.com/google/uuid"
	"github.com/spf13/cobra"

	"github.com/loopd/loopd/internal/near"
	"github.com/loopd/loopd/internal/webhook"
	"github.com/loopd/loopd/schema"
)

// replayOpts are the flags of loopd replay.
type replayOpts struct {
	url        string
	event      string
	deliveryID string
}

func newReplayCmd(g *globals) *cobra.Command {
	o := &replayOpts{}
	cmd := &cobra.Command{
		Use:   "replay FILE...",
		Short: "POST saved GitHub webhook payloads to a running loopd, signed",
		Long: `replay sends each FILE as one GitHub webhook delivery, signed with the secret
named by webhooks.ghWebhook.secretEnv, to the daemon's webhook URL (default:
the configured listen address and path). The event type comes from --event
or from the file name: <event>.<action>.<n>.json, as in octokit/webhooks'
examples. A file that is not JSON, or not a payload of its event (no action,
repository, sender, or the issue or pull request it is about), is refused
before anything is sent. Each delivery gets a new GUID unless --delivery-id
is given, which replays a redelivery.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, files []string) error {
			cfg, secret, err := g.loadWithSecret()
			if err != nil {
				return err
			}
			hook := cfg.Webhooks.GHWebhook
			url := o.url
			if url == "" {
				url = "http://" + hook.Listen + hook.Path
			}
			// Every file, and its event, first: a file that is not there,
			// a name that tells no event, or a body that is no payload of
			// its event (webhook.CheckPayload) stops the run before
			// anything is sent.
			events := make([]string, len(files))
			bodies := make([][]byte, len(files))
			for i, file := range files {
				if bodies[i], err = os.ReadFile(file); err != nil {
					return err // open <file>: no such file or directory
				}
				if events[i] = o.event; events[i] == "" {
					if events[i], err = eventOfFile(file); err != nil {
						return err
					}
				} else if err := checkEvent(o.event); err != nil {
					return fmt.Errorf("--event: %w", err)
				}
				if err := webhook.CheckPayload(events[i], bodies[i]); err != nil {
					return fmt.Errorf("%s: %w", file, err)
				}
			}
			client := &http.Client{Timeout: schema.ReplayAnswerTimeout}
			for i, file := range files {
				body := bodies[i]
				event := events[i]
				id := o.deliveryID
				if id == "" {
					id = uuid.NewString()
				}
				resp, err := webhook.Replay(cmd.Context(), client, url, []byte(secret), event, id, body)
				if errors.Is(err, syscall.ECONNREFUSED) {
					return fmt.Errorf("%w: is loopd serve running, listening at %s?", err, url)
				}
				if err != nil {
					return err
				}
				msg, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
				resp.Body.Close()
				fmt.Fprintf(cmd.OutOrStdout(), "%s event=%s delivery=%s status=%d %s\n", filepath.Base(file), event, id,
					resp.StatusCode, strings.TrimSpace(string(msg)))
				if resp.StatusCode >= 300 {
					return exitError{code: 1, err: fmt.Errorf("%s: HTTP %d", file, resp.StatusCode)}
				}
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&o.url, "url", "", "webhook URL (default: from the config)")
	cmd.Flags().StringVar(&o.event, "event", "", "X-GitHub-Event (default: from the file name)")
	cmd.Flags().StringVar(&o.deliveryID, "delivery-id", "", "X-GitHub-Delivery (default: a new GUID)")
	return cmd
}

// eventOfFile returns the event type a payload file's name gives
// (<event>.<action>.<n>.json, as octokit/webhooks names its examples): the
// part before the first dot, which must be an event GitHub sends
// (checkEvent). Anything else is an error saying to name the file so or
// give --event, never a request of an event no one sends.
func eventOfFile(file string) (string, error) {
	event, _, _ := strings.Cut(filepath.Base(file), ".")
	if err := checkEvent(event); err != nil {
		return "", fmt.Errorf("%s: cannot tell its event: %w; name the file <event>.<action>.<n>.json or give --event", file, err)
	}
	return event, nil
}

// checkEvent refuses event unless GitHub sends it (the names go-github
// knows), with the nearest names when there are some.
func checkEvent(event string) error {
	if slices.Contains(github.MessageTypes(), event) {
		return nil
	}
	return fmt.Errorf("%q is no GitHub event%s", event, near.DidYouMean(near.Names(event, github.MessageTypes())))
}
