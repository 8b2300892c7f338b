// Package sshconfig reads OpenSSH client config files. It is apart from
// the SSH infrastructure (internal/infra/ssh) so the command line's
// extras can list the hosts of a config file without linking an
// infrastructure.
package sshconfig

import (
	"bufio"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"
)

// Config is the part of an OpenSSH client config (~/.ssh/config) that
// SkyGo honours: Host blocks with * and ? patterns (and ! negation), and
// the keys HostName, User, Port, IdentityFile, ProxyJump and ProxyCommand. Include is
// followed (globs, relative to ~/.ssh), because SkyGo itself adds an
// Include line for its generated cluster entries. Everything else is
// ignored: we do not try to be OpenSSH.
type Config struct {
	blocks []configBlock
}

type configBlock struct {
	patterns []string // from the Host line; nil for the implicit global block
	settings []setting
}

type setting struct {
	key, value string // key lower-cased
}

// HostConfig is what Config says for one host alias.
type HostConfig struct {
	HostName      string
	User          string
	Port          string
	IdentityFiles []string
	ProxyJump     string
	// ProxyCommand is the command whose stdin/stdout carry the connection
	// (%h, %p, %r and %% are expanded when it runs).
	ProxyCommand string
}

// LoadConfig parses the OpenSSH client config at path; a missing file is
// an empty config. home expands "~" in Include and IdentityFile.
func LoadConfig(path, home string) (*Config, error) {
	c := &Config{}
	if err := c.parseFile(path, home, 0); err != nil {
		return nil, err
	}
	return c, nil
}

// ParseConfig parses config text (Include lines resolved against home).
func ParseConfig(text, home string) (*Config, error) {
	c := &Config{}
	if err := c.parse("<config>", bufio.NewScanner(strings.NewReader(text)), home, 0); err != nil {
		return nil, err
	}
	return c, nil
}

func (c *Config) parseFile(file, home string, depth int) error {
	f, err := os.Open(file)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading ssh config: %w", err)
	}
	defer f.Close()
	return c.parse(file, bufio.NewScanner(f), home, depth)
}

func (c *Config) parse(file string, sc *bufio.Scanner, home string, depth int) error {
	if depth > 8 {
		return fmt.Errorf("%s: Include nested more than 8 levels deep (a loop?)", file)
	}
	// Lines before the first Host line apply to every host.
	c.blocks = append(c.blocks, configBlock{})
	curIdx := len(c.blocks) - 1
	lineNo := 0
	for sc.Scan() {
		lineNo++
		key, args := splitConfigLine(sc.Text())
		if key == "" {
			continue
		}
		switch key {
		case "host":
			if len(args) == 0 {
				return fmt.Errorf("%s:%d: Host needs at least one pattern", file, lineNo)
			}
			c.blocks = append(c.blocks, configBlock{patterns: args})
			curIdx = len(c.blocks) - 1
		case "match":
			// Match blocks need conditions we do not evaluate; a block that
			// never matches keeps its settings from leaking into others.
			c.blocks = append(c.blocks, configBlock{patterns: []string{"!*"}})
			curIdx = len(c.blocks) - 1
		case "include":
			for _, a := range args {
				p := ExpandTilde(a, home)
				if !filepath.IsAbs(p) {
					p = filepath.Join(home, ".ssh", p)
				}
				files, _ := filepath.Glob(p)
				for _, f := range files {
					// An included file's Host lines form their own blocks;
					// its leading settings belong to the including block,
					// which is close enough for the keys we read.
					if err := c.parseFile(f, home, depth+1); err != nil {
						return err
					}
				}
			}
			// Settings after an Include go on in a copy of the current
			// block's patterns, as OpenSSH keeps the Host context.
			c.blocks = append(c.blocks, configBlock{patterns: c.blocks[curIdx].patterns})
			curIdx = len(c.blocks) - 1
		case "hostname", "user", "port", "identityfile", "proxyjump":
			if len(args) == 0 {
				return fmt.Errorf("%s:%d: %s needs a value", file, lineNo, key)
			}
			c.blocks[curIdx].settings = append(c.blocks[curIdx].settings, setting{key, strings.Join(args, " ")})
		case "proxycommand":
			// The rest of the line goes to sh as written, quotes and all.
			raw := strings.TrimSpace(sc.Text())
			raw = strings.TrimLeft(raw[len("proxycommand"):], " \t")
			raw = strings.TrimSpace(strings.TrimPrefix(raw, "="))
			if raw == "" {
				return fmt.Errorf("%s:%d: ProxyCommand needs a value", file, lineNo)
			}
			c.blocks[curIdx].settings = append(c.blocks[curIdx].settings, setting{key, raw})
		}
	}
	return sc.Err()
}

// splitConfigLine splits "Key value", "Key=value" and quoted arguments;
// comments and blank lines give "".
func splitConfigLine(line string) (string, []string) {
	line = strings.TrimSpace(line)
	if line == "" || line[0] == '#' {
		return "", nil
	}
	i := strings.IndexAny(line, " \t=")
	if i < 0 {
		return strings.ToLower(line), nil
	}
	key := strings.ToLower(line[:i])
	rest := strings.TrimLeft(line[i:], " \t")
	rest = strings.TrimPrefix(rest, "=")
	var args []string
	for rest = strings.TrimSpace(rest); rest != ""; rest = strings.TrimSpace(rest) {
		if rest[0] == '"' {
			end := strings.IndexByte(rest[1:], '"')
			if end < 0 {
				args = append(args, rest[1:])
				break
			}
			args = append(args, rest[1:end+1])
			rest = rest[end+2:]
			continue
		}
		j := strings.IndexAny(rest, " \t")
		if j < 0 {
			args = append(args, rest)
			break
		}
		args = append(args, rest[:j])
		rest = rest[j:]
	}
	return key, args
}

// Lookup returns the settings for alias. As in OpenSSH the first value
// found for a key wins, except IdentityFile, which accumulates.
func (c *Config) Lookup(alias, home string) HostConfig {
	var hc HostConfig
	if c == nil {
		return hc
	}
	for _, b := range c.blocks {
		if b.patterns != nil && !matchHost(b.patterns, alias) {
			continue
		}
		for _, s := range b.settings {
			switch s.key {
			case "hostname":
				if hc.HostName == "" {
					hc.HostName = strings.ReplaceAll(s.value, "%h", alias)
				}
			case "user":
				if hc.User == "" {
					hc.User = s.value
				}
			case "port":
				if hc.Port == "" {
					hc.Port = s.value
				}
			case "identityfile":
				hc.IdentityFiles = append(hc.IdentityFiles, ExpandTilde(s.value, home))
			case "proxyjump":
				if hc.ProxyJump == "" {
					hc.ProxyJump = s.value
				}
			case "proxycommand":
				if hc.ProxyCommand == "" {
					hc.ProxyCommand = s.value
				}
			}
		}
	}
	return hc
}

// Aliases are the concrete names of the Host lines (no patterns, no
// negations), in file order, each once: the hosts a config defines (a
// batch cluster's config names one cluster per Host).
func (c *Config) Aliases() []string {
	var out []string
	seen := map[string]bool{}
	for _, b := range c.blocks {
		for _, p := range b.patterns {
			if strings.ContainsAny(p, "*?!") || seen[p] {
				continue
			}
			seen[p] = true
			out = append(out, p)
		}
	}
	return out
}

// matchHost applies a Host line: alias must match some pattern and no
// negated (!) pattern.
func matchHost(patterns []string, alias string) bool {
	matched := false
	for _, p := range patterns {
		neg := strings.HasPrefix(p, "!")
		p = strings.TrimPrefix(p, "!")
		// path.Match implements * and ?; brackets are not OpenSSH syntax,
		// so escape them to keep them literal.
		p = strings.NewReplacer("[", `\[`, "]", `\]`, `\`, `\\`).Replace(p)
		ok, _ := path.Match(p, alias)
		if ok && neg {
			return false
		}
		matched = matched || ok
	}
	return matched
}

// ExpandTilde replaces a leading "~" of p with home.
func ExpandTilde(p, home string) string {
	if p == "~" {
		return home
	}
	if strings.HasPrefix(p, "~/") {
		return filepath.Join(home, p[2:])
	}
	return p
}
