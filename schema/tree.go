package schema

import (
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// maxNodes bounds the values a document may expand to. Aliases can make a
// small file expand exponentially ("billion laughs"); a real config has a few
// hundred nodes.
const maxNodes = 100_000

// maxDepth bounds how deep a document's values may nest; a real config
// nests less than ten deep. An alias to a mapping that holds it nests
// without end, and each level costs a key path as long as the depth, so
// without this bound a one-line loop ("a: &x {b: *x}") took maxNodes
// levels and minutes to refuse.
const maxDepth = 100

// tree is a YAML document converted to the generic values the JSON Schema
// validator takes (map[string]any, []any, string, bool, numbers, nil), with
// the place in the file each value came from.
type tree struct {
	value any
	sites map[string]site // by locKey of the instance location
}

// site is where one value sits in the file.
type site struct {
	key   *yaml.Node // the mapping key; nil for the root and sequence items
	value *yaml.Node // nil for an empty document
	path  string     // key path for messages, e.g. harnesses.claude-code.env
}

// locKey turns an instance location (the tokens of a JSON pointer) into a
// map key: each token preceded by NUL, so the root is "" and an empty key is
// not the root. A NUL inside a key ("\0" in a quoted YAML string) could
// only misplace a message.
func locKey(tokens []string) string {
	var b strings.Builder
	for _, tok := range tokens {
		b.WriteByte(0)
		b.WriteString(tok)
	}
	return b.String()
}

// lookup returns the site of the value at tokens, or of its nearest
// ancestor when the value itself has none.
func (t *tree) lookup(tokens []string) site {
	for i := len(tokens); i > 0; i-- {
		if s, ok := t.sites[locKey(tokens[:i])]; ok {
			return s
		}
	}
	return t.sites[""]
}

// problemAt returns a Problem at the value of tokens.
func (t *tree) problemAt(tokens []string, msg string) Problem {
	s := t.lookup(tokens)
	return newProblem(s.value, s.path, msg)
}

// keyProblemAt returns a Problem at the mapping key of tokens.
func (t *tree) keyProblemAt(tokens []string, msg string) Problem {
	s := t.lookup(tokens)
	n := s.key
	if n == nil {
		n = s.value
	}
	return newProblem(n, s.path, msg)
}

func newProblem(n *yaml.Node, path, msg string) Problem {
	p := Problem{Key: path, Message: msg}
	if n != nil {
		p.Line, p.Column = n.Line, n.Column
	}
	return p
}

// converter turns yaml.Nodes into a tree, collecting problems the validator
// cannot see: duplicate keys, non-scalar keys, malformed merges.
type converter struct {
	sites    map[string]site
	nodes    int
	problems []Problem
}

// step counts one node and stops the conversion past maxNodes; it also ends
// a merge that includes itself.
func (c *converter) step() {
	c.nodes++
	if c.nodes > maxNodes {
		panic(errTooLarge{})
	}
}

// errTooLarge stops a conversion that exceeded maxNodes, or maxDepth when
// deep is true.
type errTooLarge struct{ deep bool }

// newTree converts a parsed document. A document with no content becomes the
// value nil, which the schema rejects as "want object".
func newTree(doc *yaml.Node) (*tree, []Problem) {
	c := &converter{sites: map[string]site{}}
	root := doc
	if doc.Kind == yaml.DocumentNode && len(doc.Content) > 0 {
		root = doc.Content[0]
	}
	if root.Kind == 0 || root.Kind == yaml.DocumentNode {
		c.sites[""] = site{}
		return &tree{sites: c.sites}, nil
	}
	v, tooLarge := c.convertTop(root)
	switch {
	case tooLarge == nil:
	case tooLarge.deep:
		return nil, []Problem{newProblem(root, "", fmt.Sprintf("document nests deeper than %d levels (alias loop?)", maxDepth))}
	default:
		return nil, []Problem{newProblem(root, "", fmt.Sprintf("document expands to more than %d values (alias loop or alias bomb?)", maxNodes))}
	}
	if len(c.problems) > 0 {
		return nil, c.problems
	}
	return &tree{value: v, sites: c.sites}, nil
}

// convertTop converts root; tooLarge is non-nil when it exceeded maxNodes
// or maxDepth.
func (c *converter) convertTop(root *yaml.Node) (v any, tooLarge *errTooLarge) {
	defer func() {
		if r := recover(); r != nil {
			e, ok := r.(errTooLarge)
			if !ok {
				panic(r)
			}
			tooLarge = &e
		}
	}()
	return c.convert(root, nil, nil, ""), nil
}

// convert converts n, found under key (nil for the root and sequence items)
// at the instance location tokens.
func (c *converter) convert(n, key *yaml.Node, tokens []string, path string) any {
	c.step()
	if len(tokens) > maxDepth {
		panic(errTooLarge{deep: true})
	}
	c.sites[locKey(tokens)] = site{key: key, value: n, path: path}
	switch n.Kind {
	case yaml.AliasNode:
		v := c.convert(n.Alias, key, tokens, path)
		// Point at the alias, where the operator used the value.
		c.sites[locKey(tokens)] = site{key: key, value: n, path: path}
		return v
	case yaml.MappingNode:
		obj := map[string]any{}
		c.mapping(n, tokens, path, obj)
		return obj
	case yaml.SequenceNode:
		arr := make([]any, 0, len(n.Content))
		for i, item := range n.Content {
			arr = append(arr, c.convert(item, nil, child(tokens, strconv.Itoa(i)), path+"["+strconv.Itoa(i)+"]"))
		}
		return arr
	default:
		return scalar(n)
	}
}

// mapping fills obj from the mapping n. Merge keys ("<<") follow yaml.v3,
// which decodes the Config: explicit keys win over merged ones, and an
// earlier merged mapping wins over a later one. Winners are written last, so
// their sites are the ones kept.
func (c *converter) mapping(n *yaml.Node, tokens []string, path string, obj map[string]any) {
	c.step()
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].ShortTag() == "!!merge" {
			c.merge(n.Content[i+1], tokens, path, obj)
		}
	}
	seen := map[string]int{} // key → line
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		switch line, dup := seen[k.Value]; {
		case k.ShortTag() == "!!merge":
		case k.Kind != yaml.ScalarNode:
			c.problems = append(c.problems, newProblem(k, path, "mapping key must be a scalar"))
		case dup:
			c.problems = append(c.problems, newProblem(k, joinPath(path, k.Value),
				fmt.Sprintf("key already defined at line %d", line)))
		default:
			seen[k.Value] = k.Line
			obj[k.Value] = c.convert(v, k, child(tokens, k.Value), joinPath(path, k.Value))
		}
	}
}

// merge adds the entries of a merge value: a mapping, or a sequence of
// mappings, possibly through aliases.
func (c *converter) merge(v *yaml.Node, tokens []string, path string, obj map[string]any) {
	v = deref(v)
	sources := []*yaml.Node{v}
	if v.Kind == yaml.SequenceNode {
		sources = v.Content
	}
	for i := len(sources) - 1; i >= 0; i-- {
		src := deref(sources[i])
		if src.Kind != yaml.MappingNode {
			c.problems = append(c.problems, newProblem(src, path, "merge (<<) needs a mapping or a sequence of mappings"))
			continue
		}
		c.mapping(src, tokens, path, obj)
	}
}

func deref(n *yaml.Node) *yaml.Node {
	for n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	return n
}

// scalar converts a scalar by its resolved tag. Timestamps, binary and custom
// tags stay strings, as they decode into the Config's string fields.
func scalar(n *yaml.Node) any {
	switch n.ShortTag() {
	case "!!null":
		return nil
	case "!!bool", "!!int", "!!float":
		var v any
		if err := n.Decode(&v); err != nil {
			return n.Value
		}
		if f, ok := v.(float64); ok && (math.IsNaN(f) || math.IsInf(f, 0)) {
			return n.Value // not a JSON number; the schema reports the type
		}
		return v
	default:
		return n.Value
	}
}

func child(tokens []string, tok string) []string {
	return append(tokens[:len(tokens):len(tokens)], tok)
}

var plainKey = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_-]*$`)

// joinPath appends key to a key path: a.b for plain names, a["x/y"] for
// keys that need quoting.
func joinPath(path, key string) string {
	if !plainKey.MatchString(key) {
		return path + "[" + strconv.Quote(key) + "]"
	}
	if path == "" {
		return key
	}
	return path + "." + key
}
