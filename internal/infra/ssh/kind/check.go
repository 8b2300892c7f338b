package kind

import (
	"fmt"
	"os"
	"sort"
	"strings"

	"github.com/skygo/skygo/internal/infrakind"
	"gopkg.in/yaml.v3"
)

func check(e infrakind.CheckEnv) infrakind.CheckResult {
	path := e.InHome(".sky", "ssh_node_pools.yaml")
	data, err := os.ReadFile(path)
	if err != nil {
		return infrakind.CheckResult{Reason: fmt.Sprintf("no SSH node pools: %s does not exist. Define pools there (name -> hosts, user, identity_file), then run `sky ssh up`.", e.Pretty(path))}
	}
	var pools map[string]any
	if err := yaml.Unmarshal(data, &pools); err != nil {
		return infrakind.CheckResult{Reason: fmt.Sprintf("%s is not valid YAML (%s); fix it", e.Pretty(path), strings.TrimPrefix(err.Error(), "yaml: "))}
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
	if allowed := e.Strings("ssh.allowed_node_pools"); allowed != nil {
		var keep, missing []string
		for _, a := range allowed {
			if _, ok := valid[a]; ok {
				keep = append(keep, a)
			} else {
				missing = append(missing, a)
			}
		}
		if len(missing) > 0 {
			warnings = append(warnings, fmt.Sprintf("SSH node pools %s in ssh.allowed_node_pools are not defined in %s; ignored", strings.Join(missing, ", "), e.Pretty(path)))
		}
		names = keep
	}
	sort.Strings(warnings)
	if len(names) == 0 {
		return infrakind.CheckResult{Warnings: warnings, Reason: fmt.Sprintf("no usable SSH node pool in %s (each needs a non-empty hosts list, and must be in ssh.allowed_node_pools when that is set)", e.Pretty(path))}
	}
	r := infrakind.CheckResult{Enabled: true, Warnings: warnings, Reason: fmt.Sprintf("%d node pool(s) from %s", len(names), e.Pretty(path))}
	for _, n := range names {
		d := n
		if e.Verbose {
			d = fmt.Sprintf("%s (%d hosts)", n, valid[n])
		}
		r.Details = append(r.Details, d)
	}
	return r
}
