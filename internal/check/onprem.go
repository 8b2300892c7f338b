package check

import (
	"bufio"
	"fmt"
	"os"
	"slices"
	"sort"
	"strings"

	"gopkg.in/yaml.v3"
)

// --- SSH node pools ---

func checkSSH(e *env) Result {
	path := e.inHome(".sky", "ssh_node_pools.yaml")
	data, err := os.ReadFile(path)
	if err != nil {
		return Result{Reason: fmt.Sprintf("no SSH node pools: %s does not exist. Define pools there (name -> hosts, user, identity_file), then run `sky ssh up`.", e.pretty(path))}
	}
	var pools map[string]any
	if err := yaml.Unmarshal(data, &pools); err != nil {
		return Result{Reason: fmt.Sprintf("%s is not valid YAML (%s); fix it", e.pretty(path), strings.TrimPrefix(err.Error(), "yaml: "))}
	}
	var warnings []string
	valid := map[string]int{} // pool -> host count
	for name, v := range pools {
		m, ok := v.(map[string]any)
		if !ok {
			warnings = append(warnings, fmt.Sprintf("pool %q is not a mapping; skipped", name))
			continue
		}
		hosts, _ := m["hosts"].([]any)
		if len(hosts) == 0 {
			warnings = append(warnings, fmt.Sprintf("pool %q has no hosts; skipped", name))
			continue
		}
		valid[name] = len(hosts)
	}
	names := make([]string, 0, len(valid))
	for n := range valid {
		names = append(names, n)
	}
	sort.Strings(names)
	if allowed := e.cfg.GetStringSlice("ssh.allowed_node_pools", nil); allowed != nil {
		var keep, missing []string
		for _, a := range allowed {
			if _, ok := valid[a]; ok {
				keep = append(keep, a)
			} else {
				missing = append(missing, a)
			}
		}
		if len(missing) > 0 {
			warnings = append(warnings, fmt.Sprintf("SSH node pools %s in ssh.allowed_node_pools are not defined in %s; ignored", strings.Join(missing, ", "), e.pretty(path)))
		}
		names = keep
	}
	sort.Strings(warnings)
	if len(names) == 0 {
		return Result{Warnings: warnings, Reason: fmt.Sprintf("no usable SSH node pool in %s (each needs a non-empty hosts list, and must be in ssh.allowed_node_pools when that is set)", e.pretty(path))}
	}
	r := Result{Enabled: true, Warnings: warnings, Reason: fmt.Sprintf("%d node pool(s) from %s", len(names), e.pretty(path))}
	for _, n := range names {
		d := n
		if e.verbose {
			d = fmt.Sprintf("%s (%d hosts)", n, valid[n])
		}
		r.Details = append(r.Details, d)
	}
	return r
}

// --- Slurm ---

// slurmHost is one `Host` entry of ~/.slurm/config (OpenSSH syntax).
type slurmHost struct {
	alias, hostname, user string
}

// parseSSHConfig reads Host blocks. Patterns with wildcards (`Host *`) set
// defaults for other hosts in OpenSSH; they are not clusters, so they are
// only used to fill in missing values, as ssh would.
func parseSSHConfig(path string) ([]slurmHost, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var hosts []*slurmHost
	var current []*slurmHost // the hosts the current block applies to
	var wildcard []map[string]string
	var curWild map[string]string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' {
			continue
		}
		// "Key value", "Key=value" and "Key = value" are all valid.
		idx := strings.IndexAny(line, " \t=")
		if idx < 0 {
			continue
		}
		key := strings.ToLower(line[:idx])
		val := strings.TrimSpace(line[idx:])
		val = strings.TrimSpace(strings.TrimPrefix(val, "="))
		val = strings.Trim(val, `"`)
		if key == "host" {
			current, curWild = nil, nil
			for _, pat := range strings.Fields(val) {
				if strings.ContainsAny(pat, "*?!") {
					if curWild == nil {
						curWild = map[string]string{}
						wildcard = append(wildcard, curWild)
					}
					continue
				}
				h := &slurmHost{alias: pat}
				hosts = append(hosts, h)
				current = append(current, h)
			}
			continue
		}
		if curWild != nil {
			if _, set := curWild[key]; !set {
				curWild[key] = val
			}
		}
		for _, h := range current { // first value wins, as in ssh
			switch {
			case key == "hostname" && h.hostname == "":
				h.hostname = val
			case key == "user" && h.user == "":
				h.user = val
			}
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	out := make([]slurmHost, 0, len(hosts))
	for _, h := range hosts {
		for _, w := range wildcard {
			if h.user == "" {
				h.user = w["user"]
			}
		}
		out = append(out, *h)
	}
	return out, nil
}

func checkSlurm(e *env) Result {
	path := e.inHome(".slurm", "config")
	hosts, err := parseSSHConfig(path)
	if err != nil {
		if os.IsNotExist(err) {
			return Result{Reason: "Slurm configuration file ~/.slurm/config does not exist."}
		}
		return Result{Reason: fmt.Sprintf("cannot read %s: %v", e.pretty(path), unwrapPathErr(err))}
	}
	if len(hosts) == 0 {
		return Result{Reason: fmt.Sprintf("%s has no Host entries; add one per Slurm cluster (Host <name>, HostName, User)", e.pretty(path))}
	}
	byName := map[string]slurmHost{}
	for _, h := range hosts {
		if _, dup := byName[h.alias]; !dup {
			byName[h.alias] = h
		}
	}
	var names, warnings []string
	raw, isSet := e.cfg.Get("slurm.allowed_clusters")
	if isSet && raw != "all" {
		var missing []string
		for _, a := range e.cfg.GetStringSlice("slurm.allowed_clusters", nil) {
			if _, ok := byName[a]; ok {
				names = append(names, a)
			} else {
				missing = append(missing, a)
			}
		}
		if len(missing) > 0 {
			warnings = append(warnings, fmt.Sprintf("Slurm clusters %s in slurm.allowed_clusters are not in %s; ignored", strings.Join(missing, ", "), e.pretty(path)))
		}
		if len(names) == 0 {
			return Result{Warnings: warnings, Reason: fmt.Sprintf("none of slurm.allowed_clusters is defined in %s", e.pretty(path))}
		}
	} else {
		for _, h := range hosts {
			if !slices.Contains(names, h.alias) {
				names = append(names, h.alias)
			}
		}
	}
	for _, n := range names {
		h := byName[n]
		if h.hostname == "" {
			return Result{Details: []string{n}, Warnings: warnings, Reason: "HostName is missing, please check your ~/.slurm/config and try again."}
		}
		if h.user == "" {
			return Result{Details: []string{n}, Warnings: warnings, Reason: "User is missing, please check your ~/.slurm/config and try again."}
		}
	}
	r := Result{Enabled: true, Warnings: warnings, Reason: fmt.Sprintf("%d cluster(s) from %s", len(names), e.pretty(path))}
	for _, n := range names {
		d := n
		if e.verbose {
			h := byName[n]
			d = fmt.Sprintf("%s (%s@%s)", n, h.user, h.hostname)
		}
		r.Details = append(r.Details, d)
	}
	return r
}
