// Package controller runs the API server's long-lived loops (cluster status
// refresh, autostop, the managed-jobs and service controllers) as
// reconcilers, after controller-runtime's reconcile contract.
//
// A reconciler is handed only a key, such as a cluster name, never the event
// that caused the call. Each call reads the rows it needs, observes the
// world and takes one step towards the desired state. This is what makes a
// controller level-triggered: events may be coalesced, missed, or replayed
// after a restart, and a periodic resync that enqueues every key repairs
// whatever was missed. For this to work a reconcile must be idempotent and
// safe to kill at any point: it writes each state move as one conditional
// update and gives what it creates deterministic names, so a run that died
// halfway, or a second server that got there first, is found rather than
// duplicated. Nothing the runner holds in memory (queue, timers, backoff) is
// needed for correctness; it only decides how soon a key is looked at.
//
// The runner exists so that one misbehaving key never delays the others:
//
//   - at most one reconcile per key runs at a time, and a key enqueued while
//     it is being reconciled runs once more afterwards, so a burst of events
//     costs one extra reconcile, not one each;
//   - a bounded pool of workers shares the queue, so a slow key holds one
//     worker and the rest carry on; Options.Timeout cancels the context of a
//     reconcile that runs too long;
//   - a failing key backs off exponentially with jitter, on its own, while
//     its neighbours keep their pace; a panic is recovered and treated as an
//     error; Terminal marks an error that no retry can fix;
//   - every outcome is logged (controller, key, duration, error) and counted
//     in Prometheus metrics labelled by controller.
//
// # Use in a server
//
// The server builds its controllers at start-up, registers their metrics on
// its own registry, starts them together and stops them within the shutdown
// bound:
//
//	m, err := controller.NewMetrics(reg) // the server's *prometheus.Registry
//	if err != nil {
//		return err
//	}
//	autostop := controller.New(controller.ReconcilerFunc(s.reconcileAutostop), controller.Options{
//		Name:    "autostop",
//		Workers: 8,
//		Logger:  s.log,
//		Metrics: m,
//		Timeout: 2 * time.Minute,
//		// Level-triggered: every 10 s every cluster is looked at again,
//		// whatever events were missed.
//		Resync:      s.clusterNames,
//		ResyncEvery: 10 * time.Second,
//	})
//	s.controllers = controller.NewRunner(autostop, statusRefresh)
//	if err := s.controllers.Start(ctx); err != nil {
//		return err
//	}
//
//	// A handler that changed a cluster asks for a look now instead of at the
//	// next resync:
//	autostop.Enqueue(clusterName)
//
//	// Shutdown: cancel every reconcile and wait, within the bound, until
//	// all have returned.
//	err := s.controllers.Stop(shutdownCtx)
//
// The reconciler computes its own next look: an autostop reconcile that finds
// a cluster idle for 3 of its 10 minutes returns Result{RequeueAfter: 7 *
// time.Minute}, and after a restart the first resync finds the cluster again.
package controller
