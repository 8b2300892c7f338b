package controller_test

import (
	"context"
	"fmt"
	"time"

	"github.com/skygo/skygo/internal/controller"
)

// A reconciler gets only a key, reads what it needs, and says when it wants
// to look again.
func Example() {
	idleMinutes := map[string]int{"dev": 3, "train": 12}
	const autostopAfter = 10

	ctx, cancel := context.WithCancel(context.Background())
	looked := 0
	c := controller.New(controller.ReconcilerFunc(func(ctx context.Context, cluster string) (controller.Result, error) {
		defer func() {
			if looked++; looked == len(idleMinutes) {
				cancel()
			}
		}()
		idle := idleMinutes[cluster]
		if idle >= autostopAfter {
			fmt.Println("stop", cluster)
			return controller.Result{}, nil
		}
		left := time.Duration(autostopAfter-idle) * time.Minute
		fmt.Println("look at", cluster, "again in", left)
		return controller.Result{RequeueAfter: left}, nil
	}), controller.Options{Name: "autostop", Workers: 1})

	c.Enqueue("dev")
	c.Enqueue("train")
	_ = c.Run(ctx) // returns once the reconciles are done and ctx is cancelled
	// Output:
	// look at dev again in 7m0s
	// stop train
}
