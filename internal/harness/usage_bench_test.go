package harness

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/loopd/loopd/desired"
)

// usageLine is one Claude Code assistant line of about 1 KiB, as the CLI
// writes a content block with the message's usage.
func usageLine(id string, at time.Time) string {
	return fmt.Sprintf(`{"parentUuid":"p","isSidechain":false,"type":"assistant","message":{"id":%q,"model":"claude-sonnet-4-5","role":"assistant","type":"message",`+
		`"content":[{"type":"text","text":%q}],"usage":{"input_tokens":3,"output_tokens":250,"cache_creation_input_tokens":1200,"cache_read_input_tokens":48000}},`+
		`"uuid":"u","timestamp":%q,"userType":"external","entrypoint":"cli","cwd":"/w","sessionId":"s","version":"2.1.197"}`+"\n",
		id, strings.Repeat("x", 700), at.UTC().Format("2006-01-02T15:04:05.000Z07:00"))
}

// BenchmarkReadUsagePass is one pass's reading and counting of usage at
// 1,000 items, each of whose transcripts (256 KiB of history) grew by one
// message since the last pass: incremental, from the offset each record
// keeps (b.N passes); FromStart reads each whole transcript instead, what
// a pass would cost without the offset.
func BenchmarkReadUsagePass(b *testing.B) {
	const items, history = 1000, 256 << 10
	dir := b.TempDir()
	c := &claudeCode{}
	w := desired.Weights{Input: 1, Output: 5, CacheWrite: 1.25, CacheRead: 0.1}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	paths := make([]string, items)
	states := make([]desired.BudgetState, items)
	for i := range paths {
		paths[i] = filepath.Join(dir, fmt.Sprintf("%d.jsonl", i))
		var sb strings.Builder
		for n := 0; sb.Len() < history; n++ {
			sb.WriteString(usageLine(fmt.Sprintf("msg_%d_%d", i, n), t0.Add(time.Duration(n)*time.Second)))
		}
		if err := os.WriteFile(paths[i], []byte(sb.String()), 0o600); err != nil {
			b.Fatal(err)
		}
		read, err := c.ReadUsage(Transcript{Path: paths[i]}, 0)
		if err != nil {
			b.Fatal(err)
		}
		states[i], _ = states[i].Count(read, w, 24*time.Hour, t0.Add(time.Hour))
	}
	grow := func(pass int) {
		for i, p := range paths {
			f, err := os.OpenFile(p, os.O_APPEND|os.O_WRONLY, 0)
			if err != nil {
				b.Fatal(err)
			}
			_, err = f.WriteString(usageLine(fmt.Sprintf("msg_%d_new%d", i, pass), t0.Add(time.Hour+time.Duration(pass)*time.Second)))
			if err = errors.Join(err, f.Close()); err != nil {
				b.Fatal(err)
			}
		}
	}
	for _, tc := range []struct {
		name      string
		fromStart bool
	}{{"Incremental", false}, {"FromStart", true}} {
		b.Run(tc.name, func(b *testing.B) {
			var bytes int64
			for pass := 0; b.Loop(); pass++ {
				b.StopTimer()
				grow(pass)
				b.StartTimer()
				for i, p := range paths {
					from := states[i].UsageOffset
					if tc.fromStart {
						from = 0
					}
					read, err := c.ReadUsage(Transcript{Path: p}, from)
					if err != nil {
						b.Fatal(err)
					}
					bytes += read.To - read.From
					states[i], _ = states[i].Count(read, w, 24*time.Hour, t0.Add(2*time.Hour))
				}
			}
			b.ReportMetric(float64(bytes)/float64(b.N), "bytes_read/pass")
		})
	}
}
