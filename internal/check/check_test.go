package check

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/skygo/skygo/internal/config"
	"github.com/skygo/skygo/internal/infrakind"
	_ "github.com/skygo/skygo/internal/infrakind/all" // the kinds with plug-ins bring their checks
	"github.com/skygo/skygo/internal/testutil"
)

// credEnv lists every variable a checker reads; each test starts with all
// of them empty so the developer's own credentials never leak in.
var credEnv = []string{
	"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE", "AWS_DEFAULT_PROFILE",
	"AWS_SHARED_CREDENTIALS_FILE", "AWS_CONFIG_FILE", "AWS_ROLE_ARN", "AWS_WEB_IDENTITY_TOKEN_FILE",
	"GOOGLE_APPLICATION_CREDENTIALS", "GOOGLE_CLOUD_PROJECT", "CLOUDSDK_CORE_PROJECT", "CLOUDSDK_CONFIG",
	"CLOUDSDK_ACTIVE_CONFIG_NAME", "AZURE_CONFIG_DIR", "AZURE_SUBSCRIPTION_ID", "KUBECONFIG",
	"KUBERNETES_SERVICE_HOST", "RUNPOD_API_KEY",
	"DAYTONA_API_KEY", "LIUM_API_KEY", "MITHRIL_API_KEY", "JARVISLABS_API_KEY", "SPHERON_API_KEY", "PRIME_API_KEY",
}

// secret is planted in every fake credentials file; no result may show it.
const secret = "SuperSecretValue123"

func setup(t *testing.T, files map[string]string) string {
	t.Helper()
	for _, k := range credEnv {
		t.Setenv(k, "")
	}
	home := testutil.TempHome(t)
	for rel, body := range files {
		p := filepath.Join(home, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return home
}

func run(t *testing.T, home string, cfg *config.Config, infras ...string) []Result {
	t.Helper()
	res, err := Run(context.Background(), Options{Home: home, Config: cfg, Infras: infras, Verbose: true})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(res)
	if strings.Contains(string(b), secret) {
		t.Fatalf("a secret value leaked into the results: %s", b)
	}
	return res
}

func one(t *testing.T, home string, cfg *config.Config, infra string) Result {
	t.Helper()
	res := run(t, home, cfg, infra)
	if len(res) != 1 {
		t.Fatalf("want one result for %s, got %v", infra, res)
	}
	return res[0]
}

func cfgOf(t *testing.T, m map[string]any) *config.Config { return config.New(m) }

const twoContexts = `apiVersion: v1
kind: Config
current-context: dev
clusters:
- name: c1
  cluster: {server: https://127.0.0.1:6443}
- name: c2
  cluster: {server: https://127.0.0.1:6444}
contexts:
- name: dev
  context: {cluster: c1, user: u, namespace: team}
- name: prod
  context: {cluster: c2, user: u}
- name: ssh-mypool
  context: {cluster: c2, user: u}
users:
- name: u
  user: {token: ` + secret + `}
`

func TestAWSAndKubernetesEnabled(t *testing.T) {
	home := setup(t, map[string]string{
		".aws/credentials": "[default]\naws_access_key_id = AKIAEXAMPLE\naws_secret_access_key = " + secret + "\n",
		".kube/config":     twoContexts,
	})
	res := run(t, home, cfgOf(t, map[string]any{"kubernetes": map[string]any{"allowed_contexts": "all"}}), "aws", "k8s")
	if len(res) != 2 || res[0].Infra != "AWS" || res[1].Infra != "Kubernetes" {
		t.Fatalf("results = %+v", res)
	}
	if !res[0].Enabled || !strings.Contains(res[0].Reason, "~/.aws/credentials") || !reflect.DeepEqual(res[0].Capabilities, []string{"compute", "storage"}) {
		t.Errorf("aws = %+v", res[0])
	}
	k := res[1]
	if !k.Enabled || len(k.Details) != 2 || !strings.HasPrefix(k.Details[0], "dev (namespace team") || !strings.HasPrefix(k.Details[1], "prod (namespace default") {
		t.Errorf("kubernetes = %+v; want both contexts, ssh-* excluded", k)
	}
}

func TestKubernetesContextSelection(t *testing.T) {
	cases := []struct {
		name    string
		allowed any // nil = unset
		enabled bool
		details []string
		reason  string
		warning string
	}{
		{name: "unset uses current context", allowed: nil, enabled: true, details: []string{"dev"}},
		{name: "all", allowed: "all", enabled: true, details: []string{"dev", "prod"}},
		{name: "list filters", allowed: []any{"prod"}, enabled: true, details: []string{"prod"}},
		{name: "unknown names warned", allowed: []any{"prod", "ghost"}, enabled: true, details: []string{"prod"}, warning: "ghost"},
		{name: "nothing left", allowed: []any{"ghost"}, enabled: false, reason: "none of kubernetes.allowed_contexts"},
		{name: "ssh pool contexts are not kubernetes", allowed: []any{"ssh-mypool"}, enabled: false, reason: "none of"},
	}
	home := setup(t, map[string]string{".kube/config": twoContexts})
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m := map[string]any{}
			if tc.allowed != nil {
				m["kubernetes"] = map[string]any{"allowed_contexts": tc.allowed}
			}
			res, err := Run(context.Background(), Options{Home: home, Config: config.New(m), Infras: []string{"kubernetes"}})
			if err != nil {
				t.Fatal(err)
			}
			r := res[0]
			if r.Enabled != tc.enabled || (tc.details != nil && !reflect.DeepEqual(r.Details, tc.details)) {
				t.Fatalf("got %+v", r)
			}
			if !strings.Contains(r.Reason, tc.reason) {
				t.Errorf("reason %q, want %q", r.Reason, tc.reason)
			}
			if tc.warning != "" && !strings.Contains(strings.Join(r.Warnings, "\n"), tc.warning) {
				t.Errorf("warnings %v, want %q", r.Warnings, tc.warning)
			}
		})
	}
}

func TestKubeconfigEnvList(t *testing.T) {
	home := setup(t, map[string]string{
		"a.yaml": "current-context: x\ncontexts:\n- name: x\n  context: {cluster: cx}\nclusters:\n- name: cx\n",
		"b.yaml": "current-context: y\ncontexts:\n- name: y\n  context: {cluster: cy}\n- name: x\n  context: {cluster: other}\nclusters:\n- name: cy\n",
	})
	t.Setenv("KUBECONFIG", filepath.Join(home, "missing.yaml")+string(os.PathListSeparator)+filepath.Join(home, "a.yaml")+string(os.PathListSeparator)+filepath.Join(home, "b.yaml"))
	r := one(t, home, config.New(map[string]any{"kubernetes": map[string]any{"allowed_contexts": "all"}}), "kubernetes")
	if !r.Enabled || len(r.Details) != 2 || !strings.Contains(r.Details[0], "from ~/a.yaml") || !strings.Contains(r.Details[1], "from ~/b.yaml") {
		t.Fatalf("got %+v; want x from the first file, y from the second", r)
	}
	r = one(t, home, nil, "kubernetes")
	if !r.Enabled || len(r.Details) != 1 || !strings.HasPrefix(r.Details[0], "x ") {
		t.Fatalf("current-context must come from the first file that sets it: %+v", r)
	}
}

func TestAWSProfiles(t *testing.T) {
	const creds = "[default]\naws_access_key_id = AKIA\naws_secret_access_key = " + secret + "\n[half]\naws_access_key_id = AKIA\n"
	const conf = "[default]\nregion = us-east-1\n[profile sso]\nsso_session = corp\nsso_account_id = 123\n[sso-session corp]\nsso_start_url = https://x\n[profile proc]\ncredential_process = /bin/get-creds\n[profile role]\nrole_arn = arn:aws:iam::1:role/r\nsource_profile = default\n[profile settings]\nregion = eu-west-1\n"
	cases := []struct {
		name    string
		files   map[string]string
		env     map[string]string
		cfg     map[string]any
		enabled bool
		reason  string
	}{
		{name: "no credentials", enabled: false, reason: "Run `aws configure`"},
		{name: "default static keys", files: map[string]string{".aws/credentials": creds}, enabled: true, reason: `profile "default" (static keys) from ~/.aws/credentials`},
		{name: "env keys", env: map[string]string{"AWS_ACCESS_KEY_ID": "AKIA", "AWS_SECRET_ACCESS_KEY": secret}, enabled: true, reason: "environment variables"},
		{name: "only one env key", env: map[string]string{"AWS_ACCESS_KEY_ID": "AKIA"}, enabled: false, reason: "AWS_SECRET_ACCESS_KEY is not"},
		{name: "sso profile", files: map[string]string{".aws/config": conf}, env: map[string]string{"AWS_PROFILE": "sso"}, enabled: true, reason: "(SSO) from ~/.aws/config, chosen by AWS_PROFILE"},
		{name: "credential_process", files: map[string]string{".aws/config": conf}, env: map[string]string{"AWS_PROFILE": "proc"}, enabled: true, reason: "credential_process"},
		{name: "assume role", files: map[string]string{".aws/config": conf}, env: map[string]string{"AWS_PROFILE": "role"}, enabled: true, reason: "assume role"},
		{name: "settings-only profile", files: map[string]string{".aws/config": conf}, env: map[string]string{"AWS_PROFILE": "settings"}, enabled: false, reason: "holds no credentials"},
		{name: "half profile", files: map[string]string{".aws/credentials": creds}, env: map[string]string{"AWS_PROFILE": "half"}, enabled: false, reason: "no aws_secret_access_key"},
		{name: "missing profile", files: map[string]string{".aws/credentials": creds}, env: map[string]string{"AWS_PROFILE": "nope"}, enabled: false, reason: "aws configure --profile nope"},
		{name: "keys split across files", files: map[string]string{".aws/credentials": creds, ".aws/config": conf}, enabled: true, reason: `profile "default" (static keys)`},
		{name: "workspace profile wins", files: map[string]string{".aws/config": conf}, env: map[string]string{"AWS_PROFILE": "settings"},
			cfg: map[string]any{"workspaces": map[string]any{"default": map[string]any{"aws": map[string]any{"profile": "proc"}}}}, enabled: true, reason: "credential_process"},
		{name: "custom file locations", files: map[string]string{"elsewhere/creds": creds}, env: map[string]string{"AWS_SHARED_CREDENTIALS_FILE": "HOME/elsewhere/creds"}, enabled: true, reason: "~/elsewhere/creds"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			home := setup(t, tc.files)
			for k, v := range tc.env {
				t.Setenv(k, strings.ReplaceAll(v, "HOME", home))
			}
			r := one(t, home, config.New(tc.cfg), "aws")
			if r.Enabled != tc.enabled || !strings.Contains(r.Reason, tc.reason) {
				t.Fatalf("got enabled=%v reason=%q; want %v, %q", r.Enabled, r.Reason, tc.enabled, tc.reason)
			}
		})
	}
}

func TestGCP(t *testing.T) {
	const adc = `{"type": "authorized_user", "client_id": "x", "client_secret": "` + secret + `", "refresh_token": "` + secret + `"}`
	const sa = `{"type": "service_account", "project_id": "sa-proj", "private_key": "` + secret + `", "client_email": "bot@sa-proj.iam.gserviceaccount.com"}`
	cases := []struct {
		name    string
		files   map[string]string
		env     map[string]string
		enabled bool
		reason  string
		detail  string
	}{
		{name: "nothing", enabled: false, reason: "gcloud auth application-default login"},
		{name: "adc without project", files: map[string]string{".config/gcloud/application_default_credentials.json": adc}, enabled: false, reason: "gcloud config set project"},
		{name: "adc with gcloud project", files: map[string]string{
			".config/gcloud/application_default_credentials.json": adc,
			".config/gcloud/active_config":                        "work\n",
			".config/gcloud/configurations/config_work":           "[core]\nproject = my-proj\naccount = me@example.com\n",
		}, enabled: true, reason: "authorized_user credentials from ~/.config/gcloud/application_default_credentials.json", detail: "project: my-proj (from gcloud config)"},
		{name: "service account env", files: map[string]string{"key.json": sa}, env: map[string]string{"GOOGLE_APPLICATION_CREDENTIALS": "HOME/key.json"}, enabled: true, reason: "service_account credentials from GOOGLE_APPLICATION_CREDENTIALS", detail: "project: sa-proj"},
		{name: "env project wins", files: map[string]string{"key.json": sa}, env: map[string]string{"GOOGLE_APPLICATION_CREDENTIALS": "HOME/key.json", "GOOGLE_CLOUD_PROJECT": "env-proj"}, enabled: true, detail: "project: env-proj"},
		{name: "env names missing file", env: map[string]string{"GOOGLE_APPLICATION_CREDENTIALS": "HOME/nope.json"}, enabled: false, reason: "GOOGLE_APPLICATION_CREDENTIALS names"},
		{name: "not a credentials file", files: map[string]string{".config/gcloud/application_default_credentials.json": "{}"}, enabled: false, reason: "not a Google credentials JSON"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			home := setup(t, tc.files)
			for k, v := range tc.env {
				t.Setenv(k, strings.ReplaceAll(v, "HOME", home))
			}
			r := one(t, home, nil, "gcp")
			if r.Enabled != tc.enabled || !strings.Contains(r.Reason, tc.reason) {
				t.Fatalf("got %+v", r)
			}
			if tc.detail != "" && (len(r.Details) == 0 || !strings.HasPrefix(r.Details[0], tc.detail)) {
				t.Errorf("details %v, want first %q", r.Details, tc.detail)
			}
		})
	}
}

func TestAzure(t *testing.T) {
	const prof = "\ufeff" + `{"installationId": "x", "subscriptions": [
	  {"id": "sub-1", "name": "Dev", "state": "Enabled", "isDefault": false, "user": {"name": "me@example.com", "type": "user"}},
	  {"id": "sub-2", "name": "Prod", "state": "Enabled", "isDefault": true, "user": {"name": "me@example.com", "type": "user"}}]}`
	cases := []struct {
		name, body string
		env        string
		enabled    bool
		reason     string
	}{
		{name: "not logged in", enabled: false, reason: "Run `az login`"},
		{name: "default subscription (file has a BOM)", body: prof, enabled: true, reason: `subscription "Prod"`},
		{name: "env picks subscription", body: prof, env: "sub-1", enabled: true, reason: `subscription "Dev"`},
		{name: "env names unknown subscription", body: prof, env: "sub-9", enabled: false, reason: "az account list"},
		{name: "no subscriptions", body: `{"subscriptions": []}`, enabled: false, reason: "no subscriptions"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			files := map[string]string{}
			if tc.body != "" {
				files[".azure/azureProfile.json"] = tc.body
			}
			home := setup(t, files)
			t.Setenv("AZURE_SUBSCRIPTION_ID", tc.env)
			r := one(t, home, nil, "azure")
			if r.Enabled != tc.enabled || !strings.Contains(r.Reason, tc.reason) {
				t.Fatalf("got %+v", r)
			}
		})
	}
}

func TestSSHPools(t *testing.T) {
	const pools = "gpus:\n  user: ubuntu\n  hosts: [10.0.0.1, 10.0.0.2]\ncpus:\n  hosts:\n    - ip: 10.0.1.1\nempty:\n  hosts: []\n"
	cases := []struct {
		name    string
		body    string
		allowed []any
		enabled bool
		details []string
		reason  string
	}{
		{name: "no file", enabled: false, reason: "ssh_node_pools.yaml does not exist"},
		{name: "pools", body: pools, enabled: true, details: []string{"cpus (1 hosts)", "gpus (2 hosts)"}},
		{name: "allowed filters", body: pools, allowed: []any{"gpus", "ghost"}, enabled: true, details: []string{"gpus (2 hosts)"}},
		{name: "invalid yaml", body: "gpus: [\n", enabled: false, reason: "not valid YAML"},
		{name: "no usable pool", body: "empty:\n  hosts: []\n", enabled: false, reason: "no usable SSH node pool"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			files := map[string]string{}
			if tc.body != "" {
				files[".sky/ssh_node_pools.yaml"] = tc.body
			}
			home := setup(t, files)
			m := map[string]any{}
			if tc.allowed != nil {
				m["ssh"] = map[string]any{"allowed_node_pools": tc.allowed}
			}
			r := one(t, home, config.New(m), "ssh")
			if r.Enabled != tc.enabled || !strings.Contains(r.Reason, tc.reason) || (tc.details != nil && !reflect.DeepEqual(r.Details, tc.details)) {
				t.Fatalf("got %+v", r)
			}
		})
	}
}

func TestSlurm(t *testing.T) {
	cases := []struct {
		name    string
		body    string
		allowed any
		enabled bool
		details []string
		reason  string
	}{
		{name: "no file", enabled: false, reason: "Slurm configuration file ~/.slurm/config does not exist."},
		{name: "two clusters", body: "Host *\n  User fallback\n\nHost alpha\n  HostName 10.0.0.1\n  User me\n  Port 2222\nHost beta\n  HostName=10.0.0.2\n", enabled: true,
			details: []string{"alpha (me@10.0.0.1)", "beta (fallback@10.0.0.2)"}},
		{name: "allowed filters", body: "Host alpha\n HostName a\n User u\nHost beta\n HostName b\n User u\n", allowed: []any{"beta"}, enabled: true, details: []string{"beta (u@b)"}},
		{name: "missing hostname", body: "Host alpha\n  User me\n", enabled: false, reason: "HostName is missing, please check your ~/.slurm/config and try again."},
		{name: "missing user", body: "Host alpha\n  HostName a\n", enabled: false, reason: "User is missing, please check your ~/.slurm/config and try again."},
		{name: "only wildcard", body: "Host *\n  User u\n", enabled: false, reason: "no Host entries"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			files := map[string]string{}
			if tc.body != "" {
				files[".slurm/config"] = tc.body
			}
			home := setup(t, files)
			m := map[string]any{}
			if tc.allowed != nil {
				m["slurm"] = map[string]any{"allowed_clusters": tc.allowed}
			}
			r := one(t, home, config.New(m), "slurm")
			if r.Enabled != tc.enabled || !strings.Contains(r.Reason, tc.reason) || (tc.details != nil && !reflect.DeepEqual(r.Details, tc.details)) {
				t.Fatalf("got %+v", r)
			}
		})
	}
}

func TestKeyFileClouds(t *testing.T) {
	cases := []struct {
		name, infra, file, body string
		env                     map[string]string
		enabled                 bool
		reason                  string
	}{
		{name: "lambda missing", infra: "lambda", enabled: false, reason: "~/.lambda_cloud/lambda_keys"},
		{name: "lambda key", infra: "lambda", file: ".lambda_cloud/lambda_keys", body: "api_key = " + secret + "\n", enabled: true, reason: "api_key from ~/.lambda_cloud/lambda_keys"},
		{name: "lambda empty key", infra: "lambda", file: ".lambda_cloud/lambda_keys", body: "api_key =\n", enabled: false, reason: "no api_key entry"},
		{name: "runpod toml", infra: "runpod", file: ".runpod/config.toml", body: "[default]\napi_key = \"" + secret + "\"\n", enabled: true, reason: "~/.runpod/config.toml"},
		{name: "runpod env", infra: "runpod", env: map[string]string{"RUNPOD_API_KEY": secret}, enabled: true, reason: "RUNPOD_API_KEY"},
		{name: "runpod missing", infra: "runpod", enabled: false, reason: "runpod config"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			files := map[string]string{}
			if tc.file != "" {
				files[tc.file] = tc.body
			}
			home := setup(t, files)
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			r := one(t, home, nil, tc.infra)
			if r.Enabled != tc.enabled || !strings.Contains(r.Reason, tc.reason) {
				t.Fatalf("got %+v", r)
			}
		})
	}
}

func TestPolicyAndLocal(t *testing.T) {
	home := setup(t, map[string]string{
		".aws/credentials":          "[default]\naws_access_key_id = A\naws_secret_access_key = " + secret + "\n",
		".lambda_cloud/lambda_keys": "api_key = " + secret + "\n",
	})
	byName := func(res []Result) map[string]Result {
		m := map[string]Result{}
		for _, r := range res {
			m[r.Infra] = r
		}
		return m
	}

	// Nothing configured but local: local is the automatic fallback.
	empty := setup(t, nil)
	res := byName(run(t, empty, nil))
	if len(res) != len(Names()) {
		t.Fatalf("want every infra reported, got %d", len(res))
	}
	if l := res["Local"]; !l.Enabled || !strings.Contains(l.Reason, "enabled automatically") {
		t.Errorf("local = %+v", l)
	}
	if a := res["AWS"]; a.Enabled || !strings.Contains(a.Reason, "aws configure") {
		t.Errorf("aws without creds = %+v", a)
	}

	res = byName(run(t, home, config.New(map[string]any{"allowed_clouds": []any{"AWS", "local"}})))
	if !res["AWS"].Enabled {
		t.Errorf("aws allowed = %+v", res["AWS"])
	}
	if l := res["Lambda"]; l.Enabled || !strings.Contains(l.Reason, "allowed_clouds") {
		t.Errorf("lambda outside allowed_clouds = %+v", l)
	}
	if l := res["Local"]; !l.Enabled || strings.Contains(l.Reason, "automatically") {
		t.Errorf("local with AWS enabled = %+v", l)
	}

	ws := config.New(map[string]any{
		"active_workspace": "team",
		"workspaces": map[string]any{"team": map[string]any{
			"aws": map[string]any{"disabled": true, "capabilities": []any{"compute"}},
		}},
		"gcp": map[string]any{"capabilities": []any{"storage"}},
	})
	res = byName(run(t, home, ws, "aws", "lambda"))
	if a := res["AWS"]; a.Enabled || !strings.Contains(a.Reason, `disabled in workspace "team"`) {
		t.Errorf("aws disabled in workspace = %+v", a)
	}
	all, err := Run(context.Background(), Options{Home: home, Config: ws, Workspace: "default", Infras: []string{"aws"}})
	if err != nil || !all[0].Enabled || !reflect.DeepEqual(all[0].Capabilities, []string{"compute", "storage"}) {
		t.Errorf("aws in default workspace = %+v, %v", all, err)
	}

	got, err := Run(context.Background(), Options{Home: empty, LocalDisabled: true, Infras: []string{"local"}})
	if err != nil || got[0].Enabled {
		t.Errorf("local disabled = %+v, %v", got, err)
	}

	if _, err := Run(context.Background(), Options{Home: home, Infras: []string{"mars"}}); err == nil || !strings.Contains(err.Error(), "known: aws") {
		t.Errorf("unknown infra err = %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Run(ctx, Options{Home: home}); err == nil {
		t.Error("a cancelled context must stop the check")
	}
}

func TestJSON(t *testing.T) {
	res := []Result{
		{Infra: "AWS", Enabled: true, Capabilities: []string{"compute", "storage"}},
		{Infra: "GCP", Enabled: false},
		{Infra: "Kubernetes", Enabled: true, Capabilities: []string{"compute"}},
	}
	b, err := json.Marshal(JSON("default", res))
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"default":{"AWS":["compute","storage"],"Kubernetes":["compute"]}}`; string(b) != want {
		t.Fatalf("got %s, want %s", b, want)
	}
}

func TestLocalWarnsWhenJobsCannotBeSandboxed(t *testing.T) {
	saved := sandboxCheck
	t.Cleanup(func() { sandboxCheck = saved })
	home := t.TempDir()
	sandboxCheck = func() error { return errors.New("operation not permitted") }
	got, err := Run(context.Background(), Options{Home: home, Infras: []string{"local"}})
	if err != nil || len(got) != 1 || !got[0].Enabled || len(got[0].Warnings) != 1 ||
		!strings.Contains(got[0].Warnings[0], "can read the API server's ~/.sky") || !strings.Contains(got[0].Warnings[0], "operation not permitted") {
		t.Errorf("local without a sandbox = %+v, %v; want it enabled with a warning that says why", got, err)
	}
	sandboxCheck = func() error { return nil }
	if got, _ := Run(context.Background(), Options{Home: home, Infras: []string{"local"}}); len(got) != 1 || len(got[0].Warnings) != 0 {
		t.Errorf("local with a sandbox = %+v; want no warning", got)
	}
}

// The API-key clouds: not found, found, and found but incomplete; the
// reason names the file, never its content.
func TestKeyClouds(t *testing.T) {
	empty := setup(t, nil)
	for name := range keyClouds {
		r := one(t, empty, nil, name)
		if r.Enabled || !strings.Contains(r.Reason, "not found") {
			t.Errorf("%s with an empty home: %+v", name, r)
		}
	}
	home := setup(t, map[string]string{
		".hyperbolic/api_key":          secret + "\n",
		".oci/config":                  "[DEFAULT]\nuser=ocid1.user\nfingerprint=aa:bb\ntenancy=ocid1.tenancy\nregion=us-sanjose-1\n",
		".seeweb_cloud/seeweb_keys":    "[DEFAULT]\napi_key = " + secret + "\n",
		".verda/config.json":           `{"client_id": "id", "client_secret": "` + secret + `"}`,
		".config/vastai/vast_api_key":  "",
		".config/doctl/config.yaml":    "access-token: " + secret + "\n",
		".nebius/NEBIUS_IAM_TOKEN.txt": secret,
	})
	for name, want := range map[string]string{
		"hyperbolic": "credentials from ~/.hyperbolic/api_key",
		"seeweb":     "credentials from ~/.seeweb_cloud/seeweb_keys",
		"verda":      "credentials from ~/.verda/config.json",
		"do":         "credentials from ~/.config/doctl/config.yaml",
		"nebius":     "credentials from ~/.nebius/NEBIUS_IAM_TOKEN.txt",
	} {
		if r := one(t, home, nil, name); !r.Enabled || r.Reason != want {
			t.Errorf("%s: %+v, want enabled with %q", name, r, want)
		}
	}
	if r := one(t, home, nil, "oci"); r.Enabled || !strings.Contains(r.Reason, "has no key_file") {
		t.Errorf("oci without key_file: %+v", r)
	}
	if r := one(t, home, nil, "vast"); r.Enabled || !strings.Contains(r.Reason, "is empty") {
		t.Errorf("vast with an empty key file: %+v", r)
	}
	t.Setenv("DAYTONA_API_KEY", secret)
	if r := one(t, empty, nil, "daytona"); !r.Enabled || r.Reason != "credentials from environment variable DAYTONA_API_KEY" {
		t.Errorf("daytona from the environment: %+v", r)
	}
}

// An infrastructure a build leaves out is reported disabled with the tag
// that took it out, even where its credentials are present.
func TestOmittedInfraIsDisabled(t *testing.T) {
	t.Setenv("AWS_ACCESS_KEY_ID", "AKIAEXAMPLE")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "secret")
	home := t.TempDir()
	got, err := Run(context.Background(), Options{Home: home, Infras: []string{"aws"}})
	if err != nil || len(got) != 1 || !got[0].Enabled {
		t.Fatalf("aws with credentials = %+v, %v; want enabled", got, err)
	}
	infrakind.Omit("aws", "skygo_omit_aws")
	t.Cleanup(func() { infrakind.Omit("aws", "") })
	got, err = Run(context.Background(), Options{Home: home, Infras: []string{"aws"}})
	if err != nil || len(got) != 1 || got[0].Enabled || !strings.Contains(got[0].Reason, "-tags skygo_omit_aws") {
		t.Errorf("aws left out of the build = %+v, %v; want disabled, naming the tag", got, err)
	}
}
