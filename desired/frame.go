package desired

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
)

// The frame of a delivery: every rendered prompt holds its untrusted body
// between a begin line and an end line that name the delivery id, and the
// end line carries a digest of what lies between them:
//
//	<<<github-data <id>
//	…body…
//	github-data <id> sha256=<16 hex>>>>
//
// The payload's author cannot know the id GitHub gives the delivery, so a
// body can forge neither line. Prompts stored before the digest existed end
// in "github-data <id>>>>" and are checked by their marker alone.

// digestHex is how many hex digits of the SHA-256 the end line carries
// (64 bits: a mangled body matching by chance is out of reach).
const digestHex = 16

// DeliveryMarker returns the text that names delivery id in both lines of
// its frame. Only the whole prompt holds it, never its header line alone
// (what a long event boots with).
func DeliveryMarker(id string) string { return "github-data " + id }

// FrameBegin returns the line that opens the framed body of delivery id,
// newline included.
func FrameBegin(id string) string { return "<<<" + DeliveryMarker(id) + "\n" }

// FrameEnd returns the line that closes the framed body of delivery id,
// newline included; it carries BodyDigest(body).
func FrameEnd(id, body string) string { return endLine(id, BodyDigest(body)) + "\n" }

func endLine(id, digest string) string {
	return DeliveryMarker(id) + " sha256=" + digest + ">>>"
}

// BodyDigest returns the first 16 hex digits of the SHA-256 of body after
// each tab is replaced by four spaces. Claude Code 2.1.197 stores a pasted
// prompt byte for byte except that it turns every tab into four spaces
// (measured: docs/design.md, "Delivery is verified"), while a prompt passed
// in argv keeps its tabs; the digest is taken over what survives both.
func BodyDigest(body string) string {
	sum := sha256.Sum256([]byte(strings.ReplaceAll(body, "\t", "    ")))
	return hex.EncodeToString(sum[:])[:digestHex]
}

// Frame is what a stored prompt says about the framed body of its delivery:
// the delivery id and the digest its end line carries. Digest is "" for a
// prompt rendered before digests (or one without a frame at all): such a
// delivery is found by its marker alone. Boot is true for the boot frame
// of a spawn (BootFrame), whose ID is the spawn's boot id.
type Frame struct {
	ID     string
	Digest string
	Boot   bool
}

// The boot frame of a spawn: every boot prompt loopd starts a harness
// with, whatever else it holds (an event, a nudge, a limit's or a move's
// prompt, a long event's header line), holds one line that names the
// spawn, BootLine(Status.BootID):
//
//	[loopd-boot <boot id>]
//
// The boot id is random, minted by the executor for each spawn, so no
// payload can hold it. The line seen in a user message of the
// conversation is the one proof that the spawn's boot prompt reached it:
// a boot prompt without an event (a nudge) is delivered by it, and the
// conversation a spawn started is the one whose first message holds it.

// BootMarker returns the text that names boot id in its line.
func BootMarker(id string) string { return "loopd-boot " + id }

// BootLine returns the line, without a newline, that a boot prompt holds
// to name its spawn's boot id.
func BootLine(id string) string { return "[" + BootMarker(id) + "]" }

// WithBootLine returns prompt with the boot line of boot id after it, on
// a line of its own.
func WithBootLine(prompt, id string) string {
	if prompt == "" {
		return BootLine(id)
	}
	return prompt + "\n\n" + BootLine(id)
}

// BootFrame returns the frame of boot id: whole wherever its line is.
func BootFrame(id string) Frame { return Frame{ID: id, Boot: true} }

// FrameOf returns the frame of delivery d as its stored prompt carries it:
// read from d.Prompt, or, for a compact delivery (Delivery.Compact), the
// Digest taken from it when it was stored.
func FrameOf(d Delivery) Frame {
	return Frame{ID: d.ID, Digest: d.Compact().Digest}
}

// frameDigest returns the digest the end line of delivery id's frame in
// prompt carries, "" when prompt has no such line (a prompt rendered
// before digests).
func frameDigest(id, prompt string) string {
	head := DeliveryMarker(id) + " sha256="
	if i := strings.LastIndex(prompt, head); i >= 0 {
		rest := prompt[i+len(head):]
		if len(rest) >= digestHex+3 && rest[digestHex:digestHex+3] == ">>>" && isHex(rest[:digestHex]) {
			return rest[:digestHex]
		}
	}
	return ""
}

func isHex(s string) bool {
	for i := 0; i < len(s); i++ {
		if !('0' <= s[i] && s[i] <= '9' || 'a' <= s[i] && s[i] <= 'f') {
			return false
		}
	}
	return true
}

// Seen is what one message shows of a frame.
type Seen int

// What a message shows of a frame.
const (
	// SeenNone: the message does not hold the frame's begin line.
	SeenNone Seen = iota
	// SeenMangled: the message holds the begin line, but the end line is
	// missing or the text between them does not match the digest.
	SeenMangled
	// SeenWhole: the message holds the whole framed body.
	SeenWhole
)

// Check reports what text, one user message as a transcript stores it,
// shows of f. A frame without a digest is whole wherever its marker is.
func (f Frame) Check(text string) Seen {
	if f.Boot {
		if strings.Contains(text, BootLine(f.ID)) {
			return SeenWhole
		}
		return SeenNone
	}
	if f.Digest == "" {
		if strings.Contains(text, DeliveryMarker(f.ID)) {
			return SeenWhole
		}
		return SeenNone
	}
	begin := FrameBegin(f.ID)
	i := strings.Index(text, begin)
	if i < 0 {
		return SeenNone
	}
	body := text[i+len(begin):]
	j := strings.Index(body, DeliveryMarker(f.ID))
	if j < 0 || !strings.HasPrefix(body[j:], endLine(f.ID, f.Digest)) || BodyDigest(body[:j]) != f.Digest {
		return SeenMangled
	}
	return SeenWhole
}
