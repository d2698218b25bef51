package main

import (
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"rlvr/internal/flagcheck"
)

// pathFlags marks the named flags of cmd as paths: shells complete them as
// file names, and a path flag given an empty value is an error
// (emptyPaths) rather than read as unset, which would mean its default.
func pathFlags(cmd *cobra.Command, names ...string) {
	for _, name := range names {
		if err := cmd.MarkFlagFilename(name); err != nil {
			panic(err) // a flag name beside the flag's definition
		}
	}
}

// emptyPaths reports every path flag (pathFlags) that the command line
// gave an empty value, naming each.
func emptyPaths(flags *pflag.FlagSet) error {
	var c flagcheck.Check
	flags.Visit(func(f *pflag.Flag) {
		if _, isPath := f.Annotations[cobra.BashCompFilenameExt]; isPath && strings.TrimSpace(f.Value.String()) == "" {
			c.Add(f.Name, "is empty")
		}
	})
	return c.Err()
}

// precisionUsage is the help text of a sampling command's --precision.
const precisionUsage = "arithmetic of the model's matrix products: fp32, bf16 (bf16 inputs, float32 accumulation), or int8 (decoding weights in int8 with a scale per output feature, float32 inputs)"
