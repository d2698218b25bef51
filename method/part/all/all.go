// Package all registers every guidance part that comes with rlvr, and the
// presets of their papers. A program that trains imports it for that side
// effect:
//
//	import _ "rlvr/method/part/all"
package all

import (
	_ "rlvr/method/dapo"
	_ "rlvr/method/eapo"
	_ "rlvr/method/mel"
	_ "rlvr/method/meml"
)
