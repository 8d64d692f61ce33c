package journal

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestReconcileIDOnLinesAndRows: a line logged with a pass's context, and
// a row a Recorder writes with it, carry its reconcile_id once; a line
// logged outside a pass carries none.
func TestReconcileIDOnLinesAndRows(t *testing.T) {
	var out bytes.Buffer
	log := slog.New(WithPassID(slog.NewJSONHandler(&out, nil)))
	j := &memJournal{}
	rec := NewRecorder(log, j, time.Now)
	ctx := WithReconcileID(context.Background(), "0a1b2c3d4e5f")

	log.InfoContext(ctx, string(ServeListening))
	rec.Record(ctx, slog.LevelInfo, SessionSpawned, "o/r#1", KeySession, "loop-o-r-1")
	log.Info(string(ServeStopped))

	got := strings.Split(strings.TrimSpace(out.String()), "\n")
	require.Len(t, got, 3)
	for _, line := range got[:2] {
		assert.Equal(t, 1, strings.Count(line, `"reconcile_id"`), line)
		var m map[string]any
		require.NoError(t, json.Unmarshal([]byte(line), &m))
		assert.Equal(t, "0a1b2c3d4e5f", m[KeyReconcileID], line)
	}
	assert.NotContains(t, got[2], KeyReconcileID)
	require.Len(t, j.events, 1)
	assert.Equal(t, "0a1b2c3d4e5f", j.events[0].Attrs[KeyReconcileID])
	assert.Equal(t, "", ReconcileID(context.Background()))
	assert.NotEqual(t, NewReconcileID(), NewReconcileID())
}

// TestRowAndLogSplitRecord: Row returns the row Record writes and writes
// nothing; Log writes Record's line and no row.
func TestRowAndLogSplitRecord(t *testing.T) {
	var out bytes.Buffer
	log := slog.New(slog.NewJSONHandler(&out, nil))
	j := &memJournal{}
	at := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	rec := NewRecorder(log, j, func() time.Time { return at })
	ctx := WithReconcileID(context.Background(), "0a1b2c3d4e5f")

	rec.Record(ctx, slog.LevelInfo, DeliveryAccepted, "o/r#1", KeyDelivery, "d-1", "queued", true)
	require.Len(t, j.events, 1)
	recorded := out.String()
	out.Reset()

	row := rec.Row(ctx, slog.LevelInfo, DeliveryAccepted, "o/r#1", KeyDelivery, "d-1", "queued", true)
	assert.Equal(t, j.events[0], row)
	assert.Empty(t, out.String(), "Row logs nothing")
	rec.Log(ctx, slog.LevelInfo, DeliveryAccepted, "o/r#1", KeyDelivery, "d-1", "queued", true)
	assert.Len(t, j.events, 1, "Log writes no row")
	strip := func(line string) string { return line[strings.Index(line, `"level"`):] }
	assert.Equal(t, strip(recorded), strip(out.String()), "Log writes Record's line")
}
