package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/loopd/loopd/actions"
	"github.com/loopd/loopd/internal/channel"
	"github.com/loopd/loopd/schema"
)

// maxCredentialInput caps what the credential helper reads of git's
// request, in bytes: a handful of short attributes.
const maxCredentialInput = 64 << 10

func newCredentialCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   actions.CredentialCommand + " get|store|erase|token",
		Short: "git's credential helper in an agent's environment: asks loopd serve over the item's channel",
		Long: `credential is the git credential helper loopd names in the environment of
the agents whose route hands out a credential (agentCredentials): git runs
"loopd credential get" with the remote's protocol, host and path on stdin
(gitcredentials(7)), and it asks loopd serve, over the socket in the item's
channel ($LOOPD_CHANNEL, with the spawn's token $LOOPD_CHANNEL_TOKEN), for
the credential of that remote at that moment: an installation token scoped
to the item's repository (agentCredentials: app) or loopd's token
(agentCredentials: token). loopd refuses another repository, and anything
to a process that is not the item's current spawn; the helper then tells
git to stop (quit=1). store and erase do nothing: loopd mints again. token
prints a token for the item's repository, for gh.

It needs neither the config nor the store. Without loopd serve (a cron
reconcile --once) nothing answers, and no credential is handed out.`,
		Args:      cobra.ExactArgs(1),
		ValidArgs: []string{"get", "store", "erase", "token"},
		RunE: func(cmd *cobra.Command, args []string) error {
			return credentialHelper(cmd.Context(), args[0], os.Getenv, cmd.InOrStdin(), cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	return cmd
}

// credentialHelper runs one operation of the credential helper, op (get, store,
// erase or token), with the channel getenv names.
func credentialHelper(ctx context.Context, op string, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer) error {
	switch op {
	case "store", "erase":
		_, err := io.Copy(io.Discard, io.LimitReader(stdin, maxCredentialInput))
		return err
	case "get", "token":
	default:
		return fmt.Errorf("credential %q: want get, store, erase or token", op)
	}
	dir, token := getenv(channel.EnvDir), getenv(channel.EnvToken)
	if dir == "" || token == "" {
		return fmt.Errorf("credential %s: %w", op, channel.ErrNoChannel)
	}
	req := channel.Request{Token: token, Op: channel.OpToken}
	if op == "get" {
		attrs, err := readCredentialRequest(stdin)
		if err != nil {
			return fmt.Errorf("credential get: %w", err)
		}
		req = channel.Request{Token: token, Op: channel.OpGit, Protocol: attrs["protocol"], Host: attrs["host"], Path: attrs["path"]}
	}
	ctx, cancel := context.WithTimeout(ctx, schema.ChannelRequestTimeout)
	defer cancel()
	a, err := channel.Ask(ctx, dir, req)
	if errors.Is(err, channel.ErrNoDaemon) {
		err = fmt.Errorf("%w: credentials are handed out by loopd serve only (a cron reconcile --once gives none)", err)
	}
	if err == nil && a.Refused != "" {
		err = errors.New("loopd refused: " + a.Refused)
	}
	if err != nil {
		if op == "get" {
			// git asks no other helper, nor a terminal, after quit.
			fmt.Fprintln(stdout, "quit=1")
			fmt.Fprintln(stderr, "loopd credential:", err)
			return nil
		}
		return fmt.Errorf("credential %s: %w", op, err)
	}
	if op == "token" {
		_, err := fmt.Fprintln(stdout, a.Password)
		return err
	}
	out := "username=" + a.Username + "\npassword=" + a.Password + "\n"
	if !a.Expires.IsZero() {
		// git 2.41 and later drop the credential once it expires.
		out += "password_expiry_utc=" + strconv.FormatInt(a.Expires.Unix(), 10) + "\n"
	}
	_, err = io.WriteString(stdout, out)
	return err
}

// readCredentialRequest reads git's attributes (key=value lines, up to a
// blank line or the end) from r.
func readCredentialRequest(r io.Reader) (map[string]string, error) {
	attrs := map[string]string{}
	sc := bufio.NewScanner(io.LimitReader(r, maxCredentialInput))
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			break
		}
		if k, v, ok := strings.Cut(line, "="); ok {
			attrs[k] = v
		}
	}
	return attrs, sc.Err()
}
