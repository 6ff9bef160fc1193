package broker

import (
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strings"
)

// EnvName returns the environment variable of a setting's flag name.
func EnvName(flagName string) string {
	return "HOURGLASS_" + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

// LoadFile merges the JSON config file at path into c. The file is one
// object whose keys are flag names with '_' for '-' ("data_dir"); values
// are strings in flag syntax ("30s", "4MiB", "1s,5s") or, where natural,
// JSON numbers and booleans. An unknown key is an error, so a typo is not
// silently ignored. Settings given on the command line are left alone. An
// empty path does nothing.
func (c *Config) LoadFile(path string) error {
	if path == "" {
		return nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("config file: %w", err)
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil {
		return fmt.Errorf("config file %s: not a JSON object: %w", path, err)
	}
	byKey := map[string]setting{}
	for _, s := range c.settings() {
		byKey[strings.ReplaceAll(s.name, "-", "_")] = s
	}
	keys := make([]string, 0, len(raw))
	for k := range raw {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		s, ok := byKey[k]
		if !ok {
			return fmt.Errorf("config file %s: unknown key %q", path, k)
		}
		if s.name == "config" {
			return fmt.Errorf("config file %s: key %q cannot name another file", path, k)
		}
		if c.cmdline[s.name] {
			continue
		}
		text, err := jsonScalar(raw[k])
		if err != nil {
			return fmt.Errorf("config file %s: key %q: %w", path, k, err)
		}
		if err := s.value.Set(text); err != nil {
			return fmt.Errorf("config file %s: key %q: %w", path, k, err)
		}
	}
	return nil
}

// jsonScalar returns a JSON string's content, or a number's or boolean's text.
func jsonScalar(raw json.RawMessage) (string, error) {
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return "", err
	}
	switch v.(type) {
	case string:
		return v.(string), nil
	case bool, float64:
		return strings.TrimSpace(string(raw)), nil
	}
	return "", fmt.Errorf("value %s is not a string, number or boolean", raw)
}

// ApplyEnv merges HOURGLASS_* environment variables into c, read through
// lookup (os.LookupEnv in production). Settings given on the command line
// are left alone. The variable of a flag is EnvName(flag).
func (c *Config) ApplyEnv(lookup func(string) (string, bool)) error {
	for _, s := range c.settings() {
		if c.cmdline[s.name] {
			continue
		}
		v, ok := lookup(EnvName(s.name))
		if !ok {
			continue
		}
		if err := s.value.Set(v); err != nil {
			return fmt.Errorf("environment variable %s: %w", EnvName(s.name), err)
		}
	}
	return nil
}

// Resolve completes a Config after the flags are parsed: it reads the
// config file named by -config (or, if no flag gave it, HOURGLASS_CONFIG),
// then the environment, then validates. The result obeys flags > env >
// file > defaults.
func (c *Config) Resolve(lookup func(string) (string, bool)) error {
	path := c.ConfigFile
	if !c.cmdline["config"] {
		if v, ok := lookup(EnvName("config")); ok {
			path = v
		}
	}
	if err := c.LoadFile(path); err != nil {
		return err
	}
	if err := c.ApplyEnv(lookup); err != nil {
		return err
	}
	return c.Validate()
}
