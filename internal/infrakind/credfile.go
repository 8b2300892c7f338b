package infrakind

import (
	"bufio"
	"os"
	"strings"
)

// INI is a parsed INI file (AWS credentials/config, gcloud
// configurations, simple `key = value` key files), which credential
// checks read: section -> key -> value. Keys before any section go to
// section "". Values are never logged.
type INI map[string]map[string]string

// ReadINI parses path; a missing file is (nil, nil). Indented lines
// continue the previous value (AWS uses them for nested s3 settings), so
// they are skipped rather than mistaken for keys.
func ReadINI(path string) (INI, error) {
	f, err := os.Open(path)
	if err != nil {
		if os.IsNotExist(err) {
			return nil, nil
		}
		return nil, err
	}
	defer f.Close()
	out := INI{}
	section := ""
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		raw := sc.Text()
		line := strings.TrimSpace(raw)
		if line == "" || line[0] == '#' || line[0] == ';' {
			continue
		}
		if raw[0] == ' ' || raw[0] == '\t' {
			continue
		}
		if line[0] == '[' && strings.HasSuffix(line, "]") {
			section = strings.TrimSpace(line[1 : len(line)-1])
			if out[section] == nil {
				out[section] = map[string]string{}
			}
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			k, v, ok = strings.Cut(line, ":")
		}
		if !ok {
			continue
		}
		if out[section] == nil {
			out[section] = map[string]string{}
		}
		v = strings.TrimSpace(v)
		v = strings.Trim(v, `"'`)
		out[section][strings.ToLower(strings.TrimSpace(k))] = v
	}
	return out, sc.Err()
}

// Get is the value of key in section, or "".
func (f INI) Get(section, key string) string {
	if f == nil || f[section] == nil {
		return ""
	}
	return f[section][key]
}

// Exists reports whether path is a file.
func Exists(path string) bool {
	st, err := os.Stat(path)
	return err == nil && !st.IsDir()
}

// EnvPath is $name when set, else def.
func EnvPath(name, def string) (path string, fromEnv bool) {
	if v := os.Getenv(name); v != "" {
		return v, true
	}
	return def, false
}

// PathErr is err without the path an *os.PathError repeats: messages name
// the file themselves, as ~/... .
func PathErr(err error) error {
	if pe, ok := err.(*os.PathError); ok {
		return pe.Err
	}
	return err
}
