package part

import (
	"slices"
	"strings"
)

// presets are the named recipes, as YAML.
var presets = map[string]string{}

// RegisterPreset names a recipe: YAML in a run config's format, applied
// over the defaults before a config file and flags (--preset meml-grpo).
// The package of a paper registers its paper's recipe beside its parts.
// It panics on a name registered twice.
func RegisterPreset(name, yaml string) {
	if _, ok := presets[name]; ok {
		panic("part: preset " + name + " is registered twice")
	}
	presets[name] = strings.TrimSpace(yaml) + "\n"
}

// Preset returns the YAML of a named recipe.
func Preset(name string) (string, bool) {
	y, ok := presets[name]
	return y, ok
}

// PresetNames lists the presets, sorted.
func PresetNames() []string {
	var out []string
	for k := range presets {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
