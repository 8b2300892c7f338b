package kind

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/skygo/skygo/internal/infrakind"
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

// KubeContext is one usable context after merging all kubeconfig files.
type KubeContext struct {
	Name string
	// Namespace is the context's own namespace ("" when it names none).
	Namespace string
	// File is where it was found (~-relative), or "service account".
	File string
}

// InClusterContext names the pod's own service account as a context.
const InClusterContext = inClusterContext

// KubeContexts is what the kubeconfig files and kubernetes.allowed_contexts
// allow: the contexts SkyGo may launch on, in order.
type KubeContexts struct {
	Allowed  []KubeContext
	Why      string // how they were chosen: "the current context", ...
	Where    string // the kubeconfig files read, comma-separated
	Warnings []string
	// Reason is set when no context may be used: what is wrong and what
	// to do.
	Reason string
}

// AllowedKubeContexts reads the kubeconfig files ($KUBECONFIG, else
// ~/.kube/config under home) and applies kubernetes.allowed_contexts
// (read with lookup, which may be nil) as SkyPilot does: the list
// (contexts missing from kubeconfig are warned about), "all", or else the
// current context (or the in-cluster service account). Both `sky check`
// and the Kubernetes infrastructure use it, so they never disagree about
// which contexts exist.
func AllowedKubeContexts(home string, lookup func(keys ...string) (any, bool)) KubeContexts {
	return allowedKubeContexts(infrakind.CheckEnv{Home: home, Lookup: lookup})
}

// KubeconfigFiles are the kubeconfig files in merge order: $KUBECONFIG's
// list, else ~/.kube/config under home.
func KubeconfigFiles(home string) []string {
	files := filepath.SplitList(os.Getenv("KUBECONFIG"))
	files = slices.DeleteFunc(files, func(s string) bool { return s == "" })
	if len(files) == 0 {
		files = []string{filepath.Join(home, ".kube", "config")}
	}
	return files
}

// KubeNamespace is the namespace SkyGo uses in a context:
// kubernetes.namespace (per context, then global; read with lookup, which
// may be nil), else the context's own, else "default".
func KubeNamespace(lookup func(keys ...string) (any, bool), c KubeContext) string {
	if lookup != nil {
		ns, ok := lookup(Name, regionSection, c.Name, "namespace")
		if !ok {
			ns, _ = lookup(Name, "namespace")
		}
		if s, ok := ns.(string); ok && s != "" {
			return s
		}
	}
	if c.Namespace != "" {
		return c.Namespace
	}
	if c.Name == inClusterContext {
		if ns := os.Getenv("SKYPILOT_IN_CLUSTER_NAMESPACE"); ns != "" {
			return ns
		}
		if b, err := os.ReadFile(filepath.Join(filepath.Dir(inClusterTokenPath), "namespace")); err == nil && strings.TrimSpace(string(b)) != "" {
			return strings.TrimSpace(string(b))
		}
	}
	return "default"
}

// inClusterTokenPath is where Kubernetes mounts a pod's service-account
// token; with KUBERNETES_SERVICE_HOST it makes the in-cluster context usable.
var inClusterTokenPath = "/var/run/secrets/kubernetes.io/serviceaccount/token"

const inClusterContext = "in-cluster"

// sshPoolContextPrefix marks the contexts SSH node pools generate; they are
// reported under SSH, not Kubernetes.
const sshPoolContextPrefix = "ssh-"

func check(e infrakind.CheckEnv) infrakind.CheckResult {
	kc := allowedKubeContexts(e)
	if kc.Reason != "" {
		return infrakind.CheckResult{Warnings: kc.Warnings, Reason: kc.Reason}
	}
	r := infrakind.CheckResult{Enabled: true, Warnings: kc.Warnings}
	r.Reason = fmt.Sprintf("%d context(s) from %s: %s", len(kc.Allowed), kc.Where, kc.Why)
	for _, c := range kc.Allowed {
		d := c.Name
		if e.Verbose {
			d = fmt.Sprintf("%s (namespace %s, from %s)", c.Name, KubeNamespace(e.Lookup, c), c.File)
		}
		r.Details = append(r.Details, d)
	}
	return r
}

func allowedKubeContexts(e infrakind.CheckEnv) KubeContexts {
	files := KubeconfigFiles(e.Home)

	// Merge like kubectl: the first file defining a context name wins, and
	// the first non-empty current-context wins.
	var contexts []KubeContext
	seen := map[string]bool{}
	current := ""
	var warnings, found []string
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			continue // kubectl ignores missing files in KUBECONFIG too
		}
		found = append(found, e.Pretty(f))
		var kc kubeconfig
		if err := yaml.Unmarshal(data, &kc); err != nil {
			return KubeContexts{Reason: fmt.Sprintf("kubeconfig %s is not valid YAML (%s); fix or regenerate it", e.Pretty(f), strings.TrimPrefix(err.Error(), "yaml: "))}
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
				warnings = append(warnings, fmt.Sprintf("context %q refers to cluster %q, which %s does not define; skipped", c.Name, c.Context.Cluster, e.Pretty(f)))
				continue
			}
			contexts = append(contexts, KubeContext{Name: c.Name, Namespace: c.Context.Namespace, File: e.Pretty(f)})
		}
	}
	if os.Getenv("KUBERNETES_SERVICE_HOST") != "" && infrakind.Exists(inClusterTokenPath) && !seen[inClusterContext] {
		contexts = append(contexts, KubeContext{Name: inClusterContext, File: "service account"})
	}
	where := strings.Join(found, ", ")
	if len(contexts) == 0 {
		if len(found) == 0 {
			return KubeContexts{Reason: fmt.Sprintf("no kubeconfig found at %s. Set KUBECONFIG or create ~/.kube/config (e.g. with your provider's `get-credentials` command).", e.Pretty(files[0]))}
		}
		return KubeContexts{Warnings: warnings, Reason: fmt.Sprintf("kubeconfig %s defines no usable contexts; add one with `kubectl config set-context`", where)}
	}

	byName := map[string]KubeContext{}
	for _, c := range contexts {
		byName[c.Name] = c
	}
	var allowed []KubeContext
	var why string
	raw, isSet := e.Setting("kubernetes.allowed_contexts")
	switch {
	case isSet && raw == "all":
		allowed, why = contexts, "all contexts (allowed_contexts: all)"
	case isSet:
		var missing []string
		for _, name := range e.Strings("kubernetes.allowed_contexts") {
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
			return KubeContexts{Warnings: warnings, Reason: fmt.Sprintf("none of kubernetes.allowed_contexts (%s) is in kubeconfig %s; fix the list in ~/.sky/config.yaml or add the contexts", strings.Join(missing, ", "), where)}
		}
	default:
		switch c, ok := byName[current]; {
		case ok:
			allowed, why = []KubeContext{c}, "the current context"
		case byName[inClusterContext].Name != "":
			allowed, why = []KubeContext{byName[inClusterContext]}, "the in-cluster service account"
		case current != "":
			return KubeContexts{Warnings: warnings, Reason: fmt.Sprintf("current-context %q is not defined in kubeconfig %s; run `kubectl config use-context <name>`", current, where)}
		default:
			return KubeContexts{Warnings: warnings, Reason: fmt.Sprintf("kubeconfig %s has no current-context; run `kubectl config use-context <name>` or list contexts in kubernetes.allowed_contexts", where)}
		}
	}

	return KubeContexts{Allowed: allowed, Why: why, Where: where, Warnings: warnings}
}
