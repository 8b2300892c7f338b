package ec2hosts

import (
	"bytes"
	"fmt"
	"strings"

	"gopkg.in/yaml.v3"
)

// cloudConfig is what the harness takes from an instance's user data, as
// cloud-init would on first boot: the one user who gets SSH keys, its keys,
// and runcmd as one shell script. Other modules (write_files, packages,
// ...) are not applied; the hosts share the machine's /usr and /etc.
type cloudConfig struct {
	user   string
	keys   []string
	runcmd string
}

type ccUser struct {
	Name    string   `yaml:"name"`
	Keys    []string `yaml:"ssh_authorized_keys"`
	KeysAlt []string `yaml:"ssh-authorized-keys"`
}

// parseCloudConfig reads a "#cloud-config" user data document. Keys at the
// top level and users entries "default" go to the default user
// (system_info.default_user.name, else def). One user with keys is
// supported; more is an error, as is no key at all.
func parseCloudConfig(data []byte, def string) (cloudConfig, error) {
	if !bytes.HasPrefix(data, []byte("#cloud-config")) {
		head := string(data)
		if len(head) > 40 {
			head = head[:40]
		}
		return cloudConfig{}, fmt.Errorf("user data is not a #cloud-config document (starts %q); the harness reads only cloud-config", head)
	}
	var doc struct {
		Users      []yaml.Node `yaml:"users"`
		Keys       []string    `yaml:"ssh_authorized_keys"`
		SystemInfo struct {
			DefaultUser struct {
				Name string `yaml:"name"`
			} `yaml:"default_user"`
		} `yaml:"system_info"`
		RunCmd []yaml.Node `yaml:"runcmd"`
	}
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return cloudConfig{}, fmt.Errorf("user data cloud-config: %v", err)
	}
	if doc.SystemInfo.DefaultUser.Name != "" {
		def = doc.SystemInfo.DefaultUser.Name
	}
	keys := map[string][]string{}
	var order []string
	add := func(user string, ks []string) {
		if len(ks) == 0 {
			return
		}
		if _, ok := keys[user]; !ok {
			order = append(order, user)
		}
		keys[user] = append(keys[user], ks...)
	}
	add(def, doc.Keys)
	for _, n := range doc.Users {
		if n.Kind == yaml.ScalarNode {
			continue // "default": the default user, whose keys are the top-level ones
		}
		var u ccUser
		if err := n.Decode(&u); err != nil {
			return cloudConfig{}, fmt.Errorf("user data cloud-config users: %v", err)
		}
		if u.Name == "" {
			return cloudConfig{}, fmt.Errorf("user data cloud-config: a users entry has no name")
		}
		add(u.Name, append(u.Keys, u.KeysAlt...))
	}
	switch len(order) {
	case 0:
		return cloudConfig{}, errNoKeys
	case 1:
	default:
		return cloudConfig{}, fmt.Errorf("user data authorizes keys for users %v; the harness gives a host one user", order)
	}
	var script []string
	for _, n := range doc.RunCmd {
		switch n.Kind {
		case yaml.ScalarNode:
			script = append(script, n.Value)
		case yaml.SequenceNode:
			var argv []string
			if err := n.Decode(&argv); err != nil {
				return cloudConfig{}, fmt.Errorf("user data cloud-config runcmd: %v", err)
			}
			for i, a := range argv {
				argv[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
			}
			script = append(script, strings.Join(argv, " "))
		}
	}
	return cloudConfig{user: order[0], keys: keys[order[0]], runcmd: strings.Join(script, "\n")}, nil
}
