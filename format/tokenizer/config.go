package tokenizer

import (
	"encoding/json"
	"fmt"
	"os"
)

// Config holds what this package uses of a Hugging Face
// tokenizer_config.json.
type Config struct {
	BOSToken    string // bos_token, or "" when null or absent
	EOSToken    string // eos_token
	PADToken    string // pad_token
	UNKToken    string // unk_token
	AddBOSToken bool   // add_bos_token: whether the model expects a leading BOS
	AddEOSToken bool   // add_eos_token

	// HasAddBOSToken and HasAddEOSToken say whether the file sets
	// add_bos_token and add_eos_token; when it does not, the tokenizer.json
	// post-processor decides ([Tokenizer.AddBOS]).
	HasAddBOSToken, HasAddEOSToken bool

	// ChatTemplateSource is the Jinja source of the default chat template:
	// chat_template when it is a string, or the entry named "default" when
	// it is a list of named templates.
	ChatTemplateSource string

	file string // the file read, for errors
}

// LoadConfig reads a tokenizer_config.json file.
func LoadConfig(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return parser{file: path}.parseConfig(data)
}

// ParseConfig reads the contents of a tokenizer_config.json file.
func ParseConfig(data []byte) (*Config, error) {
	return parser{file: "tokenizer_config.json"}.parseConfig(data)
}

func (p parser) parseConfig(data []byte) (*Config, error) {
	var raw struct {
		BOS          json.RawMessage `json:"bos_token"`
		EOS          json.RawMessage `json:"eos_token"`
		PAD          json.RawMessage `json:"pad_token"`
		UNK          json.RawMessage `json:"unk_token"`
		AddBOS       *bool           `json:"add_bos_token"`
		AddEOS       *bool           `json:"add_eos_token"`
		ChatTemplate json.RawMessage `json:"chat_template"`
	}
	if err := json.Unmarshal(data, &raw); err != nil {
		return nil, p.jsonError("", err)
	}
	c := &Config{file: p.file}
	for _, f := range []struct {
		name string
		raw  json.RawMessage
		dst  *string
	}{{"bos_token", raw.BOS, &c.BOSToken}, {"eos_token", raw.EOS, &c.EOSToken}, {"pad_token", raw.PAD, &c.PADToken}, {"unk_token", raw.UNK, &c.UNKToken}} {
		s, err := p.specialToken(f.name, f.raw)
		if err != nil {
			return nil, err
		}
		*f.dst = s
	}
	if raw.AddBOS != nil {
		c.AddBOSToken, c.HasAddBOSToken = *raw.AddBOS, true
	}
	if raw.AddEOS != nil {
		c.AddEOSToken, c.HasAddEOSToken = *raw.AddEOS, true
	}
	if !isNull(raw.ChatTemplate) {
		var s string
		if json.Unmarshal(raw.ChatTemplate, &s) == nil {
			c.ChatTemplateSource = s
		} else {
			var named []struct {
				Name     string `json:"name"`
				Template string `json:"template"`
			}
			if err := p.decode("chat_template", raw.ChatTemplate, &named); err != nil {
				return nil, err
			}
			for _, n := range named {
				if n.Name == "default" {
					c.ChatTemplateSource = n.Template
				}
			}
		}
	}
	return c, nil
}

// specialToken reads a token that is written either as a string or as an
// object with a "content" member.
func (p parser) specialToken(field string, raw json.RawMessage) (string, error) {
	if isNull(raw) {
		return "", nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, nil
	}
	var obj struct {
		Content *string `json:"content"`
	}
	if err := json.Unmarshal(raw, &obj); err != nil || obj.Content == nil {
		return "", p.errorf(field, "want a string or an object with content, got %s", truncate(string(raw)))
	}
	return *obj.Content, nil
}

// ChatTemplate parses the configuration's chat template with
// [ParseChatTemplateFile], naming this file's chat_template in errors, and
// gives it the configuration's BOS and EOS tokens. Its StopStrings end with
// the EOS token.
func (c *Config) ChatTemplate() (ChatTemplate, error) {
	file := c.file + ": chat_template"
	if c.ChatTemplateSource == "" {
		return ChatTemplate{}, fmt.Errorf("tokenizer: %s: missing", file)
	}
	t, err := ParseChatTemplateFile(file, c.ChatTemplateSource)
	if err != nil {
		return t, err
	}
	t.BOSToken, t.EOSToken = c.BOSToken, c.EOSToken
	t.StopStrings = templateStopStrings(t.Source, c.EOSToken)
	return t, nil
}
