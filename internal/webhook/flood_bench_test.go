package webhook

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/loopd/loopd/internal/journal"
	"github.com/loopd/loopd/schema"
	"github.com/loopd/loopd/store/sqlstore"
)

// flood is a flood of stalled connections to a server: each sends one
// byte of a request's headers, then nothing, and is opened again as soon
// as the server cuts it.
type flood struct {
	stop chan struct{}
	wg   sync.WaitGroup
	cuts atomic.Int64 // connections the server cut
}

// floodFrom returns the local addresses a flood of n connections opens
// them from, spread evenly: one address (127.0.0.2), or 100
// (127.0.1.1–127.0.1.100). Linux routes all of 127.0.0.0/8 to loopback.
func floodFrom(addresses int) []string {
	if addresses == 1 {
		return []string{"127.0.0.2"}
	}
	out := make([]string, addresses)
	for i := range out {
		out[i] = "127.0.1." + strconv.Itoa(i+1)
	}
	return out
}

// startFlood opens n stalled connections to addr from the local addresses
// from (round robin) and keeps them open, each reopened when cut, until
// the test ends.
func startFlood(tb testing.TB, addr string, n int, from []string) *flood {
	f := &flood{stop: make(chan struct{})}
	for i := range n {
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from[i%len(from)])}}
		f.wg.Go(func() { f.keep(d, addr) })
	}
	tb.Cleanup(func() {
		close(f.stop)
		f.wg.Wait()
	})
	return f
}

// keep holds one stalled connection to addr open, dialled with d, until
// f stops.
func (f *flood) keep(d net.Dialer, addr string) {
	for {
		select {
		case <-f.stop:
			return
		default:
		}
		c, err := d.Dial("tcp", addr)
		if err != nil {
			// A full accept queue, or ports in TIME_WAIT: try again soon.
			select {
			case <-f.stop:
				return
			case <-time.After(time.Millisecond):
			}
			continue
		}
		_, _ = c.Write([]byte("P"))
		cut := make(chan struct{})
		go func() {
			_, _ = io.Copy(io.Discard, c)
			close(cut)
		}()
		select {
		case <-cut:
			f.cuts.Add(1)
			c.Close()
		case <-f.stop:
			c.Close()
			<-cut
			return
		}
	}
}

// floodHandler is the real handler on a real SQLite store in dir, as
// serve runs it, logging nowhere.
func floodHandler(tb testing.TB, dir string) http.Handler {
	store, err := sqlstore.OpenSQLite(context.Background(), filepath.Join(dir, "loopd.db"))
	require.NoError(tb, err)
	tb.Cleanup(func() { store.Close() })
	log := slog.New(slog.DiscardHandler)
	return New(Options{
		Secret: testSecret, Config: func() schema.GHWebhook { return defaultConfig() }, Store: store,
		Recorder: journal.NewRecorder(log, store, time.Now), Log: log, Now: time.Now,
	})
}

// loadAverage returns the machine's load average over the last minute
// (proc(5), /proc/loadavg).
func loadAverage(tb testing.TB) float64 {
	raw, err := os.ReadFile("/proc/loadavg")
	require.NoError(tb, err)
	v, err := strconv.ParseFloat(strings.Fields(string(raw))[0], 64)
	require.NoError(tb, err)
	return v
}

// BenchmarkDeliveryUnderStalledFlood measures how long a valid signed
// delivery (from 127.0.0.1) takes to be answered by the real handler
// behind NewServer with DefaultServerLimits while 1,000 stalled
// connections, reopened as they are cut, hold the server: from one
// address, or from 100 (10 each, under the bound per address). ns/op is
// the delivery's answer time; load1 is the machine's load average when the
// benchmark ends (the machine is shared: docs/performance.md).
func BenchmarkDeliveryUnderStalledFlood(b *testing.B) {
	for _, addresses := range []int{1, 100} {
		b.Run(fmt.Sprintf("from_%d_addresses", addresses), func(b *testing.B) {
			addr := serve(b, floodHandler(b, b.TempDir()), DefaultServerLimits)
			startFlood(b, addr, 1000, floodFrom(addresses))
			// GitHub opens a connection per delivery.
			client := &http.Client{Timeout: time.Minute, Transport: &http.Transport{DisableKeepAlives: true}}
			n := 0
			for b.Loop() {
				n++
				// A comment of its own each time: the same body under
				// another id would be a replay.
				body, _ := comments(b, 1)
				resp, err := Replay(context.Background(), client, "http://"+addr, testSecret, "issue_comment", "d-"+strconv.Itoa(n), body[0])
				require.NoError(b, err)
				resp.Body.Close()
				require.Equal(b, http.StatusAccepted, resp.StatusCode)
			}
			b.ReportMetric(loadAverage(b), "load1")
		})
	}
}
