// Package mel is MEL's meta-experience learning: the reflection protocol
// and the MetaExperience part that contrasts, validates and trains.
package mel
