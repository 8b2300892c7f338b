package infrakind_test

import (
	"slices"
	"testing"

	"github.com/skygo/skygo/internal/infrakind"
	_ "github.com/skygo/skygo/internal/infrakind/all"
)

func TestCanonical(t *testing.T) {
	for in, want := range map[string]string{
		"kubernetes": "kubernetes", "K8s": "kubernetes", " aws ": "aws", "lambdalabs": "lambda",
		"datacrunch": "verda", "digitalocean": "do", "mars": "", "": "",
	} {
		if got := infrakind.Canonical(in); got != want {
			t.Errorf("Canonical(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestReportOrder(t *testing.T) {
	var names []string
	for _, k := range infrakind.All() {
		names = append(names, k.Name)
	}
	// Clouds alphabetically, then the kinds on the user's machines, this
	// machine last: `sky check` prints them so.
	at := func(n string) int { return slices.Index(names, n) }
	if names[0] != "aws" || at("yotta") > at("kubernetes") || at("kubernetes") > at("slurm") || at("slurm") > at("ssh") ||
		names[len(names)-1] != "local" {
		t.Errorf("order %v", names)
	}
	if !slices.IsSorted(infrakind.Names()) {
		t.Errorf("Names not sorted: %v", infrakind.Names())
	}
}

func TestRegisterRefusesTakenNames(t *testing.T) {
	for _, k := range []infrakind.Kind{
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
			infrakind.Register(k)
		}()
	}
	if _, ok := infrakind.Lookup("newkind"); ok {
		t.Error("a refused kind was registered")
	}
}

func TestDefaults(t *testing.T) {
	k := infrakind.Kind{Name: "x"}
	if k.Feats().Spot != infrakind.DefaultFeatures.Spot || k.DefaultSizes() != infrakind.DefaultSizes {
		t.Errorf("defaults of a kind that declares none: %+v %+v", k.Feats(), k.DefaultSizes())
	}
	if l, _ := infrakind.Lookup("lambda"); l.DefaultSizes() != (infrakind.Sizes{30, 4}) {
		t.Errorf("lambda sizes %+v", l.DefaultSizes())
	}
}
