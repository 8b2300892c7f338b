package convert

import (
	"regexp"
	"strings"
)

// token is one shell word as written (quotes kept, so it can be emitted
// again unchanged), with its byte span in the command text.
type token struct {
	text       string
	start, end int
}

// value is the word with its quotes removed, for comparing option names
// and reading literal values; expansions are left as written.
func (t token) value() string { return unquote(t.text) }

// operators end a simple command; what follows them is kept verbatim.
var operators = map[string]bool{"|": true, "||": true, "&&": true, ";": true, "&": true, "|&": true}

// isRedirect reports whether a word starts a redirection (>, 2>, &>, <).
func isRedirect(w string) bool {
	w = strings.TrimLeft(w, "0123456789")
	return strings.HasPrefix(w, ">") || strings.HasPrefix(w, "<") || strings.HasPrefix(w, "&>")
}

// splitWords splits a command line into words the way the shell would
// see them: whitespace outside quotes separates, a backslash-newline is
// whitespace, and the operators | || && ; & are words of their own. It
// does not expand anything.
func splitWords(s string) []token {
	var out []token
	i := 0
	n := len(s)
	for i < n {
		c := s[i]
		if c == ' ' || c == '\t' || c == '\n' {
			i++
			continue
		}
		if c == '\\' && i+1 < n && s[i+1] == '\n' {
			i += 2
			continue
		}
		if c == '#' {
			break // a comment runs to the end of the line
		}
		if c == '|' || c == '&' || c == ';' {
			j := i + 1
			if j < n && (s[j] == '|' || s[j] == '&') && c != ';' {
				j++
			}
			if c == '&' && j < n && s[j] == '>' { // &> is a redirection
				j = i
			} else {
				out = append(out, token{s[i:j], i, j})
				i = j
				continue
			}
		}
		start := i
		depth := 0 // $( ... ) nesting, whose spaces do not split
		for i < n {
			c := s[i]
			if depth == 0 && (c == ' ' || c == '\t' || c == '\n' || c == ';' || c == '|' || (c == '&' && !(i+1 < n && s[i+1] == '>') && !(i > start && s[i-1] == '>'))) {
				break
			}
			switch c {
			case '\\':
				i += 2
				continue
			case '\'':
				if j := strings.IndexByte(s[i+1:], '\''); j >= 0 {
					i += j + 2
					continue
				}
				i = n
				continue
			case '"':
				i = skipDouble(s, i)
				continue
			case '$':
				if i+1 < n && s[i+1] == '(' {
					depth++
					i += 2
					continue
				}
			case '(':
				if depth > 0 {
					depth++
				}
			case ')':
				if depth > 0 {
					depth--
				}
			case '`':
				if j := strings.IndexByte(s[i+1:], '`'); j >= 0 {
					i += j + 2
					continue
				}
			}
			i++
		}
		if i > n {
			i = n
		}
		out = append(out, token{s[start:i], start, i})
	}
	return out
}

// skipDouble returns the index just past the double-quoted string at i.
func skipDouble(s string, i int) int {
	i++
	for i < len(s) {
		switch s[i] {
		case '\\':
			i += 2
			continue
		case '"':
			return i + 1
		}
		i++
	}
	return len(s)
}

// unquote removes one level of shell quoting from a word.
func unquote(w string) string {
	var b strings.Builder
	for i := 0; i < len(w); i++ {
		switch c := w[i]; c {
		case '\'':
			j := strings.IndexByte(w[i+1:], '\'')
			if j < 0 {
				b.WriteString(w[i+1:])
				return b.String()
			}
			b.WriteString(w[i+1 : i+1+j])
			i += j + 1
		case '"':
			end := skipDouble(w, i)
			inner := w[i+1 : max(i+1, end-1)]
			inner = strings.NewReplacer(`\"`, `"`, `\\`, `\`, `\$`, `$`).Replace(inner)
			b.WriteString(inner)
			i = end - 1
		case '\\':
			if i+1 < len(w) {
				b.WriteByte(w[i+1])
				i++
			}
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

var assignRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*(\[[^]]*\])?\+?=`)

// isAssignment reports whether a word is a shell variable assignment.
func isAssignment(w string) bool { return assignRE.MatchString(w) }

var shellSafe = regexp.MustCompile(`^[A-Za-z0-9_@%+=:,./-]+$`)

// shellQuote quotes a word for bash when it needs it.
func shellQuote(s string) string {
	if s != "" && shellSafe.MatchString(s) {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
