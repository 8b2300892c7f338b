package kind

import (
	"bufio"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/skygo/skygo/internal/infrakind"
)

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

func check(e infrakind.CheckEnv) infrakind.CheckResult {
	path := e.InHome(".slurm", "config")
	hosts, err := parseSSHConfig(path)
	if err != nil {
		if os.IsNotExist(err) {
			return infrakind.CheckResult{Reason: "Slurm configuration file ~/.slurm/config does not exist."}
		}
		return infrakind.CheckResult{Reason: fmt.Sprintf("cannot read %s: %v", e.Pretty(path), infrakind.PathErr(err))}
	}
	if len(hosts) == 0 {
		return infrakind.CheckResult{Reason: fmt.Sprintf("%s has no Host entries; add one per Slurm cluster (Host <name>, HostName, User)", e.Pretty(path))}
	}
	byName := map[string]slurmHost{}
	for _, h := range hosts {
		if _, dup := byName[h.alias]; !dup {
			byName[h.alias] = h
		}
	}
	var names, warnings []string
	raw, isSet := e.Setting("slurm.allowed_clusters")
	if isSet && raw != "all" {
		var missing []string
		for _, a := range e.Strings("slurm.allowed_clusters") {
			if _, ok := byName[a]; ok {
				names = append(names, a)
			} else {
				missing = append(missing, a)
			}
		}
		if len(missing) > 0 {
			warnings = append(warnings, fmt.Sprintf("Slurm clusters %s in slurm.allowed_clusters are not in %s; ignored", strings.Join(missing, ", "), e.Pretty(path)))
		}
		if len(names) == 0 {
			return infrakind.CheckResult{Warnings: warnings, Reason: fmt.Sprintf("none of slurm.allowed_clusters is defined in %s", e.Pretty(path))}
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
			return infrakind.CheckResult{Details: []string{n}, Warnings: warnings, Reason: "HostName is missing, please check your ~/.slurm/config and try again."}
		}
		if h.user == "" {
			return infrakind.CheckResult{Details: []string{n}, Warnings: warnings, Reason: "User is missing, please check your ~/.slurm/config and try again."}
		}
	}
	r := infrakind.CheckResult{Enabled: true, Warnings: warnings, Reason: fmt.Sprintf("%d cluster(s) from %s", len(names), e.Pretty(path))}
	for _, n := range names {
		d := n
		if e.Verbose {
			h := byName[n]
			d = fmt.Sprintf("%s (%s@%s)", n, h.user, h.hostname)
		}
		r.Details = append(r.Details, d)
	}
	return r
}
