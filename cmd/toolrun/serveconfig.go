package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
)

// maxConfigBytes bounds a --config file: a settings file is a few hundred
// bytes, and anything near this bound is not one.
const maxConfigBytes = 1 << 20

// applyConfig sets the flags of fs from the JSON config file name, except
// those given on the command line, which override it. The file is one
// object whose keys are the flags' names without dashes and whose values
// are what the flag would take: a string, a number, a boolean, or for a
// repeatable flag an array of strings. Each value goes through its flag's
// own parsing, so the file and the flags mean the same thing. JSON rather
// than TOML: it needs no dependency, and a config file is written by a
// program as often as by a person. An unknown or repeated key, a value of
// the wrong kind, or a value its flag refuses is an error naming the key,
// which the command refuses to start with. Relative paths in it are taken
// from the working directory, as on the command line.
func applyConfig(fs *flag.FlagSet, name string) error {
	f, err := os.Open(name)
	if err != nil {
		return err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxConfigBytes+1))
	if err != nil {
		return err
	}
	if len(b) > maxConfigBytes {
		return fmt.Errorf("%s is larger than %d bytes; a config file is a small JSON object", name, maxConfigBytes)
	}
	settings, err := readConfig(b)
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	type set struct{ flag, value string }
	var sets []set
	for _, s := range settings {
		fl := fs.Lookup(s.key)
		if fl == nil || s.key == "config" {
			var names []string
			fs.VisitAll(func(f *flag.Flag) {
				if f.Name != "config" {
					names = append(names, f.Name)
				}
			})
			return fmt.Errorf("%s: unknown setting %q; the settings are the flags' names: %s", name, s.key, strings.Join(names, ", "))
		}
		_, list := fl.Value.(*listFlag)
		values, err := s.values(list)
		if err != nil {
			return fmt.Errorf("%s: %q: %w", name, s.key, err)
		}
		if given[s.key] {
			continue // the command line overrides the file
		}
		for _, v := range values {
			sets = append(sets, set{s.key, v})
		}
	}
	for _, s := range sets {
		if err := fs.Set(s.flag, s.value); err != nil {
			return fmt.Errorf("%s: %q: %w", name, s.flag, err)
		}
	}
	return nil
}

// setting is one key of a config file and its raw value.
type setting struct {
	key   string
	value json.RawMessage
}

// values returns the flag values s stands for: one, or for a repeatable
// flag (list) each of an array's strings.
func (s setting) values(list bool) ([]string, error) {
	v := bytes.TrimSpace(s.value)
	switch {
	case len(v) == 0 || string(v) == "null":
		return nil, errors.New("null is not a value; leave the key out for the default")
	case v[0] == '[':
		if !list {
			return nil, errors.New("an array, but the flag takes one value")
		}
		var out []string
		if err := json.Unmarshal(v, &out); err != nil {
			return nil, errors.New("want an array of strings")
		}
		return out, nil
	case v[0] == '{':
		return nil, errors.New("an object; want a string, a number or a boolean")
	case v[0] == '"':
		var str string
		if err := json.Unmarshal(v, &str); err != nil {
			return nil, err
		}
		return []string{str}, nil
	}
	return []string{string(v)}, nil // a number or a boolean, as written
}

// readConfig reads a config file's one object, in order, refusing a key
// given twice (which encoding/json would take the last of, silently).
func readConfig(b []byte) ([]setting, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	tok, err := dec.Token()
	if err != nil {
		return nil, fmt.Errorf("not JSON: %w", err)
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return nil, errors.New("want one JSON object of settings, such as {\"addr\": \"127.0.0.1:8080\"}")
	}
	var out []setting
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, fmt.Errorf("not JSON: %w", err)
		}
		key := tok.(string) // an object's keys are strings
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, fmt.Errorf("the value of %q: %w", key, err)
		}
		if slices.ContainsFunc(out, func(s setting) bool { return s.key == key }) {
			return nil, fmt.Errorf("%q is given twice", key)
		}
		out = append(out, setting{key, raw})
	}
	if _, err := dec.Token(); err != nil {
		return nil, fmt.Errorf("not JSON: %w", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, errors.New("text after the settings object")
	}
	return out, nil
}
