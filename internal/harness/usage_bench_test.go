package harness

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/loopd/loopd/desired"
	"github.com/loopd/loopd/schema"
)

// usageLine is one Claude Code assistant line of about 1 KiB, as the CLI
// writes a content block with the message's usage.
func usageLine(id string, at time.Time) string {
	return fmt.Sprintf(`{"parentUuid":"p","isSidechain":false,"type":"assistant","message":{"id":%q,"model":"claude-sonnet-4-5","role":"assistant","type":"message",`+
		`"content":[{"type":"text","text":%q}],"usage":{"input_tokens":3,"output_tokens":250,"cache_creation_input_tokens":1200,"cache_read_input_tokens":48000}},`+
		`"uuid":"u","timestamp":%q,"userType":"external","entrypoint":"cli","cwd":"/w","sessionId":"s","version":"2.1.197"}`+"\n",
		id, strings.Repeat("x", 700), at.UTC().Format("2006-01-02T15:04:05.000Z07:00"))
}

// geminiUsageLine is one Gemini 0.61 gemini message line of about 1 KiB
// with its tokens, as the CLI appends it to its chat file.
func geminiUsageLine(id string, at time.Time) string {
	return fmt.Sprintf(`{"id":%q,"timestamp":%q,"type":"gemini","content":%q,"thoughts":[],`+
		`"tokens":{"input":49200,"output":250,"cached":48000,"thoughts":40,"tool":0,"total":49490},"model":"gemini-2.5-pro"}`+"\n",
		id, at.UTC().Format("2006-01-02T15:04:05.000Z07:00"), strings.Repeat("x", 800))
}

// BenchmarkReadUsagePass is one pass's reading and counting of usage at
// 1,000 items, each of whose transcripts (256 KiB of history) grew by one
// message since the last pass: incremental, from the offset each record
// keeps (b.N passes); FromStart reads each whole transcript instead, what
// a pass would cost without the offset. Claude is Claude Code's
// transcripts, Gemini Gemini's chat files.
func BenchmarkReadUsagePass(b *testing.B) {
	for _, h := range []struct {
		name   string
		reader UsageReader
		line   func(id string, at time.Time) string
	}{{"Claude", &claudeCode{}, usageLine}, {"Gemini", &gemini{}, geminiUsageLine}} {
		b.Run(h.name, func(b *testing.B) { benchmarkReadUsagePass(b, h.reader, h.line) })
	}
}

func benchmarkReadUsagePass(b *testing.B, c UsageReader, usageLine func(id string, at time.Time) string) {
	const items, history = 1000, 256 << 10
	dir := b.TempDir()
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

// BenchmarkGeminiTranscriptPass is one pass's finding of the chat file of
// 1,000 Gemini items (Transcript, which judges each file whole: whether it
// is the conversation's and resumable), each of 256 KiB: Unchanged when no
// file changed since the last pass (each file's verdict kept by its size
// and time), Grown when each grew by one message (each read whole again).
func BenchmarkGeminiTranscriptPass(b *testing.B) {
	const items, history = 1000, 256 << 10
	home := b.TempDir()
	b.Setenv("GEMINI_CLI_HOME", home)
	a, err := New(AdapterGemini, schema.Harness{Command: "gemini", Env: map[string]string{"GEMINI_CLI_HOME": home}})
	if err != nil {
		b.Fatal(err)
	}
	g := a.(*gemini)
	shared := filepath.Join(home, ".gemini")
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	type item struct{ cwd, id, path string }
	list := make([]item, items)
	for i := range list {
		// Each item's own config dir (ItemState), with its one project.
		cwd := filepath.Join(home, "w", fmt.Sprintf("item-%d", i))
		if err := os.MkdirAll(cwd, 0o700); err != nil {
			b.Fatal(err)
		}
		cwd, err := physicalDir(cwd)
		if err != nil {
			b.Fatal(err)
		}
		config, slug := filepath.Join(itemDir(shared, cwd), ".gemini"), fmt.Sprintf("item-%d", i)
		chats := filepath.Join(config, "tmp", slug, "chats")
		reg, err := json.Marshal(map[string]any{"projects": map[string]string{cwd: slug}})
		if err != nil {
			b.Fatal(err)
		}
		if err := errors.Join(os.MkdirAll(chats, 0o700), os.WriteFile(filepath.Join(config, "projects.json"), reg, 0o600),
			os.WriteFile(filepath.Join(config, "tmp", slug, ".project_root"), []byte(cwd), 0o600)); err != nil {
			b.Fatal(err)
		}
		id := fmt.Sprintf("%08x-2222-4333-8444-555555555555", i)
		var sb strings.Builder
		sb.WriteString(`{"sessionId":"` + id + `","projectHash":"h","kind":"main"}` + "\n")
		sb.WriteString(`{"id":"u","type":"user","content":[{"text":"hi"}]}` + "\n")
		for n := 0; sb.Len() < history; n++ {
			sb.WriteString(geminiUsageLine(fmt.Sprintf("m_%d_%d", i, n), t0.Add(time.Duration(n)*time.Second)))
		}
		list[i] = item{cwd: cwd, id: id, path: filepath.Join(chats, "session-2026-01-01T00-00-"+id[:8]+".jsonl")}
		if err := os.WriteFile(list[i].path, []byte(sb.String()), 0o600); err != nil {
			b.Fatal(err)
		}
	}
	pass := func(b *testing.B) {
		for _, it := range list {
			if tr, err := g.Transcript(it.cwd, it.id); err != nil || !tr.Exists {
				b.Fatal(it.path, tr, err)
			}
		}
	}
	pass(b)
	b.Run("Unchanged", func(b *testing.B) {
		for b.Loop() {
			pass(b)
		}
	})
	b.Run("Grown", func(b *testing.B) {
		for n := 0; b.Loop(); n++ {
			b.StopTimer()
			for i, it := range list {
				f, err := os.OpenFile(it.path, os.O_APPEND|os.O_WRONLY, 0)
				if err != nil {
					b.Fatal(err)
				}
				_, err = f.WriteString(geminiUsageLine(fmt.Sprintf("m_%d_new%d", i, n), t0.Add(time.Hour)))
				if err = errors.Join(err, f.Close()); err != nil {
					b.Fatal(err)
				}
			}
			b.StartTimer()
			pass(b)
		}
	})
}
