// Package upload is how a task's local files reach the API server: the
// client walks the workdir and local file-mount sources (honouring
// .skyignore, else .gitignore, as SkyPilot does), describes them as a
// manifest of (path, type, size, mode, sha256), sends only the blobs the
// server lacks, in resumable chunks, and the server assembles a tree for
// the request from a per-user content-addressed store. The manifest and
// the ignore rules live here, once, for both sides.
package upload

import (
	"bufio"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

// SkyIgnore and GitIgnore are the ignore files. A .skyignore in a root
// takes precedence: then no .gitignore is read at all.
const (
	SkyIgnore = ".skyignore"
	GitIgnore = ".gitignore"
)

// rule is one pattern line of an ignore file.
type rule struct {
	re      *regexp.Regexp
	negate  bool
	dirOnly bool
}

// ruleSet is the rules of one ignore file; base is the slash path of its
// directory relative to the root ("" for the root), which its patterns
// are relative to.
type ruleSet struct {
	base  string
	rules []rule
}

// Ignore decides which paths under one root are left out. Gitignore mode
// reads the .gitignore of every directory as the walk reaches it (and
// .git/info/exclude), as git and rsync's `:- .gitignore` filter do.
type Ignore struct {
	sets []ruleSet
	git  bool
	root string
}

// NewIgnore reads the ignore rules of a root directory.
func NewIgnore(root string) (*Ignore, error) {
	ig := &Ignore{root: root}
	sky, err := readRules(filepath.Join(root, SkyIgnore), "")
	if err != nil {
		return nil, err
	}
	if sky != nil {
		ig.sets = append(ig.sets, *sky)
		return ig, nil
	}
	ig.git = true
	for _, f := range []string{filepath.Join(root, ".git", "info", "exclude"), filepath.Join(root, GitIgnore)} {
		rs, err := readRules(f, "")
		if err != nil {
			return nil, err
		}
		if rs != nil {
			ig.sets = append(ig.sets, *rs)
		}
	}
	return ig, nil
}

// enterDir loads the .gitignore of a directory below the root (rel is
// its slash path) in gitignore mode.
func (ig *Ignore) enterDir(rel string) error {
	if !ig.git || rel == "" {
		return nil
	}
	rs, err := readRules(filepath.Join(ig.root, filepath.FromSlash(rel), GitIgnore), rel)
	if err != nil || rs == nil {
		return err
	}
	ig.sets = append(ig.sets, *rs)
	return nil
}

// Match says whether rel (slash path relative to the root) is ignored.
// The last matching pattern wins, so a later `!keep.log` re-includes
// what `*.log` left out; the walk does not descend into an ignored
// directory, so (as in git) nothing below it can be re-included.
func (ig *Ignore) Match(rel string, isDir bool) bool {
	ignored := false
	for _, s := range ig.sets {
		sub := rel
		if s.base != "" {
			if !strings.HasPrefix(rel, s.base+"/") {
				continue
			}
			sub = rel[len(s.base)+1:]
		}
		for _, r := range s.rules {
			if r.dirOnly && !isDir {
				continue
			}
			if r.re.MatchString(sub) {
				ignored = !r.negate
			}
		}
	}
	return ignored
}

// readRules parses an ignore file; a missing file is nil, nil.
func readRules(file, base string) (*ruleSet, error) {
	f, err := os.Open(file)
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	rs := &ruleSet{base: base}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if r, ok := parseRule(sc.Text()); ok {
			rs.rules = append(rs.rules, r)
		}
	}
	return rs, sc.Err()
}

// parseRule turns one gitignore line into a rule: "#" comments and blank
// lines are skipped, "!" negates, a trailing "/" matches directories
// only, a "/" elsewhere anchors the pattern to the file's directory
// (otherwise it matches a name at any depth), "**" spans directories.
func parseRule(line string) (rule, bool) {
	line = strings.TrimRight(line, " \t\r")
	if line == "" || strings.HasPrefix(line, "#") {
		return rule{}, false
	}
	var r rule
	if strings.HasPrefix(line, "!") {
		r.negate, line = true, line[1:]
	} else if strings.HasPrefix(line, `\`) {
		line = line[1:] // "\#x" and "\!x" are literal
	}
	if strings.HasSuffix(line, "/") {
		r.dirOnly, line = true, strings.TrimRight(line, "/")
	}
	if line == "" {
		return rule{}, false
	}
	anchored := strings.Contains(line, "/")
	line = strings.TrimPrefix(line, "/")
	if !anchored {
		line = "**/" + line
	}
	re, err := regexp.Compile("^" + globToRegexp(line) + "$")
	if err != nil {
		return rule{}, false
	}
	r.re = re
	return r, true
}

func globToRegexp(g string) string {
	var b strings.Builder
	for i := 0; i < len(g); i++ {
		c := g[i]
		switch {
		case strings.HasPrefix(g[i:], "**/"):
			b.WriteString("(?:.*/)?")
			i += 2
		case strings.HasPrefix(g[i:], "/**") && i+3 == len(g):
			b.WriteString("/.*")
			i += 2
		case strings.HasPrefix(g[i:], "**"):
			b.WriteString(".*")
			i++
		case c == '*':
			b.WriteString("[^/]*")
		case c == '?':
			b.WriteString("[^/]")
		case c == '\\' && i+1 < len(g):
			i++
			b.WriteString(regexp.QuoteMeta(string(g[i])))
		case c == '[':
			j := strings.IndexByte(g[i+1:], ']')
			if j < 0 {
				b.WriteString(`\[`)
				continue
			}
			class := g[i+1 : i+1+j]
			if strings.HasPrefix(class, "!") {
				class = "^" + class[1:]
			}
			b.WriteString("[" + strings.ReplaceAll(class, `\`, `\\`) + "]")
			i += j + 1
		default:
			b.WriteString(regexp.QuoteMeta(string(c)))
		}
	}
	return b.String()
}
