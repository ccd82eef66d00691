// Package reconcile compares what the configuration declares with what
// state records and what the machines report, and says what must change:
// a Plan, with the reason for every change (docs/plan.md).
//
// MakePlan is pure: it takes the configuration, the state and the facts
// and returns data, so the human view, the JSON and the markdown are
// renderings of one value and never disagree. Refresh (reconcile/probe),
// state storage (reconcile/state) and apply sit around it and do the I/O.
package reconcile
