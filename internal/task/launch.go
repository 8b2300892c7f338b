package task

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

var taskNameRE = regexp.MustCompile(`^[a-zA-Z0-9]+(?:[._-]{1,2}[a-zA-Z0-9]+)*$`)

// expandHome turns ~ and ~/x into the user's home directory.
func expandHome(p string) string {
	if p == "~" || strings.HasPrefix(p, "~/") {
		if home, err := os.UserHomeDir(); err == nil {
			return filepath.Join(home, p[1:])
		}
	}
	return p
}

func (t *Task) source() *docSource {
	if t.src == nil {
		return &docSource{idx: newPosIndex()}
	}
	return t.src
}

// ValidateName checks the task name against SkyPilot's pattern; `sky
// validate` applies it too, since a name it passed must not fail the
// launch.
func ValidateName(t *Task) error {
	if err := nameError(t); err != nil {
		return err
	}
	return nil
}

func nameError(t *Task) *Error {
	if t.Name == "" || taskNameRE.MatchString(t.Name) {
		return nil
	}
	return t.source().errAt("name", false, "invalid task name %q: use letters and digits, separated by single or double '.', '_' or '-' (pattern [a-zA-Z0-9]+(?:[._-]{1,2}[a-zA-Z0-9]+)*)", t.Name)
}

// ValidateForLaunch runs the checks SkyPilot makes just before a launch
// (the "validate" phase): the task name pattern, mount paths without a
// trailing slash, and that local workdir and file mount sources exist.
// Catalog checks of resources belong to the optimizer, not here.
func ValidateForLaunch(t *Task) error { return validateForLaunch(t, true) }

// ValidateSubmitted is ValidateForLaunch for a task a client sent to the
// API server as YAML (the SDK): its local paths name the client's files,
// which the server never reads, so their existence is the client's to
// check; they must be absolute instead, since a relative path would mean
// the server's working directory.
func ValidateSubmitted(t *Task) error { return validateForLaunch(t, false) }

// notAbsolute is the error of a submitted task's relative local path.
const notAbsolute = "%s %q is not an absolute path: a task sent to the API server as YAML names its local files by absolute path (the client expands ~ and resolves relative paths before sending)"

// validateForLaunch checks that local paths exist (local) or are
// absolute (!local).
func validateForLaunch(t *Task, local bool) error {
	src := t.source()
	var errs ErrorList
	fail := func(path string, preferKey bool, format string, args ...any) {
		errs = append(errs, src.errAt(path, preferKey, format, args...))
	}
	if err := nameError(t); err != nil {
		errs = append(errs, err)
	}
	if t.NumNodes <= 0 {
		fail("num_nodes", false, "num_nodes should be a positive int. Got: %d", t.NumNodes)
	} else if t.NumNodes > MaxNumNodes {
		fail("num_nodes", false, "num_nodes is out of range: must be at most %d. Got: %d", MaxNumNodes, t.NumNodes)
	}
	for _, k := range t.MissingSecrets {
		fail(joinKey("secrets", k), true, "Secret '%s' is None. Please set a value for it in task YAML or with --secret flag (e.g. --secret %s=<value>).", k, k)
	}
	if w := t.Workdir; w != nil && !w.IsGit() && !local {
		if !filepath.IsAbs(w.Path) {
			fail("workdir", false, notAbsolute, "workdir", w.Path)
		}
	} else if w != nil && !w.IsGit() {
		fi, err := os.Stat(expandHome(w.Path))
		if err != nil || !fi.IsDir() {
			fail("workdir", false, "Workdir must be a valid directory (or a symlink to a directory). %s not found.", w.Path)
		}
	}
	for _, dst := range sortedKeys(t.FileMounts) {
		fm := t.FileMounts[dst]
		path := joinKey("file_mounts", dst)
		if strings.HasSuffix(dst, "/") && dst != "/" {
			fail(path, true, "Mount paths cannot end with a slash (try %q): %q", strings.TrimRight(dst, "/"), dst)
		}
		if fm.Storage == nil {
			src := fm.Source
			switch {
			case strings.HasSuffix(src, "/") && src != "/":
				fail(path, false, "Mount paths cannot end with a slash (try %q): %q", strings.TrimRight(src, "/"), src)
			case IsCloudURI(src), strings.HasPrefix(src, "skypilot:"):
			case !local:
				if !filepath.IsAbs(src) {
					fail(path, false, notAbsolute, "file mount source", src)
				}
			default:
				if _, err := os.Stat(expandHome(src)); err != nil {
					fail(path, false, "File mount source '%s' does not exist locally. To fix: check if it exists, and correct the path.", src)
				}
			}
			continue
		}
		st := fm.Storage
		for i, s := range st.Source {
			if IsCloudURI(s) {
				continue
			}
			sp := path + ".source"
			if st.SourceIsList {
				sp = joinIndex(sp, i)
			}
			if strings.HasSuffix(s, "/") && s != "/" {
				fail(sp, false, "Storage source paths cannot end with a slash (try %q): %q", strings.TrimRight(s, "/"), s)
				continue
			}
			if !local {
				if !filepath.IsAbs(s) {
					fail(sp, false, notAbsolute, "storage source", s)
				}
				continue
			}
			fi, err := os.Stat(expandHome(s))
			switch {
			case err != nil:
				fail(sp, false, "Local source path %q does not exist.", s)
			case !st.SourceIsList && !fi.IsDir() && st.Store != "VOLUME":
				fail(sp, false, "Storage source %q is a file; a single source must be a directory (list files as source: [%s])", s, s)
			}
		}
	}
	return errs.asError()
}

// CheckRunnable refuses what a task asks for that this build cannot give
// it, with the file:line of the YAML: a job that ran without its volume
// mounted would look like a success. (Task volumes, named or ephemeral,
// are checked against the cluster's infrastructure by the backend,
// before provisioning.) `sky validate` does not call it, since the YAML
// itself is valid.
func CheckRunnable(t *Task) error {
	src := t.src
	if src == nil {
		src = &docSource{idx: newPosIndex()}
	}
	var errs ErrorList
	if r := t.Resources; r != nil && len(r.Volumes) > 0 {
		errs = append(errs, src.errAt("resources.volumes", true,
			"volumes are not available in this build: resources.volumes would not be attached; remove it"))
	}
	return errs.asError()
}
