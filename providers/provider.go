// Package providers is how gpulayer creates, finds and deletes the machines
// of fleets that declare a provider block (today: gcp). Static hosts need no
// provider: they exist and are only probed.
//
// A provider's record of a machine (state.Machine), not the machine's own
// claims, says where it is (ADR-0021, "Provider-created workers"): the
// planner takes a created machine's region, zone and network group from it.
package providers

import (
	"context"
	"errors"

	"github.com/gpulayer/gpulayer/config"
	"github.com/gpulayer/gpulayer/reconcile/state"
)

// Provider creates, describes, lists and deletes the machines of fleets.
// Every method is bounded by ctx and returns promptly once it is done.
type Provider interface {
	// Create creates machine name of fleet, labelled with the fleet's name
	// and the state's lineage, waits for the provider's operation to end
	// (checking its error, not only the HTTP status), and returns the
	// provider's record of the machine.
	Create(ctx context.Context, fleet *config.Fleet, name, lineage string) (state.Machine, error)
	// Describe returns the provider's record of machine name; found is
	// false when no such machine exists.
	Describe(ctx context.Context, fleet *config.Fleet, name string) (m state.Machine, found bool, err error)
	// List returns every machine labelled with fleet's name and the
	// lineage, including machines state does not know of.
	List(ctx context.Context, fleet *config.Fleet, lineage string) ([]state.Machine, error)
	// Delete deletes machine name and waits until it is gone; a machine
	// that is already gone is not an error.
	Delete(ctx context.Context, fleet *config.Fleet, name string) error
	// Close releases the provider's connections.
	Close() error
}

// Machine statuses that gpulayer acts on, as providers report them.
const (
	StatusRunning    = "RUNNING"
	StatusTerminated = "TERMINATED" // stopped, or a preempted Spot VM
)

// ErrNoProvider is returned for a fleet without a provider block.
var ErrNoProvider = errors.New("fleet has no provider block")
