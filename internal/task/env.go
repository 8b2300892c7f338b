package task

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
)

// LoadOptions are the command-line values that change a task as it loads.
type LoadOptions struct {
	// Env holds --env values in flag order: "K=V", or "K" to copy K from
	// the local environment.
	Env []string
	// EnvFiles are --env-file paths (dotenv format), in flag order.
	EnvFiles []string
	// Secrets holds --secret values ("K=V" or "K"), in flag order.
	Secrets []string
	// SecretFiles are --secret-file paths, in flag order.
	SecretFiles []string
	// LookupEnv resolves a bare "K"; nil means os.LookupEnv.
	LookupEnv func(string) (string, bool)
}

var envNameRE = regexp.MustCompile(`^[a-zA-Z_][a-zA-Z0-9_]*$`)

// kv is one override, kept in order so later flags win.
type kv struct{ key, val string }

// overrides are the resolved CLI values, precedence already applied:
// YAML < --env-file (later files win) < --env (later flags win); the same
// for secrets with --secret-file and --secret.
type overrides struct {
	envs    []kv
	secrets []kv
}

func (o LoadOptions) resolve() (*overrides, error) {
	lookup := o.LookupEnv
	if lookup == nil {
		lookup = os.LookupEnv
	}
	envs, err := collect("--env", o.EnvFiles, o.Env, lookup)
	if err != nil {
		return nil, err
	}
	secrets, err := collect("--secret", o.SecretFiles, o.Secrets, lookup)
	if err != nil {
		return nil, err
	}
	return &overrides{envs: envs, secrets: secrets}, nil
}

// collect reads the files first and the flags after, so a flag overrides
// a file value when the same name appears in both.
func collect(flag string, files, flags []string, lookup func(string) (string, bool)) ([]kv, error) {
	var out []kv
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, fmt.Errorf("%s-file %s: %w", flag, f, err)
		}
		pairs, err := ParseDotenv(f, data)
		if err != nil {
			return nil, fmt.Errorf("%s-file: %w", flag, err)
		}
		out = append(out, pairs...)
	}
	for _, s := range flags {
		k, v, hasVal := strings.Cut(s, "=")
		k = strings.TrimSpace(k)
		if !envNameRE.MatchString(k) {
			return nil, fmt.Errorf("%s %q: %q is not a valid variable name (letters, digits and _, not starting with a digit)", flag, s, k)
		}
		if !hasVal {
			val, ok := lookup(k)
			if !ok {
				return nil, fmt.Errorf("%s %s: no value given and %s is not set in the local environment; use %s %s=VALUE", flag, k, k, flag, k)
			}
			v = val
		}
		out = append(out, kv{k, v})
	}
	return out, nil
}

// ParseDotenv reads KEY=VALUE lines: blank lines and # comments are
// skipped, an "export " prefix is allowed, values may be single-quoted
// (literal) or double-quoted (\n, \t, \", \\ escapes); unquoted values end
// at " #". name is used in error messages.
func ParseDotenv(name string, data []byte) ([]kv, error) {
	var out []kv
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 64*1024), 4*1024*1024)
	line := 0
	for sc.Scan() {
		line++
		s := strings.TrimSpace(sc.Text())
		if s == "" || strings.HasPrefix(s, "#") {
			continue
		}
		s = strings.TrimPrefix(s, "export ")
		k, v, ok := strings.Cut(s, "=")
		k = strings.TrimSpace(k)
		if !ok || !envNameRE.MatchString(k) {
			return nil, fmt.Errorf("%s:%d: expected NAME=VALUE with NAME made of letters, digits and _", name, line)
		}
		v = strings.TrimSpace(v)
		switch {
		case len(v) >= 2 && v[0] == '\'' && v[len(v)-1] == '\'':
			v = v[1 : len(v)-1]
		case len(v) >= 2 && v[0] == '"' && v[len(v)-1] == '"':
			uq, err := strconv.Unquote(v)
			if err != nil {
				// Not a Go-compatible escape sequence; keep the inner text.
				uq = v[1 : len(v)-1]
			}
			v = uq
		default:
			if i := strings.Index(v, " #"); i >= 0 {
				v = strings.TrimSpace(v[:i])
			}
		}
		out = append(out, kv{k, v})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return out, nil
}

var substRE = regexp.MustCompile(`\$\{([a-zA-Z_][a-zA-Z0-9_]*)\}|\$([a-zA-Z_][a-zA-Z0-9_]*)`)

// Substitute replaces $NAME and ${NAME} with vars[NAME]. Names not in vars
// are left as written (they may be meant for the remote shell); there is
// no ${NAME:-default} syntax.
func Substitute(s string, vars map[string]string) string {
	if len(vars) == 0 || !strings.Contains(s, "$") {
		return s
	}
	return substRE.ReplaceAllStringFunc(s, func(m string) string {
		name := strings.TrimSuffix(strings.TrimPrefix(strings.TrimPrefix(m, "${"), "$"), "}")
		if v, ok := vars[name]; ok {
			return v
		}
		return m
	})
}

// Resolved reads the --env-file / --secret-file files and bare KEY flags of
// o and returns the same overrides as plain KEY=VALUE flags, in precedence
// order, with no files left. It lets a client send its overrides to a
// server that cannot read the client's files or environment.
func (o LoadOptions) Resolved() (LoadOptions, error) {
	ov, err := o.resolve()
	if err != nil {
		return LoadOptions{}, err
	}
	flat := func(kvs []kv) []string {
		out := make([]string, 0, len(kvs))
		for _, p := range kvs {
			out = append(out, p.key+"="+p.val)
		}
		return out
	}
	return LoadOptions{Env: flat(ov.envs), Secrets: flat(ov.secrets),
		LookupEnv: func(string) (string, bool) { return "", false }}, nil
}
