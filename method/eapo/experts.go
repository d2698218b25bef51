package eapo

import "rlvr/expert"

// ExpertPool returns the section's pool and the field a config gives it
// at, for checks that read the run's data: a reference expert
// (expert.KindReference) needs examples with reference solutions.
func (k *ConsultationConfig) ExpertPool() (field string, experts []expert.Config) {
	return "consultation.experts", k.Experts
}
