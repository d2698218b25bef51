// Package meml holds MEML-GRPO's guidance parts: inter-expert mutual
// learning and the hard-example SFT buffer.
package meml
