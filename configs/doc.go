// Package configs holds rlvr's runnable recipes, one YAML file per recipe
// (`rlvr train --config configs/<name>.yaml`); its test runs each for a
// step or two on a tiny model, so none of them rots.
package configs
