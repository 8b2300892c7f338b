package check

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"strings"

	"github.com/skygo/skygo/internal/infrakind"
)

// keyCloud is a cloud whose credential is an API key (or a small
// credentials file) written by its CLI or by hand at a fixed place, as
// SkyPilot looks for it. The first file that exists decides; an empty file
// or one without the wanted keys is disabled with a reason.
type keyCloud struct {
	files []string // under the home directory, in the order looked at
	env   []string // any one of these set enables it
	// keys, when set, must all appear in the file: as `key = value` (INI or
	// TOML), `key: value` (YAML) or a JSON object's field.
	keys []string
	fix  string // what to do, shown when disabled
}

func (k keyCloud) check(e *env, display string) Result {
	for _, v := range k.env {
		if os.Getenv(v) != "" {
			return Result{Enabled: true, Reason: "credentials from environment variable " + v}
		}
	}
	for _, rel := range k.files {
		path := e.inHome(strings.Split(rel, "/")...)
		data, err := os.ReadFile(path)
		if os.IsNotExist(err) {
			continue
		}
		if err != nil {
			return Result{Reason: fmt.Sprintf("cannot read %s: %v", e.pretty(path), infrakind.PathErr(err))}
		}
		if len(bytes.TrimSpace(data)) == 0 {
			return Result{Reason: fmt.Sprintf("%s is empty. %s", e.pretty(path), k.fix)}
		}
		if missing := missingKeys(data, k.keys); len(missing) > 0 {
			return Result{Reason: fmt.Sprintf("%s has no %s. %s", e.pretty(path), strings.Join(missing, ", "), k.fix)}
		}
		return Result{Enabled: true, Reason: "credentials from " + e.pretty(path)}
	}
	var where []string
	for _, f := range k.files {
		where = append(where, "~/"+f)
	}
	for _, v := range k.env {
		where = append(where, "$"+v)
	}
	return Result{Reason: fmt.Sprintf("%s credentials not found (no %s). %s", display, strings.Join(where, ", "), k.fix)}
}

// missingKeys are the keys not set in a credentials file of any of the
// formats the clouds' CLIs write.
func missingKeys(data []byte, keys []string) []string {
	if len(keys) == 0 {
		return nil
	}
	var obj map[string]any
	isJSON := json.Unmarshal(data, &obj) == nil
	var missing []string
	for _, key := range keys {
		if isJSON {
			if v, ok := obj[key]; ok && v != nil && v != "" {
				continue
			}
			missing = append(missing, key)
			continue
		}
		found := false
		for _, line := range strings.Split(string(data), "\n") {
			name, value, ok := strings.Cut(line, "=")
			if !ok {
				name, value, ok = strings.Cut(line, ":")
			}
			if ok && strings.EqualFold(strings.Trim(strings.TrimSpace(name), `"'`), key) &&
				strings.Trim(strings.TrimSpace(value), `"'`) != "" {
				found = true
				break
			}
		}
		if !found {
			missing = append(missing, key)
		}
	}
	return missing
}

// keyClouds are SkyPilot's API-key clouds beyond those with checkers of
// their own, by canonical name. The paths are where SkyPilot's
// installation guide (or the cloud's CLI) puts them.
var keyClouds = map[string]keyCloud{
	"cudo": {files: []string{".config/cudo/cudo.yml"},
		fix: "Run `cudoctl init` (API key, project, billing account)."},
	"daytona": {files: []string{".daytona/config.json"}, env: []string{"DAYTONA_API_KEY"},
		fix: "Create an API key in the Daytona dashboard and set DAYTONA_API_KEY."},
	"do": {files: []string{".config/doctl/config.yaml"}, keys: []string{"access-token"},
		fix: "Run `doctl auth init` with a DigitalOcean API token."},
	"fluidstack": {files: []string{".fluidstack/api_key"},
		fix: "Generate an API key in the Fluidstack console and write it to ~/.fluidstack/api_key."},
	"hyperbolic": {files: []string{".hyperbolic/api_key"},
		fix: "Create an API key in the Hyperbolic dashboard and write it to ~/.hyperbolic/api_key."},
	"hyperstack": {files: []string{".hyperstack/api_key"},
		fix: "Create an API key in the Hyperstack console and write it to ~/.hyperstack/api_key."},
	"ibm": {files: []string{".ibm/credentials.yaml"}, keys: []string{"iam_api_key", "resource_group_id"},
		fix: "Write iam_api_key and resource_group_id to ~/.ibm/credentials.yaml."},
	"jarvislabs": {files: []string{".jarvislabs/api_key"}, env: []string{"JARVISLABS_API_KEY"},
		fix: "Create an API key in the JarvisLabs dashboard and set JARVISLABS_API_KEY (or write it to ~/.jarvislabs/api_key)."},
	"lium": {files: []string{".lium/config.ini"}, env: []string{"LIUM_API_KEY"}, keys: []string{"api_key"},
		fix: "Run `lium init` (or set LIUM_API_KEY)."},
	"mithril": {files: []string{".mithril/config.yaml"}, env: []string{"MITHRIL_API_KEY"},
		fix: "Run `ml setup` (Mithril's CLI) or set MITHRIL_API_KEY."},
	"nebius": {files: []string{".nebius/credentials.json", ".nebius/NEBIUS_IAM_TOKEN.txt"},
		fix: "Run `nebius iam get-access-token > ~/.nebius/NEBIUS_IAM_TOKEN.txt`, or put a service-account key in ~/.nebius/credentials.json."},
	"oci": {files: []string{".oci/config"}, keys: []string{"user", "fingerprint", "tenancy", "region", "key_file"},
		fix: "Create an API signing key and ~/.oci/config (user, fingerprint, tenancy, region, key_file) as Oracle's guide says."},
	"paperspace": {files: []string{".paperspace/config.json"},
		fix: "Generate an API key and write {\"api_key\": \"<key>\"} to ~/.paperspace/config.json."},
	"primeintellect": {files: []string{".prime/config.json"}, env: []string{"PRIME_API_KEY"},
		fix: "Run `prime login` (Prime Intellect's CLI)."},
	"scp": {files: []string{".scp/scp_credential"}, keys: []string{"access_key", "secret_key", "project_id"},
		fix: "Write access_key, secret_key and project_id to ~/.scp/scp_credential."},
	"seeweb": {files: []string{".seeweb_cloud/seeweb_keys"}, keys: []string{"api_key"},
		fix: "Create an API token in the Seeweb panel and write `api_key = <token>` under [DEFAULT] in ~/.seeweb_cloud/seeweb_keys."},
	"shadeform": {files: []string{".shadeform/api_key"},
		fix: "Generate an API key on Shadeform's API Key Management page and write it to ~/.shadeform/api_key."},
	"spheron": {files: []string{".spheron/api_key"}, env: []string{"SPHERON_API_KEY"},
		fix: "Create an API key in the Spheron dashboard and write it to ~/.spheron/api_key."},
	"vast": {files: []string{".config/vastai/vast_api_key", ".vast_api_key"},
		fix: "Copy your API key from the Vast console and write it to ~/.config/vastai/vast_api_key."},
	"verda": {files: []string{".verda/config.json"}, keys: []string{"client_id", "client_secret"},
		fix: "Write your Verda client_id and client_secret to ~/.verda/config.json."},
	"vsphere": {files: []string{".vsphere/credential.yaml"}, keys: []string{"vcenters"},
		fix: "Describe your vCenters in ~/.vsphere/credential.yaml."},
	"yotta": {files: []string{".yotta/credentials"},
		fix: "Write your Yotta orgId and apikey to ~/.yotta/credentials."},
}

// keyCheck returns the checker of a keyCloud.
func keyCheck(name, display string) func(e *env) Result {
	k := keyClouds[name]
	return func(e *env) Result { return k.check(e, display) }
}
