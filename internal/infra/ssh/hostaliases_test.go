package ssh

import (
	"slices"
	"testing"
)

func TestHostAliases(t *testing.T) {
	text := "Host *\n  User all\nHost mycluster other\n  HostName 10.0.0.1\nHost dev-*\nHost !bad mycluster\nMatch host x\nHost last\n"
	c, err := ParseConfig(text, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if got, want := c.HostAliases(), []string{"mycluster", "other", "last"}; !slices.Equal(got, want) {
		t.Errorf("HostAliases = %v, want %v", got, want)
	}
}
