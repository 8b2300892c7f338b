package infrakind

import (
	"slices"
	"testing"
)

func TestCanonical(t *testing.T) {
	for in, want := range map[string]string{
		"kubernetes": "kubernetes", "K8s": "kubernetes", " aws ": "aws", "lambdalabs": "lambda",
		"datacrunch": "verda", "digitalocean": "do", "mars": "", "": "",
	} {
		if got := Canonical(in); got != want {
			t.Errorf("Canonical(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestReportOrder(t *testing.T) {
	var names []string
	for _, k := range All() {
		names = append(names, k.Name)
	}
	// Clouds alphabetically, then the kinds on the user's machines, this
	// machine last: `sky check` prints them so.
	at := func(n string) int { return slices.Index(names, n) }
	if names[0] != "aws" || at("yotta") > at("kubernetes") || at("kubernetes") > at("slurm") || at("slurm") > at("ssh") ||
		names[len(names)-1] != "local" {
		t.Errorf("order %v", names)
	}
	if !slices.IsSorted(Names()) {
		t.Errorf("Names not sorted: %v", Names())
	}
}

func TestRegisterRefusesTakenNames(t *testing.T) {
	for _, k := range []Kind{
		{Name: "AWS"}, // a kind's name
		{Name: "k8s"}, // an alias
		{Name: "newkind", Aliases: []string{"gcp"}}, // an alias that is a kind
		{Name: "other", Aliases: []string{"k8s"}},   // an alias twice
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("Register(%+v) did not panic", k)
				}
			}()
			Register(k)
		}()
	}
	if _, ok := Lookup("newkind"); ok {
		t.Error("a refused kind was registered")
	}
}

func TestDefaults(t *testing.T) {
	k := Kind{Name: "x"}
	if k.Feats().Spot != DefaultFeatures.Spot || k.DefaultSizes() != DefaultSizes {
		t.Errorf("defaults of a kind that declares none: %+v %+v", k.Feats(), k.DefaultSizes())
	}
	if l, _ := Lookup("lambda"); l.DefaultSizes() != (Sizes{30, 4}) {
		t.Errorf("lambda sizes %+v", l.DefaultSizes())
	}
}
