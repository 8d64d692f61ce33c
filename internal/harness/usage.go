package harness

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strconv"
	"time"

	"github.com/loopd/loopd/desired"
)

// UsageReader is implemented by adapters whose CLI records its token
// usage in the transcript as the conversation grows (docs/design.md,
// "Budgets"): Claude Code, Codex and Gemini.
type UsageReader interface {
	// ReadUsage reads the transcript tr from byte offset from to its last
	// whole line and returns the model messages' usage found there, and
	// the offset to read from next. A file shorter than from (rewritten,
	// or another file under the same path) is read from its start; one
	// that does not exist reads nothing.
	ReadUsage(tr Transcript, from int64) (desired.UsageRead, error)
}

// ReadUsage returns a's UsageReader, and whether it has one.
func ReadUsage(a Adapter) (UsageReader, bool) {
	u, ok := a.(UsageReader)
	return u, ok
}

// readUsage reads the transcript at path from offset from to its last
// whole line (a torn last line is left for the next read), passing each
// line that holds marker to parse. An error is the open's, the stat's or
// the read's, naming the path.
func readUsage(path string, from int64, marker []byte, parse func(line []byte) (desired.UsageMessage, bool)) (desired.UsageRead, error) {
	out := desired.UsageRead{Path: path, From: from, To: from}
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		out.From, out.To = 0, 0
		return out, nil
	}
	if err != nil {
		return out, fmt.Errorf("read usage %s: %w", path, err)
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return out, fmt.Errorf("read usage %s: %w", path, err)
	}
	if info.Size() < from {
		out.From, out.To = 0, 0
	}
	if info.Size() == out.From {
		return out, nil
	}
	if _, err := f.Seek(out.From, io.SeekStart); err != nil {
		return out, fmt.Errorf("read usage %s: %w", path, err)
	}
	br := bufio.NewReaderSize(io.LimitReader(f, info.Size()-out.From), 64<<10)
	for {
		line, err := br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			// A line longer than the buffer (a large tool result): read
			// it whole, it holds no usage of its own but may.
			rest, err2 := br.ReadBytes('\n')
			line, err = append(bytes.Clone(line), rest...), err2
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				return out, nil // a torn last line waits for the next read
			}
			return out, fmt.Errorf("read usage %s: %w", path, err)
		}
		out.To += int64(len(line))
		if bytes.Contains(line, marker) {
			if m, ok := parse(line); ok {
				out.Messages = append(out.Messages, m)
			}
		}
	}
}

// ReadUsage implements UsageReader: each assistant line's message.usage
// (input_tokens, output_tokens, cache_creation_input_tokens,
// cache_read_input_tokens), by message.id. Claude Code 2.1.x writes one
// line per content block of a message, each with the message's id and
// its usage.
func (c *claudeCode) ReadUsage(tr Transcript, from int64) (desired.UsageRead, error) {
	return readUsage(tr.Path, from, []byte(`"usage"`), claudeUsage)
}

// claudeUsage reads one Claude Code transcript line's usage.
func claudeUsage(line []byte) (desired.UsageMessage, bool) {
	var l struct {
		Type      string    `json:"type"`
		Timestamp time.Time `json:"timestamp"`
		Message   struct {
			ID    string `json:"id"`
			Usage *struct {
				Input      int64 `json:"input_tokens"`
				Output     int64 `json:"output_tokens"`
				CacheWrite int64 `json:"cache_creation_input_tokens"`
				CacheRead  int64 `json:"cache_read_input_tokens"`
			} `json:"usage"`
		} `json:"message"`
	}
	if json.Unmarshal(line, &l) != nil || l.Type != "assistant" || l.Message.ID == "" || l.Message.Usage == nil {
		return desired.UsageMessage{}, false
	}
	u := l.Message.Usage
	return desired.UsageMessage{ID: l.Message.ID, At: l.Timestamp,
		Tokens: desired.Tokens{Input: u.Input, Output: u.Output, CacheWrite: u.CacheWrite, CacheRead: u.CacheRead}}, true
}

// ReadUsage implements UsageReader: each event_msg of type token_count
// with its info (a null info is a rate-limit update only), its
// last_token_usage counted as one message: input_tokens less
// cached_input_tokens as input, cached_input_tokens as cache reads,
// output_tokens (reasoning included) as output. The event has no id of
// its own; the running total_token_usage.total_tokens names it, so that
// the same count written twice counts once.
func (c *codex) ReadUsage(tr Transcript, from int64) (desired.UsageRead, error) {
	return readUsage(tr.Path, from, []byte(`"token_count"`), codexUsage)
}

// codexUsage reads one Codex rollout line's token count.
func codexUsage(line []byte) (desired.UsageMessage, bool) {
	type usage struct {
		Input  int64 `json:"input_tokens"`
		Cached int64 `json:"cached_input_tokens"`
		Output int64 `json:"output_tokens"`
		Total  int64 `json:"total_tokens"`
	}
	var l struct {
		Timestamp time.Time `json:"timestamp"`
		Type      string    `json:"type"`
		Payload   struct {
			Type string `json:"type"`
			Info *struct {
				Total usage `json:"total_token_usage"`
				Last  usage `json:"last_token_usage"`
			} `json:"info"`
		} `json:"payload"`
	}
	if json.Unmarshal(line, &l) != nil || l.Type != "event_msg" || l.Payload.Type != "token_count" || l.Payload.Info == nil {
		return desired.UsageMessage{}, false
	}
	last := l.Payload.Info.Last
	return desired.UsageMessage{ID: "total:" + strconv.FormatInt(l.Payload.Info.Total.Total, 10), At: l.Timestamp,
		Tokens: desired.Tokens{Input: max(0, last.Input-last.Cached), Output: last.Output, CacheRead: last.Cached}}, true
}

// ReadUsage implements UsageReader: each gemini message line's tokens
// (Gemini 0.61 appends one JSON line per record to its chat file, and
// writes a message again whole, with the same id and tokens, when its
// tool calls change), by the message's id: input less cached plus tool
// (the tool-use prompt) as input, cached as cache reads, output plus
// thoughts as output. A message written before its tokens ("tokens":
// null) is counted by its later line; the messages a "$set" lists again
// (the history re-synced) were written as lines of their own and are not
// read there.
func (g *gemini) ReadUsage(tr Transcript, from int64) (desired.UsageRead, error) {
	return readUsage(tr.Path, from, []byte(`"tokens":{`), geminiUsage)
}

// geminiUsage reads one Gemini chat line's tokens.
func geminiUsage(line []byte) (desired.UsageMessage, bool) {
	var l struct {
		ID        string    `json:"id"`
		Type      string    `json:"type"`
		Timestamp time.Time `json:"timestamp"`
		Tokens    *struct {
			Input    int64 `json:"input"`
			Output   int64 `json:"output"`
			Cached   int64 `json:"cached"`
			Thoughts int64 `json:"thoughts"`
			Tool     int64 `json:"tool"`
		} `json:"tokens"`
	}
	if json.Unmarshal(line, &l) != nil || l.Type != "gemini" || l.ID == "" || l.Tokens == nil {
		return desired.UsageMessage{}, false
	}
	t := l.Tokens
	return desired.UsageMessage{ID: l.ID, At: l.Timestamp,
		Tokens: desired.Tokens{Input: max(0, t.Input-t.Cached) + t.Tool, Output: t.Output + t.Thoughts, CacheRead: t.Cached}}, true
}

// Interrupter is implemented by adapters whose CLI's own interrupt of the
// turn in flight is a key other than Escape.
type Interrupter interface {
	// InterruptKeys returns the tmux keys that interrupt the turn in
	// flight and keep the conversation.
	InterruptKeys() []string
}

// InterruptKeys returns the tmux keys that interrupt a's turn in flight
// the way its CLI's own interrupt does: Escape, unless a says otherwise
// (Interrupter). Claude Code 2.1's TUI shows "esc to interrupt" while a
// turn runs; Codex's TUI and Gemini's take Escape the same way, where
// Ctrl-C twice would exit (harness-cli-facts.md).
func InterruptKeys(a Adapter) []string {
	if i, ok := a.(Interrupter); ok {
		return i.InterruptKeys()
	}
	return []string{"Escape"}
}
