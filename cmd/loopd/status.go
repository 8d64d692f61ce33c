package main

import (
	"fmt"
	"net/http"
	"time"

	"github.com/loopd/loopd/internal/statuspage"
	"github.com/loopd/loopd/reconciler"
	"github.com/loopd/loopd/schema"
	"github.com/loopd/loopd/store"
)

// registerStatusPage adds serve's read-only status page to mux, on the
// webhook's listener: read from the store, under the reconciler's current
// policy, on while the current config's webhooks.ghWebhook.statusPage is
// (a reload turns it on or off).
func (a *app) registerStatusPage(mux *http.ServeMux, cfg *schema.Config, current func() *schema.Config, rc *reconciler.Reconciler) error {
	page := statuspage.New(statuspage.Options{
		Store:   a.store,
		Hosts:   a.fleet,
		Host:    a.hosting.Host.Name,
		Socket:  cfg.Tmux.Socket,
		Policy:  rc.Policy,
		Enabled: func() bool { return current().Webhooks.GHWebhook.StatusPageOn() },
		Now:     time.Now,
		Log:     a.log,
		Outages: a.outages,
	})
	if err := page.Register(mux); err != nil {
		return fmt.Errorf("webhooks.ghWebhook.path %s: choose one outside /items/ and /static/: %w", cfg.Webhooks.GHWebhook.Path, err)
	}
	return nil
}

// outages are the store's outages that hold now, for the status page:
// the store out of reach of the heartbeats (reconciler.Hosting.StoreDown)
// and its listener down (store.Listener.ListenDown).
func (a *app) outages() []statuspage.Outage {
	var out []statuspage.Outage
	if since, _ := a.hosting.StoreDown(); !since.IsZero() {
		out = append(out, statuspage.Outage{What: "store", Since: since})
	}
	if l, ok := a.store.(store.Listener); ok && l.ListenDown() != nil {
		out = append(out, statuspage.Outage{What: "store listener"})
	}
	return out
}
