package kind

import (
	"fmt"
	"os"
	"sort"
	"strings"

	"github.com/skygo/skygo/internal/infrakind"
)

// awsProfile is what we learned about one profile, without its secrets.
type awsProfile struct {
	name   string
	file   string // where it is defined (the first file that defines it)
	kind   string // "static keys", "SSO", "credential_process", "assume role", "web identity"
	broken string // non-empty: why it cannot work as written
}

const awsFix = "Run `aws configure` (or `aws configure sso`), or set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY."

func check(e infrakind.CheckEnv) infrakind.CheckResult {
	id, secret := os.Getenv("AWS_ACCESS_KEY_ID"), os.Getenv("AWS_SECRET_ACCESS_KEY")
	switch {
	case id != "" && secret != "":
		r := infrakind.CheckResult{Enabled: true, Reason: "credentials from environment variables AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY"}
		if os.Getenv("AWS_SESSION_TOKEN") != "" {
			r.Reason += " (with AWS_SESSION_TOKEN)"
		}
		return r
	case id != "":
		return infrakind.CheckResult{Reason: "AWS_ACCESS_KEY_ID is set but AWS_SECRET_ACCESS_KEY is not; set both, or unset AWS_ACCESS_KEY_ID to use ~/.aws/credentials"}
	case secret != "":
		return infrakind.CheckResult{Reason: "AWS_SECRET_ACCESS_KEY is set but AWS_ACCESS_KEY_ID is not; set both, or unset AWS_SECRET_ACCESS_KEY to use ~/.aws/credentials"}
	}
	if os.Getenv("AWS_ROLE_ARN") != "" && os.Getenv("AWS_WEB_IDENTITY_TOKEN_FILE") != "" {
		tok := os.Getenv("AWS_WEB_IDENTITY_TOKEN_FILE")
		if !infrakind.Exists(tok) {
			return infrakind.CheckResult{Reason: fmt.Sprintf("AWS_WEB_IDENTITY_TOKEN_FILE names %s, which does not exist", tok)}
		}
		return infrakind.CheckResult{Enabled: true, Reason: "web identity role from AWS_ROLE_ARN and AWS_WEB_IDENTITY_TOKEN_FILE"}
	}

	credPath, _ := infrakind.EnvPath("AWS_SHARED_CREDENTIALS_FILE", e.InHome(".aws", "credentials"))
	confPath, _ := infrakind.EnvPath("AWS_CONFIG_FILE", e.InHome(".aws", "config"))
	profiles, warnings, err := awsProfiles(credPath, confPath)
	if err != nil {
		return infrakind.CheckResult{Reason: err.Error()}
	}

	// Which profile the SDK would use: workspace aws.profile, then the env.
	want, from := "default", ""
	for _, src := range []struct{ v, from string }{
		{e.String("aws.profile", ""), fmt.Sprintf("workspace %q aws.profile", e.Workspace)},
		{os.Getenv("AWS_PROFILE"), "AWS_PROFILE"},
		{os.Getenv("AWS_DEFAULT_PROFILE"), "AWS_DEFAULT_PROFILE"},
	} {
		if src.v != "" {
			want, from = src.v, src.from
			break
		}
	}

	names := make([]string, 0, len(profiles))
	for _, p := range profiles {
		names = append(names, p.name)
	}
	sort.Strings(names)
	r := infrakind.CheckResult{Details: names, Warnings: warnings}
	p, ok := profiles[want]
	switch {
	case !ok && len(profiles) == 0 && from == "":
		r.Reason = "AWS credentials are not set: no ~/.aws/credentials or ~/.aws/config profile and no AWS_* variables. " + awsFix
	case !ok && from == "":
		r.Reason = fmt.Sprintf("no [default] profile in %s or %s; set AWS_PROFILE to one of the profiles listed, or %s",
			e.Pretty(credPath), e.Pretty(confPath), awsFix)
	case !ok:
		r.Reason = fmt.Sprintf("AWS profile %q (from %s) is not defined in %s or %s; run `aws configure --profile %s`",
			want, from, e.Pretty(credPath), e.Pretty(confPath), want)
	case p.broken != "":
		r.Reason = fmt.Sprintf("AWS profile %q in %s %s; run `aws configure --profile %s`", want, e.Pretty(p.file), p.broken, want)
	default:
		r.Enabled = true
		r.Reason = fmt.Sprintf("profile %q (%s) from %s", want, p.kind, e.Pretty(p.file))
		if from != "" {
			r.Reason += ", chosen by " + from
		}
	}
	if !e.Verbose {
		r.Warnings = nil
	}
	return r
}

// awsProfiles reads both AWS files. The credentials file names sections
// after the profile; the config file uses [default] and [profile NAME].
// A profile may be split across both files, so keys are pooled per name.
func awsProfiles(credPath, confPath string) (map[string]awsProfile, []string, error) {
	type pooled struct {
		keys map[string]string
		file string
	}
	pool := map[string]*pooled{}
	add := func(path string, cred bool) error {
		f, err := infrakind.ReadINI(path)
		if err != nil {
			return fmt.Errorf("cannot read %s: %v", path, err)
		}
		for section, kv := range f {
			name := section
			if !cred {
				switch {
				case section == "default":
				case strings.HasPrefix(section, "profile "):
					name = strings.TrimSpace(strings.TrimPrefix(section, "profile "))
				default:
					continue // [sso-session x], [services x]: not profiles
				}
			}
			if name == "" {
				continue
			}
			p := pool[name]
			if p == nil {
				p = &pooled{keys: map[string]string{}, file: path}
				pool[name] = p
			}
			for k, v := range kv {
				if _, set := p.keys[k]; !set {
					p.keys[k] = v
				}
			}
		}
		return nil
	}
	if err := add(credPath, true); err != nil {
		return nil, nil, err
	}
	if err := add(confPath, false); err != nil {
		return nil, nil, err
	}
	out := map[string]awsProfile{}
	var warnings []string
	for name, p := range pool {
		ap := awsProfile{name: name, file: p.file}
		k := p.keys
		switch {
		case k["aws_access_key_id"] != "" && k["aws_secret_access_key"] != "":
			ap.kind = "static keys"
		case k["credential_process"] != "":
			ap.kind = "credential_process"
		case k["sso_session"] != "" || k["sso_start_url"] != "":
			ap.kind = "SSO"
		case k["role_arn"] != "" && (k["source_profile"] != "" || k["credential_source"] != ""):
			ap.kind = "assume role"
		case k["role_arn"] != "" && k["web_identity_token_file"] != "":
			ap.kind = "web identity"
		case k["aws_access_key_id"] != "":
			ap.broken = "has aws_access_key_id but no aws_secret_access_key"
		case k["aws_secret_access_key"] != "":
			ap.broken = "has aws_secret_access_key but no aws_access_key_id"
		default:
			// Settings only (region, output): usable only together with
			// credentials from elsewhere, which we found none of.
			ap.broken = "holds no credentials (no keys, SSO, credential_process or role)"
		}
		if ap.broken != "" {
			warnings = append(warnings, fmt.Sprintf("profile %q: %s", name, ap.broken))
		}
		out[name] = ap
	}
	sort.Strings(warnings)
	return out, warnings, nil
}
