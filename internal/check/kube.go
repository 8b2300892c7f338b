package check

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"
)

// kubeconfig is the part of a kubeconfig file that names contexts; users
// and their tokens are never decoded.
type kubeconfig struct {
	CurrentContext string `yaml:"current-context"`
	Contexts       []struct {
		Name    string `yaml:"name"`
		Context struct {
			Cluster   string `yaml:"cluster"`
			Namespace string `yaml:"namespace"`
		} `yaml:"context"`
	} `yaml:"contexts"`
	Clusters []struct {
		Name string `yaml:"name"`
	} `yaml:"clusters"`
}

// kubeContext is one usable context after merging all kubeconfig files.
type kubeContext struct {
	name, namespace, file string
}

// inClusterTokenPath is where Kubernetes mounts a pod's service-account
// token; with KUBERNETES_SERVICE_HOST it makes the in-cluster context usable.
var inClusterTokenPath = "/var/run/secrets/kubernetes.io/serviceaccount/token"

const inClusterContext = "in-cluster"

// sshPoolContextPrefix marks the contexts SSH node pools generate; they are
// reported under SSH, not Kubernetes.
const sshPoolContextPrefix = "ssh-"

func checkKubernetes(e *env) Result {
	files := filepath.SplitList(os.Getenv("KUBECONFIG"))
	files = slices.DeleteFunc(files, func(s string) bool { return s == "" })
	if len(files) == 0 {
		files = []string{e.inHome(".kube", "config")}
	}

	// Merge like kubectl: the first file defining a context name wins, and
	// the first non-empty current-context wins.
	var contexts []kubeContext
	seen := map[string]bool{}
	current := ""
	var warnings, found []string
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			continue // kubectl ignores missing files in KUBECONFIG too
		}
		found = append(found, e.pretty(f))
		var kc kubeconfig
		if err := yaml.Unmarshal(data, &kc); err != nil {
			return Result{Reason: fmt.Sprintf("kubeconfig %s is not valid YAML (%s); fix or regenerate it", e.pretty(f), strings.TrimPrefix(err.Error(), "yaml: "))}
		}
		if current == "" {
			current = kc.CurrentContext
		}
		clusters := map[string]bool{}
		for _, c := range kc.Clusters {
			clusters[c.Name] = true
		}
		for _, c := range kc.Contexts {
			if c.Name == "" || seen[c.Name] || strings.HasPrefix(c.Name, sshPoolContextPrefix) {
				continue
			}
			seen[c.Name] = true
			if c.Context.Cluster != "" && len(kc.Clusters) > 0 && !clusters[c.Context.Cluster] {
				warnings = append(warnings, fmt.Sprintf("context %q refers to cluster %q, which %s does not define; skipped", c.Name, c.Context.Cluster, e.pretty(f)))
				continue
			}
			contexts = append(contexts, kubeContext{name: c.Name, namespace: c.Context.Namespace, file: e.pretty(f)})
		}
	}
	if os.Getenv("KUBERNETES_SERVICE_HOST") != "" && exists(inClusterTokenPath) && !seen[inClusterContext] {
		contexts = append(contexts, kubeContext{name: inClusterContext, file: "service account"})
	}
	where := strings.Join(found, ", ")
	if len(contexts) == 0 {
		if len(found) == 0 {
			return Result{Reason: fmt.Sprintf("no kubeconfig found at %s. Set KUBECONFIG or create ~/.kube/config (e.g. with your provider's `get-credentials` command).", e.pretty(files[0]))}
		}
		return Result{Warnings: warnings, Reason: fmt.Sprintf("kubeconfig %s defines no usable contexts; add one with `kubectl config set-context`", where)}
	}

	byName := map[string]kubeContext{}
	for _, c := range contexts {
		byName[c.name] = c
	}
	var allowed []kubeContext
	var why string
	raw, isSet := e.cfg.Get("kubernetes.allowed_contexts")
	switch {
	case isSet && raw == "all":
		allowed, why = contexts, "all contexts (allowed_contexts: all)"
	case isSet:
		var missing []string
		for _, name := range e.cfg.GetStringSlice("kubernetes.allowed_contexts", nil) {
			if c, ok := byName[name]; ok {
				allowed = append(allowed, c)
			} else {
				missing = append(missing, name)
			}
		}
		if len(missing) > 0 {
			warnings = append(warnings, fmt.Sprintf("Kubernetes contexts %s specified in \"allowed_contexts\" not found in kubeconfig. Ignoring these contexts.", strings.Join(missing, ", ")))
		}
		why = "contexts in kubernetes.allowed_contexts"
		if len(allowed) == 0 {
			return Result{Warnings: warnings, Reason: fmt.Sprintf("none of kubernetes.allowed_contexts (%s) is in kubeconfig %s; fix the list in ~/.sky/config.yaml or add the contexts", strings.Join(missing, ", "), where)}
		}
	default:
		switch c, ok := byName[current]; {
		case ok:
			allowed, why = []kubeContext{c}, "the current context"
		case byName[inClusterContext].name != "":
			allowed, why = []kubeContext{byName[inClusterContext]}, "the in-cluster service account"
		case current != "":
			return Result{Warnings: warnings, Reason: fmt.Sprintf("current-context %q is not defined in kubeconfig %s; run `kubectl config use-context <name>`", current, where)}
		default:
			return Result{Warnings: warnings, Reason: fmt.Sprintf("kubeconfig %s has no current-context; run `kubectl config use-context <name>` or list contexts in kubernetes.allowed_contexts", where)}
		}
	}

	r := Result{Enabled: true, Warnings: warnings}
	r.Reason = fmt.Sprintf("%d context(s) from %s: %s", len(allowed), where, why)
	for _, c := range allowed {
		d := c.name
		if e.verbose {
			ns, _ := e.cfg.RegionValue("kubernetes", c.name, "namespace")
			nsStr, _ := ns.(string)
			if nsStr == "" {
				nsStr = c.namespace
			}
			if nsStr == "" {
				nsStr = "default"
			}
			d = fmt.Sprintf("%s (namespace %s, from %s)", c.name, nsStr, c.file)
		}
		r.Details = append(r.Details, d)
	}
	return r
}
