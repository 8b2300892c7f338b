package ssh

import (
	"slices"
	"testing"
)

func TestAliases(t *testing.T) {
	text := "Host *\n  User all\nHost mycluster other\n  HostName 10.0.0.1\nHost dev-*\nHost !bad mycluster\nMatch host x\nHost last\n"
	c, err := ParseConfig(text, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if got, want := c.Aliases(), []string{"mycluster", "other", "last"}; !slices.Equal(got, want) {
		t.Errorf("Aliases = %v, want %v", got, want)
	}
}
