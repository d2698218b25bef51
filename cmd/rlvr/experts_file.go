package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"

	"gopkg.in/yaml.v3"

	"rlvr/expert"
)

// maxExpertsFile bounds the size of an --experts file.
const maxExpertsFile = 1 << 20

// readExpertsFile reads a YAML list of experts in the schema of a
// training config's consultation.experts. Unknown keys are errors; every
// error names the file (and, from yaml, the line).
func readExpertsFile(path string) ([]expert.Config, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxExpertsFile+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(b) > maxExpertsFile {
		return nil, fmt.Errorf("%s: larger than %d bytes", path, maxExpertsFile)
	}
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	var experts []expert.Config
	if err := dec.Decode(&experts); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("%s: no experts (want a YAML list, as a training config's consultation.experts)", path)
		}
		return nil, fmt.Errorf("%s: want a YAML list of experts, as a training config's consultation.experts: %w", path, err)
	}
	if len(experts) == 0 {
		return nil, fmt.Errorf("%s: no experts (want a YAML list, as a training config's consultation.experts)", path)
	}
	return experts, nil
}

// fillFromFlags gives an expert of an --experts file the flags' values of
// the settings it leaves unset: its limits, sampling and, for an
// endpoint, the bearer token.
func (o *collectFlags) fillFromFlags(e *expert.Config, retries int, apiKeyGiven bool) {
	if e.Concurrency == 0 {
		e.Concurrency = o.concurrency
	}
	if e.Timeout == 0 {
		e.Timeout = o.timeout
	}
	if e.Retries == 0 {
		e.Retries = retries
	}
	if e.Deadline == 0 {
		e.Deadline = o.deadline
	}
	if e.MaxTokens == 0 {
		e.MaxTokens = o.maxTokens
	}
	if e.Temperature == 0 {
		e.Temperature = o.temperature
	}
	if e.Stop == nil {
		e.Stop = o.stop
	}
	if e.URL != "" && e.APIKeyEnv == "" {
		if e.APIKey = o.apiKey; !apiKeyGiven {
			e.APIKey, e.APIKeyEnv = "", apiKeyEnv
		}
	}
}
