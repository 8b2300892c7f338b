package check

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/skygo/skygo/internal/infrakind"
)

// --- GCP ---

// gcpCredFile is the part of a credentials JSON we look at; the key
// material is never decoded.
type gcpCredFile struct {
	Type           string `json:"type"`
	ProjectID      string `json:"project_id"`
	QuotaProjectID string `json:"quota_project_id"`
	ClientEmail    string `json:"client_email"`
}

const gcpFix = "Run `gcloud init` and `gcloud auth application-default login` (or set GOOGLE_APPLICATION_CREDENTIALS to a service-account key file)."

func checkGCP(e *env) Result {
	gcloudDir, _ := infrakind.EnvPath("CLOUDSDK_CONFIG", e.inHome(".config", "gcloud"))
	credPath, fromEnv := infrakind.EnvPath("GOOGLE_APPLICATION_CREDENTIALS", filepath.Join(gcloudDir, "application_default_credentials.json"))
	data, err := os.ReadFile(credPath)
	if err != nil {
		if fromEnv {
			return Result{Reason: fmt.Sprintf("GOOGLE_APPLICATION_CREDENTIALS names %s, which cannot be read (%v); point it at a service-account key file", credPath, infrakind.PathErr(err))}
		}
		return Result{Reason: fmt.Sprintf("GCP credentials not found (no %s). %s", e.pretty(credPath), gcpFix)}
	}
	var cred gcpCredFile
	if err := json.Unmarshal(data, &cred); err != nil || cred.Type == "" {
		return Result{Reason: fmt.Sprintf("%s is not a Google credentials JSON file (no \"type\" field); %s", e.pretty(credPath), gcpFix)}
	}
	source := e.pretty(credPath)
	if fromEnv {
		source = "GOOGLE_APPLICATION_CREDENTIALS (" + credPath + ")"
	}

	// Project, in the order the gcloud tooling resolves it.
	active := readGcloudConfig(gcloudDir)
	project, projectFrom := "", ""
	for _, c := range []struct{ v, from string }{
		{e.cfg.GetString("gcp.project_id", ""), fmt.Sprintf("workspace %q gcp.project_id", e.ws)},
		{os.Getenv("GOOGLE_CLOUD_PROJECT"), "GOOGLE_CLOUD_PROJECT"},
		{os.Getenv("CLOUDSDK_CORE_PROJECT"), "CLOUDSDK_CORE_PROJECT"},
		{active.Get("core", "project"), "gcloud config"},
		{cred.ProjectID, "the credentials file"},
		{cred.QuotaProjectID, "the credentials file (quota project)"},
	} {
		if c.v != "" {
			project, projectFrom = c.v, c.from
			break
		}
	}
	if project == "" {
		return Result{Reason: fmt.Sprintf("GCP credentials found in %s, but no project is set. Run `gcloud config set project <PROJECT_ID>`.", source)}
	}
	r := Result{
		Enabled: true,
		Reason:  fmt.Sprintf("%s credentials from %s", cred.Type, source),
		Details: []string{"project: " + project},
	}
	if e.verbose {
		r.Details[0] += " (from " + projectFrom + ")"
		account := cred.ClientEmail
		if account == "" {
			account = active.Get("core", "account")
		}
		if account != "" {
			r.Details = append(r.Details, "account: "+account)
		}
	}
	return r
}

// readGcloudConfig reads the active gcloud configuration
// (configurations/config_<name>, name from CLOUDSDK_ACTIVE_CONFIG_NAME or
// the active_config file). Missing files give an empty result.
func readGcloudConfig(dir string) infrakind.INI {
	name := os.Getenv("CLOUDSDK_ACTIVE_CONFIG_NAME")
	if name == "" {
		if b, err := os.ReadFile(filepath.Join(dir, "active_config")); err == nil {
			name = strings.TrimSpace(string(b))
		}
	}
	if name == "" {
		name = "default"
	}
	f, _ := infrakind.ReadINI(filepath.Join(dir, "configurations", "config_"+name))
	return f
}

// --- Azure ---

type azureProfile struct {
	Subscriptions []struct {
		ID        string `json:"id"`
		Name      string `json:"name"`
		State     string `json:"state"`
		IsDefault bool   `json:"isDefault"`
		User      struct {
			Name string `json:"name"`
			Type string `json:"type"`
		} `json:"user"`
	} `json:"subscriptions"`
}

func checkAzure(e *env) Result {
	dir, _ := infrakind.EnvPath("AZURE_CONFIG_DIR", e.inHome(".azure"))
	path := filepath.Join(dir, "azureProfile.json")
	data, err := os.ReadFile(path)
	if err != nil {
		return Result{Reason: fmt.Sprintf("Azure CLI is not logged in (no %s). Run `az login`.", e.pretty(path))}
	}
	// The Azure CLI writes this file with a UTF-8 byte order mark.
	data = bytes.TrimPrefix(data, []byte("\xef\xbb\xbf"))
	var prof azureProfile
	if err := json.Unmarshal(data, &prof); err != nil {
		return Result{Reason: fmt.Sprintf("%s is not valid JSON (%v). Run `az login` to rewrite it.", e.pretty(path), err)}
	}
	if len(prof.Subscriptions) == 0 {
		return Result{Reason: fmt.Sprintf("no subscriptions in %s. Run `az login` (and `az account set -s <subscription>`).", e.pretty(path))}
	}
	want := os.Getenv("AZURE_SUBSCRIPTION_ID")
	chosen := -1
	var details []string
	for i, s := range prof.Subscriptions {
		d := s.Name
		if e.verbose {
			d = fmt.Sprintf("%s (%s, %s)", s.Name, s.ID, s.User.Name)
		}
		details = append(details, d)
		if (want != "" && s.ID == want) || (want == "" && s.IsDefault) {
			chosen = i
		}
	}
	if chosen < 0 {
		if want != "" {
			return Result{Details: details, Reason: fmt.Sprintf("AZURE_SUBSCRIPTION_ID names a subscription that is not in %s; run `az account list` to see yours", e.pretty(path))}
		}
		chosen = 0
	}
	s := prof.Subscriptions[chosen]
	if s.State != "" && !strings.EqualFold(s.State, "Enabled") {
		return Result{Details: details, Reason: fmt.Sprintf("subscription %q is %s; pick another with `az account set -s <subscription>`", s.Name, s.State)}
	}
	return Result{Enabled: true, Details: details, Reason: fmt.Sprintf("subscription %q from %s", s.Name, e.pretty(path))}
}

// --- API-key clouds ---

// keyFileCheck handles clouds whose CLI stores one API key in a small
// `key = value` file: enabled when the key is present and non-empty.
func keyFileCheck(e *env, display, path, key, envVar, fix string) Result {
	if envVar != "" && os.Getenv(envVar) != "" {
		return Result{Enabled: true, Reason: "API key from environment variable " + envVar}
	}
	f, err := infrakind.ReadINI(path)
	if err != nil {
		return Result{Reason: fmt.Sprintf("cannot read %s: %v", e.pretty(path), infrakind.PathErr(err))}
	}
	if f == nil {
		return Result{Reason: fmt.Sprintf("%s credentials not found (no %s). %s", display, e.pretty(path), fix)}
	}
	for _, section := range f {
		if section[key] != "" {
			return Result{Enabled: true, Reason: fmt.Sprintf("%s from %s", key, e.pretty(path))}
		}
	}
	return Result{Reason: fmt.Sprintf("%s has no %s entry. %s", e.pretty(path), key, fix)}
}

func checkLambda(e *env) Result {
	return keyFileCheck(e, "Lambda", e.inHome(".lambda_cloud", "lambda_keys"), "api_key", "",
		"Create an API key in the Lambda Cloud dashboard and write `api_key = <key>` to ~/.lambda_cloud/lambda_keys.")
}

func checkRunPod(e *env) Result {
	return keyFileCheck(e, "RunPod", e.inHome(".runpod", "config.toml"), "api_key", "RUNPOD_API_KEY",
		"Run `runpod config` (or write `api_key = \"<key>\"` under [default] in ~/.runpod/config.toml).")
}
