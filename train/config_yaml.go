package train

import (
	"fmt"
	"reflect"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"

	"rlvr/method/part"
)

// rlFields is RLConfig without its YAML methods: the core knobs as they
// are written.
type rlFields RLConfig

// UnmarshalYAML reads a config: the core knobs into the fields, and each
// registered part's section, a top-level key of the part's name, into
// Sections. A key that is neither is an error naming it and its line, as
// an unknown key inside a section is when the decoder knows its fields
// (LoadRLConfig's does).
//
// It takes the older form of yaml's Unmarshaler, whose unmarshal function
// decodes with the caller's decoder and so keeps its KnownFields; a
// Node's Decode would not.
func (c *RLConfig) UnmarshalYAML(unmarshal func(any) error) error {
	var doc0 rawNode
	if err := unmarshal(&doc0); err != nil {
		return err
	}
	node := doc0.Node
	// One struct with the core knobs inline, a field per registered part
	// under its name, and the other keys kept aside to be reported.
	names := part.Names()
	fields := []reflect.StructField{{Name: "Core", Type: reflect.TypeFor[rlFields](), Tag: `yaml:",inline"`}}
	for i, name := range names {
		p, _ := part.Lookup(name)
		fields = append(fields, reflect.StructField{Name: fmt.Sprintf("Part%d", i), Type: reflect.TypeOf(p.New()), Tag: reflect.StructTag(`yaml:"` + name + `"`)})
	}
	fields = append(fields, reflect.StructField{Name: "Unknown", Type: reflect.TypeFor[map[string]yaml.Node](), Tag: `yaml:",inline"`})
	doc := reflect.New(reflect.StructOf(fields)).Elem()
	doc.Field(0).Set(reflect.ValueOf(rlFields(*c)))
	for i, name := range names {
		// A section already set (by a preset) is decoded into, as a
		// pointer field is.
		if s, ok := c.Sections[name]; ok && s != nil {
			doc.Field(i + 1).Set(reflect.ValueOf(s))
		}
	}
	var problems []string
	if err := unmarshal(doc.Addr().Interface()); err != nil {
		te, ok := err.(*yaml.TypeError)
		if !ok {
			return err
		}
		problems = append(problems, te.Errors...)
	}
	*c = RLConfig(doc.Field(0).Interface().(rlFields))
	sections := part.Sections{}
	for i, name := range names {
		if f := doc.Field(i + 1); !f.IsNil() {
			sections[name] = f.Interface().(part.Section)
		}
	}
	c.Sections = sections
	if unknown := doc.Field(len(fields) - 1); unknown.Len() > 0 && node != nil && node.Kind == yaml.MappingNode {
		for k := 0; k+1 < len(node.Content); k += 2 {
			key := node.Content[k]
			if unknown.MapIndex(reflect.ValueOf(key.Value)).IsValid() {
				problems = append(problems, fmt.Sprintf("line %d: field %s not found in type train.RLConfig", key.Line, key.Value))
			}
		}
	}
	if len(problems) > 0 {
		return &yaml.TypeError{Errors: problems}
	}
	return nil
}

// MarshalYAML writes the config as UnmarshalYAML reads it: the core knobs,
// with the parts' sections after parts, in registry order.
func (c RLConfig) MarshalYAML() (any, error) {
	var n yaml.Node
	if err := n.Encode(rlFields(c)); err != nil {
		return nil, err
	}
	at := len(n.Content)
	for k := 0; k+1 < len(n.Content); k += 2 {
		if n.Content[k].Value == "parts" {
			at = k + 2
		}
	}
	var sections []*yaml.Node
	for _, name := range part.Names() {
		s, ok := c.Sections[name]
		if !ok || s == nil {
			continue
		}
		var key, value yaml.Node
		key.SetString(name)
		if err := value.Encode(s); err != nil {
			return nil, fmt.Errorf("train config: section %s: %w", name, err)
		}
		sections = append(sections, &key, &value)
	}
	n.Content = slices.Insert(n.Content, at, sections...)
	return &n, nil
}

// rawNode keeps the node it is decoded from: the keys of a mapping with
// their lines, which decoding into a yaml.Node through an older-form
// unmarshal function does not give.
type rawNode struct{ Node *yaml.Node }

// UnmarshalYAML implements yaml.Unmarshaler.
func (r *rawNode) UnmarshalYAML(n *yaml.Node) error {
	r.Node = n
	return nil
}

// SetKeys applies overrides to a YAML config document, each
// "key.path=value": value, read as YAML ("[1, 2]", "0.5", "{kind: cosine}"),
// replaces or adds the key at the dotted path, whose maps are made as
// needed. The config's own checks then see the result as if written so.
func SetKeys(doc []byte, sets []string) ([]byte, error) {
	var root yaml.Node
	if err := yaml.Unmarshal(doc, &root); err != nil {
		return nil, err
	}
	if root.Kind == 0 { // an empty document
		root = yaml.Node{Kind: yaml.DocumentNode, Content: []*yaml.Node{{Kind: yaml.MappingNode, Tag: "!!map"}}}
	}
	if len(root.Content) != 1 || root.Content[0].Kind != yaml.MappingNode {
		return nil, fmt.Errorf("--set: the config is not a map of keys")
	}
	for _, set := range sets {
		key, text, ok := strings.Cut(set, "=")
		if !ok || key == "" {
			return nil, fmt.Errorf("--set %q: want KEY=VALUE, such as expert_prompts.experts=[1]", set)
		}
		var v yaml.Node
		if err := yaml.Unmarshal([]byte(text), &v); err != nil {
			return nil, fmt.Errorf("--set %s: the value %q: %w", key, text, err)
		}
		value := &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!null", Value: ""}
		if len(v.Content) == 1 {
			value = v.Content[0]
		}
		m := root.Content[0]
		path := strings.Split(key, ".")
		for i, k := range path {
			if k == "" {
				return nil, fmt.Errorf("--set %s: an empty key in the path", key)
			}
			if m.Kind != yaml.MappingNode {
				return nil, fmt.Errorf("--set %s: %s is not a map", key, strings.Join(path[:i], "."))
			}
			at := -1
			for j := 0; j+1 < len(m.Content); j += 2 {
				if m.Content[j].Value == k {
					at = j + 1
				}
			}
			last := i == len(path)-1
			switch {
			case at < 0 && last:
				m.Content = append(m.Content, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: k}, value)
			case at < 0:
				child := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
				m.Content = append(m.Content, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: k}, child)
				m = child
			case last:
				m.Content[at] = value
			default:
				m = m.Content[at]
			}
		}
	}
	return yaml.Marshal(&root)
}
