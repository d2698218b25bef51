// Package dapo holds DAPO's (Yu et al. 2025) two guidance parts of the
// GRPO core: dynamic sampling and the soft overlong penalty.
package dapo
