package webhook

import (
	"bytes"
	"slices"
	"unicode/utf8"

	"github.com/yuin/goldmark/ast"
	"github.com/yuin/goldmark/parser"
	"github.com/yuin/goldmark/text"
)

// A link reference definition ([x]: https://example.com "title", and the
// comment idiom [//]: # (text)) is markdown that GitHub parses and never
// shows. CommonMark 0.31.2, §4.7 "Link reference definitions": when a
// paragraph closes, as many definitions as its raw content starts with are
// taken off it; each is a link label (at most 999 characters between the
// brackets, no unescaped bracket, not blank), ':', spaces or tabs with at
// most one line ending, a link destination (<…> on one line, or a run of
// characters with no space or control and balanced parentheses), and an
// optional link title ("…", '…' or (…), separated from the destination by
// spaces or tabs, which may span lines but not a blank one), then only
// spaces or tabs to the end of the line. A title followed by anything else
// is dropped, and the definition holds if its destination ended its line.
//
// GitHub parses with cmark-gfm, whose reader of a definition
// (cmark_parse_reference_inline, src/inlines.c, and _scan_link_title,
// src/scanners.re) differs from the spec's prose in a few places: a label
// of at most 1000 bytes, a destination that may hold controls and
// unbalanced or deeper parentheses, a '\' that escapes a line ending inside
// <…>, and a title read as the longest match of its pattern, so that \"
// may end a title and \\" does not. Each paragraph is read both ways and
// the reading that takes more of it wins: what either would hide is
// marked hidden, and what both show stays as it is.

// linkDefinitions is gfm's paragraph transformer in place of goldmark's
// (parser.LinkReferenceParagraphTransformer, which reads a definition
// after a title's trailing text on the same line, where CommonMark reads
// none). It takes the definitions off the start of each paragraph, puts a
// LinkReferenceDefinition node before it for each, whose lines are the
// definition's text as GitHub hides it, and adds its reference, so that the
// links that use it resolve as on GitHub.
type linkDefinitions struct{}

// Transform takes the link reference definitions off the start of the
// paragraph node (parser.ParagraphTransformer).
func (linkDefinitions) Transform(node *ast.Paragraph, reader text.Reader, pc parser.Context) {
	lines := node.Lines()
	if lines.Len() == 0 {
		return
	}
	if first := lines.At(0); !bytes.HasPrefix(bytes.TrimLeft(first.Value(reader.Source()), " \t"), []byte("[")) {
		return
	}
	p := newParagraph(reader.Source(), lines)
	defs := p.read(cmarkGFM)
	if spec := p.read(commonMark); end(spec) > end(defs) {
		defs = spec
	}
	if len(defs) == 0 {
		return
	}
	for i, d := range defs {
		ref := ast.NewLinkReferenceDefinition(d.label, d.destination, d.title)
		for _, seg := range p.segments(d.start, d.shown) {
			ref.Lines().Append(seg)
		}
		if i == 0 {
			ref.SetBlankPreviousLines(node.HasBlankPreviousLines())
		}
		node.Parent().InsertBefore(node.Parent(), node, ref)
		pc.AddReference(parser.NewReference(d.label, d.destination, d.title))
	}
	taken := len(p.lines)
	if e := end(defs); e < len(p.b) {
		taken = p.lineAt(e)
	}
	if taken >= lines.Len() {
		node.Parent().RemoveChild(node.Parent(), node)
		return
	}
	lines.SetSliced(taken, lines.Len())
	node.SetLines(lines)
}

// definition is one link reference definition read off a paragraph; its
// offsets are in the paragraph's content.
type definition struct {
	label, destination, title []byte
	start                     int // the '['
	shown                     int // the end of its text: before its last line's trailing spaces and line ending
	next                      int // just past that line ending: where the next definition may start
}

// end returns where the last of defs ends (its next), 0 for none.
func end(defs []definition) int {
	if len(defs) == 0 {
		return 0
	}
	return defs[len(defs)-1].next
}

// reading is one reader of link reference definitions: cmark-gfm's or the
// spec's.
type reading struct {
	// labelOK reports whether a label of n bytes and r characters between
	// its brackets may be a link label.
	labelOK func(n, r int) bool
	// controls reports whether a destination without <…> may hold ASCII
	// controls; balanced whether its parentheses must balance; maxDepth
	// bounds their nesting (0: no bound).
	controls, balanced bool
	maxDepth           int
	// cmarkPointy reports whether <…> is read as cmark-gfm does: '\'
	// escapes whatever byte follows it, a line ending among them, and only
	// '\n' and '<' end it unclosed.
	cmarkPointy bool
	// longestTitle reports whether a title is the longest match of its
	// pattern (re2c's rule) rather than ending at its first unescaped
	// closer.
	longestTitle bool
}

// cmarkGFM is cmark-gfm's reader (src/inlines.c: link_label with
// MAX_LINK_LABEL_LENGTH 1000, manual_scan_link_url, manual_scan_link_url_2
// with at most 32 open parentheses; src/scanners.re: _scan_link_title).
var cmarkGFM = reading{
	labelOK:      func(n, _ int) bool { return n <= 1000 },
	controls:     true,
	maxDepth:     32,
	cmarkPointy:  true,
	longestTitle: true,
}

// commonMark is the spec's reader (CommonMark 0.31.2, "Link reference
// definitions", "link label", "link destination", "link title"), with no
// bound on the nesting of parentheses, which the spec leaves to
// implementations.
var commonMark = reading{
	labelOK:  func(_, r int) bool { return r <= 999 },
	balanced: true,
}

// paragraph is the raw content of a paragraph as CommonMark reads it for
// definitions: its lines joined, each ending in a line ending (one is added
// to a last line without one, as cmark-gfm does), and where each line sits
// in the source.
type paragraph struct {
	b     []byte
	lines []text.Segment // each line's segment of the source
	at    []int          // where each line starts in b
	// bare and escaped hold, per title closer ('"', '\'', ')'), the
	// offsets in b of the characters a longest-match title cannot hold
	// and of the closers preceded by '\' (titleEnds), made on first use.
	bare, escaped map[byte][]int
}

// newParagraph returns the content of the paragraph lines of src.
func newParagraph(src []byte, lines *text.Segments) *paragraph {
	p := &paragraph{}
	for i := range lines.Len() {
		seg := lines.At(i)
		p.at = append(p.at, len(p.b))
		p.lines = append(p.lines, seg)
		p.b = append(p.b, src[seg.Start:seg.Stop]...)
		if !bytes.HasSuffix(p.b, []byte("\n")) && !bytes.HasSuffix(p.b, []byte("\r")) {
			p.b = append(p.b, '\n')
		}
	}
	return p
}

// lineAt returns the index of the line that holds offset o of the
// content; len(lines) for the end.
func (p *paragraph) lineAt(o int) int {
	i, found := slices.BinarySearch(p.at, o)
	if found || i == 0 {
		return i
	}
	return i - 1
}

// source returns where offset o of the content, in its line i, is in the
// source: the end of the line's segment for a line ending that was added.
func (p *paragraph) source(i, o int) int {
	return min(p.lines[i].Start+o-p.at[i], p.lines[i].Stop)
}

// segments returns the source segments of the content from start to end,
// one per line.
func (p *paragraph) segments(start, end int) []text.Segment {
	var out []text.Segment
	for i := p.lineAt(start); i < len(p.lines) && p.at[i] < end; i++ {
		from, to := max(start, p.at[i]), end
		if i+1 < len(p.at) {
			to = min(to, p.at[i+1])
		}
		out = append(out, text.NewSegment(p.source(i, from), p.source(i, to)))
	}
	return out
}

// read returns the definitions the content starts with, under rd.
func (p *paragraph) read(rd reading) []definition {
	var out []definition
	at := 0
	for {
		d, ok := p.definition(at, rd)
		if !ok {
			return out
		}
		out = append(out, d)
		at = d.next
	}
}

// definition reads one definition at offset at of the content, under rd
// (cmark_parse_reference_inline). Indentation before its '[' is skipped:
// a paragraph's lines keep theirs here, where CommonMark strips it.
func (p *paragraph) definition(at int, rd reading) (definition, bool) {
	b := p.b
	i := skipSpaces(b, at)
	if i >= len(b) || b[i] != '[' {
		return definition{}, false
	}
	d := definition{start: i}
	label, i, ok := linkLabel(b, i, rd)
	if !ok || i >= len(b) || b[i] != ':' {
		return definition{}, false
	}
	d.label = label
	i = spaceOrLineEnd(b, i+1)
	dest, i, ok := destination(b, i, rd)
	if !ok {
		return definition{}, false
	}
	d.destination = dest
	beforeTitle := i
	if t := spaceOrLineEnd(b, i); t > i && t < len(b) {
		// The longest title whose line ends after it.
		for _, e := range p.titleEnds(t, rd) {
			if shown, next, ok := lineEnd(b, e); ok && next > d.next {
				d.title, d.shown, d.next = b[t+1:e-1], shown, next
			}
		}
	}
	if d.next == 0 {
		shown, next, ok := lineEnd(b, beforeTitle)
		if !ok {
			return definition{}, false
		}
		d.shown, d.next = shown, next
	}
	return d, true
}

// skipSpaces returns the offset past the spaces and tabs at b[i:].
func skipSpaces(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t') {
		i++
	}
	return i
}

// skipLineEnd returns the offset past the line ending ("\r\n", "\n" or
// "\r") at b[i:], and whether there is one or b ends there.
func skipLineEnd(b []byte, i int) (int, bool) {
	seen := false
	if i < len(b) && b[i] == '\r' {
		i, seen = i+1, true
	}
	if i < len(b) && b[i] == '\n' {
		i, seen = i+1, true
	}
	return i, seen || i >= len(b)
}

// spaceOrLineEnd returns the offset past the spaces and tabs at b[i:],
// with at most one line ending among them (cmark-gfm's spnl).
func spaceOrLineEnd(b []byte, i int) int {
	i = skipSpaces(b, i)
	if j, ok := skipLineEnd(b, i); ok && j > i {
		i = skipSpaces(b, j)
	}
	return i
}

// lineEnd reports whether only spaces or tabs follow offset i to the end of
// its line, and returns where they start and the offset past the line
// ending.
func lineEnd(b []byte, i int) (shown, next int, ok bool) {
	j := skipSpaces(b, i)
	next, ok = skipLineEnd(b, j)
	return i, next, ok
}

// isSpace reports whether c is a space, tab or line ending (cmark_isspace).
func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// isPunct reports whether c is ASCII punctuation (cmark_ispunct;
// CommonMark's "ASCII punctuation character").
func isPunct(c byte) bool {
	return c >= '!' && c <= '/' || c >= ':' && c <= '@' || c >= '[' && c <= '`' || c >= '{' && c <= '~'
}

// linkLabel reads the link label at b[i] == '[' (cmark-gfm's link_label):
// up to the first ']' not escaped by '\', with no unescaped '[' before it
// and not blank. It returns the label between the brackets and the offset
// past the ']'.
func linkLabel(b []byte, i int, rd reading) ([]byte, int, bool) {
	j := i + 1
	for j < len(b) && b[j] != '[' && b[j] != ']' {
		if b[j] == '\\' && j+1 < len(b) && isPunct(b[j+1]) {
			j++
		}
		j++
	}
	if j >= len(b) || b[j] != ']' {
		return nil, 0, false
	}
	label := b[i+1 : j]
	if !rd.labelOK(len(label), utf8.RuneCount(label)) || len(bytes.TrimFunc(label, func(r rune) bool { return r < utf8.RuneSelf && isSpace(byte(r)) })) == 0 {
		return nil, 0, false
	}
	return label, j + 1, true
}

// destination reads the link destination at b[i:] (manual_scan_link_url
// and manual_scan_link_url_2) and returns it and the offset past it.
func destination(b []byte, i int, rd reading) ([]byte, int, bool) {
	if i >= len(b) {
		return nil, 0, false
	}
	if b[i] == '<' {
		for j := i + 1; j < len(b); j++ {
			switch c := b[j]; {
			case c == '>':
				return b[i+1 : j], j + 1, true
			case c == '\\' && (rd.cmarkPointy || (j+1 < len(b) && isPunct(b[j+1]))):
				j++
			case c == '\n' || c == '<' || (!rd.cmarkPointy && c == '\r'):
				return nil, 0, false
			}
		}
		return nil, 0, false
	}
	j, depth := i, 0
	for j < len(b) {
		c := b[j]
		switch {
		case c == '\\' && j+1 < len(b) && isPunct(b[j+1]):
			j += 2
			continue
		case c == '(':
			if depth++; rd.maxDepth > 0 && depth > rd.maxDepth {
				return nil, 0, false
			}
		case c == ')':
			if depth == 0 {
				return b[i:j], j, j > i || !rd.balanced
			}
			depth--
		case isSpace(c) || (!rd.controls && (c < ' ' || c == 0x7f)):
			if j == i || (rd.balanced && depth != 0) {
				return nil, 0, false
			}
			return b[i:j], j, true
		}
		j++
	}
	return nil, 0, false
}

// closerOf returns the character that ends a title opened by c, 0 for no
// title opener.
func closerOf(c byte) byte {
	switch c {
	case '"', '\'':
		return c
	case '(':
		return ')'
	}
	return 0
}

// titleEnds returns the offsets just past the title that opens at b[t]
// under rd, at most one: the spec's ends at the first closer not escaped by
// '\' (an unescaped '(' inside (…) ends it as no title); cmark-gfm's is the
// longest match of its pattern, in which a closer (or, in (…), either
// parenthesis) is held only as the second byte of an escape, so it ends at
// the last closer before the first such character not preceded by '\'.
func (p *paragraph) titleEnds(t int, rd reading) []int {
	b := p.b
	cl := closerOf(b[t])
	if cl == 0 {
		return nil
	}
	if !rd.longestTitle {
		for j := t + 1; j < len(b); j++ {
			switch {
			case b[j] == '\\' && j+1 < len(b) && isPunct(b[j+1]):
				j++
			case b[j] == cl:
				return []int{j + 1}
			case cl == ')' && b[j] == '(':
				return nil
			}
		}
		return nil
	}
	p.index()
	bare, escaped := p.bare[cl], p.escaped[cl]
	// The first character after the opener the pattern cannot hold.
	stop := len(b)
	if k, _ := slices.BinarySearch(bare, t+1); k < len(bare) {
		stop = bare[k]
		if b[stop] == cl {
			return []int{stop + 1}
		}
	}
	// Else the last closer preceded by '\' before it, past the opener's
	// own byte.
	k, _ := slices.BinarySearch(escaped, stop)
	if k > 0 && escaped[k-1] > t+1 {
		return []int{escaped[k-1] + 1}
	}
	return nil
}

// index makes p.bare and p.escaped (titleEnds) on first use: for each
// closer, the offsets of the characters a title it closes cannot hold
// unless '\' precedes them (the closer, and '(' too for ')'), split by
// whether '\' precedes them.
func (p *paragraph) index() {
	if p.bare != nil {
		return
	}
	p.bare, p.escaped = map[byte][]int{}, map[byte][]int{}
	for j, c := range p.b {
		var closers []byte
		switch c {
		case '"', '\'', ')':
			closers = []byte{c}
		case '(':
			closers = []byte{')'}
		default:
			continue
		}
		for _, cl := range closers {
			if j > 0 && p.b[j-1] == '\\' {
				if c == cl {
					p.escaped[cl] = append(p.escaped[cl], j)
				}
			} else {
				p.bare[cl] = append(p.bare[cl], j)
			}
		}
	}
}
