package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// MaxFileSize is the largest configuration file Load reads (1 MiB).
const MaxFileSize = 1 << 20

// Option configures Load, Parse, Resolve, Open and NewReloader.
type Option func(*options)

type options struct {
	env       []string
	envSet    bool
	sections  []section
	overrides map[string]string
	logger    *slog.Logger
}

type section struct {
	name     string
	defaults func() any
}

// WithEnv sets the environment, as "KEY=value" strings (os.Environ's
// form), from which LEVEE_* variables override the file. Default
// os.Environ(); WithEnv(nil) reads no environment.
func WithEnv(env []string) Option {
	return func(o *options) { o.env, o.envSet = env, true }
}

// WithSection registers a section of the file that another package owns
// (fleet quotas, the proxy): the top-level key name, and a function
// returning a pointer to a new struct holding the section's defaults. The
// struct's exported fields are named by `yaml:"…"` tags and decoded like
// the built-in sections (unknown fields rejected, positions reported,
// LEVEE_<NAME>_… variables, diffs); a field tagged `config:"secret"` is
// redacted, one tagged `reload:"restart"` cannot change at run time. If the
// pointer has a method Validate(*Validator), it is called after decoding
// and its problems carry their fields' positions; a method Validate() error
// (Go's usual form) is called instead when there is none, and its error is
// reported at the section.
// The decoded value is Config.Section(name). A name that clashes with a
// built-in section is ignored.
func WithSection(name string, defaults func() any) Option {
	return func(o *options) {
		if name == "" || defaults == nil || slices.Contains(builtinSections(), name) {
			return
		}
		for i := range o.sections {
			if o.sections[i].name == name {
				o.sections[i].defaults = defaults
				return
			}
		}
		o.sections = append(o.sections, section{name, defaults})
	}
}

// WithOverrides sets values by field path over the file and the
// environment, as a command line's -set flags or the admin endpoint do:
// {"admit.dry_run": "true", "signals.cpu.target": "0.9"}. Values are
// written as in an environment variable (see the package documentation).
func WithOverrides(o map[string]string) Option {
	return func(opts *options) {
		opts.overrides = make(map[string]string, len(o))
		for k, v := range o {
			opts.overrides[k] = v
		}
	}
}

// WithLogger sets the logger a Reloader reports reloads and changes to.
// Default: slog.Default().
func WithLogger(l *slog.Logger) Option {
	return func(o *options) { o.logger = l }
}

func newOptions(opts []Option) options {
	var o options
	for _, f := range opts {
		if f != nil {
			f(&o)
		}
	}
	if !o.envSet {
		o.env = os.Environ()
	}
	if o.logger == nil {
		o.logger = slog.Default()
	}
	return o
}

func builtinSections() []string {
	var names []string
	for _, f := range fields(configType) {
		names = append(names, f.name)
	}
	return names
}

// Load reads the file at path, decodes it over the defaults, applies the
// LEVEE_* environment variables and validates the result. An invalid file
// returns an *Error listing every problem with its file, line, column and
// field; a file that cannot be read returns an error wrapping the
// operating system's (errors.Is(err, fs.ErrNotExist) works).
func Load(path string, opts ...Option) (*Config, error) {
	data, err := readFile(path)
	if err != nil {
		return nil, err
	}
	return Parse(path, data, opts...)
}

func readFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxFileSize+1))
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	if len(data) > MaxFileSize {
		return nil, &Error{Problems: []Problem{{Source: path, Message: fmt.Sprintf("the file is larger than %d bytes", MaxFileSize)}}}
	}
	return data, nil
}

// Parse is Load with the file's content given: name is used in messages.
func Parse(name string, data []byte, opts ...Option) (*Config, error) {
	cfg, _, err := build(nil, name, data, true, newOptions(opts))
	return cfg, err
}

// Resolve applies the environment and the overrides to base, a Config
// built in code (start from Default), and validates the result; base is
// not modified. Sections registered with WithSection and missing from
// base.Sections get their defaults.
func Resolve(base *Config, opts ...Option) (*Config, error) {
	cfg, _, err := build(base, "", nil, false, newOptions(opts))
	return cfg, err
}

// build makes a Config: base (or the defaults), then the file if hasFile,
// then the environment, then the overrides; then it validates. It returns
// the Config even when invalid, with the problems recorded.
func build(base *Config, name string, data []byte, hasFile bool, o options) (*Config, *problems, error) {
	var cfg *Config
	if base != nil {
		cfg = clone(base)
	} else {
		cfg = Default()
	}
	for _, s := range o.sections {
		if cfg.Sections[s.name] != nil {
			continue
		}
		v := s.defaults()
		if rv := reflect.ValueOf(v); !rv.IsValid() || rv.Kind() != reflect.Pointer || rv.Elem().Kind() != reflect.Struct {
			panic(fmt.Sprintf("config: section %q: defaults must return a pointer to a struct, got %T", s.name, v))
		}
		if cfg.Sections == nil {
			cfg.Sections = make(map[string]any)
		}
		cfg.Sections[s.name] = v
	}
	ps := &problems{origins: map[string]origin{}, fallback: origin{source: name}}
	if hasFile {
		cfg.Version = 0 // a file must say which format it is in
		if !decodeFile(cfg, name, data, ps) {
			return cfg, ps, ps.err() // nothing more can be said of a file that is not YAML
		}
	}
	applyEnv(cfg, o.env, ps)
	applyOverrides(cfg, o.overrides, ps)
	readTokenFile(cfg, ps)
	validate(cfg, ps, hasFile)
	return cfg, ps, ps.err()
}

var yamlLine = regexp.MustCompile(`^yaml: line (\d+): `)

// decodeFile decodes data onto cfg; it returns false when data is not one
// YAML document.
func decodeFile(cfg *Config, name string, data []byte, ps *problems) bool {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	err := dec.Decode(&doc)
	if errors.Is(err, io.EOF) {
		ps.add(origin{source: name}, "", "the file is empty; it needs at least `version: 1`")
		return false
	}
	if err != nil {
		msg := err.Error()
		line := 0
		if m := yamlLine.FindStringSubmatch(msg); m != nil {
			line, _ = strconv.Atoi(m[1])
			msg = msg[len(m[0]):]
		}
		msg = strings.TrimPrefix(msg, "yaml: ")
		ps.add(origin{source: name, line: line}, "", "not valid YAML: "+msg)
		return false
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		line := 0
		if err == nil {
			line = extra.Line
		}
		ps.add(origin{source: name, line: line}, "", "more than one YAML document: a configuration is one document")
		return false
	}
	d := &decoder{source: name, ps: ps, sections: cfg.Sections}
	d.decode(&doc, reflect.ValueOf(cfg).Elem(), "", "")
	return true
}

// readTokenFile replaces the admin token with the content of its file.
func readTokenFile(cfg *Config, ps *problems) {
	f := cfg.Admin.TokenFile
	if f == "" {
		return
	}
	if cfg.Admin.Token != "" {
		ps.at("admin.token_file", "set admin.token or admin.token_file, not both")
		return
	}
	data, err := os.ReadFile(f)
	if err != nil {
		ps.at("admin.token_file", "cannot read the token: "+err.Error())
		return
	}
	cfg.Admin.Token = strings.TrimSpace(string(data))
	if cfg.Admin.Token == "" {
		ps.at("admin.token_file", "the token file is empty")
	}
}
