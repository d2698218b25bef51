package main

import (
	"strings"

	"rlvr/engine/model"
)

// precisionUsage is the help text of a sampling command's --precision.
const precisionUsage = "arithmetic of the model's matrix products: fp32 or bf16 (bf16 inputs, float32 accumulation)"

// precision checks the value of a --precision flag and returns it parsed.
func (c *flagCheck) precision(flag, v string) model.Precision {
	p, err := model.ParsePrecision(v)
	if err != nil {
		c.add(flag, "%s", strings.TrimPrefix(err.Error(), "precision "))
	}
	return p
}
