package journal

import (
	"bytes"
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// memJournal is an in-memory Appender.
type memJournal struct {
	mu     sync.Mutex
	events []Event
}

func (m *memJournal) AppendEvent(_ context.Context, e Event) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.events = append(m.events, e)
	return nil
}

func TestHandlerJournalsOnlyItsNames(t *testing.T) {
	var out bytes.Buffer
	j := &memJournal{}
	log := slog.New(NewHandler(slog.NewTextHandler(&out, nil), j, ConfigReloaded, ConfigInvalid)).With("path", "/etc/loopd.yaml")

	log.Warn(string(ConfigInvalid), "err", "line 3: unknown key", "work_item", "o/r#1")
	log.Info("something.else", "k", "v")

	require.Len(t, j.events, 1)
	e := j.events[0]
	assert.Equal(t, ConfigInvalid, e.Name)
	assert.Equal(t, slog.LevelWarn, e.Level)
	assert.Equal(t, "o/r#1", e.WorkItem)
	assert.Equal(t, map[string]string{"path": "/etc/loopd.yaml", "err": "line 3: unknown key"}, e.Attrs)
	assert.Contains(t, out.String(), "msg=config.invalid")
	assert.Contains(t, out.String(), "msg=something.else", "every record still reaches the log")
}

func TestRecorderLogsAndJournals(t *testing.T) {
	var out bytes.Buffer
	j := &memJournal{}
	r := NewRecorder(slog.New(slog.NewTextHandler(&out, nil)), j, time.Now)
	r.Record(context.Background(), slog.LevelInfo, SessionSpawned, "o/r#1", "session", "loop-o-r-1", "n", 3)

	require.Len(t, j.events, 1)
	assert.Equal(t, SessionSpawned, j.events[0].Name)
	assert.Equal(t, "o/r#1", j.events[0].WorkItem)
	assert.Equal(t, map[string]string{"session": "loop-o-r-1", "n": "3"}, j.events[0].Attrs)
	assert.Contains(t, out.String(), `msg=session.spawned work_item=o/r#1 session=loop-o-r-1 n=3`)
}
