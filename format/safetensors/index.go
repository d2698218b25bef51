package safetensors

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// The file names of a Hugging Face checkpoint directory.
const (
	SingleFileName = "model.safetensors"
	IndexFileName  = "model.safetensors.index.json"
)

// OpenDir opens the checkpoint in the directory dir: model.safetensors if
// it exists, as transformers prefers it, and otherwise the shards listed in
// model.safetensors.index.json.
func OpenDir(dir string) (*File, error) {
	for _, name := range []string{SingleFileName, IndexFileName} {
		path := filepath.Join(dir, name)
		_, err := os.Stat(path)
		switch {
		case err == nil && name == SingleFileName:
			return Open(path)
		case err == nil:
			return OpenIndex(path)
		case !errors.Is(err, fs.ErrNotExist):
			return nil, fmt.Errorf("safetensors: %w", err)
		}
	}
	return nil, fmt.Errorf("safetensors: %s: no %s or %s", dir, SingleFileName, IndexFileName)
}

// OpenIndex opens a sharded checkpoint from its index file, a JSON object
// {"metadata": {...}, "weight_map": {tensor name: shard file name}} whose
// shards lie in the same directory. The returned File holds the tensors of
// every shard. Every tensor of the weight map must be in the shard it names,
// and no tensor may be in two shards.
func OpenIndex(path string) (*File, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("safetensors: %w", err)
	}
	var index struct {
		Metadata  map[string]any  `json:"metadata"`
		WeightMap json.RawMessage `json:"weight_map"`
	}
	if err := json.Unmarshal(data, &index); err != nil {
		return nil, fileError(path, "", "invalid index: %w", err)
	}
	if len(index.WeightMap) == 0 || string(index.WeightMap) == "null" {
		return nil, fileError(path, "", "index has no weight_map")
	}
	members, err := decodeObject(index.WeightMap)
	if err != nil {
		return nil, fileError(path, "", "invalid weight_map: %w", err)
	}
	if len(members) == 0 {
		return nil, fileError(path, "", "weight_map is empty")
	}
	weightMap := make(map[string]string, len(members))
	for _, m := range members {
		var shardName string
		if err := json.Unmarshal(m.val, &shardName); err != nil {
			return nil, fileError(path, m.key, "weight_map value must be a file name: %w", err)
		}
		if old, dup := weightMap[m.key]; dup && old != shardName {
			return nil, fileError(path, m.key, "weight_map lists the tensor twice, in %q and %q", old, shardName)
		}
		if !isPlainFileName(shardName) {
			return nil, fileError(path, m.key, "shard %q is not a file name in the index's directory", shardName)
		}
		weightMap[m.key] = shardName
	}

	f := &File{name: path, metadata: map[string]string{}}
	if err := f.addShards(path, members, weightMap); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// addShards opens the shards named in weightMap, whose entries in index
// order are members, and adds their tensors to f in name order.
func (f *File) addShards(path string, members []member, weightMap map[string]string) error {
	var shardNames []string
	for _, s := range weightMap {
		shardNames = append(shardNames, s)
	}
	slices.Sort(shardNames)
	shardNames = slices.Compact(shardNames)

	holder := make(map[string]string) // tensor name -> shard name
	var all []TensorInfo
	var where []*shard
	for _, shardName := range shardNames {
		shardPath := filepath.Join(filepath.Dir(path), shardName)
		osf, err := os.Open(shardPath)
		if err != nil {
			return fileError(path, "", "shard %q: %w", shardName, err)
		}
		f.closers = append(f.closers, osf)
		sf, err := openFile(osf, shardPath)
		if err != nil {
			return err
		}
		for k, v := range sf.metadata {
			if _, ok := f.metadata[k]; !ok {
				f.metadata[k] = v
			}
		}
		for i, t := range sf.tensors {
			if other, dup := holder[t.Name]; dup {
				return fileError(path, t.Name, "tensor is in two shards, %q and %q", other, shardName)
			}
			holder[t.Name] = shardName
			all = append(all, t)
			where = append(where, sf.where[i])
		}
	}
	for _, m := range members {
		if name, shardName := m.key, weightMap[m.key]; holder[name] != shardName {
			return fileError(path, name, "weight_map puts the tensor in shard %q, which does not have it", shardName)
		}
	}

	order := make([]int, len(all))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int { return strings.Compare(all[a].Name, all[b].Name) })
	for _, i := range order {
		f.add(all[i], where[i])
	}
	return nil
}

// isPlainFileName reports whether name names a file in the current
// directory, without any directory part.
func isPlainFileName(name string) bool {
	return name != "" && name != "." && name != ".." && !strings.ContainsAny(name, `/\`) && filepath.Base(name) == name
}
