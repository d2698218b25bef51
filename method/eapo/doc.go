// Package eapo is EAPO's expert consultation: the consult protocol, the
// annealing schedules, and the multi-turn episodes and reward shaping of
// the Consultation part.
package eapo
