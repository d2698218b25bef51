package expert

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"

	"gopkg.in/yaml.v3"
)

// maxFile bounds the size of an experts file.
const maxFile = 1 << 20

// ReadFile reads a YAML list of experts in the schema of a training
// config's consultation.experts, such as the pools under configs/experts.
// Unknown keys are errors; every error names the file (and, from yaml,
// the line).
func ReadFile(path string) ([]Config, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxFile+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(b) > maxFile {
		return nil, fmt.Errorf("%s: larger than %d bytes", path, maxFile)
	}
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	var experts []Config
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
